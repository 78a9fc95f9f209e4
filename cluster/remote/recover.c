/* recover.c - after a node death: mirror rebuild, parity recovery
 * (batched, RECOVER_THREADS workers), regrouping and the merge of sparse
 * groups, and the retry of held pages. */
#include "cluster/remote/rb.h"

/* Recovery after a node death (mirror): every slot with a copy on a node
 * that is no longer alive is read through slot_read, which serves it from
 * the surviving copy and places a new one. Runs while I/O goes on; each
 * slot is handled under its stripe like any request. */
static void rebuild(struct remote_backend *rb)
{
	uint8_t page[PAGE];
	uint64_t fixed = 0, failed = 0;

	for (uint64_t i = 0; i < rb->nslots; i++) {
		if (i % 4096 == 0 && rb_stopping(rb))
			return;
		pthread_mutex_lock(rb_stripe(rb, i));
		struct slot *s = &rb->slots[i];
		bool hit = false;
		for (unsigned r = 0; r < rb->copies; r++)
			if (s->n[r] != NO_NODE && (!rb_copy_valid(rb, s, r) ||
			    !atomic_load(&rb->nodes[s->n[r]].alive)))
				hit = true;
		if (hit) {
			if (rb_slot_read(rb, i, page) == 0)
				fixed++;
			else
				failed++;
		}
		pthread_mutex_unlock(rb_stripe(rb, i));
	}
	atomic_fetch_add(&rb->rebuild_passes, 1);
	if (fixed || failed)
		log_info("remote swap: rebuild pass: %" PRIu64 " slots re-mirrored, %"
			 PRIu64 " could not be", fixed, failed);
}

/* Does a node holding a member of g have room (so that regrouping g's
 * members can free a node for a parity page)? Caller holds g's lock. */
bool rb_group_room_inside(struct remote_backend *rb, const struct parity_group *g)
{
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node != NO_NODE && rb_pickable(rb, g->m[k].node))
			return true;
	return false;
}

/* Parity recovery after a node death: every slot on a node no longer
 * alive is rebuilt from its group and re-homed; then every closed group
 * whose parity page was on such a node gets it recomputed. Runs while I/O
 * goes on. Slots are shared out among RECOVER_THREADS workers.
 *
 * A worker takes lost slots RECOVER_BATCH at a time, in five steps, so
 * that the pages a batch needs travel in a few PAGE_FETCH_MANY requests
 * (one per node and 64 pages) instead of one request per page:
 *  1. plan, under each slot's stripe and group lock: note the group as it
 *     is (members, versions, parity node and version) and what to fetch;
 *  2. fetch everything, holding no lock (fetch_batch);
 *  3. rebuild, under the stripe and group lock again: if the slot and
 *     its group are exactly as planned, the fetched pages are a
 *     consistent set (every change to a member or the parity page happens
 *     under the group's lock and moves a version), so parity ^ members is
 *     the page; pick its new node, outside the group (with none outside
 *     it, the slot leaves the group for an open one with the batch's
 *     others: recover_regroup);
 *  4. store the batch's pages, one request per node (store_batch);
 *  5. record each new home, under the locks, if still nothing changed
 *     (else drop the copy just stored).
 * Anything else (a write, trim, merge or a read's own rebuild in between,
 * a fetch or store that failed, an open group, no node outside the group)
 * goes the single-slot way, pslot_read, which a read would take too. */
#define RECOVER_BATCH 32
_Static_assert(RECOVER_BATCH <= RECOVER_STORES_MAX, "a batch's stores fit store_batch");
#define RECOVER_FETCHES (RECOVER_BATCH * (PARITY_MAX_N + 1))
_Static_assert(RECOVER_FETCHES <= FETCH_BATCH_NODE, "a batch fits fetch_batch");

struct recover_arg {
	struct remote_backend *rb;
	unsigned k;
	uint64_t fixed, failed, held;
};

struct recover_job {
	uint64_t i, version, gid;
	uint8_t n0, g0;                 /* the lost copy's node and generation */
	struct parity_group snap;       /* the group at planning */
	unsigned first, cnt;            /* its fetches; the parity page first */
	uint8_t gen;                    /* the new node's generation */
	int st;                         /* its store request; -1: none */
};

