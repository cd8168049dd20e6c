/* test_engine.c - engine load in the core: the engine's count between polls plus this agent's own, staleness, the runtime API taking over. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"
#include "routers.h"
#include "trace.h"

static struct core_completion end_of(int ep)
{
	return (struct core_completion){ .endpoint = ep, .status = 200,
					 .end = CORE_END_COMPLETE,
					 .feedback_seen = true };
}

/* The engine's count, plus this agent's decisions minus its ends since
 * the sample; the runtime API's view is kept aside meanwhile. */
START_TEST(engine_count_plus_own)
{
	struct fx f;
	fx_init(&f, 1, NULL);
	int e = f.ep[0];
	ck_assert_int_eq(core_endpoint_sync(f.c, e, CORE_ADMIN_ENABLED, 1, f.now), 0);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 1);
	ck_assert_int_eq(core_endpoint_engine(f.c, e, true, 10, 0.25, f.now), 0);
	struct core_endpoint_info in = fx_info(&f, e);
	ck_assert_uint_eq(in.in_flight, 10);
	ck_assert(in.engine_fresh);
	ck_assert_uint_eq(in.engine_load, 10);
	ck_assert(in.engine_kv == 0.25);
	ck_assert_uint_eq(in.engine_age_ms, 0);
	/* Own decisions add, own ends take off. */
	struct core_request rq = fx_session(7);
	struct core_decision d = fx_decide(&f, &rq);
	ck_assert_int_eq(d.endpoint, e);
	d = fx_decide(&f, &rq);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 12);
	struct core_completion cc = end_of(e);
	ck_assert_int_eq(core_complete(f.c, &cc, f.now), 0);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 11);
	/* The runtime API's poll changes the local view only. */
	ck_assert_int_eq(core_endpoint_sync(f.c, e, CORE_ADMIN_ENABLED, 3, f.now), 0);
	in = fx_info(&f, e);
	ck_assert_uint_eq(in.in_flight, 11);
	ck_assert_uint_eq(in.local_in_flight, 3);
	/* A new sample replaces the count and forgets the own delta. */
	f.now += 200;
	ck_assert_int_eq(core_endpoint_engine(f.c, e, true, 4, -1, f.now), 0);
	in = fx_info(&f, e);
	ck_assert_uint_eq(in.in_flight, 4);
	ck_assert(in.engine_kv == -1);
	ck_assert_uint_eq(in.engine_polls_ok, 2);
	/* Ends of requests the sample counted: never below 0. */
	ck_assert_int_eq(core_endpoint_engine(f.c, e, true, 0, -1, f.now), 0);
	ck_assert_int_eq(core_complete(f.c, &cc, f.now), 0);
	ck_assert_int_eq(core_endpoint_complete(f.c, e), 0);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 0);
	fx_finish(&f);
}
END_TEST

/* Past engine_max_age_ms the sample is ignored: the runtime API's poll
 * (or core_engine_expire) puts its own view back. */
START_TEST(stale_sample_gives_way)
{
	struct fx f;
	fx_init(&f, 2, NULL);
	ck_assert_uint_eq(f.p.engine_max_age_ms, 2000);
	int a = f.ep[0], b = f.ep[1];
	core_endpoint_sync(f.c, a, CORE_ADMIN_ENABLED, 2, f.now);
	core_endpoint_sync(f.c, b, CORE_ADMIN_ENABLED, 5, f.now);
	core_endpoint_engine(f.c, a, true, 9, -1, f.now);
	core_endpoint_engine(f.c, b, true, 9, -1, f.now);
	/* Failed polls are counted and change nothing: the sample ages. */
	f.now += 1500;
	ck_assert_int_eq(core_endpoint_engine(f.c, a, false, 0, -1, f.now), 0);
	ck_assert_uint_eq(fx_info(&f, a).in_flight, 9);
	ck_assert_uint_eq(fx_info(&f, a).engine_polls_failed, 1);
	ck_assert_uint_eq(fx_info(&f, a).engine_age_ms, 1500);
	/* Exactly 2 s old: still fresh. */
	f.now += 500;
	ck_assert_uint_eq(core_engine_expire(f.c, f.now), 0);
	core_endpoint_sync(f.c, a, CORE_ADMIN_ENABLED, 2, f.now);
	ck_assert_uint_eq(fx_info(&f, a).in_flight, 9);
	/* One millisecond later: the runtime API's poll takes over for a,
	 * the expiry for b. */
	f.now += 1;
	core_endpoint_sync(f.c, a, CORE_ADMIN_ENABLED, 2, f.now);
	struct core_endpoint_info in = fx_info(&f, a);
	ck_assert(!in.engine_fresh);
	ck_assert_uint_eq(in.in_flight, 2);
	ck_assert_uint_eq(in.engine_stale, 1);
	ck_assert_uint_eq(fx_info(&f, b).in_flight, 9);
	ck_assert_uint_eq(core_engine_expire(f.c, f.now), 1);
	ck_assert_uint_eq(fx_info(&f, b).in_flight, 5);
	ck_assert_uint_eq(core_engine_expire(f.c, f.now + 10000), 0);
	/* A clock behind the sample (never in the agent) is not "old". */
	core_endpoint_engine(f.c, a, true, 7, -1, f.now);
	ck_assert_uint_eq(core_engine_expire(f.c, f.now - 5000), 0);
	ck_assert_uint_eq(fx_info(&f, a).in_flight, 7);
	ck_assert_int_eq(core_endpoint_engine(f.c, 99, true, 1, -1, f.now), -ENOENT);
	fx_finish(&f);
}
END_TEST

