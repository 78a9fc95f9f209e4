/* test_locktab.c - the cluster's lock table (cluster/locktab.h): random
 * non-waiting operations against a byte-by-byte model (what each owner
 * holds of each byte), then waits and their grants in order, deadlock
 * refusal, departures of owners and clients, flock beside POSIX
 * locks, merging of an owner's ranges, bad ranges and the size limit.
 * Then the service around it (cluster/locksvc.h) with real threads: a
 * wait answered "in progress" and asked again, granted by another
 * thread's unlock; a cancel that undoes an uncollected grant; sessions
 * whose last connection goes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include <pthread.h>
#include <unistd.h>

#include "cluster/locksvc.h"
#include "cluster/locktab.h"

struct grants {
	uint64_t id[32];
	struct lt_owner who[32];
	unsigned n;
};

static void on_grant(void *arg, uint64_t id, const struct lt_owner *o)
{
	struct grants *g = arg;
	assert_true(g->n < 32);
	g->id[g->n] = id;
	g->who[g->n++] = *o;
}

static struct lt_owner own(uint32_t node, uint64_t client, uint64_t owner)
{
	return (struct lt_owner){ .node = node, .client = client,
				  .owner = owner, .pid = 100 + (uint32_t)owner };
}

static struct lt_range rng(uint64_t start, uint64_t end, enum lt_type t)
{
	return (struct lt_range){ .start = start, .end = end, .type = t };
}

/* --- the model: bytes 0..NB-1 (NB-1 stands for "to end of file") --- */
#define NB 48
#define NO 4

static uint8_t model[NO][NB];   /* enum lt_type per owner and byte */

static bool model_conflict(unsigned o, uint64_t s, uint64_t e, uint8_t type)
{
	for (unsigned p = 0; p < NO; p++)
		for (uint64_t b = s; b <= e && p != o; b++)
			if (model[p][b] &&
			    (model[p][b] == LT_WRLCK || type == LT_WRLCK))
				return true;
	return false;
}

static uint64_t end_of(uint64_t e)
{
	return e == NB - 1 ? LT_EOF : e;
}

static void test_random_against_model(void **state)
{
	(void)state;
	struct locktab *t;
	assert_int_equal(locktab_new(&t, 0, NULL, NULL), 0);
	memset(model, 0, sizeof(model));
	srand(7);
	for (int step = 0; step < 20000; step++) {
		unsigned o = (unsigned)rand() % NO;
		struct lt_owner who = own(1 + o % 2, o, o);
		uint64_t s = (uint64_t)rand() % NB, e = (uint64_t)rand() % NB;
		if (s > e) {
			uint64_t x = s;
			s = e;
			e = x;
		}
		uint8_t type = (uint8_t)((unsigned)rand() % 3);
		struct lt_range r = rng(s, end_of(e), type);
		int op = rand() % 10;
		if (op == 0) {
			/* the owner goes: all its bytes free */
			locktab_release_owner(t, 9, LT_POSIX, &who);
			memset(model[o], 0, NB);
		} else if (op < 3 && type != LT_UNLCK) {
			struct lt_holder h;
			int rc = locktab_get(t, 9, LT_POSIX, &who, &r, &h);
			assert_int_equal(rc, model_conflict(o, s, e, type));
			if (rc) {
				/* the reported lock is another owner's, it
				 * overlaps and conflicts */
				unsigned p = (unsigned)h.who.owner;
				assert_int_not_equal(p, o);
				assert_true(h.r.start <= end_of(e) && s <= h.r.end);
				assert_true(h.r.type == LT_WRLCK || type == LT_WRLCK);
				assert_int_equal(h.who.pid, 100 + p);
				for (uint64_t b = h.r.start;
				     b <= (h.r.end == LT_EOF ? NB - 1 : h.r.end); b++)
					assert_int_equal(model[p][b], h.r.type);
			}
		} else {
			int rc = locktab_set(t, 9, LT_POSIX, &who, &r, false, 0,
					     NULL);
			if (type != LT_UNLCK && model_conflict(o, s, e, type)) {
				assert_int_equal(rc, -EAGAIN);
			} else {
				assert_int_equal(rc, 0);
				memset(&model[o][s], type, e - s + 1);
			}
		}
		/* the table's ranges, owner by owner, are the model's runs:
		 * probe each byte with a one-byte write lock test by a
		 * fifth owner, and each owner's own view via count */
		if (step % 97 == 0) {
			struct locktab_stats st;
			locktab_stats(t, &st);
			size_t runs = 0;
			for (unsigned p = 0; p < NO; p++)
				for (unsigned b = 0; b < NB; b++)
					if (model[p][b] &&
					    (b == 0 || model[p][b - 1] != model[p][b]))
						runs++;
			/* merged: exactly one range per run of one type */
			assert_int_equal(st.locks, runs);
			assert_int_equal(st.files, runs ? 1 : 0);
		}
	}
	locktab_free(t);
}

