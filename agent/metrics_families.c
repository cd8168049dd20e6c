/* metrics_families.c - every /metrics family as a row: name, type, help, labels, and where its value is read. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "core.h"
#include "metrics_samples.h"
#include "snapshot.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The struct a row's offsets are into. */
enum metrics_src {
	SRC_STATS,    /* srv->stats */
	SRC_ROUTE,    /* srv->route */
	SRC_CORE,     /* ctx->cs */
	SRC_SNAPSHOT, /* *srv->snapshot */
	SRC_SERVER,   /* *srv */
};

/* How a family's samples are written. */
enum metrics_kind {
	KIND_FIELD,    /* name v: the field at off */
	KIND_LABELS,   /* name{label="value"} v for each of values[] */
	KIND_ENUM,     /* name{label="value_name(i)"} v: the array at off, i from..to-1 */
	KIND_FN,       /* fn writes them */
	KIND_ENDPOINT, /* once per endpoint: ep writes them, else ep_at */
};

/* A counter or gauge field: its offset and width (uint64_t or uint32_t). */
struct metrics_field {
	size_t off;
	unsigned width;
};

#define FIELD_OF(T, f) \
	{ offsetof(T, f), _Generic(((T *)0)->f, uint64_t: 8, uint32_t: 4) }
/* Only uint64_t arrays are listed by enum. */
#define ARRAY_OF(T, f) \
	{ _Generic(&((T *)0)->f[0], uint64_t *: offsetof(T, f)), 8 }

struct metrics_value {
	const char *value;
	struct metrics_field at;
};

/* How an endpoint's field (struct core_endpoint_info) is printed. */
enum metrics_ep_fmt {
	EP_U32,  /* uint32_t (unsigned) */
	EP_U64,  /* uint64_t */
	EP_FLAG, /* bool: 0 or 1 */
	EP_G9,   /* double, %.9g */
	EP_G6,   /* double, %.6g */
	EP_MS,   /* double milliseconds, in seconds */
	EP_MS64, /* uint64_t milliseconds, in seconds */
};

struct metrics_ep_field {
	size_t off;
	enum metrics_ep_fmt fmt;
	size_t stride; /* arrays: the size of an element */
};

/* One family: its HELP and TYPE, then samples as kind says. */
struct metrics_family {
	const char *name, *type, *help;
	enum metrics_kind kind;
	enum metrics_src src;
	struct metrics_field at;                 /* FIELD, ENUM */
	const char *label;                       /* LABELS, ENUM */
	const struct metrics_value *values;      /* LABELS, a NULL value ends it */
	const char *(*value_name)(unsigned i);   /* ENUM */
	unsigned from, to;                       /* ENUM */
	metrics_sample_fn *fn;                   /* FN */
	metrics_sample_ep_fn *ep;                /* ENDPOINT */
	struct metrics_ep_field ep_at;           /* ENDPOINT without ep */
};

/* Row helpers: the source and the field in one. */
#define STATS(f)    .src = SRC_STATS, .at = FIELD_OF(struct stats, f)
#define ROUTE(f)    .src = SRC_ROUTE, .at = FIELD_OF(struct route, f)
#define CORE(f)     .src = SRC_CORE, .at = FIELD_OF(struct core_stats, f)
#define SNAP(f)     .src = SRC_SNAPSHOT, .at = FIELD_OF(struct snapshot_stats, f)
#define SERVER(f)   .src = SRC_SERVER, .at = FIELD_OF(struct server, f)
#define LABELS(S, l, ...) .kind = KIND_LABELS, .src = S, .label = l, \
	.values = (const struct metrics_value[]){ __VA_ARGS__, { NULL, { 0, 0 } } }
#define VALUE(T, v, f) { v, FIELD_OF(T, f) }
#define ENUM(S, T, l, f, name_fn, lo, hi) .kind = KIND_ENUM, .src = S, \
	.at = ARRAY_OF(T, f), .label = l, .value_name = name_fn, .from = lo, .to = hi
#define FN(f)       .kind = KIND_FN, .fn = metrics_sample_##f

/* Endpoint rows: a field of type T printed as fmt, or the array f (one
 * sample per value_name(i), i below n), or a writer of their own. */
#define EP_AT(T, f) \
	_Generic(((struct core_endpoint_info *)0)->f, \
		 T: offsetof(struct core_endpoint_info, f))
#define EP_ARRAY_AT(T, f) \
	_Generic(&((struct core_endpoint_info *)0)->f[0], \
		 T *: offsetof(struct core_endpoint_info, f))
#define EP(fmt, T, f) .kind = KIND_ENDPOINT, .ep_at = { EP_AT(T, f), fmt, 0 }
#define EP_BY(fmt, T, f, l, name_fn, n) .kind = KIND_ENDPOINT, \
	.ep_at = { EP_ARRAY_AT(T, f), fmt, \
		   sizeof(((struct core_endpoint_info *)0)->f[0]) }, \
	.label = l, .value_name = name_fn, .to = n
#define EP_FN(f)    .kind = KIND_ENDPOINT, .ep = metrics_sample_ep_##f

