/* metrics_samples.c - the /metrics families whose samples are computed, not read from one field. */
#include "metrics_samples.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "snapshot.h"
#include "warmlane_version.h"

void metrics_sample_build_info(struct metrics_text *t, const char *name,
			       const struct metrics_ctx *c)
{
	(void)c;
	metrics_text_u64_label(t, name, "version", WARMLANE_VERSION, 1);
}

/* Bucket bounds as Prometheus reads them back (stats_latency_bounds_ns). */
static const char *const metrics_le[STATS_LATENCY_BUCKETS] = {
	"1e-06", "2e-06", "5e-06", "1e-05", "2e-05",
	"5e-05", "0.0001", "0.0002", "0.0005", "0.001",
};

void metrics_sample_decide_latency(struct metrics_text *t, const char *name,
				   const struct metrics_ctx *c)
{
	const struct stats_histogram *h = &c->srv->stats.decide_latency;
	uint64_t cum = 0;
	for (unsigned i = 0; i < STATS_LATENCY_BUCKETS; i++) {
		cum += h->buckets[i];
		metrics_text_printf(t, "%s_bucket{le=\"%s\"} %" PRIu64 "\n",
				    name, metrics_le[i], cum);
	}
	cum += h->buckets[STATS_LATENCY_BUCKETS];
	metrics_text_histogram_end(t, name, cum, (double)h->sum_ns / 1e9,
				   h->count);
}

void metrics_sample_hints_present(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	uint64_t present = 0;
	for (int u = CORE_HINT_USED; u < CORE_HINT_COUNT; u++)
		present += c->cs.hints[u];
	metrics_text_u64(t, name, present);
}

void metrics_sample_log_input_active(struct metrics_text *t, const char *name,
				     const struct metrics_ctx *c)
{
	metrics_text_u64(t, name, c->r->log_input ? 1 : 0);
}

void metrics_sample_log_format_ok(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	metrics_text_u64(t, name, c->r->log.format_bad ? 0 : 1);
}

void metrics_sample_log_unparsed_ratio(struct metrics_text *t, const char *name,
				       const struct metrics_ctx *c)
{
	metrics_text_printf(t, "%s %.4f\n", name, c->r->log.unparsed_ratio);
}

void metrics_sample_log_lag(struct metrics_text *t, const char *name,
			    const struct metrics_ctx *c)
{
	const struct route_log_stats *l = &c->r->log;
	for (size_t i = 0; i < ROUTE_LAG_BUCKETS; i++)
		metrics_text_printf(t, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name,
				    route_lag_bounds_s[i], l->lag_buckets[i]);
	metrics_text_histogram_end(t, name, l->lag_count, l->lag_sum_s,
				   l->lag_count);
}

/* Aged out at a tick (core_engine_expire) or at a runtime-API poll: the
 * endpoints keep the count. */
void metrics_sample_engine_stale(struct metrics_text *t, const char *name,
				 const struct metrics_ctx *c)
{
	uint64_t stale = 0;
	for (int i = c->core != NULL ? core_endpoint_next(c->core, -1) : -1;
	     i >= 0; i = core_endpoint_next(c->core, i)) {
		struct core_endpoint_info in;
		if (core_endpoint_info(c->core, i, c->now_ms, &in) == 0)
			stale += in.engine_stale;
	}
	metrics_text_u64(t, name, stale);
}

void metrics_sample_routers_alone(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	struct core_routers_info r = { .alone = false };
	if (c->core != NULL)
		core_routers_info(c->core, &r);
	metrics_text_u64(t, name, r.alone ? 1 : 0);
}

void metrics_sample_routers_hints(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	struct core_routers_info r = { .hints = false };
	if (c->core != NULL)
		core_routers_info(c->core, &r);
	metrics_text_u64(t, name, r.hints ? 1 : 0);
}

void metrics_sample_routers_turns(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	struct core_routers_info r = { .turns = false };
	if (c->core != NULL)
		core_routers_info(c->core, &r);
	metrics_text_u64(t, name, r.turns ? 1 : 0);
}

void metrics_sample_routers_turn_skips(struct metrics_text *t, const char *name,
				       const struct metrics_ctx *c)
{
	struct core_routers_info r = { .skips = -1 };
	if (c->core != NULL)
		core_routers_info(c->core, &r);
	metrics_text_printf(t, "%s %.6g\n", name, r.skips);
}

void metrics_sample_routers_peers(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	struct core_routers_info r = { .peers = CORE_PEERS_UNKNOWN };
	if (c->core != NULL)
		core_routers_info(c->core, &r);
	metrics_text_printf(t, "%s %d\n", name,
			    r.peers == CORE_PEERS_CONNECTED ? 1 :
			    r.peers == CORE_PEERS_APART ? 0 : -1);
}

void metrics_sample_routers_share(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	struct core_routers_info r = { .share = -1 };
	if (c->core != NULL)
		core_routers_info(c->core, &r);
	metrics_text_printf(t, "%s %.6g\n", name, r.share);
}