static void test_wait_grant_order(void **state)
{
	(void)state;
	struct grants g = { 0 };
	struct locktab *t;
	assert_int_equal(locktab_new(&t, 0, on_grant, &g), 0);
	struct lt_owner a = own(1, 1, 1), b = own(2, 1, 2), c = own(3, 1, 3);
	struct lt_range w = rng(0, 99, LT_WRLCK);
	struct lt_holder h;

	assert_int_equal(locktab_set(t, 5, LT_POSIX, &a, &w, true, 10, &h), 0);
	assert_int_equal(locktab_set(t, 5, LT_POSIX, &b, &w, true, 20, &h), 1);
	assert_int_equal(h.who.owner, 1);   /* told who blocks it */
	struct lt_range rd = rng(50, 60, LT_RDLCK);
	assert_int_equal(locktab_set(t, 5, LT_POSIX, &c, &rd, true, 30, &h), 1);
	assert_int_equal(g.n, 0);
	/* F_GETLK on another node sees a's lock */
	assert_int_equal(locktab_get(t, 5, LT_POSIX, &c, &rd, &h), 1);
	assert_int_equal(h.who.node, 1);
	assert_int_equal(h.r.start, 0);
	assert_int_equal(h.r.end, 99);
	/* a unlocks: b (earlier) gets it; c still conflicts with b */
	struct lt_range un = rng(0, LT_EOF, LT_UNLCK);
	assert_int_equal(locktab_set(t, 5, LT_POSIX, &a, &un, false, 0, NULL), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.id[0], 20);
	assert_int_equal(g.who[0].node, 2);
	/* b downgrades to a read lock: c's read lock is granted */
	struct lt_range brd = rng(0, 99, LT_RDLCK);
	assert_int_equal(locktab_set(t, 5, LT_POSIX, &b, &brd, false, 0, NULL), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.id[1], 30);
	struct locktab_stats st;
	locktab_stats(t, &st);
	assert_int_equal(st.waits, 0);
	assert_int_equal(st.locks, 2);
	locktab_free(t);
}

static void test_deadlock(void **state)
{
	(void)state;
	struct grants g = { 0 };
	struct locktab *t;
	assert_int_equal(locktab_new(&t, 0, on_grant, &g), 0);
	struct lt_owner a = own(1, 1, 1), b = own(2, 1, 2);
	struct lt_range r1 = rng(0, 9, LT_WRLCK), r2 = rng(10, 19, LT_WRLCK);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a, &r1, true, 1, NULL), 0);
	assert_int_equal(locktab_set(t, 2, LT_POSIX, &b, &r2, true, 2, NULL), 0);
	/* a waits for b (another file), then b asks for a's range */
	assert_int_equal(locktab_set(t, 2, LT_POSIX, &a, &r2, true, 3, NULL), 1);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &b, &r1, true, 4, NULL),
			 -EDEADLK);
	/* flock is another class: a's POSIX lock does not block it */
	assert_int_equal(locktab_set(t, 1, LT_FLOCK, &b,
				     &(struct lt_range){ 0, LT_EOF, LT_WRLCK },
				     true, 5, NULL), 0);
	/* a's wait cancelled (interrupted): b's unlock grants nothing */
	assert_int_equal(locktab_cancel(t, &a, 3), 0);
	assert_int_equal(locktab_cancel(t, &a, 3), -ENOENT);
	struct lt_range un = rng(10, 19, LT_UNLCK);
	assert_int_equal(locktab_set(t, 2, LT_POSIX, &b, &un, false, 0, NULL), 0);
	assert_int_equal(g.n, 0);
	locktab_free(t);
}

