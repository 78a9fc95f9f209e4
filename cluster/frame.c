/* frame.c - encode and validate cluster frames; see frame.h for the layout.
 * The decoder trusts nothing: lengths first, CRC second, protobuf third,
 * then every enum, body and payload size against the message type. */
#include "cluster/frame.h"

#include "common/crc32c.h"
#include "nvcache.pb-c.h"

#include <errno.h>
#include <string.h>

_Static_assert((int)NVCACHE__MSG_TYPE__MSG_ERROR == (int)FT_ERROR, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_OWNER_RESET == (int)FT_OWNER_RESET, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_NODE_STATS == (int)FT_NODE_STATS, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_PAGE_FETCH_MANY == (int)FT_PAGE_FETCH_MANY, "proto enum");
_Static_assert(FRAME_STATS_CHUNK <= FRAME_MAX_CONN_PAYLOAD, "a chunk fits a connection's buffer");
_Static_assert(FRAME_MAX_CONN_PAYLOAD <= FRAME_MAX_PAYLOAD, "a batch fits a frame");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_NODE_TABLE == (int)FT_NODE_TABLE, "proto enum");
_Static_assert((int)NVCACHE__STATUS__ST_INTERNAL == (int)FS_INTERNAL, "proto enum");
_Static_assert((int)NVCACHE__STATUS__ST_PARITY_LOST == (int)FS_PARITY_LOST, "proto enum");
_Static_assert((int)NVCACHE__STATUS__ST_INVALID == (int)FS_INVALID, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_FILE_LOCK == (int)FT_FILE_LOCK, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_PAGE_OVERWRITE == (int)FT_PAGE_OVERWRITE, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_PAGE_STORE_MANY == (int)FT_PAGE_STORE_MANY, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_PAGE_OVERWRITE_MANY == (int)FT_PAGE_OVERWRITE_MANY, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_PARITY_UPDATE_MANY == (int)FT_PARITY_UPDATE_MANY, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_PAGE_DROP_MANY == (int)FT_PAGE_DROP_MANY, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_FILE_ATTACH == (int)FT_FILE_ATTACH, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_FILE_DROP == (int)FT_FILE_DROP, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_FILE_SHADOW == (int)FT_FILE_SHADOW, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_FILE_INVAL == (int)FT_FILE_INVAL, "proto enum");
_Static_assert((int)NVCACHE__MSG_TYPE__MSG_FILE_WATCH == (int)FT_FILE_WATCH, "proto enum");
_Static_assert(2 * FRAME_FILE_MAX_BLOCK <= FRAME_MAX_CONN_PAYLOAD, "a file write fits a connection's buffer");
_Static_assert((int)NVCACHE__PAGE_KIND__PK_PARITY == (int)FK_PARITY, "proto enum");
_Static_assert((int)NVCACHE__NODE_STATE__NS_SELF == (int)FN_SELF, "proto enum");

/* The unpack arena: a legal header (64 node entries at most) needs well
 * under half of it; a hostile one fails to unpack when it runs out. */
#define ARENA_SIZE (48 * 1024)

struct arena {
	size_t used;
	_Alignas(16) unsigned char mem[ARENA_SIZE];
};

static void *arena_alloc(void *data, size_t size)
{
	struct arena *a = data;
	size_t need = (size + 15) & ~(size_t)15;

	if (size > ARENA_SIZE || need > ARENA_SIZE - a->used)
		return NULL;
	void *p = a->mem + a->used;
	a->used += need;
	return p;
}

static void arena_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr; /* the whole arena goes at once */
}

static void put_be16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static uint16_t get_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool frame_type_file(uint32_t type)
{
	return type >= FT_FILE_ATTACH && type <= FT_FILE_WATCH;
}

bool frame_type_known(uint32_t type)
{
	return (type > FT_INVALID && type <= FT_PAGE_DROP_MANY) ||
	       frame_type_file(type) || type == FT_FILE_LOCK;
}

/* A file message's payload against its FileOp: every length within its
 * cap before anyone uses it (the service checks its own block size). */
