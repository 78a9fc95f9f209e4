/* frame.h - the cluster wire format: length-prefixed frames of a protobuf-c
 * header (cluster/nvcache.proto) and a raw payload.
 *
 *   offset 0  u32  magic "NVCL"          (all integers big-endian)
 *          4  u8   protocol version (FRAME_VERSION)
 *          5  u8   reserved, 0
 *          6  u16  header length   (<= FRAME_MAX_HEADER)
 *          8  u32  payload length  (<= FRAME_MAX_PAYLOAD)
 *         12  u32  CRC32C of bytes 0..11, the header and the payload
 *         16  header (a packed nvcache.Header), then the payload
 *
 * The payload (a 4 KiB page) never goes through protobuf: senders writev()
 * it after the prefix and header; receivers read it into their own buffer.
 *
 * Decoding is a pure function from bytes to a struct frame_hdr or an error:
 * every length is checked against its cap before anything is read or
 * allocated, the CRC before the header is parsed, and every enum, body and
 * payload size against the message type after. The protobuf-c parse runs in
 * a bounded arena on the stack: no malloc, so a hostile frame costs at most
 * that arena. All functions are thread-safe (no shared state). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define FRAME_MAGIC 0x4E56434CU /* "NVCL" */
#define FRAME_VERSION 1
#define FRAME_PREFIX 16
#define FRAME_MAX_HEADER 8192
#define FRAME_MAX_PAYLOAD (1U << 20)
#define FRAME_PAGE_SIZE 4096
#define FRAME_NONCE_LEN 32
#define FRAME_PROOF_LEN 32
#define FRAME_MAX_NODES 64
#define FRAME_MAX_NODE_ID 65535
#define FRAME_MAX_TEXT 200
/* A NODE_STATS text: at most this long in all, sent in chunks of at most
 * FRAME_STATS_CHUNK bytes (a connection's payload cap, see conn.h). */
#define FRAME_MAX_STATS (64 * 1024)
#define FRAME_STATS_CHUNK FRAME_PAGE_SIZE
/* Largest prefix + header a sender ever writes in one piece. */
#define FRAME_MAX_HEAD (FRAME_PREFIX + FRAME_MAX_HEADER)
/* PAGE_FETCH_MANY, PAGE_STORE_MANY, PARITY_UPDATE_MANY, PAGE_OVERWRITE_MANY
 * and PAGE_DROP_MANY (cluster/batch.h): at most this many per frame, each
 * FRAME_BATCH_ENTRY bytes in the request and in the reply (an overwrite's
 * request entry FRAME_OW_ENTRY), plus its page in a fetch's reply or the
 * others' request. The largest payload a connection ever accepts is an
 * overwrite batch's request. */
#define FRAME_BATCH_MAX 64
#define FRAME_BATCH_ENTRY 24
#define FRAME_OW_ENTRY 48
#define FRAME_MAX_CONN_PAYLOAD (FRAME_BATCH_MAX * (FRAME_OW_ENTRY + FRAME_PAGE_SIZE))

/* Values of the enums in nvcache.proto (kept equal; checked at build time
 * in frame.c). */
enum frame_type {
	FT_INVALID = 0, FT_HELLO, FT_CHALLENGE, FT_AUTH, FT_HEARTBEAT,
	FT_PAGE_STORE, FT_PAGE_FETCH, FT_PAGE_DROP, FT_PARITY_UPDATE,
	FT_MIGRATE, FT_UPDATE, FT_INVALIDATE, FT_NODE_TABLE, FT_ERROR,
	FT_OWNER_RESET, FT_NODE_STATS, FT_PAGE_FETCH_MANY, FT_PAGE_OVERWRITE,
	FT_PAGE_STORE_MANY, FT_PAGE_OVERWRITE_MANY, FT_PARITY_UPDATE_MANY,
	FT_PAGE_DROP_MANY,
	/* 22..39 unused (frame_type_known) */
	FT_FILE_ATTACH = 40, FT_FILE_OPEN, FT_FILE_CLOSE, FT_FILE_GETATTR,
	FT_FILE_SETSIZE, FT_FILE_UNLINK, FT_FILE_READ, FT_FILE_WRITE,
	FT_FILE_TRUNC, FT_FILE_WRITEBACK, FT_FILE_DROP, FT_FILE_MARK,
	FT_FILE_SHADOW, FT_FILE_INVAL, FT_FILE_WATCH,
	/* 55..59 unused */
	FT_FILE_LOCK = 60, FT_COUNT
};
enum frame_status {
	FS_OK = 0, FS_STALE, FS_NOT_FOUND, FS_NO_SPACE, FS_BAD_FRAME,
	FS_AUTH_FAILED, FS_UNSUPPORTED, FS_NOT_AUTHENTICATED, FS_INTERNAL,
	FS_PARITY_LOST, FS_WOULD_BLOCK, FS_DEADLOCK, FS_NO_LOCKS,
	FS_IN_PROGRESS, FS_INVALID, FS_COUNT
};
enum frame_kind { FK_DATA = 0, FK_PARITY, FK_COUNT };
enum frame_node_state { FN_UNKNOWN = 0, FN_ALIVE, FN_DEAD, FN_SELF, FN_COUNT };

