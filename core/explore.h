/* explore.h - a bounded share of new placements for endpoints the policy
 * no longer hears from (docs/policy-v2.md, "Exploration").
 *
 * An endpoint left by the slow rules (fast_enough, the slow-run
 * detector), or one power of two choices starves because its EWMA is
 * stale (no answer for EXPLORE_STALE of its fair intervals between the
 * pool's answers), gets no request, so nothing it does can tell that it
 * recovered: idle_reset's re-trial is the only way back, doubled for each
 * re-trial that found it still slow. Exploration sends such an endpoint a
 * new key, an anonymous request, or a request of a key that ranks it
 * before the key's own endpoint, once every ceil(W / (w x explore_share))
 * decisions of the pool (W the candidates' weight, w its own: a fraction
 * explore_share of its fair share), never while a probe is unanswered,
 * that spacing doubled (up to EXPLORE_MAX_SHIFT times) after each verdict
 * "still slow"; leaving it was such a verdict, and its first probe then
 * waits longer (EXPLORE_LEFT_WAIT spacings). Its answers are judged one
 * by one: fast within sticky_tolerance x the larger of the candidates'
 * median and its own base. Enough fast answers, more than the slow ones,
 * are the verdict "recovered" (two on a regular endpoint, more the wider
 * its spread): its EWMA of the time to headers, stale, takes the fast
 * answers' mean and restarts as a re-trial's does (a mean over its next
 * answers, counted from RETRIAL_SAMPLES: a verdict from a still slow
 * endpoint's lucky answers is undone in a few), it is fit again, and, if
 * it was left, keys warm elsewhere that rank it first come back to it
 * for one idle_reset, unless it is left again (explore_reclaim). One
 * slow answer more than the fast ones is the verdict "still slow". An
 * endpoint whose spread would need more answers than a re-trial takes is
 * not explored, nor one whose end-to-end EWMA says slow while its times
 * to headers do not (the verdict needs it fast, and only idle_reset's
 * re-trial, which probes would put off, forgets it). One whose headers
 * said slow too is explored: once its probes' headers are fast, their
 * own ends judge it (explore_end), and the verdict "recovered" restarts
 * the stale end-to-end EWMA from its peers' median.
 * Every answer also goes to the EWMA as any success does; failures go to
 * the breaker as any do. */
#ifndef WARMLANE_CORE_EXPLORE_H
#define WARMLANE_CORE_EXPLORE_H

#include <stdbool.h>
#include <stdint.h>

#include "pool.h"

struct core;
struct pick;

/* Endpoints that may take their keys back at once (explore_reclaim). */
#define EXPLORE_RECLAIM_MAX 4u

/* Health checks a peers' median is taken over (explore_check): with
 * more endpoints, those of the first that report. */
#define EXPLORE_CHECKS 64u

/* A check read more than this long ago is not an endpoint's current one. */
#define EXPLORE_CHECK_FRESH_MS 10000u

/* Whether e has a current check at now_ms. */
static inline bool explore_check_fresh(const struct pool_endpoint *e, uint64_t now_ms)
{
	return e->check_ms != 0 && now_ms >= e->check_at_ms &&
	       now_ms - e->check_at_ms <= EXPLORE_CHECK_FRESH_MS;
}

struct explore {
	uint64_t clock;          /* decisions committed */
	uint64_t scan_at;        /* no scan of the candidates before */
	uint32_t due;            /* slot + 1 whose probe is due; 0 none */
	uint64_t last_ms;        /* the pool's last success */
	double gap_ms;           /* EWMA of the time between its successes */
	uint64_t probes;         /* placements exploration made */
	uint64_t recovered;      /* verdicts "recovered" */
	uint64_t check_recovered; /* verdicts "recovered" of health checks */
	/* The last check of up to EXPLORE_CHECKS endpoints (explore_check),
	 * by duration; each kept as it comes, a stale one skipped. */
	uint32_t check_n;
	struct {
		uint32_t ms, idx;
	} check_v[EXPLORE_CHECKS];
	uint32_t reclaim_n;
	uint32_t reclaim[EXPLORE_RECLAIM_MAX];           /* slot indices */
	uint32_t reclaim_gen[EXPLORE_RECLAIM_MAX];       /* and generations */
	uint64_t reclaim_until_ms[EXPLORE_RECLAIM_MAX];
	uint32_t reclaim_left[EXPLORE_RECLAIM_MAX];      /* its left_n then */
};

/* A decision was committed: the clock probes are spaced on. */
static inline void explore_tick(struct explore *x)
{
	x->clock++;
}