static int file_payload_check(uint32_t type, bool reply, uint32_t status,
			      const struct frame_fop *f, uint32_t payload_len,
			      const char **why)
{
	uint64_t want = 0;

	if ((uint64_t)f->off + f->len > FRAME_FILE_MAX_BLOCK ||
	    f->base_len > FRAME_FILE_MAX_BLOCK) {
		*why = "file range over the block cap";
		return -EPROTO;
	}
	if (!reply) {
		switch (type) {
		case FT_FILE_ATTACH:
			if (!f->len || f->len > FRAME_FILE_MAX_PATH ||
			    f->base_len > FRAME_FILE_MAX_HANDLE) {
				*why = "ATTACH path or handle length out of range";
				return -EPROTO;
			}
			want = (uint64_t)f->len + f->base_len;
			break;
		case FT_FILE_OPEN:
			if (!f->len || f->len > FRAME_FILE_MAX_HANDLE) {
				*why = "OPEN handle length out of range";
				return -EPROTO;
			}
			want = f->len;
			break;
		case FT_FILE_WRITE:
			if (!f->len) {
				*why = "empty FILE_WRITE";
				return -EPROTO;
			}
			want = (uint64_t)f->base_len + f->len;
			break;
		case FT_FILE_READ:
			if (!f->len) {
				*why = "empty FILE_READ";
				return -EPROTO;
			}
			break;
		case FT_FILE_MARK:
			if (f->flags & FRAME_MARK_REPLICA) {
				/* the file's handle, then the block's bytes */
				if ((f->flags & ~FRAME_MARK_RANGE) != FRAME_MARK_REPLICA ||
				    !f->base_len || f->base_len > FRAME_FILE_MAX_HANDLE ||
				    ((f->flags & FRAME_MARK_RANGE) &&
				     (!f->len || f->size > f->gen ||
				      f->len > f->gen - f->size))) {
					*why = "MARK REPLICA's flags, handle or range do not fit";
					return -EPROTO;
				}
				want = (uint64_t)f->base_len + f->len;
				break;
			}
			if (f->len % 8 || (f->len && !(f->flags & (FRAME_MARK_SET |
							  FRAME_MARK_CLEAR)))) {
				*why = "MARK's block list does not fit";
				return -EPROTO;
			}
			want = f->len;
			break;
		default:
			break;
		}
	} else if (type == FT_FILE_READ && status == FS_OK) {
		want = f->len;
	} else if (type == FT_FILE_WATCH && status == FS_OK) {
		if (f->len % 8 || f->len > FRAME_WATCH_MAX * 8) {
			*why = "WATCH reply's file list does not fit";
			return -EPROTO;
		}
		want = f->len;
	}
	if (payload_len != want) {
		*why = "payload size does not fit the file message";
		return -EPROTO;
	}
	return 0;
}

long frame_payload_expected(uint32_t type, bool reply, uint32_t status)
{
	if (frame_type_file(type))
		return -1;
	switch (type) {
	case FT_PAGE_STORE:
	case FT_PARITY_UPDATE:
	case FT_MIGRATE:
	case FT_PAGE_OVERWRITE:
		return reply ? 0 : FRAME_PAGE_SIZE;
	case FT_PAGE_FETCH:
		return reply && status == FS_OK ? FRAME_PAGE_SIZE : 0;
	case FT_NODE_STATS:
		return reply && status == FS_OK ? -1 : 0;
	case FT_PAGE_FETCH_MANY:
	case FT_PAGE_STORE_MANY:
	case FT_PAGE_OVERWRITE_MANY:
	case FT_PARITY_UPDATE_MANY:
	case FT_PAGE_DROP_MANY:
		return !reply || status == FS_OK ? -1 : 0;
	default:
		return 0;
	}
}

int frame_prefix_parse(const uint8_t prefix[FRAME_PREFIX], uint32_t *hdr_len,
		       uint32_t *payload_len, const char **why)
{
	const char *dummy;

	if (!why)
		why = &dummy;
	if (get_be32(prefix) != FRAME_MAGIC) {
		*why = "bad magic (not an nvcache cluster peer?)";
		return -EBADMSG;
	}
	if (prefix[4] != FRAME_VERSION) {
		*why = "unsupported protocol version";
		return -EBADMSG;
	}
	if (prefix[5] != 0) {
		*why = "reserved prefix byte not zero";
		return -EBADMSG;
	}
	*hdr_len = get_be16(prefix + 6);
	*payload_len = get_be32(prefix + 8);
	if (*hdr_len > FRAME_MAX_HEADER) {
		*why = "header length over its cap";
		return -EMSGSIZE;
	}
	if (*payload_len > FRAME_MAX_PAYLOAD) {
		*why = "payload length over its cap";
		return -EMSGSIZE;
	}
	return 0;
}

