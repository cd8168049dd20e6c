/* routers.h - whether this agent routes its engines' traffic alone
 * (policy.routers auto).
 *
 * A new key placed by load must be found again by whoever routes its
 * next request. One HAProxy finds it in its own map; several that share
 * nothing find it only where its hash put it (docs/policy-v2.md, sections
 * 7 and 28). The engines' own counts (engine_metrics) tell the two apart:
 * at each sample, this HAProxy's count of the endpoint (local_if: the
 * runtime API's scur + qcur and this agent's decisions since) against the
 * engine's running + waiting. Both are summed over the samples of every
 * endpoint, each weighted by e^(-age / window), and their ratio is this
 * agent's share of the engines' load: about 1 alone (HAProxy also counts
 * what it queues and streams after the engine is done), 1/N behind a
 * spray over N HAProxies, less with clients that bypass HAProxy. The
 * verdict holds until the other bar is crossed, and while there is too
 * little load to judge.
 *
 * HAProxies that share the warm hint (HAProxy peers, docs/peers.md) agree
 * on where every key went: they route as one, whatever their share. Its
 * requests carrying hints for their own keys tell this agent so (and a
 * lone HAProxy with the peers configuration too): ROUTERS_MIN_DECISIONS
 * of them in the window, and it routes alone, until its decisions go on
 * without them. Only hints another HAProxy wrote show a shared table
 * (peers that never connect leave each HAProxy its own), unless HAProxy
 * says its peers are connected (`show peers`, which the agent asks every
 * 5 s while requests carry hints): then hints that are all its own mean
 * that no other HAProxy routes these keys (this HAProxy is the active one
 * of a pair, or alone in its peers section).
 *
 * Without either, the requests' turns tell (HAProxy's `turn`, the count
 * of user messages in the body): a key's entry holds the turn of its last
 * request here, and a request of a later turn either follows it (turn + 1)
 * or skips some, which another HAProxy routed. Alone, a conversation's
 * turns all come here; behind N HAProxies sharing nothing, each turn with
 * 1/N odds. Only a later turn's request that could have followed a
 * skipped one counts (turn 3 on: turn 2 after turn 1 says nothing, as a
 * conversation of two turns never shows a skip), and only where the
 * entry knows a turn. Pure arithmetic, no allocation.
 */
#ifndef WARMLANE_CORE_ROUTERS_H
#define WARMLANE_CORE_ROUTERS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* A share at or over ROUTERS_ALONE: alone; under ROUTERS_SEVERAL: not.
 * Two HAProxies sharing the load evenly give 0.5, an active/passive pair
 * about 1 on the active one. */
#define ROUTERS_ALONE 0.8
#define ROUTERS_SEVERAL 0.6
/* The engines' requests, summed over samples in the window, below which
 * nothing is judged; and this agent's decisions in the window below which
 * it is not judged alone: a few long requests, sampled many times each,
 * are not a share (with D decisions at share s, about D / s requests
 * were sampled: 30 puts 0.8 four deviations over an even pair's 0.5). */
#define ROUTERS_MIN 20.0
#define ROUTERS_MIN_DECISIONS 30.0
/* Of the hinted decisions in the window, those whose hint another
 * HAProxy wrote (or whose writer is not told), under which the hints do
 * not show a shared table: a table that replicates nothing holds only
 * its own HAProxy's, a shared one some of the others' on every agent
 * (half of them with two agents behind a random spray). A handful, not
 * one stray write. */
#define ROUTERS_MIN_PEER 3.0
/* How long HAProxy's peers must be seen apart before the link that let
 * own hints show a shared table ends: a reload or a peer's restart
 * reconnects within HAProxy's reconnect timer (5 s). */
#define ROUTERS_LINK_GRACE_MS 10000
/* The turns' skip share: a mean over the last ROUTERS_TURN_MEMORY
 * requests that count (the plain mean before that many); a verdict once
 * ROUTERS_TURN_MIN have, alone under ROUTERS_TURN_ALONE, no longer at
 * ROUTERS_TURN_SEVERAL. Counted in requests, not time: a fleet's rate
 * does not move the bars. On the Mooncake trace (a Python model of its
 * turns, derived from its blocks), one agent's share is 0.3-0.4% (a
 * conversation that forks, or two that share a key), 2 agents' 29-42%, 4
 * agents' 38-57%; at a true share of 0.29, the 50th request finds it
 * under 0.05 with odds of 1 in 120,000, any of the next 550 with 1 in
 * 20,000 (0.18: 1 in 290, 1 in 190). */
#define ROUTERS_TURN_MEMORY 64.0
#define ROUTERS_TURN_MIN 50u
#define ROUTERS_TURN_ALONE 0.05
#define ROUTERS_TURN_SEVERAL 0.10
/* The callers (HAProxy's `caller`, a hash of the Authorization header;
 * none counts as one caller) of the last ROUTERS_TURN_CALLERS turns that
 * counted, each for ROUTERS_TURN_CALLER_S seconds. A caller holding over
 * half of them while another holds some counts no more turns until the
 * others' push it back, or age out: one caller writes its turns as it
 * likes (a session of consecutive turns that never skip), and could
 * otherwise make the verdict for everyone's keys. Honest callers lose
 * nothing but time: any of them shows the same deployment, so the
 * verdict stays what it was, counted from fewer turns while one caller
 * sends most of them. A caller that stopped leaves the others free
 * within ROUTERS_TURN_CALLER_S. */
