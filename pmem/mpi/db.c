/* db.c - double-buffered checkpoints (nvckpt.h): the two slots of a
 * checkpoint area are the program's two state buffers, so a version is
 * committed without copying a byte. */
#include "pmem/mpi/ckobj.h"
#include "pmem/mpi/nvckpt.h"

#include "common/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct nvckpt_db {
	struct ckobj o;
	int cur;             /* slot holding the current state */
	uint64_t commits;
	bool off;            /* NVCACHE_CKPT=off: two buffers in memory, no
			      * checkpoint (the program's own cost of double
			      * buffering, told apart from the library's) */
	void *plain[2];
};

/* The buffer of slot s. */
static void *db_buf(struct nvckpt_db *db, int s)
{
	return db->off ? db->plain[s] : ckpt_data(db->o.ck, s);
}

int nvckpt_db_alloc(struct nvckpt_db **out, const char *name, size_t size,
		    MPI_Comm comm, void **cur)
{
	struct nvckpt_db *db;

	if (!ckobj_name_ok(name) || !size) {
		log_err("nvckpt_db_alloc: bad name '%s' or size %zu", name, size);
		return -EINVAL;
	}
	if (!(db = calloc(1, sizeof(*db))))
		return -ENOMEM;
	if (ckobj_conf()->mode == CKOBJ_OFF) {
		db->off = true;
		db->plain[0] = calloc(1, size);
		db->plain[1] = calloc(1, size);
		if (!db->plain[0] || !db->plain[1]) {
			nvckpt_db_free(db);
			return -ENOMEM;
		}
		*cur = db->plain[0];
		*out = db;
		return 0;
	}
	if (ckobj_open(&db->o, name, size, 0, comm, 0) != MPI_SUCCESS) {
		free(db);
		return -EIO;
	}
	if (db->o.restored) {
		ckobj_restore_stats(&db->o, 0); /* nothing to copy: the slot is the state */
		db->cur = ckpt_find(db->o.ck, db->o.restored);
		db->commits = db->o.restored;
		ckobj_restore_protected(&db->o);
	} else {
		/* the fresh state: slot 0, zeros (a new file) */
		db->cur = 0;
	}
	*cur = db_buf(db, db->cur);
	*out = db;
	return db->o.restored ? 1 : 0;
}

void *nvckpt_db_next(struct nvckpt_db *db)
{
	int s = 1 - db->cur;

	if (!db->off)
		ckobj_begin(&db->o, s);
	return db_buf(db, s);
}

void *nvckpt_db_commit(struct nvckpt_db *db)
{
	int s = 1 - db->cur;

	++db->commits;
	if (db->off || ckobj_commit(&db->o, s, db->commits) == MPI_SUCCESS)
		db->cur = s;
	return db_buf(db, db->cur);
}

void nvckpt_db_free(struct nvckpt_db *db)
{
	if (!db)
		return;
	if (db->off) {
		free(db->plain[0]);
		free(db->plain[1]);
		free(db);
		return;
	}
	ckobj_stats(&db->o, db->commits - db->o.restored, "double-buffered, no copy");
	ckobj_close(&db->o);
	free(db);
}