static const void *ctx_src(const struct metrics_ctx *c, enum metrics_src s)
{
	switch (s) {
	case SRC_STATS:
		return &c->srv->stats;
	case SRC_ROUTE:
		return c->r;
	case SRC_CORE:
		return &c->cs;
	case SRC_SNAPSHOT:
		return c->srv->snapshot;
	case SRC_SERVER:
		return c->srv;
	}
	return NULL;
}

static uint64_t field_read(const void *base, struct metrics_field at)
{
	const char *p = (const char *)base + at.off;
	return at.width == 8 ? *(const uint64_t *)(const void *)p
			     : *(const uint32_t *)(const void *)p;
}

/* Element i of the uint64_t array at.off (ARRAY_OF). */
static uint64_t enum_read(const void *base, struct metrics_field at, unsigned i)
{
	return ((const uint64_t *)(const void *)((const char *)base + at.off))[i];
}

/* ---- enum names, as KIND_ENUM wants them ----------------------------- */

static const char *reason_name(unsigned i)
{
	return route_reason_name((enum route_reason)i);
}

static const char *hint_name(unsigned i)
{
	return core_hint_name((enum core_hint_use)i);
}

static const char *haplog_error_name(unsigned i)
{
	return haplog_status_name(-(int)i);
}

static const char *end_name(unsigned i)
{
	return core_end_name((enum core_end)i);
}

static const char *probe_name(unsigned i)
{
	return core_probe_name((enum core_probe)i);
}

static const char *outcome_name(unsigned i)
{
	return core_outcome_name((enum core_outcome)i);
}

/* ---- endpoint fields ---------------------------------------------------- */

static const char *kind_name(unsigned i)
{
	return i == CORE_KIND_STREAM ? "stream" : "plain";
}

/* " v\n" of the field at p. */
static void ep_value(struct metrics_text *t, enum metrics_ep_fmt fmt,
		     const void *p)
{
	switch (fmt) {
	case EP_U32:
		metrics_text_printf(t, " %" PRIu32 "\n", *(const uint32_t *)p);
		return;
	case EP_U64:
		metrics_text_printf(t, " %" PRIu64 "\n", *(const uint64_t *)p);
		return;
	case EP_FLAG:
		metrics_text_printf(t, " %d\n", *(const bool *)p ? 1 : 0);
		return;
	case EP_G9:
		metrics_text_printf(t, " %.9g\n", *(const double *)p);
		return;
	case EP_G6:
		metrics_text_printf(t, " %.6g\n", *(const double *)p);
		return;
	case EP_MS:
		metrics_text_printf(t, " %.9g\n", *(const double *)p / 1000.0);
		return;
	case EP_MS64:
		metrics_text_printf(t, " %.9g\n",
				    (double)*(const uint64_t *)p / 1000.0);
		return;
	}
}

static void ep_samples(struct metrics_text *t, const struct metrics_family *f,
		       const struct core_endpoint_info *ep)
{
	const char *p = (const char *)ep + f->ep_at.off;
	if (f->label == NULL) {
		metrics_sample_ep_open(t, f->name, ep);
		metrics_text_puts(t, "}");
		ep_value(t, f->ep_at.fmt, p);
		return;
	}
	for (unsigned i = 0; i < f->to; i++) {
		metrics_sample_ep_open(t, f->name, ep);
		metrics_text_printf(t, ",%s=\"%s\"}", f->label, f->value_name(i));
		ep_value(t, f->ep_at.fmt, p + i * f->ep_at.stride);
	}
}

/* ---- the families, in the order they are served ------------------------ */

#define COUNTER "counter"
#define GAUGE   "gauge"

static const struct metrics_family families_head[] = {
	{ "warmlane_build_info", GAUGE,
	  "Always 1; the version of the running agent is a label.",
	  FN(build_info) },
	{ "warmlane_decisions_total", COUNTER, "Route decisions by reason.",
	  ENUM(SRC_STATS, struct stats, "reason", reasons, reason_name, 0,
	       ROUTE_REASON_COUNT) },
	{ "warmlane_decision_duration_seconds", "histogram",
	  "Time spent deciding one route message, in seconds: the first decision and one in 16 after it are timed.",
	  FN(decide_latency) },
	{ "warmlane_feedback_problems_total", COUNTER,
	  "Feedback messages the core could not use (fully or in part), by cause.",
	  LABELS(SRC_ROUTE, "cause",
		 VALUE(struct route, "unknown_server", fb.unknown_server),
		 VALUE(struct route, "bad_status", fb.bad_status),
		 VALUE(struct route, "bad_tr", fb.bad_tr),
		 VALUE(struct route, "bad_retry_after", fb.bad_retry_after),
		 VALUE(struct route, "bad_akey", fb.bad_akey)) },
};

/* The shared warm hint (docs/peers.md): what became of the hints route
 * messages brought, and of the arguments that could not make one. */