#define ROUTERS_TURN_CALLERS 64u
#define ROUTERS_TURN_CALLER_S 600u

struct routers {
	double own;        /* this HAProxy's counts at the samples */
	double engine;     /* the engines' counts at the same samples */
	double decided;    /* this agent's decisions */
	double hinted;     /* of them, those with a hint for their key */
	double peer;       /* of those, hints another HAProxy wrote (or
			    * whose writer is not told) */
	uint64_t counted;  /* its decision counter at the last update */
	uint64_t hints_counted; /* its hinted-decision counter then */
	uint64_t peer_counted;  /* its peer-hinted counter then */
	uint64_t at_ms;    /* the last update; 0: none */
	bool alone;        /* the verdict by the engines' counts (false
			    * before one) */
	bool hints;        /* the verdict by the hints */
	bool linked;       /* HAProxy's peers are connected (routers_link) */
	uint64_t apart_ms; /* linked, but seen apart since then; 0: not */
	uint64_t restored_ms; /* alone restored from a snapshot then, and
			       * no engine sample since; 0: not */
	double skips;      /* of the turns that count, the share that
			    * skipped one (routers_turn) */
	uint32_t turns;    /* turns that counted (saturates) */
	bool turns_alone;  /* the verdict by the turns */
	uint8_t callers_at; /* callers[]: the next written (the oldest) */
	struct {
		uint32_t who; /* routers_caller */
		uint32_t s;   /* when, in seconds; 0: empty */
	} callers[ROUTERS_TURN_CALLERS]; /* the last counted turns' */
};

/* A caller's name in routers.callers: a hash of its identity, 0 none. */
static inline uint32_t routers_caller(bool present, uint64_t hash)
{
	return present ? (uint32_t)(hash >> 32) | 1u : 0u;
}

/* The hints' verdict on the sums: shared once ROUTERS_MIN_DECISIONS
 * hinted decisions are in the window, ROUTERS_MIN_PEER of them a peer's
 * unless the peers are linked; no longer once decisions go on without
 * hints, or without a peer's while the peers are not linked. */
static inline void routers_judge_hints(struct routers *r)
{
	bool shown = r->linked || r->peer >= ROUTERS_MIN_PEER;
	bool gone = r->hinted < 1 || (!r->linked && r->peer < 1);
	if (r->hinted >= ROUTERS_MIN_DECISIONS && shown)
		r->hints = true;
	else if (gone && r->decided >= ROUTERS_MIN_DECISIONS)
		r->hints = false;
}

/* The sums at now_ms, with the decision, hinted-decision and
 * peer-hinted counters (monotonic) then; window_ms is the decay's time
 * constant. Judges the hints: shared once ROUTERS_MIN_DECISIONS hinted
 * decisions, ROUTERS_MIN_PEER of them a peer's, are in the window; no
 * longer once decisions go on without hints, or without a peer's (the
 * replication stopped). */
static inline void routers_update(struct routers *r, uint64_t decisions,
				  uint64_t hinted, uint64_t peer,
				  uint64_t now_ms, uint64_t window_ms)
{
	if (r->at_ms != 0 && now_ms > r->at_ms && window_ms > 0) {
		double a = exp(-(double)(now_ms - r->at_ms) / (double)window_ms);
		r->own *= a;
		r->engine *= a;
		r->decided *= a;
		r->hinted *= a;
		r->peer *= a;
	}
	if (now_ms > r->at_ms)
		r->at_ms = now_ms;
	if (decisions > r->counted)
		r->decided += (double)(decisions - r->counted);
	r->counted = decisions;
	if (hinted > r->hints_counted)
		r->hinted += (double)(hinted - r->hints_counted);
	r->hints_counted = hinted;
	if (peer > r->peer_counted)
		r->peer += (double)(peer - r->peer_counted);
	r->peer_counted = peer;
	routers_judge_hints(r);
	/* A verdict restored from before a restart stands for the engines
	 * that gave it only while they are still polled. */
	if (r->restored_ms != 0 && now_ms >= r->restored_ms + window_ms) {
		r->restored_ms = 0;
		r->alone = false;
	}
}

/* What HAProxy said of its peers at now_ms (`show peers`): connected,
 * every remote peer of its sections that share a table (or none listed:
 * a group of one), or not (apart, or no such section). Linked at once;
 * no longer once they have not been connected for ROUTERS_LINK_GRACE_MS. */
