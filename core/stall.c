/* stall.c - one pause is one piece of evidence (stall.h). */
#include "stall.h"

#include "pool.h"

unsigned stall_note(struct pool_endpoint *e, uint64_t start_ms,
		    uint64_t headers_ms, double excess_ms, double tol_ms)
{
	if (e->slow_run > 0) {
		uint64_t lo = start_ms > e->run_lo_ms ? start_ms : e->run_lo_ms;
		uint64_t hi = headers_ms < e->run_hi_ms ? headers_ms : e->run_hi_ms;
		double worst = excess_ms > e->run_excess ? excess_ms : e->run_excess;
		if (hi >= lo && (double)(hi - lo) + tol_ms >= worst) {
			e->run_lo_ms = lo;
			e->run_hi_ms = hi;
			e->run_excess = worst;
			return e->run_pauses; /* the same pause may explain it */
		}
	} else {
		e->run_pauses = 0;
	}
	e->run_lo_ms = start_ms;
	e->run_hi_ms = headers_ms;
	e->run_excess = excess_ms;
	if (e->run_pauses < UINT8_MAX)
		e->run_pauses++;
	return e->run_pauses;
}