static int copy_bytes(uint8_t *dst, size_t dstlen, ProtobufCBinaryData b,
		      const char **why, const char *what)
{
	if (b.len != dstlen || !b.data) {
		*why = what;
		return -EPROTO;
	}
	memcpy(dst, b.data, dstlen);
	return 0;
}

static void copy_capacity(struct frame_capacity *c, const Nvcache__Capacity *p)
{
	if (!p)
		return;
	c->offered = p->offered_bytes;
	c->used = p->used_bytes;
	c->mem_available = p->mem_available_bytes;
}

/* The body a frame of this shape must carry (0: none, except that replies
 * with a non-OK status may carry an ERROR body with text). */
static int body_expected(uint32_t type, bool reply, uint32_t status)
{
	if (type == FT_ERROR)
		return NVCACHE__HEADER__BODY_ERROR;
	if (type == FT_FILE_LOCK)
		return NVCACHE__HEADER__BODY_LOCK;
	if (frame_type_file(type))
		return NVCACHE__HEADER__BODY_FILE;
	if (reply)
		return type == FT_NODE_TABLE && status == FS_OK ?
		       NVCACHE__HEADER__BODY_TABLE : 0;
	switch (type) {
	case FT_HELLO: return NVCACHE__HEADER__BODY_HELLO;
	case FT_CHALLENGE: return NVCACHE__HEADER__BODY_CHALLENGE;
	case FT_AUTH: return NVCACHE__HEADER__BODY_AUTH;
	case FT_HEARTBEAT: return NVCACHE__HEADER__BODY_HEARTBEAT;
	case FT_MIGRATE: return NVCACHE__HEADER__BODY_MIGRATE;
	case FT_UPDATE: return NVCACHE__HEADER__BODY_UPDATE;
	case FT_INVALIDATE: return NVCACHE__HEADER__BODY_INVALIDATE;
	case FT_PAGE_OVERWRITE: return NVCACHE__HEADER__BODY_OVERWRITE;
	default: return 0;
	}
}

static int text_copy(char *dst, const char *src, const char **why)
{
	size_t n = src ? strlen(src) : 0;

	if (n > FRAME_MAX_TEXT) {
		*why = "error text too long";
		return -EMSGSIZE;
	}
	if (n)
		memcpy(dst, src, n);
	dst[n] = 0;
	return 0;
}

static int lock_copy(struct frame_lock *l, const Nvcache__FileLock *m,
		     const char **why)
{
	if (m->op >= FL_COUNT || m->cls > 1 || m->type > 2) {
		*why = "FILE_LOCK op, class or type out of range";
		return -EPROTO;
	}
	if (m->start > m->end || m->end > FRAME_LOCK_EOF) {
		*why = "FILE_LOCK range out of order or past its end";
		return -EPROTO;
	}
	if (m->node > FRAME_MAX_NODE_ID) {
		*why = "node id out of range";
		return -EPROTO;
	}
	/* field by field: *l's padding stays as the caller zeroed it */
	l->obj = m->obj;
	l->op = m->op;
	l->cls = m->cls;
	l->type = m->type;
	l->start = m->start;
	l->end = m->end;
	l->wait = m->wait;
	l->wait_id = m->wait_id;
	l->node = m->node;
	l->session = m->session;
	l->owner = m->owner;
	l->pid = m->pid;
	l->reclaim = m->reclaim;
	return 0;
}

/* Check the unpacked header against the rules of its type and copy it out. */
static int header_validate(const Nvcache__Header *m, uint32_t payload_len,
			   struct frame_hdr *h, const char **why)
{
	uint32_t type = (uint32_t)m->type, status = (uint32_t)m->status;
	uint32_t kind = (uint32_t)m->kind;
	int rc;

