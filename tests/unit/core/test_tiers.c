/* test_tiers.c - failover tiers: the best tier with an eligible endpoint, every exclusion that leaves it, the spill bound, sessions going back (tier.h). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fixture.h"
#include "tier.h"
#include "trace.h"

/* Two tier-1 endpoints (a0, a1: key ids, so that dead keys apply), two
 * tier-2 ones (b0, b1: weight 2, costlier). */
struct tfx {
	struct fx f;
	int a[2], b[2];
};

static int tfx_add(struct fx *f, const char *server, const char *key,
		   double weight, unsigned tier, double cost)
{
	static const char *const models[] = { "m" };
	struct core_endpoint_config cfg = {
		.backend = tier == 2 ? "api" : "gpu", .server = server,
		.key_id = key, .weight = weight, .cost_per_mtok = cost,
		.tier = tier, .models = models, .n_models = 1,
	};
	int idx = core_endpoint_add(f->c, &cfg, f->now);
	ck_assert_int_ge(idx, 0);
	return idx;
}

static void tfx_init(struct tfx *t, const struct core_params *p)
{
	fx_init(&t->f, 0, p);
	t->a[0] = tfx_add(&t->f, "a0", "ka", 1, 1, 0);
	t->a[1] = tfx_add(&t->f, "a1", "ka", 1, 0, 0); /* tier 0 means 1 */
	t->b[0] = tfx_add(&t->f, "b0", "kb", 2, 2, 3);
	t->b[1] = tfx_add(&t->f, "b1", "kb", 2, 2, 3);
}

/* Answers as log lines (HAProxy 2.6) rather than feedback. */
static bool tfx_lines;

static bool is_b(const struct tfx *t, int ep)
{
	return ep == t->b[0] || ep == t->b[1];
}

/* n requests (sessions from base, or anonymous when base is UINT64_MAX),
 * each ended at once with 200; returns how many went to tier 2, all of
 * them with reason failover. */
static int tfx_run(struct tfx *t, uint64_t base, int n)
{
	int to_b = 0;
	for (int i = 0; i < n; i++) {
		struct core_request r = base == UINT64_MAX ?
			(struct core_request){ 0 } : fx_session(base + (uint64_t)i);
		struct core_decision d = fx_decide(&t->f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		if (is_b(t, d.endpoint)) {
			to_b++;
			ck_assert_str_eq(core_reason_name(d.reason), "failover");
		} else {
			ck_assert_int_ne(d.reason, CORE_REASON_FAILOVER);
		}
		fx_feedback(&t->f, &d, 200, 50, false);
		core_endpoint_complete(t->f.c, d.endpoint);
	}
	return to_b;
}

START_TEST(healthy_tier1_takes_everything)
{
	struct tfx t;
	tfx_init(&t, NULL);
	ck_assert_uint_eq(fx_info(&t.f, t.a[1]).tier, 1);
	ck_assert_uint_eq(fx_info(&t.f, t.b[0]).tier, 2);
	/* Tier 2 weighs more and costs nothing to rendezvous: without tiers
	 * it would take most keys. */
	ck_assert_int_eq(tfx_run(&t, 0, 400), 0);
	ck_assert_int_eq(tfx_run(&t, UINT64_MAX, 200), 0);
	/* One tier-1 endpoint out is not a failover: the other serves. */
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_MAINT, 0, t.f.now);
	ck_assert_int_eq(tfx_run(&t, 0, 400), 0);
	struct core_stats st;
	core_stats(t.f.c, &st);
	ck_assert_uint_eq(st.tier_decisions[0], 1000);
	ck_assert_uint_eq(st.tier_decisions[1], 0);
	ck_assert_uint_eq(st.decisions[CORE_REASON_FAILOVER], 0);
	fx_finish(&t.f);
}
END_TEST