static void test_departures(void **state)
{
	(void)state;
	struct grants g = { 0 };
	struct locktab *t;
	assert_int_equal(locktab_new(&t, 0, on_grant, &g), 0);
	struct lt_owner a1 = own(1, 7, 1), a2 = own(1, 8, 2), b = own(2, 1, 3);
	struct lt_range w = rng(0, LT_EOF, LT_WRLCK);
	struct lt_range r = rng(0, 4095, LT_RDLCK);
	/* node 1 holds file 1 through client 7, file 2 through client 8 */
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a1, &w, true, 1, NULL), 0);
	assert_int_equal(locktab_set(t, 2, LT_FLOCK, &a2, &w, true, 2, NULL), 0);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &b, &r, true, 3, NULL), 1);
	assert_int_equal(locktab_set(t, 2, LT_FLOCK, &b, &w, true, 4, NULL), 1);
	/* a waiting owner's own departure drops its wait, grants nothing */
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a2, &r, true, 5, NULL), 1);
	assert_int_equal(locktab_release_owner(t, 1, LT_POSIX, &a2), 1);
	/* client 7's session ends: file 1 goes to b, file 2 stays held */
	assert_int_equal(locktab_release_client(t, 1, 7), 1);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.id[0], 3);
	/* client 8's session ends: its flock goes, b's flock wait is granted */
	assert_int_equal(locktab_release_client(t, 1, 8), 1);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.id[1], 4);
	/* b's process closes the file: its POSIX locks go, its flock stays */
	assert_int_equal(locktab_release_owner(t, 1, LT_POSIX, &b), 1);
	struct locktab_stats st;
	locktab_stats(t, &st);
	assert_int_equal(st.locks, 1);
	assert_int_equal(st.files, 1);
	assert_int_equal(locktab_release_client(t, 2, 1), 1);
	locktab_stats(t, &st);
	assert_int_equal(st.files + st.locks + st.waits, 0);
	locktab_free(t);
}

static void test_classes_and_limits(void **state)
{
	(void)state;
	struct locktab *t;
	assert_int_equal(locktab_new(&t, 4, NULL, NULL), 0);
	struct lt_owner a = own(1, 1, 1), b = own(2, 1, 2);
	struct lt_range w = rng(0, LT_EOF, LT_WRLCK);
	/* POSIX and flock never conflict with each other */
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a, &w, false, 0, NULL), 0);
	assert_int_equal(locktab_set(t, 1, LT_FLOCK, &b, &w, false, 0, NULL), 0);
	struct lt_holder h;
	assert_int_equal(locktab_set(t, 1, LT_FLOCK, &a, &w, false, 0, &h),
			 -EAGAIN);
	assert_int_equal(h.who.owner, 2);
	/* bad ranges and types */
	struct lt_range bad = rng(10, 5, LT_RDLCK);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a, &bad, false, 0, NULL),
			 -EINVAL);
	bad = rng(0, (uint64_t)LT_EOF + 1, LT_RDLCK);
	assert_int_equal(locktab_get(t, 1, LT_POSIX, &a, &bad, &h), -EINVAL);
	bad = rng(0, 1, (enum lt_type)7);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a, &bad, false, 0, NULL),
			 -EINVAL);
	assert_int_equal(locktab_set(t, 1, (enum lt_class)2, &a, &w, false, 0,
				     NULL), -EINVAL);
	/* the limit: 4 entries; a's POSIX write lock cut in three pieces
	 * by two unlocks (unlocks may go over), then no new lock */
	struct lt_range un = rng(10, 19, LT_UNLCK);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a, &un, false, 0, NULL), 0);
	un = rng(30, 39, LT_UNLCK);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &a, &un, false, 0, NULL), 0);
	struct locktab_stats st;
	locktab_stats(t, &st);
	assert_int_equal(st.locks, 4);
	struct lt_range more = rng(12, 13, LT_RDLCK);
	assert_int_equal(locktab_set(t, 3, LT_POSIX, &b, &more, false, 0, NULL),
			 -ENOLCK);
	assert_int_equal(locktab_set(t, 1, LT_POSIX, &b, &w, true, 9, NULL),
			 -ENOLCK);
	locktab_stats(t, &st);
	assert_int_equal(st.files, 1);   /* the refused file left nothing */
	/* an unlock of nothing on an unknown file is fine */
	assert_int_equal(locktab_set(t, 77, LT_POSIX, &a, &un, false, 0, NULL), 0);
	locktab_free(t);
}

