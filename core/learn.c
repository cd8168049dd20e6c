/* learn.c - what answers teach: feedback (core_observe), ends of streams (core_complete), the EWMA and key probes. */
#include "core_impl.h"
#include "stall.h"

#include <errno.h>
#include <math.h>

/* How long a 429 keeps an endpoint out: its Retry-After (< 0: none, then
 * rate_limit_cooldown), never past rate_limit_cooldown_max, so that no
 * value, however large, closes it for good (or overflows now + it). */
static uint64_t rate_limit_ms(const struct core *c, int64_t retry_after_ms)
{
	uint64_t ms = retry_after_ms >= 0 ? (uint64_t)retry_after_ms
					  : c->p.rate_limit_cooldown_ms;
	return ms < c->p.rate_limit_cooldown_max_ms ? ms
						    : c->p.rate_limit_cooldown_max_ms;
}

/* Whether akey -> idx (generation gen) is a decision still unconfirmed;
 * it is then confirmed and forgotten. */
static bool pending_take(struct core *c, uint64_t akey, uint32_t idx,
			 uint32_t gen)
{
	struct pending *s = &c->pending[akey & (CORE_PENDING_SLOTS - 1)];
	if (s->akey != akey || s->endpoint == 0)
		return false;
	if (s->endpoint != PENDING_ANY && (s->endpoint != idx + 1 || s->gen != gen))
		return false;
	*s = (struct pending){ 0 };
	return true;
}

/* The long-run EWMA (an endpoint's own history, its base) moves this many
 * times slower than its EWMA once past cold_start_samples (before, it is
 * their mean): with ewma_alpha 0.05, over about the last 800 samples. A
 * slowdown of 4x takes the EWMA past sticky_tolerance times the median and
 * the base within about 20 samples, while the base moves by 2-3%; from
 * then on the endpoint is left and its base does not learn.
 *
 * Downwards the base follows the EWMA at the EWMA's own pace (base_follow):
 * the first cold_start_samples answers of a fleet are mostly cold prompts
 * on empty caches, slower than what the endpoint answers once its cache is
 * warm, and a base anchored there hid a later slowdown from the own-past
 * test (fast_enough): on the second half of the Mooncake trace, a server
 * whose first answers were long cold prompts had a base of 1,250 ms and an
 * EWMA of 450-700 ms, and 5x slower (1,900-2,200 ms) it stayed under 2.5x
 * that base, kept 4.3% of the requests once slow (docs/policy-v2.md,
 * section 17). */
#define BASE_SLOWER 40

/* A queue gain sample's ceiling: an answer slower than a queue served one
 * by one explains is not the queue's (noise, or a slowdown), and a few of
 * them must not make one answer's evidence outweigh the first guess. */
#define QUEUE_GAIN_MAX 2.0

/* Answers whose decision found at least this many requests over the
 * endpoint's usual in flight teach its queue gain: half a request, so
 * that a server which rarely has two in flight still shows whether the
 * one ahead of a request delays it. */
#define QUEUE_GAIN_OVER 0.5

/* Adds x to the average *m of *n samples: their mean for the first
 * cold_start_samples, then an EWMA at alpha. */
static void mean_add(const struct core *c, double *m, uint32_t *n, double x,
		     double alpha)
{
	if (*n < UINT32_MAX)
		(*n)++;
	double a = *n <= c->p.cold_start_samples ? 1.0 / *n : alpha;
	*m += a * (x - *m);
}

/* The base of e's time to headers of signal sig, after a sample: back
 * towards the EWMA where the EWMA, past its start, is below it. */
static void base_follow(const struct core *c, struct pool_endpoint *e,
			unsigned sig)
{
	if (e->samples[sig] >= c->p.cold_start_samples &&
	    e->base_n[sig] > c->p.cold_start_samples && e->ewma[sig] < e->base[sig])
		e->base[sig] += c->p.ewma_alpha * (e->ewma[sig] - e->base[sig]);
}