struct recover_buf {
	struct recover_job job[RECOVER_BATCH];
	struct cluster_fetch f[RECOVER_FETCHES], tmp[RECOVER_FETCHES];
	unsigned from[RECOVER_FETCHES];
	uint8_t node[RECOVER_FETCHES];
	uint8_t pages[RECOVER_FETCHES][PAGE];
	uint8_t page[PAGE];
	struct store_req st[RECOVER_BATCH];
};

static bool slot_lost(struct remote_backend *rb, const struct slot *s)
{
	return s->n[0] != NO_NODE && (!rb_copy_valid(rb, s, 0) ||
				      !atomic_load(&rb->nodes[s->n[0]].alive));
}

static bool group_same(const struct parity_group *a, const struct parity_group *b)
{
	if (a->state != b->state || a->nmem != b->nmem || a->pn != b->pn ||
	    a->pgen != b->pgen || a->parity_lost != b->parity_lost ||
	    a->pkey != b->pkey || a->pver != b->pver)
		return false;
	for (unsigned k = 0; k < a->nmem; k++)
		if (a->m[k].slot != b->m[k].slot || a->m[k].version != b->m[k].version ||
		    a->m[k].node != b->m[k].node || a->m[k].gen != b->m[k].gen)
			return false;
	return true;
}

/* One slot on its own, under its stripe, if still lost: what a read
 * would do (pslot_read), for a slot the batch cannot take. */
/* Lost slot i rebuilt the way a read does (pslot_read), and counted by
 * where it ended: re-homed on a node (fixed), in the hold (held), or
 * still lost in its group, no node or hold having room, or not
 * rebuilt at all (failed). page: scratch. Caller holds the stripe. */
static void recover_read(struct remote_backend *rb, uint64_t i, struct recover_arg *a,
			 uint8_t *page)
{
	const struct slot *s = &rb->slots[i];

	if (rb_pslot_read(rb, i, page) || slot_lost(rb, s))
		a->failed++;
	else if (s->spilled)
		a->held++;
	else
		a->fixed++;
}

static void recover_one(struct remote_backend *rb, uint64_t i, struct recover_arg *a,
			uint8_t *page)
{
	pthread_mutex_lock(rb_stripe(rb, i));
	if (slot_lost(rb, &rb->slots[i]))
		recover_read(rb, i, a, page);
	pthread_mutex_unlock(rb_stripe(rb, i));
}

/* Step 1 for slot i: 1 planned (job filled, fetches added at b->f[*nf]),
 * 0 not lost, -1 not batchable (recover_one it). */
static int recover_plan(struct remote_backend *rb, uint64_t i,
			struct recover_buf *b, struct recover_job *j, unsigned *nf)
{
	struct slot *s = &rb->slots[i];
	int ret = -1;

	pthread_mutex_lock(rb_stripe(rb, i));
	if (!slot_lost(rb, s)) {
		pthread_mutex_unlock(rb_stripe(rb, i));
		return 0;
	}
	if (!rb->slot_grp[i]) {
		pthread_mutex_unlock(rb_stripe(rb, i));
		return -1;
	}
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	pthread_mutex_lock(rb_glock(rb, gid));
	bool ok = parity_member_find(g, i) >= 0 && rb_parity_ok(rb, g);
	for (unsigned k = 0; ok && k < g->nmem; k++)
		if (g->m[k].slot != i && !rb_member_ok(rb, &g->m[k]))
			ok = false;
	if (ok) {
		*j = (struct recover_job){ .i = i, .version = s->version, .gid = gid,
					   .n0 = s->n[0], .g0 = s->g[0], .snap = *g,
					   .first = *nf };
		unsigned x = *nf;
		b->node[x] = g->pn;
		b->f[x] = (struct cluster_fetch){ .kind = FK_PARITY, .key = g->pkey,
						  .page = b->pages[x] };
		x++;
		for (unsigned k = 0; k < g->nmem; k++) {
			if (g->m[k].slot == i)
				continue;
			b->node[x] = g->m[k].node;
			b->f[x] = (struct cluster_fetch){ .kind = FK_DATA,
				.key = g->m[k].slot, .version = g->m[k].version,
				.page = b->pages[x] };
			x++;
		}
		*nf = x;
		j->cnt = *nf - j->first;
		ret = 1;
	}
	pthread_mutex_unlock(rb_glock(rb, gid));
	pthread_mutex_unlock(rb_stripe(rb, i));
	return ret;
}

