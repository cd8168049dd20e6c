/* params.c - defaults of the routing policy (docs/architecture.md, "Defaults"). */
#include "params.h"

#include <stddef.h>

void core_params_defaults(struct core_params *p)
{
	*p = (struct core_params){
		.affinity_ttl_ms = 300 * 1000,
		.affinity_max_entries = 1000000,
		.identity_ladder = { CORE_RUNG_SESSION, CORE_RUNG_PREFIX,
				     CORE_RUNG_INSTALL, CORE_RUNG_CALLER },
		.identity_ladder_len = 4,
		.ewma_alpha = 0.05,
		.cold_start_samples = 20,
		.prior_ttfb_ms = 500,
		.idle_reset_ms = 60 * 1000,
		.sticky_tolerance = 2.5,
		.slow_run = 4,
		.score_by = CORE_SCORE_BOTH,
		.session_scope = CORE_SESSION_CALLER,
		.load_factor = 1.5,
		.load_floor = 6,
		.load_floor_e2e = 8,
		.warm_slack = 6,
		.place_choices = 1,
		.place_load_z = 1.5,
		.place_long_kib = 0,
		.place_long_z = 0.5,
		.place_slots = true,
		.owned_bound = 0.5,
		.slow_start = 2,
		.slow_start_leave = true,
		.owned_half_life_ms = 150 * 1000,
		.explore_share = 0.25,
		.p2c_margin = 0.25,
		.cost_weight_per_ms = 0,
		.breaker_window_ms = 10 * 1000,
		.breaker_min_requests = 5,
		.breaker_failure_ratio = 0.5,
		.breaker_consecutive = 5,
		.breaker_cooldown_ms = 5 * 1000,
		.breaker_cooldown_max_ms = 300 * 1000,
		.half_open_probes = 3,
		.rate_limit_cooldown_ms = 60 * 1000,
		.rate_limit_cooldown_max_ms = 600 * 1000,
		.dead_key_retry_ms = 60 * 1000,
		.key_probe = false,
		.artefact_affinity = false,
		.key_probe_interval_ms = 10 * 1000,
		.model_mismatch_404s = 3,
		.poll_interval_ms = 200,
		.engine_max_age_ms = 2000,
		.snapshot_interval_ms = 10 * 1000,
	};
}

