/* proto.h - the NBD wire protocol (NBD project doc/proto.md) as pure
 * functions of bytes: the server greeting, the option haggling decisions and
 * the transmission request checks. Nothing here touches a socket, so the
 * whole parser can be unit-tested and fuzzed on byte strings; conn.c feeds
 * it bytes and sends what it produces.
 *
 * Supported: fixed newstyle with NO_ZEROES; OPT_EXPORT_NAME, OPT_ABORT,
 * OPT_LIST, OPT_INFO, OPT_GO (NBD_INFO_EXPORT, _NAME, _DESCRIPTION,
 * _BLOCK_SIZE); every other option gets NBD_REP_ERR_UNSUP and haggling goes
 * on. Commands READ, WRITE, DISC, FLUSH, TRIM, WRITE_ZEROES with simple
 * replies; flag FUA (and NO_HOLE on WRITE_ZEROES).
 *
 * Threads: all functions are pure (no shared state); call from anywhere. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Magic numbers. */
#define NBD_MAGIC           0x4e42444d41474943ULL /* "NBDMAGIC" */
#define NBD_IHAVEOPT        0x49484156454F5054ULL /* "IHAVEOPT" */
#define NBD_REP_MAGIC       0x3e889045565a9ULL
#define NBD_REQUEST_MAGIC   0x25609513U
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698U

/* Handshake flags (server) and client flags. */
#define NBD_FLAG_FIXED_NEWSTYLE   (1U << 0)
#define NBD_FLAG_NO_ZEROES        (1U << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1U << 0)
#define NBD_FLAG_C_NO_ZEROES      (1U << 1)

/* Transmission flags. */
#define NBD_FLAG_HAS_FLAGS        (1U << 0)
#define NBD_FLAG_READ_ONLY        (1U << 1)
#define NBD_FLAG_SEND_FLUSH       (1U << 2)
#define NBD_FLAG_SEND_FUA         (1U << 3)
#define NBD_FLAG_ROTATIONAL       (1U << 4)
#define NBD_FLAG_SEND_TRIM        (1U << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1U << 6)
#define NBD_FLAG_CAN_MULTI_CONN   (1U << 8)

/* Options. */
#define NBD_OPT_EXPORT_NAME       1
#define NBD_OPT_ABORT             2
#define NBD_OPT_LIST              3
#define NBD_OPT_STARTTLS          5
#define NBD_OPT_INFO              6
#define NBD_OPT_GO                7
#define NBD_OPT_STRUCTURED_REPLY  8

/* Option replies. */
#define NBD_REP_ACK               1U
#define NBD_REP_SERVER            2U
#define NBD_REP_INFO              3U
#define NBD_REP_ERR(n)            ((1U << 31) + (n))
#define NBD_REP_ERR_UNSUP         NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY        NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID       NBD_REP_ERR(3)
#define NBD_REP_ERR_UNKNOWN       NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN      NBD_REP_ERR(7)
#define NBD_REP_ERR_TOO_BIG       NBD_REP_ERR(9)

/* Info types (OPT_INFO / OPT_GO). */
#define NBD_INFO_EXPORT           0
#define NBD_INFO_NAME             1
#define NBD_INFO_DESCRIPTION      2
#define NBD_INFO_BLOCK_SIZE       3

/* Commands and command flags. */
#define NBD_CMD_READ              0
#define NBD_CMD_WRITE             1
#define NBD_CMD_DISC              2
#define NBD_CMD_FLUSH             3
#define NBD_CMD_TRIM              4
#define NBD_CMD_WRITE_ZEROES      6
#define NBD_CMD_FLAG_FUA          (1U << 0)
#define NBD_CMD_FLAG_NO_HOLE      (1U << 1)

/* Errors on the wire (not the host's errno values, though equal on Linux). */
#define NBD_EPERM                 1
#define NBD_EIO                   5
#define NBD_ENOMEM                12
#define NBD_EINVAL                22
#define NBD_ENOSPC                28
#define NBD_ESHUTDOWN             108

