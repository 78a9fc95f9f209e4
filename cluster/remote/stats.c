/* stats.c - the backend's stats text (nvswapd's control socket). */
#include "cluster/remote/rb.h"

/* How much is not redundant right now: slots with a copy missing or on a
 * node no longer alive, closed groups whose parity page is lost or on
 * such a node. Zero once recovery has caught up with every death: what an
 * operator waits for before taking another node down. Each slot and group
 * is read under its lock, one at a time (no nesting, so no lock order). */
struct degraded {
	uint64_t slots, groups;
};

static bool node_gone(struct remote_backend *rb, uint8_t n, uint8_t gen)
{
	return n == NO_NODE || (uint8_t)atomic_load(&rb->nodes[n].gen) != gen ||
	       !atomic_load(&rb->nodes[n].alive);
}

static struct degraded count_degraded(struct remote_backend *rb)
{
	struct degraded d = { 0, 0 };

	for (uint64_t i = 0; i < rb->nslots; i++) {
		pthread_mutex_lock(rb_stripe(rb, i));
		const struct slot *s = &rb->slots[i];
		if (s->spilled && rb->mode->hold)
			d.slots++;      /* held: on no node, in no group */
		else if (rb_slot_mapped(s) && !s->spilled)
			for (unsigned r = 0; r < rb->copies; r++)
				if (node_gone(rb, s->n[r], s->g[r])) {
					d.slots++;
					break;
				}
		pthread_mutex_unlock(rb_stripe(rb, i));
	}
	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt); gid++) {
		pthread_mutex_lock(rb_glock(rb, gid));
		const struct parity_group *g = parity_group_at(&rb->pt, gid);
		bool bad = g->state == PG_CLOSED && g->nmem &&
			   (g->parity_lost || node_gone(rb, g->pn, g->pgen));
		for (unsigned k = 0; k < g->nmem && g->state != PG_FREE; k++)
			bad |= node_gone(rb, g->m[k].node, g->m[k].gen) ||
			       (g->state == PG_CLOSED && g->m[k].node == g->pn);
		d.groups += bad;
		pthread_mutex_unlock(rb_glock(rb, gid));
	}
	return d;
}

/* Parity modes: the groups, the parity traffic and recovery, what the
 * redundancy costs in RAM, and the hold (see struct rb_mode). */