/* The exclusions of view_build, each applied to both tier-1 endpoints. */
enum excl {
	EXCL_BREAKER,   /* 5xx: breaker OPEN */
	EXCL_RATE,      /* 429 with Retry-After */
	EXCL_ADMIN,     /* HAProxy: DOWN */
	EXCL_DISABLED,  /* config: disabled */
	EXCL_DEAD_KEY,  /* a refused probe */
	EXCL_MISMATCH,  /* 404s for the model */
	EXCL_FULL,      /* in flight over tier_spill x weight */
	EXCL_COUNT
};

static void exclude(struct tfx *t, int ep, enum excl x)
{
	struct fx *f = &t->f;
	switch (x) {
	case EXCL_BREAKER:
		for (int i = 0; i < 5; i++)
			ck_assert_int_eq(fx_observe(f, ep, 503, 10, false, 0, false), 0);
		ck_assert_int_eq(fx_info(f, ep).breaker, CORE_BREAKER_OPEN);
		break;
	case EXCL_RATE: {
		struct core_feedback fb = {
			.endpoint = ep, .status = 429, .tr_ms = 5,
			.retry_after_ms = 20000,
		};
		ck_assert_int_eq(core_observe(f->c, &fb, f->now), 0);
		ck_assert_int_eq(fx_info(f, ep).breaker, CORE_BREAKER_OPEN);
		break;
	}
	case EXCL_ADMIN:
		core_endpoint_sync(f->c, ep, CORE_ADMIN_DOWN, 0, f->now);
		break;
	case EXCL_DISABLED: {
		struct core_endpoint_info in = fx_info(f, ep);
		static const char *const models[] = { "m" };
		struct core_endpoint_config cfg = {
			.backend = in.backend, .server = in.server,
			.key_id = in.key_id, .weight = 1, .tier = 1,
			.models = models, .n_models = 1, .disabled = true,
		};
		ck_assert_int_eq(core_endpoint_update(f->c, ep, &cfg), 0);
		break;
	}
	case EXCL_DEAD_KEY:
		ck_assert_int_eq(fx_observe(f, ep, 401, 5, false, 0, false), 0);
		ck_assert_int_eq(core_key_probe_next(f->c, f->now), ep);
		ck_assert_int_eq(core_key_probe_result(f->c, ep, CORE_PROBE_REFUSED,
						       f->now), 0);
		ck_assert(fx_info(f, ep).key_dead);
		break;
	case EXCL_MISMATCH: {
		struct core_feedback fb = {
			.endpoint = ep, .status = 404, .tr_ms = 3,
			.retry_after_ms = -1, .model = core_str_c("m"),
		};
		for (int i = 0; i < 3; i++)
			ck_assert_int_eq(core_observe(f->c, &fb, f->now), 0);
		break;
	}
	case EXCL_FULL:
		core_endpoint_sync(f->c, ep, CORE_ADMIN_ENABLED, 8, f->now);
		break;
	default:
		ck_abort();
	}
}

START_TEST(every_exclusion_fails_over)
{
	enum excl x = (enum excl)_i;
	struct core_params p;
	core_params_defaults(&p);
	p.key_probe = true;
	p.tier_spill = 8; /* EXCL_FULL: 8 in flight per unit of weight */
	struct tfx t;
	tfx_init(&t, &p);
	/* The model named by the requests (the 404s are for it). */
	struct core_request r = fx_session(7);
	r.model = core_str_c("m");

	/* One tier-1 endpoint excluded: tier 1 still serves. */
	exclude(&t, t.a[0], x);
	for (int i = 0; i < 50; i++) {
		r.session.hash = 1000 + (uint64_t)i;
		struct core_decision d = fx_decide(&t.f, &r);
		ck_assert_int_eq(d.endpoint, t.a[1]);
		ck_assert_int_ne(d.reason, CORE_REASON_FAILOVER);
		core_endpoint_complete(t.f.c, d.endpoint);
	}
	/* Both: tier 2 takes the requests, as failovers. */
	exclude(&t, t.a[1], x);
	int to_b = 0;
	for (int i = 0; i < 100; i++) {
		r.session.hash = 2000 + (uint64_t)i;
		struct core_decision d = fx_decide(&t.f, &r);
		if (x == EXCL_FULL) {
			/* Full spills: both tiers are candidates, and the
			 * tier-1 endpoints stay over the bound. */
			core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_ENABLED, 8, t.f.now);
			core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_ENABLED, 8, t.f.now);
		} else {
			core_endpoint_complete(t.f.c, d.endpoint);
		}
		if (is_b(&t, d.endpoint)) {
			to_b++;
			ck_assert_int_eq(d.reason, CORE_REASON_FAILOVER);
			ck_assert_str_eq(d.backend, "api");
		}
	}
	/* Spilled, tier 1 keeps what its load bound lets it take. */
	int want = x == EXCL_FULL ? 50 : 100;
	ck_assert_int_ge(to_b, want);
	struct core_stats st;
	core_stats(t.f.c, &st);
	ck_assert_uint_eq(st.tier_decisions[1], (uint64_t)to_b);
	ck_assert_uint_eq(st.decisions[CORE_REASON_FAILOVER], (uint64_t)to_b);
	fx_finish(&t.f);
}
END_TEST

