/* breaker.h - per-endpoint circuit breaker over a sliding window of outcomes. */
#ifndef WARMLANE_CORE_BREAKER_H
#define WARMLANE_CORE_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

/* The window is BREAKER_BUCKETS buckets of breaker_window / BREAKER_BUCKETS
 * each: a count ages out at most one bucket late. */
#define BREAKER_BUCKETS 10

/* What the breaker lets through right now. */
enum breaker_admit {
	BREAKER_ADMIT_NO = 0,   /* OPEN, or HALF_OPEN with every probe out */
	BREAKER_ADMIT_YES,      /* CLOSED */
	BREAKER_ADMIT_PROBE,    /* HALF_OPEN with a probe slot free */
};

struct breaker {
	uint8_t state;              /* enum core_breaker; read first */
	uint8_t head;               /* index of the newest bucket */
	uint32_t consecutive;       /* failures in a row */
	uint32_t trips;             /* trips since the last CLOSE */
	uint32_t probes_out;        /* HALF_OPEN: admitted, no outcome yet */
	uint32_t probes_ok;         /* HALF_OPEN: successful probes */
	bool heard;                 /* HALF_OPEN: a probe's success awaits its end */
	uint64_t open_until_ms;     /* OPEN: end of the cooldown */
	uint64_t bucket_start_ms;   /* start of the newest bucket */
	uint64_t last_probe_ms;     /* HALF_OPEN: when the last probe left */
	uint32_t ok[BREAKER_BUCKETS];
	uint32_t fail[BREAKER_BUCKETS];
};

/* Resets b to CLOSED with an empty window starting at now_ms. */
void breaker_init(struct breaker *b, uint64_t now_ms);

/* Whether b admits a request at now_ms. Moves OPEN to HALF_OPEN when the
 * cooldown has ended, and frees the probe slots of a HALF_OPEN breaker
 * whose probes got no outcome within breaker_window (HAProxy sends no
 * feedback for its own errors). */
enum breaker_admit breaker_admit_slow(struct breaker *b,
				      const struct core_params *p,
				      uint64_t now_ms);

static inline enum breaker_admit breaker_admit(struct breaker *b,
					       const struct core_params *p,
					       uint64_t now_ms)
{
	if (b->state == CORE_BREAKER_CLOSED) /* the common case, inline */
		return BREAKER_ADMIT_YES;
	return breaker_admit_slow(b, p, now_ms);
}

/* A request was routed through b (takes a probe slot when HALF_OPEN). */
void breaker_routed(struct breaker *b, uint64_t now_ms);

/* Outcomes of responses. */
void breaker_success(struct breaker *b, const struct core_params *p,
		     uint64_t now_ms);
void breaker_failure(struct breaker *b, const struct core_params *p,
		     uint64_t now_ms);
void breaker_neutral(struct breaker *b);

/* A success whose outcome waits for its end (a stream, with the log
 * input): when HALF_OPEN, the probes after the first may go. */
void breaker_heard(struct breaker *b);

/* 429: OPEN for cooldown_ms from now (never shortening a longer one). */
void breaker_rate_limited(struct breaker *b, uint64_t cooldown_ms,
			  uint64_t now_ms);

/* Successes and failures within the window at now_ms (b unchanged). */
void breaker_counts(const struct breaker *b, const struct core_params *p,
		    uint64_t now_ms, uint32_t *ok, uint32_t *fail);

/* The state at now_ms as a reader sees it (an ended cooldown reads as
 * HALF_OPEN), and the remaining cooldown. */
enum core_breaker breaker_state(const struct breaker *b, uint64_t now_ms,
				uint64_t *cooldown_left_ms);

/* The cooldown of the next trip: breaker_cooldown doubled per trip since
 * the last CLOSE, capped at breaker_cooldown_max. */
uint64_t breaker_next_cooldown(const struct breaker *b,
			       const struct core_params *p);

/* Puts b in state st with cooldown_left_ms and trips (snapshot import). */
void breaker_restore(struct breaker *b, enum core_breaker st, uint32_t trips,
		     uint64_t cooldown_left_ms, uint64_t now_ms);

#endif