struct frame_capacity {
	uint64_t offered;       /* bytes this node accepts for others */
	uint64_t used;          /* bytes of pages it holds */
	uint64_t mem_available; /* its MemAvailable when measured */
};

/* FILE_LOCK's body (nvcache.proto FileLock, cluster/locksvc.h): checked
 * at decode (op, class and type in range, start <= end <= FRAME_LOCK_EOF,
 * node an id); a reply carries the conflicting lock in cls..end, node and
 * pid (owner and session zero). */
enum frame_lock_op { FL_SET = 0, FL_GET, FL_CANCEL, FL_RELEASE, FL_COUNT };
#define FRAME_LOCK_EOF INT64_MAX
struct frame_lock {
	uint64_t obj;
	uint32_t op, cls, type;
	uint64_t start, end;
	bool wait;
	uint64_t wait_id;
	uint32_t node;
	uint64_t session, owner;
	uint32_t pid;
	bool reclaim;   /* SET: held before the home restarted (lockserve.h) */
};
/* The file cache's messages (FT_FILE_*, body FileOp; nvcache.proto and
 * docs/nvcachefs-cluster.md). A range lies inside one block of at most
 * FRAME_FILE_MAX_BLOCK bytes; a write carries base_len + len bytes (the
 * block's backing bytes, then the new ones), a read's OK reply len bytes,
 * an ATTACH a path of len bytes and the directory's handle of base_len,
 * an OPEN a file handle of len bytes. */
#define FRAME_FILE_MAX_BLOCK (128 * 1024)
#define FRAME_FILE_MAX_HANDLE 128
/* A WATCH reply's file ids at most (8 bytes each). */
#define FRAME_WATCH_MAX 64
#define FRAME_FILE_MAX_PATH 4096
/* flags */
#define FRAME_FILE_HOME   1u  /* OPEN: count an open at the home */
#define FRAME_FILE_LAST   2u  /* CLOSE reply: the last open cluster-wide */
#define FRAME_FILE_DOOMED 4u  /* CLOSE, UNLINK reply: unlinked while
				* open (UNLINK: or open nowhere, kept a
				* while at the home, which drops it) */
