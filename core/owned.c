/* owned.c - the decay scale of the owned-keys counts (owned.h). */
#include "owned.h"

#include <math.h>

/* An increment of 2^40 at most: far from double's precision limit for
 * counts of a few million keys, and reached only every 40 half-lives. */
#define OWNED_RESCALE_HALVES 40.0

void owned_init(struct owned_clock *clk, uint64_t half_life_ms, uint64_t now_ms)
{
	clk->epoch_ms = now_ms;
	clk->half_life_ms = half_life_ms > 0 ? (double)half_life_ms : 1;
}

double owned_increment(struct owned_clock *clk, uint64_t now_ms, double *rescale)
{
	*rescale = 1;
	/* A clock that goes back (a caller's) counts as now = epoch. */
	double age = now_ms > clk->epoch_ms ? (double)(now_ms - clk->epoch_ms) : 0;
	double halves = age / clk->half_life_ms;
	if (halves < OWNED_RESCALE_HALVES)
		return exp2(halves);
	/* Counts from before the new epoch shrink by as much (to 0 after a
	 * long pause, never to inf or NaN). */
	*rescale = exp2(-halves);
	clk->epoch_ms = now_ms;
	return 1;
}
