/* sim_rng.c - xoshiro256** with splitmix64 seeding: deterministic across platforms. */
#include "sim_rng.h"

#include <math.h>

uint64_t sim_rng_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++) {
		x += 0x9e3779b97f4a7c15ULL;
		r->s[i] = sim_rng_mix(x);
	}
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(struct sim_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double sim_rng_unit(struct sim_rng *r)
{
	return (double)(sim_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint32_t sim_rng_below(struct sim_rng *r, uint32_t n)
{
	/* Multiply-shift: bias below 2^-32, irrelevant here, and branch-free. */
	return (uint32_t)(((sim_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

uint32_t sim_rng_range(struct sim_rng *r, uint32_t lo, uint32_t hi)
{
	return lo + sim_rng_below(r, hi - lo + 1);
}

double sim_rng_exp(struct sim_rng *r, double mean)
{
	return -mean * log(1.0 - sim_rng_unit(r));
}

double sim_rng_lognormal(struct sim_rng *r, double mu, double sigma)
{
	/* Box-Muller; one of the pair is dropped to keep the stream simple. */
	double u1 = 1.0 - sim_rng_unit(r), u2 = sim_rng_unit(r);
	double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
	return exp(mu + sigma * z);
}
