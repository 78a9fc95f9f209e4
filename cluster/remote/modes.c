/* modes.c - the redundancy modes' operation tables (see struct rb_mode),
 * by enum remote_redundancy. */
#include "cluster/remote/rb.h"

static uint64_t copies_node_pages(const struct remote_backend *rb, uint64_t slots)
{
	return slots * rb->copies;
}

/* a parity page per group of gsize */
static uint64_t parity_node_pages(const struct remote_backend *rb, uint64_t slots)
{
	return slots + (slots + rb->gsize - 1) / rb->gsize;
}

/* none and mirror (rb->copies: 1 or 2) */
static const struct rb_mode mode_copies = {
	.conns = 4,
	.slot_read = rb_copies_slot_read,
	.slot_write = rb_copies_slot_write,
	.spill_io = rb_spill_io,
	.spill_forget = rb_spill_forget,
	.write_slots = rb_copies_write_slots,
	.trim_slots = rb_copies_trim_slots,
	.pass = rb_copies_pass,
	.migrate_slot = rb_copies_migrate_slot,
	.node_pages = copies_node_pages,
};

/* parity and parity-dist (rb->pnode >= 0: parity's dedicated parity
 * node). A recovery worker holds one connection on every node of a group
 * at once (fetch_batch), and there are RECOVER_THREADS of them beside the
 * I/O threads. */
static const struct rb_mode mode_parity = {
	.hold = true,
	.conns = RECOVER_THREADS + 4,
	.open = rb_parity_open,
	.slot_read = rb_pslot_read,
	.slot_write = rb_pslot_write,
	.spill_io = rb_hold_io,
	.spill_forget = rb_hold_forget,
	.write_slots = rb_parity_write_slots,
	.trim_slots = rb_parity_trim_slots,
	.pass = rb_parity_pass,
	.migrate_slot = rb_parity_migrate_slot,
	.node_pages = parity_node_pages,
	.stats = rb_parity_stats,
};

const struct rb_mode *const rb_modes[] = {
	[REMOTE_NONE] = &mode_copies,
	[REMOTE_MIRROR] = &mode_copies,
	[REMOTE_PARITY] = &mode_parity,
	[REMOTE_PARITY_DIST] = &mode_parity,
};

const char *rb_red_name(enum remote_redundancy r)
{
	switch (r) {
	case REMOTE_MIRROR: return "mirror";
	case REMOTE_PARITY: return "parity";
	case REMOTE_PARITY_DIST: return "parity-dist";
	default: return "none";
	}
}