struct waiter {
	struct locksvc *s;
	struct lt_owner o;
	uint64_t id;
	int rc[8];
	_Atomic int n;
};

/* F_SETLKW as a client does it: ask, and ask again while "in progress" */
static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	struct lt_range all = rng(0, LT_EOF, LT_WRLCK);
	int rc;
	do {
		rc = locksvc_set(w->s, 1, LT_POSIX, &w->o, &all, true, w->id,
				 50, NULL);
		if (w->n < 8)
			w->rc[w->n++] = rc;
	} while (rc == -EINPROGRESS && w->n < 8);
	return NULL;
}

static void test_service(void **state)
{
	(void)state;
	struct locksvc *s;
	assert_int_equal(locksvc_new(&s, 0), 0);
	struct lt_owner a = own(1, 11, 1), b = own(2, 22, 2);
	struct lt_range all = rng(0, LT_EOF, LT_WRLCK);
	struct lt_range un = rng(0, LT_EOF, LT_UNLCK);
	/* no session, no lock */
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &a, &all, false, 0, 0,
				     NULL), -ENOTCONN);
	assert_int_equal(locksvc_session_get(s, 1, 11), 0);
	assert_int_equal(locksvc_session_get(s, 1, 11), 0);  /* 2 conns */
	assert_int_equal(locksvc_session_get(s, 2, 22), 0);
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &a, &all, true, 1, 0,
				     NULL), 0);

	/* b waits across "in progress" answers until a unlocks */
	struct waiter w = { .s = s, .o = b, .id = 77 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
	/* two "in progress" answers at least (a loaded machine may take
	 * longer than their 50 ms each) */
	for (int i = 0; i < 1000 && w.n < 2; i++)
		usleep(10 * 1000);
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &a, &un, false, 0, 0,
				     NULL), 0);
	pthread_join(th, NULL);
	assert_true(w.n >= 2);
	assert_int_equal(w.rc[0], -EINPROGRESS);
	assert_int_equal(w.rc[w.n - 1], 0);
	struct lt_holder h;
	assert_int_equal(locksvc_get(s, 1, LT_POSIX, &a, &all, &h), 1);
	assert_int_equal(h.who.node, 2);

	/* a waits (times out), b unlocks: a's grant is queued for it; a
	 * gives up instead: the cancel unlocks what was granted */
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &a, &all, true, 2, 10,
				     NULL), -EINPROGRESS);
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &b, &un, false, 0, 0,
				     NULL), 0);
	assert_int_equal(locksvc_get(s, 1, LT_POSIX, &b, &all, &h), 1);
	assert_int_equal(locksvc_cancel(s, 1, LT_POSIX, &a, 2), 0);
	assert_int_equal(locksvc_get(s, 1, LT_POSIX, &b, &all, &h), 0);
	assert_int_equal(locksvc_cancel(s, 1, LT_POSIX, &a, 2), -ENOENT);

	/* a's session: the lock stays while one of its two connections
	 * does, goes with the last */
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &a, &all, false, 0, 0,
				     NULL), 0);
	locksvc_session_put(s, 1, 11);
	assert_int_equal(locksvc_get(s, 1, LT_POSIX, &b, &all, &h), 1);
	locksvc_session_put(s, 1, 11);
	assert_int_equal(locksvc_get(s, 1, LT_POSIX, &b, &all, &h), 0);

	/* a session that ends while its thread waits: the thread hears */
	assert_int_equal(locksvc_set(s, 1, LT_POSIX, &b, &all, false, 0, 0,
				     NULL), 0);
	assert_int_equal(locksvc_session_get(s, 3, 33), 0);
	struct waiter w3 = { .s = s, .o = own(3, 33, 3), .id = 5 };
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w3), 0);
	usleep(80 * 1000);
	locksvc_session_put(s, 3, 33);   /* its wait goes */
	pthread_join(th, NULL);
	assert_int_equal(w3.rc[w3.n - 1], -ENOTCONN);
	locksvc_session_put(s, 2, 22);   /* b's lock goes */
	struct locksvc_stats st;
	locksvc_stats(s, &st);
	assert_int_equal(st.tab.locks + st.tab.waits + st.sessions, 0);
	assert_true(st.granted_waits >= 2);
	locksvc_free(s);
}

