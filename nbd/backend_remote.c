/* backend_remote.c - NBD backend calls mapped onto cluster/remote_backend.h
 * (whose functions have the nbd_backend_ops shapes). */
#include "nbd/backend_remote.h"

#include "cluster/conn.h"
#include "cluster/config.h"
#include "cluster/remote_backend.h"
#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct nbd_backend_ops remote_ops = {
	.read = remote_read, .write = remote_write, .trim = remote_trim,
	.zero = remote_trim, .flush = remote_flush, .stats = remote_stats,
	.destroy = remote_destroy,
};

int nbd_backend_remote_create(struct nbd_backend *be,
			      const struct nbd_remote_opts *o)
{
	struct cluster_config *cfg = calloc(1, sizeof(*cfg));
	struct remote_backend *rb;
	char err[512];
	int rc;

	if (!cfg)
		return -ENOMEM;
	if (!o->cluster) {
		log_err("--store remote needs --cluster FILE");
		free(cfg);
		return -EINVAL;
	}
	rc = config_load(o->cluster, cfg, err, sizeof(err));
	if (rc) {
		log_err("%s", err);
		free(cfg);
		return rc;
	}
	conn_set_congestion(cfg->tcp_congestion);
	/* Our id is half of the key our pages are kept under on the nodes:
	 * a wrong one (0, a typo) can be another machine's, whose pages
	 * ours would then replace. It must be a node of the file. */
	if (!o->self_node || !config_node_find(cfg, o->self_node)) {
		log_err("--node %u: not a node of %s (give this machine's id "
			"there, as its nvcached has)", o->self_node, o->cluster);
		free(cfg);
		return -EINVAL;
	}
	int red = remote_redundancy_parse(o->redundancy ? o->redundancy : "mirror");
	if (red < 0) {
		log_err("--redundancy %s: use none, mirror, parity[:N] or "
			"parity-dist[:N] (N: 2..8 pages per parity group)",
			o->redundancy);
		free(cfg);
		return -EINVAL;
	}
	struct remote_opts ro = {
		.cfg = cfg, .self_node = o->self_node, .size = o->size,
		.redundancy = (enum remote_redundancy)red,
		.spill_path = o->spill_path,
		.parity_group = (unsigned)remote_parity_group_parse(
			o->redundancy ? o->redundancy : "mirror"),
		/* one key space per (node, export): two swap devices of one
		 * node never see each other's pages */
		.owner = (uint64_t)o->self_node << 32 |
			 crc32c(0, o->name ? o->name : "", o->name ? strlen(o->name) : 0),
	};
	rc = remote_open(&rb, &ro);
	free(cfg); /* remote_open copied it */
	if (rc)
		return rc;
	be->ops = &remote_ops;
	be->priv = rb;
	be->size = o->size;
	return 0;
}