/* Step 3 for one planned slot: if it and its group are as planned and
 * every fetch worked, rebuild the page in place of the parity page and
 * pick its new node outside the group (store request *st; 1); with no
 * node outside the group, it is left to recover_regroup (2). Otherwise
 * the single-slot way, now (0). */
static int recover_prepare(struct remote_backend *rb, struct recover_buf *b,
			   struct recover_job *j, struct recover_arg *a,
			   struct store_req *st)
{
	struct slot *s = &rb->slots[j->i];
	int ret = 0;

	pthread_mutex_lock(rb_stripe(rb, j->i));
	if (!slot_lost(rb, s)) {
		/* rebuilt by a read meanwhile */
		pthread_mutex_unlock(rb_stripe(rb, j->i));
		return 0;
	}
	struct parity_group *g = parity_group_at(&rb->pt, j->gid);
	pthread_mutex_lock(rb_glock(rb, j->gid));
	bool same = s->version == j->version && s->n[0] == j->n0 && s->g[0] == j->g0 &&
		    rb->slot_grp[j->i] == j->gid + 1 && group_same(g, &j->snap);
	for (unsigned k = 0; same && k < j->cnt; k++)
		same = b->f[j->first + k].rc == 0;
	if (!same) {
		pthread_mutex_unlock(rb_glock(rb, j->gid));
		recover_read(rb, j->i, a, b->page);
		pthread_mutex_unlock(rb_stripe(rb, j->i));
		return 0;
	}
	uint8_t *page = b->pages[j->first];     /* the parity page */
	for (unsigned k = 1; k < j->cnt; k++)
		xor_into(page, b->pages[j->first + k], PAGE);
	atomic_fetch_add(&rb->reconstructs, 1);
	bool exclude[CONFIG_MAX_NODES] = { false };
	rb_group_exclude(rb, g, exclude);
	int node = rb_pick(rb, exclude);
	if (node >= 0) {
		*st = (struct store_req){ .slot = j->i, .version = j->version,
					  .page = page, .node = (uint8_t)node };
		j->gen = (uint8_t)atomic_load(&rb->nodes[node].gen);
		pthread_mutex_unlock(rb_glock(rb, j->gid));
		ret = 1;
	} else {
		/* No node outside the group (N + 1 data nodes, one lost): out
		 * of it and into an open group, with the batch's others
		 * (recover_regroup; the page stays where it was rebuilt). If
		 * no node takes it there, it is held in our memory: room for
		 * it is reserved now; without room it stays in its group,
		 * degraded but recoverable, for a read or the next pass
		 * (taken out, it would be lost). */
		pthread_mutex_unlock(rb_glock(rb, j->gid));
		if (rb_hold_reserve(rb, j->i)) {
			ret = 2;
		} else {
			a->failed++;
			atomic_fetch_add(&rb->short_kept, 1);
		}
	}
	pthread_mutex_unlock(rb_stripe(rb, j->i));
	return ret;
}

/* Step 3b, the batch's slots with no node outside their group (N + 1 data
 * nodes, one lost: every group spans them all). Each leaves its group
 * and joins an open one, as pslot_rehome does for one, but the batch at
 * once. Under the slots' stripes and the old groups' locks, every job
 * still as planned is taken out of its group, the rebuilt pages going to
 * the parity nodes as deltas (old ^ zeros), one PARITY_UPDATE_MANY per
 * node. The group locks released, the pages are written as new ones:
 * write_slots places them into open groups with one PAGE_STORE_MANY per
 * node, the parity pages of the groups they fill in the same requests. A
 * job that changed meanwhile goes the single-slot way. */