#define FRAME_FILE_EXTEND 8u  /* SETSIZE: size = max(size, the record's);
				* WRITE at the home: and then that SETSIZE
				* (reply flag EXTEND: done, size and epoch
				* SETSIZE's) */
#define FRAME_FILE_SYNC   16u /* WRITEBACK: now, reply once fsync'ed */
#define FRAME_FILE_GEN    32u /* WRITE: base was read after gen was taken */
#define FRAME_FILE_WRITER 64u /* CLOSE: the mount wrote to the file since
				* its last CLOSE of it; CLOSE reply with
				* LAST: a write may have been made since
				* the last such reply (the owners are to
				* write back; without it, a write the home
				* knows of was told already) */
#define FRAME_FILE_APPEND 128u /* SETSIZE: size grows by f.size, up to f.blk
				* (EFBIG past it); the reply's size is where
				* the appended bytes go (the old size) */
#define FRAME_FILE_PUNCH  256u /* TRUNC: the bytes of [size, blk) read as
				* zeros: blocks inside go, so do clean
				* ones across an edge (the backing is
				* punched too), dirty ones are zeroed */
#define FRAME_FILE_RECLAIM 512u /* OPEN with HOME: blk handles open on the
				 * mount since before the home restarted */
#define FRAME_FILE_REPLICAS2 1024u /* ATTACH: the mount asks replicas=2 (each
				    * dirty block also in its owner's
				    * shadow's NVRAM); without: replicas=1 */
#define FRAME_FILE_REPLICA 2048u /* READ at a shadow: from its replica of
				  * owner index gen's block */
#define FRAME_FILE_MTIME  4096u /* SETSIZE: the file's mtime becomes size
				 * (ns since the epoch; 0: the home's clock
				 * now; FRAME_MTIME_NONE: the backing
				 * file's), its size stays. The reply of
				 * every SETSIZE and GETATTR: blk the mtime
				 * the home keeps (0: none, the backing
				 * file's holds) */
#define FRAME_MTIME_NONE UINT64_MAX
#define FRAME_FILE_BOUND  8192u /* READ, WRITE: the mount takes the file's
				 * size to be at least the range's end, as
				 * the home said at size epoch f.epoch
				 * (cluster/fcache.h); the owner answers
				 * BOUND_OK if no shrink came after it */
#define FRAME_FILE_BOUND_OK 16384u /* reply of a READ or WRITE with BOUND */
#define FRAME_FILE_MTIME_PAY 32768u /* SETSIZE with MTIME: size is a write's
				     * time, taken only if the home's mtime
				     * did not change since (fcache.h) */
#define FRAME_FILE_RUN   65536u /* WRITE: more WRITEs of the same run
				* follow on this connection: the reply
				* may wait to go out with theirs */
#define FRAME_FILE_FULL  131072u /* reply of a WRITE or OPEN answered
				 * NO_SPACE: the node's cache (blocks, or
				 * its object table) stayed full while it
				 * held the request, its write-back making
				 * no room (a stalled backing); the sender
				 * asks again. Without it, the write-back
				 * fails (its last try within 60 s did: a
				 * full or failing backing), or no record
				 * can go: ENOSPC */
#define FRAME_FILE_WB    262144u /* CLOSE: at the last close with WRITER
				 * the home writes its own blocks back after
				 * size ns (the write-back delay); reply:
				 * every block of the file is the home's (it
				 * ends within its first stripe), so no other
				 * owner need be asked */
/* MARK (owner -> shadow; off: the owner's node index, size: a sequence
 * number, cluster/fmarks.h): */
#define FRAME_MARK_SET        1u  /* blk of obj (or the payload's blocks)
				   * is dirty at the owner */
#define FRAME_MARK_CLEAR      2u  /* the payload's blocks of obj, if not
				   * marked after size, are clean */
#define FRAME_MARK_CLEAR_OBJ  4u  /* every mark of obj (dropped) */
#define FRAME_MARK_SYNC_BEGIN 8u  /* forget the owner's marks: all follow */
#define FRAME_MARK_SYNC_END   16u /* the owner's marks are whole again */
#define FRAME_MARK_PING       32u /* reply flags: SYNCED or not */
#define FRAME_MARK_SYNCED     64u
#define FRAME_MARK_REPLICA    128u /* alone: block blk of obj is, at the
				    * owner, the payload's bytes after the
				    * file's handle (base_len bytes, type
				    * handle_type): the block's len valid
				    * bytes, kept until CLEARed */
#define FRAME_MARK_RANGE      256u /* with REPLICA: the payload's bytes
				    * after the handle are the block's len
				    * bytes at offset size, gen its valid
				    * length at the owner after them; laid
				    * over the shadow's copy, or WHOLE */
#define FRAME_MARK_WHOLE      512u /* reply of a REPLICA with RANGE: no
				    * copy here the range fits: send the
				    * whole block */
/* SHADOW's reply flags (neither: clean, read the backing) */
#define FRAME_SHADOW_DIRTY    1u
#define FRAME_SHADOW_UNKNOWN  2u
#define FRAME_SHADOW_REPLICA  4u  /* the shadow holds a replica of it:
				   * READ with FRAME_FILE_REPLICA */
#define FRAME_MARK_MAX_BLOCKS (FRAME_FILE_MAX_BLOCK / 8)
struct frame_fop {
	uint64_t obj, blk, size, digest, epoch, token;
	uint32_t off, len, flags, gen, base_len, handle_type;
};
bool frame_type_file(uint32_t type);

struct frame_node {
	uint32_t node_id;
	uint64_t incarnation;
	uint32_t state;         /* enum frame_node_state */
	struct frame_capacity cap;
	uint64_t age_ms;
};

/* One decoded header. Which body fields are meaningful depends on type
 * (see nvcache.proto); the rest are zero. */
