/* fanout.h - requests to several nodes at once: entries grouped by node,
 * then every node's requests sent before any answer is taken, so the set
 * costs one round trip of wall time however many nodes it reaches. It
 * knows nothing of pages, slots or groups: the caller says how to reach a
 * node (get, put) and what to send and take there (send, wait).
 *
 * Rules:
 *  - nodes are taken in index order, and each connection is held from its
 *    send to its wait: two threads that each fan out over the same nodes
 *    can never each hold a connection the other waits for;
 *  - every node whose send was tried has its wait called, even after an
 *    error (wait takes the answers still due, so the stream stays in
 *    step), and its put after that.
 * No allocation, no locks of its own; the callbacks run in the caller's
 * thread. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct cluster_client;

/* n entries grouped by key (each < nkeys): order[first[j] .. first[j+1])
 * are the indexes of key j's entries, in their order. first has nkeys + 1
 * entries, order n. */
void fanout_group(const uint8_t *key, unsigned n, unsigned nkeys,
		  unsigned *first, unsigned *order);

struct fanout_ops {
	/* a connection to node j; NULL with *rc (negative errno) when there
	 * is none */
	struct cluster_client *(*get)(void *ctx, unsigned j, int *rc);
	/* node j's requests sent on cl (pipelined): 0 or the first error */
	int (*send)(void *ctx, unsigned j, struct cluster_client *cl);
	/* node j's answers taken and handed out. cl NULL: get failed with
	 * rc; else rc is send's. Returns node j's result: 0 or the error
	 * that says what became of the connection. */
	int (*wait)(void *ctx, unsigned j, struct cluster_client *cl, int rc);
	/* done with node j's connection; rc: wait's result. NULL: nothing */
	void (*put)(void *ctx, unsigned j, struct cluster_client *cl, int rc);
};

/* Fan out to every node j < n with busy[j]: get and send to each, then
 * wait for and put each, in node order. rc[j] (may be NULL): node j's
 * result. n is at most FANOUT_MAX_NODES. */
#define FANOUT_MAX_NODES 256
void fanout_run(const struct fanout_ops *ops, void *ctx, const bool *busy,
		unsigned n, int *rc);