static void recover_regroup(struct remote_backend *rb, struct recover_buf *b,
			    const unsigned *jk, unsigned n, struct recover_arg *a)
{
	uint64_t slots[RECOVER_BATCH], ws[RECOVER_BATCH];
	const uint8_t *pages[RECOVER_BATCH];
	uint16_t order[RECOVER_BATCH];
	bool used[GSTRIPES] = { false }, ok[RECOVER_BATCH];
	/* up: the deltas, then (below) the parity pages' drops of dr */
	struct store_req up[2 * RECOVER_BATCH], dr[RECOVER_BATCH];
	uint64_t ugid[RECOVER_BATCH];
	unsigned nu = 0, nd = 0, nw = 0;

	for (unsigned k = 0; k < n; k++) {
		slots[k] = b->job[jk[k]].i;
		used[b->job[jk[k]].gid % GSTRIPES] = true;
	}
	unsigned u = rb_stripes_lock(rb, slots, n, order);
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	for (unsigned k = 0; k < n; k++) {
		const struct recover_job *j = &b->job[jk[k]];
		struct slot *s = &rb->slots[j->i];
		struct parity_group *g = parity_group_at(&rb->pt, j->gid);
		int idx = -1;
		/* a second lost member of one group fails group_same here
		 * once the first has left it */
		ok[k] = slot_lost(rb, s) && s->version == j->version && s->n[0] == j->n0 &&
			s->g[0] == j->g0 && rb->slot_grp[j->i] == j->gid + 1 &&
			group_same(g, &j->snap) && (idx = parity_member_find(g, j->i)) >= 0;
		if (!ok[k]) {
			rb_hold_unreserve(rb, j->i);     /* recover_prepare's, for it */
			continue;
		}
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
		s->n[0] = NO_NODE;
		atomic_fetch_sub(&rb->mapped, 1);       /* written again below */
		rb->slot_grp[j->i] = 0;
		parity_member_remove(g, (unsigned)idx);
		const uint8_t *page = b->pages[j->first];
		ws[nw] = j->i;
		pages[nw++] = page;
		if (!g->nmem) {
			/* its last member: the parity page goes with it */
			atomic_fetch_sub(&rb->nodes[g->pn].held, 1);
			if (rb_usable(rb, g->pn))
				dr[nd++] = (struct store_req){ .slot = g->pkey,
					.version = UINT64_MAX, .node = g->pn, .kind = FK_PARITY };
			parity_group_free(&rb->pt, (uint32_t)j->gid);
			continue;
		}
		ugid[nu] = j->gid;
		up[nu++] = (struct store_req){ .slot = g->pkey, .version = ++g->pver,
					       .page = page, .node = g->pn, .kind = FK_PARITY,
					       .op = BO_PARITY_UPDATE };
		if (parity_group_sparse(g, rb->gsize))
			atomic_store(&rb->merge_needed, 1);
	}
	/* one round trip for both (the drops are of emptied groups) */
	for (unsigned x = 0; x < nd; x++) {
		up[nu + x] = dr[x];
		up[nu + x].op = BO_DROP;
	}
	if (nu + nd)
		rb_node_batch_mixed(rb, up, nu + nd);
	for (unsigned x = 0; x < nu; x++) {
		if (up[x].rc == 0)
			atomic_fetch_add(&rb->parity_updates, 1);
		else    /* the delta may be lost: recomputed from the members */
			(void)rb_group_parity_rebuild(rb, parity_group_at(&rb->pt, ugid[x]));
	}
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
	if (nw)
		(void)rb_parity_write_slots(rb, ws, pages, nw);
	for (unsigned k = 0; k < nw; k++) {
		struct slot *s = &rb->slots[ws[k]];
		if (s->spilled) {
			/* no node took it: the write put it in the spill
			 * file (pslot_spill), in the room reserved */
			a->held++;
			continue;
		}
		if (rb_slot_mapped(s)) {
			rb_hold_unreserve(rb, ws[k]);
			atomic_fetch_add(&rb->rehomes, 1);
			atomic_fetch_add(&rb->rebuilt_batched, 1);
			atomic_fetch_add(&rb->rebuilt_regrouped, 1);
			a->fixed++;
			continue;
		}
		/* No node took it (the cluster is short of room; write_slots
		 * counted a failed write): it was rebuilt and is held in our
		 * memory, in the room recover_prepare reserved, until a node
		 * takes it. Dropping it here lost it for good. */
		atomic_fetch_sub(&rb->write_errors, 1);
		atomic_fetch_add(&rb->mapped, 1);
		(void)rb_hold_put(rb, ws[k], pages[k]);
		a->held++;
	}
	for (unsigned k = 0; k < n; k++) {
		struct slot *s = &rb->slots[b->job[jk[k]].i];
		if (ok[k] || !slot_lost(rb, s))
			continue;
		recover_read(rb, b->job[jk[k]].i, a, b->page);
	}
	rb_stripes_unlock(rb, order, u);
}