static const struct metrics_family families_hints[] = {
	{ "warmlane_hints_present_total", COUNTER,
	  "Decisions whose route message brought a shared warm hint for a known server.",
	  FN(hints_present) },
	{ "warmlane_hints_total", COUNTER,
	  "Shared warm hints by what became of them: used (newer than the agent's own entry, and chosen), agrees (names the own entry's server), older (the own entry is newer), refused (health, breaker or load), mismatch (recorded for another affinity key).",
	  ENUM(SRC_CORE, struct core_stats, "use", hints, hint_name,
	       CORE_HINT_USED, CORE_HINT_COUNT) },
	{ "warmlane_hints_own_total", COUNTER,
	  "Of those (mismatch aside), hints this HAProxy wrote itself (hint_peer false): they do not show a shared table, and policy.routers auto counts only the others (docs/peers.md).",
	  CORE(hints_own) },
	{ "warmlane_hint_problems_total", COUNTER,
	  "Hint arguments that made no hint, by cause; id_mismatch: the peers' server ids differ (docs/peers.md).",
	  LABELS(SRC_ROUTE, "cause",
		 VALUE(struct route, "partial", hints.args.partial),
		 VALUE(struct route, "unknown_id", hints.args.unknown_id),
		 VALUE(struct route, "id_mismatch", hints.args.id_mismatch),
		 VALUE(struct route, "stale", hints.args.stale),
		 VALUE(struct route, "no_endpoint", hints.args.no_endpoint)) },
	{ "warmlane_hint_servers", GAUGE,
	  "Servers whose HAProxy id is known (runtime API sid).",
	  ROUTE(hints.n) },
};

