/* config_check_policy.c - the semantic checks of the configuration's policy section. */
#include "config_check.h"

#include <stdio.h>
#include <string.h>

#include "config_parse.h"

/* The names of the enums set by name, by index, for name_index. */
static const char *rung_name(int k)
{
	return core_rung_name((enum core_rung)k);
}

static const char *score_name(int k)
{
	return core_score_by_name((enum core_score_by)k);
}

static const char *scope_name(int k)
{
	return core_session_scope_name((enum core_session_scope)k);
}

static const char *routers_name(int k)
{
	return core_routers_name((enum core_routers)k);
}

static const char *mode_name(int k)
{
	return config_mode_name((enum config_mode)k);
}

/* The index of v among name(0) .. name(n - 1), or -1. */
static int name_index(const char *v, int n, const char *(*name)(int))
{
	for (int k = 0; k < n; k++)
		if (strcmp(v, name(k)) == 0)
			return k;
	return -1;
}

/* v's index among name(0) .. name(n - 1) into *k; unknown, an error at
 * path listing the known names. False when v is absent or unknown. */
static bool check_enum(struct config_check *s, const char *path,
		       const char *v, int n, const char *(*name)(int),
		       const char *known, int *k)
{
	if (v == NULL)
		return false;
	*k = name_index(v, n, name);
	if (*k < 0) {
		config_check_err(s, path, "\"%s\" is not one of %s", v, known);
		return false;
	}
	return true;
}

void config_check_policy(struct config_check *s, const struct raw_policy *rp,
			 struct core_params *p)
{
	const uint64_t S = 1000, M = 60 * S, H = 60 * M, D = 24 * H;

	config_check_duration(s, "policy.affinity_ttl", rp->affinity_ttl, S,
			      30 * D, &p->affinity_ttl_ms);
	config_check_u32(s, "policy.affinity_max_entries",
			 rp->affinity_max_entries, 1, 1 << 28,
			 &p->affinity_max_entries);

	if (rp->identity_ladder_count > 0) {
		bool seen[CORE_RUNG_COUNT] = { false };
		unsigned n = 0;
		bool bad = false;
		for (unsigned i = 0; i < rp->identity_ladder_count; i++) {
			char path[64];
			snprintf(path, sizeof(path), "policy.identity_ladder[%u]",
				 i);
			const char *name = rp->identity_ladder[i] != NULL
						   ? rp->identity_ladder[i]
						   : "";
			int r = name_index(name, CORE_RUNG_COUNT, rung_name);
			if (r < 0) {
				config_check_err(s, path,
					"unknown rung \"%s\" (known: session, prefix, install, caller, src)",
					name);
				bad = true;
			} else if (seen[r]) {
				config_check_err(s, path,
						 "rung \"%s\" listed twice",
						 name);
				bad = true;
			} else {
				seen[r] = true;
				p->identity_ladder[n++] = (enum core_rung)r;
			}
		}
		if (!bad)
			p->identity_ladder_len = n;
	}