/* Step 5, after the stores: the slot's new home is recorded if nothing
 * changed meanwhile; a copy stored for nothing is dropped again. */
static void recover_finish(struct remote_backend *rb, struct recover_buf *b,
			   const struct recover_job *j, const struct store_req *st,
			   struct recover_arg *a)
{
	struct slot *s = &rb->slots[j->i];
	bool dropit = false;

	pthread_mutex_lock(rb_stripe(rb, j->i));
	struct parity_group *g = parity_group_at(&rb->pt, j->gid);
	pthread_mutex_lock(rb_glock(rb, j->gid));
	bool same = slot_lost(rb, s) && s->version == j->version && s->n[0] == j->n0 &&
		    s->g[0] == j->g0 && rb->slot_grp[j->i] == j->gid + 1 &&
		    group_same(g, &j->snap);
	int idx = same && !st->rc ? parity_member_find(g, j->i) : -1;
	if (idx >= 0) {
		rb_pslot_moved(rb, s, g, idx, st->node, j->gen);
		pthread_mutex_unlock(rb_glock(rb, j->gid));
		atomic_fetch_add(&rb->rehomes, 1);
		atomic_fetch_add(&rb->rebuilt_batched, 1);
		a->fixed++;
	} else {
		pthread_mutex_unlock(rb_glock(rb, j->gid));
		/* our copy is garbage unless a read's rebuild put this very
		 * version on the same node */
		dropit = !st->rc && !(s->n[0] == st->node && s->version == j->version);
		if (slot_lost(rb, s))
			recover_read(rb, j->i, a, b->page);
	}
	if (dropit && rb_usable(rb, st->node))
		(void)rb_node_op(rb, st->node, OP_DROP, j->i, j->version, NULL);
	pthread_mutex_unlock(rb_stripe(rb, j->i));
}

static void *recover_worker(void *arg)
{
	struct recover_arg *a = arg;
	struct remote_backend *rb = a->rb;
	struct recover_buf *b = malloc(sizeof(*b));
	uint8_t page[PAGE];

	for (uint64_t i = a->k; i < rb->nslots && !rb_stopping(rb);) {
		unsigned nj = 0, nf = 0;
		/* plan a batch (a slot the batch cannot take is done at once) */
		for (; i < rb->nslots && nj < RECOVER_BATCH; i += RECOVER_THREADS) {
			if (i % 4096 < RECOVER_THREADS && rb_stopping(rb))
				break;
			int r = b ? recover_plan(rb, i, b, &b->job[nj], &nf) : -1;
			if (r > 0)
				nj++;
			else if (r < 0)
				recover_one(rb, i, a, page);
		}
		if (!nj)
			continue;
		rb_fetch_batch(rb, b->f, b->node, nf, b->tmp, b->from);
		unsigned ns = 0, nr = 0, jk[RECOVER_BATCH];
		for (unsigned k = 0; k < nj; k++) {
			struct recover_job *j = &b->job[k];
			int r = recover_prepare(rb, b, j, a, &b->st[ns]);
			j->st = r == 1 ? (int)ns++ : -1;
			if (r == 2)
				jk[nr++] = k;
		}
		rb_store_batch(rb, b->st, ns);
		for (unsigned k = 0; k < nj; k++)
			if (b->job[k].st >= 0)
				recover_finish(rb, b, &b->job[k], &b->st[b->job[k].st], a);
		if (nr)
			recover_regroup(rb, b, jk, nr, a);
	}
	free(b);
	return NULL;
}