static const struct metrics_family families_middle[] = {
	/* The log input (logsrc.c): datagrams, what became of them, the lag. */
	{ "warmlane_log_input_active", GAUGE,
	  "1 while HAProxy's log lines are read (log_input), else 0.",
	  FN(log_input_active) },
	{ "warmlane_log_input_format_ok", GAUGE,
	  "0 when most log datagrams of the last 10 s window with any were not in warmlane's format (HAProxy's log target or format is wrong: alert on it), else 1.",
	  FN(log_format_ok) },
	{ "warmlane_log_input_unparsed_ratio", GAUGE,
	  "Share of unparseable log datagrams in the last 10 s window with any (0 before any).",
	  FN(log_unparsed_ratio) },
	{ "warmlane_log_datagrams_total", COUNTER,
	  "Log datagrams received from HAProxy.", ROUTE(log.received) },
	{ "warmlane_log_lines_total", COUNTER,
	  "Log datagrams by result: parsed (warmlane's fields found) or unparseable.",
	  LABELS(SRC_ROUTE, "result",
		 VALUE(struct route, "parsed", log.parsed),
		 VALUE(struct route, "unparseable", log.unparseable)) },
	{ "warmlane_log_unparseable_total", COUNTER,
	  "Unparseable log datagrams by error (empty, too_long, frame, no_fields, missing, value).",
	  ENUM(SRC_ROUTE, struct route, "error", log.errors, haplog_error_name,
	       1, 1 - HAPLOG_EVALUE) },
	{ "warmlane_log_completions_total", COUNTER,
	  "Parsed log lines of requests warmlane routed, by termination class.",
	  ENUM(SRC_ROUTE, struct route, "end", log.ends, end_name, 0,
	       CORE_END_COUNT) },
	{ "warmlane_log_ignored_total", COUNTER,
	  "Parsed log lines that changed nothing: unrouted (no warmlane decision), unknown_endpoint.",
	  LABELS(SRC_ROUTE, "cause",
		 VALUE(struct route, "unrouted", log.unrouted),
		 VALUE(struct route, "unknown_endpoint", log.unknown_endpoint)) },
	{ "warmlane_log_redispatched_total", COUNTER,
	  "Requests HAProxy redispatched away from warmlane's server after failed connections.",
	  ROUTE(log.redispatched) },
	{ "warmlane_log_bad_fields_total", COUNTER,
	  "Parsed log lines with a malformed optional field (used without it).",
	  ROUTE(log.bad_fields) },
	{ "warmlane_log_truncated_total", COUNTER,
	  "Log datagrams longer than the read buffer (cut).",
	  ROUTE(log.truncated) },
	{ "warmlane_log_lag_seconds", "histogram",
	  "Time from a request's end (HAProxy's clock) to the processing of its log line.",
	  FN(log_lag) },

	/* Upstream key probes (probe.c). */
	{ "warmlane_key_probes_total", COUNTER,
	  "Probes of upstream keys by result: accepted, refused (401/403: the key is excluded), inconclusive (5xx, no answer).",
	  ENUM(SRC_ROUTE, struct route, "result", probe.results, probe_name, 0,
	       CORE_PROBE_COUNT) },
	{ "warmlane_key_probe_transport_errors_total", COUNTER,
	  "Key probes that got no HTTP answer (connection refused, timeout): counted as inconclusive too.",
	  ROUTE(probe.transport_errors) },
	{ "warmlane_key_probes_active", GAUGE, "Key probes out now.",
	  ROUTE(probe.active) },

	/* Polls of the engines' /metrics (engine.c). */
	{ "warmlane_engine_polls_total", COUNTER,
	  "Polls of engines' /metrics (engine_metrics) by result: ok (a load read), failed (no answer, not 200, over the size bound, unparseable or no load metrics).",
	  LABELS(SRC_ROUTE, "result",
		 VALUE(struct route, "ok", engine.polls_ok),
		 VALUE(struct route, "failed", engine.polls_failed)) },
	{ "warmlane_engine_polls_overlapped_total", COUNTER,
	  "Poll ticks that found an endpoint's last poll still out (slower than engine.poll_interval): not sent again.",
	  ROUTE(engine.polls_overlapped) },
	{ "warmlane_engine_info_reads_total", COUNTER,
	  "Reads of endpoints' own descriptions (engine_info) by result: ok (fingerprinted), failed (no answer, not 200, over 256 KiB, not JSON, no known field).",
	  LABELS(SRC_ROUTE, "result",
		 VALUE(struct route, "ok", engine.info_ok),
		 VALUE(struct route, "failed", engine.info_failed)) },
	{ "warmlane_engine_samples_stale_total", COUNTER,
	  "Engine samples that aged past engine.max_age: the runtime API's in-flight view took over.",
	  FN(engine_stale) },
	{ "warmlane_routers_alone", GAUGE,
	  "1 while this agent routes alone (policy.routers one, or auto and the engines' counts show its HAProxy carrying their load, its requests carry the shared warm hint, or their turns show no other HAProxy): new keys by policy.alone_place_load_z, entries kept policy.alone_affinity_ttl; else 0.",
	  FN(routers_alone) },
	{ "warmlane_routers_hints", GAUGE,
	  "1 while this agent's decisions carry shared warm hints for their keys (HAProxy peers, docs/peers.md), some written by another HAProxy or with HAProxy's peers connected: its HAProxies agree on where keys went, and policy.routers auto routes alone; 0 once its decisions go on without them (their count, decayed over policy.idle_reset, under 1), or with its own HAProxy's only while its peers are not connected.",
	  FN(routers_hints) },
	{ "warmlane_routers_peers", GAUGE,
	  "What HAProxy's runtime API last said of its peers (show peers, asked every 5 s while requests carry shared warm hints): 1 every remote peer of the peers sections that share a table connected (or none listed), 0 one is not, -1 not asked or no such section.",
	  FN(routers_peers) },
	{ "warmlane_routers_turns", GAUGE,
	  "1 while the requests' turns (HAProxy's turn argument: the body's count of user messages) show no other HAProxy routing this agent's keys: of the last 64 requests of a conversation's third turn or later whose key's entry held an earlier turn, under 5% skipped one (from 50 such requests on; no caller counts over half of the last 64 while another's are under 10 minutes old), and policy.routers auto routes alone; 0 from 10%, or before 50.",
	  FN(routers_turns) },
	{ "warmlane_routers_turn_skips", GAUGE,
	  "Of the last 64 requests that warmlane_routers_turns counts, the share whose turn skipped one (another HAProxy routed it): about 0 alone, 0.2-0.6 behind several HAProxies that share nothing; -1 before 50 such requests.",
	  FN(routers_turn_skips) },
	{ "warmlane_routers_share", GAUGE,
	  "This HAProxy's share of the engines' running + waiting requests at their engine_metrics samples, over about policy.idle_reset (about 1 alone, 1/N behind N HAProxies); -1 while there is too little load to judge (the verdict is then kept).",
	  FN(routers_share) },

	/* The retry budgets (route.c, budget.c), one per backend warmlane
	 * routed to. */
	{ "warmlane_retry_budget_active", GAUGE,
	  "1 while the retry budget applies (retry_budget.enabled, the log input read, its lines in warmlane's format), else 0.",
	  FN(budget_active) },
	{ "warmlane_retry_budget_requests_total", COUNTER,
	  "Requests of the backend seen in the log input (first attempts).",
	  FN(budget_requests) },
	{ "warmlane_retries_total", COUNTER,
	  "Retries HAProxy made (the log lines' %rc), by backend.",
	  FN(budget_retries) },
	{ "warmlane_retry_budget_spent", GAUGE,
	  "Share of the backend's retry budget the window's retries use (retries / (ratio x first attempts + min_per_second x window)); at 1 or more, requests are marked noretry.",
	  FN(budget_spent) },
	{ "warmlane_noretry_total", COUNTER,
	  "Route answers that set txn.warmlane.noretry (the backend's retry budget spent), by backend.",
	  FN(budget_noretry) },
	{ "warmlane_retry_budget_overflow_total", COUNTER,
	  "Decisions for a backend past the budget table (64 backends): not budgeted.",
	  ROUTE(budgets_full) },

	/* Shadow mode (shadow.c, docs/shadow.md): HAProxy's pick against
	 * warmlane's would-be choice, counted whatever the mode (a reload
	 * back to route keeps them; answers to shadow decisions still
	 * arrive). */
	{ "warmlane_shadow_mode", GAUGE,
	  "1 in shadow mode (policy.mode shadow: warmlane decides and learns, HAProxy routes), 0 in route mode.",
	  FN(shadow_mode) },
	{ "warmlane_shadow_responses_total", COUNTER,
	  "Shadow-mode responses by warmlane's would-be reason and whether HAProxy's server (from the feedback, else the log line) was warmlane's choice: yes, no, none (warmlane had no server).",
	  FN(shadow_responses) },
	{ "warmlane_shadow_warm_total", COUNTER,
	  "Shadow-mode responses whose key had a warm entry warmlane would have kept (reason affinity).",
	  ROUTE(shadow.warm) },
	{ "warmlane_shadow_warm_missed_total", COUNTER,
	  "Of those, the responses HAProxy served from another server: the requests whose cache warmlane would have kept.",
	  ROUTE(shadow.warm_missed) },
	{ "warmlane_shadow_bad_reason_total", COUNTER,
	  "Shadow-mode feedback or log lines whose shadow_reason is not a reason of warmlane's: not compared.",
	  ROUTE(shadow.bad_reason) },
	{ "warmlane_shadow_duplicates_total", COUNTER,
	  "Shadow-mode answers of a request already compared (same unique id: a feedback whose ACK came too late for HAProxy, then its log line): counted once.",
	  ROUTE(shadow.duplicates) },
};

