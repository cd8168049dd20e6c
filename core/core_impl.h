/* core_impl.h - what the core's files share: struct core, its cached views, and the endpoint state every step reads. */
#ifndef WARMLANE_CORE_IMPL_H
#define WARMLANE_CORE_IMPL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "affinity.h"
#include "breaker.h"
#include "core.h"
#include "explore.h"
#include "hot.h"
#include "owned.h"
#include "pool.h"
#include "rendezvous.h"
#include "routers.h"
#include "tier.h"
#include "trace.h"

/* Candidate sets cached: one per model in use; with failover tiers, a
 * model's decisions restricted to its better tiers use one more (2 models
 * then fit). With 8, bench-core's untiered decisions were 3-7% slower
 * at 64-512 endpoints. */
#define VIEW_SLOTS 4
#define MODEL_NONE (-1) /* the request names no model */
#define MODEL_ANY  (-2) /* a model no endpoint lists: all-model ones only */

/* The candidate set of one model and its aggregates. Built by a pass over
 * the pool, then reused until something that decides candidacy changes
 * (core.version) or a time-based exclusion ends (horizon_ms): a warm hit
 * then costs O(1) plus, when some EWMA changed, half a walk of the EWMA
 * order, instead of a pass over every endpoint. */
struct view {
	bool valid;
	int model;
	/* The worst tier among the candidates (key with model): CORE_TIER_MAX
	 * for every tier, less for the set core_decide restricts to. */
	uint8_t tier_max;
	uint8_t tier_lo, tier_hi; /* best and worst tier serving the model */
	uint64_t version;        /* core.version when built */
	uint64_t horizon_ms;     /* rebuild at or after this time */
	uint64_t used;           /* for replacement */
	uint32_t n;              /* candidates */
	uint32_t serving;        /* endpoints serving the model */
	uint32_t fallback;       /* breaker-only exclusion reopening first */
	uint32_t key_fallback;   /* dead key refused least recently */
	uint32_t n_warm[POOL_SIGNALS];
	double total_w;
	uint64_t total_if;       /* kept current by set_in_flight */
	double total_load_avg;   /* the candidates' load_avg and rate_avg, */
	double total_rate_avg;   /* kept current by load_note (core.c) */
	uint64_t median_version[POOL_SIGNALS];
	double median[POOL_SIGNALS];
	double median_peer[POOL_SIGNALS]; /* view_median_peer */
	uint32_t *cand;          /* n slot indices */
	uint64_t *member;        /* bitset over slots */
	struct tier_sums tiers;  /* the candidates by tier (in flight kept
				  * current by set_in_flight) */
	struct tier_state tstate; /* tier_max CORE_TIER_MAX: kept across
				   * rebuilds of the same model */
};

/* A decision of warmlane's that no feedback has confirmed yet. A success
 * in a log line inserts an affinity entry only when it names one of these
 * (same akey, endpoint and generation): whoever can write to the log
 * socket chooses akey, so a line alone must never grow the map, but on
 * HAProxy 2.6 (haproxy-2.6.cfg sends no feedback message) and whenever a
 * feedback exchange timed out, the log line is the only word of a
 * success. 16384 slots (256 KiB) hold far more decisions than are in
 * flight at once; a slot lost to a later decision costs that session one
 * more turn before it is homed. */
#define CORE_PENDING_SLOTS 16384u
struct pending {
	uint64_t akey;
	uint32_t endpoint;       /* index + 1; 0: empty; PENDING_ANY */
	uint32_t gen;
};

/* A shadow decision (core_decision_shadow): HAProxy picks the endpoint,
 * so a line from any endpoint confirms it. */
#define PENDING_ANY UINT32_MAX

/* The in-flight count of the endpoint a keyed decision chose, as it
 * found it, for that answer's time to be judged against its queue
 * (queue_judge), and the request's size and kind of decision, for that
 * answer to be sized (learn.c, sized). Direct-mapped by akey like
 * struct pending, a later decision overwriting an earlier one in its slot
 * (that answer is then not judged). */
struct asked {
	uint64_t akey;
	uint32_t endpoint;       /* index + 1; 0: empty */
	uint32_t in_flight;
	uint32_t size_kib;       /* core_request.size_kib */
	bool hit;                /* to the key's warm entry (affinity) */
	uint16_t turn;           /* core_request.turn (0: unknown). A new
				  * key's entry starts with it */
};

