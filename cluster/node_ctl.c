/* node_ctl.c - the node's control socket: peers, counters, shrinking. */
#include "cluster/node_int.h"

static ssize_t ctl_peers(struct node *n, char *out, size_t outlen)
{
	static _Thread_local struct frame_node tab[FRAME_MAX_NODES];
	struct frame_capacity cap;
	struct outbuf ob = outbuf_of(out, outlen), *o = &ob;

	self_capacity(n, &cap);
	unsigned k = membership_snapshot(n->mb, now_ns(), n->incarnation, &cap, tab,
					 FRAME_MAX_NODES);
	outbuf_printf(o, "%-6s %-8s %-20s %10s %10s %10s %s\n", "node", "state", "incarnation",
		      "offer_MiB", "used_MiB", "free_MiB", "heard_ms_ago");
	for (unsigned i = 0; i < k; i++) {
		const struct frame_node *e = &tab[i];
		uint64_t fr = e->cap.offered > e->cap.used ? e->cap.offered - e->cap.used : 0;
		outbuf_printf(o, "%-6u %-8s %-20" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
			      " %" PRIu64 "\n", e->node_id, membership_state_name(e->state),
			      e->incarnation, e->cap.offered >> 20, e->cap.used >> 20, fr >> 20,
			      e->age_ms);
	}
	return outbuf_done(o);
}

ssize_t ctl_stats(struct node *n, char *out, size_t outlen)
{
	struct pagestore_stats st;
	struct frame_capacity cap;
	unsigned alive, dead, unknown;
	struct outbuf ob = outbuf_of(out, outlen), *o = &ob;

	pagestore_get_stats(n->ps, &st);
	self_capacity(n, &cap);
	membership_counts(n->mb, &alive, &dead, &unknown);
	pthread_mutex_lock(&n->lock);
	uint64_t total = n->mem_total, override = n->limit_override;
	uint64_t shrink_cap = n->shrink_cap;
	bool shrunk = n->shrunk;
	unsigned active = n->conns_active;
	pthread_mutex_unlock(&n->lock);

	outbuf_printf(o, "node: %u\n", n->self);
	outbuf_printf(o, "incarnation: %" PRIu64 "\n", n->incarnation);
	outbuf_printf(o, "listen: %s:%u\n", n->me->host, n->me->port);
	outbuf_printf(o, "heartbeat_ms: %u\ntimeout_ms: %u\n", n->hb_ms, n->timeout_ms);
	outbuf_printf(o, "nodes_alive: %u\nnodes_dead: %u\nnodes_unknown: %u\n", alive, dead, unknown);
	for (unsigned i = 0; i < n->n_links; i++) {
		struct member m;
		if (membership_get(n->mb, n->links[i].cn->id, &m))
			continue;
		uint64_t age = m.last_heard_ns && now_ns() > m.last_heard_ns ?
			       (now_ns() - m.last_heard_ns) / 1000000 : 0;
		outbuf_printf(o, "node.%u: %s incarnation=%" PRIu64 " heard_ms_ago=%" PRIu64
			      " offered=%" PRIu64 " used=%" PRIu64 " deaths=%" PRIu64
			      " rejoins=%" PRIu64 "\n", m.id, membership_state_name(m.state),
			      m.incarnation, age, m.cap.offered, m.cap.used, m.deaths, m.rejoins);
	}
	outbuf_printf(o, "mem_total_bytes: %" PRIu64 "\n", total);
	outbuf_printf(o, "mem_available_bytes: %" PRIu64 "\n", cap.mem_available);
	outbuf_printf(o, "offered_bytes: %" PRIu64 "\n", cap.offered);
	outbuf_printf(o, "limit_override_bytes: %" PRIu64 "\n", override);
	if (shrunk)
		outbuf_printf(o, "shrink_cap_bytes: %" PRIu64 "\n", shrink_cap);
	else
		outbuf_printf(o, "shrink_cap_bytes: none\n");
	outbuf_printf(o, "used_bytes: %" PRIu64 "\n", cap.used);
	/* what this daemon really occupies, pages and all (4.1 KiB per page
	 * held, plus its buffers): to compare with the offer */
	uint64_t rss = 0;
	if (memwatch_rss(&rss) == 0)
		outbuf_printf(o, "rss_bytes: %" PRIu64 "\n", rss);
	outbuf_printf(o, "over_offer_bytes: %" PRIu64 "\n",
		      cap.used > cap.offered ? cap.used - cap.offered : 0);
	outbuf_printf(o, "pages: %" PRIu64 "\npages_data: %" PRIu64 "\npages_parity: %" PRIu64 "\n",
		      st.pages, st.data_pages, st.parity_pages);
	outbuf_printf(o, "owners: %" PRIu64 "\n", st.owners);
	outbuf_printf(o, "page_stores: %" PRIu64 "\npage_fetches: %" PRIu64 "\npage_drops: %" PRIu64
		      "\nparity_updates: %" PRIu64 "\n", st.stores, st.fetches, st.drops, st.xors);
	outbuf_printf(o, "stale_refused: %" PRIu64 "\nnospace_refused: %" PRIu64
		      "\nnot_found: %" PRIu64 "\n", st.stale_refused, st.nospace_refused,
		      st.not_found);
	outbuf_printf(o, "connections_active: %u\n", active);
	outbuf_printf(o, "connections_total: %" PRIu64 "\n", (uint64_t)atomic_load(&n->conns_total));
	outbuf_printf(o, "connections_refused: %" PRIu64 "\n", (uint64_t)atomic_load(&n->conns_refused));
	outbuf_printf(o, "auth_failures: %" PRIu64 "\n", (uint64_t)atomic_load(&n->auth_failures));
	outbuf_printf(o, "bad_frames: %" PRIu64 "\n", (uint64_t)atomic_load(&n->bad_frames));
	outbuf_printf(o, "requests: %" PRIu64 "\n", (uint64_t)atomic_load(&n->requests));
	for (unsigned t = 0; t < FT_COUNT; t++) {
		uint64_t v = atomic_load(&n->requests_by[t]);
		if (v)
			outbuf_printf(o, "requests.%s: %" PRIu64 "\n", frame_type_name(t), v);
	}
	/* PAGE_OVERWRITE: parity updates sent on the owners' behalf */
	outbuf_printf(o, "parity_forwards: %" PRIu64 "\nparity_forward_errors: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&n->forwards),
		      (uint64_t)atomic_load(&n->forward_errors));
	fwd_stats_print(n->fwd, n->peer_conns, o);
	outbuf_printf(o, "heartbeats_in: %" PRIu64 "\nheartbeats_out: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&n->heartbeats_in),
		      (uint64_t)atomic_load(&n->heartbeats_out));
	/* the file locks this node is home of (locksvc.h) */
	struct locksvc_stats ls;
	locksvc_stats(n->locks, &ls);
	outbuf_printf(o, "file_locks: %zu\nfile_lock_waits: %zu\nfile_lock_files: %zu\n"
		      "file_lock_sessions: %zu\nfile_lock_grants: %" PRIu64
		      "\nfile_lock_deadlocks: %" PRIu64 "\nfile_locks_released: %" PRIu64 "\n",
		      ls.tab.locks, ls.tab.waits, ls.tab.files, ls.sessions,
		      ls.granted_waits, ls.deadlocks, ls.released_on_departure);
	outbuf_printf(o, "store: %s\n", n->tier_bytes ? "tiered" : "dram");
	if (n->fc && o->len < o->cap)
		o->len += fcache_stats(n->fc, o->p + o->len, o->cap - o->len);
	if (o->len < o->cap) {
		ssize_t k = pagestore_tier_stats(n->ps, o->p + o->len, o->cap - o->len);
		if (k > 0)
			o->len += (size_t)k;
	}
	return outbuf_done(o);
}