/* Full is per weight, and off by default: the same load with tier_spill 0
 * stays in tier 1; just under the bound too. */
START_TEST(spill_bound_per_weight)
{
	struct tfx t;
	tfx_init(&t, NULL);
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_ENABLED, 500, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_ENABLED, 500, t.f.now);
	ck_assert_int_eq(tfx_run(&t, 0, 100), 0);
	fx_finish(&t.f);

	struct core_params p;
	core_params_defaults(&p);
	p.tier_spill = 8;
	tfx_init(&t, &p);
	/* 15 in flight over a weight of 2: under 16. */
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_ENABLED, 8, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_ENABLED, 7, t.f.now);
	struct core_request r = fx_session(3);
	struct core_decision d = fx_decide(&t.f, &r);
	ck_assert(!is_b(&t, d.endpoint));
	/* That decision made it 16: full, tier 2 joins. */
	int to_b = 0;
	for (uint64_t k = 0; k < 100; k++) {
		r = fx_session(100 + k);
		d = fx_decide(&t.f, &r);
		to_b += is_b(&t, d.endpoint);
		core_endpoint_complete(t.f.c, d.endpoint);
	}
	ck_assert_int_gt(to_b, 50);
	fx_finish(&t.f);

	/* The pure bound. */
	struct tier_sums s = { .n = { 2, 2 }, .closed = { 2, 2 },
			       .w = { 2, 4 }, .in_flight = { 15, 0 } };
	ck_assert_uint_eq(tier_limit(&s, 8), 1);
	s.in_flight[0] = 16;
	ck_assert(tier_full(&s, 1, 8));
	ck_assert_uint_eq(tier_limit(&s, 8), 2);
	ck_assert_uint_eq(tier_limit(&s, 0), 1);
	s.in_flight[1] = 32; /* both full: the worst is used with the rest */
	ck_assert_uint_eq(tier_limit(&s, 8), 2);
	s.n[0] = 0;
	s.in_flight[1] = 0;
	ck_assert_uint_eq(tier_limit(&s, 8), 2);
	s.n[1] = 0;
	ck_assert_uint_eq(tier_limit(&s, 8), 0);
}
END_TEST

/* A session warm on tier 2 during an outage of tier 1 goes back once a
 * tier-1 breaker closed on its half-open probes (not when the probes are
 * admitted); tier_return holds it longer. */