/* Size classes of prompts: 1 KiB or less, 2, 4, ... and 1 MiB or more. */
#define CORE_SIZE_CLASSES 11u

struct core {
	struct core_params p;
	double log_tolerance; /* log(p.sticky_tolerance): the hit path's */
	struct pool pool;
	struct affinity aff;
	/* With failover tiers, where a key was in a better tier before a
	 * worse one carried it: the endpoint that holds its cache when it
	 * goes back (learn.c, homes_note; decide.c, step 3). A smaller map:
	 * only keys that failed over have an entry. */
	struct affinity homes;
	/* A hot key's second warm endpoint, its twin (policy.hot_share;
	 * decide.c, step 3c; learn.c, twins_note): the endpoint it was on
	 * before the one its entry names. TWINS_CAP entries: a key is hot
	 * at a share of the traffic, so few are at once. */
	struct affinity twins;
	struct hot hot;          /* each key's share of the decisions */
	uint64_t twin_sends;     /* core_stats.twin_sends */
	uint64_t twin_spreads;   /* core_stats.twin_spreads */
	uint64_t version;        /* bumped by anything that changes candidacy */
	uint64_t map_rebuilds;   /* core_set_params rebuilt the map: walks restart */
	/* Bumped by every change of an EWMA of that signal (pool_sig): a
	 * cached median is stale only when its own signal moved, so the log
	 * input's end-to-end samples leave the headers median cached. */
	uint64_t ewma_version[POOL_SIGNALS];
	uint64_t view_clock;
	/* Per-decision scratch and views, sized to the pool's slots. */
	uint32_t scratch_cap;
	struct rdv_item *items;
	struct view views[VIEW_SLOTS];
	struct view art_view;    /* one decision's candidates of one artefact */
	/* Slots sorted by EWMA, per signal (pool_sig), kept so by observe
	 * and complete: the median of the candidates is then a partial walk,
	 * not a selection. */
	uint32_t *order[POOL_SIGNALS];
	uint32_t *rank[POOL_SIGNALS]; /* position of a slot in order */
	/* The EWMA of the slot at each position of order: what order_fix
	 * compares and view_median walks, without reading the neighbours'
	 * endpoints (a cache line each at 64 endpoints). Every EWMA written
	 * is followed by order_fix of its slot, which keeps it current. */
	double *order_ewma[POOL_SIGNALS];
	uint32_t order_n;
	uint64_t decisions[CORE_REASON_COUNT];
	uint64_t tier_decisions[CORE_TIER_MAX];
	/* The best tier serving the model of the decision under way: commit
	 * names a choice in a worse one `failover`. */
	uint8_t decide_tier_lo;
	uint32_t decide_kib;     /* and its size (core_request.size_kib) */
	uint16_t decide_turn;    /* and its turn (struct asked) */
	bool decide_window;      /* its warm entry a shorter window's
				  * (decide.c, prior_window) */
	/* Bit t: some live endpoint is in tier t (tier_recount). With one
	 * bit set, views skip every tier sum: an untiered pool's decision
	 * costs what it did before tiers. */
	uint16_t tier_mask;
	bool tiered;             /* more than one bit in tier_mask */
	uint64_t outcomes[CORE_OUTCOME_COUNT];
	uint64_t completions[CORE_END_COUNT];
	uint64_t hints[CORE_HINT_COUNT];
	uint64_t hints_own;      /* core_stats.hints_own */
	uint32_t probe_cursor;   /* where core_key_probe_next goes on */
	/* Decisions a log line may confirm (learn): direct-mapped by akey,
	 * a later decision overwriting an earlier one in its slot. */
	struct pending pending[CORE_PENDING_SLOTS];
	struct asked asked[CORE_PENDING_SLOTS];
	/* The fit endpoints' mean time to headers (an EWMA at ewma_alpha of
	 * their answers to keyed requests of known size), and per class of
	 * request, kind of decision (0 placed, 1 a warm hit) and size (log2
	 * of its KiB), the mean of such answers over it: how a re-trial's
	 * answers count (learn.c, retrial_sample). A class's factor holds
	 * while the whole fleet slows down or speeds up with its load. */
	double tr_avg;
	uint32_t tr_n;
	double size_f[2][CORE_SIZE_CLASSES];
	uint32_t size_n[2][CORE_SIZE_CLASSES];
	/* The mean square distance of those answers, sized, to tr_avg: how
	 * many sized answers a probe's verdict needs (explore.c). */
	double sized_sq;
	uint32_t sized_n;
	struct owned_clock owned; /* the scale of pool_endpoint.owned */
	struct explore explore;   /* explore.h */
	struct routers routers;   /* routers.h: the engines' verdict */
	enum core_peers peers;    /* what HAProxy last said of its peers */
	bool alone;               /* routing alone, by policy.routers */
	double place_z;           /* place_load_z in force (routers_apply) */
	/* The load floors' factor on an endpoint counted by its engine
	 * (engine_view) while not alone: 1 / this agent's share of the
	 * engines' load (routers_share), 1 to FLOOR_SCALE_MAX; 1 without a
	 * share (pick.h, bound_floor). */
	double floor_scale;
};

