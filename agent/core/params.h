/* params.h - the routing policy's parameters and their defaults.
 *
 * One field per row of ARCHITECTURE.md's defaults table. Durations are in
 * milliseconds of the monotonic clock the caller passes to the core. The
 * config loader (agent/config.c) fills this struct; the core only reads it.
 */
#ifndef WARMLANE_CORE_PARAMS_H
#define WARMLANE_CORE_PARAMS_H

#include <stdint.h>

/* Rungs of the identity ladder: which request attribute names the caller. */
enum core_rung {
	CORE_RUNG_SESSION = 0,
	CORE_RUNG_PREFIX  = 1, /* the longest prefix key present */
	CORE_RUNG_INSTALL = 2,
	CORE_RUNG_CALLER  = 3,
	CORE_RUNG_SRC     = 4,
	CORE_RUNG_COUNT
};

struct core_params {
	uint64_t affinity_ttl_ms;          /* 300 s */
	uint32_t affinity_max_entries;     /* 1,000,000 */
	enum core_rung identity_ladder[CORE_RUNG_COUNT];
	unsigned identity_ladder_len;      /* session, prefix, install, caller */
	double ewma_alpha;                 /* 0.3 */
	uint32_t cold_start_samples;       /* 20 */
	double prior_ttfb_ms;              /* 500 */
	uint64_t idle_reset_ms;            /* 60 s */
	double sticky_tolerance;           /* 2.5 */
	double load_factor;                /* 1.5 */
	/* Not in the table: in-flight requests an endpoint may always hold
	 * whatever the bound says. At low load the bound alone is too tight
	 * for LLM servers, which batch many requests: with 4 endpoints and one
	 * request in flight, ceil(1.5 x 2 / 4) = 1 would move a second session
	 * off its warm endpoint. */
	uint32_t load_floor;               /* 4 */
	double cost_weight_per_ms;         /* 0: cost ignored */
	uint64_t breaker_window_ms;        /* 10 s */
	uint32_t breaker_min_requests;     /* 5 */
	double breaker_failure_ratio;      /* 0.5 */
	uint32_t breaker_consecutive;      /* 5 */
	uint64_t breaker_cooldown_ms;      /* 5 s */
	uint64_t breaker_cooldown_max_ms;  /* 300 s */
	uint32_t half_open_probes;         /* 3 */
	uint64_t rate_limit_cooldown_ms;   /* 60 s */
	uint64_t dead_key_retry_ms;        /* 60 s */
	/* Not in the table: 404s in a row for one endpoint+model before it
	 * counts as not serving that model (for dead_key_retry_ms). 0: never. */
	uint32_t model_mismatch_404s;      /* 3 */
	uint64_t poll_interval_ms;         /* 200 ms (agent) */
	uint64_t snapshot_interval_ms;     /* 10 s (agent) */
};

/* Fills p with the defaults of ARCHITECTURE.md. */
void core_params_defaults(struct core_params *p);

/* The config name of a rung ("session", "prefix", ...), or NULL. */
const char *core_rung_name(enum core_rung r);

#endif