void metrics_sample_budget_active(struct metrics_text *t, const char *name,
				  const struct metrics_ctx *c)
{
	const struct route *r = c->r;
	bool on = r->cfg->retry_budget_enabled && r->log_input &&
		  !r->log.format_bad;
	metrics_text_u64(t, name, on ? 1 : 0);
}

/* The uint64_t counter f of struct route_budget, as an offset. */
#define BUDGET(f) \
	_Generic(((struct route_budget *)0)->f, \
		 uint64_t: offsetof(struct route_budget, f))

/* One sample per backend of the budget table: the counter at off. */
static void budget_counter(struct metrics_text *t, const char *name,
			   const struct route *r, size_t off)
{
	for (unsigned i = 0; i < r->n_budgets; i++) {
		const char *b = (const char *)&r->budgets[i];
		metrics_text_u64_label(t, name, "backend", r->budgets[i].backend,
				       *(const uint64_t *)(const void *)(b + off));
	}
}

void metrics_sample_budget_requests(struct metrics_text *t, const char *name,
				    const struct metrics_ctx *c)
{
	budget_counter(t, name, c->r, BUDGET(requests));
}

void metrics_sample_budget_retries(struct metrics_text *t, const char *name,
				   const struct metrics_ctx *c)
{
	budget_counter(t, name, c->r, BUDGET(retries));
}

void metrics_sample_budget_noretry(struct metrics_text *t, const char *name,
				   const struct metrics_ctx *c)
{
	budget_counter(t, name, c->r, BUDGET(noretry));
}

void metrics_sample_budget_spent(struct metrics_text *t, const char *name,
				 const struct metrics_ctx *c)
{
	const struct route *r = c->r;
	for (unsigned i = 0; i < r->n_budgets; i++) {
		uint64_t first, retries;
		route_budget_counts(r, i, c->now_ms, &first, &retries);
		double allow = budget_allowance(&r->cfg->retry_budget, first);
		/* Nothing allowed (ratio and floor 0): always spent. */
		double used = allow > 0 ? (double)retries / allow : 1.0;
		metrics_text_printf(t, "%s{backend=", name);
		metrics_text_label_value(t, r->budgets[i].backend);
		metrics_text_printf(t, "} %.4f\n", used);
	}
}

void metrics_sample_shadow_mode(struct metrics_text *t, const char *name,
				const struct metrics_ctx *c)
{
	metrics_text_u64(t, name, c->r->cfg->mode == CONFIG_MODE_SHADOW ? 1 : 0);
}

void metrics_sample_shadow_responses(struct metrics_text *t, const char *name,
				     const struct metrics_ctx *c)
{
	const struct shadow_stats *sh = &c->r->shadow;
	for (int k = 0; k < CORE_REASON_COUNT; k++)
		for (int m = 0; m < SHADOW_MATCH_COUNT; m++) {
			metrics_text_printf(t, "%s{reason=", name);
			metrics_text_label_value(t, core_reason_name((enum core_reason)k));
			metrics_text_printf(t, ",match=\"%s\"} %" PRIu64 "\n",
					    shadow_match_name((enum shadow_match)m),
					    sh->responses[k][m]);
		}
}

/* Tiers 1 up to the worst any decision used (tier 1 always), so that an
 * untiered pool shows one series. */
void metrics_sample_tier_decisions(struct metrics_text *t, const char *name,
				   const struct metrics_ctx *c)
{
	unsigned tiers = 1;
	for (unsigned k = 0; k < CORE_TIER_MAX; k++)
		if (c->cs.tier_decisions[k] > 0)
			tiers = k + 1;
	for (unsigned k = 0; k < tiers; k++) {
		char tier[12];
		snprintf(tier, sizeof(tier), "%u", k + 1);
		metrics_text_u64_label(t, name, "tier", tier,
				       c->cs.tier_decisions[k]);
	}
}

void metrics_sample_spop_frames(struct metrics_text *t, const char *name,
				const struct metrics_ctx *c)
{
	for (int f = 0; f < STATS_FRAME_COUNT; f++) {
		bool sent = f == STATS_FRAME_AGENT_HELLO ||
			    f == STATS_FRAME_AGENT_DISCONNECT ||
			    f == STATS_FRAME_ACK;
		metrics_text_printf(t, "%s{type=", name);
		metrics_text_label_value(t, stats_frame_name((enum stats_frame)f));
		metrics_text_printf(t, ",direction=\"%s\"} %" PRIu64 "\n",
				    sent ? "sent" : "received",
				    c->srv->stats.frames[f]);
	}
}

/* Statuses that never happened are left out: 15 mostly-zero series per
 * family say nothing, and a counter may appear later. */
static void status_counts(struct metrics_text *t, const char *name,
			  const uint64_t *n, unsigned from)
{
	char code[16];
	for (unsigned i = from; i < STATS_STATUS_COUNT; i++) {
		if (n[i] == 0)
			continue;
		snprintf(code, sizeof(code), "%" PRIu32, stats_status_code(i));
		metrics_text_u64_label(t, name, "status", code, n[i]);
	}
}