/* Adds sample x (ms) to e's EWMA of signal sig. */
static void ewma_add(struct core *c, struct pool_endpoint *e, uint32_t idx,
		     unsigned sig, double x)
{
	bool was_warm = warm(c, e, sig);
	if (e->samples[sig] < UINT32_MAX)
		e->samples[sig]++;
	/* The mean of the samples until there are 1/alpha of them, then the
	 * EWMA: its start is not the first sample's alone. */
	double a = 1.0 / e->samples[sig];
	if (a < c->p.ewma_alpha)
		a = c->p.ewma_alpha;
	e->ewma[sig] += a * (x - e->ewma[sig]);
	/* The base of the time to headers: the same, BASE_SLOWER times
	 * slower, and not while the endpoint is left as slow or re-tried. */
	if (!pool_sig_e2e(sig) && e->suspect != POOL_LEFT && !e->retrials) {
		mean_add(c, &e->base[sig], &e->base_n[sig], x,
			 c->p.ewma_alpha / BASE_SLOWER);
		base_follow(c, e, sig);
	}
	/* What a health check vouched for, its own answers judge now. */
	if (e->check_vouch && e->samples[sig] >= c->p.cold_start_samples)
		e->check_vouch = false;
	if (warm(c, e, sig) != was_warm) {
		e->veteran |= (uint8_t)(1u << sig);
		c->version++; /* it just became warm: views count it */
	} else if (e->samples[sig] == 1) {
		c->version++; /* its idle horizon begins: views track it */
	}
	c->ewma_version[sig]++;
	order_fix(c, sig, idx);
}

/* Notes an answer from e at now_ms to a request that started at start_ms
 * (idleness is judged there, so that a long request on a quiet endpoint
 * does not look like a wake-up). Returns whether it ends an idle_reset
 * period: the endpoint starts cold again, and this first answer (a
 * scaled-to-zero backend waking up) says nothing; nor does the end-to-end
 * time of a request that started before it (awake_ms). */
static bool touch(struct core *c, struct pool_endpoint *e, uint64_t start_ms,
		  uint64_t now_ms)
{
	/* Samples forgotten by a decision count as idleness too: the wait
	 * that forgetting doubled was measured before. */
	bool after_idle = e->woke || idle(c, e, start_ms);
	e->woke = 0;
	if (after_idle) {
		e->awake_ms = now_ms;
		if (any_samples(e)) {
			forget_samples(e);
			c->version++;
		}
	}
	e->seen = true;
	e->last_seen_ms = now_ms;
	return after_idle;
}

/* What one response teaches (core_observe's rules), outcome o already
 * classed and counted. */
struct lesson {
	int status;
	int64_t tr_ms;
	int64_t retry_after_ms;
	bool stream;
	bool has_akey;
	uint64_t akey;
	int model;                 /* pool model id, -1 none */
	bool after_idle;
	/* A success may add akey's entry (feedback: HAProxy echoes the akey
	 * warmlane set). A log line may not: whoever can write to the log
	 * socket writes any akey, and 46k forged lines grew the map (and
	 * RSS) by 17 MB. It only refreshes an entry that already points to
	 * this endpoint, or confirms a decision warmlane made (struct
	 * pending). */
	bool may_insert;
	bool provisional;          /* a success the breaker counts at the end */
	int64_t queued;            /* in flight at its decision; < 0: unknown */
	uint32_t size_kib;         /* its request's size (struct asked); 0: unknown */
	bool hit;                  /* its decision a warm hit (struct asked) */
	uint16_t turn;             /* its request's turn (struct asked); 0: unknown */
	uint64_t start_ms;         /* the request's start (stall.h) */
	uint64_t headers_ms;       /* its response headers */
};

/* What the decision akey -> idx noted (struct asked) into l: the in-flight
 * count it found, its request's size and turn, whether it was a warm hit;
 * forgotten once read. Queued -1 (the rest 0) when its slot holds another
 * decision. */
