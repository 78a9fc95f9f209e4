/* backend.h - what the NBD server stores pages in. The server knows only
 * this interface, so the node-local tiered store (backend_store.c), flat
 * DRAM (backend_flat.c) and the remote backend spreading pages over
 * nvcached nodes (backend_remote.c, cluster/remote_backend.h) plug in the
 * same way.
 *
 * Offsets and lengths are in bytes, already checked by the protocol layer:
 * inside the export and aligned to its minimum block size (512). A backend
 * handles writes smaller than its page by read-modify-write.
 *
 * Threads: every operation may be called from several server threads at
 * once; the backend does its own locking. No operation may allocate memory
 * (the swap path). Errors are -errno: -EIO, -ENOSPC, -ENOMEM. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct nbd_backend_ops {
	int (*read)(void *priv, void *buf, uint64_t off, uint32_t len);
	int (*write)(void *priv, const void *buf, uint64_t off, uint32_t len);
	/* Optional (NULL: the server copies with read): zero-copy READ, see
	 * tierstore_read_map(). iov[] gets where the bytes of [off, off +
	 * *mapped) are, at most max iovecs; *seen as tierstore_read_map's
	 * (the READ's bytes already presented to the policy). Returns their
	 * count, or -errno;
	 * -EOPNOTSUPP: use read. After a return > 0 the caller sends from
	 * them at once and then calls read_unmap, on the same thread, with
	 * no other backend call between. */
	int (*read_map)(void *priv, uint64_t off, uint32_t len,
			struct iovec *iov, unsigned max, size_t *mapped,
			uint64_t *seen);
	void (*read_unmap)(void *priv);
	/* The range's contents are no longer needed; it reads as zeros
	 * afterwards and its memory goes back to the store. */
	int (*trim)(void *priv, uint64_t off, uint64_t len);
	/* The range must read as zeros. */
	int (*zero)(void *priv, uint64_t off, uint64_t len);
	/* Writes completed before the call are as durable as the backend
	 * makes anything (see docs/nvswapd.md: the swap store is volatile). */
	int (*flush)(void *priv);
	/* Human-readable "key: value" lines; returns bytes written. */
	ssize_t (*stats)(void *priv, char *out, size_t len);
	void (*destroy)(void *priv);
};

struct nbd_backend {
	const struct nbd_backend_ops *ops;
	void *priv;
	uint64_t size;   /* bytes */
};
