/* fuzz_nbd_stream.c - libFuzzer target for a whole NBD connection: the
 * input is everything a client sends (handshake, options, requests,
 * payloads), fed to the connection state machine in uneven pieces over a
 * 1 MiB flat backend, with every reply drained. Nothing may crash, read
 * or write out of bounds, or leave the state machine stuck with room to
 * move. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbd/backend_flat.h"
#include "nbd/conn.h"

static struct nbd_export exp = {
	.name = "swap", .size = 1 << 20,
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		  NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES,
	.min_block = 512, .pref_block = 4096, .max_block = 32u << 20,
};
static struct nbd_backend be;
static struct nbd_stats stats;
static struct nbd_conn_ctx ctx = { .exp = &exp, .be = &be, .stats = &stats };
static struct nbd_conn c;
static int ready;

static void drain(void)
{
	const uint8_t *p;
	size_t len;
	while (nbd_conn_send_next(&c, &p, &len)) {
		volatile uint8_t sink = p[0] ^ p[len - 1];   /* touch the bytes */
		(void)sink;
		nbd_conn_sent(&c, len);
		nbd_conn_process(&c);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ready) {
		if (nbd_backend_flat_create(&be, exp.size) < 0 ||
		    nbd_conn_init(&c, &ctx) < 0)
			abort();
		ready = 1;
	}
	nbd_conn_start(&c, 1);
	drain();
	unsigned seed = (unsigned)size * 2654435761u;
	while (size && !nbd_conn_dead(&c) && !nbd_conn_closing(&c)) {
		uint8_t *p;
		size_t room;
		nbd_conn_recv_space(&c, &p, &room);
		if (!room)
			abort();   /* buffers drained yet no room: stuck */
		seed = seed * 1103515245u + 12345u;
		size_t n = 1 + (seed >> 16) % 4096;
		if (n > size) n = size;
		if (n > room) n = room;
		memcpy(p, data, n);
		nbd_conn_received(&c, n);
		nbd_conn_process(&c);
		drain();
		data += n;
		size -= n;
	}
	nbd_conn_stop(&c);
	return 0;
}
