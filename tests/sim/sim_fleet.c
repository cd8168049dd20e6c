/* sim_fleet.c - the discrete-event engine: arrivals, runtime-API polls, endpoint queues, prefill, decode, feedback. */
#include "sim_fleet.h"
#include "sim_hints.h"
#include "sim_evq.h"
#include "sim_kv.h"
#include "sim_llama.h"
#include "sim_rng.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum ev_type { EV_ARRIVAL, EV_POLL, EV_HEADERS, EV_FIRST, EV_DONE, EV_ENGINE };

struct ep_state {
	struct sim_kv kv;
	struct sim_llama ll;  /* cache = llama (then kv holds nothing) */
	int llama;
	uint32_t running;
	uint32_t live;        /* scur+qcur summed over every HAProxy */
	uint32_t *queue;      /* FIFO ring of request indices */
	size_t qhead, qlen, qcap;
	double inflight_sum;
	uint64_t inflight_samples;
	/* HAProxy's layer-7 health check (--http-check): the next one's
	 * start, the one running's end and duration, the last one's */
	int64_t check_next_us, check_done_us;
	double check_running_ms, check_ms;
};

struct agent {
	void *st;
	struct sim_view_ep *view;
	uint32_t *live;       /* this agent's HAProxy: its own requests only */
};

struct sim_fleet {
	const struct sim_fleet_cfg *cfg;
	const struct sim_workload *w;
	const struct sim_policy *pol;
	struct ep_state *eps;
	struct agent *ag;
	uint32_t nag;
	struct sim_hints hints;  /* --shared-hints */
	int has_hints;
	struct sim_rec *rec;
	struct sim_evq q;
	struct sim_rng rng;
	size_t next_arrival;
	uint64_t live_total;
	int64_t now;
	int log_ingest;
	int detail;
	int64_t engine_poll_us;
	int64_t check_us;     /* --http-check: HAProxy's check interval; 0 none */
	uint32_t bt;          /* tokens per block of w */
	/* closed loop (w->closed): what is sent, which conversations are busy */
	struct sim_req *creq; /* w->req, whose arrival times the loop writes */
	uint8_t *sent;
	uint8_t *conv_busy;
	uint32_t nconv;
	uint32_t closed_inflight;
	size_t closed_scan;   /* every request before it is sent */
};

uint32_t sim_fleet_cached_blocks(const struct sim_fleet *f, uint32_t ep, const struct sim_req *r)
{
	if (!f || ep >= f->cfg->nep)
		return 0;
	if (f->eps[ep].llama)
		return sim_llama_peek(&f->eps[ep].ll, sim_trace_blocks(f->w, r), r->nblocks) *
		       (uint64_t)f->bt / SIM_KV_BLOCK_TOKENS;
	return (uint32_t)((uint64_t)sim_kv_prefix(&f->eps[ep].kv, sim_trace_blocks(f->w, r), r->nblocks) *
			  f->bt / SIM_KV_BLOCK_TOKENS);
}

/* --- faults and HAProxy's view of them ----------------------------------- */

static int fault_active(const struct sim_fault *f, int64_t t)
{
	return t >= f->start_us && t < f->end_us;
}

/* Whether a DOWN fault f refuses connections at t; ds and de: that down spell. */
static int down_spell(const struct sim_fault *f, int64_t t, int64_t *ds, int64_t *de)
{
	*ds = *de = 0;
	if (t < f->start_us)
		return 0;
	if (f->period_us <= 0) {
		*ds = f->start_us;
		*de = f->end_us;
		return t < f->end_us;
	}
	int64_t k = (t - f->start_us) / f->period_us;
	*ds = f->start_us + k * f->period_us;
	*de = *ds + f->period_us / 2;
	if (*de > f->end_us)
		*de = f->end_us;
	return t < *de;
}

static int ep_present(const struct sim_ep_params *p, int64_t t)
{
	return t >= p->start_us && t < p->stop_us;
}

static int ep_refusing(const struct sim_fleet *f, uint32_t e, int64_t t)
{
	if (!ep_present(&f->cfg->ep[e], t))
		return 1;
	for (uint32_t i = 0; i < f->cfg->nfault; i++) {
		const struct sim_fault *x = &f->cfg->fault[i];
		int64_t ds, de;
		if (x->ep == e && x->kind == SIM_FAULT_DOWN && down_spell(x, t, &ds, &de))
			return 1;
	}
	return 0;
}

