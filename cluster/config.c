/* config.c - parse the cluster file and load the shared secret; see
 * config.h for the format. Every error names the file and line. */
#include "cluster/config.h"

#include "common/crc32c.h"
#include "common/opts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE (256 * 1024)

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* "HOST:PORT", "[V6]:PORT", or ":PORT" / "PORT" for 127.0.0.1 (nodes stay
 * on the machine unless told otherwise). */
static int parse_addr(const char *s, struct cluster_node *n)
{
	const char *host = s, *port;
	size_t hl;

	if (s[0] == ':' || !strchr(s, ':')) {
		host = "127.0.0.1";
		hl = strlen(host);
		port = s[0] == ':' ? s + 1 : s;
	} else if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -1;
		host = s + 1;
		hl = (size_t)(end - host);
		port = end + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (strchr(s, ':') != colon)
			return -1;
		hl = (size_t)(colon - s);
		port = colon + 1;
	}
	if (hl == 0 || hl >= sizeof(n->host))
		return -1;
	memcpy(n->host, host, hl);
	n->host[hl] = 0;
	char *end;
	errno = 0;
	unsigned long pv = strtoul(port, &end, 10);
	if (errno || *end || end == port || *port == '-' || *port == '+' ||
	    pv == 0 || pv > 65535)
		return -1;
	n->port = (uint16_t)pv;
	return 0;
}

static int parse_node(char **tok, int ntok, const char *path, int line,
		      struct cluster_config *cfg, char *err, size_t errlen)
{
	struct cluster_node n = { 0 };
	char *end;

	if (ntok < 3)
		return fail(err, errlen, "%s:%d: expected 'node ID HOST:PORT [mem=SIZE]'",
			    path, line);
	errno = 0;
	unsigned long id = strtoul(tok[1], &end, 10);
	if (errno || *end || tok[1][0] == '-' || id == 0 || id > FRAME_MAX_NODE_ID)
		return fail(err, errlen, "%s:%d: node id '%s' is not a number in 1..%d",
			    path, line, tok[1], FRAME_MAX_NODE_ID);
	n.id = (uint32_t)id;
	if (parse_addr(tok[2], &n))
		return fail(err, errlen, "%s:%d: address '%s' is not HOST:PORT (port 1..65535)",
			    path, line, tok[2]);
	for (int i = 3; i < ntok; i++) {
		if (!strncmp(tok[i], "mem=", 4)) {
			if (opts_parse_size(tok[i] + 4, &n.mem))
				return fail(err, errlen, "%s:%d: bad size in '%s' (e.g. mem=2G)",
					    path, line, tok[i]);
			n.mem_given = true;
		} else {
			return fail(err, errlen, "%s:%d: unknown node option '%s'",
				    path, line, tok[i]);
		}
	}
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		if (cfg->nodes[i].id == n.id)
			return fail(err, errlen, "%s:%d: node %u listed twice",
				    path, line, n.id);
		if (cfg->nodes[i].port == n.port && !strcmp(cfg->nodes[i].host, n.host))
			return fail(err, errlen, "%s:%d: nodes %u and %u share %s:%u",
				    path, line, cfg->nodes[i].id, n.id, n.host, n.port);
	}
	if (cfg->n_nodes >= CONFIG_MAX_NODES)
		return fail(err, errlen, "%s:%d: more than %d nodes", path, line,
			    CONFIG_MAX_NODES);
	cfg->nodes[cfg->n_nodes++] = n;
	return 0;
}

static int parse_congestion(char **tok, int ntok, const char *path, int line,
			    struct cluster_config *cfg, char *err, size_t errlen)
{
	if (ntok != 2 || !tok[1][0] || strlen(tok[1]) >= sizeof(cfg->tcp_congestion))
		return fail(err, errlen, "%s:%d: expected 'tcp_congestion NAME' "
			    "(cubic, reno, bbr, ... or system)", path, line);
	if (cfg->tcp_congestion[0])
		return fail(err, errlen, "%s:%d: second 'tcp_congestion' line",
			    path, line);
	snprintf(cfg->tcp_congestion, sizeof(cfg->tcp_congestion), "%s", tok[1]);
	return 0;
}

static int parse_secret(char **tok, int ntok, const char *path, int line,
			struct cluster_config *cfg, char *err, size_t errlen)
{
	if (ntok != 2)
		return fail(err, errlen, "%s:%d: expected 'secret FILE'", path, line);
	if (cfg->secret_path[0])
		return fail(err, errlen, "%s:%d: second 'secret' line", path, line);
	int n;
	if (tok[1][0] == '/') {
		n = snprintf(cfg->secret_path, sizeof(cfg->secret_path), "%s", tok[1]);
	} else {
		/* relative to the directory of the cluster file */
		const char *slash = strrchr(path, '/');
		int dl = slash ? (int)(slash - path) : 1;
		n = snprintf(cfg->secret_path, sizeof(cfg->secret_path), "%.*s/%s",
			     dl, slash ? path : ".", tok[1]);
	}
	if (n < 0 || (size_t)n >= sizeof(cfg->secret_path))
		return fail(err, errlen, "%s:%d: secret path too long", path, line);
	return 0;
}

int config_parse_text(const char *text, const char *path,
		      struct cluster_config *cfg, char *err, size_t errlen)
{
	char linebuf[1024];
	int line = 0;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		line++;
		if (len >= sizeof(linebuf))
			return fail(err, errlen, "%s:%d: line too long", path, line);
		memcpy(linebuf, p, len);
		linebuf[len] = 0;
		p += len + (nl ? 1 : 0);