/* The most floor_scale gets: a share of 1/16 or less. */
#define FLOOR_SCALE_MAX 16.0

static inline bool finite_ge(double v, double min)
{
	return isfinite(v) && v >= min;
}

static inline bool view_has(const struct view *v, uint32_t i)
{
	return (v->member[i / 64] >> (i % 64)) & 1u;
}

/* In flight. An endpoint's load has two views. local_if is one HAProxy's:
 * its runtime API's scur + qcur (core_endpoint_sync), or without it this
 * agent's own decisions minus ends; it only ever sees the requests of the
 * HAProxy this agent serves. The engine's view (core_endpoint_engine) is
 * every HAProxy's: the engine's own running + waiting at its last
 * sample, plus what this agent sent and saw end since (the others'
 * changes since are unknown until the next sample). in_flight, which
 * decisions read, is the engine's view while its sample is fresh, else
 * local_if; both are kept at every step, so either can take over. */

/* Sets slot i's in_flight, keeping the views' totals current. inline:
 * with the tier sums it outgrew the compiler's default, and the call cost
 * every decision (bench-core). */
static inline void set_in_flight(struct core *c, uint32_t i, uint32_t value)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	for (int k = 0; k < VIEW_SLOTS; k++) {
		struct view *v = &c->views[k];
		if (v->valid && view_has(v, i)) {
			v->total_if = v->total_if - e->in_flight + value;
			if (c->tiered)
				v->tiers.in_flight[e->tier - 1] += (uint64_t)value - e->in_flight;
		}
	}
	e->in_flight = value;
}

static inline uint32_t engine_view(const struct pool_endpoint *e)
{
	int64_t v = (int64_t)e->engine_if + e->engine_delta;
	return v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Sets in_flight from whichever view is in force. */
static inline void in_flight_apply(struct core *c, uint32_t i)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	set_in_flight(c, i, e->engine_fresh ? engine_view(e) : e->local_if);
}

/* One more (d = 1: a decision) or one fewer (d = -1: an end) of this
 * agent's requests on slot i, in both views; neither goes below 0. */
static inline void in_flight_step(struct core *c, uint32_t i, int d)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	if (d > 0 && e->local_if < UINT32_MAX)
		e->local_if++;
	else if (d < 0 && e->local_if > 0)
		e->local_if--;
	if (e->engine_fresh && ((d > 0 && e->engine_delta < INT32_MAX) ||
				(d < 0 && e->engine_delta > INT32_MIN)))
		e->engine_delta += d;
	in_flight_apply(c, i);
}

/* Whether e's key is excluded at now_ms: refused by a probe, until a
 * probe accepts it; without probes (none will come), until
 * dead_key_retry has passed. */
static inline bool key_excluded(const struct core *c,
				const struct pool_endpoint *e, uint64_t now_ms)
{
	return e->key_dead && (c->p.key_probe || now_ms < e->dead_until_ms);
}

/* At most 2^RETRIAL_MAX_SHIFT idle_reset periods between the re-trials of
 * an endpoint found slow again and again (16 min with the default 60 s). */
#define RETRIAL_MAX_SHIFT 4u