static const struct metrics_family families_core[] = {
	{ "warmlane_responses_total", COUNTER,
	  "Feedback responses by class of HTTP status.",
	  ENUM(SRC_CORE, struct core_stats, "class", outcomes, outcome_name, 0,
	       CORE_OUTCOME_COUNT) },
	{ "warmlane_tier_decisions_total", COUNTER,
	  "Route decisions that named an endpoint, by the endpoint's failover tier (reason failover: a worse tier than the best serving the model).",
	  FN(tier_decisions) },
	{ "warmlane_endpoints", GAUGE, "Endpoints known to the routing core.",
	  CORE(endpoints) },
	{ "warmlane_affinity_entries", GAUGE, "Live entries of the affinity map.",
	  CORE(affinity_entries) },
	{ "warmlane_affinity_capacity", GAUGE,
	  "Capacity of the affinity map (policy.affinity_max_entries).",
	  CORE(affinity_capacity) },
	{ "warmlane_affinity_memory_bytes", GAUGE,
	  "Memory allocated for the affinity map and its index.",
	  CORE(affinity_bytes) },
	{ "warmlane_affinity_hits_total", COUNTER,
	  "Affinity lookups that found a live entry.", CORE(affinity_hits) },
	{ "warmlane_affinity_misses_total", COUNTER,
	  "Affinity lookups that found no live entry.", CORE(affinity_misses) },
	{ "warmlane_affinity_evictions_total", COUNTER,
	  "Affinity entries evicted (least recently used, map full).",
	  CORE(affinity_evictions) },
	{ "warmlane_affinity_expirations_total", COUNTER,
	  "Affinity entries dropped after policy.affinity_ttl idle.",
	  CORE(affinity_expirations) },
	{ "warmlane_affinity_keys_back_total", COUNTER,
	  "Affinity keys that came back: a lookup found their entry live, or they were stored again soon after it lapsed.",
	  CORE(affinity_back) },
	{ "warmlane_affinity_keys_lapsed_total", COUNTER,
	  "Affinity keys whose entry expired or was evicted before they came back: while under 1 in 64 of the last come back, new keys go to any less loaded server.",
	  CORE(affinity_lapsed) },
	{ "warmlane_explore_probes_total", COUNTER,
	  "Requests sent to an endpoint left as slow or starved, to learn whether it recovered (policy.explore_share).",
	  CORE(explore_probes) },
	{ "warmlane_explore_recovered_total", COUNTER,
	  "Explored endpoints whose answers said they recovered.",
	  CORE(explore_recovered) },
	{ "warmlane_twin_sends_total", COUNTER,
	  "Requests of a hot key sent to its second warm server, the cheaper of its two (policy.hot_share).",
	  CORE(twin_sends) },
	{ "warmlane_twin_spreads_total", COUNTER,
	  "Hot keys sent off their only warm server, over the load bound, to warm a second (policy.hot_share).",
	  CORE(twin_spreads) },
	{ "warmlane_check_recovered_total", COUNTER,
	  "Endpoints whose HAProxy layer-7 health check, slow against their peers' checks, fit again: each re-tried at once.",
	  CORE(check_recovered) },

	/* One sample per endpoint (core_endpoint_info). */
	{ "warmlane_endpoint_in_flight", GAUGE,
	  "Requests in flight on the endpoint as decisions see them: the engine's running+waiting plus this agent's own since the sample while it is fresh, else runtime API scur+qcur plus decisions since.",
	  EP(EP_U32, uint32_t, in_flight) },
	{ "warmlane_endpoint_ttfb_ewma_seconds", GAUGE,
	  "EWMA of time to response headers, by request kind (stream: headers of a streamed answer; plain: a whole generation); 0 before the first sample.",
	  EP_BY(EP_MS, double, ewma_ms, "kind", kind_name,
		 CORE_KIND_COUNT) },
	{ "warmlane_endpoint_ttfb_samples", GAUGE,
	  "Successful responses in the EWMA since the endpoint was last cold, by kind.",
	  EP_BY(EP_U32, uint32_t, samples, "kind", kind_name,
		 CORE_KIND_COUNT) },
	{ "warmlane_endpoint_breaker_state", GAUGE,
	  "Circuit breaker: 0 closed, 1 half-open, 2 open.",
	  EP_FN(breaker) },
	{ "warmlane_endpoint_breaker_cooldown_seconds", GAUGE,
	  "Time left before an open breaker turns half-open (0 when not open).",
	  EP(EP_MS64, uint64_t, cooldown_left_ms) },
	{ "warmlane_endpoint_dead_key_seconds", GAUGE,
	  "Time left before an endpoint+key whose probe was refused (401/403) is probed again (0: not dead, or its re-probe is due).",
	  EP(EP_MS64, uint64_t, dead_key_left_ms) },
	{ "warmlane_endpoint_key_dead", GAUGE,
	  "1 while the endpoint+key is excluded because a probe of its key was refused (a last resort only), else 0.",
	  EP(EP_FLAG, bool, key_dead) },
	{ "warmlane_endpoint_admin_state", GAUGE,
	  "HAProxy admin/health state of the server, one series per state: 1 for the current one.",
	  EP_FN(admin) },
	{ "warmlane_endpoint_weight", GAUGE, "Configured relative capacity.",
	  EP(EP_G9, double, weight) },
	{ "warmlane_endpoint_slots", GAUGE,
	  "Requests the endpoint's engine runs at once, as policy.place_slots reads them: endpoints[].slots, else HAProxy's maxconn for the server, else the most its engine_metrics showed running while some waited; 0 unknown.",
	  EP(EP_U32, uint32_t, slots) },
	{ "warmlane_endpoint_decisions_total", COUNTER,
	  "Requests routed to the endpoint.", EP(EP_U64, uint64_t, decisions) },
	{ "warmlane_endpoint_responses_total", COUNTER,
	  "Feedback responses of the endpoint by class.",
	  EP_BY(EP_U64, uint64_t, outcomes, "class", outcome_name,
		 CORE_OUTCOME_COUNT) },
	{ "warmlane_endpoint_e2e_ewma_seconds_per_kib", GAUGE,
	  "EWMA of the whole request time (HAProxy's Ta, from its log line) per KiB of answer (answers under 16 KiB count as 16 KiB), by request kind; 0 before the first sample.",
	  EP_BY(EP_MS, double, e2e_ewma_ms, "kind", kind_name,
		 CORE_KIND_COUNT) },
	{ "warmlane_endpoint_completions_total", COUNTER,
	  "Requests of the endpoint that ended, from HAProxy's log lines, by how they ended.",
	  EP_BY(EP_U64, uint64_t, completions, "end", end_name,
		 CORE_END_COUNT) },
	{ "warmlane_endpoint_engine_requests", GAUGE,
	  "The engine's own running + waiting requests at its last /metrics sample (engine_metrics; 0 before one).",
	  EP(EP_U32, uint32_t, engine_load) },
	{ "warmlane_endpoint_engine_sample_age_seconds", GAUGE,
	  "Age of the last engine /metrics sample; -1 when none was ever read.",
	  EP_FN(engine_age) },
	{ "warmlane_endpoint_engine_fresh", GAUGE,
	  "1 while the engine's sample is within engine.max_age and is the in-flight view, else 0 (the runtime API's view).",
	  EP(EP_FLAG, bool, engine_fresh) },
	{ "warmlane_endpoint_engine_kv_usage_ratio", GAUGE,
	  "KV-cache usage of the engine's last sample (vLLM, SGLang), 0 to 1; -1 when it publishes none.",
	  EP(EP_G6, double, engine_kv) },
	{ "warmlane_endpoint_check_seconds", GAUGE,
	  "Duration of the endpoint's last layer-7 health check passed (HAProxy's check_duration with check_status L7OK); 0 without one in the last 10 s.",
	  EP(EP_MS, double, check_ms) },
	{ "warmlane_endpoint_check_slow", GAUGE,
	  "1 while the endpoint's health check is over sticky_tolerance times the median of its tier's other checks (and 50 ms over it), until one is within it again: meanwhile it gets no new key or anonymous request and its warm keys no warm_slack.",
	  EP(EP_FLAG, bool, check_slow) },
	{ "warmlane_endpoint_speed", GAUGE,
	  "How the latency rules last judged the endpoint, one series per verdict: 1 for the current one. fit: within sticky_tolerance of its peers (or not judged since); kept: over it, kept by its own past; left: over it and left as slow (its warm keys move, new keys pass it over), or its answers ran slower than its queue explains (policy.slow_run).",
	  EP_FN(speed) },
	{ "warmlane_endpoint_probed", GAUGE,
	  "1 while exploration sends the endpoint (left as slow, or starved) a bounded share of requests to learn whether it recovered (policy.explore_share).",
	  EP(EP_FLAG, bool, probed) },
	{ "warmlane_endpoint_engine_polls_total", COUNTER,
	  "Polls of the engine's /metrics that ended, by result (failed: no answer, not 200, over the size bound, or no load metrics in it).",
	  EP_FN(engine_polls) },
	{ "warmlane_endpoint_artefact_info", GAUGE,
	  "Always 1; the fingerprint of the artefact the endpoint says it serves (engine_info: /v1/models or /props) is a label, \"\" before one was read.",
	  EP_FN(artefact) },
	{ "warmlane_endpoint_artefact_mismatch", GAUGE,
	  "1 while another endpoint serving one of its model names has another artefact fingerprint, else 0.",
	  EP(EP_FLAG, bool, artefact_mismatch) },
	{ "warmlane_endpoint_tier", GAUGE,
	  "Failover tier of the endpoint (1 the best; endpoints[].tier, backends[].tier).",
	  EP(EP_U32, unsigned, tier) },
};

