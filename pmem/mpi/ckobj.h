/* ckobj.h - the part of libnvckpt that windows and double buffers share:
 * the job's settings from the environment, one checkpointed object of one
 * rank (a checkpoint area, pmem/ckpt.h, agreed on over a communicator), and
 * the protected variables that every checkpoint carries.
 *
 * Versions and consensus. Each object counts its synchronizations; a
 * checkpoint at synchronization n commits version n locally, then takes
 * one MPI_Allreduce(MIN) of the ranks' committed versions on a duplicate of
 * the object's communicator. Only after that allreduce returns does any
 * rank leave the synchronization call, so (a) no rank overwrites version
 * n-1 (writing n+1 into its slot) before every rank has committed n, and
 * (b) no RMA operation of the next epoch reaches a window while a rank is
 * still copying it. A kill between a rank's local commit of n and the
 * allreduce leaves some ranks at n and others at n-1: every rank still
 * holds n-1 (its other slot), and a restart, which takes the MIN over the
 * ranks' newest verified versions, goes back to n-1 and drops n.
 *
 * The second level (NVCACHE_CKPT_FLUSH): after the commit of a version
 * that is a multiple of flush_every, a thread of the object copies it from
 * its NVRAM slot into an area of the same format in the flush directory,
 * while the program runs on; the slot is not reused before the copy is
 * done. The commit's allreduce also carries each rank's last completed
 * copy, and a copy starts only when every rank has completed the one
 * before, so the flush areas too always share a version. A restart on
 * which any rank lacks its NVRAM file restarts all ranks from there.
 *
 * Threads: the MPI thread, and one copier thread per object that only
 * reads its slot and writes its flush area. */
#pragma once
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "pmem/ckpt.h"

enum ckobj_mode { CKOBJ_OFF, CKOBJ_ON, CKOBJ_RESTART };

/* From the environment, read once (see docs/checkpoints.md). */
struct ckobj_conf {
	enum ckobj_mode mode;   /* NVCACHE_CKPT=off|on|restart (default on) */
	char dir[512];          /* NVCACHE_CKPT_DIR */
	char job[CKPT_NAME_MAX];/* NVCACHE_CKPT_JOB, default the program's name */
	uint64_t every;         /* NVCACHE_CKPT_EVERY, default 1 */
	bool incremental;       /* NVCACHE_CKPT_MODE=incremental */
	char flush[512];        /* NVCACHE_CKPT_FLUSH: the second level, or "" */
	uint64_t flush_every;   /* NVCACHE_CKPT_FLUSH_EVERY, default 10 */
};
const struct ckobj_conf *ckobj_conf(void);
/* A job or object name: 1 to CKPT_NAME_MAX - 1 letters, digits, '.', '_'
 * or '-', not starting with '.' (it names files). */
bool ckobj_name_ok(const char *s);

struct ckobj {
	struct ckpt *ck;
	MPI_Comm comm;          /* a duplicate: the consensus' own */
	char name[CKPT_NAME_MAX];
	int rank, nranks;
	uint64_t version;       /* newest committed here */
	uint64_t consistent;    /* newest known committed by every rank */
	uint64_t restored;      /* version restored from, 0: fresh */
	uint64_t verified;      /* at restart: the version whose data was checked */
	uint64_t in_live;       /* CKOBJ_RESTORE_LIVE: the version copied there */
	uint64_t open_ns, check_ns, agree_ns; /* at restart: where its time went */
	uint64_t bytes_copied;  /* into slots, over the object's life */
	uint64_t local_ns;      /* in this rank's checkpoints: copying, CRC,
				 * persisting, committing (not agreeing) */
	uint64_t local_cpu_ns;  /* the thread's CPU time in the same: local_ns
				 * less it is time the rank was descheduled */
	uint64_t agree_all_ns;  /* in the commits' allreduces */
	uint64_t flush_wait_ns; /* waiting for the second level's copier */
	struct ckobj_flush *fl; /* the second level's copier, or NULL */
};

/* ckobj_open's flags. CKOBJ_ANY_SIZE: the object's size changes over its
 * life (a dynamic window): a restart takes the area's data size as it is
 * (or the second level's), ckobj_grow makes it bigger, and the second
 * level's copy grows with it at its next copy. */
#define CKOBJ_ANY_SIZE 1u
/* CKOBJ_RESTORE_LIVE: on a restart, the newest version of this rank is
 * checked and copied into the live area in one pass (o->in_live says
 * which version is there; another agreed on must still be copied). */
#define CKOBJ_RESTORE_LIVE 2u

/* Collective over comm. Fresh start: make the object's area (an old one of
 * the job is replaced). Restart: open it, agree with the other ranks on the
 * newest version all of them hold, drop newer ones; the caller restores
 * from ckpt_find(o->ck, o->restored) when o->restored is not 0. Every
 * failure is logged where it happens and returned on all ranks alike, as
 * an MPI error code (MPI_SUCCESS on success). */
int ckobj_open(struct ckobj *o, const char *name, uint64_t data_size,
	       uint64_t live_size, MPI_Comm comm, unsigned flags);
/* Not collective: give the object (opened with CKOBJ_ANY_SIZE) an area of
 * data_size bytes per version, holding the newest version of the old one.
 * Crash-consistent: the new area is made beside the old one, the version
 * copied and committed there, then renamed over it; a kill at any instant
 * leaves either file with that version. Call between versions (the newest
 * is one every rank holds); a second-level copy still reading the old area
 * is waited for. The second level's area grows the same way at its next
 * copy, keeping its newest copy (one every rank completed). Returns 0 or
 * -errno (logged). */
int ckobj_grow(struct ckobj *o, uint64_t data_size);
/* A stretch of a checkpoint's own work, timed for NVCACHE_CKPT_STATS:
 * ckobj_clock_start, then ckobj_clock_add adds its wall and CPU time to
 * o->local_ns and o->local_cpu_ns (ckobj_begin and ckobj_commit time
 * themselves; a caller times its copy between them). */
struct ckobj_clock { uint64_t wall, cpu; };
void ckobj_clock_start(struct ckobj_clock *c);
void ckobj_clock_add(struct ckobj *o, const struct ckobj_clock *c);
/* ckpt_begin for the object's area: first waits for the second level's
 * copier if it is still reading that slot. */
void ckobj_begin(struct ckobj *o, int slot);
/* Commit slot (filled by the caller after ckobj_begin) as version, with the
 * protected variables, then agree (see top). Collective over o->comm. */
int ckobj_commit(struct ckobj *o, int slot, uint64_t version);
/* Under NVCACHE_CKPT_STATS: one line on stderr of the object's versions,
 * bytes copied and time per version, and where that time went (copy, CRC,
 * persist, records, the second level, on the CPU, agreement). what:
 * "full", "incremental", ... */
void ckobj_stats(const struct ckobj *o, uint64_t versions, const char *what);
/* Under NVCACHE_CKPT_STATS: where a restart's time went (copy_ns: the
 * caller's copy after the agreement). */
void ckobj_restore_stats(const struct ckobj *o, uint64_t copy_ns);
/* Put the protected variables back from version o->restored. */
void ckobj_restore_protected(struct ckobj *o);
void ckobj_close(struct ckobj *o);

/* The version the job was restored from (0: fresh). */
uint64_t ckobj_restored_version(void);
