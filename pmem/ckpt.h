/* ckpt.h - a crash-consistent, double-buffered, versioned checkpoint area:
 * one file in NVRAM (a region) that keeps the last two versions of one
 * object's bytes (an MPI window of one rank, a set of protected variables),
 * and optionally the object's working copy beside them. The MPI wrappers
 * (pmem/mpi/) keep their checkpoints here; nothing here knows about MPI.
 *
 * Layout of the file (all offsets fixed by the geometry):
 *   page 0        superblock: magic, format, geometry, identity (job, name,
 *                 rank, nranks), creation time, CRC32C; written once
 *   page 1        commit records of slot 0 (at 0) and slot 1 (at 2048)
 *   slot 0        data_size bytes of data, then extra_max bytes of extra
 *   slot 1        the same (each slot rounded up to whole pages)
 *   live          live_size bytes: the working copy (a window's memory)
 * A commit record names the version its slot holds, when it was committed,
 * the CRC32C of the slot's data and extra bytes, and its own CRC32C.
 *
 * Commit protocol (version v into slot s, the slot not holding the newest
 * version):
 *   ckpt_begin:  record s cleared and persisted          (persist point 1)
 *                -- slot s holds nothing from now on; the other slot holds
 *                the newest version, untouched until the next begin
 *   ckpt_write:  bytes copied into slot s, not flushed
 *   ckpt_commit: slot s persisted                          (persist point 2)
 *                record s written and persisted: the commit point (3)
 * A kill at any instant leaves the other slot's version intact and slot s
 * either empty, torn (its record or data fails its CRC: ignored), or
 * holding v. Opening with verify checks every slot's data against its
 * record, so a version is used only when all of its bytes are there.
 *
 * Threads: one thread at a time per area. Another process opening the same
 * file gets -EBUSY (the region's lock, held while the area is open). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pmem/region.h"

#define CKPT_NAME_MAX 64
#define CKPT_SLOTS 2

struct ckpt;

/* What an area holds; fixed when it is created. */
struct ckpt_geom {
	uint64_t data_size;          /* bytes of one version's data */
	uint64_t live_size;          /* bytes of the working copy; 0: none */
	uint32_t extra_max;          /* small bytes kept with each version */
	uint32_t rank, nranks;       /* which process of how many */
	char job[CKPT_NAME_MAX];     /* NUL-terminated names */
	char name[CKPT_NAME_MAX];
};

/* One committed version, as its slot's record says. */
struct ckpt_version {
	uint64_t version;            /* 0: the slot holds nothing */
	uint64_t consistent;         /* newest version the committer knew
				      * every rank had, when it committed */
	uint64_t time_ns;            /* CLOCK_REALTIME at commit */
	uint32_t extra_len;
	int slot;
};

/* Where the commit protocol's time went, summed over the area's life
 * (wall clock, ns): the copies of ckpt_write, the CRC32C of the data
 * (while copying, or at commit for bytes stored directly), persisting the
 * data, and the commit records (cleared at begin, written at commit). */
struct ckpt_times {
	uint64_t copy_ns, crc_ns, persist_ns, record_ns;
};

/* Bytes of file a geometry needs. */
uint64_t ckpt_file_size(const struct ckpt_geom *g);

/* Make a new, empty area at path (an old file of that name is replaced).
 * Errors: -EBUSY (another process has the file open: a job of the same
 * name is running), -EINVAL (bad geometry), the errors of region_open
 * (-ENOENT: no such directory, -ENOSPC: no room, -EACCES). */
int ckpt_create(struct ckpt **out, const char *path, const struct ckpt_geom *g,
		const struct region_opts *ro);
/* Open an existing area. verify: check each slot's data against its CRC
 * (reads all of it); otherwise only the records' own CRCs are checked.
 * Errors: -EMEDIUMTYPE (not a checkpoint area, or a damaged superblock;
 * logged), -EBUSY, the errors of region_open. */
int ckpt_open(struct ckpt **out, const char *path, bool verify,
	      const struct region_opts *ro);
void ckpt_close(struct ckpt *c);

const struct ckpt_geom *ckpt_geom(const struct ckpt *c);
uint64_t ckpt_created_ns(const struct ckpt *c);
struct region *ckpt_region(struct ckpt *c);
const struct ckpt_times *ckpt_times(const struct ckpt *c);

/* Check slot's data against its record's CRC (what ckpt_open does for
 * every slot with verify): 0, or -EBADMSG after forgetting the version
 * (logged). Lets a restart read only the slot it restores. */
int ckpt_verify(struct ckpt *c, int slot);

/* ckpt_verify and a copy of slot's data (data_size bytes) to dst (the
 * live part, or any memory) in the same pass over it, stored around the
 * CPU caches (region_stream): 0, or -EBADMSG (the version forgotten,
 * logged; dst then holds the damaged bytes). */
int ckpt_read_verify(struct ckpt *c, int slot, void *dst);

/* The versions held, newest first: returns how many (0..2). */
int ckpt_versions(const struct ckpt *c, struct ckpt_version out[CKPT_SLOTS]);
/* The slot holding version, or -ENOENT. */
int ckpt_find(const struct ckpt *c, uint64_t version);
/* The slot the next version goes to: the one not holding the newest. */
int ckpt_next_slot(const struct ckpt *c);

void *ckpt_data(struct ckpt *c, int slot);
void *ckpt_extra(struct ckpt *c, int slot);
void *ckpt_live(struct ckpt *c);          /* NULL when live_size is 0 */

/* The commit protocol (see top). begin forgets what slot holds; write
 * copies len bytes to offset off of its data (off + len <= data_size);
 * the caller may also store into ckpt_data/ckpt_extra directly (the
 * double-buffered use: compute in place, then commit). Writes in order
 * from offset 0 have their CRC computed as they copy (one pass over the
 * bytes), and commit reads only the data after them for the rest of the
 * CRC: so the bytes such writes covered must not be stored into directly
 * before the commit. Writes out of order make commit read all the data. commit persists the
 * slot and commits it as version (> every version held) with extra_len
 * bytes of extra. Errors: -EINVAL (slot, range, version not newer). */
int ckpt_begin(struct ckpt *c, int slot);
void ckpt_write(struct ckpt *c, int slot, uint64_t off, const void *src,
		uint64_t len);
int ckpt_commit(struct ckpt *c, int slot, uint64_t version,
		uint64_t consistent, uint32_t extra_len);
/* Drop the versions newer than version (persisted): a restart goes back
 * to the newest version all ranks have, and counts on from there. */
void ckpt_drop_newer(struct ckpt *c, uint64_t version);
