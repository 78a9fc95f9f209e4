/* itab.c - the inode table: every backing inode the kernel has looked up,
 * by (dev, ino), each holding an O_PATH fd (as in libfuse's
 * passthrough_ll), with the kernel's lookup count and the refs of handles
 * and queues. An inode with neither is freed. See fs.h. */
#include "fs/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A prime: the hash is taken modulo it. */
#define ITAB_SIZE 65521

static size_t ihash(const struct fs *fs, dev_t dev, ino_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) % fs->itab_size;
}

int itab_open(struct fs *fs)
{
	struct stat st;

	pthread_mutex_init(&fs->itab_lk, NULL);
	fs->itab_size = ITAB_SIZE;
	fs->itab = calloc(fs->itab_size, sizeof(*fs->itab));
	inode_init(&fs->root);
	if (!fs->itab)
		return -ENOMEM;
	fs->root.fd = open(fs->cfg.backing, O_PATH | O_CLOEXEC);
	if (fs->root.fd < 0 || fstat(fs->root.fd, &st) < 0)
		return -errno;
	fs->root.dev = st.st_dev;
	fs->root.ino = st.st_ino;
	fs->root.nlookup = 2;
	return 0;
}

static void inode_free(struct fs *fs, struct fs_inode *ino)
{
	inode_obj_release(fs, ino);
	inode_drop_datafd(fs, ino);
	close(ino->fd);
	inode_destroy(ino);
	free(ino);
	fdwait_freed(&fs->fdw);
}

/* Unlink from the table if unused (itab_lk held); true if the caller must free. */
static bool inode_unused(struct fs *fs, struct fs_inode *ino)
{
	if (ino == &fs->root || ino->nlookup || ino->refs)
		return false;
	struct fs_inode **pp = &fs->itab[ihash(fs, ino->dev, ino->ino)];
	while (*pp && *pp != ino)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = ino->hnext;
		fs->ninodes--;
	}
	return true;
}

void itab_free_all(struct fs *fs)
{
	if (!fs->itab)
		return;
	for (size_t h = 0; h < fs->itab_size; h++) {
		while (fs->itab[h]) {
			struct fs_inode *ino = fs->itab[h];
			fs->itab[h] = ino->hnext;
			inode_free(fs, ino);
		}
	}
	free(fs->itab);
	fs->itab = NULL;
	inode_drop_datafd(fs, &fs->root);
	if (fs->root.fd >= 0)
		close(fs->root.fd);
}

uint64_t itab_count(struct fs *fs)
{
	pthread_mutex_lock(&fs->itab_lk);
	uint64_t n = fs->ninodes;
	pthread_mutex_unlock(&fs->itab_lk);
	return n;
}

struct fs_inode *itab_add(struct fs *fs, int fd, const struct stat *st)
{
	struct fs_inode *ino;
	bool kick = false;

	if (st->st_dev == fs->root.dev && st->st_ino == fs->root.ino) {
		close(fd);
		pthread_mutex_lock(&fs->itab_lk);
		fs->root.nlookup++;
		pthread_mutex_unlock(&fs->itab_lk);
		return &fs->root;
	}
	pthread_mutex_lock(&fs->itab_lk);
	size_t h = ihash(fs, st->st_dev, st->st_ino);
	for (ino = fs->itab[h]; ino; ino = ino->hnext)
		if (ino->dev == st->st_dev && ino->ino == st->st_ino)
			break;
	if (ino) {
		close(fd);
	} else {
		ino = calloc(1, sizeof(*ino));
		if (!ino) {
			pthread_mutex_unlock(&fs->itab_lk);
			close(fd);
			return NULL;
		}
		inode_init(ino);
		ino->fd = fd;
		ino->dev = st->st_dev;
		ino->ino = st->st_ino;
		ino->hnext = fs->itab[h];
		fs->itab[h] = ino;
		kick = ++fs->ninodes > fs->inode_high;
	}
	ino->nlookup++;
	atomic_store_explicit(&ino->touched, true, memory_order_relaxed);
	pthread_mutex_unlock(&fs->itab_lk);
	if (kick)
		fdwait_kick(&fs->fdw);
	return ino;
}

struct fs_inode *itab_find(struct fs *fs, dev_t dev, ino_t ino)
{
	struct fs_inode *i;

	if (fs->root.dev == dev && fs->root.ino == ino)
		return &fs->root;
	pthread_mutex_lock(&fs->itab_lk);
	for (i = fs->itab[ihash(fs, dev, ino)]; i; i = i->hnext)
		if (i->dev == dev && i->ino == ino) {
			i->refs++;
			break;
		}
	pthread_mutex_unlock(&fs->itab_lk);
	return i;
}

void itab_ref(struct fs *fs, struct fs_inode *ino)
{
	pthread_mutex_lock(&fs->itab_lk);
	ino->refs++;
	pthread_mutex_unlock(&fs->itab_lk);
}

void itab_unref(struct fs *fs, struct fs_inode *ino)
{
	bool fr;

	pthread_mutex_lock(&fs->itab_lk);
	ino->refs--;
	fr = inode_unused(fs, ino);
	pthread_mutex_unlock(&fs->itab_lk);
	if (fr)
		inode_free(fs, ino);
}

