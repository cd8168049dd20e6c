/* stall.h - telling one stall from a change of regime in the slow-run
 * detector (learn.c queue_judge; docs/policy-v2.md, section 2). */
#ifndef WARMLANE_CORE_STALL_H
#define WARMLANE_CORE_STALL_H

#include <stdint.h>

struct pool_endpoint;

/* A stall of the server (a process descheduled, a GC pause, a loaded
 * machine) delays every request in flight at that moment by about the
 * same pause; a slower server keeps delaying requests that start after
 * its previous slow answers. One pause explains a set of slow answers
 * only if it fits inside every one of their requests, from its start to
 * its headers: the intersection of their intervals is at least as long as
 * the largest excess (time to headers - the endpoint's base), within tol
 * (the endpoint's usual spread). The run keeps the intersection of the
 * answers of its latest pause; a slow answer that does not fit it starts
 * another. Requests of a 5x slower server that started more than about one
 * base apart cannot share a pause, so its second round of requests, each
 * sent after a slow answer came back, is a second pause; the requests one
 * stall caught all contain it, and are one.
 *
 * Adds a counted slow answer (request from start_ms to its headers at
 * headers_ms, excess_ms over the base) to e's run, and returns how many
 * separate pauses the run's answers need, this one included: 1 when it
 * is the run's first (e->slow_run == 0). */
unsigned stall_note(struct pool_endpoint *e, uint64_t start_ms,
		    uint64_t headers_ms, double excess_ms, double tol_ms);

#endif