/* Without a runtime API the local view is this agent's own count, kept
 * through the engine's time: it comes back right when the engine goes
 * quiet. */
START_TEST(own_count_survives_engine_view)
{
	struct fx f;
	fx_init(&f, 1, NULL);
	int e = f.ep[0];
	struct core_request rq = fx_session(3);
	fx_decide(&f, &rq);
	fx_decide(&f, &rq);
	core_endpoint_engine(f.c, e, true, 30, -1, f.now);
	fx_decide(&f, &rq);
	struct core_completion cc = end_of(e);
	core_complete(f.c, &cc, f.now);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 30);
	f.now += 2001;
	core_engine_expire(f.c, f.now);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 2);
	fx_finish(&f);
}
END_TEST

/* What it is for: load this agent never saw (another HAProxy's) keeps
 * new sessions off the loaded server. With load_factor 1 and load_floor
 * 1, a server with the engine's 8 takes a new key only once the other has
 * 8 too (9 <= ceil((16 + 1) / 2)): the first 8 sessions all go to the
 * idle one, whatever their hash prefers (rendezvous alone puts about half
 * of them on each). */
START_TEST(foreign_load_steers_placement)
{
	struct fx f;
	struct core_params p;
	core_params_defaults(&p);
	p.load_factor = 1.0;
	p.load_floor = 1;
	fx_init(&f, 2, &p);
	int busy = f.ep[0], idle = f.ep[1];
	core_endpoint_engine(f.c, busy, true, 8, -1, f.now);
	core_endpoint_engine(f.c, idle, true, 0, -1, f.now);
	int on_busy = 0;
	for (uint64_t s = 1; s <= 8; s++) {
		struct core_request rq = fx_session(s * 0x9e3779b97f4a7c15ull);
		struct core_decision d = fx_decide(&f, &rq);
		on_busy += d.endpoint == busy;
	}
	ck_assert_int_eq(on_busy, 0);
	ck_assert_uint_eq(fx_info(&f, idle).in_flight, 8);
	ck_assert_uint_eq(fx_info(&f, busy).in_flight, 8);
	fx_finish(&f);
}
END_TEST

/* One engine sample per endpoint at f->now: this HAProxy counting own,
 * the engine engine, on each. */
static void routers_samples(struct fx *f, uint32_t own, uint32_t engine)
{
	for (int i = 0; i < f->n; i++) {
		ck_assert_int_eq(core_endpoint_sync(f->c, f->ep[i], CORE_ADMIN_ENABLED,
						    own, f->now), 0);
		ck_assert_int_eq(core_endpoint_engine(f->c, f->ep[i], true, engine,
						      -1, f->now), 0);
	}
}

static struct core_routers_info routers_of(const struct fx *f)
{
	struct core_routers_info r;
	core_routers_info(f->c, &r);
	return r;
}

/* policy.routers auto: alone while this HAProxy carries the engines'
 * load and its agent decided 30 requests in the window; no longer once
 * its share is under 0.6; the verdict kept without load to judge. */