struct listed {
	struct lt_holder h[8];
	uint64_t file[8];
	unsigned n;
};

static void list_one(void *arg, uint64_t file, enum lt_class c,
		     const struct lt_holder *h)
{
	struct listed *l = arg;
	assert_int_equal(c, LT_POSIX);
	assert_true(l->n < 8);
	l->file[l->n] = file;
	l->h[l->n++] = *h;
}

/* A record-only table (a mount's copy of what it holds at a home): no
 * conflicts, an owner's ranges still replace and split; locktab_each
 * lists what is held. */
static void test_record_only(void **state)
{
	(void)state;
	struct locktab *t;
	assert_int_equal(locktab_new(&t, 0, NULL, NULL), 0);
	locktab_record_only(t);
	struct lt_owner a = own(1, 5, 1), b = own(1, 5, 2);
	struct lt_range r = rng(0, 99, LT_WRLCK);
	assert_int_equal(locktab_set(t, 3, LT_POSIX, &a, &r, false, 0, NULL), 0);
	/* b's overlapping write lock: applied in the other order than the
	 * home granted them (a's unlock first there) */
	r = rng(50, 59, LT_WRLCK);
	assert_int_equal(locktab_set(t, 3, LT_POSIX, &b, &r, false, 0, NULL), 0);
	r = rng(40, 69, LT_UNLCK);
	assert_int_equal(locktab_set(t, 3, LT_POSIX, &a, &r, false, 0, NULL), 0);
	struct listed l = { .n = 0 };
	assert_int_equal(locktab_each(t, list_one, &l), 3);
	uint64_t bytes = 0;
	unsigned of_b = 0;
	for (unsigned k = 0; k < l.n; k++) {
		assert_int_equal(l.file[k], 3);
		assert_int_equal(l.h[k].r.type, LT_WRLCK);
		bytes += l.h[k].r.end - l.h[k].r.start + 1;
		if (l.h[k].who.owner == 2) {
			of_b++;
			assert_int_equal(l.h[k].r.start, 50);
			assert_int_equal(l.h[k].r.end, 59);
		}
	}
	assert_int_equal(of_b, 1);
	assert_int_equal(bytes, 40 + 30 + 10);   /* a: 0-39, 70-99; b: 50-59 */
	locktab_release_owner(t, 3, LT_POSIX, &a);
	l.n = 0;
	assert_int_equal(locktab_each(t, list_one, &l), 1);
	locktab_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_against_model),
		cmocka_unit_test(test_wait_grant_order),
		cmocka_unit_test(test_deadlock),
		cmocka_unit_test(test_departures),
		cmocka_unit_test(test_classes_and_limits),
		cmocka_unit_test(test_service),
		cmocka_unit_test(test_record_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