struct frame_hdr {
	uint32_t type;          /* enum frame_type */
	bool reply;
	uint64_t request_id;
	uint32_t node_id;
	uint64_t incarnation;
	uint32_t status;        /* enum frame_status */
	uint32_t kind;          /* enum frame_kind */
	uint64_t owner;
	uint64_t page_id;
	uint64_t version;
	uint64_t parity_group;
	uint32_t payload_len;
	/* HELLO, CHALLENGE */
	uint32_t proto_version;
	uint8_t nonce[FRAME_NONCE_LEN];
	/* CHALLENGE, AUTH */
	uint8_t proof[FRAME_PROOF_LEN];
	/* HEARTBEAT */
	uint64_t hb_seq;
	uint32_t hb_interval_ms;
	struct frame_capacity cap;
	/* NODE_TABLE reply */
	uint32_t n_nodes;
	struct frame_node nodes[FRAME_MAX_NODES];
	/* MIGRATE (from), UPDATE and INVALIDATE (new server), OVERWRITE (the
	 * parity node) */
	uint32_t peer_node;
	/* OVERWRITE request */
	uint64_t old_version, parity_version;
	/* FILE_LOCK requests and replies */
	struct frame_lock lk;
	/* FT_FILE_* requests and replies */
	struct frame_fop fop;
	/* ERROR, and any reply with a status other than FS_OK (may be "") */
	char text[FRAME_MAX_TEXT + 1];
};

/* The payload size a valid frame of this shape must carry, or -1 if it is
 * not fixed: an OK NODE_STATS reply carries 0..FRAME_STATS_CHUNK bytes of
 * text, no more than the header's version (the text's total length) minus
 * its page_id (the chunk's offset); a PAGE_FETCH_MANY, PAGE_STORE_MANY,
 * PARITY_UPDATE_MANY, PAGE_OVERWRITE_MANY or PAGE_DROP_MANY request and its
 * OK reply carry
 * 1..FRAME_BATCH_MAX whole entries (cluster/batch.h). */
long frame_payload_expected(uint32_t type, bool reply, uint32_t status);

/* Check a received 16-byte prefix and return the header and payload
 * lengths. 0, or -EBADMSG (magic, version, reserved byte) or -EMSGSIZE (a
 * length over its cap). *why gets a static explanation for the log. */
int frame_prefix_parse(const uint8_t prefix[FRAME_PREFIX], uint32_t *hdr_len,
		       uint32_t *payload_len, const char **why);

/* Decode one frame from buf[0..len). Returns the frame's total length (> 0)
 * with *out filled and *payload pointing into buf, or:
 *   -EAGAIN    buf holds only the beginning of a frame (read more);
 *   -EBADMSG   bad magic/version, CRC mismatch, unparsable header;
 *   -EMSGSIZE  a length over its cap;
 *   -EPROTO    an unknown type or enum value, a body or payload that does
 *              not fit the type, a field out of range.
 * On error *why (if not NULL) explains, for the log and the ERROR reply. */
ssize_t frame_decode(const uint8_t *buf, size_t len, struct frame_hdr *out,
		     const uint8_t **payload, const char **why);

/* The same for a frame received in two places: head holds the prefix and
 * the header (FRAME_PREFIX + header length bytes), payload the payload
 * the prefix announces (payload_len bytes; NULL when 0), e.g. read
 * straight into where its bytes go. 0, or frame_decode's errors (-EINVAL:
 * lengths other than the prefix says). */
int frame_decode_split(const uint8_t *head, size_t head_len, const uint8_t *payload,
		       size_t payload_len, struct frame_hdr *out, const char **why);

/* Encode prefix + header for h and payload (h->payload_len bytes, may be
 * NULL when 0) into out, which must hold FRAME_MAX_HEAD bytes. The payload
 * is not copied but is covered by the CRC; send it right after. Returns the
 * number of bytes written to out, or -EINVAL / -EMSGSIZE / -EPROTO when h
 * would not pass frame_decode (we never send what we would refuse). */
ssize_t frame_encode(const struct frame_hdr *h, const void *payload,
		     uint8_t *out, size_t outlen);
/* The same for a payload in niov pieces (their lengths add up to
 * h->payload_len, else -EINVAL): a batch's entries and the pages where
 * they are, without gathering them first. */
ssize_t frame_encode_iov(const struct frame_hdr *h, const struct iovec *iov,
			 unsigned niov, uint8_t *out, size_t outlen);

/* type is a message type of nvcache.proto (the enum has gaps). */
bool frame_type_known(uint32_t type);

/* Names for logs. */
const char *frame_type_name(uint32_t type);
const char *frame_status_name(uint32_t status);
/* The -errno a caller reports for a reply status (FS_STALE -> -ESTALE,
 * FS_NOT_FOUND -> -ENOENT, FS_NO_SPACE -> -ENOSPC, FS_WOULD_BLOCK ->
 * -EAGAIN, FS_IN_PROGRESS -> -EINPROGRESS, FS_PARITY_LOST ->
 * -EREMOTEIO, ...). */
int frame_status_errno(uint32_t status);