static inline void routers_link(struct routers *r, bool connected, uint64_t now_ms)
{
	if (connected) {
		r->linked = true;
		r->apart_ms = 0;
	} else if (r->linked) {
		if (r->apart_ms == 0)
			r->apart_ms = now_ms > 0 ? now_ms : 1;
		else if (now_ms >= r->apart_ms + ROUTERS_LINK_GRACE_MS) {
			r->linked = false;
			r->apart_ms = 0;
		}
	}
	routers_judge_hints(r);
}

/* The verdicts as a snapshot restores them at now_ms: the sums start
 * again, the hints' verdict ends as any does (decisions without hints),
 * the engines' once a window passes without an engine sample, the
 * turns' as if ROUTERS_TURN_MIN turns had skipped none. */
static inline void routers_restore(struct routers *r, bool alone, bool hints,
				   bool turns, uint64_t now_ms)
{
	*r = (struct routers){
		.counted = r->counted, .hints_counted = r->hints_counted,
		.peer_counted = r->peer_counted, .at_ms = now_ms,
		.linked = r->linked, .apart_ms = r->apart_ms,
		.alone = alone, .hints = hints,
		.restored_ms = alone ? (now_ms > 0 ? now_ms : 1) : 0,
		.turns = turns ? ROUTERS_TURN_MIN : 0, .turns_alone = turns,
	};
}

/* One engine sample (own: this HAProxy's count of that endpoint, engine:
 * the engine's), after routers_update at its time: r->alone is the
 * verdict after it. */
static inline void routers_note(struct routers *r, uint32_t own, uint32_t engine)
{
	r->restored_ms = 0;
	r->own += own;
	r->engine += engine;
	if (r->engine < ROUTERS_MIN)
		return;
	double share = r->own / r->engine;
	if (share >= ROUTERS_ALONE && r->decided >= ROUTERS_MIN_DECISIONS)
		r->alone = true;
	else if (share < ROUTERS_SEVERAL)
		r->alone = false;
}

/* This agent's share of the engines' load at the samples; -1 while
 * there is too little load in the window to judge. */
static inline double routers_share(const struct routers *r)
{
	return r->engine >= ROUTERS_MIN ? r->own / r->engine : -1;
}

/* A request of turn `turn` from caller (routers_caller) at now_ms, whose
 * key's entry held turn prev (either 0: unknown). Returns whether the
 * turns' verdict changed. */
static inline bool routers_turn(struct routers *r, uint16_t prev, uint16_t turn,
				uint32_t caller, uint64_t now_ms)
{
	if (prev == 0 || turn < 3 || turn <= prev)
		return false; /* a retry, an edit, a fork, or nothing to skip */
	uint32_t now_s = (uint32_t)(now_ms / 1000) + 1;
	unsigned mine = 0, others = 0;
	for (unsigned i = 0; i < ROUTERS_TURN_CALLERS; i++) {
		uint32_t s = r->callers[i].s;
		if (s == 0 || now_s - s >= ROUTERS_TURN_CALLER_S)
			continue;
		if (r->callers[i].who == caller)
			mine++;
		else
			others++;
	}
	if (2 * mine > ROUTERS_TURN_CALLERS && others > 0)
		return false; /* over half the memory is this caller's */
	r->callers[r->callers_at].who = caller;
	r->callers[r->callers_at].s = now_s;
	r->callers_at = (uint8_t)((r->callers_at + 1) % ROUTERS_TURN_CALLERS);
	if (r->turns < UINT32_MAX)
		r->turns++;
	double w = 1.0 / (r->turns < ROUTERS_TURN_MEMORY ? r->turns : ROUTERS_TURN_MEMORY);
	r->skips += ((turn > prev + 1 ? 1.0 : 0.0) - r->skips) * w;
	bool was = r->turns_alone;
	if (r->turns >= ROUTERS_TURN_MIN && r->skips < ROUTERS_TURN_ALONE)
		r->turns_alone = true;
	else if (r->skips >= ROUTERS_TURN_SEVERAL)
		r->turns_alone = false;
	return r->turns_alone != was;
}

/* Whether other HAProxies are shown routing these engines' traffic
 * without sharing placements: the engines' counts at a share under
 * ROUTERS_SEVERAL, or the turns skipping as often as ROUTERS_TURN_SEVERAL
 * once ROUTERS_TURN_MIN have counted. Not before either shows it: not
 * shown is not alone. */
/* The turns' skip share; -1 before ROUTERS_TURN_MIN turns counted. */
static inline double routers_skips(const struct routers *r)
{
	return r->turns >= ROUTERS_TURN_MIN ? r->skips : -1;
}

/* Whether other HAProxies are shown routing these engines' traffic
 * without sharing placements: this agent's share of the engines' load
 * (routers_share) under ROUTERS_SEVERAL, or the turns' skip share
 * (routers_skips) at ROUTERS_TURN_SEVERAL or more. Not before either
 * can judge: not shown is not alone. */
static inline bool routers_several(const struct routers *r)
{
	double share = routers_share(r);
	return (share >= 0 && share < ROUTERS_SEVERAL) ||
	       routers_skips(r) >= ROUTERS_TURN_SEVERAL;
}

#endif
