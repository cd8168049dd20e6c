/* explore.c - probes for endpoints left or starved, and their verdicts (explore.h). */
#include "explore.h"

#include "pick.h"

#include <string.h>

/* Fair intervals between the pool's answers without one from an endpoint
 * after which its EWMA is stale: with answers spread by weight, a healthy
 * endpoint goes that long without one about once in e^8 (3,000) gaps. */
#define EXPLORE_STALE 8.0

/* Most doublings of the spacing after verdicts "still slow": then it
 * gets explore_share / 8 of its fair share. */
#define EXPLORE_MAX_SHIFT 2u

/* The same for an endpoint judged on sized answers (sized_answers):
 * its probes then come 32 times as far apart as at first. They are keyed
 * requests of every size, and routing alone on the Mooncake trace, with
 * EXPLORE_MAX_SHIFT, an endpoint 5x slower all along kept 0.84% of the
 * requests, 0.67% with this, 0.60% without the exploration, for the same
 * recovery (docs/policy-v2.md, section 37). */
#define EXPLORE_SIZED_MAX_SHIFT 5u

/* Longest spacings before the first probe of an endpoint just left. */
#define EXPLORE_LEFT_WAIT 8u

/* Fast answers (more than the slow ones) that make the verdict
 * "recovered" on a regular endpoint; one slow answer more than the fast
 * ones makes the verdict "still slow". */
#define EXPLORE_VERDICT 2u

/* Most answers a verdict may need: no more than a re-trial after
 * idle_reset takes to judge an endpoint (RETRIAL_SAMPLES). An endpoint
 * more irregular than that is not explored; its way back stays the
 * re-trial. */
#define EXPLORE_VERDICT_MAX RETRIAL_SAMPLES

/* A probe out this many times longer than its endpoint's slowest EWMA of
 * the time to headers, and at least EXPLORE_LOST_MIN_MS, is taken for
 * lost: its answer will not come (HAProxy answered it itself, or sent it
 * to another server, and there is no log input to say so), and another
 * may go out. Without it one lost probe held the endpoint's exploration
 * until it was no longer left. */
#define EXPLORE_LOST_EWMAS 4.0
#define EXPLORE_LOST_MIN_MS 60000u

/* Whether e's probe out since explore_sent_ms is still awaited at now_ms. */
static bool probe_out(const struct pool_endpoint *e, uint64_t now_ms)
{
	if (e->explore_sent_ms == 0)
		return false;
	double slowest = 0;
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++) {
		unsigned sig = pool_sig(false, k);
		if (e->samples[sig] > 0 && e->ewma[sig] > slowest)
			slowest = e->ewma[sig];
	}
	double lost_ms = EXPLORE_LOST_EWMAS * slowest;
	if (lost_ms < EXPLORE_LOST_MIN_MS)
		lost_ms = EXPLORE_LOST_MIN_MS;
	return now_ms < e->explore_sent_ms ||
	       (double)(now_ms - e->explore_sent_ms) < lost_ms;
}

/* EXPLORE_VERDICT times spread over mean, at least EXPLORE_VERDICT. */
static unsigned answers_for(double spread, double mean)
{
	double n = ceil(EXPLORE_VERDICT * spread / mean);
	return n < EXPLORE_VERDICT ? EXPLORE_VERDICT :
	       n > 255 ? 255 : (unsigned)n;
}

/* Sized answers (learn.c, sized) a verdict "recovered" needs on an
 * endpoint as fast as its peers' mean: the mean of n of them, plus
 * EXPLORE_VERDICT standard errors (the fleet's spread of sized answers
 * over sqrt(n)), within the tolerance over that mean (255 until the
 * spread is learnt). Sized, the Mooncake trace's times to headers spread
 * about 0.5 x their mean where raw they spread 8-15 x the base: a
 * verdict on keyed probes is then in reach (docs/policy-v2.md, section
 * 37). */
static unsigned sized_answers(const struct core *c)
{
	double room = (c->p.sticky_tolerance - 1) * c->tr_avg;
	if (c->sized_n < c->p.cold_start_samples || room <= 0)
		return 255;
	double n = EXPLORE_VERDICT * sqrt(c->sized_sq) / room;
	n = ceil(n * n);
	return n < 1 ? 1 : n > 255 ? 255 : (unsigned)n;
}

