/* backend.c - the remote backend's open and close, and the refresher
 * thread that keeps the capacity table and runs recovery and migration;
 * see cluster/remote_backend.h. */
#include "cluster/remote/rb.h"

int remote_redundancy_parse(const char *s)
{
	size_t n = strcspn(s, ":");

	if (!strcmp(s, "none"))
		return REMOTE_NONE;
	if (!strcmp(s, "mirror"))
		return REMOTE_MIRROR;
	if (remote_parity_group_parse(s) < 0)
		return -EINVAL;
	if (n == 6 && !strncmp(s, "parity", n))
		return REMOTE_PARITY;
	if (n == 11 && !strncmp(s, "parity-dist", n))
		return REMOTE_PARITY_DIST;
	return -EINVAL;
}

int remote_parity_group_parse(const char *s)
{
	const char *c = strchr(s, ':');
	char *end;

	if (!c)
		return 0;
	errno = 0;
	long v = strtol(c + 1, &end, 10);
	if (errno || end == c + 1 || *end || v < 2 || v > PARITY_MAX_N)
		return -EINVAL;
	return (int)v;
}

static void *refresher_main(void *arg)
{
	struct remote_backend *rb = arg;

	for (;;) {
		struct timespec ts;
		clock_deadline(&ts, (uint64_t)rb->refresh_ms * 1000000ULL);
		pthread_mutex_lock(&rb->lock);
		while (!rb->stopping &&
		       pthread_cond_timedwait(&rb->cond, &rb->lock, &ts) != ETIMEDOUT)
			;
		bool stop = rb->stopping;
		pthread_mutex_unlock(&rb->lock);
		if (stop)
			break;
		if (rb_refresh(rb))
			log_debug("remote swap: no node answered the table refresh");
		rb_reset_late_nodes(rb);
		/* before the pass: a node back from a partition is cleared
		 * of stale copies before the layout grows back onto it */
		rb_stale_drop(rb);
		if (rb->mode->pass)
			rb->mode->pass(rb);
		rb_migrate(rb);
	}
	return NULL;
}

/* At open, with every node's report in: a warning when the device needs
 * more than the cluster would have left after losing its largest node.
 * Then a node loss leaves pages with nowhere to go: the spill file takes
 * them, or without one, swap writes fail. */
static void capacity_warn(struct remote_backend *rb)
{
	uint64_t room = 0, most = 0;
	unsigned big = 0;

	for (unsigned i = 0; i < rb->nn; i++) {
		int_fast64_t f = atomic_load(&rb->nodes[i].free_pages);
		if (!rb->nodes[i].target || f <= 0)
			continue;
		room += (uint64_t)f;
		if ((uint64_t)f > most) {
			most = (uint64_t)f;
			big = i;
		}
	}
	uint64_t need = rb->mode->node_pages(rb, rb->nslots);
	if (need <= room - most)
		return;
	const uint64_t mib = 1048576 / PAGE;
	log_warn("remote swap: %" PRIu64 " MiB of swap needs %" PRIu64 " MiB on the "
		 "nodes with redundancy %s, but the cluster has %" PRIu64 " MiB free "
		 "and %" PRIu64 " MiB after losing its largest node (node %u, %"
		 PRIu64 " MiB): once full, or after a loss, %s. Give the nodes "
		 "memory (mem=, nvcachectl grow), add a node or use a smaller --size",
		 rb->nslots / mib, need / mib, rb_red_name(rb->red), room / mib,
		 (room - most) / mib, rb->nodes[big].id, most / mib,
		 rb->spill_fd >= 0 ? "pages go to the spill file" :
		 "swap writes fail (no spill file: --flash)");
}

