/* budget.h - a retry budget: over a sliding window, retries at most a ratio of first attempts plus a floor per second. */
#ifndef WARMLANE_CORE_BUDGET_H
#define WARMLANE_CORE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

/* The window is BUDGET_BUCKETS buckets of window_ms / BUDGET_BUCKETS each:
 * a count ages out at most one bucket late, never early. */
#define BUDGET_BUCKETS 10

/* What the budget allows (agent/config_check.c checks the ranges). */
struct budget_params {
	double ratio;        /* retries per first attempt, >= 0 (0.2) */
	double min_per_s;    /* retries per second whatever the traffic, >= 0 */
	uint64_t window_ms;  /* >= BUDGET_BUCKETS (one ms per bucket) */
};

/* One budget (one backend). Counts are of requests that ended: HAProxy's
 * log line says how many retries each took, so a request is one first
 * attempt and its `%rc` retries at once. Plain counters, no allocation:
 * the caller embeds it. */
struct budget {
	uint8_t head;              /* index of the newest bucket */
	uint64_t bucket_start_ms;  /* start of the newest bucket */
	uint32_t first[BUDGET_BUCKETS];
	uint32_t retries[BUDGET_BUCKETS];
};

/* Empties b; its newest bucket starts at now_ms. */
void budget_init(struct budget *b, uint64_t now_ms);

/* One request ended at now_ms after `retries` retries: one first attempt
 * and that many retries enter the newest bucket (saturating). now_ms must
 * not decrease from one call to the next on b (an earlier time counts in
 * the newest bucket). */
void budget_record(struct budget *b, const struct budget_params *p,
		   uint32_t retries, uint64_t now_ms);

/* First attempts and retries in the window ending at now_ms. */
void budget_counts(const struct budget *b, const struct budget_params *p,
		   uint64_t now_ms, uint64_t *first, uint64_t *retries);

/* Retries the window allows with `first` first attempts in it:
 * ratio x first + min_per_s x the window in seconds. */
double budget_allowance(const struct budget_params *p, uint64_t first);

/* True when the window ending at now_ms holds as many retries as it allows
 * or more: one more retry would overdraw it. With ratio and floor both 0,
 * always true (retries off). */
bool budget_spent(const struct budget *b, const struct budget_params *p,
		  uint64_t now_ms);

#endif