/* HAProxy's health-check state: a refusing server is marked DOWN check_fall
 * after it starts refusing, and UP again check_rise after it recovers. */
static int ep_up_in_haproxy(const struct sim_fleet *f, uint32_t e, int64_t t)
{
	if (!ep_present(&f->cfg->ep[e], t))
		return 0;
	for (uint32_t i = 0; i < f->cfg->nfault; i++) {
		const struct sim_fault *x = &f->cfg->fault[i];
		int64_t ds, de;
		if (x->ep != e || x->kind != SIM_FAULT_DOWN)
			continue;
		int down = down_spell(x, t, &ds, &de);
		if (down && t - ds >= f->cfg->check_fall_us)
			return 0;
		if (!down && t >= ds && de - ds >= f->cfg->check_fall_us && t - de < f->cfg->check_rise_us)
			return 0;
	}
	return 1;
}

/* The slow-down factor of phase (SIM_PHASE_PREFILL or _DECODE) on e at t. */
static double ep_slow(const struct sim_fleet *f, uint32_t e, int64_t t, int phase)
{
	double s = 1;
	for (uint32_t i = 0; i < f->cfg->nfault; i++) {
		const struct sim_fault *x = &f->cfg->fault[i];
		if (x->ep == e && x->kind == SIM_FAULT_SLOW && fault_active(x, t) &&
		    (x->phase == SIM_PHASE_BOTH || x->phase == phase))
			s *= x->factor;
	}
	return s;
}

int sim_fleet_key_refused(const struct sim_fleet *f, uint32_t e, int64_t t)
{
	for (uint32_t i = 0; i < f->cfg->nfault; i++) {
		const struct sim_fault *x = &f->cfg->fault[i];
		if (x->ep == e && x->kind == SIM_FAULT_401 && fault_active(x, t))
			return 1;
	}
	return 0;
}

/* The error fault that answers a request arriving at t, or NULL. */
static const struct sim_fault *ep_error(struct sim_fleet *f, uint32_t e, int64_t t)
{
	for (uint32_t i = 0; i < f->cfg->nfault; i++) {
		const struct sim_fault *x = &f->cfg->fault[i];
		if (x->ep != e || !fault_active(x, t))
			continue;
		if (x->kind != SIM_FAULT_500 && x->kind != SIM_FAULT_503 && x->kind != SIM_FAULT_429 &&
		    x->kind != SIM_FAULT_401)
			continue;
		if (x->prob >= 1 || sim_rng_unit(&f->rng) < x->prob)
			return x;
	}
	return NULL;
}

/* Whether a cut fault cuts a streamed request arriving at e at t. */
static int ep_cuts(struct sim_fleet *f, uint32_t e, int64_t t)
{
	for (uint32_t i = 0; i < f->cfg->nfault; i++) {
		const struct sim_fault *x = &f->cfg->fault[i];
		if (x->ep == e && x->kind == SIM_FAULT_CUT && fault_active(x, t) &&
		    (x->prob >= 1 || sim_rng_unit(&f->rng) < x->prob))
			return 1;
	}
	return 0;
}

/* --- agents' views ------------------------------------------------------- */

static void view_refresh(struct sim_fleet *f, struct agent *a)
{
	for (uint32_t e = 0; e < f->cfg->nep; e++) {
		a->view[e].present = (uint8_t)ep_present(&f->cfg->ep[e], f->now);
		a->view[e].up = (uint8_t)ep_up_in_haproxy(f, e, f->now);
		a->view[e].live = a->live[e];
		a->view[e].check_ms = f->eps[e].check_ms;
	}
}

static struct sim_view view_of(struct sim_fleet *f, struct agent *a)
{
	return (struct sim_view){ .now_us = f->now, .n = f->cfg->nep, .ep = a->view, .fleet = f };
}

/* --- endpoint model ------------------------------------------------------ */

static int push(struct sim_fleet *f, int64_t t, enum ev_type type, uint32_t arg)
{
	return sim_evq_push(&f->q, t, (uint32_t)type, arg);
}