	memset(h, 0, sizeof(*h));
	if (!frame_type_known(type)) {
		*why = "unknown message type";
		return -EPROTO;
	}
	if (status >= FS_COUNT) {
		*why = "unknown status";
		return -EPROTO;
	}
	if (kind >= FK_COUNT) {
		*why = "unknown page kind";
		return -EPROTO;
	}
	if (m->node_id > FRAME_MAX_NODE_ID) {
		*why = "node id out of range";
		return -EPROTO;
	}
	if (m->payload_len != payload_len) {
		*why = "header and prefix disagree on the payload length";
		return -EPROTO;
	}
	if (type == FT_ERROR && m->reply) {
		*why = "an ERROR frame is never a reply";
		return -EPROTO;
	}
	if (!m->reply && status != FS_OK && type != FT_ERROR) {
		*why = "status on a request";
		return -EPROTO;
	}
	long expect = frame_payload_expected(type, m->reply, status);
	/* a batch: whole entries, with a page each where pages travel */
	bool batch = type == FT_PAGE_FETCH_MANY || type == FT_PAGE_STORE_MANY ||
		     type == FT_PAGE_OVERWRITE_MANY || type == FT_PARITY_UPDATE_MANY ||
		     type == FT_PAGE_DROP_MANY;
	bool paged = type != FT_PAGE_DROP_MANY &&
		     (type == FT_PAGE_FETCH_MANY) == (bool)m->reply;
	uint32_t entry = type == FT_PAGE_OVERWRITE_MANY && !m->reply ?
			 FRAME_OW_ENTRY : FRAME_BATCH_ENTRY;
	uint32_t unit = paged ? entry + FRAME_PAGE_SIZE : entry;
	bool var_ok = batch ? payload_len && payload_len % unit == 0 &&
			      payload_len / unit <= FRAME_BATCH_MAX :
			      payload_len <= FRAME_STATS_CHUNK;
	if (!frame_type_file(type) &&
	    (expect < 0 ? !var_ok : (long)payload_len != expect)) {
		*why = "payload size does not fit the message type";
		return -EPROTO;
	}
	/* A stats chunk lies within the text, and the text within its cap
	 * (page_id <= 64 KiB, so the sum cannot overflow). */
	if (type == FT_NODE_STATS && m->page_id > FRAME_MAX_STATS) {
		*why = "stats offset over its cap";
		return -EPROTO;
	}
	if (type == FT_NODE_STATS && m->reply && status == FS_OK &&
	    (m->version > FRAME_MAX_STATS ||
	     m->page_id + payload_len > m->version)) {
		*why = "stats chunk outside the text's length";
		return -EPROTO;
	}
	int want = body_expected(type, m->reply, status);
	int have = m->body_case;
	/* a failed reply may carry text instead of its body (as the
	 * encoder sends it), except FILE_LOCK's: its body names the lock
	 * in the way, and the encoder always sends it */
	bool error_text = have == NVCACHE__HEADER__BODY_ERROR && m->reply &&
			  status != FS_OK && type != FT_FILE_LOCK;
	if (have != want && !error_text) {
		*why = want ? "missing or wrong body for the message type" :
			      "unexpected body for the message type";
		return -EPROTO;
	}

	if (frame_type_file(type) && have != NVCACHE__HEADER__BODY_FILE &&
	    payload_len) {
		*why = "payload size does not fit the file message";
		return -EPROTO;
	}

	h->type = m->type;
	h->reply = m->reply;
	h->request_id = m->request_id;
	h->node_id = m->node_id;
	h->incarnation = m->incarnation;
	h->status = m->status;
	h->kind = m->kind;
	h->owner = m->owner;
	h->page_id = m->page_id;
	h->version = m->version;
	h->parity_group = m->parity_group;
	h->payload_len = payload_len;

