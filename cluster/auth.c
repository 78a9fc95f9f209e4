/* auth.c - the shared-secret handshake; see auth.h for the protocol. */
#include "cluster/auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

int auth_random(uint8_t *buf, size_t n)
{
	return RAND_bytes(buf, (int)n) == 1 ? 0 : -EIO;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

void auth_proof(const uint8_t *secret, size_t secret_len, bool server_role,
		const uint8_t nonce_c[FRAME_NONCE_LEN],
		const uint8_t nonce_s[FRAME_NONCE_LEN],
		uint32_t id_c, uint64_t inc_c, uint32_t id_s, uint64_t inc_s,
		uint8_t out[FRAME_PROOF_LEN])
{
	static const char label_s[] = "nvcache-v1 server";
	static const char label_c[] = "nvcache-v1 client";
	uint8_t msg[sizeof(label_s) + 2 * FRAME_NONCE_LEN + 24];
	size_t n = 0;
	unsigned int outlen = FRAME_PROOF_LEN;

	memcpy(msg, server_role ? label_s : label_c, sizeof(label_s));
	n += sizeof(label_s);
	memcpy(msg + n, nonce_c, FRAME_NONCE_LEN);
	n += FRAME_NONCE_LEN;
	memcpy(msg + n, nonce_s, FRAME_NONCE_LEN);
	n += FRAME_NONCE_LEN;
	put_be32(msg + n, id_c);
	put_be64(msg + n + 4, inc_c);
	put_be32(msg + n + 12, id_s);
	put_be64(msg + n + 16, inc_s);
	n += 24;
	if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, n, out, &outlen))
		memset(out, 0, FRAME_PROOF_LEN); /* never matches a real proof */
}

static bool proof_equal(const uint8_t *a, const uint8_t *b)
{
	return CRYPTO_memcmp(a, b, FRAME_PROOF_LEN) == 0;
}

int auth_client(struct conn *c, const struct auth_identity *me,
		struct auth_peer *peer, const char **why)
{
	static const struct frame_hdr zero;
	struct frame_hdr h = zero, r;
	uint8_t nonce_c[FRAME_NONCE_LEN], expect[FRAME_PROOF_LEN];
	const char *dummy;
	int rc;

	if (!why)
		why = &dummy;
	*why = "";
	if (auth_random(nonce_c, sizeof(nonce_c))) {
		*why = "no random bytes";
		return -EIO;
	}
	h.type = FT_HELLO;
	h.request_id = 1;
	h.node_id = me->node_id;
	h.incarnation = me->incarnation;
	h.proto_version = AUTH_PROTO_VERSION;
	memcpy(h.nonce, nonce_c, sizeof(nonce_c));
	rc = conn_send(c, &h, NULL);
	if (rc)
		return rc;
	rc = conn_recv(c, &r, NULL, why);
	if (rc)
		return rc;
	if (r.type == FT_ERROR) {
		if (r.status == FS_UNSUPPORTED) {
			*why = "the server speaks another protocol version "
			       "(a node of another nvcache build?)";
			return -EPROTONOSUPPORT;
		}
		*why = "the server refused the handshake";
		return -EACCES;
	}
	if (r.type != FT_CHALLENGE || r.reply) {
		*why = "expected CHALLENGE";
		return -EPROTO;
	}
	auth_proof(me->secret, me->secret_len, true, nonce_c, r.nonce, me->node_id,
		   me->incarnation, r.node_id, r.incarnation, expect);
	if (!proof_equal(expect, r.proof)) {
		conn_send_error(c, me->node_id, FS_AUTH_FAILED,
				"server failed to prove the shared secret");
		*why = "the server failed to prove the shared secret";
		return -EACCES;
	}
	peer->node_id = r.node_id;
	peer->incarnation = r.incarnation;

