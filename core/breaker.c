/* breaker.c - per-endpoint circuit breaker: CLOSED, OPEN with a doubling cooldown, HALF_OPEN probes. */
#include "breaker.h"

#include <string.h>

static uint64_t bucket_width(const struct core_params *p)
{
	uint64_t w = p->breaker_window_ms / BREAKER_BUCKETS;
	return w > 0 ? w : 1;
}

void breaker_init(struct breaker *b, uint64_t now_ms)
{
	memset(b, 0, sizeof(*b));
	b->bucket_start_ms = now_ms;
	b->state = CORE_BREAKER_CLOSED;
}

static void window_clear(struct breaker *b)
{
	memset(b->ok, 0, sizeof(b->ok));
	memset(b->fail, 0, sizeof(b->fail));
}

/* Brings the newest bucket up to now_ms, clearing the buckets that aged
 * out. */
static void window_advance(struct breaker *b, const struct core_params *p,
			   uint64_t now_ms)
{
	uint64_t w = bucket_width(p);

	if (now_ms < b->bucket_start_ms + w)
		return;
	uint64_t k = (now_ms - b->bucket_start_ms) / w;
	if (k >= BREAKER_BUCKETS) {
		window_clear(b);
	} else {
		for (uint64_t i = 0; i < k; i++) {
			b->head = (uint8_t)((b->head + 1) % BREAKER_BUCKETS);
			b->ok[b->head] = 0;
			b->fail[b->head] = 0;
		}
	}
	b->bucket_start_ms += k * w;
}

void breaker_counts(const struct breaker *b, const struct core_params *p,
		    uint64_t now_ms, uint32_t *ok, uint32_t *fail)
{
	uint64_t w = bucket_width(p);
	uint64_t k = now_ms > b->bucket_start_ms ?
		     (now_ms - b->bucket_start_ms) / w : 0;
	uint32_t so = 0, sf = 0;

	/* Bucket d places behind the newest ages out once d + k reaches the
	 * bucket count. */
	for (uint64_t d = 0; d + k < BREAKER_BUCKETS; d++) {
		unsigned i = (unsigned)((b->head + BREAKER_BUCKETS - d) %
					BREAKER_BUCKETS);
		so += b->ok[i];
		sf += b->fail[i];
	}
	*ok = so;
	*fail = sf;
}

uint64_t breaker_next_cooldown(const struct breaker *b,
			       const struct core_params *p)
{
	uint64_t cd = p->breaker_cooldown_ms;
	uint64_t max = p->breaker_cooldown_max_ms;

	if (max < cd)
		max = cd;
	for (uint32_t i = 0; i < b->trips && cd < max; i++)
		cd = cd > max / 2 ? max : cd * 2;
	return cd < max ? cd : max;
}

static void trip(struct breaker *b, uint64_t cooldown_ms, uint64_t now_ms)
{
	uint64_t until = now_ms + cooldown_ms;

	if (b->state != CORE_BREAKER_OPEN || until > b->open_until_ms)
		b->open_until_ms = until;
	b->state = CORE_BREAKER_OPEN;
	b->trips++;
	b->probes_out = 0;
	b->probes_ok = 0;
	b->heard = false;
	b->consecutive = 0;
}

static uint32_t probes_allowed(const struct core_params *p)
{
	return p->half_open_probes > 0 ? p->half_open_probes : 1;
}

enum breaker_admit breaker_admit_slow(struct breaker *b,
				      const struct core_params *p,
				      uint64_t now_ms)
{
	switch (b->state) {
	case CORE_BREAKER_CLOSED:
		return BREAKER_ADMIT_YES;
	case CORE_BREAKER_OPEN:
		if (now_ms < b->open_until_ms)
			return BREAKER_ADMIT_NO;
		b->state = CORE_BREAKER_HALF_OPEN;
		b->probes_out = 0;
		b->probes_ok = 0;
		b->heard = false;
		b->last_probe_ms = now_ms;
		return BREAKER_ADMIT_PROBE;
	default: {
		/* The first probe goes alone: a server still failing (instant
		 * 500s, a 429 again) takes one request per cooldown, not
		 * half_open_probes at once. Once a probe has answered, the
		 * rest may go together. */
		uint32_t cap = b->probes_ok > 0 || b->heard ? probes_allowed(p) : 1;
		if (b->probes_out > 0 && b->probes_out + b->probes_ok >= cap &&
		    now_ms - b->last_probe_ms >= p->breaker_window_ms)
			b->probes_out = 0; /* their outcomes will not come */
		return b->probes_out + b->probes_ok < cap ?
		       BREAKER_ADMIT_PROBE : BREAKER_ADMIT_NO;
	}
	}
}

