/* lockserve.c - FILE_LOCK requests to the lock service (lockserve.h). */
#include "cluster/lockserve.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

int lockserve(struct locksvc *s, struct lockserve_conn *lc,
	      const struct frame_lock *q, struct frame_lock *r)
{
	*r = (struct frame_lock){ .obj = q->obj, .op = q->op, .cls = q->cls };
	if (!lc->on) {
		int rc = locksvc_session_get(s, q->node, q->session);
		if (rc < 0)
			return rc;
		*lc = (struct lockserve_conn){ .on = true, .node = q->node,
					       .session = q->session };
	} else if (lc->node != q->node || lc->session != q->session) {
		return -EPROTO;
	}
	struct lt_owner o = { .node = q->node, .client = q->session,
			      .owner = q->owner, .pid = q->pid };
	struct lt_range rg = { .start = q->start, .end = q->end,
			       .type = (enum lt_type)q->type };
	enum lt_class c = (enum lt_class)q->cls;
	struct lt_holder h = { 0 };
	int rc;

	/* a lock held before the home restarted is set again first */
	if ((q->op == FL_SET || q->op == FL_GET) && !q->reclaim)
		locksvc_grace_wait(s);
	switch (q->op) {
	case FL_SET:
		rc = locksvc_set(s, q->obj, c, &o, &rg, q->wait, q->wait_id,
				 LOCKSERVE_WAIT_MS, &h);
		if (rc != -EAGAIN)
			return rc;
		break;
	case FL_GET:
		rc = locksvc_get(s, q->obj, c, &o, &rg, &h);
		if (rc <= 0)
			return rc;
		rc = 0;
		break;
	case FL_CANCEL:
		return locksvc_cancel(s, q->obj, c, &o, q->wait_id);
	case FL_RELEASE:
		locksvc_release_owner(s, q->obj, c, &o);
		return 0;
	default:
		return -EINVAL;
	}
	r->type = h.r.type;
	r->start = h.r.start;
	r->end = h.r.end;
	r->node = h.who.node;
	r->pid = h.who.pid;
	return rc;
}

void lockserve_end(struct locksvc *s, struct lockserve_conn *lc)
{
	if (lc->on)
		locksvc_session_put(s, lc->node, lc->session);
	lc->on = false;
}

void lockserve_watch(int fd)
{
	int one = 1, idle = LOCKSERVE_IDLE_S, intvl = 1, cnt = 3;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}