static void parity_recover(struct remote_backend *rb)
{
	struct recover_arg args[RECOVER_THREADS];
	pthread_t th[RECOVER_THREADS];
	bool started[RECOVER_THREADS];
	uint64_t fixed = 0, failed = 0, held = 0, groups = 0, regrouped = 0;
	uint64_t t0 = clock_now_ns();

	for (unsigned k = 0; k < RECOVER_THREADS; k++) {
		args[k] = (struct recover_arg){ .rb = rb, .k = k };
		started[k] = pthread_create(&th[k], NULL, recover_worker, &args[k]) == 0;
		if (!started[k])
			recover_worker(&args[k]);       /* no thread: do it here */
	}
	for (unsigned k = 0; k < RECOVER_THREADS; k++) {
		if (started[k])
			pthread_join(th[k], NULL);
		fixed += args[k].fixed;
		failed += args[k].failed;
		held += args[k].held;
	}
	uint64_t dt = clock_now_ns() - t0;
	if (rb_stopping(rb))
		return;
	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt); gid++) {
		pthread_mutex_lock(rb_glock(rb, gid));
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		uint64_t slots[PARITY_MAX_N];
		unsigned n = 0;
		if (g->state == PG_CLOSED && g->nmem && (g->parity_lost ||
		    g->pn == PARITY_NO_NODE ||
		    (uint8_t)atomic_load(&rb->nodes[g->pn].gen) != g->pgen ||
		    !atomic_load(&rb->nodes[g->pn].alive))) {
			/* no node can take anything: do not fetch every
			 * member of every such group for nothing (retried
			 * later, backing off) */
			bool none[CONFIG_MAX_NODES] = { false };
			int rc = -ENOSPC;
			if (rb_pick_count(rb, none)) {
				rc = rb_group_parity_rebuild(rb, g);
			} else {
				atomic_fetch_add(&rb->short_parity, 1);
				atomic_store(&rb->retry_due, 1);
			}
			groups += rc == 0;
			/* No node outside the group for its parity (N + 1
			 * nodes for groups of N, one lost): a member on a
			 * node with room leaves for an open group, and its
			 * node takes the parity page (recomputed then). */
			for (unsigned k = 0; rc == -ENOSPC && k < g->nmem && !n; k++)
				if (g->m[k].node != NO_NODE && rb_pickable(rb, g->m[k].node))
					slots[n++] = g->m[k].slot;
		}
		pthread_mutex_unlock(rb_glock(rb, gid));
		if (n && rb_group_dissolve(rb, gid, slots, n))
			regrouped++;
	}
	if (regrouped)
		log_info("remote swap: %" PRIu64 " parity groups regrouped: no node "
			 "outside them could take their parity page", regrouped);
	atomic_fetch_add(&rb->rebuild_passes, 1);
	/* rebuilt by this pass: placed on a node or held, not those left
	 * lost in their groups */
	atomic_fetch_add(&rb->rebuilt_pages, fixed + held);
	if (fixed + held)
		atomic_fetch_add(&rb->rebuild_ns, dt);
	if (fixed || failed || held || groups)
		log_info("remote swap: recovery pass: %" PRIu64 " pages rebuilt from "
			 "parity (%.3f ms/page), %" PRIu64 " rebuilt and held %s (no "
			 "node had room), %" PRIu64 " could not be (left in their "
			 "groups), %" PRIu64 " parity pages recomputed",
			 fixed, fixed + held ? dt / 1e6 / (double)(fixed + held) : 0.0,
			 held, rb->spill_fd >= 0 ? "in the spill file" : "in nvswapd's memory",
			 failed, groups);
	rb_short_log(rb);
}

/* Move the members `slots` of closed group gid into open groups: XORed out
 * of its parity page, into the parity-logging buffer; the data stays
 * where it is unless the open group already has a page there. The group
 * (and its parity page) is freed when its last member leaves. Returns how
 * many moved. Takes each slot's stripe, then the group's lock. */