/* Starts prefill of request i on endpoint e now (a batch slot is free). */
static int ep_start(struct sim_fleet *f, uint32_t e, uint32_t i)
{
	const struct sim_ep_params *p = &f->cfg->ep[e];
	struct ep_state *s = &f->eps[e];
	const struct sim_req *r = &f->w->req[i];
	struct sim_rec *rc = &f->rec[i];
	uint32_t hits;
	if (s->llama) {
		int slot = sim_llama_start(&s->ll, sim_trace_blocks(f->w, r), r->nblocks, &hits);
		if (slot == -ENOMEM)
			return -ENOMEM;
		rc->slot = (int16_t)slot; /* a free slot: running < max_running = slots */
	} else {
		hits = sim_kv_use(&s->kv, sim_trace_blocks(f->w, r), r->nblocks);
	}
	uint64_t cached = (uint64_t)hits * f->bt;
	if (cached >= r->input_tokens)
		cached = r->input_tokens ? r->input_tokens - 1 : 0; /* one token is always computed */
	rc->cached_tokens = (uint32_t)cached;
	double uncached = (double)(r->input_tokens - cached);
	uint32_t others = s->running++;
	rc->batch = (uint16_t)(others > UINT16_MAX ? UINT16_MAX : others);
	double slow_p = ep_slow(f, e, f->now, SIM_PHASE_PREFILL) / p->speed;
	double slow_d = ep_slow(f, e, f->now, SIM_PHASE_DECODE) / p->speed;
	double prefill_ms = uncached / 1000.0 * p->prefill_ms_per_ktok *
			    (1 + p->prefill_batch_slowdown * others) * slow_p;
	double decode_ms = (r->output_tokens > 1 ? r->output_tokens - 1 : 0) * p->decode_ms_per_tok *
			   (1 + p->decode_batch_slowdown * others) * slow_d;
	if (rc->cut)
		decode_ms /= 2; /* cut half-way */
	rc->t_start_us = f->now;
	rc->t_first_us = f->now + (int64_t)llround(prefill_ms * 1000);
	if (p->headers_immediate && r->stream) {
		/* the first token follows the headers sent before prefill */
		int64_t hdr = r->arrival_us + (int64_t)llround(p->header_ms * 1000);
		if (rc->t_first_us < hdr)
			rc->t_first_us = hdr;
	}
	rc->t_end_us = rc->t_first_us + (int64_t)llround(decode_ms * 1000);
	if (push(f, rc->t_first_us, EV_FIRST, i) < 0 || push(f, rc->t_end_us, EV_DONE, i) < 0)
		return -ENOMEM;
	return 0;
}