static void asked_take(struct core *c, uint64_t akey, uint32_t idx,
		       struct lesson *l)
{
	struct asked *s = &c->asked[akey & (CORE_PENDING_SLOTS - 1)];
	if (s->akey != akey || s->endpoint != idx + 1)
		return;
	l->queued = s->in_flight;
	l->size_kib = s->size_kib;
	l->hit = s->hit;
	l->turn = s->turn;
	*s = (struct asked){ 0 };
}

/* The size class of a prompt of kib KiB (> 0): log2 of its size, the
 * last class holding every longer one (struct core, size_f). */
static unsigned size_class(uint32_t kib)
{
	unsigned b = 0;
	while (kib > 1 && b + 1 < CORE_SIZE_CLASSES) {
		kib >>= 1;
		b++;
	}
	return b;
}

/* An answer tr (time to headers) to a keyed request of kib KiB (0:
 * unknown), hit or placed, sized: divided by what the fit endpoints
 * answer to requests of its class (size and kind of decision) over their
 * mean answer (struct core, size_f). A few sized answers estimate the
 * mean of many raw ones, as an EWMA is, without the prompts' sizes in
 * their spread. < 0: not known (no size, or its class not learnt, or a
 * pool of two). Sizing divides out a prompt's size, not the fleet's
 * queue: in a pool of two, the endpoint left as slow sends its whole load
 * to the other, whose answers then carry that queue, and the left one's
 * idle probes, sized, look within tolerance while it is 5x slower
 * (docs/policy-v2.md, sections 38 and 40). */
static double sized(const struct core *c, double tr, uint32_t kib, bool hit)
{
	if (kib == 0 || c->pool.live < 3)
		return -1;
	unsigned b = size_class(kib);
	if (c->size_n[hit][b] < c->p.cold_start_samples || c->size_f[hit][b] <= 0)
		return -1;
	return tr / c->size_f[hit][b];
}

/* A re-trial's answer tr of signal sig (e was warm once, and idle_reset
 * forgot its samples: fewer than cold_start_samples since), sized s, as
 * it counts in e's EWMA: routing alone, sized where known (with the
 * default profile its keyed recovery came from re-trials that passed by
 * chance while the server was still slow). A re-trial's EWMA is the mean
 * of a few answers, and one long cold prompt (5.5 s for 98,652 tokens,
 * as fast per token as its peers) carried a recovered server's mean over
 * the limit alone, so that it was left again and its next re-trial
 * waited twice as long. docs/policy-v2.md, section 37, has what was tried
 * before it. */
static double retrial_sample(const struct core *c,
			     const struct pool_endpoint *e, unsigned sig,
			     double tr, double s)
{
	if (!c->alone || !((e->veteran >> sig) & 1u) ||
	    e->samples[sig] >= c->p.cold_start_samples || s < 0)
		return tr;
	return s;
}

/* A success's time to headers tr for a prompt of kib KiB (0: unknown),
 * sized s, from e: from an endpoint judged fit and not re-tried, the
 * fleet's mean answer, the answer over it in its class (sized), and the
 * sized answers' spread. */
static void size_note(struct core *c, const struct pool_endpoint *e,
		      double tr, uint32_t kib, bool hit, double s)
{
	if (kib == 0 || e->suspect != POOL_FIT || e->retrials)
		return;
	if (c->tr_n >= c->p.cold_start_samples && c->tr_avg > 0) {
		unsigned b = size_class(kib);
		mean_add(c, &c->size_f[hit][b], &c->size_n[hit][b],
			 tr / c->tr_avg, c->p.ewma_alpha);
		if (s >= 0)
			mean_add(c, &c->sized_sq, &c->sized_n,
				 (s - c->tr_avg) * (s - c->tr_avg),
				 c->p.ewma_alpha);
	}
	mean_add(c, &c->tr_avg, &c->tr_n, tr, c->p.ewma_alpha);
}

/* Adds squared distance d2 to e's spread of kind. */
static void spread_add(struct core *c, struct pool_endpoint *e, unsigned kind,
		       double d2)
{
	mean_add(c, &e->spread[kind], &e->spread_n[kind], d2, c->p.ewma_alpha);
}