/* Sizes of the fixed parts of the protocol. */
#define NBD_GREETING_LEN          18   /* magic, IHAVEOPT, handshake flags */
#define NBD_CLIENT_FLAGS_LEN      4
#define NBD_OPT_HDR_LEN           16
#define NBD_REQ_LEN               28
#define NBD_REPLY_LEN             16
#define NBD_NAME_MAX              4096 /* the spec's bound on any string */
/* The largest option payload we read; longer ones are read and discarded
 * and answered NBD_REP_ERR_TOO_BIG (or closed, for EXPORT_NAME which cannot
 * be answered with an error). INFO/GO: 4 + name + 2 + 2 * requests. */
#define NBD_OPT_DATA_MAX          (NBD_NAME_MAX + 4 + 2 + 2 * 64)
/* Room for every reply one option can produce (LIST: one SERVER reply with
 * the name, INFO/GO: EXPORT, NAME, DESCRIPTION, BLOCK_SIZE, ACK). */
#define NBD_OPT_REPLY_MAX         (3 * (NBD_NAME_MAX + 32) + 256)

/* The one export a server offers. Sizes in bytes. */
struct nbd_export {
	const char *name;        /* "" also selects it (the default export) */
	const char *description; /* may be NULL */
	uint64_t size;
	uint16_t tflags;         /* transmission flags, HAS_FLAGS included */
	uint32_t min_block;      /* power of two: requests must be aligned */
	uint32_t pref_block;
	uint32_t max_block;      /* largest READ/WRITE payload */
};

/* The 18-byte greeting: NBDMAGIC, IHAVEOPT, FIXED_NEWSTYLE | NO_ZEROES. */
void nbd_greeting_build(uint8_t out[NBD_GREETING_LEN]);

/* Client flags: 0 (and *no_zeroes set) or -EPROTO for unknown bits, after
 * which the server must drop the connection. */
int nbd_client_flags_parse(const uint8_t in[NBD_CLIENT_FLAGS_LEN],
			   bool *no_zeroes);

/* Option header: 0 or -EPROTO (bad magic: drop the connection). */
int nbd_opt_hdr_parse(const uint8_t in[NBD_OPT_HDR_LEN], uint32_t *opt,
		      uint32_t *len);

enum nbd_opt_action {
	NBD_OPT_CONTINUE,   /* send the reply, read the next option */
	NBD_OPT_TRANSMIT,   /* send the reply, enter transmission */
	NBD_OPT_CLOSE,      /* send the reply (if any), then close */
};

/* Decide on one option. data holds its len bytes, or is NULL when the
 * client's length exceeded NBD_OPT_DATA_MAX and the bytes were discarded.
 * Writes the reply bytes into out (cap >= NBD_OPT_REPLY_MAX) and their
 * count into *out_len. Never fails: every input gets a protocol answer. */
enum nbd_opt_action nbd_opt_handle(const struct nbd_export *exp,
				   bool no_zeroes, uint32_t opt,
				   const uint8_t *data, uint32_t len,
				   uint8_t *out, size_t cap, size_t *out_len);

struct nbd_req {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t len;
};

/* Request header: 0 or -EPROTO (bad magic: the stream is lost, drop). */
int nbd_req_parse(const uint8_t in[NBD_REQ_LEN], struct nbd_req *r);

/* Check a parsed request against the export: 0 when it may be served,
 * else the NBD error to reply with (NBD_EINVAL: unknown command or flag,
 * misaligned, payload over max_block, read/trim past the end; NBD_ENOSPC:
 * write/write-zeroes past the end). A WRITE's payload follows on the wire
 * whatever the answer, and must be read (or discarded). */
uint32_t nbd_req_check(const struct nbd_req *r, const struct nbd_export *exp);

void nbd_reply_build(uint8_t out[NBD_REPLY_LEN], uint32_t error,
		     uint64_t cookie);

/* A name for logs: "READ", "WRITE", ... or "cmd#N". buf for the fallback. */
const char *nbd_cmd_name(uint16_t type, char *buf, size_t len);