uint64_t rb_group_dissolve(struct remote_backend *rb, uint32_t gid,
			   const uint64_t *slots, unsigned n)
{
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	uint8_t page[PAGE];
	uint64_t moved = 0;

	for (unsigned k = 0; k < n; k++) {
		uint64_t j = slots[k];
		struct slot *s = &rb->slots[j];
		pthread_mutex_lock(rb_stripe(rb, j));
		pthread_mutex_lock(rb_glock(rb, gid));
		int idx = rb->slot_grp[j] == gid + 1 && g->state == PG_CLOSED ?
			  parity_member_find(g, j) : -1;
		int node = s->n[0];
		/* room in the hold first: a page that leaves its group
		 * and finds no other is held, never dropped; without that
		 * room it stays where it is */
		if (idx >= 0 && rb_copy_valid(rb, s, 0) && rb_usable(rb, s->n[0]) &&
		    rb_hold_reserve(rb, j)) {
			if (rb_node_op(rb, s->n[0], OP_FETCH, j, s->version, page) != 0) {
				rb_hold_unreserve(rb, j);
				pthread_mutex_unlock(rb_glock(rb, gid));
				pthread_mutex_unlock(rb_stripe(rb, j));
				continue;
			}
			rb_group_remove(rb, gid, (unsigned)idx, page);
			pthread_mutex_unlock(rb_glock(rb, gid));
			if (rb_group_add(rb, j, s->version, page, node) == 0) {
				rb_hold_unreserve(rb, j);
				moved++;
			} else {
				/* nowhere to go: held in our memory */
				atomic_fetch_sub(&rb->nodes[node].held, 1);
				s->n[0] = NO_NODE;
				if (rb_usable(rb, (unsigned)node))
					(void)rb_node_op(rb, (unsigned)node, OP_DROP, j,
							 s->version, NULL);
				(void)rb_hold_put(rb, j, page);
				rb_short_log(rb);
			}
		} else {
			pthread_mutex_unlock(rb_glock(rb, gid));
		}
		pthread_mutex_unlock(rb_stripe(rb, j));
	}
	return moved;
}

/* Every closed group that which() picks (under its lock) dissolved: its
 * members move into open groups. Returns how many moved. */
static uint64_t dissolve_where(struct remote_backend *rb,
			       bool (*which)(struct remote_backend *rb,
					     const struct parity_group *g))
{
	uint64_t moved = 0;

	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt); gid++) {
		uint64_t slots[PARITY_MAX_N];
		unsigned n = 0;
		if (gid % 4096 == 0 && rb_stopping(rb))
			break;
		pthread_mutex_lock(rb_glock(rb, gid));
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		if (g->state == PG_CLOSED && g->nmem && which(rb, g))
			for (n = 0; n < g->nmem; n++)
				slots[n] = g->m[n].slot;
		pthread_mutex_unlock(rb_glock(rb, gid));
		moved += rb_group_dissolve(rb, gid, slots, n);
	}
	return moved;
}

static bool group_sparse(struct remote_backend *rb, const struct parity_group *g)
{
	return parity_group_sparse(g, rb->gsize);
}

/* Narrower than the layout (closed early: no node was left outside it,
 * or trimmed), or, with a dedicated parity node, its parity page
 * elsewhere (the parity node was gone). */
static bool group_narrow(struct remote_backend *rb, const struct parity_group *g)
{
	return g->nmem < rb->gsize || (rb->pnode >= 0 && g->pn != rb->pnode);
}

/* A node came back (restarted, or after a partition): the layout grows
 * back. Groups that narrowed while it was away are dissolved into open
 * groups, which fill to the full width again and put their parity page
 * on the parity node, or with parity-dist on a node with room (the one
 * back has the most), spreading it again. The data stays where it is
 * unless its new group already has a page on that node. Only once a
 * full group can form (gsize data nodes and one for parity usable);
 * until then it waits for the next pass. */
static void parity_widen(struct remote_backend *rb)
{
	bool none[CONFIG_MAX_NODES] = { false };

	if (rb_pick_count(rb, none) < rb->gsize + 1 ||
	    (rb->pnode >= 0 && !rb_pickable(rb, (unsigned)rb->pnode))) {
		atomic_store(&rb->widen_needed, 1);
		return;
	}
	uint64_t moved = dissolve_where(rb, group_narrow);
	atomic_fetch_add(&rb->widened_pages, moved);
	if (moved)
		log_info("remote swap: a node is back: %" PRIu64 " pages of narrowed "
			 "parity groups regrouped into groups of %u", moved, rb->gsize);
}

/* Merge sparse closed groups: their members move into open groups. */
static void parity_merge(struct remote_backend *rb)
{
	uint64_t moved = dissolve_where(rb, group_sparse);

	atomic_fetch_add(&rb->merged_pages, moved);
	if (moved)
		log_debug("remote swap: %" PRIu64 " pages of sparse parity groups merged",
			  moved);
}