START_TEST(session_returns_after_probes)
{
	struct core_params p;
	core_params_defaults(&p);
	p.tier_return_ms = (uint64_t)_i * 5000;
	struct tfx t;
	tfx_init(&t, &p);
	struct core_request s = fx_session(42);
	ck_assert_int_eq(tfx_run(&t, 42, 1), 0);
	exclude(&t, t.a[0], EXCL_BREAKER);
	exclude(&t, t.a[1], EXCL_BREAKER);
	struct core_decision d = fx_decide(&t.f, &s);
	ck_assert(is_b(&t, d.endpoint));
	fx_feedback(&t.f, &d, 200, 80, false);
	core_endpoint_complete(t.f.c, d.endpoint);
	int home = d.endpoint;
	for (int i = 0; i < 20; i++) {
		d = fx_decide(&t.f, &s);
		ck_assert_int_eq(d.endpoint, home);
		ck_assert_int_eq(d.reason, CORE_REASON_FAILOVER);
		fx_feedback(&t.f, &d, 200, 80, false);
		core_endpoint_complete(t.f.c, d.endpoint);
	}
	/* The cooldown ends: HALF_OPEN. The session stays on tier 2 while
	 * new keys are the probes. */
	t.f.now += p.breaker_cooldown_ms;
	int probes = 0;
	for (uint64_t k = 0; fx_info(&t.f, t.a[0]).breaker != CORE_BREAKER_CLOSED &&
			     fx_info(&t.f, t.a[1]).breaker != CORE_BREAKER_CLOSED; k++) {
		ck_assert_uint_lt(k, 100);
		d = fx_decide(&t.f, &s);
		ck_assert_int_eq(d.endpoint, home);
		fx_feedback(&t.f, &d, 200, 80, false);
		core_endpoint_complete(t.f.c, d.endpoint);
		struct core_request n = fx_session(5000 + k);
		d = fx_decide(&t.f, &n);
		if (!is_b(&t, d.endpoint)) {
			probes++;
			ck_assert_int_ne(d.reason, CORE_REASON_FAILOVER);
		}
		fx_feedback(&t.f, &d, 200, 50, false);
		core_endpoint_complete(t.f.c, d.endpoint);
	}
	/* A breaker closes on half_open_probes successes; the probes of the
	 * other endpoint interleave. */
	ck_assert_int_ge(probes, (int)p.half_open_probes);
	ck_assert_int_le(probes, 2 * (int)p.half_open_probes);
	/* Closed: back at once (tier_return 0), or only after tier_return. */
	if (p.tier_return_ms > 0) {
		d = fx_decide(&t.f, &s);
		ck_assert_int_eq(d.endpoint, home);
		core_endpoint_complete(t.f.c, d.endpoint);
		t.f.now += p.tier_return_ms - 1;
		d = fx_decide(&t.f, &s);
		ck_assert_int_eq(d.endpoint, home);
		core_endpoint_complete(t.f.c, d.endpoint);
		t.f.now += 1;
	}
	d = fx_decide(&t.f, &s);
	ck_assert(!is_b(&t, d.endpoint));
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	fx_finish(&t.f);
}
END_TEST

/* A session warm on a tier-1 endpoint that is not its rendezvous choice
 * (moved there, or placed by load) fails over to tier 2 and, when tier 1
 * is back, goes home to that endpoint, where its cache is: reason
 * affinity, and explain names the home. A session that failed over from
 * its rendezvous choice goes back there too. With _i 1, the answers come
 * as HAProxy 2.6's log lines (no feedback): the same. */
static void tfx_ok(struct tfx *t, const struct core_decision *d)
{
	if (tfx_lines) {
		struct core_completion cc = {
			.endpoint = d->endpoint, .status = 200, .tr_ms = 50,
			.total_ms = 60, .end = CORE_END_COMPLETE,
			.has_akey = d->has_akey, .akey = d->akey,
		};
		ck_assert_int_eq(core_complete(t->f.c, &cc, t->f.now), 0);
	} else {
		ck_assert_int_eq(fx_feedback(&t->f, d, 200, 50, false), 0);
		core_endpoint_complete(t->f.c, d->endpoint);
	}
}

