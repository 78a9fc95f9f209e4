/* ctl_ckpt.h - nvcachectl's view of the persistent MPI windows' checkpoints
 * (libnvckpt, docs/checkpoints.md): 'ckpt list DIR' shows every job under
 * an NVCACHE_CKPT_DIR with its windows, ranks, sizes, versions, the
 * version all ranks hold (the one a restart takes) and its age; 'ckpt show
 * DIR JOB' each rank's two slots, checksums verified; 'ckpt delete DIR JOB'
 * removes a job's checkpoint, refused while the job runs.
 *
 * Threads: nvcachectl's main thread. */
#pragma once

/* argv[i] is the subcommand. Returns the exit status: 0, 1 on an error
 * (said on stderr), 2 on a usage error. */
int ctl_ckpt_run(int argc, char **argv, int i);