/* The silence after which e's latency is unknown again: idle_reset, doubled
 * for each re-trial in a row that found it too slow (idleness forgives a
 * scaled-to-zero backend its first answer, not a slow one its slowness). */
static inline uint64_t idle_after(const struct core *c,
				  const struct pool_endpoint *e)
{
	uint64_t t = c->p.idle_reset_ms;
	/* Saturates: a huge idle_reset (set by a reload after re-trials
	 * doubled it) must not wrap to a short one. */
	return t > (UINT64_MAX >> e->retrials) ? UINT64_MAX : t << e->retrials;
}

/* Silent for idle_after at at_ms: its latency is unknown again (a
 * scaled-to-zero backend, or one that was left because it was slow). */
static inline bool idle(const struct core *c, const struct pool_endpoint *e,
			uint64_t at_ms)
{
	return e->seen && c->p.idle_reset_ms > 0 && at_ms >= e->last_seen_ms &&
	       at_ms - e->last_seen_ms >= idle_after(c, e);
}

/* Samples that make an endpoint warm again after idle_reset once it has
 * been warm: a re-trial. A slow endpoint that was left gets no feedback, so
 * idle_reset comes; with the full cold_start_samples it would then take
 * about that many requests each idle_reset before being judged again. A
 * few samples judge it again, as they would judge a recovered one fit
 * (docs/routing-quality.md, "idle_reset no longer forgives slowness"). */
#define RETRIAL_SAMPLES 4u

/* Whether e's own EWMA of signal sig counts: cold_start_samples successes,
 * or RETRIAL_SAMPLES after idle_reset once it was warm. */
static inline bool warm(const struct core *c, const struct pool_endpoint *e,
			unsigned sig)
{
	uint32_t need = c->p.cold_start_samples;
	if (((e->veteran >> sig) & 1u) && need > RETRIAL_SAMPLES)
		need = RETRIAL_SAMPLES;
	return e->samples[sig] > 0 && e->samples[sig] >= need;
}

/* The end-to-end sample is the whole request's time per KiB sent, a
 * response under E2E_MIN_BYTES counting as that many. An LLM request's time
 * is mostly decoding, in proportion to what it sends; per KiB, the time
 * measures the endpoint's speed rather than the answer's length, and it is
 * the same quantity whether the server sends its headers before prefill or
 * with the first token. Below about 100 streamed tokens prefill dominates
 * and bytes measure nothing: the floor keeps a 3-token answer from counting
 * as 50 times slower than a long one. The floor and the normalisation
 * were measured against the alternatives: docs/routing-quality.md, "How
 * the end-to-end sample is normalised". */
#define E2E_MIN_BYTES 16384u

/* What no latency rule calls slow, however many times the reference it
 * is over: HAProxy's timers count whole milliseconds, and an EWMA of
 * answers in 0 or 1 ms is 2.5 times another's by rounding alone (two
 * fake servers, both fast, one left: the e2e tiers under ASan). For the
 * end-to-end signal, the same milliseconds on the smallest request it
 * counts (E2E_MIN_BYTES). A few milliseconds: no slowdown an LLM's
 * caller feels is in them. */
#define LATENCY_SLACK_MS 5.0

/* The most an EWMA or an answer of signal sig may be, against ref (a
 * median, a peer's EWMA, a base) before a latency rule calls it slow:
 * sticky_tolerance x ref, and at least LATENCY_SLACK_MS over it. */
static inline double slow_limit(const struct core *c, unsigned sig,
				double ref)
{
	double slack = pool_sig_e2e(sig) ?
		LATENCY_SLACK_MS * 1024 / E2E_MIN_BYTES : LATENCY_SLACK_MS;
	double lim = c->p.sticky_tolerance * ref;
	return lim > ref + slack ? lim : ref + slack;
}

/* Whether the slow-run detector (policy.slow_run, learn.c queue_judge)
 * has left e: that many answers in a row slower than its queue explains. */
static inline bool slow_run_left(const struct core *c,
				 const struct pool_endpoint *e)
{
	return c->p.slow_run > 0 && e->slow_run >= c->p.slow_run;
}

/* Whether e is left as slow: by the latency rules (fast_enough) or by
 * the slow-run detector. */