START_TEST(session_goes_home_after_failover)
{
	tfx_lines = _i == 1;
	struct tfx t;
	tfx_init(&t, NULL);
	struct core_request s = fx_session(42);
	/* Its rendezvous choice first, found on a copy of the session. */
	struct core_decision d = fx_decide(&t.f, &s);
	ck_assert(!is_b(&t, d.endpoint));
	core_endpoint_complete(t.f.c, d.endpoint);
	int first = d.endpoint, home = first == t.a[0] ? t.a[1] : t.a[0];
	/* Its choice down at its first request: the other is its home. */
	core_endpoint_sync(t.f.c, first, CORE_ADMIN_DOWN, 0, t.f.now);
	d = fx_decide(&t.f, &s);
	ck_assert_int_eq(d.endpoint, home);
	tfx_ok(&t, &d);
	core_endpoint_sync(t.f.c, first, CORE_ADMIN_ENABLED, 0, t.f.now);
	d = fx_decide(&t.f, &s);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	tfx_ok(&t, &d);
	/* Tier 1 down: tier 2 carries it, warm there. */
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_DOWN, 0, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_DOWN, 0, t.f.now);
	int away = -1;
	for (int i = 0; i < 5; i++) {
		t.f.now += 10000;
		d = fx_decide(&t.f, &s);
		ck_assert(is_b(&t, d.endpoint));
		ck_assert(away < 0 || d.endpoint == away);
		away = d.endpoint;
		tfx_ok(&t, &d);
	}
	/* Back: home, not the rendezvous choice. */
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_ENABLED, 0, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_ENABLED, 0, t.f.now);
	struct core_trace *tr = malloc(sizeof(*tr));
	ck_assert_ptr_nonnull(tr);
	struct core_rng rng = t.f.rng;
	struct core_decision x;
	ck_assert_int_eq(core_explain(t.f.c, &s, t.f.now, &rng, &x, tr), 0);
	ck_assert_int_eq(tr->entry_endpoint, away);
	ck_assert_int_eq(tr->home_endpoint, home);
	free(tr);
	d = fx_decide(&t.f, &s);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(d.endpoint, x.endpoint);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	tfx_ok(&t, &d);
	d = fx_decide(&t.f, &s);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	core_endpoint_complete(t.f.c, d.endpoint);

	/* A session at its rendezvous choice goes back there. */
	struct core_request r = fx_session(43);
	d = fx_decide(&t.f, &r);
	int own = d.endpoint;
	tfx_ok(&t, &d);
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_DOWN, 0, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_DOWN, 0, t.f.now);
	d = fx_decide(&t.f, &r);
	ck_assert(is_b(&t, d.endpoint));
	tfx_ok(&t, &d);
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_ENABLED, 0, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_ENABLED, 0, t.f.now);
	d = fx_decide(&t.f, &r);
	ck_assert_int_eq(d.endpoint, own);
	core_endpoint_complete(t.f.c, d.endpoint);
	fx_finish(&t.f);
}
END_TEST

/* A flapping primary: within tier_return a new outage keeps the session
 * where it is, and the timer starts again from the next recovery. */
START_TEST(flapping_primary_does_not_bounce)
{
	struct core_params p;
	core_params_defaults(&p);
	p.tier_return_ms = 30000;
	struct tfx t;
	tfx_init(&t, &p);
	struct core_request s = fx_session(9);
	exclude(&t, t.a[0], EXCL_ADMIN);
	exclude(&t, t.a[1], EXCL_ADMIN);
	struct core_decision d = fx_decide(&t.f, &s);
	ck_assert(is_b(&t, d.endpoint));
	fx_feedback(&t.f, &d, 200, 80, false);
	core_endpoint_complete(t.f.c, d.endpoint);
	int home = d.endpoint;
	int moves = 0, last = home;
	for (int flap = 0; flap < 6; flap++) {
		/* Up for 10 s, down for 2 s, with a request each second. */
		for (int sec = 0; sec < 12; sec++) {
			enum core_admin ad = sec < 10 ? CORE_ADMIN_ENABLED : CORE_ADMIN_DOWN;
			core_endpoint_sync(t.f.c, t.a[0], ad, 0, t.f.now);
			core_endpoint_sync(t.f.c, t.a[1], ad, 0, t.f.now);
			d = fx_decide(&t.f, &s);
			moves += d.endpoint != last;
			last = d.endpoint;
			fx_feedback(&t.f, &d, 200, 80, false);
			core_endpoint_complete(t.f.c, d.endpoint);
			t.f.now += 1000;
		}
	}
	ck_assert_int_eq(moves, 0);
	ck_assert_int_eq(last, home);
	/* Stable for tier_return: the session goes home to tier 1. */
	core_endpoint_sync(t.f.c, t.a[0], CORE_ADMIN_ENABLED, 0, t.f.now);
	core_endpoint_sync(t.f.c, t.a[1], CORE_ADMIN_ENABLED, 0, t.f.now);
	d = fx_decide(&t.f, &s);
	ck_assert_int_eq(d.endpoint, home);
	core_endpoint_complete(t.f.c, d.endpoint);
	t.f.now += p.tier_return_ms;
	d = fx_decide(&t.f, &s);
	ck_assert(!is_b(&t, d.endpoint));
	fx_finish(&t.f);
}
END_TEST

