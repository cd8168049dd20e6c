/* fixture.c - core tests: a core with named endpoints, a fake clock and a seeded RNG. */
#include "fixture.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

void fx_init(struct fx *f, int n, const struct core_params *p)
{
	memset(f, 0, sizeof(*f));
	if (p)
		f->p = *p;
	else
		core_params_defaults(&f->p);
	ck_assert_int_eq(core_create(&f->c, &f->p), 0);
	core_rng_seed(&f->rng, 42);
	f->now = 1000000;
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "s%d", i);
		f->ep[i] = fx_add(f, name, NULL, 1.0, NULL);
	}
	f->n = n;
}

void fx_finish(struct fx *f)
{
	core_destroy(f->c);
	f->c = NULL;
}

int fx_add(struct fx *f, const char *server, const char *key, double weight,
	   const char *model)
{
	const char *models[1] = { model };
	struct core_endpoint_config cfg = {
		.backend = "be", .server = server, .key_id = key,
		.models = model ? models : NULL, .n_models = model ? 1 : 0,
		.weight = weight,
	};
	int idx = core_endpoint_add(f->c, &cfg, f->now);
	ck_assert_int_ge(idx, 0);
	return idx;
}

struct core_request fx_session(uint64_t session)
{
	return (struct core_request){ .session = { true, session } };
}

struct core_decision fx_decide(struct fx *f, const struct core_request *req)
{
	struct core_decision d;
	core_decide(f->c, req, f->now, &f->rng, &d);
	return d;
}

int fx_observe(struct fx *f, int ep, int status, int64_t tr_ms,
	       bool has_akey, uint64_t akey, bool stream)
{
	struct core_feedback fb = {
		.endpoint = ep, .status = status, .tr_ms = tr_ms,
		.retry_after_ms = -1, .stream = stream,
		.has_akey = has_akey, .akey = akey,
	};
	return core_observe(f->c, &fb, f->now);
}

int fx_feedback(struct fx *f, const struct core_decision *d, int status,
		int64_t tr_ms, bool stream)
{
	return fx_observe(f, d->endpoint, status, tr_ms, d->has_akey, d->akey,
			  stream);
}

void fx_warm(struct fx *f, int ep, int64_t tr_ms, int samples)
{
	for (int i = 0; i < samples; i++) {
		ck_assert_int_eq(fx_observe(f, ep, 200, tr_ms, false, 0, false), 0);
		ck_assert_int_eq(fx_observe(f, ep, 200, tr_ms, false, 0, true), 0);
	}
}

int fx_which(const struct fx *f, int ep)
{
	for (int i = 0; i < f->n; i++)
		if (f->ep[i] == ep)
			return i;
	return -1;
}

struct core_endpoint_info fx_info(const struct fx *f, int ep)
{
	struct core_endpoint_info info;
	ck_assert_int_eq(core_endpoint_info(f->c, ep, f->now, &info), 0);
	return info;
}
