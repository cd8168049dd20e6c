/* slowstart.h - an endpoint slow from its first answers, judged against its comparable peers for new keys and warm ones (docs/policy-v2.md, sections 4 and 12). */
#ifndef WARMLANE_CORE_SLOWSTART_H
#define WARMLANE_CORE_SLOWSTART_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Answers an endpoint needs before it is judged (issue 12: "after its
 * first 5 answers"), and before it is a peer others are judged against. */
#define SLOWSTART_ANSWERS 5u

/* One endpoint's times to headers of one kind, in the log domain: their
 * mean and variance, learnt as its base is (the mean of its first
 * cold_start_samples answers, then an EWMA 40 times slower than the
 * latency EWMA's, not while it is left or re-tried): what the endpoint
 * was from its start, which a later slowdown barely moves (that one is
 * the sticky rule's and the slow-run detector's). The log because times
 * to headers are a product (prompt length x speed): a server k times
 * slower adds log k to every answer, whatever the prompt. */
struct slowstart {
	double mean;
	double var;
	uint32_t n;
};

/* Adds an answer of tr_ms (>= 0) to s: the mean of the first `first`
 * answers, then an EWMA at alpha. */
void slowstart_add(struct slowstart *s, double tr_ms, uint32_t first, double alpha);

/* Whether y's answers are alike x's: the same header behaviour. In the
 * log domain a server k times slower than another shifts every answer
 * by log k and keeps the variance, which is the prompt mix's; a server
 * that sends its headers before prefill (vLLM) answers in about the
 * same time whatever the prompt: a variance near 0. Variances within a
 * factor SLOWSTART_ALIKE of each other are the same kind, each with
 * SLOWSTART_JITTER added: two servers answering every request alike (a
 * log standard deviation under 0.1, 10% jitter) are alike whatever the
 * ratio of their jitters. */
#define SLOWSTART_ALIKE 4.0
#define SLOWSTART_JITTER 0.01
static inline bool slowstart_alike(const struct slowstart *x, const struct slowstart *y)
{
	double vx = x->var + SLOWSTART_JITTER, vy = y->var + SLOWSTART_JITTER;
	return vy * SLOWSTART_ALIKE >= vx && vx * SLOWSTART_ALIKE >= vy;
}

/* Whether x may be judged against y: alike, or more regular than y. A
 * server that answers every request alike but slower than peers whose
 * times vary with the prompt is not one that sends its headers at
 * admission (those answer faster than any prefill): it is a slow one
 * whose every answer is cold, or queued (a llama.cpp server of one slot,
 * 4x the layers: log variance 0.01 against its peers' 0.15, whose cache
 * hits make theirs bimodal). The other way round stays out: a
 * prefill-bound x is not judged against peers that send their headers
 * before prefill. */
static inline bool slowstart_comparable(const struct slowstart *x, const struct slowstart *y)
{
	return slowstart_alike(x, y) || x->var < y->var;
}

/* One candidate x judged against its peers: the slowest of the
 * comparable ones with SLOWSTART_ANSWERS (slowstart_judge_peer for each
 * other candidate). */
struct slowstart_judge {
	const struct slowstart *x;
	double slowest;
	uint32_t peers;
};

/* Notes y, a peer of weight ratio (> 0) times x's. The weights are the
 * capacities the operator declared: a peer of twice x's weight counts
 * as twice slower, so that a small node beside big ones, slower by
 * design, is not taken for a server slow from its start. */
static inline void slowstart_judge_peer(struct slowstart_judge *j, const struct slowstart *y,
					double ratio)
{
	if (y == j->x || y->n < SLOWSTART_ANSWERS || !slowstart_comparable(j->x, y) ||
	    !(ratio > 0))
		return;
	double m = y->mean + log(ratio);
	if (j->peers++ == 0 || m > j->slowest)
		j->slowest = m;
}

/* Whether j's x is slower than every comparable peer by more than tolerance,
 * with z standard errors of its own mean to spare: its log-mean over the
 * slowest peer's + log(tolerance), and over it by z x sqrt(var / n).
 * Against the slowest alike peer, not a mean or median of all: times to
 * headers of servers that send them at different moments are not
 * comparable (a vLLM-style server's are a hundredfold under another's),
 * and a fleet of several speeds by design (a small node beside big ones)
 * is not slow from its start; a server slower than all of its kind is.
 * False while x has fewer than SLOWSTART_ANSWERS answers or no comparable
 * peer; z <= 0: off. */
bool slowstart_slow(const struct slowstart_judge *j, double tolerance, double z);

/* Whether j can say anything: its x has SLOWSTART_ANSWERS and a
 * comparable peer with as many. */
static inline bool slowstart_judged(const struct slowstart_judge *j)
{
	return j->x->n >= SLOWSTART_ANSWERS && j->peers > 0;
}

#endif