	config_check_double(s, "policy.ewma_alpha", rp->ewma_alpha, 0, false, 1,
			    &p->ewma_alpha);
	config_check_u32(s, "policy.cold_start_samples", rp->cold_start_samples,
			 0, 1000000, &p->cold_start_samples);
	uint64_t prior = 0;
	if (rp->prior_ttfb != NULL) {
		prior = (uint64_t)p->prior_ttfb_ms;
		config_check_duration(s, "policy.prior_ttfb", rp->prior_ttfb, 1,
				      10 * M, &prior);
		p->prior_ttfb_ms = (double)prior;
	}
	config_check_duration(s, "policy.idle_reset", rp->idle_reset, S, 30 * D,
			      &p->idle_reset_ms);
	config_check_double(s, "policy.sticky_tolerance", rp->sticky_tolerance,
			    1, true, 1000, &p->sticky_tolerance);
	config_check_u32(s, "policy.slow_run", rp->slow_run, 0, 64,
			 &p->slow_run);
	config_check_double(s, "policy.load_factor", rp->load_factor, 1, true,
			    1000, &p->load_factor);
	config_check_u32(s, "policy.load_floor", rp->load_floor, 0, 1000000,
			 &p->load_floor);
	config_check_u32(s, "policy.load_floor_e2e", rp->load_floor_e2e, 0, 1000000,
			 &p->load_floor_e2e);
	config_check_u32(s, "policy.warm_slack", rp->warm_slack, 0, 1000000,
			 &p->warm_slack);
	/* 0: off (core_params.hot_share). */
	config_check_double(s, "policy.hot_share", rp->hot_share, 0, true, 100,
			    &p->hot_share);
	config_check_u32(s, "policy.place_choices", rp->place_choices, 1, 64,
			 &p->place_choices);
	/* 0: off (core_params.place_load_z). */
	config_check_double(s, "policy.place_load_z", rp->place_load_z, 0, true,
			    100, &p->place_load_z);
	config_check_double(s, "policy.alone_place_load_z", rp->alone_place_load_z,
			    0, true, 100, &p->alone_place_load_z);
	config_check_duration(s, "policy.alone_affinity_ttl",
			      rp->alone_affinity_ttl, S, 30 * D,
			      &p->alone_affinity_ttl_ms);
	/* 0: off (core_params.place_long_kib); 1 GiB is no prompt. */
	config_check_u32(s, "policy.place_long_kib", rp->place_long_kib, 0,
			 1048576, &p->place_long_kib);
	config_check_double(s, "policy.place_long_z", rp->place_long_z, 0, true,
			    100, &p->place_long_z);
	/* Negative: off (core_params.owned_bound). */
	config_check_double(s, "policy.owned_bound", rp->owned_bound, -1, true,
			    100, &p->owned_bound);
	config_check_duration(s, "policy.owned_half_life", rp->owned_half_life,
			      S, 30 * D, &p->owned_half_life_ms);
	/* 0: off (core_params.slow_start). */
	config_check_double(s, "policy.slow_start", rp->slow_start, 0, true,
			    100, &p->slow_start);
	/* 0: off (core_params.explore_share). */
	config_check_double(s, "policy.explore_share", rp->explore_share, 0,
			    true, 1, &p->explore_share);
	/* 0: every difference counts (core_params.p2c_margin). */
	config_check_double(s, "policy.p2c_margin", rp->p2c_margin, 0, true,
			    100, &p->p2c_margin);
	config_check_double(s, "policy.cost_weight_per_ms",
			    rp->cost_weight_per_ms, 0, true, 1e12,
			    &p->cost_weight_per_ms);
	config_check_duration(s, "policy.breaker_window", rp->breaker_window,
			      100, 1 * H, &p->breaker_window_ms);
	config_check_u32(s, "policy.breaker_min_requests",
			 rp->breaker_min_requests, 1, 1000000,
			 &p->breaker_min_requests);
	config_check_double(s, "policy.breaker_failure_ratio",
			    rp->breaker_failure_ratio, 0, false, 1,
			    &p->breaker_failure_ratio);
	config_check_u32(s, "policy.breaker_consecutive",
			 rp->breaker_consecutive, 1, 1000000,
			 &p->breaker_consecutive);
	config_check_duration(s, "policy.breaker_cooldown",
			      rp->breaker_cooldown, 100, 1 * D,
			      &p->breaker_cooldown_ms);
	config_check_duration(s, "policy.breaker_cooldown_max",
			      rp->breaker_cooldown_max, 100, 1 * D,
			      &p->breaker_cooldown_max_ms);
	config_check_u32(s, "policy.half_open_probes", rp->half_open_probes, 1,
			 1000, &p->half_open_probes);
	config_check_duration(s, "policy.rate_limit_cooldown",
			      rp->rate_limit_cooldown, S, 1 * D,
			      &p->rate_limit_cooldown_ms);
	config_check_duration(s, "policy.rate_limit_cooldown_max",
			      rp->rate_limit_cooldown_max, S, 1 * D,
			      &p->rate_limit_cooldown_max_ms);
	config_check_duration(s, "policy.dead_key_retry", rp->dead_key_retry, S,
			      30 * D, &p->dead_key_retry_ms);
	config_check_u32(s, "policy.model_mismatch_404s",
			 rp->model_mismatch_404s, 0, 1000,
			 &p->model_mismatch_404s);
	config_check_double(s, "policy.tier_spill", rp->tier_spill, 0, true,
			    1e6, &p->tier_spill);
	config_check_duration(s, "policy.tier_return", rp->tier_return, 0,
			      1 * D, &p->tier_return_ms);
	int k;
	if (check_enum(s, "policy.score_by", rp->score_by, CORE_SCORE_COUNT,
		       score_name, "headers, end_to_end, both", &k))
		p->score_by = (enum core_score_by)k;
	if (rp->artefact_affinity != NULL)
		p->artefact_affinity = *rp->artefact_affinity;
	if (rp->slow_start_leave != NULL)
		p->slow_start_leave = *rp->slow_start_leave;
	if (rp->place_slots != NULL)
		p->place_slots = *rp->place_slots;
	if (check_enum(s, "policy.session_scope", rp->session_scope,
		       CORE_SESSION_SCOPE_COUNT, scope_name, "global, caller",
		       &k))
		p->session_scope = (enum core_session_scope)k;
	if (check_enum(s, "policy.routers", rp->routers, CORE_ROUTERS_COUNT,
		       routers_name, "auto, one, several", &k))
		p->routers = (enum core_routers)k;
}

/* policy.mode: the agent's, not the core's (the core decides the same). */
void config_check_policy_mode(struct config_check *s,
			      const struct raw_policy *rp, struct config *cfg)
{
	int k;
	if (check_enum(s, "policy.mode", rp->mode, CONFIG_MODE_COUNT, mode_name,
		       "route, shadow", &k))
		cfg->mode = (enum config_mode)k;
}

void config_check_policy_order(struct config_check *s,
			       const struct raw_policy *rp,
			       const struct core_params *p)
{
	if (p->breaker_cooldown_ms > p->breaker_cooldown_max_ms) {
		char a[32], b[32];
		/* At the one of the two the file set (the cooldown if both). */
		bool own = rp != NULL && rp->breaker_cooldown != NULL;
		config_check_err_at(s,
			own ? "policy.breaker_cooldown" : "policy.breaker_cooldown_max",
			"policy.breaker_cooldown",
			"%s must not exceed policy.breaker_cooldown_max (%s)",
			config_fmt_duration(a, sizeof(a), p->breaker_cooldown_ms),
			config_fmt_duration(b, sizeof(b), p->breaker_cooldown_max_ms));
	}
	if (p->rate_limit_cooldown_ms > p->rate_limit_cooldown_max_ms) {
		char a[32], b[32];
		config_check_err(s, "policy.rate_limit_cooldown",
			"%s must not exceed policy.rate_limit_cooldown_max (%s)",
			config_fmt_duration(a, sizeof(a), p->rate_limit_cooldown_ms),
			config_fmt_duration(b, sizeof(b), p->rate_limit_cooldown_max_ms));
	}
}