/* EXPLORE_VERDICT standard errors of the mean of e's sized answers (a
 * sized exploration counts them all in explore_fast and explore_sum). */
static double sized_error(const struct core *c, const struct pool_endpoint *e)
{
	return EXPLORE_VERDICT * sqrt(c->sized_sq / e->explore_fast);
}

/* Fast answers that make the verdict "recovered" on e (headers signal
 * sig): EXPLORE_VERDICT times its spread (root mean square distance to
 * its base) over its base where the slow-run detector has learnt it
 * (learn.c), at least EXPLORE_VERDICT. Times to headers that range from
 * a cache hit's to a long cold prompt's make a fast answer of a still
 * slow endpoint likely: on the Mooncake trace (spread 8-15 x the base),
 * 23 verdicts "recovered" of 73 probes of an endpoint 5x slower all
 * along, with 2 answers always. Judged on sized answers, sized_answers. */
static unsigned verdict_answers(const struct core *c,
				const struct pool_endpoint *e, unsigned sig)
{
	if (e->explore_sized)
		return sized_answers(c);
	if (pool_sig_e2e(sig) || e->spread_n[sig] < c->p.cold_start_samples ||
	    e->base[sig] <= 0)
		return EXPLORE_VERDICT;
	return answers_for(sqrt(e->spread[sig]), e->base[sig]);
}

/* Whether e is left (the slow rules) or starved: its last answer
 * EXPLORE_STALE fair intervals ago (fair by its weight in v), and as many
 * of its own times to headers (signal sig): at hundreds of thousands of
 * decisions a second a fair interval is a fraction of a millisecond, and
 * a healthy endpoint goes that long without an answer at every pause of
 * the agent, where none can be expected sooner than it answers. */
static bool worth(const struct core *c, const struct pool_endpoint *e,
		  const struct view *v, unsigned sig, uint64_t now_ms)
{
	if (left_slow(c, e))
		return true;
	const struct explore *x = &c->explore;
	if (!e->seen || !any_samples(e) || x->gap_ms <= 0 || now_ms < e->last_seen_ms)
		return false;
	double fair_ms = x->gap_ms * v->total_w / e->weight;
	double own_ms = e->samples[sig] > 0 ? e->ewma[sig] : 0;
	double quiet = (double)(now_ms - e->last_seen_ms);
	return quiet > EXPLORE_STALE * fair_ms && quiet > EXPLORE_STALE * own_ms;
}

/* Whether e, left, is no longer: fit on its own EWMA, or a re-trial
 * after idle_reset forgot its samples (which then judges it). */
static bool left_no_more(const struct core *c, const struct pool_endpoint *e)
{
	return e->suspect == POOL_FIT && !slow_run_left(c, e);
}

/* Decisions between two probes of e in v. */
static uint64_t spacing(const struct core *c, const struct pool_endpoint *e,
			const struct view *v)
{
	double n = ceil(v->total_w / (e->weight * c->p.explore_share));
	if (!(n < (double)(UINT32_MAX >> EXPLORE_SIZED_MAX_SHIFT)))
		n = (double)(UINT32_MAX >> EXPLORE_SIZED_MAX_SHIFT);
	return (uint64_t)n << e->explore_shift;
}

static void stop(struct pool_endpoint *e)
{
	e->explore_on = 0;
	e->explore_sent_ms = 0;
	e->explore_shift = 0;
	e->explore_fast = 0;
	e->explore_slow = 0;
	e->explore_sum = 0;
	e->explore_hdr = 0;
	e->explore_end_fast = 0;
	e->explore_end_slow = 0;
	e->explore_sized = 0;
}

/* Whether idx ranks before warm_idx for akey (rendezvous): a key it
 * would have had, or may have had before it was left. */
static bool ranks_before(const struct core *c, uint64_t akey, uint32_t idx,
			 uint32_t warm_idx)
{
	const struct pool_endpoint *e = &c->pool.ep[idx], *w = &c->pool.ep[warm_idx];
	struct rdv_item a = { rdv_cost(akey, e->rdv_seed, e->inv_weight), idx };
	struct rdv_item b = { rdv_cost(akey, w->rdv_seed, w->inv_weight), warm_idx };
	return rdv_before(&a, &b);
}

/* Whether e's times to headers, scored by k and warm, say slow: they
 * then show its slowness (a server that sends its headers with the first
 * token), and they can show its recovery. */
