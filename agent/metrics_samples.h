/* metrics_samples.h - the /metrics families whose samples are computed, not read from one field (metrics_families.c lists every family). */
#ifndef WARMLANE_METRICS_SAMPLES_H
#define WARMLANE_METRICS_SAMPLES_H

#include <stdint.h>

#include "core.h"
#include "metrics_text.h"
#include "server.h"

/* What one scrape reads; cs is filled by the group of families that
 * needs it (metrics_families.c). */
struct metrics_ctx {
	const struct server *srv;
	const struct route *r;
	struct core *core; /* srv->route.core, may be NULL */
	struct core_stats cs;
	uint64_t now_ms;   /* uv_now */
};

/* Writes the samples of family name (its HELP and TYPE are written). */
typedef void metrics_sample_fn(struct metrics_text *t, const char *name,
			       const struct metrics_ctx *c);

metrics_sample_fn metrics_sample_build_info;
metrics_sample_fn metrics_sample_decide_latency;
metrics_sample_fn metrics_sample_hints_present;      /* c->cs filled */
metrics_sample_fn metrics_sample_log_input_active;
metrics_sample_fn metrics_sample_log_format_ok;
metrics_sample_fn metrics_sample_log_unparsed_ratio;
metrics_sample_fn metrics_sample_log_lag;
metrics_sample_fn metrics_sample_engine_stale;
metrics_sample_fn metrics_sample_routers_alone;
metrics_sample_fn metrics_sample_routers_share;
metrics_sample_fn metrics_sample_routers_hints;
metrics_sample_fn metrics_sample_routers_turns;
metrics_sample_fn metrics_sample_routers_turn_skips;
metrics_sample_fn metrics_sample_routers_peers;
metrics_sample_fn metrics_sample_budget_active;
metrics_sample_fn metrics_sample_budget_requests;
metrics_sample_fn metrics_sample_budget_retries;
metrics_sample_fn metrics_sample_budget_noretry;
metrics_sample_fn metrics_sample_budget_spent;
metrics_sample_fn metrics_sample_shadow_mode;
metrics_sample_fn metrics_sample_shadow_responses;
metrics_sample_fn metrics_sample_tier_decisions;     /* c->cs filled */
metrics_sample_fn metrics_sample_spop_frames;
metrics_sample_fn metrics_sample_protocol_errors;
metrics_sample_fn metrics_sample_disconnects_received;
/* The three below need srv->snapshot. */
metrics_sample_fn metrics_sample_snapshot_last_success;
metrics_sample_fn metrics_sample_snapshot_write_duration;
metrics_sample_fn metrics_sample_snapshot_loop_hold;

/* Writes name{backend="...",server="..."[,key="..."] (the key id only
 * when the endpoint has one); the caller closes the braces. */
void metrics_sample_ep_open(struct metrics_text *t, const char *name,
			    const struct core_endpoint_info *ep);

/* Writes the samples of family name for one endpoint. */
typedef void metrics_sample_ep_fn(struct metrics_text *t, const char *name,
				  const struct core_endpoint_info *ep);

metrics_sample_ep_fn metrics_sample_ep_breaker;
metrics_sample_ep_fn metrics_sample_ep_admin;
metrics_sample_ep_fn metrics_sample_ep_speed;
metrics_sample_ep_fn metrics_sample_ep_engine_age;
metrics_sample_ep_fn metrics_sample_ep_engine_polls;
metrics_sample_ep_fn metrics_sample_ep_artefact;

#endif
