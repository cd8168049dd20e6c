/* metrics.c - Prometheus text on a loopback port: libmicrohttpd driven by the libuv loop. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

/* Only this file includes it; it needs nothing beyond POSIX 2008 (fd_set,
 * sockaddr, socklen_t: sys/select.h and sys/socket.h above). */
#include <microhttpd.h>

#include "core.h"
#include "log.h"
#include "snapshot.h"
#include "warmlane_version.h"

/* libmicrohttpd lines logged per 10 s at most. */
#define METRICS_MHDLOG_PER_WINDOW 5
#define METRICS_MHDLOG_WINDOW_MS  10000

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- the text buffer ------------------------------------------------- */

void metrics_text_finish(struct metrics_text *t)
{
	free(t->p);
	*t = (struct metrics_text){ 0 };
}

static bool text_reserve(struct metrics_text *t, size_t more)
{
	if (t->oom)
		return false;
	if (more < t->cap - t->len)
		return true;
	size_t cap = t->cap > 0 ? t->cap : 4096;
	while (more >= cap - t->len) {
		if (cap > SIZE_MAX / 2) {
			t->oom = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(t->p, cap);
	if (p == NULL) {
		t->oom = true;
		return false;
	}
	t->p = p;
	t->cap = cap;
	return true;
}

static void text_put(struct metrics_text *t, const char *s, size_t n)
{
	if (!text_reserve(t, n))
		return;
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void text_puts(struct metrics_text *t, const char *s)
{
	text_put(t, s, strlen(s));
}

static void text_printf(struct metrics_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void text_printf(struct metrics_text *t, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		t->oom = true;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		text_put(t, small, (size_t)n);
		return;
	}
	/* Longer than any line we format today; kept correct anyway. */
	if (!text_reserve(t, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(t->p + t->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

/* A label value as the text format wants it: \\, \" and \n escaped. The
 * names come from configuration and HAProxy, so anything may be in them. */
static void text_label_value(struct metrics_text *t, const char *v)
{
	text_put(t, "\"", 1);
	for (const char *s = v; *s != '\0';) {
		size_t run = strcspn(s, "\\\"\n");
		text_put(t, s, run);
		s += run;
		if (*s == '\0')
			break;
		text_put(t, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\",
			 2);
		s++;
	}
	text_put(t, "\"", 1);
}

/* # HELP and # TYPE of one family: every sample of it must follow before
 * the next family starts. */
static void text_family(struct metrics_text *t, const char *name,
			const char *type, const char *help)
{
	text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* "name value" for an unlabelled counter or gauge. */
static void text_u64(struct metrics_text *t, const char *name, uint64_t v)
{
	text_printf(t, "%s %" PRIu64 "\n", name, v);
}

static void text_family_u64(struct metrics_text *t, const char *name,
			    const char *type, const char *help, uint64_t v)
{
	text_family(t, name, type, help);
	text_u64(t, name, v);
}

/* A sample with one label: name{label="value"} v. */
static void text_u64_label(struct metrics_text *t, const char *name,
			   const char *label, const char *value, uint64_t v)
{
	text_printf(t, "%s{%s=", name, label);
	text_label_value(t, value);
	text_printf(t, "} %" PRIu64 "\n", v);
}

/* ---- rendering --------------------------------------------------------- */

/* Bucket bounds as Prometheus reads them back (stats_latency_bounds_ns). */
static const char *const metrics_le[STATS_LATENCY_BUCKETS] = {
	"1e-06", "2e-06", "5e-06", "1e-05", "2e-05",
	"5e-05", "0.0001", "0.0002", "0.0005", "0.001",
};

static void render_spop(struct metrics_text *t, const struct stats *st)
{
	text_family_u64(t, "warmlane_spop_connections_accepted_total", "counter",
			"SPOP connections accepted from HAProxy.",
			st->conn_accepted);
	text_family_u64(t, "warmlane_spop_connections_closed_total", "counter",
			"SPOP connections closed, by either side.",
			st->conn_closed);
	text_family_u64(t, "warmlane_spop_connections_active", "gauge",
			"SPOP connections open now.", st->conn_active);
	text_family_u64(t, "warmlane_spop_connections_refused_total", "counter",
			"SPOP connections closed at accept: spop.max_connections reached.",
			st->conn_refused);
	text_family(t, "warmlane_spop_timeouts_total", "counter",
		    "SPOP connections closed for a timeout: hello (no HAPROXY-HELLO in spop.hello_timeout) or idle (no frame in spop.idle_timeout).");
	text_u64_label(t, "warmlane_spop_timeouts_total", "kind", "hello",
		       st->timeouts_hello);
	text_u64_label(t, "warmlane_spop_timeouts_total", "kind", "idle",
		       st->timeouts_idle);
	text_family_u64(t, "warmlane_spop_healthchecks_total", "counter",
			"Health-check HELLOs answered.", st->healthchecks);

	text_family(t, "warmlane_spop_frames_total", "counter",
		    "SPOP frames by type and direction (received from or sent to HAProxy).");
	for (int f = 0; f < STATS_FRAME_COUNT; f++) {
		bool sent = f == STATS_FRAME_AGENT_HELLO ||
			    f == STATS_FRAME_AGENT_DISCONNECT ||
			    f == STATS_FRAME_ACK;
		text_puts(t, "warmlane_spop_frames_total{type=");
		text_label_value(t, stats_frame_name((enum stats_frame)f));
		text_printf(t, ",direction=\"%s\"} %" PRIu64 "\n",
			    sent ? "sent" : "received", st->frames[f]);
	}

	text_family(t, "warmlane_spop_messages_total", "counter",
		    "SPOE messages received, by name (unknown: any other name).");
	text_u64_label(t, "warmlane_spop_messages_total", "message", "route",
		       st->msgs_route);
	text_u64_label(t, "warmlane_spop_messages_total", "message",
		       "feedback", st->msgs_feedback);
	text_u64_label(t, "warmlane_spop_messages_total", "message", "unknown",
		       st->msgs_unknown);

	/* Statuses that never happened are left out: 15 mostly-zero series
	 * per family say nothing, and a counter may appear later. */
	char code[16];
	text_family(t, "warmlane_spop_protocol_errors_total", "counter",
		    "AGENT-DISCONNECTs sent for a protocol error, by SPOP status code.");
	for (unsigned i = 1; i < STATS_STATUS_COUNT; i++) {
		if (st->disconnects_sent[i] == 0)
			continue;
		snprintf(code, sizeof(code), "%" PRIu32, stats_status_code(i));
		text_u64_label(t, "warmlane_spop_protocol_errors_total",
			       "status", code, st->disconnects_sent[i]);
	}
	text_family(t, "warmlane_spop_disconnects_received_total", "counter",
		    "HAPROXY-DISCONNECTs received, by SPOP status code.");
	for (unsigned i = 0; i < STATS_STATUS_COUNT; i++) {
		if (st->disconnects_received[i] == 0)
			continue;
		snprintf(code, sizeof(code), "%" PRIu32, stats_status_code(i));
		text_u64_label(t, "warmlane_spop_disconnects_received_total",
			       "status", code, st->disconnects_received[i]);
	}

	text_family_u64(t, "warmlane_spop_ack_fallbacks_total", "counter",
			"ACKs cut down to the bare ack variable to fit the frame size.",
			st->ack_fallbacks);
	text_family_u64(t, "warmlane_spop_read_stalls_total", "counter",
			"Times reading from HAProxy paused for backpressure.",
			st->read_stalls);
	text_family_u64(t, "warmlane_spop_io_errors_total", "counter",
			"Socket read or write errors other than end of file or reset.",
			st->io_errors);
	text_family_u64(t, "warmlane_spop_writes_total", "counter",
			"Socket writes to HAProxy; the ACKs of one read share a write.",
			st->writes);
}

static void render_decisions(struct metrics_text *t, const struct stats *st)
{
	text_family(t, "warmlane_decisions_total", "counter",
		    "Route decisions by reason.");
	for (int r = 0; r < ROUTE_REASON_COUNT; r++)
		text_u64_label(t, "warmlane_decisions_total", "reason",
			       route_reason_name((enum route_reason)r),
			       st->reasons[r]);

	const struct stats_histogram *h = &st->decide_latency;
	text_family(t, "warmlane_decision_duration_seconds", "histogram",
		    "Time spent deciding one route message, in seconds.");
	uint64_t cum = 0;
	for (unsigned i = 0; i < STATS_LATENCY_BUCKETS; i++) {
		cum += h->buckets[i];
		text_printf(t,
			    "warmlane_decision_duration_seconds_bucket{le=\"%s\"} %" PRIu64 "\n",
			    metrics_le[i], cum);
	}
	cum += h->buckets[STATS_LATENCY_BUCKETS];
	text_printf(t,
		    "warmlane_decision_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
		    "warmlane_decision_duration_seconds_sum %.9g\n"
		    "warmlane_decision_duration_seconds_count %" PRIu64 "\n",
		    cum, (double)h->sum_ns / 1e9, h->count);
}

static void render_feedback(struct metrics_text *t, const struct route *r)
{
	const struct {
		const char *cause;
		uint64_t v;
	} causes[] = {
		{ "unknown_server", r->fb.unknown_server },
		{ "bad_status", r->fb.bad_status },
		{ "bad_tr", r->fb.bad_tr },
		{ "bad_retry_after", r->fb.bad_retry_after },
		{ "bad_akey", r->fb.bad_akey },
	};
	text_family(t, "warmlane_feedback_problems_total", "counter",
		    "Feedback messages the core could not use (fully or in part), by cause.");
	for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
		text_u64_label(t, "warmlane_feedback_problems_total", "cause",
			       causes[i].cause, causes[i].v);
}

/* The shared warm hint (docs/peers.md): what became of the hints route
 * messages brought, and of the arguments that could not make one. */
static void render_hints(struct metrics_text *t, const struct route *r)
{
	struct core_stats cs;
	if (r->core == NULL)
		return;
	core_stats(r->core, &cs);
	uint64_t present = 0;
	for (int u = CORE_HINT_USED; u < CORE_HINT_COUNT; u++)
		present += cs.hints[u];
	text_family_u64(t, "warmlane_hints_present_total", "counter",
			"Decisions whose route message brought a shared warm hint for a known server.",
			present);
	text_family(t, "warmlane_hints_total", "counter",
		    "Shared warm hints by what became of them: used (newer than the agent's own entry, and chosen), agrees (names the own entry's server), older (the own entry is newer), refused (health, breaker or load), mismatch (recorded for another affinity key).");
	for (int u = CORE_HINT_USED; u < CORE_HINT_COUNT; u++)
		text_u64_label(t, "warmlane_hints_total", "use",
			       core_hint_name((enum core_hint_use)u), cs.hints[u]);
	const struct hint_arg_stats *a = &r->hints.args;
	const struct {
		const char *cause;
		uint64_t v;
	} causes[] = {
		{ "partial", a->partial },
		{ "unknown_id", a->unknown_id },
		{ "id_mismatch", a->id_mismatch },
		{ "stale", a->stale },
		{ "no_endpoint", a->no_endpoint },
	};
	text_family(t, "warmlane_hint_problems_total", "counter",
		    "Hint arguments that made no hint, by cause; id_mismatch: the peers' server ids differ (docs/peers.md).");
	for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
		text_u64_label(t, "warmlane_hint_problems_total", "cause",
			       causes[i].cause, causes[i].v);
	text_family_u64(t, "warmlane_hint_servers", "gauge",
			"Servers whose HAProxy id is known (runtime API sid).",
			r->hints.n);
}

/* The log input (logsrc.c): datagrams, what became of them, the lag. */
static void render_log_input(struct metrics_text *t, const struct route *r)
{
	const struct route_log_stats *l = &r->log;
	text_family_u64(t, "warmlane_log_input_active", "gauge",
			"1 while HAProxy's log lines are read (log_input), else 0.",
			r->log_input ? 1 : 0);
	text_family_u64(t, "warmlane_log_input_format_ok", "gauge",
			"0 when most log datagrams of the last 10 s window with any were not in warmlane's format (HAProxy's log target or format is wrong: alert on it), else 1.",
			l->format_bad ? 0 : 1);
	text_family(t, "warmlane_log_input_unparsed_ratio", "gauge",
		    "Share of unparseable log datagrams in the last 10 s window with any (0 before any).");
	text_printf(t, "warmlane_log_input_unparsed_ratio %.4f\n", l->unparsed_ratio);
	text_family_u64(t, "warmlane_log_datagrams_total", "counter",
			"Log datagrams received from HAProxy.", l->received);
	text_family(t, "warmlane_log_lines_total", "counter",
		    "Log datagrams by result: parsed (warmlane's fields found) or unparseable.");
	text_u64_label(t, "warmlane_log_lines_total", "result", "parsed",
		       l->parsed);
	text_u64_label(t, "warmlane_log_lines_total", "result", "unparseable",
		       l->unparseable);
	text_family(t, "warmlane_log_unparseable_total", "counter",
		    "Unparseable log datagrams by error (empty, too_long, frame, no_fields, missing, value).");
	for (int e = 1; e <= -HAPLOG_EVALUE; e++)
		text_u64_label(t, "warmlane_log_unparseable_total", "error",
			       haplog_status_name(-e), l->errors[e]);
	text_family(t, "warmlane_log_completions_total", "counter",
		    "Parsed log lines of requests warmlane routed, by termination class.");
	for (int e = 0; e < CORE_END_COUNT; e++)
		text_u64_label(t, "warmlane_log_completions_total", "end",
			       core_end_name((enum core_end)e), l->ends[e]);
	text_family(t, "warmlane_log_ignored_total", "counter",
		    "Parsed log lines that changed nothing: unrouted (no warmlane decision), unknown_endpoint.");
	text_u64_label(t, "warmlane_log_ignored_total", "cause", "unrouted",
		       l->unrouted);
	text_u64_label(t, "warmlane_log_ignored_total", "cause",
		       "unknown_endpoint", l->unknown_endpoint);
	text_family_u64(t, "warmlane_log_redispatched_total", "counter",
			"Requests HAProxy redispatched away from warmlane's server after failed connections.",
			l->redispatched);
	text_family_u64(t, "warmlane_log_bad_fields_total", "counter",
			"Parsed log lines with a malformed optional field (used without it).",
			l->bad_fields);
	text_family_u64(t, "warmlane_log_truncated_total", "counter",
			"Log datagrams longer than the read buffer (cut).",
			l->truncated);
	text_family(t, "warmlane_log_lag_seconds", "histogram",
		    "Time from a request's end (HAProxy's clock) to the processing of its log line.");
	for (size_t i = 0; i < ROUTE_LAG_BUCKETS; i++)
		text_printf(t, "warmlane_log_lag_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
			    route_lag_bounds_s[i], l->lag_buckets[i]);
	text_printf(t,
		    "warmlane_log_lag_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
		    "warmlane_log_lag_seconds_sum %.9g\n"
		    "warmlane_log_lag_seconds_count %" PRIu64 "\n",
		    l->lag_count, l->lag_sum_s, l->lag_count);
}

/* The retry budgets (route.c, budget.c), one per backend warmlane routed
 * to. */
static void render_retry_budgets(struct metrics_text *t, const struct route *r,
				 uint64_t now_ms)
{
	const struct budget_params *p = &r->cfg->retry_budget;
	bool on = r->cfg->retry_budget_enabled && r->log_input &&
		  !r->log.format_bad;
	text_family_u64(t, "warmlane_retry_budget_active", "gauge",
			"1 while the retry budget applies (retry_budget.enabled, the log input read, its lines in warmlane's format), else 0.",
			on ? 1 : 0);
	text_family(t, "warmlane_retry_budget_requests_total", "counter",
		    "Requests of the backend seen in the log input (first attempts).");
	for (unsigned i = 0; i < r->n_budgets; i++)
		text_u64_label(t, "warmlane_retry_budget_requests_total",
			       "backend", r->budgets[i].backend,
			       r->budgets[i].requests);
	text_family(t, "warmlane_retries_total", "counter",
		    "Retries HAProxy made (the log lines' %rc), by backend.");
	for (unsigned i = 0; i < r->n_budgets; i++)
		text_u64_label(t, "warmlane_retries_total", "backend",
			       r->budgets[i].backend, r->budgets[i].retries);
	text_family(t, "warmlane_retry_budget_spent", "gauge",
		    "Share of the backend's retry budget the window's retries use (retries / (ratio x first attempts + min_per_second x window)); at 1 or more, requests are marked noretry.");
	for (unsigned i = 0; i < r->n_budgets; i++) {
		uint64_t first, retries;
		route_budget_counts(r, i, now_ms, &first, &retries);
		double allow = budget_allowance(p, first);
		/* Nothing allowed (ratio and floor 0): always spent. */
		double used = allow > 0 ? (double)retries / allow : 1.0;
		text_printf(t, "warmlane_retry_budget_spent{backend=");
		text_label_value(t, r->budgets[i].backend);
		text_printf(t, "} %.4f\n", used);
	}
	text_family(t, "warmlane_noretry_total", "counter",
		    "Route answers that set txn.warmlane.noretry (the backend's retry budget spent), by backend.");
	for (unsigned i = 0; i < r->n_budgets; i++)
		text_u64_label(t, "warmlane_noretry_total", "backend",
			       r->budgets[i].backend, r->budgets[i].noretry);
	text_family_u64(t, "warmlane_retry_budget_overflow_total", "counter",
			"Decisions for a backend past the budget table (64 backends): not budgeted.",
			r->budgets_full);
}

/* Polls of the engines' /metrics (engine.c). */
static void render_engine(struct metrics_text *t, const struct route *r,
			  uint64_t now_ms)
{
	const struct route_engine_stats *e = &r->engine;
	/* Aged out at a tick (core_engine_expire) or at a runtime-API poll:
	 * the endpoints keep the count. */
	uint64_t stale = 0;
	for (int i = r->core != NULL ? core_endpoint_next(r->core, -1) : -1;
	     i >= 0; i = core_endpoint_next(r->core, i)) {
		struct core_endpoint_info in;
		if (core_endpoint_info(r->core, i, now_ms, &in) == 0)
			stale += in.engine_stale;
	}
	text_family(t, "warmlane_engine_polls_total", "counter",
		    "Polls of engines' /metrics (engine_metrics) by result: ok (a load read), failed (no answer, not 200, over the size bound, unparseable or no load metrics).");
	text_u64_label(t, "warmlane_engine_polls_total", "result", "ok", e->polls_ok);
	text_u64_label(t, "warmlane_engine_polls_total", "result", "failed",
		       e->polls_failed);
	text_family_u64(t, "warmlane_engine_polls_overlapped_total", "counter",
			"Poll ticks that found an endpoint's last poll still out (slower than engine.poll_interval): not sent again.",
			e->polls_overlapped);
	text_family(t, "warmlane_engine_info_reads_total", "counter",
		    "Reads of endpoints' own descriptions (engine_info) by result: ok (fingerprinted), failed (no answer, not 200, over 256 KiB, not JSON, no known field).");
	text_u64_label(t, "warmlane_engine_info_reads_total", "result", "ok", e->info_ok);
	text_u64_label(t, "warmlane_engine_info_reads_total", "result", "failed",
		       e->info_failed);
	text_family_u64(t, "warmlane_engine_samples_stale_total", "counter",
			"Engine samples that aged past engine.max_age: the runtime API's in-flight view took over.",
			stale);
}

/* Shadow mode (shadow.c, docs/shadow.md): HAProxy's pick against
 * warmlane's would-be choice. Counted whatever the mode (a reload back to
 * route keeps them; answers to shadow decisions still arrive). */
static void render_shadow(struct metrics_text *t, const struct route *r)
{
	const struct shadow_stats *sh = &r->shadow;
	text_family_u64(t, "warmlane_shadow_mode", "gauge",
			"1 in shadow mode (policy.mode shadow: warmlane decides and learns, HAProxy routes), 0 in route mode.",
			r->cfg->mode == CONFIG_MODE_SHADOW ? 1 : 0);
	text_family(t, "warmlane_shadow_responses_total", "counter",
		    "Shadow-mode responses by warmlane's would-be reason and whether HAProxy's server (from the feedback, else the log line) was warmlane's choice: yes, no, none (warmlane had no server).");
	for (int k = 0; k < CORE_REASON_COUNT; k++)
		for (int m = 0; m < SHADOW_MATCH_COUNT; m++) {
			text_puts(t, "warmlane_shadow_responses_total{reason=");
			text_label_value(t, core_reason_name((enum core_reason)k));
			text_printf(t, ",match=\"%s\"} %" PRIu64 "\n",
				    shadow_match_name((enum shadow_match)m),
				    sh->responses[k][m]);
		}
	text_family_u64(t, "warmlane_shadow_warm_total", "counter",
			"Shadow-mode responses whose key had a warm entry warmlane would have kept (reason affinity).",
			sh->warm);
	text_family_u64(t, "warmlane_shadow_warm_missed_total", "counter",
			"Of those, the responses HAProxy served from another server: the requests whose cache warmlane would have kept.",
			sh->warm_missed);
	text_family_u64(t, "warmlane_shadow_bad_reason_total", "counter",
			"Shadow-mode feedback or log lines whose shadow_reason is not a reason of warmlane's: not compared.",
			sh->bad_reason);
	text_family_u64(t, "warmlane_shadow_duplicates_total", "counter",
			"Shadow-mode answers of a request already compared (same unique id: a feedback whose ACK came too late for HAProxy, then its log line): counted once.",
			sh->duplicates);
}

/* Upstream key probes (probe.c). */
static void render_probes(struct metrics_text *t, const struct route *r)
{
	const struct route_probe_stats *p = &r->probe;
	text_family(t, "warmlane_key_probes_total", "counter",
		    "Probes of upstream keys by result: accepted, refused (401/403: the key is excluded), inconclusive (5xx, no answer).");
	for (int k = 0; k < CORE_PROBE_COUNT; k++)
		text_u64_label(t, "warmlane_key_probes_total", "result",
			       core_probe_name((enum core_probe)k), p->results[k]);
	text_family_u64(t, "warmlane_key_probe_transport_errors_total", "counter",
			"Key probes that got no HTTP answer (connection refused, timeout): counted as inconclusive too.",
			p->transport_errors);
	text_family_u64(t, "warmlane_key_probes_active", "gauge",
			"Key probes out now.", p->active);
}

/* backend="...",server="..."[,key="..."]: the key id only when the
 * endpoint has one (ids name keys, never hold them). */
static void text_endpoint_labels(struct metrics_text *t,
				 const struct core_endpoint_info *ep)
{
	text_puts(t, "backend=");
	text_label_value(t, ep->backend != NULL ? ep->backend : "");
	text_puts(t, ",server=");
	text_label_value(t, ep->server != NULL ? ep->server : "");
	if (ep->key_id != NULL && ep->key_id[0] != '\0') {
		text_puts(t, ",key=");
		text_label_value(t, ep->key_id);
	}
}

/* What one per-endpoint family shows. */
enum metrics_ep {
	METRICS_EP_IN_FLIGHT,
	METRICS_EP_EWMA,
	METRICS_EP_SAMPLES,
	METRICS_EP_BREAKER,
	METRICS_EP_COOLDOWN,
	METRICS_EP_DEAD_KEY,
	METRICS_EP_KEY_EXCLUDED,
	METRICS_EP_ADMIN,
	METRICS_EP_WEIGHT,
	METRICS_EP_DECISIONS,
	METRICS_EP_RESPONSES,
	METRICS_EP_E2E_EWMA,
	METRICS_EP_COMPLETIONS,
	METRICS_EP_ENGINE_LOAD,
	METRICS_EP_ENGINE_AGE,
	METRICS_EP_ENGINE_FRESH,
	METRICS_EP_ENGINE_KV,
	METRICS_EP_ENGINE_POLLS,
	METRICS_EP_ARTEFACT,
	METRICS_EP_ARTEFACT_MISMATCH,
	METRICS_EP_TIER,
};

static const struct {
	enum metrics_ep what;
	const char *name, *type, *help;
} metrics_ep_families[] = {
	{ METRICS_EP_IN_FLIGHT, "warmlane_endpoint_in_flight", "gauge",
	  "Requests in flight on the endpoint as decisions see them: the engine's running+waiting plus this agent's own since the sample while it is fresh, else runtime API scur+qcur plus decisions since." },
	{ METRICS_EP_EWMA, "warmlane_endpoint_ttfb_ewma_seconds", "gauge",
	  "EWMA of time to response headers, by request kind (stream: headers of a streamed answer; plain: a whole generation); 0 before the first sample." },
	{ METRICS_EP_SAMPLES, "warmlane_endpoint_ttfb_samples", "gauge",
	  "Successful responses in the EWMA since the endpoint was last cold, by kind." },
	{ METRICS_EP_BREAKER, "warmlane_endpoint_breaker_state", "gauge",
	  "Circuit breaker: 0 closed, 1 half-open, 2 open." },
	{ METRICS_EP_COOLDOWN, "warmlane_endpoint_breaker_cooldown_seconds", "gauge",
	  "Time left before an open breaker turns half-open (0 when not open)." },
	{ METRICS_EP_DEAD_KEY, "warmlane_endpoint_dead_key_seconds", "gauge",
	  "Time left before an endpoint+key whose probe was refused (401/403) is probed again (0: not dead, or its re-probe is due)." },
	{ METRICS_EP_KEY_EXCLUDED, "warmlane_endpoint_key_dead", "gauge",
	  "1 while the endpoint+key is excluded because a probe of its key was refused (a last resort only), else 0." },
	{ METRICS_EP_ADMIN, "warmlane_endpoint_admin_state", "gauge",
	  "HAProxy admin/health state of the server, one series per state: 1 for the current one." },
	{ METRICS_EP_WEIGHT, "warmlane_endpoint_weight", "gauge",
	  "Configured relative capacity." },
	{ METRICS_EP_DECISIONS, "warmlane_endpoint_decisions_total", "counter",
	  "Requests routed to the endpoint." },
	{ METRICS_EP_RESPONSES, "warmlane_endpoint_responses_total", "counter",
	  "Feedback responses of the endpoint by class." },
	{ METRICS_EP_E2E_EWMA, "warmlane_endpoint_e2e_ewma_seconds_per_kib", "gauge",
	  "EWMA of the whole request time (HAProxy's Ta, from its log line) per KiB of answer (answers under 16 KiB count as 16 KiB), by request kind; 0 before the first sample." },
	{ METRICS_EP_COMPLETIONS, "warmlane_endpoint_completions_total", "counter",
	  "Requests of the endpoint that ended, from HAProxy's log lines, by how they ended." },
	{ METRICS_EP_ENGINE_LOAD, "warmlane_endpoint_engine_requests", "gauge",
	  "The engine's own running + waiting requests at its last /metrics sample (engine_metrics; 0 before one)." },
	{ METRICS_EP_ENGINE_AGE, "warmlane_endpoint_engine_sample_age_seconds", "gauge",
	  "Age of the last engine /metrics sample; -1 when none was ever read." },
	{ METRICS_EP_ENGINE_FRESH, "warmlane_endpoint_engine_fresh", "gauge",
	  "1 while the engine's sample is within engine.max_age and is the in-flight view, else 0 (the runtime API's view)." },
	{ METRICS_EP_ENGINE_KV, "warmlane_endpoint_engine_kv_usage_ratio", "gauge",
	  "KV-cache usage of the engine's last sample (vLLM, SGLang), 0 to 1; -1 when it publishes none." },
	{ METRICS_EP_ENGINE_POLLS, "warmlane_endpoint_engine_polls_total", "counter",
	  "Polls of the engine's /metrics that ended, by result (failed: no answer, not 200, over the size bound, or no load metrics in it)." },
	{ METRICS_EP_ARTEFACT, "warmlane_endpoint_artefact_info", "gauge",
	  "Always 1; the fingerprint of the artefact the endpoint says it serves (engine_info: /v1/models or /props) is a label, \"\" before one was read." },
	{ METRICS_EP_ARTEFACT_MISMATCH, "warmlane_endpoint_artefact_mismatch", "gauge",
	  "1 while another endpoint serving one of its model names has another artefact fingerprint, else 0." },
	{ METRICS_EP_TIER, "warmlane_endpoint_tier", "gauge",
	  "Failover tier of the endpoint (1 the best; endpoints[].tier, backends[].tier)." },
};

static void render_endpoint_sample(struct metrics_text *t, const char *name,
				   const struct core_endpoint_info *ep,
				   enum metrics_ep what)
{
	switch (what) {
	case METRICS_EP_EWMA:
	case METRICS_EP_SAMPLES:
		for (int k = 0; k < CORE_KIND_COUNT; k++) {
			text_printf(t, "%s{", name);
			text_endpoint_labels(t, ep);
			text_printf(t, ",kind=\"%s\"} ",
				    k == CORE_KIND_STREAM ? "stream" : "plain");
			if (what == METRICS_EP_EWMA)
				text_printf(t, "%.9g\n", ep->ewma_ms[k] / 1000.0);
			else
				text_printf(t, "%" PRIu32 "\n", ep->samples[k]);
		}
		return;
	case METRICS_EP_E2E_EWMA:
		for (int k = 0; k < CORE_KIND_COUNT; k++) {
			text_printf(t, "%s{", name);
			text_endpoint_labels(t, ep);
			text_printf(t, ",kind=\"%s\"} %.9g\n",
				    k == CORE_KIND_STREAM ? "stream" : "plain",
				    ep->e2e_ewma_ms[k] / 1000.0);
		}
		return;
	case METRICS_EP_COMPLETIONS:
		for (int e = 0; e < CORE_END_COUNT; e++) {
			text_printf(t, "%s{", name);
			text_endpoint_labels(t, ep);
			text_printf(t, ",end=\"%s\"} %" PRIu64 "\n",
				    core_end_name((enum core_end)e),
				    ep->completions[e]);
		}
		return;
	case METRICS_EP_ADMIN:
		for (int a = 0; a < CORE_ADMIN_COUNT; a++) {
			text_printf(t, "%s{", name);
			text_endpoint_labels(t, ep);
			text_printf(t, ",state=\"%s\"} %d\n",
				    core_admin_name((enum core_admin)a),
				    ep->admin == (enum core_admin)a);
		}
		return;
	case METRICS_EP_ARTEFACT:
		text_printf(t, "%s{", name);
		text_endpoint_labels(t, ep);
		if (ep->artefact != 0)
			text_printf(t, ",fingerprint=\"%016llx\"} 1\n",
				    (unsigned long long)ep->artefact);
		else
			text_puts(t, ",fingerprint=\"\"} 1\n");
		return;
	case METRICS_EP_ENGINE_POLLS:
		text_printf(t, "%s{", name);
		text_endpoint_labels(t, ep);
		text_printf(t, ",result=\"ok\"} %" PRIu64 "\n", ep->engine_polls_ok);
		text_printf(t, "%s{", name);
		text_endpoint_labels(t, ep);
		text_printf(t, ",result=\"failed\"} %" PRIu64 "\n",
			    ep->engine_polls_failed);
		return;
	case METRICS_EP_RESPONSES:
		for (int o = 0; o < CORE_OUTCOME_COUNT; o++) {
			text_printf(t, "%s{", name);
			text_endpoint_labels(t, ep);
			text_printf(t, ",class=\"%s\"} %" PRIu64 "\n",
				    core_outcome_name((enum core_outcome)o),
				    ep->outcomes[o]);
		}
		return;
	default:
		break;
	}

	text_printf(t, "%s{", name);
	text_endpoint_labels(t, ep);
	text_puts(t, "} ");
	switch (what) {
	case METRICS_EP_IN_FLIGHT:
		text_printf(t, "%" PRIu32 "\n", ep->in_flight);
		break;
	case METRICS_EP_BREAKER:
		/* Ordered by severity, not by the core's enum, so that
		 * max() and thresholds read naturally on a dashboard. */
		text_printf(t, "%d\n",
			    ep->breaker == CORE_BREAKER_OPEN	     ? 2
			    : ep->breaker == CORE_BREAKER_HALF_OPEN ? 1
								     : 0);
		break;
	case METRICS_EP_COOLDOWN:
		text_printf(t, "%.9g\n", (double)ep->cooldown_left_ms / 1000.0);
		break;
	case METRICS_EP_DEAD_KEY:
		text_printf(t, "%.9g\n", (double)ep->dead_key_left_ms / 1000.0);
		break;
	case METRICS_EP_KEY_EXCLUDED:
		text_printf(t, "%d\n", ep->key_dead ? 1 : 0);
		break;
	case METRICS_EP_WEIGHT:
		text_printf(t, "%.9g\n", ep->weight);
		break;
	case METRICS_EP_DECISIONS:
		text_printf(t, "%" PRIu64 "\n", ep->decisions);
		break;
	case METRICS_EP_ENGINE_LOAD:
		text_printf(t, "%" PRIu32 "\n", ep->engine_load);
		break;
	case METRICS_EP_ENGINE_AGE:
		if (ep->engine_age_ms == UINT64_MAX)
			text_puts(t, "-1\n");
		else
			text_printf(t, "%.3f\n", (double)ep->engine_age_ms / 1000.0);
		break;
	case METRICS_EP_ENGINE_FRESH:
		text_printf(t, "%d\n", ep->engine_fresh ? 1 : 0);
		break;
	case METRICS_EP_ENGINE_KV:
		text_printf(t, "%.6g\n", ep->engine_kv);
		break;
	case METRICS_EP_ARTEFACT_MISMATCH:
		text_printf(t, "%d\n", ep->artefact_mismatch ? 1 : 0);
		break;
	case METRICS_EP_TIER:
		text_printf(t, "%u\n", ep->tier);
		break;
	default:
		text_puts(t, "0\n");
		break;
	}
}

/* Expired affinity entries dropped per scrape at most (about 1 ms). */
#define METRICS_EXPIRE_MAX 8192

static void render_core(struct metrics_text *t, struct core *c,
			uint64_t now_ms)
{
	/* The map drops an expired entry only when a lookup meets it or an
	 * insert makes room, so without traffic the entries gauge would go
	 * on counting callers long gone. Expiring first makes it count live
	 * entries: oldest first, stopping at the first live one, each entry
	 * dropped once. Bounded, like a snapshot slice, because a drop costs
	 * about 150 ns: a backlog of 10^6 (traffic that fell) would hold the
	 * loop 0.15 s in one scrape; beyond the bound, later scrapes (and
	 * inserts, two each) go on. */
	core_affinity_expire(c, now_ms, METRICS_EXPIRE_MAX);
	struct core_stats cs;
	core_stats(c, &cs);

	text_family(t, "warmlane_responses_total", "counter",
		    "Feedback responses by class of HTTP status.");
	for (int o = 0; o < CORE_OUTCOME_COUNT; o++)
		text_u64_label(t, "warmlane_responses_total", "class",
			       core_outcome_name((enum core_outcome)o),
			       cs.outcomes[o]);

	/* Tiers 1 up to the worst any decision used (tier 1 always), so
	 * that an untiered pool shows one series. */
	unsigned tiers = 1;
	for (unsigned k = 0; k < CORE_TIER_MAX; k++)
		if (cs.tier_decisions[k] > 0)
			tiers = k + 1;
	text_family(t, "warmlane_tier_decisions_total", "counter",
		    "Route decisions that named an endpoint, by the endpoint's failover tier (reason failover: a worse tier than the best serving the model).");
	for (unsigned k = 0; k < tiers; k++) {
		char tier[12];
		snprintf(tier, sizeof(tier), "%u", k + 1);
		text_u64_label(t, "warmlane_tier_decisions_total", "tier", tier,
			       cs.tier_decisions[k]);
	}

	text_family_u64(t, "warmlane_endpoints", "gauge",
			"Endpoints known to the routing core.", cs.endpoints);
	text_family_u64(t, "warmlane_affinity_entries", "gauge",
			"Live entries of the affinity map.", cs.affinity_entries);
	text_family_u64(t, "warmlane_affinity_capacity", "gauge",
			"Capacity of the affinity map (policy.affinity_max_entries).",
			cs.affinity_capacity);
	text_family_u64(t, "warmlane_affinity_memory_bytes", "gauge",
			"Memory allocated for the affinity map and its index.",
			cs.affinity_bytes);
	text_family_u64(t, "warmlane_affinity_hits_total", "counter",
			"Affinity lookups that found a live entry.",
			cs.affinity_hits);
	text_family_u64(t, "warmlane_affinity_misses_total", "counter",
			"Affinity lookups that found no live entry.",
			cs.affinity_misses);
	text_family_u64(t, "warmlane_affinity_evictions_total", "counter",
			"Affinity entries evicted (least recently used, map full).",
			cs.affinity_evictions);
	text_family_u64(t, "warmlane_affinity_expirations_total", "counter",
			"Affinity entries dropped after policy.affinity_ttl idle.",
			cs.affinity_expirations);

	/* One pass per family: the text format wants a family's samples
	 * together, and core_endpoint_info is a copy, cheaper than an
	 * allocation to hold them all. */
	for (size_t f = 0; f < sizeof(metrics_ep_families) / sizeof(metrics_ep_families[0]); f++) {
		text_family(t, metrics_ep_families[f].name,
			    metrics_ep_families[f].type,
			    metrics_ep_families[f].help);
		for (int i = core_endpoint_next(c, -1); i >= 0;
		     i = core_endpoint_next(c, i)) {
			struct core_endpoint_info ep;
			if (core_endpoint_info(c, i, now_ms, &ep) < 0)
				continue;
			render_endpoint_sample(t, metrics_ep_families[f].name,
					       &ep, metrics_ep_families[f].what);
		}
	}
}

/* The state snapshot (snapshot.h, struct snapshot_stats). */
static void render_snapshot(struct metrics_text *t,
			    const struct snapshot_stats *sn)
{
	text_family_u64(t, "warmlane_snapshot_writes_total", "counter",
			"State snapshots written.", sn->writes);
	text_family_u64(t, "warmlane_snapshot_write_failures_total", "counter",
			"State snapshots that could not be written.",
			sn->write_failures);
	text_family(t, "warmlane_snapshot_last_success_timestamp_seconds", "gauge",
		    "Wall-clock time of the last snapshot written (0: none yet).");
	text_printf(t, "warmlane_snapshot_last_success_timestamp_seconds %.3f\n",
		    (double)sn->last_write_unix_ms / 1000.0);
	text_family(t, "warmlane_snapshot_write_duration_seconds", "gauge",
		    "Last snapshot: from the start of its capture to the rename of the file.");
	text_printf(t, "warmlane_snapshot_write_duration_seconds %.6f\n",
		    (double)sn->last_write_us / 1e6);
	text_family(t, "warmlane_snapshot_loop_hold_seconds", "gauge",
		    "Last snapshot: longest time one capture slice held the event loop.");
	text_printf(t, "warmlane_snapshot_loop_hold_seconds %.6f\n",
		    (double)sn->last_hold_us / 1e6);
	text_family_u64(t, "warmlane_snapshot_size_bytes", "gauge",
			"Size of the last snapshot written.", sn->last_bytes);
	text_family_u64(t, "warmlane_snapshot_entries", "gauge",
			"Affinity entries in the last snapshot written.",
			sn->last_entries);
	text_family_u64(t, "warmlane_snapshot_restored_entries", "gauge",
			"Affinity entries restored from the snapshot at start.",
			sn->restored);
	text_family(t, "warmlane_snapshot_dropped_entries", "gauge",
		    "Affinity entries of the snapshot dropped at start, by cause.");
	text_u64_label(t, "warmlane_snapshot_dropped_entries", "cause", "expired",
		       sn->dropped_expired);
	text_u64_label(t, "warmlane_snapshot_dropped_entries", "cause",
		       "unknown_endpoint", sn->dropped_unknown);
	text_family_u64(t, "warmlane_snapshot_corrupt_total", "counter",
			"Snapshot files rejected at start and renamed aside (FILE.corrupt).",
			sn->corrupt);
}

int metrics_render(struct metrics_text *t, const struct server *srv,
		   uint64_t now_ms)
{
	const struct stats *st = &srv->stats;

	text_family(t, "warmlane_build_info", "gauge",
		    "Always 1; the version of the running agent is a label.");
	text_u64_label(t, "warmlane_build_info", "version", WARMLANE_VERSION, 1);

	render_decisions(t, st);
	render_feedback(t, &srv->route);
	render_hints(t, &srv->route);
	render_log_input(t, &srv->route);
	render_probes(t, &srv->route);
	render_engine(t, &srv->route, now_ms);
	render_retry_budgets(t, &srv->route, now_ms);
	render_shadow(t, &srv->route);
	if (srv->route.core != NULL)
		render_core(t, srv->route.core, now_ms);
	render_spop(t, st);
	text_family_u64(t, "warmlane_spop_connections_limit", "gauge",
			"The SPOP connection cap in force (spop.max_connections, or from RLIMIT_NOFILE).",
			srv->max_conns);

	text_family_u64(t, "warmlane_runtime_polls_total", "counter",
			"HAProxy runtime-API polls started.", st->runtime_polls);
	text_family_u64(t, "warmlane_runtime_poll_failures_total", "counter",
			"HAProxy runtime-API polls that got no usable answer.",
			st->runtime_poll_failures);
	if (srv->snapshot != NULL)
		render_snapshot(t, srv->snapshot);
	return t->oom ? -ENOMEM : 0;
}

/* ---- HTTP -------------------------------------------------------------- */

static enum MHD_Result metrics_reply(struct MHD_Connection *conn,
				     unsigned status, const char *type,
				     const char *body, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	enum MHD_Result r = MHD_add_response_header(resp,
		MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (r == MHD_YES && status == MHD_HTTP_METHOD_NOT_ALLOWED)
		r = MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					    "GET, HEAD");
	if (r == MHD_YES)
		r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

#define METRICS_REPLY_TEXT(conn, status, s) \
	metrics_reply(conn, status, "text/plain; charset=utf-8", s, \
		      sizeof(s) - 1)

/* The only routes: GET or HEAD of /metrics and /healthz (MHD leaves the
 * body out of a HEAD answer). The query string is not part of url. */
static enum MHD_Result metrics_on_request(void *cls,
					  struct MHD_Connection *conn,
					  const char *url, const char *method,
					  const char *version,
					  const char *upload_data,
					  size_t *upload_data_size,
					  void **req_cls)
{
	struct metrics *m = cls;
	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
					  "method not allowed\n");
	if (strcmp(url, "/healthz") == 0)
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_OK, "ok\n");
	if (strcmp(url, "/metrics") != 0)
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_NOT_FOUND,
					  "not found\n");

	m->scrapes++;
	m->text.len = 0;
	m->text.oom = false;
	if (metrics_render(&m->text, m->srv, uv_now(m->loop)) < 0) {
		/* A huge buffer after one bad scrape is not worth keeping. */
		metrics_text_finish(&m->text);
		log_warn("metrics: out of memory rendering /metrics", NULL);
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
					  "out of memory\n");
	}
	return metrics_reply(conn, MHD_HTTP_OK, METRICS_CONTENT_TYPE,
			     m->text.p, m->text.len);
}

/* MHD's own complaints: kept for metrics_create's error while starting,
 * logged afterwards. */
static void metrics_on_mhd_log(void *cls, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void metrics_on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics *m = cls;
	vsnprintf(m->mhd_err, sizeof(m->mhd_err), fmt, ap);
	size_t n = strlen(m->mhd_err);
	while (n > 0 && (m->mhd_err[n - 1] == '\n' || m->mhd_err[n - 1] == '\r'))
		m->mhd_err[--n] = '\0';
	if (!m->poll_init)
		return;
	/* A flood of connections over the limit is one line each. */
	uint64_t window = uv_now(m->loop) / METRICS_MHDLOG_WINDOW_MS;
	if (window != m->mhdlog_window) {
		if (m->mhdlog_suppressed > 0)
			log_warn("metrics: libmicrohttpd lines suppressed",
				 "count=%" PRIu64, m->mhdlog_suppressed);
		m->mhdlog_window = window;
		m->mhdlog_lines = 0;
		m->mhdlog_suppressed = 0;
	}
	if (m->mhdlog_lines >= METRICS_MHDLOG_PER_WINDOW) {
		m->mhdlog_suppressed++;
		return;
	}
	m->mhdlog_lines++;
	char q[300];
	log_warn("metrics: libmicrohttpd", "error=%s",
		 log_quote(q, sizeof(q), m->mhd_err, n));
}

/* ---- the total time of a connection ------------------------------------ */

static void metrics_on_sweep(uv_timer_t *h);

/* How often the sweep looks: a tenth of the timeout, 100 ms to 1 s. */
static uint64_t metrics_sweep_period(const struct metrics *m)
{
	uint64_t p = m->timeout_ms / 10;
	return p < 100 ? 100 : p > 1000 ? 1000 : p;
}

/* libmicrohttpd's start and close of each connection (inside MHD_run, on
 * the loop): the list the sweep walks, oldest first. */
static void metrics_on_notify(void *cls, struct MHD_Connection *conn,
			      void **socket_context,
			      enum MHD_ConnectionNotificationCode toe)
{
	struct metrics *m = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct metrics_conn *mc = calloc(1, sizeof(*mc));
		*socket_context = mc;
		if (mc == NULL)
			return; /* unbounded, only by MHD's own timeout */
		mc->conn = conn;
		mc->start_ms = uv_now(m->loop);
		mc->prev = m->conns_tail;
		if (m->conns_tail != NULL)
			m->conns_tail->next = mc;
		else
			m->conns = mc;
		m->conns_tail = mc;
		if (m->n_conns++ == 0 && m->sweep_init) {
			uint64_t p = metrics_sweep_period(m);
			uv_timer_start(&m->sweep, metrics_on_sweep, p, p);
		}
		return;
	}
	struct metrics_conn *mc = *socket_context;
	if (mc == NULL)
		return;
	*socket_context = NULL;
	if (mc->prev != NULL)
		mc->prev->next = mc->next;
	else
		m->conns = mc->next;
	if (mc->next != NULL)
		mc->next->prev = mc->prev;
	else
		m->conns_tail = mc->prev;
	free(mc);
	m->closed_some = true;
	if (--m->n_conns == 0 && m->sweep_init)
		uv_timer_stop(&m->sweep);
}

/* Connections older than the timeout are shut down (not closed: the fd
 * stays libmicrohttpd's, which sees the end of stream on its next run
 * and closes and forgets the connection itself). */
static void metrics_on_sweep(uv_timer_t *h)
{
	struct metrics *m = container_of(h, struct metrics, sweep);
	uint64_t now = uv_now(m->loop);
	for (struct metrics_conn *mc = m->conns;
	     mc != NULL && now - mc->start_ms >= m->timeout_ms; mc = mc->next) {
		if (mc->cut)
			continue;
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			mc->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		mc->cut = true;
		if (ci == NULL)
			continue;
		shutdown(ci->connect_fd, SHUT_RDWR);
		m->cut_total++;
		log_debug("metrics: connection open too long, closing",
			  "age_ms=%" PRIu64, now - mc->start_ms);
	}
}

static void metrics_on_timer(uv_timer_t *h);

/* MHD_run must be called again within MHD_get_timeout: 0 when it still
 * has ready connections of its own (edge-triggered, nothing will wake the
 * poll), otherwise the nearest connection timeout. */
static void metrics_schedule(struct metrics *m)
{
	MHD_UNSIGNED_LONG_LONG ms;
	if (m->closed_some) {
		/* At its connection limit MHD takes its listen socket out of
		 * its epoll set, and puts it back only on its next run: with
		 * no other connection to wake it, connections waiting in the
		 * backlog would never be accepted. */
		m->closed_some = false;
		uv_timer_start(&m->timer, metrics_on_timer, 0, 0);
		return;
	}
	if (MHD_get_timeout(m->daemon, &ms) == MHD_YES)
		uv_timer_start(&m->timer, metrics_on_timer, (uint64_t)ms, 0);
	else
		uv_timer_stop(&m->timer);
}

static void metrics_run(struct metrics *m)
{
	if (m->daemon == NULL)
		return;
	MHD_run(m->daemon);
	metrics_schedule(m);
}

static void metrics_on_timer(uv_timer_t *h)
{
	metrics_run(container_of(h, struct metrics, timer));
}

static void metrics_on_poll(uv_poll_t *h, int status, int events)
{
	struct metrics *m = container_of(h, struct metrics, poll);
	(void)events;
	if (status < 0)
		log_warn("metrics: poll error", "error=%s", uv_err_name(status));
	metrics_run(m);
}

static int metrics_sockaddr(const struct config_hostport *addr,
			    struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (addr->ipv6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(addr->port);
		if (inet_pton(AF_INET6, addr->host, &s6->sin6_addr) != 1)
			return -EINVAL;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(addr->port);
		if (inet_pton(AF_INET, addr->host, &s4->sin_addr) != 1)
			return -EINVAL;
	}
	return 0;
}

/* metrics_create's work on m; on failure m still needs metrics_destroy. */
static int metrics_open(struct metrics *m, uv_loop_t *loop,
			const struct config_hostport *addr, struct server *srv,
			char *err, size_t errlen)
{
	*m = (struct metrics){ .loop = loop, .srv = srv,
			       .timeout_ms = srv->cfg->metrics_conn_timeout_ms };
	snprintf(m->addr_text, sizeof(m->addr_text), addr->ipv6 ? "[%s]:%u"
								: "%s:%u",
		 addr->host, (unsigned)addr->port);

	struct sockaddr_storage ss;
	if (metrics_sockaddr(addr, &ss) < 0) {
		snprintf(err, errlen, "metrics.listen %s: not a numeric address",
			 m->addr_text);
		return -EINVAL;
	}

	/* MHD_OPTION_SOCK_ADDR: without it MHD binds every address. No
	 * internal thread: the loop drives MHD through its epoll fd. */
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	if (addr->ipv6)
		flags |= MHD_USE_IPv6;
	errno = 0;
	m->daemon = MHD_start_daemon(flags, addr->port, NULL, NULL,
		metrics_on_request, m,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_EXTERNAL_LOGGER, metrics_on_mhd_log, m,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg->metrics_max_conns,
		/* MHD's own, restarted by every byte: the sweep bounds the
		 * total. Whole seconds, rounded up. */
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)((m->timeout_ms + 999) / 1000),
		MHD_OPTION_NOTIFY_CONNECTION, metrics_on_notify, m,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, server_backlog(),
		MHD_OPTION_END);
	if (m->daemon == NULL) {
		/* MHD says why only in its log line; errno is still bind's
		 * in practice, trusted only when it is a bind error. */
		int e = errno;
		int r = (e == EADDRINUSE || e == EACCES || e == EADDRNOTAVAIL ||
			 e == EAFNOSUPPORT || e == EPERM) ? -e : -EIO;
		snprintf(err, errlen, "metrics.listen %s: cannot listen: %s",
			 m->addr_text,
			 m->mhd_err[0] != '\0' ? m->mhd_err : strerror(-r));
		return r;
	}

	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
	m->port = di != NULL ? di->port : addr->port;
	di = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (di == NULL) {
		snprintf(err, errlen, "metrics.listen %s: libmicrohttpd has no epoll fd",
			 m->addr_text);
		return -EIO;
	}

	int r = uv_poll_init(loop, &m->poll, di->epoll_fd);
	if (r < 0) {
		snprintf(err, errlen, "metrics.listen %s: cannot poll: %s",
			 m->addr_text, uv_strerror(r));
		return r;
	}
	m->poll_init = true;
	uv_timer_init(loop, &m->timer);
	m->timer_init = true;
	uv_timer_init(loop, &m->sweep);
	m->sweep_init = true;
	r = uv_poll_start(&m->poll, UV_READABLE, metrics_on_poll);
	if (r < 0) {
		snprintf(err, errlen, "metrics.listen %s: cannot poll: %s",
			 m->addr_text, uv_strerror(r));
		return r;
	}
	metrics_schedule(m);
	log_info("metrics listening", "addr=%s port=%u", m->addr_text,
		 (unsigned)m->port);
	return 0;
}

int metrics_create(struct metrics **out, uv_loop_t *loop,
		   const struct config_hostport *addr, struct server *srv,
		   char *err, size_t errlen)
{
	*out = NULL;
	struct metrics *m = malloc(sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int r = metrics_open(m, loop, addr, srv, err, errlen);
	if (r < 0) {
		metrics_destroy(m, NULL, NULL);
		return r;
	}
	*out = m;
	return 0;
}

/* The last handle closed: m goes, then its owner is told. */
static void metrics_free(struct metrics *m)
{
	metrics_destroyed_cb done = m->on_destroyed;
	void *arg = m->on_destroyed_arg;
	free(m);
	if (done != NULL)
		done(arg);
}

static void metrics_on_closed(uv_handle_t *h)
{
	struct metrics *m = h->data;
	if (--m->closing == 0)
		metrics_free(m);
}

void metrics_destroy(struct metrics *m, metrics_destroyed_cb done, void *arg)
{
	if (m == NULL)
		return;
	m->on_destroyed = done;
	m->on_destroyed_arg = arg;
	/* The poll goes first: libuv drops the epoll fd from its own set at
	 * once, before MHD_stop_daemon closes it. */
	if (m->poll_init) {
		m->poll_init = false;
		m->poll.data = m;
		m->closing++;
		uv_close((uv_handle_t *)&m->poll, metrics_on_closed);
	}
	if (m->timer_init) {
		m->timer_init = false;
		m->timer.data = m;
		m->closing++;
		uv_close((uv_handle_t *)&m->timer, metrics_on_closed);
	}
	/* Before MHD_stop_daemon: its close notifications must not touch a
	 * closing timer. */
	if (m->sweep_init) {
		m->sweep_init = false;
		m->sweep.data = m;
		m->closing++;
		uv_close((uv_handle_t *)&m->sweep, metrics_on_closed);
	}
	if (m->daemon != NULL) {
		MHD_stop_daemon(m->daemon);
		m->daemon = NULL;
	}
	metrics_text_finish(&m->text);
	if (m->closing == 0)
		metrics_free(m);
}