static bool headers_slow(const struct core *c, const struct pool_endpoint *e,
			 const struct pick *k)
{
	return k->use[0] && warm(c, e, k->sig[0]) &&
	       e->ewma[k->sig[0]] > k->tolerated[0];
}

/* Whether k scores e's end-to-end times and they say slow, while its
 * times to headers do not (explored: did not when it began). No verdict
 * "recovered" is then in reach: it needs them within the tolerance too
 * (explore_answer, e2e_slow), and they move only with the probes' own
 * ends of streams, one a spacing, at the EWMA's pace. Probes would only
 * keep e answering, so never idle, and so from idle_reset's re-trial,
 * which forgets those times and judges it afresh (with the log input,
 * an endpoint 5x slow that recovered got 3.3% of the anonymous requests
 * 30-120 s after, fair 12.5%, probed; 4.7% not: docs/policy-v2.md,
 * section 16). Where the headers said slow too, the probes' headers and
 * their own ends judge it (judge_ends), and a verdict "recovered"
 * restarts the stale end-to-end EWMA (section 35). */
static bool e2e_holds(const struct core *c, const struct pool_endpoint *e,
		      const struct pick *k)
{
	if (e->explore_on ? e->explore_hdr : headers_slow(c, e, k))
		return false;
	return k->use[1] && warm(c, e, k->sig[1]) && e->ewma[k->sig[1]] > k->tolerated[1];
}

/* The scan: arms what became worth exploring, disarms what no longer
 * is, and returns an armed endpoint whose probe is due, or UINT32_MAX. */
static uint32_t scan(struct core *c, const struct pick *k, uint64_t now_ms)
{
	struct explore *x = &c->explore;
	const struct view *v = k->v;
	unsigned sig = k->sig[0];
	uint32_t due = UINT32_MAX;
	for (uint32_t i = 0; i < v->n; i++) {
		uint32_t idx = v->cand[i];
		struct pool_endpoint *e = &c->pool.ep[idx];
		/* worth first: the cheap test, false for a healthy one */
		if (!e->explore_on && !worth(c, e, v, sig, now_ms))
			continue;
		/* Not explored yet: by its raw answers if they are regular
		 * enough, else by sized ones if those are. */
		bool sized = c->alone && !e->explore_on && left_slow(c, e) &&
			     verdict_answers(c, e, sig) > EXPLORE_VERDICT_MAX;
		bool reach = (sized ? sized_answers(c)
				    : verdict_answers(c, e, sig)) <=
				     EXPLORE_VERDICT_MAX &&
			     !e2e_holds(c, e, k);
		if (e->explore_on &&
		    (!reach || (e->explore_left && left_no_more(c, e)))) {
			/* not a verdict: no key comes back (a re-trial's
			 * few samples are mostly its prompts' noise) */
			stop(e);
			continue;
		}
		if (!e->explore_on) {
			if (!reach)
				continue; /* no verdict in reach: re-trials */
			/* It just went quiet: its first probe waits one
			 * spacing. It was just left: that was a verdict
			 * "still slow" on several answers of its own, so the
			 * spacing starts at its longest, and the first probe
			 * waits EXPLORE_LEFT_WAIT of them, so that exploring
			 * does not undo the leaving (within 10 requests of a
			 * slowdown, whatever the rate: docs/policy-v2.md). */
			stop(e);
			e->explore_on = 1;
			e->explore_left = left_slow(c, e);
			e->explore_hdr = headers_slow(c, e, k);
			e->explore_sized = sized;
			uint64_t wait = spacing(c, e, v);
			if (e->explore_left) {
				e->explore_shift = EXPLORE_MAX_SHIFT;
				wait = spacing(c, e, v) * EXPLORE_LEFT_WAIT;
			}
			e->explore_from_ms = now_ms;
			e->explore_next = x->clock + wait;
			continue;
		}
		if (due == UINT32_MAX && x->clock >= e->explore_next)
			due = idx;
	}
	return due;
}

