/* slowstart.c - the log-domain statistics of an endpoint's first answers and the test against its peers (slowstart.h). */
#include "slowstart.h"

#include <math.h>

void slowstart_add(struct slowstart *s, double tr_ms, uint32_t first, double alpha)
{
	/* +1 ms: an answer of 0 ms (a cached error page, a clock tick)
	 * stays finite */
	double x = log(tr_ms + 1);
	if (s->n < UINT32_MAX)
		s->n++;
	double a = s->n <= first ? 1.0 / s->n : alpha;
	double d = x - s->mean;
	s->mean += a * d;
	/* the EWMA of the variance (West's update): exact for the first
	 * answers, where a = 1/n */
	s->var = (1 - a) * (s->var + a * d * d);
}

bool slowstart_slow(const struct slowstart_judge *j, double tolerance, double z)
{
	const struct slowstart *x = j->x;
	if (z <= 0 || tolerance <= 1 || !slowstart_judged(j))
		return false;
	double d = x->mean - j->slowest;
	return d > log(tolerance) && d > z * sqrt(x->var / (double)x->n);
}