	switch (have) {
	case NVCACHE__HEADER__BODY_HELLO:
		h->proto_version = m->hello->proto_version;
		return copy_bytes(h->nonce, FRAME_NONCE_LEN, m->hello->nonce, why,
				  "HELLO nonce must be 32 bytes");
	case NVCACHE__HEADER__BODY_CHALLENGE:
		rc = copy_bytes(h->nonce, FRAME_NONCE_LEN, m->challenge->nonce, why,
				"CHALLENGE nonce must be 32 bytes");
		if (rc)
			return rc;
		return copy_bytes(h->proof, FRAME_PROOF_LEN, m->challenge->proof,
				  why, "CHALLENGE proof must be 32 bytes");
	case NVCACHE__HEADER__BODY_AUTH:
		return copy_bytes(h->proof, FRAME_PROOF_LEN, m->auth->proof, why,
				  "AUTH proof must be 32 bytes");
	case NVCACHE__HEADER__BODY_HEARTBEAT:
		h->hb_seq = m->heartbeat->seq;
		h->hb_interval_ms = m->heartbeat->interval_ms;
		copy_capacity(&h->cap, m->heartbeat->capacity);
		return 0;
	case NVCACHE__HEADER__BODY_TABLE:
		if (m->table->n_nodes > FRAME_MAX_NODES) {
			*why = "node table longer than its cap";
			return -EMSGSIZE;
		}
		h->n_nodes = (uint32_t)m->table->n_nodes;
		for (uint32_t i = 0; i < h->n_nodes; i++) {
			const Nvcache__NodeEntry *e = m->table->nodes[i];
			if (e->node_id > FRAME_MAX_NODE_ID ||
			    (uint32_t)e->state >= FN_COUNT) {
				*why = "bad node table entry";
				return -EPROTO;
			}
			h->nodes[i].node_id = e->node_id;
			h->nodes[i].incarnation = e->incarnation;
			h->nodes[i].state = e->state;
			h->nodes[i].age_ms = e->age_ms;
			copy_capacity(&h->nodes[i].cap, e->capacity);
		}
		return 0;
	case NVCACHE__HEADER__BODY_MIGRATE:
		h->peer_node = m->migrate->from_node;
		break;
	case NVCACHE__HEADER__BODY_UPDATE:
		h->peer_node = m->update->new_server;
		break;
	case NVCACHE__HEADER__BODY_INVALIDATE:
		h->peer_node = m->invalidate->new_server;
		break;
	case NVCACHE__HEADER__BODY_OVERWRITE:
		h->peer_node = m->overwrite->parity_node;
		h->old_version = m->overwrite->old_version;
		h->parity_version = m->overwrite->parity_version;
		break;
	case NVCACHE__HEADER__BODY_ERROR:
		return text_copy(h->text, m->error->text, why);
	case NVCACHE__HEADER__BODY_LOCK:
		return lock_copy(&h->lk, m->lock, why);
	case NVCACHE__HEADER__BODY_FILE:
		h->fop.obj = m->file->obj;
		h->fop.blk = m->file->blk;
		h->fop.off = m->file->off;
		h->fop.len = m->file->len;
		h->fop.size = m->file->size;
		h->fop.flags = m->file->flags;
		h->fop.gen = m->file->gen;
		h->fop.base_len = m->file->base_len;
		h->fop.digest = m->file->digest;
		h->fop.handle_type = m->file->handle_type;
		h->fop.epoch = m->file->epoch;
		h->fop.token = m->file->token;
		return file_payload_check(type, m->reply, status, &h->fop,
					  payload_len, why);
	default:
		return 0;
	}
	if (h->peer_node > FRAME_MAX_NODE_ID) {
		*why = "node id out of range";
		return -EPROTO;
	}
	return 0;
}

/* The checks and the decoding of a frame whose prefix and header are in
 * head and whose payload (pl bytes) is at payload, wherever that is. */
static int decode_parts(const uint8_t *head, uint32_t hl, const uint8_t *payload,
			uint32_t pl, struct frame_hdr *out, const char **why)
{
	uint32_t crc = crc32c(0, head, 12);
	crc = crc32c(crc, head + FRAME_PREFIX, hl);
	if (pl)
		crc = crc32c(crc, payload, pl);
	if (crc != get_be32(head + 12)) {
		*why = "CRC mismatch";
		return -EBADMSG;
	}

	struct arena ar;
	ar.used = 0;
	ProtobufCAllocator alloc = {
		.alloc = arena_alloc, .free = arena_free, .allocator_data = &ar,
	};
	Nvcache__Header *m = nvcache__header__unpack(&alloc, hl, head + FRAME_PREFIX);
	if (!m) {
		*why = "unparsable header";
		return -EBADMSG;
	}
	/* Nothing to free: the arena dies with this frame. */
	return header_validate(m, pl, out, why);
}

ssize_t frame_decode(const uint8_t *buf, size_t len, struct frame_hdr *out,
		     const uint8_t **payload, const char **why)
{
	const char *dummy;
	uint32_t hl, pl;
	int rc;

	if (!why)
		why = &dummy;
	if (len < FRAME_PREFIX) {
		*why = "truncated frame prefix";
		return -EAGAIN;
	}
	rc = frame_prefix_parse(buf, &hl, &pl, why);
	if (rc)
		return rc;
	size_t total = (size_t)FRAME_PREFIX + hl + pl;
	if (len < total) {
		*why = "truncated frame";
		return -EAGAIN;
	}
	rc = decode_parts(buf, hl, buf + FRAME_PREFIX + hl, pl, out, why);
	if (rc)
		return rc;
	if (payload)
		*payload = pl ? buf + FRAME_PREFIX + hl : NULL;
	return (ssize_t)total;
}