/* One tier only, whichever: decisions as without tiers (never failover). */
START_TEST(single_tier_is_untiered)
{
	struct fx a, b;
	fx_init(&a, 0, NULL);
	fx_init(&b, 0, NULL);
	for (int i = 0; i < 5; i++) {
		char name[8];
		snprintf(name, sizeof(name), "s%d", i);
		struct core_endpoint_config cfg = {
			.backend = "be", .server = name, .weight = 1 + i % 2,
		};
		ck_assert_int_eq(core_endpoint_add(a.c, &cfg, a.now), i);
		cfg.tier = 3;
		ck_assert_int_eq(core_endpoint_add(b.c, &cfg, b.now), i);
	}
	for (uint64_t k = 0; k < 500; k++) {
		struct core_request r = k % 3 ? fx_session(k % 97) : (struct core_request){ 0 };
		struct core_decision da = fx_decide(&a, &r), db = fx_decide(&b, &r);
		ck_assert_int_eq(da.endpoint, db.endpoint);
		ck_assert_int_eq(da.reason, db.reason);
		ck_assert_int_ne(db.reason, CORE_REASON_FAILOVER);
		int st = k % 11 == 0 ? 503 : 200;
		fx_feedback(&a, &da, st, 40 + (int64_t)(k % 7), false);
		fx_feedback(&b, &db, st, 40 + (int64_t)(k % 7), false);
		if (k % 2) {
			core_endpoint_complete(a.c, da.endpoint);
			core_endpoint_complete(b.c, db.endpoint);
		}
		a.now += 10;
		b.now += 10;
	}
	struct core_stats sb;
	core_stats(b.c, &sb);
	ck_assert_uint_eq(sb.tier_decisions[2], 500);
	fx_finish(&a);
	fx_finish(&b);
}
END_TEST

START_TEST(tier_out_of_range_rejected)
{
	struct fx f;
	fx_init(&f, 0, NULL);
	struct core_endpoint_config cfg = {
		.backend = "be", .server = "s", .weight = 1,
		.tier = CORE_TIER_MAX + 1,
	};
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EINVAL);
	cfg.tier = CORE_TIER_MAX;
	int i = core_endpoint_add(f.c, &cfg, f.now);
	ck_assert_int_ge(i, 0);
	cfg.tier = CORE_TIER_MAX + 1;
	ck_assert_int_eq(core_endpoint_update(f.c, i, &cfg), -EINVAL);
	ck_assert_uint_eq(fx_info(&f, i).tier, CORE_TIER_MAX);
	struct core_params p;
	core_params_defaults(&p);
	p.tier_spill = -1;
	ck_assert_int_eq(core_set_params(f.c, &p), -EINVAL);
	fx_finish(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tiers");
	TCase *tc = tcase_create("tiers");
	tcase_add_test(tc, healthy_tier1_takes_everything);
	tcase_add_loop_test(tc, every_exclusion_fails_over, 0, EXCL_COUNT);
	tcase_add_test(tc, spill_bound_per_weight);
	tcase_add_loop_test(tc, session_returns_after_probes, 0, 2);
	tcase_add_loop_test(tc, session_goes_home_after_failover, 0, 2);
	tcase_add_test(tc, flapping_primary_does_not_bounce);
	tcase_add_test(tc, single_tier_is_untiered);
	tcase_add_test(tc, tier_out_of_range_rejected);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