	h = zero;
	h.type = FT_AUTH;
	h.request_id = 2;
	h.node_id = me->node_id;
	h.incarnation = me->incarnation;
	auth_proof(me->secret, me->secret_len, false, nonce_c, r.nonce, me->node_id,
		   me->incarnation, r.node_id, r.incarnation, h.proof);
	rc = conn_send(c, &h, NULL);
	if (rc)
		return rc;
	rc = conn_recv(c, &r, NULL, why);
	if (rc)
		return rc;
	if (r.type != FT_AUTH || !r.reply) {
		*why = r.type == FT_ERROR ? "the server refused us" : "expected AUTH reply";
		return r.type == FT_ERROR ? -EACCES : -EPROTO;
	}
	if (r.status != FS_OK) {
		*why = r.status == FS_AUTH_FAILED ?
		       "the server refused us (wrong secret or unknown node id)" :
		       "the server refused us";
		return -EACCES;
	}
	return 0;
}

int auth_server(struct conn *c, const struct auth_identity *me,
		auth_admit_fn admit, void *arg, struct auth_peer *peer,
		const char **why)
{
	static const struct frame_hdr zero;
	struct frame_hdr h = zero, r;
	uint8_t nonce_s[FRAME_NONCE_LEN], nonce_c[FRAME_NONCE_LEN];
	uint8_t expect[FRAME_PROOF_LEN];
	const char *dummy;
	int rc;

	if (!why)
		why = &dummy;
	*why = "";
	rc = conn_recv(c, &r, NULL, why);
	if (rc == -EBADMSG || rc == -EMSGSIZE || rc == -EPROTO)
		conn_send_error(c, me->node_id, FS_BAD_FRAME, *why);
	if (rc)
		return rc;
	if (r.type != FT_HELLO || r.reply) {
		*why = "first frame is not HELLO";
		conn_send_error(c, me->node_id, FS_NOT_AUTHENTICATED,
				"authenticate first (HELLO)");
		return -EPROTO;
	}
	if (r.proto_version != AUTH_PROTO_VERSION) {
		*why = "the client speaks another protocol version "
		       "(a node or mount of another nvcache build?)";
		conn_send_error(c, me->node_id, FS_UNSUPPORTED,
				"unsupported protocol version");
		return -EPROTO;
	}
	memcpy(nonce_c, r.nonce, sizeof(nonce_c));
	peer->node_id = r.node_id;
	peer->incarnation = r.incarnation;
	if (auth_random(nonce_s, sizeof(nonce_s))) {
		*why = "no random bytes";
		return -EIO;
	}
	h.type = FT_CHALLENGE;
	h.request_id = r.request_id;
	h.node_id = me->node_id;
	h.incarnation = me->incarnation;
	memcpy(h.nonce, nonce_s, sizeof(nonce_s));
	auth_proof(me->secret, me->secret_len, true, nonce_c, nonce_s, peer->node_id,
		   peer->incarnation, me->node_id, me->incarnation, h.proof);
	rc = conn_send(c, &h, NULL);
	if (rc)
		return rc;

	rc = conn_recv(c, &r, NULL, why);
	if (rc)
		return rc;
	if (r.type == FT_ERROR) {
		*why = "the client refused our proof (different secret?)";
		return -EACCES;
	}
	if (r.type != FT_AUTH || r.reply) {
		*why = "expected AUTH";
		conn_send_error(c, me->node_id, FS_NOT_AUTHENTICATED, "expected AUTH");
		return -EPROTO;
	}
	auth_proof(me->secret, me->secret_len, false, nonce_c, nonce_s, peer->node_id,
		   peer->incarnation, me->node_id, me->incarnation, expect);
	h = zero;
	h.type = FT_AUTH;
	h.reply = true;
	h.request_id = r.request_id;
	h.node_id = me->node_id;
	h.incarnation = me->incarnation;
	if (!proof_equal(expect, r.proof)) {
		*why = "wrong proof (the peer does not hold the shared secret)";
		rc = -EACCES;
	} else if (admit && (rc = admit(arg, peer, why)) != 0) {
		rc = -EACCES;
	}
	if (rc) {
		h.status = FS_AUTH_FAILED;
		snprintf(h.text, sizeof(h.text), "%s", *why);
		(void)conn_send(c, &h, NULL);
		return rc;
	}
	return conn_send(c, &h, NULL);
}