int frame_decode_split(const uint8_t *head, size_t head_len, const uint8_t *payload,
		       size_t payload_len, struct frame_hdr *out, const char **why)
{
	const char *dummy;
	uint32_t hl, pl;
	int rc;

	if (!why)
		why = &dummy;
	if (head_len < FRAME_PREFIX) {
		*why = "truncated frame prefix";
		return -EAGAIN;
	}
	rc = frame_prefix_parse(head, &hl, &pl, why);
	if (rc)
		return rc;
	if (head_len != (size_t)FRAME_PREFIX + hl || payload_len != pl ||
	    (pl && !payload)) {
		*why = "frame parts of other lengths than its prefix says";
		return -EINVAL;
	}
	return decode_parts(head, hl, payload, pl, out, why);
}

ssize_t frame_encode(const struct frame_hdr *h, const void *payload,
		     uint8_t *out, size_t outlen)
{
	struct iovec iov = { .iov_base = (void *)payload, .iov_len = h->payload_len };

	if (h->payload_len && !payload)
		return -EINVAL;
	return frame_encode_iov(h, &iov, h->payload_len ? 1 : 0, out, outlen);
}

ssize_t frame_encode_iov(const struct frame_hdr *h, const struct iovec *iov,
			 unsigned niov, uint8_t *out, size_t outlen)
{
	size_t plen = 0;

	for (unsigned k = 0; k < niov; k++) {
		if (iov[k].iov_len && !iov[k].iov_base)
			return -EINVAL;
		plen += iov[k].iov_len;
	}
	if (plen != h->payload_len)
		return -EINVAL;
	Nvcache__Header m = NVCACHE__HEADER__INIT;
	Nvcache__Hello hello = NVCACHE__HELLO__INIT;
	Nvcache__Challenge chal = NVCACHE__CHALLENGE__INIT;
	Nvcache__AuthProof auth = NVCACHE__AUTH_PROOF__INIT;
	Nvcache__Heartbeat hb = NVCACHE__HEARTBEAT__INIT;
	Nvcache__Capacity cap = NVCACHE__CAPACITY__INIT;
	Nvcache__NodeTable table = NVCACHE__NODE_TABLE__INIT;
	Nvcache__NodeEntry ents[FRAME_MAX_NODES];
	Nvcache__NodeEntry *entp[FRAME_MAX_NODES];
	Nvcache__Capacity ecaps[FRAME_MAX_NODES];
	Nvcache__Migrate mig = NVCACHE__MIGRATE__INIT;
	Nvcache__Update upd = NVCACHE__UPDATE__INIT;
	Nvcache__Invalidate inv = NVCACHE__INVALIDATE__INIT;
	Nvcache__Overwrite ow = NVCACHE__OVERWRITE__INIT;
	Nvcache__ErrorInfo err = NVCACHE__ERROR_INFO__INIT;
	Nvcache__FileLock lk = NVCACHE__FILE_LOCK__INIT;
	Nvcache__FileOp fop = NVCACHE__FILE_OP__INIT;
	const char *why;

	if (outlen < FRAME_MAX_HEAD)
		return -EINVAL;
	if (h->payload_len > FRAME_MAX_PAYLOAD || h->n_nodes > FRAME_MAX_NODES)
		return -EMSGSIZE;

	m.type = h->type;
	m.reply = h->reply;
	m.request_id = h->request_id;
	m.node_id = h->node_id;
	m.incarnation = h->incarnation;
	m.status = h->status;
	m.kind = h->kind;
	m.owner = h->owner;
	m.page_id = h->page_id;
	m.version = h->version;
	m.parity_group = h->parity_group;
	m.payload_len = h->payload_len;

	int body = body_expected(h->type, h->reply, h->status);
	/* a refusal's text goes instead of a body, a file reply's FileOp too */
	if ((!body || frame_type_file(h->type)) && h->reply &&
	    h->status != FS_OK && h->text[0])
		body = NVCACHE__HEADER__BODY_ERROR;
	m.body_case = body;
	switch (body) {
	case NVCACHE__HEADER__BODY_HELLO:
		hello.proto_version = h->proto_version;
		hello.nonce.data = (uint8_t *)h->nonce;
		hello.nonce.len = FRAME_NONCE_LEN;
		m.hello = &hello;
		break;
	case NVCACHE__HEADER__BODY_CHALLENGE:
		chal.nonce.data = (uint8_t *)h->nonce;
		chal.nonce.len = FRAME_NONCE_LEN;
		chal.proof.data = (uint8_t *)h->proof;
		chal.proof.len = FRAME_PROOF_LEN;
		m.challenge = &chal;
		break;
	case NVCACHE__HEADER__BODY_AUTH:
		auth.proof.data = (uint8_t *)h->proof;
		auth.proof.len = FRAME_PROOF_LEN;
		m.auth = &auth;
		break;
	case NVCACHE__HEADER__BODY_HEARTBEAT:
		hb.seq = h->hb_seq;
		hb.interval_ms = h->hb_interval_ms;
		cap.offered_bytes = h->cap.offered;
		cap.used_bytes = h->cap.used;
		cap.mem_available_bytes = h->cap.mem_available;
		hb.capacity = &cap;
		m.heartbeat = &hb;
		break;
	case NVCACHE__HEADER__BODY_TABLE:
		for (uint32_t i = 0; i < h->n_nodes; i++) {
			const struct frame_node *n = &h->nodes[i];
			nvcache__node_entry__init(&ents[i]);
			nvcache__capacity__init(&ecaps[i]);
			ents[i].node_id = n->node_id;
			ents[i].incarnation = n->incarnation;
			ents[i].state = n->state;
			ents[i].age_ms = n->age_ms;
			ecaps[i].offered_bytes = n->cap.offered;
			ecaps[i].used_bytes = n->cap.used;
			ecaps[i].mem_available_bytes = n->cap.mem_available;
			ents[i].capacity = &ecaps[i];
			entp[i] = &ents[i];
		}
		table.n_nodes = h->n_nodes;
		table.nodes = entp;
		m.table = &table;
		break;
	case NVCACHE__HEADER__BODY_MIGRATE:
		mig.from_node = h->peer_node;
		m.migrate = &mig;
		break;
	case NVCACHE__HEADER__BODY_UPDATE:
		upd.new_server = h->peer_node;
		m.update = &upd;
		break;
	case NVCACHE__HEADER__BODY_INVALIDATE:
		inv.new_server = h->peer_node;
		m.invalidate = &inv;
		break;
	case NVCACHE__HEADER__BODY_OVERWRITE:
		ow.parity_node = h->peer_node;
		ow.old_version = h->old_version;
		ow.parity_version = h->parity_version;
		m.overwrite = &ow;
		break;
	case NVCACHE__HEADER__BODY_ERROR:
		/* text is NUL-terminated within its array by contract; bound it
		 * anyway so a caller's bug cannot make us read past it. */
		if (!memchr(h->text, 0, sizeof(h->text)))
			return -EMSGSIZE;
		err.text = (char *)h->text;
		m.error = &err;
		break;
	case NVCACHE__HEADER__BODY_LOCK:
		lk.obj = h->lk.obj;
		lk.op = h->lk.op;
		lk.cls = h->lk.cls;
		lk.type = h->lk.type;
		lk.start = h->lk.start;
		lk.end = h->lk.end;
		lk.wait = h->lk.wait;
		lk.wait_id = h->lk.wait_id;
		lk.node = h->lk.node;
		lk.session = h->lk.session;
		lk.owner = h->lk.owner;
		lk.pid = h->lk.pid;
		lk.reclaim = h->lk.reclaim;
		m.lock = &lk;
		break;
	case NVCACHE__HEADER__BODY_FILE:
		fop.obj = h->fop.obj;
		fop.blk = h->fop.blk;
		fop.off = h->fop.off;
		fop.len = h->fop.len;
		fop.size = h->fop.size;
		fop.flags = h->fop.flags;
		fop.gen = h->fop.gen;
		fop.base_len = h->fop.base_len;
		fop.digest = h->fop.digest;
		fop.handle_type = h->fop.handle_type;
		fop.epoch = h->fop.epoch;
		fop.token = h->fop.token;
		m.file = &fop;
		break;
	default:
		break;
	}

	size_t hl = nvcache__header__get_packed_size(&m);
	if (hl > FRAME_MAX_HEADER)
		return -EMSGSIZE;
	nvcache__header__pack(&m, out + FRAME_PREFIX);

	/* Run the receiver's checks on what we built: the rules live in one
	 * place (header_validate) and we never send a frame a peer refuses. */
	{
		struct arena ar;
		ar.used = 0;
		ProtobufCAllocator alloc = {
			.alloc = arena_alloc, .free = arena_free,
			.allocator_data = &ar,
		};
		struct frame_hdr check;
		Nvcache__Header *back = nvcache__header__unpack(&alloc, hl,
								 out + FRAME_PREFIX);
		if (!back)
			return -EPROTO;
		int rc = header_validate(back, h->payload_len, &check, &why);
		if (rc)
			return rc;
	}

	put_be32(out, FRAME_MAGIC);
	out[4] = FRAME_VERSION;
	out[5] = 0;
	put_be16(out + 6, (uint16_t)hl);
	put_be32(out + 8, h->payload_len);
	uint32_t crc = crc32c(0, out, 12);
	crc = crc32c(crc, out + FRAME_PREFIX, hl);
	for (unsigned k = 0; k < niov; k++)
		crc = crc32c(crc, iov[k].iov_base, iov[k].iov_len);
	put_be32(out + 12, crc);
	return (ssize_t)(FRAME_PREFIX + hl);
}