uint32_t explore_pick(struct core *c, const struct pick *k, uint64_t akey,
		      uint32_t warm_idx, uint64_t now_ms)
{
	struct explore *x = &c->explore;
	const struct view *v = k->v;
	if (c->p.explore_share <= 0 || v->n < 2)
		return UINT32_MAX;
	if (x->due == 0) {
		if (x->clock < x->scan_at)
			return UINT32_MAX;
		x->scan_at = x->clock + v->n;
		uint32_t d = scan(c, k, now_ms);
		if (d == UINT32_MAX)
			return UINT32_MAX;
		x->due = d + 1;
	}
	uint32_t idx = x->due - 1;
	struct pool_endpoint *e = &c->pool.ep[idx];
	/* One at a time: a still slow endpoint holds one request (until
	 * its answer, or until it is taken for lost; a stream's end may
	 * come much later). */
	if (!view_has(v, idx) || !e->explore_on || probe_out(e, now_ms) ||
	    e->br.state != CORE_BREAKER_CLOSED) {
		x->due = 0;
		return UINT32_MAX;
	}
	/* A warm key is a probe only of an endpoint the slow rules left,
	 * and only if it ranks before the key's own: a key it would have
	 * had, and back on it if it recovered. Moving a warm key costs its
	 * cache; an endpoint merely quiet (its sessions moved elsewhere by a
	 * fault, say) is probed with new keys and anonymous requests. */
	if (warm_idx != UINT32_MAX &&
	    (!e->explore_left || warm_idx == idx ||
	     !ranks_before(c, akey, idx, warm_idx)))
		return UINT32_MAX;
	x->due = 0;
	e->explore_next = x->clock + spacing(c, e, v);
	e->explore_sent_ms = now_ms > 0 ? now_ms : 1;
	e->explore_akey = akey;
	x->probes++;
	return idx;
}

uint32_t explore_reclaim(struct core *c, struct pick *k, uint64_t akey,
			 uint32_t warm_idx, uint64_t now_ms)
{
	struct explore *x = &c->explore;
	for (uint32_t j = 0; j < x->reclaim_n;) {
		uint32_t idx = x->reclaim[j];
		struct pool_endpoint *e = &c->pool.ep[idx];
		if (now_ms >= x->reclaim_until_ms[j] || !e->live ||
		    e->gen != x->reclaim_gen[j] || e->left_n != x->reclaim_left[j]) {
			x->reclaim_n--;
			x->reclaim[j] = x->reclaim[x->reclaim_n];
			x->reclaim_gen[j] = x->reclaim_gen[x->reclaim_n];
			x->reclaim_until_ms[j] = x->reclaim_until_ms[x->reclaim_n];
			x->reclaim_left[j] = x->reclaim_left[x->reclaim_n];
			continue;
		}
		j++;
		if (idx == warm_idx || !view_has(k->v, idx) ||
		    e->br.state != CORE_BREAKER_CLOSED)
			continue;
		if (ranks_before(c, akey, idx, warm_idx) && fast_enough(c, e, k) &&
		    within_bound(c, e, k))
			return idx;
	}
	return UINT32_MAX;
}

/* Keys warm elsewhere that rank idx first may come back to it until
 * now_ms + idle_reset (at least a minute), unless it is left again. */
static void reclaim_add(struct core *c, uint32_t idx, uint64_t now_ms)
{
	struct explore *x = &c->explore;
	uint64_t ms = c->p.idle_reset_ms > 60000 ? c->p.idle_reset_ms : 60000;
	uint32_t j = 0;
	while (j < x->reclaim_n && x->reclaim[j] != idx)
		j++;
	if (j == x->reclaim_n) {
		if (x->reclaim_n == EXPLORE_RECLAIM_MAX)
			return; /* others recovered first: no room */
		x->reclaim_n++;
	}
	x->reclaim[j] = idx;
	x->reclaim_gen[j] = c->pool.ep[idx].gen;
	x->reclaim_until_ms[j] = now_ms + ms;
	x->reclaim_left[j] = c->pool.ep[idx].left_n;
}

/* Whether e's end-to-end EWMA of signal sig is warm and over the
 * tolerance; *med gets the median in v it was judged by. */
static bool e2e_over(struct core *c, const struct pool_endpoint *e,
		     struct view *v, unsigned sig, double *med)
{
	if (!warm(c, e, sig))
		return false;
	*med = view_median_peer(c, v, sig);
	return e->ewma[sig] > slow_limit(c, sig, *med);
}

/* Whether e's end-to-end EWMA, in use and warm, still says slow: its
 * time to headers may be admission alone (headers before prefill, as
 * vLLM sends them), fast whatever its speed. That EWMA then moves with
 * the probes' own ends of streams, as any. */
