/* trace.h - what one decision looked at, step by step (core_explain): for the command socket's `explain`. */
#ifndef WARMLANE_CORE_TRACE_H
#define WARMLANE_CORE_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

/* Endpoints listed per step; a pool larger than this is summed up in the
 * counts (n_* fields) and the lists say how many were left out. */
#define CORE_TRACE_MAX 64

/* Why an endpoint is not a candidate (step 2), in view_build's order. */
enum core_trace_excl {
	CORE_TRACE_CANDIDATE = 0,
	CORE_TRACE_NOT_SERVING,     /* does not serve the request's model */
	CORE_TRACE_DISABLED,        /* disabled by config */
	CORE_TRACE_DRAINED,         /* drained on the command socket */
	CORE_TRACE_ADMIN,           /* HAProxy's state is not ENABLED */
	CORE_TRACE_MODEL_404,       /* 404s for this model */
	CORE_TRACE_KEY_DEAD,        /* a probe refused its key */
	CORE_TRACE_BREAKER,         /* open, or half-open with its probes out */
	CORE_TRACE_EXCL_COUNT
};

struct core_trace_endpoint {
	int endpoint;
	enum core_trace_excl why;
	enum core_admin admin;
	enum core_breaker breaker;
	uint64_t cooldown_left_ms;
	uint32_t in_flight;
	double weight;
};

/* One endpoint of the rendezvous ranking, best first. walked: the
 * decision looked at it (the walk stops at the first that qualifies, or
 * after place_choices qualify); then fast (within sticky_tolerance, pick.h
 * fast_enough) and bounded (the load bound). */
struct core_trace_rank {
	int endpoint;
	double score;              /* rdv_cost: the lower ranks first */
	bool walked, fast, bounded;
	uint32_t in_flight;
	uint32_t floor;            /* pick.h bound_floor, when walked */
	uint32_t floor_base;       /* the same before floor_scale (load_floor
				    * or load_floor_e2e) */
	bool floor_lifted;         /* pick.h floor_lifted: the floor does
				    * not hold (a slow server's queue) */
	double weight;
	double cost;               /* p2c_cost, when walked */
};

/* Filled by core_explain. */
struct core_trace {
	int model;                 /* model id, -1 none, -2 unknown to all */
	bool has_akey;
	uint64_t akey;
	/* Step 2. */
	uint32_t n_endpoints, serving, candidates;
	uint64_t total_in_flight;  /* over the candidates */
	double total_weight;
	struct core_trace_endpoint ep[CORE_TRACE_MAX];
	uint32_t n_ep;             /* listed (<= CORE_TRACE_MAX) */
	/* Step 2c: the latency medians in use (0 headers, 1 end to end). */
	bool use[2];
	double median[2], tolerated[2];
	/* Step 3: the map entry. */
	bool entry;                /* a live entry exists */
	int entry_endpoint;
	uint64_t entry_idle_ms;
	bool entry_stale;          /* its endpoint was removed since */
	int entry_window;          /* a shorter prefix window's entry (its
				    * index, 0-2: the conversation's
				    * previous turn); -1: the key's own */
	bool entry_candidate, entry_closed, entry_fast, entry_bounded;
	bool entry_start;         /* not slow from its start (slow_start_leave) */
	int home_endpoint;        /* back from a worse tier to its home: the
				   * endpoint; -1 none, or it cannot take it */
	double hot_share;         /* the key's share of the decisions (hot.h) */
	int twin_endpoint;        /* its second warm endpoint (step 3c); -1
				   * none, or it cannot take it */
	bool twin_spread;         /* off its only warm endpoint, to warm a
				   * second (policy.hot_share) */
	/* Step 4. */
	bool ranked;
	uint32_t n_rank;
	struct core_trace_rank rank[CORE_TRACE_MAX];
	double load_factor;
	uint32_t load_floor, load_floor_e2e, place_choices;
	double floor_scale;        /* core.h floor_scale: 1 / this agent's
				    * share of the engines' load, or 1 */
	bool by_load;              /* a new key sent to the least loaded
				    * candidate instead (place_load_z) */
	bool by_long;              /* by_load, held to place_long_z: a long
				    * prompt (place_long_kib) */
	bool by_rare;              /* by_load, to any lighter candidate:
				    * keys rarely come back here
				    * (decide.c, keys_rarely_back) */
	bool by_turn;              /* a later turn's key new here, behind
				    * several HAProxies: its rendezvous
				    * choice, not by load */
	bool by_slots;             /* a new key sent to a free slot: every
				    * slot of its choice was busy (place_slots) */
	bool by_wait;              /* by_slots, none free: to the fewest
				    * waiting for one */
	/* Step 5: the two random choices and their costs. */
	bool p2c;
	int p2c_a, p2c_b;
	double p2c_cost_a, p2c_cost_b;
	bool p2c_check_a, p2c_check_b; /* slow by its HAProxy check: the other
					* is taken whatever the costs */
	bool p2c_equal;            /* their latencies within p2c_margin:
				    * the costs count them as equal */
	/* The outcome. */
	struct core_decision decision;
};

/* Decides req at now_ms exactly as core_decide would (same code, drawing
 * from *rng, which the caller passes as a copy to leave its own alone),
 * fills *t with every step, then puts the core back as it was: in-flight
 * counts, breakers, marks, counters, the map (looked up without being
 * touched) and the pending decision. *out is the decision that would be
 * taken. Allocates a copy of the pool's endpoint states (not a decision
 * path call): returns 0, or -ENOMEM with nothing done. */
int core_explain(struct core *c, const struct core_request *req,
		 uint64_t now_ms, struct core_rng *rng,
		 struct core_decision *out, struct core_trace *t);

/* The exclusion's name ("candidate", "not_serving", ...), or "unknown". */
const char *core_trace_excl_name(enum core_trace_excl e);

#endif