const char *frame_type_name(uint32_t type)
{
	static const char *const names[FT_COUNT] = {
		"INVALID", "HELLO", "CHALLENGE", "AUTH", "HEARTBEAT",
		"PAGE_STORE", "PAGE_FETCH", "PAGE_DROP", "PARITY_UPDATE",
		"MIGRATE", "UPDATE", "INVALIDATE", "NODE_TABLE", "ERROR",
		"OWNER_RESET", "NODE_STATS", "PAGE_FETCH_MANY", "PAGE_OVERWRITE",
		"PAGE_STORE_MANY", "PAGE_OVERWRITE_MANY", "PARITY_UPDATE_MANY",
		"PAGE_DROP_MANY",
		[FT_FILE_LOCK] = "FILE_LOCK",
		[FT_FILE_ATTACH] = "FILE_ATTACH", [FT_FILE_OPEN] = "FILE_OPEN",
		[FT_FILE_CLOSE] = "FILE_CLOSE", [FT_FILE_GETATTR] = "FILE_GETATTR",
		[FT_FILE_SETSIZE] = "FILE_SETSIZE", [FT_FILE_UNLINK] = "FILE_UNLINK",
		[FT_FILE_READ] = "FILE_READ", [FT_FILE_WRITE] = "FILE_WRITE",
		[FT_FILE_TRUNC] = "FILE_TRUNC", [FT_FILE_WRITEBACK] = "FILE_WRITEBACK",
		[FT_FILE_DROP] = "FILE_DROP", [FT_FILE_MARK] = "FILE_MARK",
		[FT_FILE_SHADOW] = "FILE_SHADOW", [FT_FILE_INVAL] = "FILE_INVAL",
		[FT_FILE_WATCH] = "FILE_WATCH",
	};
	return frame_type_known(type) ? names[type] : "UNKNOWN";
}

