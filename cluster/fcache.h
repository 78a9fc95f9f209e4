/* fcache.h - a node's file cache manager: the blocks of shared files this
 * node owns, in an NVRAM block store (pmem/bstore.h), served to every
 * node's nvcachefs over the FT_FILE_* messages (docs/nvcachefs-cluster.md).
 *
 * Objects are keyed by their cluster-wide id (a hash of the backing file's
 * handle); the store's record of each keeps the handle, so that this node
 * opens the backing file itself (open_by_handle_at) to fetch nothing and
 * to write its own dirty blocks back. The home of a file (the owner of its
 * block 0) also keeps its size there, its open count and its doomed flag.
 *
 * Rules:
 *  - nothing from the wire is trusted: every range is checked against the
 *    block size, every object id against the table, before use;
 *  - a write is in the store, persistent, before its reply; bytes of the
 *    block other than the write's come from the backing file (the writer
 *    sends them when asked: NOT_FOUND with a gen token; none when the
 *    owner, looking after taking the token, finds the backing file ending
 *    at or before the block), so two writers of different bytes of one
 *    block both survive;
 *  - a doomed or dropped object writes nothing to the backing;
 *  - the backing directory is fixed by the first mount that attaches and
 *    remembered beside the NVRAM file (PATH.backing): after a restart the
 *    daemon writes back what it holds without waiting for a mount.
 *
 * Threads: fcache_serve may be called from any number of connection
 * threads; one write-back thread of its own. Socket-free: tests and
 * fuzzers drive fcache_serve with decoded frames. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "cluster/frame.h"

#define FCACHE_BLOCK (64 * 1024)

/* Striping. The mounts' stripe_unit is cluster-wide: the first ATTACH
 * fixes a node's (FileOp blk: bytes, 0 for auto), PATH.backing keeps it,
 * an ATTACH with another is refused. Each file's unit, in blocks, is
 * fixed by the first OPEN that offers one (off) where its record is made
 * and kept in the record; OPEN and GETATTR replies carry it (off): at
 * the home, every mount learns the file's unit from there (with auto:
 * one equal part per node of the size its first OPEN saw). */
#define FCACHE_UNIT_MAX (1u << 24)   /* blocks: 1 TiB */
/* With auto, the home also writes a file's unit (bytes, decimal) on its
 * backing file when it makes the record, for mounts that must open the
 * file while its home is down. */
#define FCACHE_UNIT_XATTR "user.nvcache.stripe_unit"

struct fcache;

struct fcache_opts {
	const char *path;      /* NVRAM file, created if missing */
	uint64_t size;         /* bytes of file data */
	uint64_t digest;       /* the cluster file's (config_digest) */
	uint32_t self;         /* this node's id, for messages */
};

/* Open (recover) or create the store; start the write-back thread. 0 or
 * -errno (logged). */
int fcache_open(struct fcache **out, const struct fcache_opts *o);
/* Stop the write-back thread and wait for it: from then on nothing here
 * calls the shadow's or the peers' functions on its own (a request being
 * served still may), so their owner (the node) may go once its own
 * threads are done. Requests are still served, but one waiting for
 * space (back-pressure) ends with -ESHUTDOWN. Idempotent. */
void fcache_stop(struct fcache *fc);
/* fcache_stop, then close the store. No request may be in progress. */
void fcache_close(struct fcache *fc);

/* Serve one decoded FT_FILE_* request q with its payload: fills r (a reply
 * already initialised from q: type, id) and returns the reply's payload
 * (in buf, FRAME_FILE_MAX_BLOCK bytes) or NULL. Returns 0 or the -errno
 * the reply's status stands for; r->text says why for a refusal.
 * -ESHUTDOWN: not served, the node stops (fcache_stop): no reply, the
 * connection ends, and the sender asks again once the node is back. */
int fcache_serve(struct fcache *fc, const struct frame_hdr *q,
		 const uint8_t *payload, struct frame_hdr *r, uint8_t *buf,
		 const void **out);