static bool e2e_slow(struct core *c, const struct pool_endpoint *e,
		     struct view *v)
{
	if (c->p.score_by == CORE_SCORE_HEADERS)
		return false;
	double med;
	for (unsigned kind = 0; kind < CORE_KIND_COUNT; kind++)
		if (e2e_over(c, e, v, pool_sig(true, kind), &med))
			return true;
	return false;
}

/* e's EWMA of signal sig restarts from ms, counted as RETRIAL_SAMPLES
 * answers at most: the mean of its next answers until there are
 * 1/ewma_alpha. */
static void restart(struct core *c, struct pool_endpoint *e, uint32_t idx,
		    unsigned sig, double ms)
{
	e->ewma[sig] = ms;
	if (e->samples[sig] > RETRIAL_SAMPLES)
		e->samples[sig] = RETRIAL_SAMPLES;
	c->ewma_version[sig]++;
	order_fix(c, sig, idx);
}

/* Verdict "recovered": the stale EWMA gives way to the fast answers'
 * mean if it still says slow, and restarts from there as a re-trial's
 * does: the mean of its answers, RETRIAL_SAMPLES counted, until there
 * are 1/ewma_alpha. Two fast answers of a still slow endpoint (a short
 * prompt, a cache hit) are then undone by its next three slow ones, not
 * ten (anonymous requests: docs/policy-v2.md, section 26). The slow
 * rules' marks are cleared. e2e_stale: judged by its probes' headers
 * and ends (judge_ends), its end-to-end EWMA still the slowdown's
 * restarts from its peers' median. */
static void recovered(struct core *c, struct pool_endpoint *e, uint32_t idx,
		      unsigned sig, double limit, struct view *v,
		      bool e2e_stale, uint64_t now_ms)
{
	double mean = e->explore_sum / e->explore_fast;
	if (e->ewma[sig] > limit && mean < e->ewma[sig])
		restart(c, e, idx, sig, mean);
	if (e2e_stale) {
		/* judged on its headers, its end-to-end times still from the
		 * slowdown: they restart from their peers' median */
		for (unsigned kind = 0; kind < CORE_KIND_COUNT; kind++) {
			unsigned s = pool_sig(true, kind);
			double med;
			if (e2e_over(c, e, v, s, &med))
				restart(c, e, idx, s, med);
		}
	}
	if (e->explore_left)
		reclaim_add(c, idx, now_ms);
	e->suspect = POOL_FIT;
	e->retrials = 0;
	e->slow_run = 0;
	e->run_answers = 0;
	e->run_sq = 0;
	c->explore.recovered++;
	c->version++; /* its idle horizon and candidacy may move */
	stop(e);
}

/* Verdict "still slow": probed half as often, a new window. */
static void still_slow(struct pool_endpoint *e)
{
	if (e->explore_shift < (e->explore_sized ? EXPLORE_SIZED_MAX_SHIFT
						 : EXPLORE_MAX_SHIFT))
		e->explore_shift++;
	e->explore_fast = 0;
	e->explore_slow = 0;
	e->explore_sum = 0;
	e->explore_end_fast = 0;
	e->explore_end_slow = 0;
}

/* The limit e's answers to headers (signal sig) are judged by: the
 * tolerance over its peers' median in v, or over its own usual where that
 * is slower, as fast_enough allows. */
static double headers_limit(struct core *c, const struct pool_endpoint *e,
			    struct view *v, unsigned sig)
{
	double ref = view_median_peer(c, v, sig);
	if (e->base_n[sig] > 0 && e->base[sig] > ref)
		ref = e->base[sig];
	return slow_limit(c, sig, ref);
}

/* Whether e's probes answered fast on their headers (signal sig): enough
 * of them, and more than slow. */
static bool headers_fast(const struct core *c, const struct pool_endpoint *e,
			 unsigned sig, double limit)
{
	if (e->explore_sized)
		return e->explore_fast >= EXPLORE_VERDICT &&
		       e->explore_sum / e->explore_fast + sized_error(c, e) <= limit;
	return e->explore_fast >= verdict_answers(c, e, sig) &&
	       e->explore_fast > e->explore_slow;
}

/* Whether e's probes answered slow on their headers: more slow than
 * fast, or sized, their mean over the limit by EXPLORE_VERDICT standard
 * errors. */
