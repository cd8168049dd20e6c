/* route_end.c - what answers teach: the feedback message and HAProxy's end-of-stream log lines into core_observe and core_complete. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "route.h"
#include "route_int.h"

/* ---- feedback ----------------------------------------------------------- */

/* An HTTP status as an integer or 3 decimal digits; -1 otherwise. */
static int parse_status(const struct spop_data *d)
{
	int64_t v;
	if (route_arg_int(d, &v))
		return v >= 0 && v <= 999 ? (int)v : -1;
	struct core_str s = route_arg_str(d);
	if (s.len != 3)
		return -1;
	int x = 0;
	for (size_t i = 0; i < 3; i++) {
		if (s.ptr[i] < '0' || s.ptr[i] > '9')
			return -1;
		x = x * 10 + (s.ptr[i] - '0');
	}
	return x;
}

/* fb's akey argument: true with *akey when present and 16 hex digits;
 * read once when route_fb_prefetch has read it. */
static bool fb_akey(const struct route_feedback *fb, uint64_t *akey)
{
	if (fb->akey_read != 0) {
		*akey = fb->akey;
		return fb->akey_read > 0;
	}
	struct core_str s = route_arg_str(&fb->args[ROUTE_FB_AKEY]);
	return s.len > 0 && haplog_akey_parse((const uint8_t *)s.ptr, s.len, akey);
}

void route_fb_prefetch(struct route *r, struct route_feedback *fb,
		       enum core_prefetch stage)
{
	if (fb->akey_read == 0)
		fb->akey_read = fb_akey(fb, &fb->akey) ? 1 : -1;
	if (fb->akey_read > 0)
		core_prefetch(r->core, fb->akey, stage);
}