START_TEST(routers_alone_by_the_engines_counts)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_routers_info r = routers_of(&f);
	ck_assert(!r.alone && r.share == -1);
	ck_assert_uint_eq(r.ttl_ms, 300 * 1000);
	/* The engines' counts are this HAProxy's, but no decision yet: a
	 * few long requests are not a share. */
	for (int t = 0; t < 10; t++, f.now += 200)
		routers_samples(&f, 2, 2);
	r = routers_of(&f);
	ck_assert(!r.alone);
	ck_assert(r.share > 0.99 && r.share < 1.01);
	for (uint64_t k = 1; k <= 30; k++) {
		struct core_request rq = fx_session(k * 0x9e3779b97f4a7c15ull);
		fx_decide(&f, &rq);
	}
	routers_samples(&f, 2, 2);
	r = routers_of(&f);
	ck_assert(r.alone);
	ck_assert_uint_eq(r.ttl_ms, 30 * 60 * 1000);
	/* Another HAProxy's requests as many as this one's: the share falls
	 * through the hysteresis (0.6-0.8) within the window (60 s). */
	int t = 0;
	while (routers_of(&f).alone) {
		ck_assert_int_lt(t++, 300);
		f.now += 200;
		routers_samples(&f, 2, 4);
	}
	r = routers_of(&f);
	ck_assert(r.share < 0.6 && r.share > 0.5);
	ck_assert_uint_eq(r.ttl_ms, 300 * 1000);
	ck_assert_int_gt(t, 5);
	/* An idle fleet keeps the verdict. */
	f.now += 3600 * 1000;
	routers_samples(&f, 0, 0);
	ck_assert(!routers_of(&f).alone);
	/* Forced: one, whatever the engines say. */
	struct core_params p;
	core_params_defaults(&p);
	p.routers = CORE_ROUTERS_ONE;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	ck_assert(routers_of(&f).alone);
	p.routers = CORE_ROUTERS_SEVERAL;
	p.alone_affinity_ttl_ms = 1000;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	r = routers_of(&f);
	ck_assert(!r.alone);
	ck_assert_uint_eq(r.ttl_ms, 300 * 1000);
	/* Refused: a routers value out of the enum, a negative z. */
	p.routers = CORE_ROUTERS_COUNT;
	ck_assert_int_eq(core_set_params(f.c, &p), -EINVAL);
	p.routers = CORE_ROUTERS_AUTO;
	p.alone_place_load_z = -1;
	ck_assert_int_eq(core_set_params(f.c, &p), -EINVAL);
	ck_assert(!routers_of(&f).alone);
	fx_finish(&f);
}
END_TEST

/* One request of key's conversation at turn (prefix: the key is the
 * shortest prefix window's instead of a session id), answered. */
static void turn_from(struct fx *f, uint64_t key, uint16_t turn, bool prefix,
		      uint64_t caller)
{
	struct core_request rq = fx_session(key);
	if (prefix) {
		rq.session.present = false;
		rq.prefix[0] = (struct core_id){ .present = true, .hash = key };
	}
	rq.caller = (struct core_id){ .present = caller != 0, .hash = caller };
	rq.turn = turn;
	struct core_decision d = fx_decide(f, &rq);
	ck_assert_int_ge(d.endpoint, 0);
	ck_assert_int_eq(fx_feedback(f, &d, 200, 100, false), 0);
	f->now += 100;
}

static void turn_round(struct fx *f, uint64_t key, uint16_t turn, bool prefix)
{
	turn_from(f, key, turn, prefix, 0);
}

/* policy.routers auto without engine counts or hints: the requests'
 * turns (routers.h, routers_turn). Alone once 50 turns that could have
 * followed a skipped one did not skip; no longer once some skip: another
 * HAProxy routes the conversations' other turns. Turn 2 after 1, a
 * retry, a fork, a key shared by conversations (a short prefix window)
 * say nothing. */
/* routers_several: other HAProxies shown by the engines' counts (a share
 * under 0.6 once there is load to judge) or by the turns (a skip share of
 * 0.10 once 50 have counted); neither before there is enough of either. */