const char *frame_status_name(uint32_t status)
{
	static const char *const names[FS_COUNT] = {
		"ok", "stale version", "not found", "no space", "bad frame",
		"authentication failed", "unsupported", "not authenticated",
		"internal error", "stored, parity not updated",
		"would block", "deadlock", "no locks left", "in progress",
		"invalid",
	};
	return status < FS_COUNT ? names[status] : "unknown status";
}

int frame_status_errno(uint32_t status)
{
	switch (status) {
	case FS_OK: return 0;
	case FS_STALE: return -ESTALE;
	case FS_NOT_FOUND: return -ENOENT;
	case FS_NO_SPACE: return -ENOSPC;
	case FS_BAD_FRAME: return -EPROTO;
	case FS_AUTH_FAILED: return -EACCES;
	case FS_UNSUPPORTED: return -EOPNOTSUPP;
	case FS_NOT_AUTHENTICATED: return -EPERM;
	case FS_PARITY_LOST: return -EREMOTEIO;
	case FS_WOULD_BLOCK: return -EAGAIN;
	case FS_DEADLOCK: return -EDEADLK;
	case FS_NO_LOCKS: return -ENOLCK;
	case FS_IN_PROGRESS: return -EINPROGRESS;
	case FS_INVALID: return -EINVAL;
	default: return -EIO;
	}
}