/* Place held pages on the nodes, now that one may have room: each, under
 * its stripe, joins an open group as a new page would. Stops at the first
 * that no node takes. Returns how many were placed. */
static uint64_t hold_retry(struct remote_backend *rb)
{
	static _Thread_local uint8_t page[PAGE];
	uint64_t placed = 0, cur = 0;
	bool none[CONFIG_MAX_NODES] = { false };

	while (rb_hold_count(rb) && !rb_stopping(rb) && rb_pick_count(rb, none)) {
		uint64_t i = rb_hold_next(rb, &cur);
		if (i == UINT64_MAX)
			break;
		pthread_mutex_lock(rb_stripe(rb, i));
		struct slot *s = &rb->slots[i];
		int rc = 0;
		if (s->spilled && !s->lost && !(rc = rb_hold_io(rb, false, i, page))) {
			rc = rb_group_add(rb, i, s->version, page, -1);
			if (!rc) {
				rb_hold_forget(rb, i);
				atomic_fetch_add(&rb->hold_placed, 1);
				placed++;
			}
		}
		pthread_mutex_unlock(rb_stripe(rb, i));
		if (rc)
			break;
	}
	uint64_t left = rb_hold_count(rb);
	if (left)
		atomic_store(&rb->retry_due, 1);
	if (placed)
		log_info("remote swap: %" PRIu64 " held pages placed on the nodes, %"
			 PRIu64 " still held %s", placed, left, rb->spill_fd >= 0 ?
			 "in the spill file" : "in nvswapd's memory");
	return placed;
}

/* None and mirror: the refresher's turn (see struct rb_mode): with
 * mirror, after a node death, every copy it held is re-mirrored. */
void rb_copies_pass(struct remote_backend *rb)
{
	atomic_store(&rb->recovering, 1);
	if (rb->copies > 1 && atomic_exchange(&rb->rebuild_needed, 0))
		rebuild(rb);
	atomic_store(&rb->recovering, 0);
}

/* Parity modes: the refresher's turn (see struct rb_mode). Short of room
 * (a parity page or a page that no node took): try again, the delay
 * doubling (up to RETRY_MAX_NS) while nothing gets placed; a node death's
 * own pass is not held back by this. Then recovery after a death, and the
 * merge of sparse groups. */
void rb_parity_pass(struct remote_backend *rb)
{
	bool retry = false;
	uint64_t placed = 0, rebuilds0 = 0;
	/* room appeared (a node came back or grew): no waiting */
	bool none[CONFIG_MAX_NODES] = { false };
	bool room = rb_pick_count(rb, none) > 0;

	if (room && !rb->had_room) {
		rb->retry_at_ns = 0;
		rb->retry_ns = RETRY_MIN_NS;
	}
	rb->had_room = room;
	if (atomic_load(&rb->retry_due) && clock_now_ns() >= rb->retry_at_ns) {
		atomic_store(&rb->retry_due, 0);
		retry = true;
		rebuilds0 = atomic_load(&rb->parity_rebuilds);
		placed = hold_retry(rb);
		atomic_store(&rb->rebuild_needed, 1);
	}
	atomic_store(&rb->recovering, 1);
	if (atomic_exchange(&rb->rebuild_needed, 0))
		parity_recover(rb);
	atomic_store(&rb->recovering, 0);
	if (retry) {
		/* progress: a held page placed, a parity page recomputed and
		 * stored */
		bool progress = placed ||
				atomic_load(&rb->parity_rebuilds) != rebuilds0;
		if (!atomic_load(&rb->retry_due) || progress)
			rb->retry_ns = RETRY_MIN_NS;
		else if ((rb->retry_ns *= 2) > RETRY_MAX_NS)
			rb->retry_ns = RETRY_MAX_NS;
		rb->retry_at_ns = clock_now_ns() + rb->retry_ns;
		rb_short_log(rb);
	}
	if (atomic_exchange(&rb->merge_needed, 0))
		parity_merge(rb);
	if (atomic_exchange(&rb->widen_needed, 0))
		parity_widen(rb);
}