START_TEST(routers_several_when_shown)
{
	struct routers r = { .at_ms = 0 };
	ck_assert(!routers_several(&r));
	routers_note(&r, 5, 10);
	ck_assert(!routers_several(&r)); /* 10 of the 20 engine requests */
	routers_note(&r, 5, 10);
	ck_assert(routers_several(&r));  /* 0.5 of 20 */
	routers_note(&r, 30, 20);
	ck_assert(!routers_several(&r)); /* 40 of 40 */

	struct routers t = { .at_ms = 0 };
	uint16_t turn = 3;
	for (unsigned i = 0; i < ROUTERS_TURN_MIN - 1; i++, turn++)
		routers_turn(&t, turn - 2, turn, 0, 1000); /* every one skips */
	ck_assert(!routers_several(&t));
	routers_turn(&t, turn - 2, turn, 0, 1000);
	ck_assert(routers_several(&t));
	for (unsigned i = 0; i < 200; i++, turn++)
		routers_turn(&t, turn - 1, turn, 0, 1000); /* none skips */
	ck_assert(!routers_several(&t));
}
END_TEST

START_TEST(routers_alone_by_the_turns)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	uint64_t k = 1;
	/* Nothing to judge: conversations of two turns; four turns under
	 * the shortest window's key; retries and forks. */
	for (int i = 0; i < 100; i++, k++) {
		turn_round(&f, k * 0x9e3779b97f4a7c15ull, 1, false);
		turn_round(&f, k * 0x9e3779b97f4a7c15ull, 2, false);
		turn_round(&f, k * 0x9e3779b97f4a7c15ull, 2, false);
	}
	for (int i = 0; i < 100; i++, k++)
		for (uint16_t t = 1; t <= 4; t++)
			turn_round(&f, k * 0x9e3779b97f4a7c15ull, t, true);
	struct core_routers_info r = routers_of(&f);
	ck_assert(!r.alone && !r.turns);
	ck_assert(r.skips == -1);
	/* Conversations of four turns, all here, the third asked twice and
	 * the second again after the fourth: two turns count in each, and the
	 * 50th makes the verdict. */
	for (int i = 0; i < 25; i++, k++) {
		ck_assert(!routers_of(&f).alone);
		uint64_t key = k * 0x9e3779b97f4a7c15ull;
		turn_round(&f, key, 1, false);
		turn_round(&f, key, 2, false);
		turn_round(&f, key, 3, false);
		turn_round(&f, key, 3, false);
		turn_round(&f, key, 4, false);
		turn_round(&f, key, 2, false);
	}
	r = routers_of(&f);
	ck_assert(r.alone && r.turns);
	ck_assert(r.skips == 0);
	ck_assert_uint_eq(r.ttl_ms, 30 * 60 * 1000);
	/* Another HAProxy routes every second turn: this one sees turns 1
	 * and 3 (a new key's entry holds the turn its first request had).
	 * The share crosses 0.10 at the 6th skip (the mean of the 56 turns
	 * counted; of the last 64 from then on). */
	int skipped = 0;
	while (routers_of(&f).alone) {
		ck_assert_int_lt(skipped++, 20);
		uint64_t key = k++ * 0x9e3779b97f4a7c15ull;
		turn_round(&f, key, 1, false);
		turn_round(&f, key, 3, false);
	}
	ck_assert_int_eq(skipped, 6);
	r = routers_of(&f);
	ck_assert(!r.turns);
	ck_assert(r.skips >= 0.10 && r.skips < 0.11);
	ck_assert_uint_eq(r.ttl_ms, 300 * 1000);
	/* Forced several: the turns say alone, the agent is not. */
	struct core_params p;
	core_params_defaults(&p);
	p.routers = CORE_ROUTERS_SEVERAL;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	for (int i = 0; i < 200; i++, k++)
		for (uint16_t t = 1; t <= 4; t++)
			turn_round(&f, k * 0x9e3779b97f4a7c15ull, t, false);
	r = routers_of(&f);
	ck_assert(r.turns && !r.alone);
	fx_finish(&f);
}
END_TEST

/* One caller cannot make the turns' verdict for the others (routers.h,
 * ROUTERS_TURN_CALLERS). Behind two HAProxies, an honest caller's
 * conversations show turns 1, 3 and 4 here (one of its two counted turns
 * skipped); a hostile caller's sessions run turns 1 to 40 here, never
 * skipping, 38 counted turns for each 2 of the honest one's. Apart, the
 * hostile one's turns count while it holds under half of the last 64
 * counted, and the skip share stays over 0.10: not alone; once the
 * hostile caller has stopped, the honest one's own turns decide. _i 1, the
 * same requests as one caller's (the hostile one using the honest one's
 * credential): alone, which the cap alone kept away. */