/* Status 0 is an orderly close, not an error. */
void metrics_sample_protocol_errors(struct metrics_text *t, const char *name,
				    const struct metrics_ctx *c)
{
	status_counts(t, name, c->srv->stats.disconnects_sent, 1);
}

void metrics_sample_disconnects_received(struct metrics_text *t,
					 const char *name,
					 const struct metrics_ctx *c)
{
	status_counts(t, name, c->srv->stats.disconnects_received, 0);
}

void metrics_sample_snapshot_last_success(struct metrics_text *t,
					  const char *name,
					  const struct metrics_ctx *c)
{
	metrics_text_printf(t, "%s %.3f\n", name,
			    (double)c->srv->snapshot->last_write_unix_ms / 1000.0);
}

void metrics_sample_snapshot_write_duration(struct metrics_text *t,
					    const char *name,
					    const struct metrics_ctx *c)
{
	metrics_text_printf(t, "%s %.6f\n", name,
			    (double)c->srv->snapshot->last_write_us / 1e6);
}

void metrics_sample_snapshot_loop_hold(struct metrics_text *t, const char *name,
				       const struct metrics_ctx *c)
{
	metrics_text_printf(t, "%s %.6f\n", name,
			    (double)c->srv->snapshot->last_hold_us / 1e6);
}

/* ---- per-endpoint samples --------------------------------------------- */

/* name{backend="...",server="..."[,key="..."]: the key id only when the
 * endpoint has one (ids name keys, never hold them). The caller closes
 * the braces. */
void metrics_sample_ep_open(struct metrics_text *t, const char *name,
			    const struct core_endpoint_info *ep)
{
	metrics_text_printf(t, "%s{backend=", name);
	metrics_text_label_value(t, ep->backend != NULL ? ep->backend : "");
	metrics_text_puts(t, ",server=");
	metrics_text_label_value(t, ep->server != NULL ? ep->server : "");
	if (ep->key_id != NULL && ep->key_id[0] != '\0') {
		metrics_text_puts(t, ",key=");
		metrics_text_label_value(t, ep->key_id);
	}
}

/* Ordered by severity, not by the core's enum, so that max() and
 * thresholds read naturally on a dashboard. */
void metrics_sample_ep_breaker(struct metrics_text *t, const char *name,
			       const struct core_endpoint_info *ep)
{
	metrics_sample_ep_open(t, name, ep);
	metrics_text_printf(t, "} %d\n",
			    ep->breaker == CORE_BREAKER_OPEN	     ? 2
			    : ep->breaker == CORE_BREAKER_HALF_OPEN ? 1
								     : 0);
}

void metrics_sample_ep_admin(struct metrics_text *t, const char *name,
			     const struct core_endpoint_info *ep)
{
	for (int a = 0; a < CORE_ADMIN_COUNT; a++) {
		metrics_sample_ep_open(t, name, ep);
		metrics_text_printf(t, ",state=\"%s\"} %d\n",
				    core_admin_name((enum core_admin)a),
				    ep->admin == (enum core_admin)a);
	}
}

void metrics_sample_ep_speed(struct metrics_text *t, const char *name,
			     const struct core_endpoint_info *ep)
{
	for (int v = 0; v < CORE_SPEED_COUNT; v++) {
		metrics_sample_ep_open(t, name, ep);
		metrics_text_printf(t, ",speed=\"%s\"} %d\n",
				    core_speed_name((enum core_speed)v),
				    ep->speed == (enum core_speed)v);
	}
}

void metrics_sample_ep_engine_age(struct metrics_text *t, const char *name,
				  const struct core_endpoint_info *ep)
{
	metrics_sample_ep_open(t, name, ep);
	if (ep->engine_age_ms == UINT64_MAX)
		metrics_text_puts(t, "} -1\n");
	else
		metrics_text_printf(t, "} %.3f\n",
				    (double)ep->engine_age_ms / 1000.0);
}

void metrics_sample_ep_engine_polls(struct metrics_text *t, const char *name,
				    const struct core_endpoint_info *ep)
{
	metrics_sample_ep_open(t, name, ep);
	metrics_text_printf(t, ",result=\"ok\"} %" PRIu64 "\n",
			    ep->engine_polls_ok);
	metrics_sample_ep_open(t, name, ep);
	metrics_text_printf(t, ",result=\"failed\"} %" PRIu64 "\n",
			    ep->engine_polls_failed);
}

void metrics_sample_ep_artefact(struct metrics_text *t, const char *name,
				const struct core_endpoint_info *ep)
{
	metrics_sample_ep_open(t, name, ep);
	if (ep->artefact != 0)
		metrics_text_printf(t, ",fingerprint=\"%016llx\"} 1\n",
				    (unsigned long long)ep->artefact);
	else
		metrics_text_puts(t, ",fingerprint=\"\"} 1\n");
}