void breaker_routed(struct breaker *b, uint64_t now_ms)
{
	if (b->state == CORE_BREAKER_HALF_OPEN) {
		b->probes_out++;
		b->last_probe_ms = now_ms;
	}
}

void breaker_success(struct breaker *b, const struct core_params *p,
		     uint64_t now_ms)
{
	window_advance(b, p, now_ms);
	b->ok[b->head]++;
	b->consecutive = 0;
	if (b->state != CORE_BREAKER_HALF_OPEN)
		return;
	if (b->probes_out > 0)
		b->probes_out--;
	if (++b->probes_ok >= probes_allowed(p)) {
		/* Recovered: forget the failures that opened it, and the
		 * doubling. */
		b->state = CORE_BREAKER_CLOSED;
		b->trips = 0;
		b->probes_ok = 0;
		b->probes_out = 0;
		window_clear(b);
	}
}

void breaker_failure(struct breaker *b, const struct core_params *p,
		     uint64_t now_ms)
{
	window_advance(b, p, now_ms);
	b->fail[b->head]++;
	switch (b->state) {
	case CORE_BREAKER_CLOSED: {
		b->consecutive++;
		uint32_t ok, fail;
		breaker_counts(b, p, now_ms, &ok, &fail);
		uint32_t n = ok + fail;
		bool ratio = n >= p->breaker_min_requests && n > 0 &&
			     (double)fail >= p->breaker_failure_ratio * n;
		bool run = p->breaker_consecutive > 0 &&
			   b->consecutive >= p->breaker_consecutive;
		if (ratio || run)
			trip(b, breaker_next_cooldown(b, p), now_ms);
		break;
	}
	case CORE_BREAKER_HALF_OPEN:
		trip(b, breaker_next_cooldown(b, p), now_ms);
		break;
	default:
		/* A late answer to a request sent before it opened. */
		break;
	}
}

void breaker_heard(struct breaker *b)
{
	/* Headers of a success the log line will settle: the server
	 * answers, so the other probes may go. */
	if (b->state == CORE_BREAKER_HALF_OPEN)
		b->heard = true;
}

void breaker_neutral(struct breaker *b)
{
	if (b->state == CORE_BREAKER_HALF_OPEN && b->probes_out > 0)
		b->probes_out--;
}

void breaker_rate_limited(struct breaker *b, uint64_t cooldown_ms,
			  uint64_t now_ms)
{
	trip(b, cooldown_ms, now_ms);
}

enum core_breaker breaker_state(const struct breaker *b, uint64_t now_ms,
				uint64_t *cooldown_left_ms)
{
	uint64_t left = 0;
	enum core_breaker st = (enum core_breaker)b->state;

	if (st == CORE_BREAKER_OPEN) {
		if (now_ms < b->open_until_ms)
			left = b->open_until_ms - now_ms;
		else
			st = CORE_BREAKER_HALF_OPEN;
	}
	if (cooldown_left_ms)
		*cooldown_left_ms = left;
	return st;
}

void breaker_restore(struct breaker *b, enum core_breaker st, uint32_t trips,
		     uint64_t cooldown_left_ms, uint64_t now_ms)
{
	breaker_init(b, now_ms);
	b->trips = trips;
	if (st == CORE_BREAKER_OPEN) {
		b->state = CORE_BREAKER_OPEN;
		b->open_until_ms = now_ms + cooldown_left_ms;
	} else if (st == CORE_BREAKER_HALF_OPEN) {
		b->state = CORE_BREAKER_HALF_OPEN;
		b->last_probe_ms = now_ms;
	}
}