/* Ends e's run without leaving: its slow answers were the endpoint's
 * usual irregularity after all, and teach the spread. */
static void run_end(struct core *c, struct pool_endpoint *e, unsigned kind)
{
	if (e->slow_run > 0 && e->slow_run < c->p.slow_run) {
		double d2 = e->run_sq / e->slow_run;
		for (unsigned i = 0; i < e->slow_run; i++)
			spread_add(c, e, kind, d2);
	}
	e->slow_run = 0;
	e->run_sq = 0;
}

/* Teaches e's queue gain (how much of a queue's wait shows in its times
 * to headers; pool_add's first guess, 1, counts as one answer) an answer
 * of tr against base b whose decision found q in flight, QUEUE_GAIN_OVER
 * or more over the qm its decisions usually find: a server that runs its
 * requests one by one answers it in about b x (1 + extra), extra =
 * (q - qm) / (1 + qm), and shows 1; one that runs them at once answers
 * it in about b and shows 0. */
static void queue_gain_add(struct core *c, struct pool_endpoint *e,
			   double tr, double b, double q, double qm)
{
	if (q < qm + QUEUE_GAIN_OVER || b <= 0)
		return;
	double g = (tr / b - 1) * (1 + qm) / (q - qm);
	g = g < 0 ? 0 : g > QUEUE_GAIN_MAX ? QUEUE_GAIN_MAX : g;
	mean_add(c, &e->queue_gain, &e->queue_gain_n, g, c->p.ewma_alpha);
}

/* The fast slowdown detector beside the EWMA (core_params.slow_run): a
 * success's time to headers tr, with the in-flight count q its decision
 * found, against e's base b (its usual time) and the candidates' median.
 * An answer is slow when tr > sticky_tolerance x b and x the median, and
 * its queue does not explain it: tr / (1 + g x (q - qm) / (1 + qm)) is
 * still over the tolerance, qm being the in-flight count e's decisions
 * usually find and g its queue gain. With g 1, a request behind q others
 * of a server that served them one by one, the most a queue can explain;
 * a server that runs its requests at once, as the e2e fake servers do,
 * shows g near 0 on the answers its queue did not slow, and a queue its
 * own slowness built (its clients' requests piling up on it) then
 * explains nothing (docs/policy-v2.md, section 25). Nor does a queue
 * whose wait does not show: within a run, an answer no slower than the
 * run's slowest that found no queue (run_bare) by half what its queue
 * would add to it (which also covers an endpoint whose gain no answer
 * taught yet).
 * slow_run slow answers, within 2 x slow_run answers, and e is left as
 * slow (fast_enough) until idle_reset re-tries it; an answer within the
 * tolerance ends a run, one that only its queue explains neither counts
 * nor ends it: under load tr is mostly queue wait. The run also needs
 * answers regular enough for one of them to say something: the spread
 * (root mean square distance to b) under b; an endpoint whose times to
 * headers range from a cache hit's to a long cold prompt's is judged by
 * the EWMA alone. Answers in a run, or while e is left, do not teach the
 * spread; a run that ends without leaving teaches it its answers
 * (run_end). docs/policy-v2.md, section 2, has the measurements. */
