/* auth.h - peers prove they hold the cluster's shared secret.
 *
 * Mutual challenge-response over a fresh connection, before anything else:
 *   client -> HELLO      {node id, incarnation, nonce_c}
 *   server -> CHALLENGE  {node id, incarnation, nonce_s,
 *                         proof_s = HMAC-SHA256(secret, "nvcache-v1 server" | T)}
 *   client -> AUTH       {proof_c = HMAC-SHA256(secret, "nvcache-v1 client" | T)}
 *   server -> AUTH reply {status OK, or AUTH_FAILED and the connection closes}
 * where T = nonce_c | nonce_s | both node ids | both incarnations. Both
 * nonces are fresh (OpenSSL RAND_bytes), so a recorded exchange cannot be
 * replayed, and the labels differ, so a proof cannot be reflected back.
 * HMAC-SHA256 (OpenSSL) is the standard keyed hash for this; the secret
 * never travels. Frames after the handshake are not encrypted or signed:
 * the cluster network (loopback by default) is trusted not to be tampered
 * with on the path; the handshake keeps out peers without the secret.
 *
 * Threads: all functions are reentrant; a handshake runs on the thread
 * that owns the conn. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/conn.h"

/* The HELLO's protocol version; a server refuses any other with
 * UNSUPPORTED, so nodes and mounts of builds whose frames mean different
 * things never talk. 2: a file CLOSE's WRITER flag says the mount wrote,
 * and a WRITE may carry EXTEND (the home grows the size). */
#define AUTH_PROTO_VERSION 2

struct auth_identity {
	uint32_t node_id;       /* 0: a client that is not a node */
	uint64_t incarnation;
	const uint8_t *secret;
	size_t secret_len;
};

/* Who the other side proved to be. */
struct auth_peer {
	uint32_t node_id;
	uint64_t incarnation;
};

/* Called by the server once the client's proof checked out: return 0 to
 * admit the peer, or -errno with *why set to refuse it (AUTH_FAILED). */
typedef int (*auth_admit_fn)(void *arg, const struct auth_peer *peer,
			     const char **why);

/* Fill n bytes with cryptographically random bytes. 0 or -EIO. */
int auth_random(uint8_t *buf, size_t n);

/* The proof of role ("server" or "client") over the transcript. */
void auth_proof(const uint8_t *secret, size_t secret_len, bool server_role,
		const uint8_t nonce_c[FRAME_NONCE_LEN],
		const uint8_t nonce_s[FRAME_NONCE_LEN],
		uint32_t id_c, uint64_t inc_c, uint32_t id_s, uint64_t inc_s,
		uint8_t out[FRAME_PROOF_LEN]);

/* Run the client side. 0, or -EACCES (the server refused us, or failed to
 * prove the secret: *why says which), -EPROTONOSUPPORT (the server speaks
 * another AUTH_PROTO_VERSION), -EPROTO (unexpected frame), or an I/O
 * error from conn_send/conn_recv. */
int auth_client(struct conn *c, const struct auth_identity *me,
		struct auth_peer *peer, const char **why);
/* Run the server side. Same returns; on -EACCES the client has been told
 * (AUTH reply with AUTH_FAILED) and the caller should log and close. */
int auth_server(struct conn *c, const struct auth_identity *me,
		auth_admit_fn admit, void *arg, struct auth_peer *peer,
		const char **why);