void route_feedback(struct route *r, const struct route_feedback *fb)
{
	const struct spop_data *a = fb->args;
	struct core_feedback cf = {
		.tr_ms = -1,
		.retry_after_ms = -1,
		.stream = route_arg_bool(&a[ROUTE_FB_STREAM]),
		.model = route_arg_str(&a[ROUTE_FB_MODEL]),
	};

	struct core_str path = route_arg_str(&a[ROUTE_FB_SERVER]);
	struct core_str key = route_arg_str(&a[ROUTE_FB_KEY]);
	/* Shadow mode: HAProxy chose `server`; how it compares with
	 * warmlane's choice is counted whatever the rest says. */
	struct core_str sh_reason = route_arg_str(&a[ROUTE_FB_SHADOW_REASON]);
	bool shadow = sh_reason.len > 0;
	if (shadow && shadow_first(&r->shadow, route_arg_str(&a[ROUTE_FB_ID]), true))
		shadow_count_path(&r->shadow, sh_reason,
				  route_arg_str(&a[ROUTE_FB_SHADOW]), path);
	int idx[ROUTE_FB_MAX_KEYS];
	unsigned n = 0;
	/* Read once: the ACK's akey names the endpoint its decision chose. */
	uint64_t akey = 0;
	bool has_akey = fb_akey(fb, &akey);
	cf.endpoint = has_akey ? core_endpoint_find_akey(r->core, akey, path, key)
			       : core_endpoint_find_path(r->core, path, key);
	if (cf.endpoint >= 0) {
		idx[n++] = cf.endpoint;
		/* A request that does not stream gets its headers with its
		 * whole body: that is its completion, so it leaves the
		 * in-flight count now rather than at the next runtime-API
		 * poll (back-to-back turns of an agent loop would otherwise
		 * pile up as load on their warm endpoint). A streamed request
		 * is still running: its end comes from the poll. Once the log
		 * input reads HAProxy's lines, every request leaves it when its
		 * line arrives (route_log_line), never here: nothing is counted
		 * twice. Until a first line in warmlane's format arrives
		 * (HAProxy may have no log target for the open socket), it
		 * still leaves here. */
		if (!cf.stream && !(r->log_input && r->log_lines) && !shadow)
			core_endpoint_complete(r->core, cf.endpoint);
		/* Its log line will say how a stream ended (cut or not): the
		 * breaker waits for it rather than count the headers as a
		 * success (core_feedback.end_follows). Not while most lines
		 * are not in warmlane's format (logsrc.c): a success that no
		 * line settles would never count, and a HALF_OPEN breaker
		 * would never close on streams. */
		cf.end_follows = r->log_input && r->log_lines && !r->log.format_bad;
	} else if (key.len == 0) {
		/* No key id: HAProxy chose the server itself (no agent
		 * answer, fail open) with the client's own credential. What
		 * the server said is about the server, so it reaches each of
		 * its endpoints; the core never counted it in flight. */
		n = route_server_find_path(r, path, idx, ROUTE_FB_MAX_KEYS);
	}
	if (n == 0) {
		/* A server removed since, one outside the pool, or none. */
		r->fb.unknown_server++;
		return;
	}

	cf.status = parse_status(&a[ROUTE_FB_STATUS]);
	if (core_status_class(cf.status) == CORE_OUTCOME_INVALID) {
		r->fb.bad_status++;
		return;
	}

	int64_t v;
	struct core_str s;
	if (route_arg_int(&a[ROUTE_FB_TR], &v)) {
		cf.tr_ms = v < 0 ? -1 : v;
	} else if ((s = route_arg_str(&a[ROUTE_FB_TR])).len > 0) {
		if (core_parse_tr(s, &cf.tr_ms) < 0) {
			r->fb.bad_tr++;
			cf.tr_ms = -1;
		}
	}

	if ((s = route_arg_str(&a[ROUTE_FB_RETRY_AFTER])).len > 0) {
		if (core_parse_retry_after(s, fb->now_unix_s,
					   &cf.retry_after_ms) < 0) {
			r->fb.bad_retry_after++;
			cf.retry_after_ms = -1;
		}
	} else if (route_arg_int(&a[ROUTE_FB_RETRY_AFTER], &v) && v >= 0) {
		cf.retry_after_ms = v > INT64_MAX / 1000 ? INT64_MAX : v * 1000;
	}

	if (route_arg_str(&a[ROUTE_FB_AKEY]).len > 0) {
		cf.has_akey = has_akey;
		cf.akey = akey;
		if (!cf.has_akey)
			r->fb.bad_akey++;
	}

	/* Without a key id a 401/403 judged the client's credential, not
	 * one of ours: no endpoint+key is dead. */
	if (cf.endpoint < 0 && core_status_class(cf.status) == CORE_OUTCOME_KEY_DEAD)
		return;
	for (unsigned i = 0; i < n; i++) {
		cf.endpoint = idx[i];
		if (core_observe(r->core, &cf, fb->now_ms) == -EINVAL)
			r->fb.bad_status++;
	}
}

/* ---- end-of-stream log lines -------------------------------------------- */

const double route_lag_bounds_s[ROUTE_LAG_BUCKETS] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5,
};

static struct core_str hl_str(struct haplog_str s)
{
	return (struct core_str){ (const char *)s.ptr, s.len };
}