/* A FILE_READ answered from where its bytes are: fcache_serve_read fills
 * r as fcache_serve does and rd->iov with the reply's payload (the
 * block's bytes in NVRAM, then zeros past its valid length), and keeps
 * the block pinned until fcache_read_done, which the caller calls once
 * the reply is sent (also after an error: it is a no-op then). A pinned
 * block's bytes do not change (bstore writes every change into a new
 * block and reuses none that is pinned), so the reply and its CRC see
 * the same bytes; a pinned block is not evicted meanwhile. The file
 * cache's store charges no emulated NVRAM cost, so nothing is skipped.
 * Same threads as fcache_serve. */
struct fcache_read {
	struct iovec iov[2];
	unsigned niov;
	uint32_t token;
	bool pinned;
};
int fcache_serve_read(struct fcache *fc, const struct frame_hdr *q,
		      struct frame_hdr *r, struct fcache_read *rd);
void fcache_read_done(struct fcache *fc, struct fcache_read *rd);

/* What names a file or directory the same on every node of a shared
 * file system: its file handle (name_to_handle_at) and inode number (not
 * its st_dev, which each machine numbers its own way). */
struct fcache_ident {
	uint64_t ino;
	uint32_t type, len;
	uint8_t handle[FRAME_FILE_MAX_HANDLE];
};
/* Of path relative to dirfd (flags as name_to_handle_at's: AT_EMPTY_PATH
 * with "" for dirfd itself). 0 or -errno (-EOPNOTSUPP: no handles). */
int fcache_ident(int dirfd, const char *path, int flags, struct fcache_ident *id);

/* Dirty marks (cluster/fmarks.h): this node tells its shadow, the next
 * node of the cluster file, which of its blocks are dirty, and keeps the
 * marks of the node whose shadow it is (FT_FILE_MARK), which a mount asks
 * for while that node is down (FT_FILE_SHADOW). fn sends one MARK to the
 * shadow (f: the FileOp, pl: its payload of len bytes): 0 and the reply's
 * flags in *rflags, or -errno. Set once, before the first request is
 * served; without it (one node, tests) nothing is told. */
typedef int (*fcache_mark_fn)(void *arg, const struct frame_fop *f,
			      const void *pl, size_t len, uint32_t *rflags);
void fcache_set_shadow(struct fcache *fc, uint32_t self_idx, fcache_mark_fn fn,
		       void *arg);

/* Mounts that die. Every file request of a mount but ATTACH carries its
 * run's id (FileOp digest, random; 0: none), and the home counts each
 * open under it. A connection that carried an id holds that run here:
 * fcache_mount_conn(fc, inst, true) on its first such request, (false)
 * when it ends. A run with no connection for NVCACHE_MOUNT_GONE_MS
 * (default 20000) is gone (its daemon killed, or its node lost): its
 * opens are released as its closes would have been, and a file then
 * open nowhere is written back by every owner now (fn sends WRITEBACK
 * to the others), or, unlinked while open, dropped everywhere (DROP). A
 * CLOSE of a released open answers NOT_FOUND. The home also drops
 * everywhere, through fn, a file unlinked while open nowhere once its
 * 2 s linger is over (UNLINK_LINGER_NS). fn(arg, idx, type, f, rf)
 * sends one file request to node index idx (n_nodes of them, this one
 * at self_idx as fcache_set_shadow's): 0 (the reply's FileOp in *rf if
 * rf is not NULL) or -errno. */
typedef int (*fcache_call_fn)(void *arg, uint32_t idx, uint32_t type,
			      const struct frame_fop *f, struct frame_fop *rf);
void fcache_set_peers(struct fcache *fc, uint32_t n_nodes, fcache_call_fn fn,
		      void *arg);
/* fcache_mount_conn returns true for a run's first connection (a mount
 * come, logged by the caller), else false. */
bool fcache_mount_conn(struct fcache *fc, uint64_t inst, bool up);

/* Size epochs: a small read or write needs no word with the home.
 * A file's size at its home only grows, but for a truncate that lowers
 * it; every change that lowers the home's size (its SETSIZE, or a TRUNC
 * that finds a write grew it since) gives the file a new epoch (the
 * home's clock in ns, above the last), as does the making of the home's
 * record (a restart too). The home's OPEN (HOME), GETATTR and SETSIZE
 * replies carry size and epoch: the size is a lower bound of the file's
 * for as long as the epoch is the file's. A mount sends a READ or WRITE
 * whose range ends within its bound with BOUND and the epoch; the owner
 * answers BOUND_OK if it knows of no newer epoch, and the mount then
 * needs no GETATTR to clip the read, nor SETSIZE to extend for the
 * write. An owner learns epochs from the shrinking TRUNCs, which the
 * truncating mount sends every node after the home's SETSIZE (with its
 * reply's epoch), and by a GETATTR to the home (fn) when it knows none
 * (its record made, or loaded at start, since) or learnt it over a
 * second ago: a shrink whose TRUNC never came here ends the bounds
 * within that second. A home's mtime a mount owes for writes that
 * relied on the bound comes as SETSIZE with MTIME and MTIME_PAY, taken
 * only if the mtime did not change after that time. */