static const struct metrics_family families_tail[] = {
	{ "warmlane_spop_connections_accepted_total", COUNTER,
	  "SPOP connections accepted from HAProxy.", STATS(conn_accepted) },
	{ "warmlane_spop_connections_closed_total", COUNTER,
	  "SPOP connections closed, by either side.", STATS(conn_closed) },
	{ "warmlane_spop_connections_active", GAUGE,
	  "SPOP connections open now.", STATS(conn_active) },
	{ "warmlane_spop_connections_refused_total", COUNTER,
	  "SPOP connections closed at accept: spop.max_connections reached.",
	  STATS(conn_refused) },
	{ "warmlane_spop_timeouts_total", COUNTER,
	  "SPOP connections closed for a timeout: hello (no HAPROXY-HELLO in spop.hello_timeout) or idle (no frame in spop.idle_timeout).",
	  LABELS(SRC_STATS, "kind",
		 VALUE(struct stats, "hello", timeouts_hello),
		 VALUE(struct stats, "idle", timeouts_idle)) },
	{ "warmlane_spop_healthchecks_total", COUNTER,
	  "Health-check HELLOs answered.", STATS(healthchecks) },
	{ "warmlane_spop_frames_total", COUNTER,
	  "SPOP frames by type and direction (received from or sent to HAProxy).",
	  FN(spop_frames) },
	{ "warmlane_spop_messages_total", COUNTER,
	  "SPOE messages received, by name (unknown: any other name).",
	  LABELS(SRC_STATS, "message",
		 VALUE(struct stats, "route", msgs_route),
		 VALUE(struct stats, "feedback", msgs_feedback),
		 VALUE(struct stats, "unknown", msgs_unknown)) },
	{ "warmlane_spop_protocol_errors_total", COUNTER,
	  "AGENT-DISCONNECTs sent for a protocol error, by SPOP status code.",
	  FN(protocol_errors) },
	{ "warmlane_spop_disconnects_received_total", COUNTER,
	  "HAPROXY-DISCONNECTs received, by SPOP status code.",
	  FN(disconnects_received) },
	{ "warmlane_spop_ack_fallbacks_total", COUNTER,
	  "ACKs cut down to the bare ack variable to fit the frame size.",
	  STATS(ack_fallbacks) },
	{ "warmlane_spop_read_stalls_total", COUNTER,
	  "Times reading from HAProxy paused for backpressure.",
	  STATS(read_stalls) },
	{ "warmlane_spop_io_errors_total", COUNTER,
	  "Socket read or write errors other than end of file or reset.",
	  STATS(io_errors) },
	{ "warmlane_spop_writes_total", COUNTER,
	  "Socket writes to HAProxy; the ACKs of one read share a write.",
	  STATS(writes) },
	{ "warmlane_spop_coalesce_waits_total", COUNTER,
	  "Polls delayed by spop.coalesce_us so that frames share a wake-up.",
	  STATS(coalesce_waits) },
	{ "warmlane_spop_coalesce_busy_total", COUNTER,
	  "Polls spop.coalesce_us would have delayed but did not: its recent sleeps ended late, the CPU is busy.",
	  STATS(coalesce_busy) },
	{ "warmlane_spop_connections_limit", GAUGE,
	  "The SPOP connection cap in force (spop.max_connections, or from RLIMIT_NOFILE).",
	  SERVER(max_conns) },
	{ "warmlane_runtime_polls_total", COUNTER,
	  "HAProxy runtime-API polls started.", STATS(runtime_polls) },
	{ "warmlane_runtime_poll_failures_total", COUNTER,
	  "HAProxy runtime-API polls that got no usable answer.",
	  STATS(runtime_poll_failures) },
};