		char *hash = strchr(linebuf, '#');
		if (hash)
			*hash = 0;
		char *tok[16];
		int ntok = 0;
		char *save = NULL;
		for (char *t = strtok_r(linebuf, " \t\r", &save); t;
		     t = strtok_r(NULL, " \t\r", &save)) {
			if (ntok == 16)
				return fail(err, errlen, "%s:%d: too many words", path, line);
			tok[ntok++] = t;
		}
		if (!ntok)
			continue;
		if (!strcmp(tok[0], "node"))
			rc = parse_node(tok, ntok, path, line, cfg, err, errlen);
		else if (!strcmp(tok[0], "secret"))
			rc = parse_secret(tok, ntok, path, line, cfg, err, errlen);
		else if (!strcmp(tok[0], "tcp_congestion"))
			rc = parse_congestion(tok, ntok, path, line, cfg, err, errlen);
		else
			rc = fail(err, errlen, "%s:%d: unknown keyword '%s' (node, "
				  "secret, tcp_congestion)",
				  path, line, tok[0]);
		if (rc)
			return rc;
	}
	if (!cfg->n_nodes)
		return fail(err, errlen, "%s: no 'node' lines", path);
	if (!cfg->secret_path[0])
		return fail(err, errlen, "%s: no 'secret FILE' line (peers must share a secret)",
			    path);
	return 0;
}

/* Read a whole small file (at most max bytes) into a malloc'd string. */
static int read_small(const char *path, size_t max, char **out, size_t *outlen,
		      struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if ((size_t)st->st_size > max) {
		close(fd);
		return -EFBIG;
	}
	char *buf = malloc((size_t)st->st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, (size_t)st->st_size - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return -e;
		}
		if (n == 0 || have + (size_t)n == (size_t)st->st_size) {
			have += (size_t)n;
			break;
		}
		have += (size_t)n;
	}
	close(fd);
	buf[have] = 0;
	*out = buf;
	*outlen = have;
	return 0;
}

int config_secret_load(struct cluster_config *cfg, char *err, size_t errlen)
{
	struct stat st = { 0 };
	char *buf;
	size_t len;
	int rc = read_small(cfg->secret_path, CONFIG_MAX_SECRET + 64, &buf, &len, &st);

	if (rc == -EINVAL) {
		fail(err, errlen, "secret %s: not a regular file", cfg->secret_path);
		return -EINVAL;
	}
	if (rc == -EFBIG) {
		fail(err, errlen, "secret %s: larger than %d bytes", cfg->secret_path,
		     CONFIG_MAX_SECRET);
		return -EINVAL;
	}
	if (rc) {
		fail(err, errlen, "secret %s: %s", cfg->secret_path, strerror(-rc));
		return rc;
	}
	if (st.st_mode & 0077) {
		free(buf);
		fail(err, errlen, "secret %s: mode %03o lets others read or change it; "
		     "chmod 600 it", cfg->secret_path, (unsigned)(st.st_mode & 0777));
		return -EPERM;
	}
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
		       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (len < CONFIG_MIN_SECRET || len > CONFIG_MAX_SECRET) {
		free(buf);
		fail(err, errlen, "secret %s: %zu bytes; use %d to %d (e.g. "
		     "head -c 32 /dev/urandom | base64 > FILE)", cfg->secret_path, len,
		     CONFIG_MIN_SECRET, CONFIG_MAX_SECRET);
		return -EINVAL;
	}
	memcpy(cfg->secret, buf, len);
	cfg->secret_len = len;
	memset(buf, 0, len);
	free(buf);
	return 0;
}

int config_load(const char *path, struct cluster_config *cfg, char *err,
		size_t errlen)
{
	struct stat st;
	char *text;
	size_t len;
	int rc = read_small(path, MAX_FILE, &text, &len, &st);

	if (rc) {
		fail(err, errlen, "cluster file %s: %s", path,
		     rc == -EFBIG ? "too large" : rc == -EINVAL ? "not a regular file" :
		     strerror(-rc));
		return rc;
	}
	if (memchr(text, 0, len)) {
		free(text);
		return fail(err, errlen, "cluster file %s: contains a NUL byte", path);
	}
	rc = config_parse_text(text, path, cfg, err, errlen);
	free(text);
	if (rc)
		return rc;
	return config_secret_load(cfg, err, errlen);
}

const struct cluster_node *config_node_find(const struct cluster_config *cfg,
					    uint32_t id)
{
	for (unsigned i = 0; i < cfg->n_nodes; i++)
		if (cfg->nodes[i].id == id)
			return &cfg->nodes[i];
	return NULL;
}

uint64_t config_digest(const struct cluster_config *cfg)
{
	uint64_t d = 0;

	/* a sum of per-node hashes: the order of the lines does not count */
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		const struct cluster_node *n = &cfg->nodes[i];
		char line[128];
		int k = snprintf(line, sizeof(line), "%u %s %u", n->id, n->host, n->port);
		uint64_t h = (uint64_t)crc32c(0x9e3779b9u, line, (size_t)k) << 32 |
			     crc32c(0x7f4a7c15u, line, (size_t)k);
		d += h;
	}
	return d ^ cfg->n_nodes;
}
