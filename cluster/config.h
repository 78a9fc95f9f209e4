/* config.h - the cluster file: which nodes exist, where they listen, how
 * much memory each may offer, and where the shared secret lives.
 *
 *   # comment (also after a line's content)
 *   secret /etc/nvcache/secret        relative paths: to the cluster file
 *   node 1 127.0.0.1:7001 mem=2G      id 1..65535, HOST:PORT, [::1]:PORT
 *   node 2 127.0.0.1:7002             no mem=: offer what is idle
 *   node 3 :7003                      no host: 127.0.0.1
 *   tcp_congestion cubic              optional: the TCP congestion control
 *                                     of the cluster's connections (the
 *                                     default, cubic: BBR's pacing costs a
 *                                     timer per send); system: the
 *                                     machine's own
 *
 * The secret file must be a regular file that only its owner can read or
 * write (mode 0600 or stricter), 16 to 4096 bytes; trailing whitespace is
 * not part of the secret.
 *
 * Threads: a parsed struct cluster_config is read-only and may be shared. */
#pragma once
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/frame.h"

#define CONFIG_MAX_NODES FRAME_MAX_NODES
#define CONFIG_MAX_SECRET 4096
#define CONFIG_MIN_SECRET 16

struct cluster_node {
	uint32_t id;
	char host[64];          /* numeric or a name, as written */
	uint16_t port;
	uint64_t mem;           /* mem=SIZE, 0 when not given */
	bool mem_given;         /* mem= was written: mem=0 offers nothing */
};

struct cluster_config {
	unsigned n_nodes;
	struct cluster_node nodes[CONFIG_MAX_NODES];
	char secret_path[4096];
	uint8_t secret[CONFIG_MAX_SECRET];
	size_t secret_len;
	char tcp_congestion[16];   /* "" when not given: conn.c's default */
};

/* Parse text (the contents of a cluster file named path, used for messages
 * and to resolve a relative secret path). Does not read the secret. 0 or
 * -EINVAL with "path:line: what is wrong" in err. */
int config_parse_text(const char *text, const char *path,
		      struct cluster_config *cfg, char *err, size_t errlen);
/* Read and parse the file at path, then load its secret. 0 or -errno with
 * the reason in err. */
int config_load(const char *path, struct cluster_config *cfg, char *err,
		size_t errlen);
/* Load cfg->secret from cfg->secret_path (checks type, mode and size). */
int config_secret_load(struct cluster_config *cfg, char *err, size_t errlen);

/* The node with this id, or NULL. */
const struct cluster_node *config_node_find(const struct cluster_config *cfg,
					    uint32_t id);

/* A digest of the node list (ids, addresses), the same for the same list
 * in any order of writing: nodes whose cluster files disagree see it. */
uint64_t config_digest(const struct cluster_config *cfg);