/* The endpoint the decision k of akey at now_ms explores, or UINT32_MAX:
 * an anonymous request or a new key (warm_idx UINT32_MAX), or a key warm
 * on warm_idx that ranks the endpoint before it. Scans the candidates at
 * most once per v->n decisions, O(1) otherwise; no allocation. */
uint32_t explore_pick(struct core *c, const struct pick *k, uint64_t akey,
		      uint32_t warm_idx, uint64_t now_ms);

/* A key warm on warm_idx: the recovered endpoint it goes back to (one
 * ranked before warm_idx for akey, fit, closed and within the load
 * bound), or UINT32_MAX. An endpoint left again since its verdict takes
 * no more keys back: the verdict was undone, and a key that came back
 * would leave at its next request, or at the next after the fleet's
 * median moved (on four llama-servers sharing two cores, conversations
 * went back and forth at every turn: docs/policy-v2.md, section 44). */
uint32_t explore_reclaim(struct core *c, struct pick *k, uint64_t akey,
			 uint32_t warm_idx, uint64_t now_ms);

static inline bool explore_reclaiming(const struct explore *x)
{
	return x->reclaim_n > 0;
}

/* How far before a probe's decision the start of its answer may seem to
 * be: the start is rebuilt from HAProxy's timers (its time to headers or
 * total time, in whole milliseconds of its own clock) and comes out a
 * millisecond early, or more for a log line, whose total time counts
 * from the accept, before the decision. */
#define EXPLORE_HEARD_SLACK_MS 10u

/* An answer of any outcome from e to a request started at start_ms, of
 * affinity key akey (has_akey): the probe out is answered when the answer
 * is its key's, or the request started after it. A probe never taken for
 * answered would hold e's exploration for good: on real HAProxy a probe
 * answered within a millisecond of its decision's clock was taken for an
 * older request about one time in five (docs/policy-v2.md, section 40). */
static inline void explore_heard(struct pool_endpoint *e, uint64_t start_ms,
				 bool has_akey, uint64_t akey)
{
	if (e->explore_sent_ms == 0)
		return;
	if ((has_akey && e->explore_akey != 0 && akey == e->explore_akey) ||
	    start_ms + EXPLORE_HEARD_SLACK_MS >= e->explore_sent_ms)
		e->explore_sent_ms = 0;
}

/* A success of endpoint idx, its time to headers tr_ms (signal sig),
 * sized_ms sized (learn.c, sized; < 0: unknown), for a request started
 * at start_ms, answered at now_ms. */
void explore_answer(struct core *c, struct pool_endpoint *e, uint32_t idx,
		    unsigned sig, double tr_ms, double sized_ms,
		    uint64_t start_ms, uint64_t now_ms);

/* The end of a stream of endpoint idx (kind: its stream kind), ms_per_kib
 * its end-to-end time per KiB sent, for a request started at start_ms:
 * while e is explored on its headers but its end-to-end EWMA still holds
 * the slowdown, the probes' own ends judge it (explore.c, judge_ends). */
void explore_end(struct core *c, struct pool_endpoint *e, uint32_t idx,
		 unsigned kind, double ms_per_kib, uint64_t start_ms,
		 uint64_t now_ms);

/* HAProxy's layer-7 health check of endpoint idx took ms, read at now_ms
 * (0: none, or not layer 7: the last one holds until it is
 * EXPLORE_CHECK_FRESH_MS old, then its slow mark and vouch end). A check is the same small request on every
 * server, so its duration compares endpoints whatever prompts their
 * users sent, and it comes whether or not users are sent there. A check
 * over sticky_tolerance x the median of its peers' current checks (the
 * other endpoints of its tier) and CHECK_SLACK_MS over it marks idx's
 * check slow: new keys pass it over (decide.c, start_ok) and its warm
 * entries have no warm_slack (pick.h, within_warm_bound). A later one
 * within that is the verdict "recovered": its samples are forgotten and
 * it is re-tried at once, as after idle_reset; keys that rank it first
 * may come back (explore_reclaim); and until it has cold_start_samples
 * answers, its own do not leave it (check_vouch: they are cold prompts
 * on an empty cache). A check never leaves a warm entry itself. Without
 * it a recovery shows only in answers, and none go to an endpoint left
 * as slow: it waited for a probe, or for idle_reset. O(EXPLORE_CHECKS)
 * (the checks kept sorted); no allocation. */
void explore_check(struct core *c, uint32_t idx, uint32_t ms, uint64_t now_ms);

#endif