int remote_open(struct remote_backend **out, const struct remote_opts *o)
{
	struct remote_backend *rb;
	int rc;

	if (!o->size || o->size % PAGE) {
		log_err("remote swap: size must be a non-zero multiple of 4 KiB");
		return -EINVAL;
	}
	if (o->redundancy > REMOTE_PARITY_DIST) {
		log_err("remote swap: unknown redundancy mode");
		return -EINVAL;
	}
	bool par = o->redundancy == REMOTE_PARITY || o->redundancy == REMOTE_PARITY_DIST;
	if (par && o->parity_group && (o->parity_group < 2 ||
				       o->parity_group > PARITY_MAX_N)) {
		log_err("remote swap: parity group size %u: use 2..%u",
			o->parity_group, PARITY_MAX_N);
		return -EINVAL;
	}
	if (o->cfg->n_nodes > NO_NODE) {
		log_err("remote swap: too many nodes");
		return -EINVAL;
	}
	rb = calloc(1, sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	rb->cfg = *o->cfg;
	rb->self = o->self_node;
	rb->owner = o->owner ? o->owner : o->self_node;
	rb->nslots = o->size / PAGE;
	rb->red = o->redundancy;
	rb->mode = rb_modes[o->redundancy];
	rb->redundant = o->redundancy != REMOTE_NONE;
	rb->copies = o->redundancy == REMOTE_MIRROR ? 2 : 1;
	rb->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 3000;
	rb->refresh_ms = o->refresh_ms ? o->refresh_ms : 500;
	rb->spill_fd = -1;
	rb->pnode = -1;
	for (unsigned k = 0; k < POOL; k++) {
		pthread_mutex_init(&rb->pool[k].lock, NULL);
		pthread_mutex_init(&rb->tscr[k].lock, NULL);
		rb->pool[k].gid = -1;
	}
	for (unsigned k = 0; k < GSTRIPES; k++)
		pthread_mutex_init(&rb->glocks[k], NULL);
	pthread_mutex_init(&rb->lock, NULL);
	clock_cond_init(&rb->cond);
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_init(&rb->stripes[i], NULL);
	pthread_mutex_init(&rb->hold_lock, NULL);
	rb->retry_ns = RETRY_MIN_NS;
	/* the hold: 1/16 of the device, at least 64 MiB, at most 256 MiB */
	{
		uint64_t h = rb->nslots / 16;
		h = h < HOLD_MIN_PAGES ? HOLD_MIN_PAGES : h > HOLD_MAX_PAGES ? HOLD_MAX_PAGES : h;
		rb->hold_max = (uint32_t)(h < rb->nslots ? h : rb->nslots);
	}
	rb->slots = malloc(rb->nslots * sizeof(*rb->slots));
	if (!rb->slots) {
		remote_close(rb);
		return -ENOMEM;
	}
	/* Versions start at a random base for each open: a page of another
	 * device under our key (a second nvswapd given our --node and
	 * export name, or leftovers of an earlier run not yet dropped) then
	 * never has the version we ask for, and reads fail -ESTALE (EIO)
	 * instead of returning its bytes as ours. */
	uint32_t r32 = 0;
	if (getrandom(&r32, sizeof(r32), 0) != (ssize_t)sizeof(r32))
		r32 = (uint32_t)clock_now_ns() ^ (uint32_t)getpid();
	uint64_t vbase = (uint64_t)(r32 | 1) << 31;
	for (uint64_t i = 0; i < rb->nslots; i++) {
		rb->slots[i].version = vbase;
		rb->slots[i].n[0] = rb->slots[i].n[1] = NO_NODE;
		rb->slots[i].g[0] = rb->slots[i].g[1] = 0;
		rb->slots[i].spilled = 0;
		rb->slots[i].lost = 0;
		rb->slots[i].hold = 0;
	}
	if (o->spill_path) {
		struct statfs sfs;
		rb->spill_fd = open(o->spill_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (rb->spill_fd < 0) {
			rc = -errno;
			log_err("remote swap: spill file %s: %s", o->spill_path, strerror(-rc));
			remote_close(rb);
			return rc;
		}
		if ((rc = spill_lock(rb->spill_fd, o->spill_path)) < 0) {
			remote_close(rb);
			return rc;
		}
		if (fstatfs(rb->spill_fd, &sfs) == 0 &&
		    (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)) {
			log_err("remote swap: spill file %s is on tmpfs: swap backed by "
				"tmpfs deadlocks the kernel; put it on a disk", o->spill_path);
			remote_close(rb);
			return -EINVAL;
		}
		if (ftruncate(rb->spill_fd, (off_t)o->size) < 0) {
			rc = -errno;
			log_err("remote swap: spill file %s: %s", o->spill_path, strerror(-rc));
			remote_close(rb);
			return rc;
		}
	}
	unsigned targets = 0;
	rb->nn = rb->cfg.n_nodes;
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		nd->cn = &rb->cfg.nodes[i];
		nd->id = nd->cn->id;
		nd->target = nd->id != rb->self;
		nd->nconn = o->conns_per_node ? o->conns_per_node : rb->mode->conns;
		nd->conns = calloc(nd->nconn, sizeof(*nd->conns));
		if (!nd->conns) {
			remote_close(rb);
			return -ENOMEM;
		}
		for (unsigned k = 0; k < nd->nconn; k++)
			pthread_mutex_init(&nd->conns[k].lock, NULL);
		atomic_store(&nd->alive, nd->target);
		targets += nd->target;
	}
	if (rb->copies > targets) {
		log_err("remote swap: mirror needs at least two other nodes in the "
			"cluster file");
		remote_close(rb);
		return -EINVAL;
	}
	if (rb->mode->open && (rc = rb->mode->open(rb, o, targets))) {
		remote_close(rb);
		return rc;
	}
	/* Each node's own report of its capacity, to start with; and a clean
	 * slate: pages an earlier device with our owner id left are dropped. */
	rc = -EHOSTUNREACH;
	for (unsigned i = 0; i < rb->nn; i++) {
		if (!rb->nodes[i].target || rb_refresh_from(rb, i) != 0)
			continue;
		rc = 0;
		int e;
		struct rconn *c = rb_conn_get(rb, i, &e);
		if (c) {
			e = cluster_client_owner_reset(c->cl);
			rb_conn_put(rb, i, c, e);
			if (!e)
				atomic_store(&rb->nodes[i].reset_done, 1);
		}
	}
	if (rc) {
		log_err("remote swap: no node of the cluster answers (%s)", strerror(-rc));
		remote_close(rb);
		return -EHOSTUNREACH;
	}
	if ((rc = pthread_create(&rb->refresher, NULL, refresher_main, rb))) {
		remote_close(rb);
		return -rc;
	}
	rb->refresher_started = true;
	capacity_warn(rb);
	log_info("remote swap: %" PRIu64 " slots over %u nodes, redundancy %s",
		 rb->nslots, targets, rb_red_name(rb->red));
	if (rb->pnode >= 0)
		log_info("remote swap: parity node %u, groups of %u pages",
			 rb->nodes[rb->pnode].id, rb->gsize);
	else if (rb->gsize)
		log_info("remote swap: parity spread over the nodes, groups of %u pages",
			 rb->gsize);
	*out = rb;
	return 0;
}

/* At a device's stop: swap does not outlive it, so its pages on the
 * nodes are garbage, and they are dropped now rather than hold the nodes'
 * memory until a device with the same key starts again (maybe never). A
 * node that does not answer now drops them when that key next starts. */
static void drop_all_pages(struct remote_backend *rb)
{
	unsigned done = 0, tried = 0;

	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		if (!nd->target || !nd->conns || !atomic_load(&nd->reset_done) ||
		    !atomic_load(&nd->alive))
			continue;
		tried++;
		int e;
		struct rconn *c = rb_conn_take(rb, i, &e, false);
		if (!c)
			continue;
		e = cluster_client_owner_reset(c->cl);
		rb_conn_put(rb, i, c, e);
		if (e)
			log_warn("remote swap: node %u: could not drop our pages at "
				 "stop (%s); they go when this device starts again",
				 nd->id, strerror(-e));
		else
			done++;
	}
	if (tried)
		log_info("remote swap: our pages dropped on %u of %u nodes", done,
			 tried);
}

