/* db.c - double-buffered checkpoints (nvckpt.h): the two slots of a
 * checkpoint area are the program's two state buffers, so a version is
 * committed without copying a byte. */
#include "pmem/mpi/ckobj.h"
#include "pmem/mpi/nvckpt.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct nvckpt_db {
	struct ckobj o;
	int cur;             /* slot holding the current state */
	uint64_t commits;
};

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
	*cur = ckpt_data(db->o.ck, db->cur);
	*out = db;
	return db->o.restored ? 1 : 0;
}

void *nvckpt_db_next(struct nvckpt_db *db)
{
	int s = 1 - db->cur;

	ckobj_begin(&db->o, s);
	return ckpt_data(db->o.ck, s);
}

void *nvckpt_db_commit(struct nvckpt_db *db)
{
	int s = 1 - db->cur;

	if (ckobj_commit(&db->o, s, ++db->commits) == MPI_SUCCESS)
		db->cur = s;
	return ckpt_data(db->o.ck, db->cur);
}

void nvckpt_db_free(struct nvckpt_db *db)
{
	if (!db)
		return;
	ckobj_stats(&db->o, db->commits - db->o.restored, "double-buffered, no copy");
	ckobj_close(&db->o);
	free(db);
}