static void queue_judge(struct core *c, struct pool_endpoint *e,
			const struct lesson *l, uint64_t now_ms)
{
	if (c->p.slow_run == 0 || l->queued < 0 || l->tr_ms < 0 || l->after_idle)
		return;
	unsigned kind = l->stream ? CORE_KIND_STREAM : CORE_KIND_PLAIN;
	unsigned sig = pool_sig(false, kind);
	double q = (double)l->queued, qm = e->queue_mean;
	e->queue_mean += c->p.ewma_alpha * (q - qm);
	if (e->base_n[sig] < c->p.cold_start_samples ||
	    e->suspect == POOL_LEFT || e->slow_run >= c->p.slow_run)
		return;
	double tr = (double)l->tr_ms, b = e->base[sig];
	double d2 = (tr - b) * (tr - b);
	/* over the tolerance of its usual range, not of its mean: the
	 * jitter of a server answering in 2 ms is not a slowdown */
	double limit = c->p.sticky_tolerance * (b + sqrt(e->spread[kind]));
	if (e->slow_run > 0 && ++e->run_answers >= 2 * c->p.slow_run)
		run_end(c, e, kind); /* too few slow answers: no run */
	double extra = q > qm ? (q - qm) / (1 + qm) : 0;
	if (tr <= limit) {
		queue_gain_add(c, e, tr, b, q, qm);
		run_end(c, e, kind);
		spread_add(c, e, kind, d2);
		return;
	}
	double g = fmin(e->queue_gain, 1);
	if (extra > 0 && tr <= limit * (1 + g * extra) &&
	    !(e->slow_run > 0 && tr <= e->run_bare * (1 + g * extra / 2))) {
		queue_gain_add(c, e, tr, b, q, qm);
		return; /* its queue may explain it */
	}
	struct view *v = view_get(c, MODEL_NONE, CORE_TIER_MAX, now_ms);
	if (e->spread_n[kind] < c->p.cold_start_samples ||
	    sqrt(e->spread[kind]) > b ||
	    tr <= slow_limit(c, sig, view_median_peer(c, v, sig))) {
		/* too irregular for one answer to say much, or its peers
		 * are as slow (load, not e) */
		run_end(c, e, kind);
		spread_add(c, e, kind, d2);
		return;
	}
	if (stall_note(e, l->start_ms, l->headers_ms, tr - b,
		       sqrt(e->spread[kind])) < 2 && e->slow_run + 1u >= c->p.slow_run)
		return; /* one pause may explain them all: a stall */
	if (e->slow_run == 0) {
		e->run_answers = 0;
		e->run_bare = 0;
	}
	if (extra == 0 && tr > e->run_bare)
		e->run_bare = tr;
	e->slow_run++;
	e->run_sq += d2;
}

/* With failover tiers, before akey's success on idx is recorded: a key
 * whose entry is on a better tier than idx's is failing over, and that
 * endpoint, where its cache is, becomes its home; a key served on again
 * where its entry is keeps its home alive. Decide's step 3 sends it home
 * when the worse tier no longer holds it (tier_stays). */
static void homes_note(struct core *c, uint64_t akey, uint32_t idx,
		       const struct pool_endpoint *e, uint64_t now_ms)
{
	uint32_t ep, gen;
	uint64_t last;
	if (e->tier == 1 || !affinity_peek(&c->aff, akey, now_ms, &ep, &gen, &last))
		return;
	if (ep == idx) {
		if (affinity_peek(&c->homes, akey, now_ms, &ep, &gen, &last))
			affinity_refresh(&c->homes, akey, ep, gen, now_ms);
		return;
	}
	const struct pool_endpoint *h = pool_get(&c->pool, (int)ep);
	if (h != NULL && h->gen == gen && h->tier < e->tier)
		affinity_put(&c->homes, akey, ep, gen, now_ms, 0);
}

/* Before akey's success on idx is recorded: a key served by its twin
 * (decide.c, step 3c) swaps the two, the endpoint its entry named
 * becoming its twin; both stay warm. */
static void twins_note(struct core *c, uint64_t akey, uint32_t idx,
		       uint64_t now_ms)
{
	uint32_t ep, gen, tw, tw_gen;
	uint64_t last;
	if (affinity_peek(&c->twins, akey, now_ms, &tw, &tw_gen, &last) &&
	    tw == idx && affinity_peek(&c->aff, akey, now_ms, &ep, &gen, &last) &&
	    ep != idx)
		affinity_put(&c->twins, akey, ep, gen, now_ms, 0);
}

/* akey's request of turn turn succeeded on idx: its entry (and, tiered,
 * its home; hot, its twin). */