static bool hl_eq(struct haplog_str a, struct haplog_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

enum core_end route_log_end(const struct haplog_line *l)
{
	uint8_t who = l->ts.len >= 2 ? l->ts.ptr[0] : '-';
	uint8_t when = l->ts.len >= 2 ? l->ts.ptr[1] : '-';
	switch (who) {
	case 'C':
	case 'c':
		return CORE_END_CLIENT_ABORT;
	case 'S':
	case 's':
	case 'D':
		return when == 'D' || when == 'L' ? CORE_END_SERVER_CUT
						  : CORE_END_SERVER_FAIL;
	default:
		return CORE_END_COMPLETE;
	}
}

/* What line l says of its request, for core_complete; the caller sets
 * the endpoint, feedback_seen and shadow. */
static struct core_completion route_log_completion(const struct haplog_line *l)
{
	return (struct core_completion){
		.status = l->status,
		.end = route_log_end(l),
		.tr_ms = l->tr_ms,
		.total_ms = l->ta_ms,
		.bytes = l->bytes,
		.stream = l->stream,
		.has_akey = l->has_akey,
		.akey = l->akey,
		/* ra: at most 9 digits of seconds (haplog), no overflow */
		.has_retry_after = l->retry_after_s >= 0,
		.retry_after_ms = l->retry_after_s >= 0 ? l->retry_after_s * 1000 : -1,
	};
}

/* A line of shadow mode (route_log_line): HAProxy chose be/srv itself.
 * What happened there teaches that server's endpoints, as feedback without
 * a key id does; the comparison is counted here unless the feedback
 * message already did: fb, or, when its ACK came too late for HAProxy to
 * set fb, the request's id met at the feedback (shadow_first). */
static enum route_log_use route_log_shadow(struct route *r,
					   const struct haplog_line *l,
					   uint64_t now_ms)
{
	bool fb_seen = l->fb;
	if (!fb_seen) {
		fb_seen = !shadow_first(&r->shadow, hl_str(l->id), false);
		if (!fb_seen)
			shadow_count(&r->shadow, hl_str(l->shr), hl_str(l->sh),
				     hl_str(l->be), hl_str(l->srv));
	}
	int idx[ROUTE_FB_MAX_KEYS];
	unsigned n = route_server_find(r, hl_str(l->be), hl_str(l->srv), idx,
				       ROUTE_FB_MAX_KEYS);
	if (n == 0) {
		/* <NOSRV>, or a server outside the pool */
		r->log.unknown_endpoint++;
		return ROUTE_LOG_UNKNOWN;
	}
	struct core_completion cc = route_log_completion(l);
	cc.feedback_seen = fb_seen;
	cc.shadow = true;
	for (unsigned i = 0; i < n; i++) {
		cc.endpoint = idx[i];
		struct core_completion c1 = cc;
		if (core_complete(r->core, &c1, now_ms) < 0) {
			c1.status = -1;
			core_complete(r->core, &c1, now_ms);
		}
	}
	r->log.ends[cc.end]++;
	return ROUTE_LOG_USED;
}

enum route_log_use route_log_line(struct route *r, const struct haplog_line *l,
				  uint64_t now_ms)
{
	r->log_lines = true;
	/* Every request of a budgeted backend counts, routed by warmlane or
	 * not: one first attempt and the retries HAProxy made for it. */
	struct route_budget *rb =
		l->be.len > 0 ? route_budget_find(r, (const char *)l->be.ptr,
						  l->be.len)
			      : NULL;
	if (rb != NULL) {
		budget_record(&rb->b, &r->cfg->retry_budget, l->retries, now_ms);
		rb->requests++;
		rb->retries += l->retries;
	}
	if (l->bad != 0)
		r->log.bad_fields++;
	if ((l->wsrv.len == 0 || l->wbe.len == 0) && l->shr.len > 0)
		return route_log_shadow(r, l, now_ms);
	if (l->wsrv.len == 0 || l->wbe.len == 0) {
		r->log.unrouted++;
		return ROUTE_LOG_UNROUTED;
	}
	int ep = core_endpoint_find(r->core, hl_str(l->wbe), hl_str(l->wsrv),
				    hl_str(l->key));
	if (ep < 0) {
		r->log.unknown_endpoint++;
		return ROUTE_LOG_UNKNOWN;
	}
	bool same = hl_eq(l->wbe, l->be) && hl_eq(l->wsrv, l->srv);
	struct core_completion cc = route_log_completion(l);
	cc.endpoint = ep;
	cc.feedback_seen = l->fb && same;
	if (!same) {
		/* HAProxy did not end on warmlane's server: redispatched after
		 * failed connections (so it failed), or the rule was not
		 * applied (the server was unusable): then only in-flight. */
		cc.status = -1;
		cc.tr_ms = cc.total_ms = -1;
		cc.bytes = 0;
		cc.end = l->retries > 0 && l->redispatched ? CORE_END_SERVER_FAIL
							   : CORE_END_COMPLETE;
		if (cc.end == CORE_END_SERVER_FAIL)
			r->log.redispatched++;
	}
	if (core_complete(r->core, &cc, now_ms) < 0) {
		/* a status HAProxy would not log: still end the request */
		cc.status = -1;
		core_complete(r->core, &cc, now_ms);
	}
	r->log.ends[cc.end]++;
	return ROUTE_LOG_USED;
}
