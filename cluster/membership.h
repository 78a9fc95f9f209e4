/* membership.h - what a node knows about the others: alive or dead, their
 * incarnation, and the capacity each offers (Nswap's IPTable).
 *
 * Heartbeats carry the sender's incarnation (its start time in ns). A node
 * is declared dead when nothing was heard from it for timeout; it comes
 * back either with the same incarnation (it was unreachable, not
 * restarted) or with a newer one (it restarted: a rejoin, its old pages are
 * gone). A heartbeat or a connection from an incarnation older than the
 * newest seen is refused: a restarted node is never mistaken for the old
 * one, nor the old one's late messages for the new one.
 *
 * Time is passed in (ns, monotonic), so the logic is testable without
 * sleeping. Threads: every function may be called from any thread; one
 * mutex guards the table. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/config.h"
#include "cluster/frame.h"

enum membership_event {
	MB_NONE = 0,     /* an ordinary heartbeat */
	MB_UP,           /* first heard from since we started */
	MB_BACK,         /* was dead, same incarnation */
	MB_REJOIN,       /* a newer incarnation than the one we knew */
};

struct member {
	uint32_t id;
	uint32_t state;          /* enum frame_node_state */
	uint64_t incarnation;
	uint64_t prev_incarnation;
	uint64_t last_heard_ns;
	struct frame_capacity cap;
	uint64_t heartbeats, deaths, rejoins;
};

struct membership;

/* One entry per node of cfg; self is FN_SELF. */
int membership_create(struct membership **out, const struct cluster_config *cfg,
		      uint32_t self, uint64_t timeout_ns);
void membership_destroy(struct membership *mb);

/* Would a peer with this incarnation be accepted? 0, -ENOENT (not a node
 * of the cluster, or ourselves), -ESTALE (older than the newest seen). */
int membership_check(struct membership *mb, uint32_t id, uint64_t incarnation);
/* Record a heartbeat (or any proof of life). Returns an enum
 * membership_event, or -ENOENT / -ESTALE as membership_check. *old_inc
 * (may be NULL) gets the replaced incarnation on MB_REJOIN. cap may be NULL
 * (keep the last report). */
int membership_heard(struct membership *mb, uint32_t id, uint64_t incarnation,
		     const struct frame_capacity *cap, uint64_t now_ns,
		     uint64_t *old_inc);
/* Declare dead every alive node not heard from for the timeout; fill
 * dead[] (up to max) with their ids. Returns how many died now. */
unsigned membership_tick(struct membership *mb, uint64_t now_ns,
			 uint32_t *dead, unsigned max);
/* Copy of one member (0) or -ENOENT. */
int membership_get(struct membership *mb, uint32_t id, struct member *out);
/* The table for a NODE_TABLE reply; self's entry gets self_cap. Returns
 * the number of entries (<= max). */
unsigned membership_snapshot(struct membership *mb, uint64_t now_ns,
			     uint64_t self_inc, const struct frame_capacity *self_cap,
			     struct frame_node *out, unsigned max);
/* Counts by state. */
void membership_counts(struct membership *mb, unsigned *alive, unsigned *dead,
		       unsigned *unknown);
const char *membership_state_name(uint32_t state);