START_TEST(routers_turns_one_caller_at_most_half)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	const uint64_t honest = 0x1234567890abcdefull;
	const uint64_t hostile = _i == 0 ? 0xfedcba0987654321ull : honest;
	uint64_t k = 1;
	bool ever_alone = false;
	for (int round = 0; round < 20; round++) {
		uint64_t key = k++ * 0x9e3779b97f4a7c15ull;
		for (uint16_t t = 1; t <= 40; t++)
			turn_from(&f, key, t, false, hostile);
		key = k++ * 0x9e3779b97f4a7c15ull;
		turn_from(&f, key, 1, false, honest);
		turn_from(&f, key, 3, false, honest);
		turn_from(&f, key, 4, false, honest);
		ever_alone |= routers_of(&f).turns;
	}
	struct core_routers_info r = routers_of(&f);
	printf("# turns, %s: skip share %.3f\n",
	       _i == 0 ? "two callers" : "one caller", r.skips);
	if (_i == 0) {
		ck_assert(!ever_alone);
		ck_assert(r.skips >= 0.10);
		/* The hostile caller stops: the honest one's turns, now all
		 * here, count as soon as its entries are 10 minutes old. */
		f.now += 601 * 1000;
		for (int i = 0; i < 60 && !routers_of(&f).turns; i++) {
			uint64_t key = k++ * 0x9e3779b97f4a7c15ull;
			for (uint16_t t = 1; t <= 4; t++)
				turn_from(&f, key, t, false, honest);
		}
		ck_assert(routers_of(&f).turns);
	} else {
		ck_assert(r.turns && r.alone);
		ck_assert(r.skips >= 0 && r.skips < 0.05);
	}
	fx_finish(&f);
}
END_TEST

/* Behind several HAProxies the load floor is this agent's share of it
 * (pick.h, bound_floor; docs/policy-v2.md, section 32): on the engines'
 * whole view, load_floor / share. Four endpoints; e0 runs 20 requests,
 * the others 4 (the bound: ceil(1.5 x (total + 1) / 4), 13 to 19 over
 * the 16 decisions). _i 0: this HAProxy carries a quarter of the
 * engines' load, so e0 is under its floor (6 / 0.25) and new keys hash
 * to it as without engine counts; _i 1: it carries all of it (too few
 * decisions to route alone), the floor is 6 and the bound passes e0
 * over.
 * place_load_z 0: the bound alone decides. */
START_TEST(floor_is_this_agents_share)
{
	struct fx f;
	struct core_params p;
	core_params_defaults(&p);
	p.place_load_z = 0;
	fx_init(&f, 4, &p);
	uint32_t own = _i == 0 ? 1 : 4;
	for (int t = 0; t < 10; t++, f.now += 200)
		routers_samples(&f, own, 4);
	ck_assert_int_eq(core_endpoint_sync(f.c, f.ep[0], CORE_ADMIN_ENABLED,
					    _i == 0 ? 5 : 20, f.now), 0);
	ck_assert_int_eq(core_endpoint_engine(f.c, f.ep[0], true, 20, -1, f.now), 0);
	struct core_routers_info r = routers_of(&f);
	ck_assert(!r.alone);
	if (_i == 0)
		ck_assert(r.share > 0.2 && r.share < 0.3);
	else
		ck_assert(r.share > 0.99);
	/* explain names the floor e0 had, and its scale */
	bool named = false;
	for (uint64_t k = 1; k <= 64 && !named; k++) {
		struct core_request rq = fx_session(k * 0x9e3779b97f4a7c15ull);
		struct core_trace t;
		struct core_rng copy = f.rng;
		struct core_decision e;
		ck_assert_int_eq(core_explain(f.c, &rq, f.now, &copy, &e, &t), 0);
		if (!t.ranked || t.rank[0].endpoint != f.ep[0])
			continue;
		ck_assert(t.rank[0].walked);
		ck_assert_uint_eq(t.rank[0].floor_base, 6);
		ck_assert_uint_eq(t.rank[0].floor, _i == 0 ? 24 : 6);
		ck_assert(_i == 0 ? fabs(t.floor_scale - 4) < 1e-9 : t.floor_scale == 1);
		named = true;
	}
	ck_assert(named);
	int on_e0 = 0;
	for (uint64_t k = 1; k <= 16; k++) {
		struct core_request rq = fx_session(k * 0x9e3779b97f4a7c15ull);
		struct core_decision d = fx_decide(&f, &rq);
		on_e0 += d.endpoint == f.ep[0];
	}
	if (_i == 0)
		ck_assert_int_gt(on_e0, 0);
	else
		ck_assert_int_eq(on_e0, 0);
	fx_finish(&f);
}
END_TEST