void rb_parity_stats(struct remote_backend *rb, struct outbuf *o, uint64_t groups)
{
	outbuf_printf(o, "parity_groups_unprotected: %" PRIu64 "\n", groups);
	uint64_t used = parity_groups_used(&rb->pt);
	uint64_t mapped = atomic_load(&rb->mapped);
	uint64_t rp = atomic_load(&rb->rebuilt_pages);
	/* client RAM for redundancy: the group table, the slot ->
	 * group map and the parity-logging buffers */
	uint64_t local = parity_table_bytes(&rb->pt) +
			 rb->nslots * sizeof(uint32_t) + sizeof(rb->pool);
	outbuf_printf(o, "parity_group_size: %u\n", rb->gsize);
	if (rb->pnode >= 0)
		outbuf_printf(o, "parity_node: %u\n", rb->nodes[rb->pnode].id);
	outbuf_printf(o, "parity_groups: %" PRIu64 "\n", used);
	outbuf_printf(o, "parity_sends: %" PRIu64 "\nparity_updates: %" PRIu64
		      "\nparity_rebuilds: %" PRIu64 "\nparity_errors: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->parity_sends),
		      (uint64_t)atomic_load(&rb->parity_updates),
		      (uint64_t)atomic_load(&rb->parity_rebuilds),
		      (uint64_t)atomic_load(&rb->parity_errors));
	/* of the parity sends, those whose page went with its run's
	 * data pages; and pages so sent that the group could not use
	 * (sent again once the run was in) */
	outbuf_printf(o, "parity_sends_with_data: %" PRIu64
		      "\nparity_sends_redone: %" PRIu64 "\n", (uint64_t)atomic_load(&rb->spec_kept),
		      (uint64_t)atomic_load(&rb->spec_redone));
	outbuf_printf(o, "parity_widened_pages: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->widened_pages));
	outbuf_printf(o, "parity_overwrites_unsure: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->overwrites_unsure));
	outbuf_printf(o, "parity_reconstructs: %" PRIu64 "\nparity_rehomes: %" PRIu64
		      "\nparity_merged_pages: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->reconstructs),
		      (uint64_t)atomic_load(&rb->rehomes),
		      (uint64_t)atomic_load(&rb->merged_pages));
	outbuf_printf(o, "parity_rebuilt_pages: %" PRIu64 "\nparity_rebuild_ms_per_page: %.4f\n",
		      rp, rp ? atomic_load(&rb->rebuild_ns) / 1e6 / (double)rp : 0.0);
	/* of those, rebuilt by the batched path (the rest one by one,
	 * because something changed under the batch) */
	outbuf_printf(o, "parity_rebuilt_batched: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->rebuilt_batched));
	/* of those, moved into open groups (no node outside their
	 * own: recover_regroup) */
	outbuf_printf(o, "parity_rebuilt_regrouped: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->rebuilt_regrouped));
	outbuf_printf(o, "parity_client_bytes: %" PRIu64
		      "\nparity_client_bytes_per_page: %.1f\n", local, mapped ? (double)local / (double)mapped : 0.0);
	outbuf_printf(o, "parity_node_bytes_per_page: %.1f\n",
		      mapped ? (double)used * PAGE / (double)mapped : 0.0);
	/* pages no node had room for, held in our memory (also in
	 * remote_slots_degraded); the hold's cap; pages held so far,
	 * and placed on a node later */
	pthread_mutex_lock(&rb->hold_lock);
	uint64_t hb = (uint64_t)rb->hold_n * PAGE;
	pthread_mutex_unlock(&rb->hold_lock);
	outbuf_printf(o, "remote_slots_held: %" PRIu64 "\nremote_hold_bytes: %" PRIu64
		      "\nremote_hold_max_bytes: %" PRIu64 "\nremote_holds: %" PRIu64
		      "\nremote_holds_placed: %" PRIu64 "\nremote_short_of_room: %d\n",
		      (uint64_t)atomic_load(&rb->held_now), hb,
		      (uint64_t)rb->hold_max * PAGE, (uint64_t)atomic_load(&rb->holds),
		      (uint64_t)atomic_load(&rb->hold_placed), atomic_load(&rb->retry_due));
}

ssize_t remote_stats(void *priv, char *out, size_t outlen)
{
	struct remote_backend *rb = priv;
	struct outbuf ob = outbuf_of(out, outlen);
	struct outbuf *o = &ob;

	outbuf_printf(o, "remote_redundancy: %s\n", rb_red_name(rb->red));
	outbuf_printf(o, "remote_slots: %" PRIu64 "\n", rb->nslots);
	outbuf_printf(o, "remote_slots_mapped: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->mapped));
	outbuf_printf(o, "remote_reads: %" PRIu64 "\nremote_writes: %" PRIu64
		      "\nremote_trims: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->reads), (uint64_t)atomic_load(&rb->writes),
		      (uint64_t)atomic_load(&rb->trims));
	outbuf_printf(o, "remote_zero_reads: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->zero_reads));
	outbuf_printf(o, "remote_failovers: %" PRIu64 "\nremote_remirrors: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->failovers), (uint64_t)atomic_load(&rb->remirrors));
	outbuf_printf(o, "remote_rebuild_passes: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->rebuild_passes));
	uint64_t mig = atomic_load(&rb->migrations);
	outbuf_printf(o, "remote_migrations: %" PRIu64 "\nremote_migration_passes: %" PRIu64
		      "\nremote_migration_failures: %" PRIu64
		      "\nremote_migration_ms_per_page: %.4f\n",
		      mig, (uint64_t)atomic_load(&rb->migrate_passes),
		      (uint64_t)atomic_load(&rb->migrate_failures),
		      mig ? atomic_load(&rb->migrate_ns) / 1e6 / (double)mig : 0.0);
	struct degraded dg = count_degraded(rb);
	outbuf_printf(o, "remote_slots_degraded: %" PRIu64 "\n", dg.slots);
	outbuf_printf(o, "remote_recovery_pending: %d\n", rb->redundant &&
		      (atomic_load(&rb->rebuild_needed) || atomic_load(&rb->recovering)));
	if (rb->mode->stats)
		rb->mode->stats(rb, o, dg.groups);
	outbuf_printf(o, "remote_stale_dropped: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->stale_dropped));
	outbuf_printf(o, "remote_spill: %s\n", rb->spill_fd >= 0 ? "yes" : "no");
	outbuf_printf(o, "remote_spills: %" PRIu64 "\nremote_slots_spilled: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->spills), (uint64_t)atomic_load(&rb->spilled_now));
	outbuf_printf(o, "remote_read_errors: %" PRIu64 "\nremote_write_errors: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&rb->read_errors),
		      (uint64_t)atomic_load(&rb->write_errors));
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		if (!nd->target)
			continue;
		outbuf_printf(o, "remote_node.%u: %s free_pages=%" PRId64 " held=%" PRId64
			      " placed=%" PRIu64 " stores=%" PRIu64 " fetches=%" PRIu64 " errors=%" PRIu64
			      " over_offer=%" PRId64 "\n",
			      nd->id, !atomic_load(&nd->alive) ? "dead" :
			      rb_usable(rb, i) ? "up" : "down",
			      (int64_t)atomic_load(&nd->free_pages), (int64_t)atomic_load(&nd->held),
			      (uint64_t)atomic_load(&nd->placed),
			      (uint64_t)atomic_load(&nd->stores), (uint64_t)atomic_load(&nd->fetches),
			      (uint64_t)atomic_load(&nd->errors),
			      (int64_t)atomic_load(&nd->over_pages));
	}
	return outbuf_done(o);
}