void itab_forget(struct fs *fs, struct fs_inode *ino, uint64_t n)
{
	bool fr;

	pthread_mutex_lock(&fs->itab_lk);
	ino->nlookup = n > ino->nlookup ? 0 : ino->nlookup - n;
	fr = inode_unused(fs, ino);
	pthread_mutex_unlock(&fs->itab_lk);
	if (fr)
		inode_free(fs, ino);
}

size_t itab_idle(struct fs *fs, uint64_t *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&fs->itab_lk);
	/* two laps at most: the first clears touched bits the second reads;
	 * the second only if the first found none (it would find them again) */
	for (size_t k = 0; k < 2 * fs->itab_size && n < max &&
	     !(k == fs->itab_size && n > 0); k++) {
		for (struct fs_inode *i = fs->itab[fs->idle_hand]; i; i = i->hnext)
			if (!atomic_exchange_explicit(&i->touched, false,
						      memory_order_relaxed) &&
			    !i->refs && i->nlookup && n < max)
				out[n++] = (uint64_t)(uintptr_t)i;
		fs->idle_hand = (fs->idle_hand + 1) % fs->itab_size;
		/* let lookups in now and then: a lap is 64K buckets */
		if (k % 4096 == 4095) {
			pthread_mutex_unlock(&fs->itab_lk);
			pthread_mutex_lock(&fs->itab_lk);
		}
	}
	pthread_mutex_unlock(&fs->itab_lk);
	return n;
}

size_t itab_gone(struct fs *fs, uint64_t *out, size_t max, size_t look)
{
	struct fs_inode **cand = malloc((look ? look : 1) * sizeof(*cand));
	size_t nc = 0, n = 0;
	struct stat st;

	if (!cand)
		return 0;
	/* refs to the next idle inodes after the hand, then fstat with no
	 * lock held (on a network backing it is a call to its server) */
	pthread_mutex_lock(&fs->itab_lk);
	for (size_t k = 0; k < fs->itab_size && nc < look; k++) {
		for (struct fs_inode *i = fs->itab[fs->gone_hand]; i && nc < look;
		     i = i->hnext)
			if (!i->refs && i->nlookup) {
				i->refs++;
				cand[nc++] = i;
			}
		fs->gone_hand = (fs->gone_hand + 1) % fs->itab_size;
	}
	pthread_mutex_unlock(&fs->itab_lk);
	for (size_t k = 0; k < nc && n < max; k++)
		/* no link left; or, on NFS, the server no longer knows it */
		if (fstat(cand[k]->fd, &st) == 0 ? st.st_nlink == 0
						  : errno == ESTALE || errno == ENOENT)
			out[n++] = (uint64_t)(uintptr_t)cand[k];
	for (size_t k = 0; k < nc; k++)
		itab_unref(fs, cand[k]);
	free(cand);
	return n;
}

/* Refs to up to max inodes that match (under itab_lk). */
static size_t holders(struct fs *fs, bool (*match)(const struct fs_inode *i,
						   const void *arg),
		      const void *arg, struct fs_inode **out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&fs->itab_lk);
	for (size_t h = 0; h < fs->itab_size && n < max; h++)
		for (struct fs_inode *i = fs->itab[h]; i && n < max; i = i->hnext)
			if (match(i, arg)) {
				i->refs++;
				out[n++] = i;
			}
	pthread_mutex_unlock(&fs->itab_lk);
	return n;
}

static bool any(const struct fs_inode *i, const void *arg)
{
	(void)i;
	(void)arg;
	return true;
}

size_t itab_hold_all(struct fs *fs, struct fs_inode **out, size_t max)
{
	return holders(fs, any, NULL, out, max);
}

static bool idle_datafd(const struct fs_inode *i, const void *skip)
{
	return i != skip && i->datafd >= 0 && !i->opens;
}

size_t itab_datafd_holders(struct fs *fs, const struct fs_inode *skip,
			   struct fs_inode **out, size_t max)
{
	return holders(fs, idle_datafd, skip, out, max);
}

static bool obj_open(const struct fs_inode *i, const void *open)
{
	return i->obj && !i->opens == !*(const bool *)open && !i->on_dirty &&
	       !i->on_pf;
}

size_t itab_obj_holders(struct fs *fs, bool open, struct fs_inode **out,
			size_t max)
{
	return holders(fs, obj_open, &open, out, max);
}

struct gids { const uint64_t *v; unsigned n; };

/* (the id is set once, from 0, under the inode's lock: an inode being
 * given its id as this looks is not open yet) */
static bool gid_open(const struct fs_inode *i, const void *arg)
{
	const struct gids *g = arg;
	if (!i->opens || !i->gid)
		return false;
	for (unsigned k = 0; k < g->n; k++)
		if (g->v[k] == i->gid)
			return true;
	return false;
}

size_t itab_gid_holders(struct fs *fs, const uint64_t *gids, unsigned n,
			struct fs_inode **out, size_t max)
{
	struct gids g = { gids, n };
	return holders(fs, gid_open, &g, out, max);
}