static void remember(struct core *c, uint64_t akey, uint32_t idx,
		     const struct pool_endpoint *e, uint16_t turn, uint64_t now_ms)
{
	if (c->tiered)
		homes_note(c, akey, idx, e, now_ms);
	if (c->twins.used > 0)
		twins_note(c, akey, idx, now_ms);
	affinity_put(&c->aff, akey, idx, e->gen, now_ms, turn);
}

static void learn(struct core *c, struct pool_endpoint *e, uint32_t idx,
		  enum core_outcome o, const struct lesson *l, uint64_t now_ms)
{
	uint8_t state = e->br.state;

	explore_heard(e, l->start_ms, l->has_akey, l->akey);
	switch (o) {
	case CORE_OUTCOME_SUCCESS:
		if (!l->provisional)
			breaker_success(&e->br, &c->p, now_ms);
		else
			breaker_heard(&e->br);
		queue_judge(c, e, l, now_ms);
		if (l->tr_ms >= 0 && !l->after_idle) {
			unsigned sig = pool_sig(false, l->stream);
			double tr = (double)l->tr_ms;
			double s = sized(c, tr, l->size_kib, l->hit);
			ewma_add(c, e, idx, sig, retrial_sample(c, e, sig, tr, s));
			size_note(c, e, tr, l->size_kib, l->hit, s);
			if (e->suspect != POOL_LEFT && !e->retrials)
				slowstart_add(&e->first[sig], tr,
					      c->p.cold_start_samples,
					      c->p.ewma_alpha / BASE_SLOWER);
			explore_answer(c, e, idx, sig, tr, s, l->start_ms,
				       now_ms);
		}
		if (l->has_akey && l->may_insert)
			remember(c, l->akey, idx, e, l->turn, now_ms);
		else if (l->has_akey &&
			 affinity_refresh(&c->aff, l->akey, idx, e->gen, now_ms)) {
			if (c->tiered)
				homes_note(c, l->akey, idx, e, now_ms);
		} else if (l->has_akey && pending_take(c, l->akey, idx, e->gen))
			/* a line confirming a decision of warmlane's own */
			remember(c, l->akey, idx, e, l->turn, now_ms);
		if (e->has_mismatch && l->model >= 0) {
			pool_note_served(e, l->model);
			c->version++;
		}
		break;
	case CORE_OUTCOME_NEUTRAL:
		breaker_neutral(&e->br);
		if (l->status == 404 && l->model >= 0) {
			pool_note_404(e, l->model, c->p.model_mismatch_404s,
				      c->p.dead_key_retry_ms, now_ms);
			c->version++;
		}
		break;
	case CORE_OUTCOME_FAILURE:
		breaker_failure(&e->br, &c->p, now_ms);
		if (l->has_akey)
			affinity_remove(&c->aff, l->akey, idx);
		break;
	case CORE_OUTCOME_RATE_LIMITED:
		breaker_rate_limited(&e->br, rate_limit_ms(c, l->retry_after_ms),
				     now_ms);
		c->version++; /* even OPEN to OPEN: the cooldown moved */
		break;
	case CORE_OUTCOME_KEY_DEAD:
		/* The client shaped the request (path, model, headers) that
		 * the upstream refused: a suspicion only, for the agent's own
		 * probe to settle (core_key_probe_next). A keyless endpoint's
		 * 401/403 judged the client's own credential. */
		breaker_neutral(&e->br);
		if (e->key_id != NULL)
			e->key_suspect = true;
		break;
	default:
		break;
	}
	/* Any breaker change, or a probe slot freed or taken. */
	if (e->br.state != state || state == CORE_BREAKER_HALF_OPEN)
		c->version++;
}