/* "shrink SIZE" (on: cap the offer at SIZE, 0 included) and "grow" /
 * "shrink none" (off). The node only lowers its offer: the pages over it
 * stay readable and writable here until their owners (nvswapd) see
 * used > offered in the node table and migrate them away. */
static ssize_t ctl_shrink(struct node *n, bool on, uint64_t v, char *out,
			  size_t outlen)
{
	struct pagestore_stats st;
	char a[32], b[32];

	pthread_mutex_lock(&n->lock);
	n->shrunk = on;
	n->shrink_cap = on ? v : 0;
	n->shrink_pending = on;
	pthread_mutex_unlock(&n->lock);
	update_capacity(n);
	pagestore_get_stats(n->ps, &st);
	uint64_t used = st.pages * PAGESTORE_PAGE;
	pthread_mutex_lock(&n->lock);
	uint64_t offer = n->offer;
	pthread_mutex_unlock(&n->lock);
	opts_format_size(used, b, sizeof(b));
	if (!on) {
		opts_format_size(offer, a, sizeof(a));
		log_info("shrink cap lifted by the operator: offering %s again "
			 "(%s held)", a, b);
		return snprintf(out, outlen, "grow: offering %s (%s held)\n", a, b);
	}
	opts_format_size(v, a, sizeof(a));
	log_info("shrink to %s by the operator: %s held, %" PRIu64 " pages to "
		 "migrate away", a, b, used > offer ?
		 (used - offer + PAGESTORE_PAGE - 1) / PAGESTORE_PAGE : 0);
	return snprintf(out, outlen, "shrink: offer capped at %s (%s held, %" PRIu64
			" pages over it; their owners migrate them away)\n", a, b,
			used > offer ? (used - offer + PAGESTORE_PAGE - 1) /
			PAGESTORE_PAGE : 0);
}

ssize_t node_ctl(void *arg, const char *cmd, char *out, size_t outlen)
{
	struct node *n = arg;

	if (!strcmp(cmd, "stats") || !strcmp(cmd, "status"))
		return ctl_stats(n, out, outlen);
	if (!strcmp(cmd, "peers"))
		return ctl_peers(n, out, outlen);
	if (!strncmp(cmd, "limit ", 6)) {
		uint64_t v;
		if (opts_parse_size(cmd + 6, &v))
			return -EINVAL;
		pthread_mutex_lock(&n->lock);
		n->limit_override = v;
		pthread_mutex_unlock(&n->lock);
		update_capacity(n);
		log_info("capacity limit set to %" PRIu64 " bytes by the operator", v);
		return snprintf(out, outlen, "limit: %" PRIu64 "\n", v);
	}
	if (!strcmp(cmd, "grow") || !strcmp(cmd, "shrink none"))
		return ctl_shrink(n, false, 0, out, outlen);
	if (!strncmp(cmd, "shrink ", 7)) {
		uint64_t v;
		if (opts_parse_size(cmd + 7, &v))
			return -EINVAL;
		return ctl_shrink(n, true, v, out, outlen);
	}
	return -ENOENT;
}