static bool headers_slow_still(const struct core *c,
			       const struct pool_endpoint *e, double limit)
{
	if (e->explore_sized)
		return e->explore_fast > 0 &&
		       e->explore_sum / e->explore_fast - sized_error(c, e) > limit;
	return e->explore_slow > e->explore_fast;
}

/* e's probes were fast on their headers, its end-to-end EWMA is still
 * the slowdown's, and its headers showed the slowdown (explore_hdr): the
 * probes' own ends judge it, once one is in (explore_end). */
static void judge_ends(struct core *c, struct pool_endpoint *e, uint32_t idx,
		       unsigned sig, struct view *v, uint64_t now_ms)
{
	if (e->explore_end_slow >= e->explore_end_fast) {
		if (e->explore_end_slow > 0)
			still_slow(e);
		return; /* none in yet: the next end or answer judges */
	}
	recovered(c, e, idx, sig, headers_limit(c, e, v, sig), v, true, now_ms);
}

void explore_answer(struct core *c, struct pool_endpoint *e, uint32_t idx,
		    unsigned sig, double tr_ms, double sized_ms,
		    uint64_t start_ms, uint64_t now_ms)
{
	struct explore *x = &c->explore;
	if (x->last_ms != 0 && now_ms >= x->last_ms) {
		double gap = (double)(now_ms - x->last_ms);
		x->gap_ms += (x->gap_ms > 0 ? c->p.ewma_alpha : 1.0) * (gap - x->gap_ms);
	}
	x->last_ms = now_ms;
	if (!e->explore_on || start_ms < e->explore_from_ms)
		return; /* not explored, or sent before: old news */
	if (e->explore_sized && sized_ms < 0)
		return; /* its raw time says too little */
	struct view *v = view_get(c, MODEL_NONE, CORE_TIER_MAX, now_ms);
	double limit = headers_limit(c, e, v, sig);
	if (e->explore_sized) {
		/* all counted: their mean judges (headers_fast) */
		e->explore_sum += sized_ms;
		if (e->explore_fast < UINT8_MAX)
			e->explore_fast++;
	} else if (tr_ms <= limit) {
		e->explore_sum += tr_ms;
		e->explore_fast++;
	} else {
		e->explore_slow++;
	}
	bool fast = headers_fast(c, e, sig, limit);
	if (fast && e2e_slow(c, e, v)) {
		if (e->explore_hdr)
			judge_ends(c, e, idx, sig, v, now_ms);
		else
			still_slow(e);
	} else if (fast) {
		recovered(c, e, idx, sig, limit, v, false, now_ms);
	} else if (headers_slow_still(c, e, limit)) {
		still_slow(e);
	}
}

void explore_end(struct core *c, struct pool_endpoint *e, uint32_t idx,
		 unsigned kind, double ms_per_kib, uint64_t start_ms,
		 uint64_t now_ms)
{
	if (!e->explore_on || !e->explore_hdr || start_ms < e->explore_from_ms)
		return;
	struct view *v = view_get(c, MODEL_NONE, CORE_TIER_MAX, now_ms);
	unsigned sig = pool_sig(true, kind);
	if (ms_per_kib <= slow_limit(c, sig, view_median_peer(c, v, sig))) {
		if (e->explore_end_fast < UINT8_MAX)
			e->explore_end_fast++;
	} else if (e->explore_end_slow < UINT8_MAX) {
		e->explore_end_slow++;
	}
	unsigned hsig = pool_sig(false, kind);
	if (headers_fast(c, e, hsig, headers_limit(c, e, v, hsig)) &&
	    e2e_slow(c, e, v))
		judge_ends(c, e, idx, hsig, v, now_ms);
}

/* A check is slow only this much over its peers' median too: checks of a
 * few milliseconds (GET /health, a bare connect) say nothing of speed,
 * and their jitter is many times their median. */
#define CHECK_SLACK_MS 50u

/* Whether the check kept for pool slot i is a current one of an
 * endpoint in service at now_ms. */
static bool check_counts(const struct core *c, uint32_t i, uint64_t now_ms)
{
	if (i >= c->pool.end)
		return false;
	const struct pool_endpoint *p = &c->pool.ep[i];
	return p->live && !p->disabled && !p->drained &&
	       p->admin == CORE_ADMIN_ENABLED && explore_check_fresh(p, now_ms);
}

