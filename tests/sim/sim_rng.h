/* sim_rng.h - the simulator's own seeded PRNG (xoshiro256** seeded by splitmix64). */
#ifndef WARMLANE_SIM_RNG_H
#define WARMLANE_SIM_RNG_H

#include <stdint.h>

struct sim_rng {
	uint64_t s[4];
};

/* Seeds r from one 64-bit value; equal seeds give equal streams. */
void sim_rng_seed(struct sim_rng *r, uint64_t seed);

/* The next 64 random bits. */
uint64_t sim_rng_next(struct sim_rng *r);

/* A uniform double in [0, 1). */
double sim_rng_unit(struct sim_rng *r);

/* A uniform integer in [0, n); n must be > 0. */
uint32_t sim_rng_below(struct sim_rng *r, uint32_t n);

/* An exponential variate of the given mean. */
double sim_rng_exp(struct sim_rng *r, double mean);

/* A lognormal variate: exp(mu + sigma * N(0,1)). */
double sim_rng_lognormal(struct sim_rng *r, double mu, double sigma);

/* A uniform integer in [lo, hi] (lo <= hi). */
uint32_t sim_rng_range(struct sim_rng *r, uint32_t lo, uint32_t hi);

/* splitmix64 finaliser: a good 64-bit mixer for hashing integers. */
uint64_t sim_rng_mix(uint64_t x);

#endif
