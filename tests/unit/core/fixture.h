/* fixture.h - core tests: a core with named endpoints, a fake clock and a seeded RNG. */
#ifndef WARMLANE_TEST_CORE_FIXTURE_H
#define WARMLANE_TEST_CORE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

#define FX_MAX 64

struct fx {
	struct core *c;
	struct core_params p;
	struct core_rng rng;
	uint64_t now;          /* fake monotonic clock, ms */
	int ep[FX_MAX];        /* indices of s0..s(n-1) */
	int n;
};

/* A core with n endpoints "be/s<i>" of weight 1 serving every model, with
 * p (NULL: defaults), the clock at 1,000,000 ms and the RNG seeded with 42.
 * Aborts the test on failure. */
void fx_init(struct fx *f, int n, const struct core_params *p);
void fx_finish(struct fx *f);

/* Adds "be/<server>" (key, models may be NULL) and returns its index. */
int fx_add(struct fx *f, const char *server, const char *key, double weight,
	   const char *model);

/* A request whose only identity is a session hash. */
struct core_request fx_session(uint64_t session);

/* Decides req at f->now. */
struct core_decision fx_decide(struct fx *f, const struct core_request *req);

/* Feeds back status for decision d (its endpoint and akey). */
int fx_feedback(struct fx *f, const struct core_decision *d, int status,
		int64_t tr_ms, bool stream);

/* Same, for an endpoint and optional akey. */
int fx_observe(struct fx *f, int ep, int status, int64_t tr_ms,
	       bool has_akey, uint64_t akey, bool stream);

/* Makes endpoint ep warm (samples successes of tr_ms, both kinds). */
void fx_warm(struct fx *f, int ep, int64_t tr_ms, int samples);

/* Index i of f whose server is name, or -1. */
int fx_which(const struct fx *f, int ep);

/* Endpoint state at f->now. */
struct core_endpoint_info fx_info(const struct fx *f, int ep);

#endif