void remote_close(struct remote_backend *rb)
{
	if (!rb)
		return;
	pthread_mutex_lock(&rb->lock);
	rb->stopping = true;
	pthread_cond_broadcast(&rb->cond);
	pthread_mutex_unlock(&rb->lock);
	if (rb->refresher_started) {
		pthread_join(rb->refresher, NULL);
		drop_all_pages(rb);
	}
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		for (unsigned k = 0; nd->conns && k < nd->nconn; k++) {
			cluster_client_close(nd->conns[k].cl);
			pthread_mutex_destroy(&nd->conns[k].lock);
		}
		free(nd->conns);
	}
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&rb->stripes[i]);
	if (rb->hold_chunk)
		for (uint32_t c = 0; c * HOLD_CHUNK < rb->hold_n; c++)
			free(rb->hold_chunk[c]);
	free(rb->hold_chunk);
	free(rb->hold_slot);
	free(rb->hold_free);
	pthread_mutex_destroy(&rb->hold_lock);
	if (rb->spill_fd >= 0)
		close(rb->spill_fd);
	pthread_cond_destroy(&rb->cond);
	pthread_mutex_destroy(&rb->lock);
	free(rb->slots);
	free(rb->slot_grp);
	parity_table_fini(&rb->pt);
	for (unsigned k = 0; k < POOL; k++) {
		pthread_mutex_destroy(&rb->pool[k].lock);
		pthread_mutex_destroy(&rb->tscr[k].lock);
		free(rb->pool[k].wb);
		free(rb->tscr[k].t);
	}
	for (unsigned k = 0; k < GSTRIPES; k++)
		pthread_mutex_destroy(&rb->glocks[k]);
	memset(rb->cfg.secret, 0, sizeof(rb->cfg.secret));
	free(rb);
}

void remote_destroy(void *priv)
{
	remote_close(priv);
}