int core_observe(struct core *c, const struct core_feedback *fb,
		 uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, fb->endpoint);
	if (e == NULL)
		return -ENOENT;
	enum core_outcome o = core_status_class(fb->status);
	if (o == CORE_OUTCOME_INVALID)
		return -EINVAL;
	c->outcomes[o]++;
	e->outcomes[o]++;
	e->at_headers = true;
	struct lesson l = {
		.status = fb->status, .tr_ms = fb->tr_ms,
		.retry_after_ms = fb->retry_after_ms, .stream = fb->stream,
		.has_akey = fb->has_akey, .akey = fb->akey,
		.model = fb->model.len > 0 ?
			 pool_model_find(&c->pool, fb->model.ptr, fb->model.len) : -1,
		.after_idle = touch(c, e, now_ms, now_ms),
		.may_insert = true,
		.provisional = o == CORE_OUTCOME_SUCCESS && fb->stream &&
			       fb->end_follows,
		.queued = -1,
		.start_ms = fb->tr_ms >= 0 && (uint64_t)fb->tr_ms <= now_ms ?
			    now_ms - (uint64_t)fb->tr_ms : now_ms,
		.headers_ms = now_ms,
	};
	if (fb->has_akey)
		asked_take(c, fb->akey, (uint32_t)fb->endpoint, &l);
	if (l.provisional && e->provisional < UINT32_MAX)
		e->provisional++;
	learn(c, e, (uint32_t)fb->endpoint, o, &l, now_ms);
	return 0;
}

int core_complete(struct core *c, const struct core_completion *cc,
		  uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, cc->endpoint);
	if (e == NULL)
		return -ENOENT;
	if ((unsigned)cc->end >= CORE_END_COUNT)
		return -EINVAL;
	enum core_outcome o = cc->status == -1 ? CORE_OUTCOME_NEUTRAL :
			      core_status_class(cc->status);
	if (o == CORE_OUTCOME_INVALID)
		return -EINVAL;
	uint32_t idx = (uint32_t)cc->endpoint;
	if (!cc->shadow)
		in_flight_step(c, idx, -1);
	c->completions[cc->end]++;
	e->completions[cc->end]++;

	bool cut = cc->end == CORE_END_SERVER_CUT ||
		   cc->end == CORE_END_SERVER_FAIL;
	uint64_t start = cc->total_ms >= 0 && (uint64_t)cc->total_ms <= now_ms ?
			 now_ms - (uint64_t)cc->total_ms : now_ms;
	struct lesson l = {
		.status = cc->status, .tr_ms = cc->tr_ms,
		.retry_after_ms = cc->has_retry_after && cc->retry_after_ms >= 0 ?
				  cc->retry_after_ms : -1,
		.stream = cc->stream, .has_akey = cc->has_akey, .akey = cc->akey,
		.model = -1,
		.queued = -1,
		.start_ms = cc->total_ms < 0 && cc->tr_ms >= 0 &&
			    (uint64_t)cc->tr_ms <= now_ms ?
			    now_ms - (uint64_t)cc->tr_ms : start,
		.headers_ms = cc->tr_ms >= 0 && start + (uint64_t)cc->tr_ms < now_ms ?
			      start + (uint64_t)cc->tr_ms : now_ms,
	};
	/* Without feedback (HAProxy 2.6) the line is the answer. */
	if (!cc->feedback_seen && cc->has_akey)
		asked_take(c, cc->akey, (uint32_t)cc->endpoint, &l);
	if (cc->feedback_seen) {
		/* core_observe took the status (and the idle check, at the
		 * headers): only the end is news, and only when the status
		 * was not already a failure (a 5xx whose body is then cut is
		 * one failed request). A long stream is activity, not
		 * idleness. */
		e->seen = true;
		e->last_seen_ms = now_ms;
		/* A provisional success (core_feedback.end_follows) is
		 * settled: a cut fails it, a normal end makes it a success
		 * for the breaker, a client's abort frees its probe slot. */
		bool pending = cc->stream && o == CORE_OUTCOME_SUCCESS &&
			       e->provisional > 0;
		if (pending)
			e->provisional--;
		if (cut && o != CORE_OUTCOME_FAILURE) {
			learn(c, e, idx, CORE_OUTCOME_FAILURE, &l, now_ms);
		} else if (pending) {
			uint8_t state = e->br.state;
			if (cc->end == CORE_END_COMPLETE)
				breaker_success(&e->br, &c->p, now_ms);
			else
				breaker_neutral(&e->br);
			if (e->br.state != state || state == CORE_BREAKER_HALF_OPEN)
				c->version++;
		}
	} else {
		l.after_idle = touch(c, e, start, now_ms);
		enum core_outcome t = o;
		if (cut)
			t = CORE_OUTCOME_FAILURE;
		else if (cc->end == CORE_END_CLIENT_ABORT &&
			 t == CORE_OUTCOME_FAILURE)
			t = CORE_OUTCOME_NEUTRAL;
		if (cut || cc->status != -1) {
			c->outcomes[t]++;
			e->outcomes[t]++;
		}
		/* Status -1 without a cut: no response to learn from, but a
		 * HALF_OPEN probe slot is freed (neutral). */
		learn(c, e, idx, t, &l, now_ms);
	}
	/* Status -1 is neutral: only a known success is timed; not the
	 * wake-up, told here or earlier by feedback (awake_ms). */
	if (cc->end == CORE_END_COMPLETE && o == CORE_OUTCOME_SUCCESS &&
	    cc->total_ms >= 0 && !l.after_idle && start >= e->awake_ms) {
		double kib = (double)(cc->bytes > E2E_MIN_BYTES ? cc->bytes : E2E_MIN_BYTES) / 1024;
		ewma_add(c, e, idx, pool_sig(true, cc->stream),
			 (double)cc->total_ms / kib);
		explore_end(c, e, idx, cc->stream, (double)cc->total_ms / kib,
			    start, now_ms);
	}
	return 0;
}