static int ep_enqueue(struct sim_fleet *f, uint32_t e, uint32_t i)
{
	struct ep_state *s = &f->eps[e];
	if (s->qlen == s->qcap) {
		size_t ncap = s->qcap ? s->qcap * 2 : 64;
		uint32_t *n = malloc(ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (size_t k = 0; k < s->qlen; k++)
			n[k] = s->queue[(s->qhead + k) % s->qcap];
		free(s->queue);
		s->queue = n;
		s->qcap = ncap;
		s->qhead = 0;
	}
	s->queue[(s->qhead + s->qlen++) % s->qcap] = i;
	return 0;
}

/* --- events -------------------------------------------------------------- */

static void feedback(struct sim_fleet *f, uint32_t i, int status, int64_t tr_ms, uint32_t retry_after_s)
{
	struct sim_rec *rc = &f->rec[i];
	struct agent *a = &f->ag[rc->agent];
	rc->fb_sent = 1;
	rc->fb_tr_ms = tr_ms;
	if (!f->pol->feedback)
		return;
	view_refresh(f, a);
	struct sim_view v = view_of(f, a);
	struct sim_feedback fb = { .status = status, .tr_ms = tr_ms, .retry_after_s = retry_after_s,
				   .stream = f->w->req[i].stream };
	f->pol->feedback(a->st, &v, &f->w->req[i], (uint32_t)rc->ep, &fb);
}

/* Response bytes HAProxy logs for a request of out output tokens: about
 * 4 bytes of text per token in one JSON body, or one server-sent event of
 * about 160 bytes per token when streamed, plus headers. */
static uint64_t response_bytes(const struct sim_req *r, const struct sim_rec *rc)
{
	if (!rc->admitted)
		return 150;
	return 400 + (uint64_t)r->output_tokens * (r->stream ? 160 : 4);
}

/* The request's response is complete: HAProxy's counts drop (and with log
 * ingestion, the agent reads the end-of-stream line, after any feedback). */
static int closed_release(struct sim_fleet *f, uint32_t i);

static int finish(struct sim_fleet *f, uint32_t i)
{
	struct sim_rec *rc = &f->rec[i];
	const struct sim_req *r = &f->w->req[i];
	rc->t_end_us = f->now;
	if (rc->ep < 0)
		return closed_release(f, i);
	f->eps[rc->ep].live--;
	f->ag[rc->agent].live[rc->ep]--;
	f->live_total--;
	if (f->log_ingest) {
		/* the log line arrives at the end of the stream: in-flight - 1
		 * on the endpoint first chosen, the one the decision counted */
		struct agent *a = &f->ag[rc->agent];
		if (a->view[rc->wep].in_flight > 0)
			a->view[rc->wep].in_flight--;
		if (f->pol->complete) {
			view_refresh(f, a);
			struct sim_view v = view_of(f, a);
			struct sim_completion cc = {
				.status = rc->status,
				/* a refused connection shows only in the log line:
				 * HAProxy's own 503, no server time, no feedback */
				.end = rc->refused ? SIM_END_SERVER_FAIL :
				       rc->cut ? SIM_END_SERVER_CUT : SIM_END_COMPLETE,
				.tr_ms = rc->refused ? -1 : rc->fb_tr_ms,
				.total_ms = (f->now - r->arrival_us) / 1000,
				.bytes = response_bytes(r, rc),
				.stream = r->stream,
				.feedback_seen = rc->fb_sent,
				.retries = rc->attempts > 0 ? rc->attempts - 1u : 0,
			};
			if (rc->ep != rc->wep) {
				/* ended on another server after retries: the
				 * line tells the first one failed (the agent's
				 * route_log_line: redispatched), nothing more */
				cc.status = -1;
				cc.end = SIM_END_SERVER_FAIL;
				cc.tr_ms = cc.total_ms = -1;
				cc.bytes = 0;
				cc.feedback_seen = 0;
			}
			f->pol->complete(a->st, &v, r, (uint32_t)rc->wep, &cc);
		} else if (rc->refused) {
			/* a policy without the log hook: the refusal as
			 * HAProxy's 503 through its feedback */
			feedback(f, i, 503, -1, 0);
		}
	}
	return closed_release(f, i);
}

/* One upstream attempt of request i on endpoint e at f->now: HAProxy's
 * counts rise, then the server refuses, answers an error, or admits it. */
static int attempt(struct sim_fleet *f, uint32_t i, uint32_t e)
{
	const struct sim_req *r = &f->w->req[i];
	struct sim_rec *rc = &f->rec[i];
	rc->ep = (int32_t)e;
	f->ag[rc->agent].live[e]++;
	f->eps[e].live++;
	f->live_total++;
	const struct sim_ep_params *p = &f->cfg->ep[e];
	int64_t err_us = (int64_t)llround(p->error_ms * 1000);
	if (ep_refusing(f, e, f->now)) {
		rc->refused = 1;
		rc->status = 503;
		return push(f, f->now + err_us, EV_DONE, i);
	}
	const struct sim_fault *x = ep_error(f, e, f->now);
	if (x) {
		rc->status = x->kind == SIM_FAULT_500 ? 500 :
			     x->kind == SIM_FAULT_503 ? 503 :
			     x->kind == SIM_FAULT_429 ? 429 : 401;
		rc->fb_tr_ms = (int64_t)llround(p->error_ms);
		rc->fb_retry_after_s = x->kind == SIM_FAULT_429 ? x->retry_after_s : 0;
		return push(f, f->now + err_us, EV_HEADERS, i);
	}
	rc->admitted = 1;
	rc->status = 200;
	rc->cut = (uint8_t)(r->stream && ep_cuts(f, e, f->now));
	if (p->headers_immediate && r->stream &&
	    push(f, f->now + (int64_t)llround(p->header_ms * 1000), EV_HEADERS, i) < 0)
		return -ENOMEM;
	if (f->eps[e].running < p->max_running)
		return ep_start(f, e, i);
	return ep_enqueue(f, e, i);
}

static int on_arrival(struct sim_fleet *f, uint32_t i)
{
	const struct sim_req *r = &f->w->req[i];
	struct sim_rec *rc = &f->rec[i];
	uint32_t ai = f->nag > 1 ? sim_rng_below(&f->rng, f->nag) : 0;
	struct agent *a = &f->ag[ai];
	rc->agent = (uint16_t)ai;
	view_refresh(f, a);
	struct sim_view v = view_of(f, a);
	const char *reason = "none";
	int e = f->pol->decide(a->st, &v, r, &reason);
	rc->reason = reason;
	if (f->detail && f->pol->detail)
		rc->detail = f->pol->detail(a->st);
	bool routed = true;
	if (e < 0 || (uint32_t)e >= f->cfg->nep || !a->view[e].up) {
		/* no answer, or use-server names a server that is not UP: HAProxy balances */
		uint32_t rot = i;
		e = sim_policy_leastconn_pick(&v, &rot);
		rc->reason = "haproxy";
		routed = false;
	}
	if (!f->w->closed && f->next_arrival < f->w->n) {
		size_t nx = f->next_arrival++;
		if (push(f, f->w->req[nx].arrival_us, EV_ARRIVAL, (uint32_t)nx) < 0)
			return -ENOMEM;
	}
	if (e < 0) {
		rc->ep = -1;
		rc->status = 503; /* no server available */
		rc->t_end_us = f->now;
		return closed_release(f, i);
	}
	/* The budget answers with the decision; no answer, no variable. */
	rc->noretry = (uint8_t)(routed && f->log_ingest && f->pol->noretry &&
				f->pol->noretry(a->st, &v, r, (uint32_t)e));
	rc->wep = e;
	rc->attempts = 1;
	if (f->detail) {
		uint32_t lo = UINT32_MAX;
		for (uint32_t k = 0; k < f->cfg->nep; k++)
			if (a->view[k].up && f->eps[k].live < lo)
				lo = f->eps[k].live;
		rc->live_at = (uint16_t)f->eps[e].live;
		rc->live_min = (uint16_t)(lo == UINT32_MAX ? 0 : lo);
	}
	a->view[e].in_flight++;
	return attempt(f, i, (uint32_t)e);
}

/* HAProxy's L7 retry of a 503 answer (retry-on 503, option redispatch 1):
 * another server, leastconn avoiding the one that failed, without asking
 * the agent again and without feedback for the failed attempt. 1 when
 * retried, 0 when not (no retry left, noretry, no other server up). */
static int retry(struct sim_fleet *f, uint32_t i)
{
	struct sim_rec *rc = &f->rec[i];
	if (rc->status != 503 || rc->refused || rc->noretry || rc->attempts > f->cfg->retries)
		return 0;
	struct agent *a = &f->ag[rc->agent];
	uint32_t old = (uint32_t)rc->ep;
	view_refresh(f, a);
	struct sim_view v = view_of(f, a);
	/* leastconn on HAProxy's live counts, the failed server left out */
	struct sim_view_ep *eps = (struct sim_view_ep *)v.ep;
	uint8_t up = eps[old].up;
	eps[old].up = 0;
	uint32_t rot = i + rc->attempts;
	int e = sim_policy_leastconn_pick(&v, &rot);
	eps[old].up = up;
	if (e < 0)
		return 0;
	f->eps[old].live--;
	a->live[old]--;
	f->live_total--;
	rc->attempts++;
	rc->status = 0;
	rc->fb_tr_ms = 0;
	rc->fb_retry_after_s = 0;
	return attempt(f, i, (uint32_t)e) < 0 ? -ENOMEM : 1;
}

/* HAProxy's layer-7 check of e (--http-check): a completion of
 * SIM_CHECK_PROMPT uncached tokens and SIM_CHECK_OUTPUT generated ones,
 * non-streamed, so its duration is the whole answer's: run in e's batch
 * as it is now (a check is too small to change it). */
#define SIM_CHECK_PROMPT 64
#define SIM_CHECK_OUTPUT 8
static double check_duration_ms(const struct sim_fleet *f, uint32_t e)
{
	const struct sim_ep_params *p = &f->cfg->ep[e];
	uint32_t others = f->eps[e].running;
	double slow_p = ep_slow(f, e, f->now, SIM_PHASE_PREFILL) / p->speed;
	double slow_d = ep_slow(f, e, f->now, SIM_PHASE_DECODE) / p->speed;
	return SIM_CHECK_PROMPT / 1000.0 * p->prefill_ms_per_ktok *
	       (1 + p->prefill_batch_slowdown * others) * slow_p +
	       (SIM_CHECK_OUTPUT - 1) * p->decode_ms_per_tok *
	       (1 + p->decode_batch_slowdown * others) * slow_d;
}

/* The checks due by now: each endpoint every check_us, on its own phase;
 * a check's duration is what the runtime API shows once it ended. A
 * server that is down answers none (its check fails: no duration). */
static void checks_run(struct sim_fleet *f)
{
	for (uint32_t e = 0; f->check_us > 0 && e < f->cfg->nep; e++) {
		struct ep_state *s = &f->eps[e];
		if (s->check_done_us > 0 && f->now >= s->check_done_us) {
			s->check_ms = s->check_running_ms;
			s->check_done_us = 0;
		}
		if (f->now < s->check_next_us || s->check_done_us > 0)
			continue;
		while (s->check_next_us <= f->now)
			s->check_next_us += f->check_us;
		if (!ep_present(&f->cfg->ep[e], f->now) || ep_refusing(f, e, f->now)) {
			s->check_ms = 0;
			continue;
		}
		s->check_running_ms = check_duration_ms(f, e);
		s->check_done_us = f->now + (int64_t)llround(s->check_running_ms * 1000);
	}
}

static int on_poll(struct sim_fleet *f, uint32_t ai)
{
	checks_run(f);
	struct agent *a = &f->ag[ai];
	for (uint32_t e = 0; e < f->cfg->nep; e++)
		a->view[e].in_flight = a->live[e];
	view_refresh(f, a);
	if (f->pol->poll) {
		struct sim_view v = view_of(f, a);
		f->pol->poll(a->st, &v);
	}
	if (ai == 0) {
		for (uint32_t e = 0; e < f->cfg->nep; e++) {
			if (!ep_present(&f->cfg->ep[e], f->now))
				continue;
			f->eps[e].inflight_sum += f->eps[e].live;
			f->eps[e].inflight_samples++;
		}
	}
	if (f->next_arrival < f->w->n || f->live_total > 0)
		return push(f, f->now + f->cfg->poll_interval_us, EV_POLL, ai);
	return 0;
}

/* An agent's poll of every engine's /metrics (agent/engine.c): each
 * engine's own running + waiting requests, whichever agent sent them, at
 * this instant (an HTTP round trip on a LAN is far below the interval). */
static int on_engine(struct sim_fleet *f, uint32_t ai)
{
	struct agent *a = &f->ag[ai];
	for (uint32_t e = 0; e < f->cfg->nep; e++)
		a->view[e].engine_load = f->eps[e].running + (uint32_t)f->eps[e].qlen;
	if (f->pol->engine) {
		view_refresh(f, a);
		struct sim_view v = view_of(f, a);
		f->pol->engine(a->st, &v);
	}
	if (f->next_arrival < f->w->n || f->live_total > 0)
		return push(f, f->now + f->engine_poll_us, EV_ENGINE, ai);
	return 0;
}

static int on_headers(struct sim_fleet *f, uint32_t i)
{
	struct sim_rec *rc = &f->rec[i];
	const struct sim_req *r = &f->w->req[i];
	if (rc->admitted) {
		/* immediate headers (vLLM): tr measures admission, not prefill */
		feedback(f, i, 200, (f->now - r->arrival_us) / 1000, 0);
		return 0;
	}
	/* an error answer: retried by HAProxy (no http-response rule runs),
	 * or its headers (feedback), then its log line */
	int rt = retry(f, i);
	if (rt != 0)
		return rt < 0 ? rt : 0;
	feedback(f, i, rc->status, rc->fb_tr_ms, rc->fb_retry_after_s);
	return finish(f, i);
}

static int on_first(struct sim_fleet *f, uint32_t i)
{
	const struct sim_req *r = &f->w->req[i];
	const struct sim_ep_params *p = &f->cfg->ep[f->rec[i].ep];
	if (r->stream && !p->headers_immediate)
		feedback(f, i, 200, (f->now - r->arrival_us) / 1000, 0);
	return 0;
}

static int on_done(struct sim_fleet *f, uint32_t i)
{
	struct sim_rec *rc = &f->rec[i];
	const struct sim_req *r = &f->w->req[i];
	if (!rc->admitted)
		return finish(f, i); /* refused: HAProxy sends no feedback for its own 503 */
	uint32_t e = (uint32_t)rc->ep;
	struct ep_state *s = &f->eps[e];
	s->running--;
	if (s->llama) /* the slot keeps the prompt and what it generated */
		sim_llama_done(&s->ll, rc->slot, sim_trace_blocks(f->w, r), r->nblocks + r->gen_blocks);
	/* not streamed: the headers come with the whole response, then the
	 * log line */
	if (!r->stream)
		feedback(f, i, 200, (f->now - r->arrival_us) / 1000, 0);
	if (finish(f, i) < 0)
		return -ENOMEM;
	while (s->qlen > 0 && s->running < f->cfg->ep[e].max_running) {
		uint32_t j = s->queue[s->qhead];
		s->qhead = (s->qhead + 1) % s->qcap;
		s->qlen--;
		if (ep_start(f, e, j) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* --- closed loop -------------------------------------------------------- */

/* Sends requests while a client is free: the first unsent one (workload
 * order: round by round) whose conversation has nothing in flight, as
 * tests/engine/driver's workers take them. */
static int closed_dispatch(struct sim_fleet *f)
{
	while (f->closed_inflight < f->w->closed) {
		while (f->closed_scan < f->w->n && f->sent[f->closed_scan])
			f->closed_scan++;
		size_t i = f->closed_scan;
		while (i < f->w->n && (f->sent[i] || f->conv_busy[f->w->req[i].conv]))
			i++;
		if (i >= f->w->n)
			return 0;
		f->sent[i] = 1;
		f->conv_busy[f->w->req[i].conv] = 1;
		f->closed_inflight++;
		f->next_arrival++; /* counts what is sent: the polls stop after the last */
		f->creq[i].arrival_us = f->now;
		if (push(f, f->now, EV_ARRIVAL, (uint32_t)i) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Request i's client has its answer (or its error): it sends the next. */
static int closed_release(struct sim_fleet *f, uint32_t i)
{
	if (!f->w->closed)
		return 0;
	f->conv_busy[f->w->req[i].conv] = 0;
	f->closed_inflight--;
	return closed_dispatch(f);
}

/* --- run ----------------------------------------------------------------- */

static void fleet_free(struct sim_fleet *f)
{
	if (f->eps) {
		for (uint32_t e = 0; e < f->cfg->nep; e++) {
			sim_kv_finish(&f->eps[e].kv);
			sim_llama_finish(&f->eps[e].ll);
			free(f->eps[e].queue);
		}
	}
	if (f->ag) {
		for (uint32_t a = 0; a < f->nag; a++) {
			if (f->pol && f->ag[a].st)
				f->pol->destroy(f->ag[a].st);
			free(f->ag[a].view);
			free(f->ag[a].live);
		}
	}
	free(f->eps);
	free(f->ag);
	free(f->sent);
	free(f->conv_busy);
	if (f->has_hints)
		sim_hints_finish(&f->hints);
	sim_evq_finish(&f->q);
}

int sim_fleet_run(const struct sim_fleet_cfg *cfg, const struct sim_workload *w,
		  const struct sim_run_opts *opts, struct sim_run *out, char *err, size_t errlen)
{
	struct sim_fleet f = {
		.cfg = cfg,
		.w = w,
		.pol = opts->policy,
		.nag = opts->agents ? opts->agents : 1,
		.log_ingest = opts->log_ingest,
		.detail = opts->detail,
		.engine_poll_us = opts->engine_poll_us,
		.check_us = opts->check_us,
		.bt = w->block_tokens ? w->block_tokens : SIM_KV_BLOCK_TOKENS,
		.creq = w->req,
	};
	*out = (struct sim_run){ .agents = f.nag, .seed = opts->seed, .cfg = cfg, .w = w };
	snprintf(out->policy, sizeof(out->policy), "%s", opts->policy->name);
	sim_rng_seed(&f.rng, opts->seed);
	sim_evq_init(&f.q);
	int rc = -ENOMEM;
	f.eps = calloc(cfg->nep, sizeof(*f.eps));
	f.ag = calloc(f.nag, sizeof(*f.ag));
	out->rec = calloc(w->n ? w->n : 1, sizeof(*out->rec));
	out->inflight_avg = calloc(cfg->nep, sizeof(*out->inflight_avg));
	f.rec = out->rec;
	if (!f.eps || !f.ag || !out->rec || !out->inflight_avg)
		goto fail;
	for (uint32_t e = 0; e < cfg->nep; e++) {
		const struct sim_ep_params *p = &cfg->ep[e];
		/* cache_blocks counts 512-token blocks whatever w's block size */
		uint64_t cap = (uint64_t)p->cache_blocks * SIM_KV_BLOCK_TOKENS / f.bt;
		f.eps[e].llama = p->cache_llama;
		/* HAProxy spreads its checks over the interval */
		f.eps[e].check_next_us = f.check_us * e / cfg->nep;
		if (sim_kv_init(&f.eps[e].kv, p->cache_llama ? 0 : (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap)) < 0)
			goto fail;
		if (p->cache_llama &&
		    sim_llama_init(&f.eps[e].ll, p->max_running, (uint64_t)(p->cache_ram_tokens / f.bt),
				   p->slot_similarity) < 0)
			goto fail;
	}
	if (w->closed) {
		for (size_t i = 0; i < w->n; i++)
			if (w->req[i].conv >= f.nconv)
				f.nconv = w->req[i].conv + 1;
		f.sent = calloc(w->n ? w->n : 1, 1);
		f.conv_busy = calloc(f.nconv ? f.nconv : 1, 1);
		if (!f.sent || !f.conv_busy)
			goto fail;
	}
	/* The HAProxies start with the trace: its first second is their
	 * peers' start-up window. */
	if (opts->shared_hints) {
		if (sim_hints_init(&f.hints, sim_rng_mix(opts->seed ^ 0x41c7), w->n ? w->req[0].arrival_us : 0) < 0)
			goto fail;
		f.hints.lone = opts->shared_hints == 2;
		f.has_hints = 1;
	}
	for (uint32_t a = 0; a < f.nag; a++) {
		struct agent *ag = &f.ag[a];
		ag->view = calloc(cfg->nep, sizeof(*ag->view));
		ag->live = calloc(cfg->nep, sizeof(*ag->live));
		if (!ag->view || !ag->live)
			goto fail;
		for (uint32_t e = 0; e < cfg->nep; e++) {
			ag->view[e] = (struct sim_view_ep){
				.name = cfg->ep[e].name,
				.id = e,
				.weight = cfg->ep[e].weight,
				.cost_per_mtok = cfg->ep[e].cost_per_mtok,
			};
		}
		struct sim_policy_env env = {
			.nep = cfg->nep,
			.seed = sim_rng_mix(opts->seed + 0x5eed * (a + 1)),
			.agent = a,
			.cfg = cfg,
			.set = opts->set,
			.nset = opts->nset,
			.hints = f.has_hints ? &f.hints : NULL,
			.detail = opts->detail,
		};
		ag->st = f.pol->create(&env);
		if (!ag->st)
			goto fail;
		/* each agent polls on its own phase */
		if (push(&f, (int64_t)sim_rng_below(&f.rng, (uint32_t)cfg->poll_interval_us), EV_POLL, a) < 0)
			goto fail;
		/* and its engine polls on their own */
		if (f.engine_poll_us > 0 &&
		    push(&f, (int64_t)sim_rng_below(&f.rng, (uint32_t)f.engine_poll_us), EV_ENGINE, a) < 0)
			goto fail;
	}
	for (size_t i = 0; i < w->n; i++)
		out->rec[i] = (struct sim_rec){ .ep = -1, .wep = -1, .t_start_us = -1, .t_first_us = -1,
						.slot = -1 };
	if (w->closed) {
		if (closed_dispatch(&f) < 0)
			goto fail;
	} else {
		if (w->n > 0 && push(&f, w->req[0].arrival_us, EV_ARRIVAL, 0) < 0)
			goto fail;
		f.next_arrival = 1;
	}
	struct sim_event ev;
	rc = 0;
	while (rc == 0 && sim_evq_pop(&f.q, &ev) == 0) {
		f.now = ev.t_us;
		switch ((enum ev_type)ev.type) {
		case EV_ARRIVAL: rc = on_arrival(&f, ev.arg); break;
		case EV_POLL: rc = on_poll(&f, ev.arg); break;
		case EV_HEADERS: rc = on_headers(&f, ev.arg); break;
		case EV_FIRST: rc = on_first(&f, ev.arg); break;
		case EV_DONE: rc = on_done(&f, ev.arg); break;
		case EV_ENGINE: rc = on_engine(&f, ev.arg); break;
		}
	}
	if (rc < 0)
		goto fail;
	out->t_last_us = f.now;
	for (uint32_t e = 0; e < cfg->nep; e++)
		out->inflight_avg[e] = f.eps[e].inflight_samples ?
			f.eps[e].inflight_sum / (double)f.eps[e].inflight_samples : 0;
	fleet_free(&f);
	return 0;
fail:
	snprintf(err, errlen, "%s: out of memory", opts->policy->name);
	fleet_free(&f);
	sim_fleet_run_finish(out);
	return -ENOMEM;
}

void sim_fleet_run_finish(struct sim_run *run)
{
	free(run->rec);
	free(run->inflight_avg);
	run->rec = NULL;
	run->inflight_avg = NULL;
}