/* Keeps idx's check in the sorted set (explore.h, check_v): its old
 * value out, ms in (0: none). A full set first drops what no longer
 * counts (endpoints gone, out of service or silent); if it is still
 * full, idx's is left out (a median of that many is enough).
 * O(EXPLORE_CHECKS). */
static void check_keep(struct core *c, uint32_t idx, uint32_t ms, uint64_t now_ms)
{
	struct explore *x = &c->explore;
	uint32_t j = 0;
	while (j < x->check_n && x->check_v[j].idx != idx)
		j++;
	if (j < x->check_n) {
		memmove(&x->check_v[j], &x->check_v[j + 1],
			(x->check_n - j - 1) * sizeof(x->check_v[0]));
		x->check_n--;
	}
	if (ms == 0)
		return;
	if (x->check_n == EXPLORE_CHECKS) {
		uint32_t n = 0;
		for (j = 0; j < x->check_n; j++)
			if (check_counts(c, x->check_v[j].idx, now_ms))
				x->check_v[n++] = x->check_v[j];
		x->check_n = n;
		if (n == EXPLORE_CHECKS)
			return;
	}
	j = x->check_n;
	for (; j > 0 && x->check_v[j - 1].ms > ms; j--)
		x->check_v[j] = x->check_v[j - 1];
	x->check_v[j].ms = ms;
	x->check_v[j].idx = idx;
	x->check_n++;
}

/* Whether the check kept at j is one of idx's peers': another endpoint
 * of its tier (a failover tier may be another kind of server), current. */
static bool check_peer(const struct core *c, uint32_t j, uint32_t idx, uint64_t now_ms)
{
	uint32_t i = c->explore.check_v[j].idx;
	return i != idx && check_counts(c, i, now_ms) &&
	       c->pool.ep[i].tier == c->pool.ep[idx].tier;
}

/* The median of the current checks of idx's peers, or 0 when fewer than
 * two have one. O(EXPLORE_CHECKS). */
static double check_median(const struct core *c, uint32_t idx, uint64_t now_ms)
{
	const struct explore *x = &c->explore;
	uint32_t m = 0;
	for (uint32_t j = 0; j < x->check_n; j++)
		m += check_peer(c, j, idx, now_ms);
	if (m < 2)
		return 0;
	/* the (m - 1) / 2-th and m / 2-th of them, in order */
	uint32_t lo = (m - 1) / 2, hi = m / 2, k = 0;
	double a = 0, b = 0;
	for (uint32_t j = 0; j < x->check_n && k <= hi; j++) {
		if (!check_peer(c, j, idx, now_ms))
			continue;
		if (k == lo)
			a = x->check_v[j].ms;
		if (k == hi)
			b = x->check_v[j].ms;
		k++;
	}
	return (a + b) / 2;
}

void explore_check(struct core *c, uint32_t idx, uint32_t ms, uint64_t now_ms)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	if (ms == 0) {
		/* None (a failed check, or none any more): the last one holds
		 * until it is stale, then what it said ends with it. Without
		 * one, as on every poll of a fleet with no layer-7 check,
		 * there is nothing to end (check_ms 0 is never kept). */
		if (e->check_ms == 0 || explore_check_fresh(e, now_ms))
			return;
		e->check_ms = 0;
		e->check_slow = false;
		e->check_vouch = false;
		check_keep(c, idx, 0, now_ms);
		return;
	}
	e->check_ms = ms;
	e->check_at_ms = now_ms;
	check_keep(c, idx, ms, now_ms);
	double ref = check_median(c, idx, now_ms);
	if (ref <= 0)
		return;
	if (ms > c->p.sticky_tolerance * ref && ms > ref + CHECK_SLACK_MS) {
		e->check_slow = true;
		e->check_vouch = false;
		return;
	}
	if (!e->check_slow)
		return;
	/* Verdict "recovered": its samples are forgotten and it is re-tried
	 * at once, as after idle_reset, the wait of its next re-trial not
	 * doubled (the check judged it, not a re-trial); keys that rank it
	 * first, moved or placed elsewhere while it was slow, come back as
	 * after a probe's verdict. */
	e->check_slow = false;
	reclaim_add(c, idx, now_ms);
	c->explore.check_recovered++;
	c->version++;
	if (any_samples(e)) {
		uint8_t retrials = e->retrials;
		forget_samples(e);
		e->retrials = retrials;
		e->woke = 1;
	}
	e->check_vouch = true;
	stop(e);
}