/* ---- upstream key probes ------------------------------------------------ */

/* Whether e is due for a probe at now_ms (core_key_probe_next). */
static inline bool probe_due(const struct pool_endpoint *e, uint64_t now_ms)
{
	if (!e->live || e->key_id == NULL || e->key_probing ||
	    now_ms < e->probe_after_ms)
		return false;
	return e->key_suspect || (e->key_dead && now_ms >= e->dead_until_ms);
}

int core_key_probe_next(struct core *c, uint64_t now_ms)
{
	struct pool *pool = &c->pool;
	if (!c->p.key_probe || pool->end == 0)
		return -1;
	uint32_t start = c->probe_cursor < pool->end ? c->probe_cursor : 0;
	for (uint32_t n = 0; n < pool->end; n++) {
		uint32_t i = (start + n) % pool->end;
		struct pool_endpoint *e = &pool->ep[i];
		if (!probe_due(e, now_ms))
			continue;
		/* The rate limit counts from the start: whatever callers
		 * send, one probe per key per interval. */
		e->key_probing = true;
		e->key_suspect = false;
		e->probe_after_ms = now_ms + c->p.key_probe_interval_ms;
		c->probe_cursor = i + 1;
		return (int)i;
	}
	return -1;
}

int core_key_probe_result(struct core *c, int idx, enum core_probe result,
			  uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	if (e->key_id == NULL || (unsigned)result >= CORE_PROBE_COUNT)
		return -EINVAL;
	e->key_probing = false;
	e->probes[result]++;
	switch (result) {
	case CORE_PROBE_ACCEPTED:
		/* 401/403s that came while it was out were answered by it. */
		e->key_suspect = false;
		if (e->key_dead) {
			e->key_dead = 0;
			e->dead_until_ms = 0;
			c->version++;
		}
		break;
	case CORE_PROBE_REFUSED:
		e->key_suspect = false;
		c->version++; /* excluded, or moved in the fallback order */
		e->key_dead = 1;
		e->dead_until_ms = now_ms + c->p.dead_key_retry_ms;
		e->key_failed_ms = now_ms;
		break;
	default:
		/* Nothing learnt: a suspect stays one (probed again after
		 * the interval), a dead key stays dead. */
		if (!e->key_dead)
			e->key_suspect = true;
		break;
	}
	return 0;
}