/* policy.artefact_affinity: sessions warm on s0 or s1 (artefact A) whose
 * endpoint goes down move only to the other A one, never to s2 or s3
 * (artefact B); without the policy some do. _i: 0 off, 1 on. */
START_TEST(artefact_affinity_keeps_artefact)
{
	struct fx f;
	struct core_params p;
	core_params_defaults(&p);
	p.artefact_affinity = _i == 1;
	fx_init(&f, 4, &p);
	const uint64_t A = 0xa11ce, B = 0xb0b;
	ck_assert_int_eq(core_endpoint_artefact(f.c, f.ep[0], A), 0);
	ck_assert_int_eq(core_endpoint_artefact(f.c, f.ep[1], A), 0);
	ck_assert_int_eq(core_endpoint_artefact(f.c, f.ep[2], B), 0);
	ck_assert_int_eq(core_endpoint_artefact(f.c, f.ep[3], B), 0);
	ck_assert_int_eq(core_endpoint_artefact(f.c, 99, A), -ENOENT);
	ck_assert_uint_eq(fx_info(&f, f.ep[2]).artefact, B);
	/* 64 sessions, each homed by a success */
	uint64_t on_s0[64];
	int n0 = 0;
	for (uint64_t s = 1; s <= 64; s++) {
		struct core_request rq = fx_session(s * 0x9e3779b97f4a7c15ull);
		struct core_decision d = fx_decide(&f, &rq);
		ck_assert_int_ge(d.endpoint, 0);
		fx_feedback(&f, &d, 200, 50, false);
		struct core_completion cc = end_of(d.endpoint);
		core_complete(f.c, &cc, f.now);
		if (d.endpoint == f.ep[0])
			on_s0[n0++] = s;
	}
	ck_assert_int_gt(n0, 4);
	core_endpoint_sync(f.c, f.ep[0], CORE_ADMIN_DOWN, 0, f.now);
	int to_b = 0, to_a = 0;
	for (int i = 0; i < n0; i++) {
		struct core_request rq = fx_session(on_s0[i] * 0x9e3779b97f4a7c15ull);
		struct core_decision d = fx_decide(&f, &rq);
		ck_assert_int_ne(d.endpoint, f.ep[0]);
		to_b += d.endpoint == f.ep[2] || d.endpoint == f.ep[3];
		to_a += d.endpoint == f.ep[1];
		struct core_completion cc = end_of(d.endpoint);
		core_complete(f.c, &cc, f.now);
	}
	if (_i == 1) {
		ck_assert_int_eq(to_b, 0);
		ck_assert_int_eq(to_a, n0);
		/* The last endpoint of A down too: no answer rather than B. */
		core_endpoint_sync(f.c, f.ep[1], CORE_ADMIN_DOWN, 0, f.now);
		struct core_request rq = fx_session(on_s0[0] * 0x9e3779b97f4a7c15ull);
		struct core_decision d = fx_decide(&f, &rq);
		ck_assert_int_eq(d.endpoint, -1);
		/* An endpoint of no known fingerprint may take it. */
		core_endpoint_artefact(f.c, f.ep[3], 0);
		d = fx_decide(&f, &rq);
		ck_assert_int_eq(d.endpoint, f.ep[3]);
	} else {
		ck_assert_int_gt(to_b, 0);
	}
	fx_finish(&f);
}
END_TEST

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("in_flight");
	tcase_add_test(tc, engine_count_plus_own);
	tcase_add_test(tc, stale_sample_gives_way);
	tcase_add_test(tc, own_count_survives_engine_view);
	tcase_add_test(tc, foreign_load_steers_placement);
	tcase_add_test(tc, routers_alone_by_the_engines_counts);
	tcase_add_test(tc, routers_several_when_shown);
	tcase_add_test(tc, routers_alone_by_the_turns);
	tcase_add_loop_test(tc, routers_turns_one_caller_at_most_half, 0, 2);
	tcase_add_loop_test(tc, floor_is_this_agents_share, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("artefact");
	tcase_add_loop_test(tc, artefact_affinity_keeps_artefact, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(engine_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