static inline bool left_slow(const struct core *c, const struct pool_endpoint *e)
{
	return e->suspect == POOL_LEFT || slow_run_left(c, e);
}

static inline bool any_samples(const struct pool_endpoint *e)
{
	uint32_t any = 0;
	for (int k = 0; k < POOL_SIGNALS; k++)
		any |= e->samples[k];
	return any != 0;
}

/* Forgets e's samples (idle_reset): it starts cold again, for a re-trial
 * of RETRIAL_SAMPLES if it was warm once. If it was left as too slow since
 * the last reset, the next reset waits twice as long. */
static inline void forget_samples(struct pool_endpoint *e)
{
	if (e->suspect != POOL_FIT) {
		if (e->retrials < RETRIAL_MAX_SHIFT)
			e->retrials++;
	} else {
		e->retrials = 0;
	}
	e->suspect = POOL_FIT;
	e->slow_run = 0;
	e->run_answers = 0;
	e->run_sq = 0;
	for (int k = 0; k < POOL_SIGNALS; k++)
		e->samples[k] = 0;
	for (int k = 0; k < CORE_KIND_COUNT; k++)
		e->first[k].n = 0; /* a re-trial judges its next answers */
}

/* e's EWMAs and their sample counts per kind, for core_endpoint_info and
 * the snapshot's endpoint statistics. */
static inline void latency_out(const struct pool_endpoint *e, double *ewma_ms,
			       uint32_t *samples, double *e2e_ewma_ms,
			       uint32_t *e2e_samples)
{
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++) {
		ewma_ms[k] = e->ewma[pool_sig(false, k)];
		samples[k] = e->samples[pool_sig(false, k)];
		e2e_ewma_ms[k] = e->ewma[pool_sig(true, k)];
		e2e_samples[k] = e->samples[pool_sig(true, k)];
	}
}

/* core.c: the parameters in force for the routers' verdicts. */
void routers_apply(struct core *c);

/* core.c: the EWMA order and the cached medians. */
void order_fix(struct core *c, unsigned k, uint32_t i);
void ewma_moved_all(struct core *c);

/* view.c: the candidate sets (step 2). */
void view_build(struct core *c, struct view *v, int model, unsigned tier_max,
		uint64_t now_ms);
double view_median(struct core *c, struct view *v, unsigned sig);
/* What an endpoint is judged slow against (slow_limit of it):
 * the median, but among two candidates, both warm, the faster one. The
 * median of two is their mean, and no EWMA is over 2.5 times a mean it is
 * half of: the slower of two servers was never left. With three or more
 * the median of an endpoint above it is a peer's; with more candidates
 * than warm ones, two warm ones wait for the others as before (early in
 * a heterogeneous fleet, the first two say little of the rest). */
double view_median_peer(struct core *c, struct view *v, unsigned sig);
struct view *artefact_view(struct core *c, struct view *v, uint64_t a);
struct view *tier_view(struct core *c, struct view *all, int model,
		       uint64_t now_ms);

/* decide.c: core_decide, or core_explain's traced run (t not NULL). */
void decide(struct core *c, const struct core_request *req, uint64_t now_ms,
	    struct core_rng *rng, struct core_decision *out, struct core_trace *t);

/* The view of model at now_ms with the tiers up to tier_max
 * (CORE_TIER_MAX: all), rebuilt when stale. inline: with two callers
 * (core_decide, tier_view) the compiler stopped inlining it into the
 * decision, which made untiered decisions 3-7% slower (bench-core). */
static inline struct view *view_get(struct core *c, int model, unsigned tier_max,
				    uint64_t now_ms)
{
	struct view *v = NULL, *victim = &c->views[0];
	for (int k = 0; k < VIEW_SLOTS; k++) {
		struct view *w = &c->views[k];
		if (w->valid && w->model == model && w->tier_max == tier_max) {
			v = w;
			break;
		}
		if (!w->valid || (victim->valid && w->used < victim->used))
			victim = w;
	}
	if (v == NULL)
		v = victim;
	if (!v->valid || v->model != model || v->tier_max != tier_max ||
	    v->version != c->version || now_ms >= v->horizon_ms)
		view_build(c, v, model, tier_max, now_ms);
	v->used = ++c->view_clock;
	return v;
}

#endif
