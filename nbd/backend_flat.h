/* backend_flat.h - a flat anonymous-memory backend (`--store flat`): no
 * tiers, for measuring the protocol path alone. Thread-safe (no shared
 * state besides the bytes, which NBD lets racing writers tear). */
#pragma once
#include "nbd/backend.h"

/* 0 or -ENOMEM. Fills be; be->ops->destroy frees. */
int nbd_backend_flat_create(struct nbd_backend *be, uint64_t size);