/* replicas=2 (docs/nvcachefs-cluster.md): every mount and node of a
 * cluster agree (the first ATTACH fixes it, PATH.backing keeps it, an
 * ATTACH with another value is refused). An owner's write sends the
 * block's valid bytes to its shadow (MARK with REPLICA) under the
 * block's stripe lock, after the store write and before the reply (the
 * write fails with -EIO if the shadow does not take them); a resync
 * sends every dirty block's. A write into a block dirty before it sends
 * its bytes alone (REPLICA with RANGE) while the shadow holds the
 * owner's whole list: each copy there then follows the block's every
 * write; a shadow whose copy the range does not fit answers WHOLE. The shadow keeps them in its store, dirty,
 * in a record per (owner index, object) that its write-back never walks,
 * until a CLEAR of the block (the owner wrote it back), a CLEAR_OBJ or
 * the owner's SYNC_BEGIN; a SHADOW query answers REPLICA for a dirty
 * block it holds, and a READ with FRAME_FILE_REPLICA (gen: the owner's
 * index) reads it.
 *
 * A lost owner: the daemon tells the cache whether owner index idx is
 * down (membership: dead, or never heard from); a shadow whose owner is
 * down for FCACHE_ORPHAN_MS (the environment's NVCACHE_REPLICA_ORPHAN_MS
 * at open, for tests) writes its replicas back to the backing files,
 * clears their marks and drops them. Any thread. */
#define FCACHE_ORPHAN_MS 10000

/* replicas=2 with the shadow down. The daemon tells the cache whether
 * the next node (the shadow) is dead to the heartbeats (or not heard
 * from since the start), and their timeout. A copy the shadow does not
 * take is tried again every 100 ms until their verdict (the timeout and
 * 1 s): the shadow back, the write goes on; declared dead, the write is
 * kept in this node's NVRAM alone (degraded: counted, logged), and the
 * shadow's resync sends it every dirty block when back; never told, or
 * no verdict: -EIO. So a node down stops the writes of its own ranges
 * only. Until writes kept here alone are copied to the shadow (its
 * resync), the write-back due here waits (a full cache's does not):
 * while the shadow is down, until it has been down FCACHE_DEGRADED_HOLD
 * orphan times; back, until the resync (bounded by as long from the
 * first write kept alone). A shadow alive but cut off from this node (a
 * partition) writes its older copies back after one orphan time, and
 * this node's newer bytes must reach the backing after those; the
 * resync's SYNC_BEGIN waits there for such a write-back to end. Any
 * thread. */
#define FCACHE_DEGRADED_HOLD 2
void fcache_shadow_down(struct fcache *fc, bool down, uint32_t timeout_ms);
/* fcache_mount_conn: a mount run without a connection this long is gone */
#define FCACHE_MOUNT_GONE_MS 20000
void fcache_owner_down(struct fcache *fc, uint32_t idx, bool down);

/* A restart's grace. The home's open counts and its file locks live in
 * DRAM: a daemon restarted where mounts were attached before (its NVRAM
 * names a backing directory) knows neither. For FCACHE_GRACE_MS the
 * mounts, which notice the new incarnation within about a second
 * (fcl.h), count their open handles again (OPEN with RECLAIM) and set
 * their locks again (FILE_LOCK with reclaim); meanwhile an UNLINK waits
 * (it would drop a file still open elsewhere), as do lock requests that
 * are not reclaims (locksvc.h). The end of the grace in clock_now_ns
 * time, 0 for none. */
#define FCACHE_GRACE_MS 5000
uint64_t fcache_grace_end(const struct fcache *fc);

/* "key: value" lines of the manager's counters (for node_ctl stats). */
size_t fcache_stats(struct fcache *fc, char *out, size_t len);