/* The state snapshot (snapshot.h, struct snapshot_stats). */
static const struct metrics_family families_snapshot[] = {
	{ "warmlane_snapshot_writes_total", COUNTER, "State snapshots written.",
	  SNAP(writes) },
	{ "warmlane_snapshot_write_failures_total", COUNTER,
	  "State snapshots that could not be written.", SNAP(write_failures) },
	{ "warmlane_snapshot_last_success_timestamp_seconds", GAUGE,
	  "Wall-clock time of the last snapshot written (0: none yet).",
	  FN(snapshot_last_success) },
	{ "warmlane_snapshot_write_duration_seconds", GAUGE,
	  "Last snapshot: from the start of its capture to the rename of the file.",
	  FN(snapshot_write_duration) },
	{ "warmlane_snapshot_loop_hold_seconds", GAUGE,
	  "Last snapshot: longest time one capture slice held the event loop.",
	  FN(snapshot_loop_hold) },
	{ "warmlane_snapshot_size_bytes", GAUGE,
	  "Size of the last snapshot written.", SNAP(last_bytes) },
	{ "warmlane_snapshot_entries", GAUGE,
	  "Affinity entries in the last snapshot written.", SNAP(last_entries) },
	{ "warmlane_snapshot_restored_entries", GAUGE,
	  "Affinity entries restored from the snapshot at start.",
	  SNAP(restored) },
	{ "warmlane_snapshot_dropped_entries", GAUGE,
	  "Affinity entries of the snapshot dropped at start, by cause.",
	  LABELS(SRC_SNAPSHOT, "cause",
		 VALUE(struct snapshot_stats, "expired", dropped_expired),
		 VALUE(struct snapshot_stats, "unknown_endpoint", dropped_unknown)) },
	{ "warmlane_snapshot_corrupt_total", COUNTER,
	  "Snapshot files rejected at start and renamed aside (FILE.corrupt).",
	  SNAP(corrupt) },
};

