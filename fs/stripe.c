/* stripe.c - stripe arithmetic; see stripe.h. */
#include "fs/stripe.h"

#include <errno.h>

int stripe_map_init(struct stripe_map *m, uint64_t unit, uint32_t nmgr,
		    uint32_t first, uint64_t file_size, uint32_t align)
{
	if (!nmgr || !align)
		return -EINVAL;
	if (!unit) {
		unit = (file_size + nmgr - 1) / nmgr;
		unit = (unit + align - 1) / align * align;
		if (!unit)
			unit = align;
	}
	if (unit % align)
		return -EINVAL;
	m->unit = unit;
	m->nmgr = nmgr;
	m->first = first % nmgr;
	return 0;
}

uint32_t stripe_owner(const struct stripe_map *m, uint64_t off)
{
	return (uint32_t)((off / m->unit + m->first) % m->nmgr);
}

void stripe_locate(const struct stripe_map *m, uint64_t off, uint64_t len,
		   struct stripe_loc *out)
{
	uint64_t in = off % m->unit;

	out->stripe = off / m->unit;
	out->mgr = (uint32_t)((out->stripe + m->first) % m->nmgr);
	out->off = in;
	out->len = m->unit - in < len ? m->unit - in : len;
}
