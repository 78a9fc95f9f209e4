/* fmarks.h - which blocks of shared files are dirty at a node, known to
 * the next node of the cluster file, its shadow: while the node is down,
 * a mount reads its clean blocks from the backing (the shadow holds no
 * mark for them) and fails its dirty ones with EIO (the only copy of the
 * newest bytes is in the down node's NVRAM), never stale bytes
 * (docs/nvcachefs-cluster.md, "A node down").
 *
 * Two sides, both socket-free (cluster/fcache_shadow.c sends the
 * FT_FILE_MARK messages, cluster/fcache_replica.c serves them; tests drive
 * them directly):
 *  - struct fmark_sent, at the owner: the blocks it has told its shadow
 *    are dirty, in stripes, each with a lock. A writer of a block holds
 *    its stripe's lock from the look-up through the store write, and a
 *    block that is not in the set gets a SET to the shadow (with a new
 *    sequence number) and goes in before the write is made, so the
 *    shadow has the mark before the block is dirty. A write-back first
 *    takes the sequence number (fmark_next_seq's last), then takes the
 *    object's blocks out of the set, each under its stripe's lock, then
 *    reads, writes and cleans the dirty ones, then CLEARs those of the
 *    taken blocks that are not dirty then "if not marked after" that
 *    number: a writer after the take-out sends a newer SET, which the
 *    CLEAR leaves. A SET may tell blocks ahead of the one written (a
 *    stream's next ones), each under its own stripe lock: a block told
 *    and never written is cleared the same way;
 *  - struct fmark_tab, at the shadow: marks per owner node index and
 *    (object, block), each with the highest sequence number set, and per
 *    owner whether its list is whole (synced). An owner sends its whole
 *    list at its start and whenever its shadow may have lost it (the
 *    shadow restarted: a PING answers not synced; a SET failed):
 *    SYNC_BEGIN forgets the owner's marks and makes it not synced, SETs
 *    follow, SYNC_END makes it synced. A query for a not-synced owner
 *    answers UNKNOWN.
 *
 * Invariant: for every block dirty at an owner, its shadow holds a mark
 * for it or holds the owner as not synced; the one gap is a SET that
 * failed while the shadow stayed up (a partition), until the owner's
 * next resync (within a second or two).
 *
 * With replicas=2 the shadow also keeps a copy of each dirty block
 * (FRAME_MARK_REPLICA, kept by cluster/fcache_replica.c, not here): a mark says
 * the block is dirty, the copy holds its bytes.
 *
 * Bounds: a shadow keeps at most FMARK_MAX marks (a full table makes
 * the sending owner not synced: its blocks read as UNKNOWN, EIO).
 *
 * Threads: every function may be called from any thread. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/frame.h"

#define FMARK_MAX (1u << 22)
/* The pseudo block that marks a file's size at its home: the home's size
 * of the file may be ahead of the backing file's (set before the size
 * changes, cleared when the home's write-back has extended the backing
 * to it). No file reaches it: 2^48 blocks of 64 KiB are 2^64 bytes. */
#define FMARK_SIZE_BLK (((uint64_t)1 << 48) - 1)
#define FMARK_OWNERS 256   /* node indexes 0..255 (CONFIG_MAX_NODES) */

/* ---- the owner's side ---- */
struct fmark_sent;

int fmark_sent_new(struct fmark_sent **out);
void fmark_sent_free(struct fmark_sent *s);
/* The stripe lock of (obj, blk). */
void fmark_sent_lock(struct fmark_sent *s, uint64_t obj, uint64_t blk);
void fmark_sent_unlock(struct fmark_sent *s, uint64_t obj, uint64_t blk);
/* The stripe lock of (obj, blk) if it is free now and is not the
 * stripe of (obj, held), whose lock the caller holds: true when taken. */
bool fmark_sent_trylock(struct fmark_sent *s, uint64_t obj, uint64_t blk,
			uint64_t held);
/* Under the stripe's lock: is it in the set; put it in (0 or -ENOMEM);
 * take it out. */
bool fmark_sent_has(struct fmark_sent *s, uint64_t obj, uint64_t blk);
int fmark_sent_add(struct fmark_sent *s, uint64_t obj, uint64_t blk);
void fmark_sent_remove(struct fmark_sent *s, uint64_t obj, uint64_t blk);
/* Every block of obj out of the set, each under its stripe's lock (a
 * write-back's take-out); *out (malloc'ed, free it) gets them. Returns
 * how many (0: *out NULL). */
size_t fmark_sent_take_obj(struct fmark_sent *s, uint64_t obj, uint64_t **out);
/* Every block of obj out (the object was dropped); takes the locks. */
void fmark_sent_drop_obj(struct fmark_sent *s, uint64_t obj);
/* Every (obj, blk) in the set, each stripe listed under its lock; fn
 * must not call back into s. Returns how many. */
typedef void (*fmark_each_fn)(void *arg, uint64_t obj, uint64_t blk);
size_t fmark_sent_each(struct fmark_sent *s, fmark_each_fn fn, void *arg);
/* A new sequence number (rising; the first is the clock's, so numbers
 * rise across restarts too), and the last one given. */
uint64_t fmark_next_seq(struct fmark_sent *s);
uint64_t fmark_last_seq(struct fmark_sent *s);
size_t fmark_sent_count(struct fmark_sent *s);

/* ---- the shadow's side ---- */
struct fmark_tab;

int fmark_tab_new(struct fmark_tab **out);
void fmark_tab_free(struct fmark_tab *t);
/* One FT_FILE_MARK request (f->off: the owner's index; f->size: the
 * sequence number; a SET's or CLEAR's block list in payload, f->len
 * bytes, 8 each in the host's order; a SET without one marks f->blk):
 * 0 and *reply_flags (PING: FRAME_MARK_SYNCED or not), or -EPROTO (an
 * owner index or flags out of range), -ENOSPC (the table is full: the
 * owner is made not synced). A REPLICA (FRAME_MARK_REPLICA alone) changes
 * no mark: the caller keeps its bytes (cluster/fcache_replica.c); it gets 0 and
 * the SYNCED flag. */
int fmark_tab_apply(struct fmark_tab *t, const struct frame_fop *f,
		    const uint8_t *payload, uint32_t *reply_flags);
/* FRAME_SHADOW_DIRTY, FRAME_SHADOW_UNKNOWN, or 0 (clean here). */
/* Whether owner's (obj, blk) is marked, synced or not: a CLEAR that
 * left a newer mark leaves the block's replica too. */
bool fmark_tab_has(struct fmark_tab *t, uint32_t owner, uint64_t obj,
		   uint64_t blk);
/* The sequence number of owner's mark of (obj, blk), 0: none (a shadow
 * that wrote a lost owner's replica back clears the mark if not marked
 * after it, with a CLEAR of its own). */
uint64_t fmark_tab_seq(struct fmark_tab *t, uint32_t owner, uint64_t obj,
		       uint64_t blk);
uint32_t fmark_tab_query(struct fmark_tab *t, uint32_t owner, uint64_t obj,
			 uint64_t blk);
size_t fmark_tab_count(struct fmark_tab *t);
/* The highest sequence number of owner's marks (0: none), and whether
 * its list is whole (synced). */
uint64_t fmark_tab_top_seq(struct fmark_tab *t, uint32_t owner, bool *synced);
/* Every mark of owner with a sequence number of at most max_seq out (a
 * shadow that wrote back a lost owner's copies: what stays marked then
 * has no copy, told ahead and never written); how many. */
size_t fmark_tab_clear_owner(struct fmark_tab *t, uint32_t owner, uint64_t max_seq);