/* ---- rendering --------------------------------------------------------- */

static bool prepare_hints(struct metrics_ctx *c)
{
	if (c->core == NULL)
		return false;
	core_stats(c->core, &c->cs);
	return true;
}

/* Expired affinity entries dropped per scrape at most (about 1 ms). */
#define METRICS_EXPIRE_MAX 8192

/* The map drops an expired entry only when a lookup meets it or an insert
 * makes room, so without traffic the entries gauge would go on counting
 * callers long gone. Expiring first makes it count live entries: oldest
 * first, stopping at the first live one, each entry dropped once. Bounded,
 * like a snapshot slice, because a drop costs about 150 ns: a backlog of
 * 10^6 (traffic that fell) would hold the loop 0.15 s in one scrape;
 * beyond the bound, later scrapes (and inserts, two each) go on. */
static bool prepare_core(struct metrics_ctx *c)
{
	if (c->core == NULL)
		return false;
	core_affinity_expire(c->core, c->now_ms, METRICS_EXPIRE_MAX);
	core_stats(c->core, &c->cs);
	return true;
}

static bool prepare_snapshot(struct metrics_ctx *c)
{
	return c->srv->snapshot != NULL;
}

/* Families in order; a group whose prepare returns false is left out. */
static const struct {
	bool (*prepare)(struct metrics_ctx *c); /* NULL: always served */
	const struct metrics_family *f;
	size_t n;
} metrics_groups[] = {
	{ NULL, families_head, N_OF(families_head) },
	{ prepare_hints, families_hints, N_OF(families_hints) },
	{ NULL, families_middle, N_OF(families_middle) },
	{ prepare_core, families_core, N_OF(families_core) },
	{ NULL, families_tail, N_OF(families_tail) },
	{ prepare_snapshot, families_snapshot, N_OF(families_snapshot) },
};

static void render_family(struct metrics_text *t, const struct metrics_family *f,
			  const struct metrics_ctx *c)
{
	metrics_text_family(t, f->name, f->type, f->help);
	const void *base = ctx_src(c, f->src);
	switch (f->kind) {
	case KIND_FIELD:
		metrics_text_u64(t, f->name, field_read(base, f->at));
		return;
	case KIND_LABELS:
		for (const struct metrics_value *v = f->values; v->value != NULL; v++)
			metrics_text_u64_label(t, f->name, f->label, v->value,
					       field_read(base, v->at));
		return;
	case KIND_ENUM:
		for (unsigned i = f->from; i < f->to; i++)
			metrics_text_u64_label(t, f->name, f->label,
					       f->value_name(i),
					       enum_read(base, f->at, i));
		return;
	case KIND_FN:
		f->fn(t, f->name, c);
		return;
	case KIND_ENDPOINT:
		/* Only in families_core: c->core is set. One pass per
		 * family: the text format wants a family's samples together,
		 * and core_endpoint_info is a copy, cheaper than an
		 * allocation to hold them all. */
		for (int i = core_endpoint_next(c->core, -1); i >= 0;
		     i = core_endpoint_next(c->core, i)) {
			struct core_endpoint_info ep;
			if (core_endpoint_info(c->core, i, c->now_ms, &ep) < 0)
				continue;
			if (f->ep != NULL)
				f->ep(t, f->name, &ep);
			else
				ep_samples(t, f, &ep);
		}
		return;
	}
}

int metrics_render(struct metrics_text *t, const struct server *srv,
		   uint64_t now_ms)
{
	struct metrics_ctx c = { .srv = srv, .r = &srv->route,
				 .core = srv->route.core, .now_ms = now_ms };
	for (size_t g = 0; g < N_OF(metrics_groups); g++) {
		if (metrics_groups[g].prepare != NULL &&
		    !metrics_groups[g].prepare(&c))
			continue;
		for (size_t i = 0; i < metrics_groups[g].n; i++)
			render_family(t, &metrics_groups[g].f[i], &c);
	}
	return t->oom ? -ENOMEM : 0;
}
