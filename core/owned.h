/* owned.h - a decayed count of the keys each endpoint was given, for the placement of new keys (docs/policy-v2.md, "Owned keys"). */
#ifndef WARMLANE_CORE_OWNED_H
#define WARMLANE_CORE_OWNED_H

#include <stdbool.h>
#include <stdint.h>

/* Every endpoint's count is kept on one scale: a key placed at time t
 * adds 2^((t - epoch) / half_life) to its endpoint's count, so that all
 * counts decay alike without being touched, and comparing two counts, or
 * a count with the mean, needs no exponential. owned_increment moves the epoch
 * forward (rescaling every count) before the increment grows past 2^40:
 * once every 40 half-lives. No allocation. */
struct owned_clock {
	uint64_t epoch_ms;
	double half_life_ms;
};

/* clk for half_life_ms (> 0), epoch now_ms. */
void owned_init(struct owned_clock *clk, uint64_t half_life_ms, uint64_t now_ms);

/* The weight a key placed at now_ms adds, on clk's scale; *rescale is set
 * to the factor every count must be multiplied by first (1: none), when
 * the epoch had to move. */
double owned_increment(struct owned_clock *clk, uint64_t now_ms, double *rescale);

/* Whether an endpoint owning `owned` of weight w is over (1 + eps) x its
 * part of what the candidates own (sum_owned over weight sum_w), plus one
 * key's worth at now (inc) so that the first keys of a cold fleet, where
 * the mean is a fraction of one key, do not all steer by a single one. */
static inline bool owned_over(double owned, double w, double sum_owned,
			      double sum_w, double eps, double inc)
{
	if (sum_w <= 0 || w <= 0)
		return false;
	return owned > (1 + eps) * sum_owned * w / sum_w + inc;
}

#endif
