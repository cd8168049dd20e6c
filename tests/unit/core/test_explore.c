/* test_explore.c - core: exploration (core/explore.h): an endpoint left
 * as slow gets a bounded share of new keys while it stays slow, and its
 * share back once its answers are fast again (issue 12, recovery). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "core_impl.h" /* explore_on: whether an endpoint is armed */
#include "fixture.h"

#define FAST_MS 40
#define SLOW_MS 200 /* 5x */

/* An hour: about 50 ms of the fake clock per decision never reach it,
 * which keeps the other way back, idle_reset's re-trial, out of the way. */
#define IDLE_HOUR (3600 * 1000)

/* 4 endpoints, the default policy but explore_share and idle_reset_ms,
 * cold; returns x, the one each test watches. */
static int fleet(struct fx *f, double share, uint64_t idle_reset_ms)
{
	struct core_params p;
	core_params_defaults(&p);
	p.explore_share = share;
	p.idle_reset_ms = idle_reset_ms;
	fx_init(f, 4, &p);
	return f->ep[1];
}

/* fleet() without idle_reset within reach, every endpoint warm at
 * FAST_MS. */
static int warm_fleet(struct fx *f, double share)
{
	int x = fleet(f, share, IDLE_HOUR);
	for (int k = 0; k < 4; k++)
		fx_warm(f, f->ep[k], FAST_MS, 30);
	return x;
}

/* warm_fleet(); x's answers then turn SLOW_MS until it is left (its EWMA
 * over 2.5 x the median and 2.5 x its base). */
static int setup(struct fx *f, double share)
{
	int x = warm_fleet(f, share);
	fx_warm(f, x, SLOW_MS, 60);
	return x;
}

/* One new key per decision (session from, from + 1, ...), answered at
 * once: in x_tr ms from x (x_tr < 0: x never answers, as when HAProxy
 * answers for it and no log input says so), FAST_MS from every other,
 * each answer's time to headers told skew_ms longer than the fake
 * clock's (HAProxy counts in whole milliseconds of its own clock, so the
 * start rebuilt from it comes before the decision). With x_e2e >= 0 its
 * end-of-stream log line follows (4 KiB; x ends in x_e2e ms, every other
 * in 1,000), else the end alone. Returns how many went to x; *last the
 * decisions to x among the last `window`. */
static int run_ends(struct fx *f, int x, int64_t x_tr, int64_t x_e2e,
		    int64_t skew_ms, uint64_t *from, int n, int window, int *last)
{
	int to_x = 0;
	*last = 0;
	for (int i = 0; i < n; i++) {
		struct core_request r = fx_session((*from)++);
		struct core_decision d = fx_decide(f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		bool on_x = d.endpoint == x;
		int64_t tr = on_x && x_tr >= 0 ? x_tr : FAST_MS;
		f->now += (uint64_t)tr; /* the answer comes after its request */
		if (on_x) {
			to_x++;
			if (i >= n - window)
				(*last)++;
			if (x_tr < 0) {
				f->now += 10;
				continue; /* lost */
			}
		}
		ck_assert_int_eq(fx_feedback(f, &d, 200, tr + skew_ms, false), 0);
		if (x_e2e >= 0) {
			struct core_completion cc = {
				.endpoint = d.endpoint, .status = 200,
				.end = CORE_END_COMPLETE, .tr_ms = tr,
				.total_ms = on_x ? x_e2e : 1000, .bytes = 4096,
				.feedback_seen = true, .has_akey = d.has_akey,
				.akey = d.akey,
			};
			ck_assert_int_eq(core_complete(f->c, &cc, f->now), 0);
		} else {
			ck_assert_int_eq(core_endpoint_complete(f->c, d.endpoint), 0);
		}
		f->now += 10;
	}
	return to_x;
}

/* run_ends without log lines: x answers SLOW_MS while slow. */
static int run(struct fx *f, int x, bool slow, uint64_t *from, int n,
	       int window, int *last)
{
	return run_ends(f, x, slow ? SLOW_MS : FAST_MS, -1, 0, from, n, window, last);
}

START_TEST(explore_still_slow_bounded)
{
	/* While x stays slow, exploration gives it at most explore_share
	 * (0.25) of its fair share (1/4) of the new keys, one at a time,
	 * that spacing doubled after each verdict "still slow": 2,000
	 * decisions send it no more than 2,000 / 16. */
	struct fx f;
	int x = setup(&f, 0.25);
	uint64_t s = 1;
	int last;
	int n = run(&f, x, true, &s, 2000, 500, &last);
	printf("# still slow: %d of 2000 new keys to x, %d of the last 500\n", n, last);
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n, 2000 / 16);
	/* once the spacing is at its largest (4 x 16 decisions) */
	ck_assert_int_le(last, 500 / 64 + 1);
	fx_finish(&f);
}
END_TEST

START_TEST(explore_recovered_gets_share_back)
{
	/* x left as slow, then fast again: with exploration its probes'
	 * answers say so, and within 400 decisions it takes its share of
	 * new keys by rendezvous again (at least 0.8 of 1/4 of the last 200).
	 * Without (explore_share 0) it gets none: nothing it answers can
	 * tell before idle_reset's re-trial. */
	for (int on = 0; on < 2; on++) {
		struct fx f;
		int x = setup(&f, on ? 0.25 : 0);
		uint64_t s = 1;
		int last;
		run(&f, x, true, &s, 1000, 100, &last);
		ck_assert_int_le(last, 100 / 16);
		int n = run(&f, x, false, &s, 400, 200, &last);
		printf("# explore_share %s: recovered x got %d of 400 new keys, %d of the last 200\n",
		       on ? "0.25" : "0", n, last);
		/* what the metrics export (warmlane_explore_*_total) */
		struct core_stats cs;
		core_stats(f.c, &cs);
		if (on) {
			ck_assert_int_ge(last, (int)(0.8 * 200 / 4));
			ck_assert_uint_gt(cs.explore_probes, 0);
			ck_assert_uint_ge(cs.explore_recovered, 1);
		} else {
			ck_assert_int_eq(n, 0);
			ck_assert_uint_eq(cs.explore_probes, 0);
			ck_assert_uint_eq(cs.explore_recovered, 0);
		}
		fx_finish(&f);
	}
}
END_TEST

/* 40 sessions whose first rendezvous choice is endpoint x of a fresh
 * four-endpoint fleet. */
static void sessions_on(int x, uint64_t *keys)
{
	struct fx g;
	fx_init(&g, 4, NULL);
	int homed = 0;
	for (uint64_t k = 100000; homed < 40; k++) {
		struct core_request r = fx_session(k);
		struct core_decision d = fx_decide(&g, &r);
		core_endpoint_complete(g.c, d.endpoint);
		if (d.endpoint == x)
			keys[homed++] = k;
	}
	fx_finish(&g);
}

/* One request of each of the 40 sessions, answered in FAST_MS; on[i]
 * (if not NULL) says whether session i went to x. Returns how many
 * did. */
static int sessions_turn(struct fx *f, int x, const uint64_t *keys, bool *on)
{
	int on_x = 0;
	for (int i = 0; i < 40; i++) {
		struct core_request r = fx_session(keys[i]);
		struct core_decision d = fx_decide(f, &r);
		on_x += d.endpoint == x;
		if (on != NULL)
			on[i] = d.endpoint == x;
		f->now += FAST_MS;
		ck_assert_int_eq(fx_feedback(f, &d, 200, FAST_MS, false), 0);
		ck_assert_int_eq(core_endpoint_complete(f->c, d.endpoint), 0);
	}
	return on_x;
}

/* setup(): x left as slow, then one request of each of the 40 sessions
 * whose rendezvous choice is x (keys): placed elsewhere, but a probe may
 * take one; on[i] as sessions_turn, *s the next new session. Returns x
 * and how many went to x (*on_x). */
static int sessions_moved_off(struct fx *f, uint64_t *keys, uint64_t *s,
			      bool *on, int *on_x)
{
	int x = setup(f, 0.25);
	sessions_on(x, keys);
	*s = 1;
	int last;
	run(f, x, true, s, 200, 1, &last);
	*on_x = sessions_turn(f, x, keys, on);
	return x;
}

START_TEST(explore_recovered_takes_keys_back)
{
	/* Sessions whose first rendezvous choice is x, moved elsewhere while
	 * it was slow, come back to it once the probes' verdict says it
	 * recovered. */
	struct fx f;
	uint64_t keys[40], s;
	bool stayed[40], on[40];
	int on_x, last;
	int x = sessions_moved_off(&f, keys, &s, stayed, &on_x);
	int n_moved = 40 - on_x;
	/* fast again: new keys until the verdict (the first probe of a
	 * just-left endpoint comes after 8 x 64 decisions), then the 40
	 * sessions */
	run(&f, x, false, &s, 500, 1, &last);
	sessions_turn(&f, x, keys, on);
	int back = 0;
	for (int i = 0; i < 40; i++)
		back += !stayed[i] && on[i];
	printf("# %d of the %d sessions homed on x and moved back on it\n", back, n_moved);
	ck_assert_int_ge(n_moved, 36);
	ck_assert_int_eq(back, n_moved);
	fx_finish(&f);
}
END_TEST

START_TEST(explore_reclaim_ends_when_left_again)
{
	/* As above, x's sessions moved while it was slow, and its probes'
	 * verdict says it recovered; but before they come back it is slow
	 * and left again, and then its peers turn slower still, so that it
	 * is within the tolerance of their median. The verdict was undone:
	 * the sessions stay where they are (a probe may take one). Without
	 * that, they went back and forth with the fleet's median (four
	 * llama-servers sharing two cores). */
	struct fx f;
	uint64_t keys[40], s;
	int on_x, last;
	int x = sessions_moved_off(&f, keys, &s, NULL, &on_x);
	ck_assert_int_le(on_x, 1);
	struct core_stats cs;
	int i = 0;
	for (core_stats(f.c, &cs); cs.explore_recovered == 0; core_stats(f.c, &cs)) {
		run(&f, x, false, &s, 1, 1, &last);
		ck_assert_int_lt(++i, 5000);
	}
	/* slow again: left by the decisions that judge it */
	run(&f, x, true, &s, 100, 1, &last);
	for (int k = 0; k < 4; k++)
		if (f.ep[k] != x)
			fx_warm(&f, f.ep[k], 10 * SLOW_MS, 80);
	int back = sessions_turn(&f, x, keys, NULL);
	printf("# recovered after %d requests, left again: %d of 40 sessions back on x\n",
	       i, back);
	ck_assert_int_le(back, 1);
	fx_finish(&f);
}
END_TEST

/* Like run, x's answers irregular: one in ten 2,000 ms, the others 10 ms
 * (x `times` slower). */
static int run_irregular(struct fx *f, int x, int times, uint64_t *from, int n)
{
	int to_x = 0;
	for (int i = 0; i < n; i++) {
		struct core_request r = fx_session((*from)++);
		struct core_decision d = fx_decide(f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		int64_t tr = FAST_MS;
		if (d.endpoint == x)
			tr = times * (to_x++ % 10 == 0 ? 2000 : 10);
		f->now += (uint64_t)tr;
		ck_assert_int_eq(fx_feedback(f, &d, 200, tr, false), 0);
		ck_assert_int_eq(core_endpoint_complete(f->c, d.endpoint), 0);
		f->now += 10;
	}
	return to_x;
}

START_TEST(explore_not_irregular)
{
	/* An endpoint whose times to headers range a hundredfold (its spread
	 * about 3 x its mean): one fast answer of it, 5x slower, is likely,
	 * and a verdict would need more answers than a re-trial takes
	 * (EXPLORE_VERDICT_MAX): it is not explored, its way back stays the
	 * re-trial. A regular one is (explore_still_slow_bounded). */
	struct fx f;
	int x = fleet(&f, 0.25, IDLE_HOUR);
	uint64_t s = 1;
	ck_assert_int_gt(run_irregular(&f, x, 1, &s, 800), 150);
	int slow = run_irregular(&f, x, 5, &s, 400);
	ck_assert_int_lt(slow, 100); /* left */
	int n = run_irregular(&f, x, 5, &s, 2000);
	printf("# irregular x, left after %d slow answers: %d of the next 2000 new keys\n",
	       slow, n);
	ck_assert_int_eq(n, 0);
	fx_finish(&f);
}
END_TEST

/* Like run_irregular, every endpoint's time in proportion to the prompt's
 * size, which the request carries: one in ten 200 KiB (2,000 ms), the
 * others 1 KiB (10 ms); x `times` slower. */
static int run_sized(struct fx *f, int x, int times, uint64_t *from, int n)
{
	int to_x = 0;
	for (int i = 0; i < n; i++) {
		struct core_request r = fx_session(*from);
		r.size_kib = (*from)++ % 10 == 0 ? 200 : 1;
		struct core_decision d = fx_decide(f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		int64_t tr = 10 * (int64_t)r.size_kib;
		if (d.endpoint == x) {
			tr *= times;
			to_x++;
		}
		f->now += (uint64_t)tr;
		ck_assert_int_eq(fx_feedback(f, &d, 200, tr, false), 0);
		ck_assert_int_eq(core_endpoint_complete(f->c, d.endpoint), 0);
		f->now += 10;
	}
	return to_x;
}

START_TEST(explore_sized_alone)
{
	/* explore_not_irregular's endpoint, its irregularity all its
	 * prompts' sizes. Routing alone, its probes are judged sized (their
	 * time over what the fleet answers to prompts of their size class,
	 * times the fleet's mean answer): each says as much as a regular
	 * endpoint's, so x is explored, its share bounded while it stays 5x
	 * slower, and back once it recovers. Not alone, nothing changes:
	 * it is not explored; nor alone in a pool of two (2), where the
	 * other carries the left one's whole load and its answers that
	 * queue, which sizing does not divide out (learn.c, sized). */
	for (int alone = 0; alone < 3; alone++) {
		struct core_params p;
		core_params_defaults(&p);
		p.explore_share = 0.25;
		p.idle_reset_ms = IDLE_HOUR;
		p.routers = alone ? CORE_ROUTERS_ONE : CORE_ROUTERS_AUTO;
		struct fx f;
		fx_init(&f, alone == 2 ? 2 : 4, &p);
		int x = f.ep[1];
		uint64_t s = 1;
		ck_assert_int_gt(run_sized(&f, x, 1, &s, 800), 150);
		int left = run_sized(&f, x, 5, &s, 400);
		ck_assert_int_lt(left, 100);
		ck_assert_int_eq(fx_info(&f, x).speed, CORE_SPEED_LEFT);
		int slow = run_sized(&f, x, 5, &s, 2000);
		int back = run_sized(&f, x, 1, &s, 2000);
		printf("# sized, %s: left after %d slow answers, %d of the next "
		       "2000 new keys while slow, %d of 2000 once recovered\n",
		       alone == 2 ? "alone, a pool of two" : alone ? "alone" : "not alone",
		       left, slow, back);
		if (alone == 1) {
			ck_assert_int_gt(slow, 0);
			ck_assert_int_le(slow, 2000 / 16);
			ck_assert_int_ge(back, 2000 / 4 / 2);
		} else {
			ck_assert_int_eq(slow + back, 0);
		}
		fx_finish(&f);
	}
}
END_TEST

START_TEST(explore_quiet_is_not_starved)
{
	/* At a high rate a fair interval is a fraction of a millisecond: a
	 * healthy endpoint that goes 100 ms without an answer (here: its
	 * requests not answered yet, 8 fair intervals being 16 ms) is not
	 * starved while that is under 8 of its own times to headers (40 ms:
	 * 320 ms). Past them it is. */
	struct fx f;
	int x = warm_fleet(&f, 0.25);
	uint64_t s = 1;
	for (int i = 0; i < 1000; i++) {
		struct core_request r = fx_session(s++);
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		if (d.endpoint != x) {
			ck_assert_int_eq(fx_feedback(&f, &d, 200, FAST_MS, false), 0);
			ck_assert_int_eq(core_endpoint_complete(f.c, d.endpoint), 0);
		}
		if (i == 199) /* 100 ms quiet */
			ck_assert_int_eq(f.c->pool.ep[x].explore_on, 0);
		f.now += 1; /* 2 decisions a millisecond */
		if (i % 2)
			f.now -= 1;
	}
	/* 500 ms: past 8 of its times to headers */
	ck_assert_int_eq(f.c->pool.ep[x].explore_on, 1);
	fx_finish(&f);
}
END_TEST

/* Disabled (1) or enabled (0) by config: the fixture's names. */
static void set_disabled(struct fx *f, int idx, int k, bool off)
{
	char name[16];
	snprintf(name, sizeof(name), "s%d", k);
	struct core_endpoint_config cfg = {
		.backend = "be", .server = name, .weight = 1.0, .disabled = off,
	};
	ck_assert_int_eq(core_endpoint_update(f->c, idx, &cfg), 0);
}

START_TEST(explore_quiet_keeps_warm_keys)
{
	/* x is quiet, not slow: its sessions were placed elsewhere while it
	 * was out (a fault, a config change). It is probed with new keys and
	 * anonymous requests only: a warm session moved to it would lose
	 * its cache for no evidence about a slowdown. */
	struct fx f;
	int x = warm_fleet(&f, 0.25);
	set_disabled(&f, x, 1, true);
	struct core_decision home[200];
	for (uint64_t s = 0; s < 200; s++) {
		struct core_request r = fx_session(1000 + s);
		home[s] = fx_decide(&f, &r);
		ck_assert_int_ne(home[s].endpoint, x);
		ck_assert_int_eq(fx_feedback(&f, &home[s], 200, FAST_MS, false), 0);
		ck_assert_int_eq(core_endpoint_complete(f.c, home[s].endpoint), 0);
		f.now += 5;
	}
	set_disabled(&f, x, 1, false);
	f.now += 2000; /* quiet: past 8 fair intervals and 8 of its times */
	int moved = 0;
	for (int round = 0; round < 4; round++) {
		for (uint64_t s = 0; s < 200; s++) {
			struct core_request r = fx_session(1000 + s);
			struct core_decision d = fx_decide(&f, &r);
			moved += d.endpoint != home[s].endpoint;
			ck_assert_int_eq(fx_feedback(&f, &d, 200, FAST_MS, false), 0);
			ck_assert_int_eq(core_endpoint_complete(f.c, d.endpoint), 0);
			f.now += 5;
		}
	}
	printf("# quiet x: %d of 800 warm turns moved\n", moved);
	ck_assert_int_eq(moved, 0);
	fx_finish(&f);
}
END_TEST

/* With the log input, x turns slower (its end-to-end times 5x, its times
 * to headers slow_tr) and is left; then its headers are FAST_MS again and
 * its streams end in after_e2e ms (1,000: its peers'). Returns the new
 * keys x got of 4,000, *last of the last 400, *probes exploration's. */
static int e2e_slow_then_fast(int64_t slow_tr, int64_t after_e2e,
			      uint64_t idle_reset_ms, int *last, uint64_t *probes,
			      uint64_t *verdicts)
{
	struct fx f;
	int x = fleet(&f, 0.25, idle_reset_ms);
	uint64_t s = 1;
	run_ends(&f, x, FAST_MS, 1000, 0, &s, 400, 100, last);
	ck_assert_int_gt(*last, 10); /* warm on both signals, its share */
	run_ends(&f, x, slow_tr, 5000, 0, &s, 300, 100, last);
	ck_assert_int_le(*last, 100 / 16);
	/* the ends of its streams that were under way */
	for (int i = 0; i < 20; i++) {
		struct core_completion cc = {
			.endpoint = x, .status = 200, .end = CORE_END_COMPLETE,
			.tr_ms = slow_tr, .total_ms = 5000, .bytes = 4096,
		};
		ck_assert_int_eq(core_complete(f.c, &cc, f.now), 0);
	}
	ck_assert_int_eq(f.c->pool.ep[x].suspect, POOL_LEFT);
	struct core_stats before, after;
	core_stats(f.c, &before);
	/* recovered: 4,000 decisions, about 200 s of the fake clock */
	int n = run_ends(&f, x, FAST_MS, after_e2e, 0, &s, 4000, 400, last);
	core_stats(f.c, &after);
	*probes = after.explore_probes - before.explore_probes;
	*verdicts = after.explore_recovered - before.explore_recovered;
	fx_finish(&f);
	return n;
}

START_TEST(explore_not_while_e2e_slow)
{
	/* x's headers come at admission (as vLLM sends them): fast whatever
	 * its speed, only its end-to-end times say slow, and they move only
	 * with answers, so a probe's verdict could not say "recovered": x is
	 * not probed, goes idle, and idle_reset's re-trial (20 s here)
	 * forgets its times and gives it its share back. Probed (the rule
	 * off), it got 14 probes, each verdict "still slow", which kept it
	 * from going idle: 751 of the 4,000 new keys against 911
	 * (docs/policy-v2.md, section 16). */
	int last;
	uint64_t probes, verdicts;
	int n = e2e_slow_then_fast(FAST_MS, 1000, 20 * 1000, &last, &probes, &verdicts);
	printf("# e2e slow, headers fast, then recovered: x got %d of 4000 new keys,"
	       " %d of the last 400; %llu probes\n", n, last, (unsigned long long)probes);
	ck_assert_uint_eq(probes, 0);
	ck_assert_int_ge(last, (int)(0.8 * 400 / 4));
}
END_TEST

START_TEST(explore_headers_judge_e2e_slow)
{
	/* x's headers come with its first token (llama.cpp): slow on both
	 * signals, its probes' times to headers show its recovery, their own
	 * ends confirm it, and the verdict restarts its end-to-end EWMA
	 * (still the slowdown's) from its peers' median. No idle_reset within
	 * reach: without the rule (e2e_holds for it too) x got no probe and
	 * none of the 4,000 keys (docs/policy-v2.md, section 35). */
	int last;
	uint64_t probes, verdicts;
	int n = e2e_slow_then_fast(SLOW_MS, 1000, IDLE_HOUR, &last, &probes, &verdicts);
	printf("# slow on both, then recovered: x got %d of 4000 new keys,"
	       " %d of the last 400; %llu probes, %llu verdicts \"recovered\"\n", n,
	       last, (unsigned long long)probes, (unsigned long long)verdicts);
	ck_assert_uint_gt(probes, 0);
	ck_assert_uint_eq(verdicts, 1);
	ck_assert_int_ge(last, (int)(0.8 * 400 / 4));
	/* Its headers fast again but its streams still 5x slower (its
	 * decode): the probes' ends say so, no verdict "recovered" (judged
	 * on their headers alone: 1, and 4 keys before it was left again),
	 * and exploration's bounded share. */
	n = e2e_slow_then_fast(SLOW_MS, 5000, IDLE_HOUR, &last, &probes, &verdicts);
	printf("# slow on both, then fast headers only: x got %d of 4000 new keys,"
	       " %d of the last 400; %llu probes, %llu verdicts\n", n, last,
	       (unsigned long long)probes, (unsigned long long)verdicts);
	ck_assert_uint_gt(probes, 0);
	ck_assert_uint_eq(verdicts, 0);
	ck_assert_int_le(n, 4000 / 16);
}
END_TEST

/* HAProxy's layer-7 checks of the 4 endpoints: x's took x_ms, every
 * other's CHECK_MS (x -1: every one's x_ms). */
#define CHECK_MS 100
static void checks(struct fx *f, int x, uint32_t x_ms)
{
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(core_endpoint_check(f->c, f->ep[k],
						     x < 0 || f->ep[k] == x ? x_ms : CHECK_MS,
						     f->now), 0);
}

/* run, with the checks polled every 10 decisions: x's x_check_ms. */
static int run_checked(struct fx *f, int x, int64_t x_tr, uint32_t x_check_ms,
		       uint64_t *from, int n, int window, int *last)
{
	int to_x = 0, l;
	*last = 0;
	for (int i = 0; i < n; i += 10) {
		checks(f, x, x_check_ms);
		to_x += run_ends(f, x, x_tr, -1, 0, from, 10, 10, &l);
		if (i >= n - window)
			*last += l;
	}
	return to_x;
}

START_TEST(check_recovered_gets_share_back)
{
	/* No exploration and no idle_reset within reach: x, left as slow,
	 * can come back only by its health check. Its check was slow (5x its
	 * peers') while it was, then fits again: the verdict "recovered"
	 * re-tries it, and it takes its share of new keys by rendezvous
	 * (at least 0.8 of 1/4 of the last 200 of 400). A check that never
	 * showed the slowdown says nothing: x gets none of the 400. */
	for (int seen = 0; seen < 2; seen++) {
		struct fx f;
		int x = setup(&f, 0);
		uint64_t s = 1;
		int last;
		run_checked(&f, x, SLOW_MS, seen ? 5 * CHECK_MS : CHECK_MS, &s, 300, 100, &last);
		ck_assert_int_eq(last, 0);
		ck_assert_int_eq(f.c->pool.ep[x].suspect, POOL_LEFT);
		ck_assert(fx_info(&f, x).check_slow == (seen != 0));
		int n = run_checked(&f, x, FAST_MS, CHECK_MS, &s, 400, 200, &last);
		struct core_stats cs;
		core_stats(f.c, &cs);
		printf("# check %s the slowdown: recovered x got %d of 400 new keys, %d of the last 200;"
		       " %llu check verdicts\n", seen ? "showed" : "did not show", n, last,
		       (unsigned long long)cs.check_recovered);
		if (seen) {
			ck_assert_int_ge(last, (int)(0.8 * 200 / 4));
			ck_assert_uint_eq(cs.check_recovered, 1);
			ck_assert(fx_info(&f, x).check_ms == CHECK_MS);
		} else {
			ck_assert_int_eq(n, 0);
			ck_assert_uint_eq(cs.check_recovered, 0);
		}
		fx_finish(&f);
	}
}
END_TEST

START_TEST(check_vouches_until_warm)
{
	/* After the check's verdict, x's first answers are cold prompts on
	 * an empty cache: here 5x its peers'. They would leave it again
	 * after a re-trial's 4 answers; the check vouches for it until its
	 * own answers number cold_start_samples (20), which then judge it:
	 * x still 5x slower is left at its 20th answer, and its check's
	 * vouch ends with it. */
	struct fx f;
	int x = setup(&f, 0);
	uint64_t s = 1;
	int last;
	run_checked(&f, x, SLOW_MS, 5 * CHECK_MS, &s, 300, 100, &last);
	ck_assert_int_eq(last, 0);
	int n = run_checked(&f, x, SLOW_MS, CHECK_MS, &s, 400, 200, &last);
	printf("# vouched for by its check, x still 5x slower got %d new keys of 400, %d of the"
	       " last 200\n", n, last);
	ck_assert_int_ge(n, (int)f.p.cold_start_samples);
	ck_assert_int_le(n, (int)f.p.cold_start_samples + 2);
	ck_assert_int_eq(last, 0);
	ck_assert_int_eq(f.c->pool.ep[x].suspect, POOL_LEFT);
	ck_assert(!fx_info(&f, x).check_vouch);
	fx_finish(&f);
}
END_TEST

START_TEST(check_not_judged_without_a_reference)
{
	/* Checks of a few milliseconds (GET /health, a bare connect) say
	 * nothing of speed: 8 ms against 2 ms is not slow (CHECK_SLACK_MS).
	 * With one peer's check only there is no median to judge by. Either
	 * way, a fast check after them is no verdict. */
	struct fx f;
	int x = setup(&f, 0);
	uint64_t s = 1;
	int last;
	for (int i = 0; i < 30; i++) {
		for (int k = 0; k < 4; k++)
			ck_assert_int_eq(core_endpoint_check(f.c, f.ep[k], f.ep[k] == x ? 8 : 2,
							     f.now), 0);
		f.now += 100;
	}
	ck_assert(!fx_info(&f, x).check_slow);
	/* x and one peer checked: the peer's lone check is no median */
	int peer = f.ep[0] == x ? f.ep[1] : f.ep[0];
	f.now += 20000; /* the checks above are stale */
	ck_assert_int_eq(core_endpoint_check(f.c, peer, CHECK_MS, f.now), 0);
	ck_assert_int_eq(core_endpoint_check(f.c, x, 5 * CHECK_MS, f.now), 0);
	ck_assert(!fx_info(&f, x).check_slow);
	ck_assert_int_eq(core_endpoint_check(f.c, x, CHECK_MS, f.now), 0);
	int n = run(&f, x, false, &s, 400, 200, &last);
	struct core_stats cs;
	core_stats(f.c, &cs);
	ck_assert_uint_eq(cs.check_recovered, 0);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(core_endpoint_check(f.c, 999, CHECK_MS, f.now), -2);
	fx_finish(&f);
}
END_TEST

START_TEST(check_slow_gets_no_new_keys)
{
	/* x answers as fast as its peers but its check is 5x theirs: new
	 * keys pass it over (0 of 400; about a quarter would be its by
	 * rendezvous), and so does power of two choices (0 of 400 anonymous
	 * requests); a check as fast as theirs again is a verdict and it
	 * takes its share of new keys back. No answer of its own has to be
	 * slow first: the check is the whole evidence. */
	struct fx f;
	int x = warm_fleet(&f, 0);
	uint64_t s = 1;
	int last;
	checks(&f, x, 5 * CHECK_MS); /* the first poll: x's peers not yet in */
	int n = run_checked(&f, x, FAST_MS, 5 * CHECK_MS, &s, 400, 200, &last);
	printf("# check 5x its peers': x got %d of 400 new keys\n", n);
	ck_assert_int_eq(n, 0);
	ck_assert(fx_info(&f, x).check_slow);
	/* anonymous requests (power of two choices): none either */
	int anon = 0;
	for (int i = 0; i < 400; i++) {
		struct core_request r = { 0 };
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_eq(d.reason, CORE_REASON_P2C);
		anon += d.endpoint == x;
		ck_assert_int_eq(core_endpoint_complete(f.c, d.endpoint), 0);
	}
	printf("# and %d of 400 anonymous requests\n", anon);
	ck_assert_int_eq(anon, 0);
	n = run_checked(&f, x, FAST_MS, CHECK_MS, &s, 400, 200, &last);
	printf("# check fit again: x got %d of 400 new keys, %d of the last 200\n", n, last);
	ck_assert_int_ge(last, (int)(0.8 * 200 / 4));
	fx_finish(&f);
}
END_TEST

START_TEST(check_slow_ends_with_the_checks)
{
	/* x's check slow, then no layer-7 check any more (a reload back to
	 * a bare connect, or a check failing: the runtime API then shows
	 * none): once its last check is 10 s old it no longer says anything,
	 * and x takes new keys again. Before that it still holds. */
	struct fx f;
	int x = warm_fleet(&f, 0);
	uint64_t s = 1;
	int last;
	checks(&f, x, 5 * CHECK_MS);
	run_checked(&f, x, FAST_MS, 5 * CHECK_MS, &s, 100, 100, &last);
	ck_assert(fx_info(&f, x).check_slow);
	for (int i = 0; i < 4; i++, f.now += 2000)
		checks(&f, -1, 0); /* every endpoint: none */
	ck_assert(fx_info(&f, x).check_slow);
	f.now += 4000;
	checks(&f, -1, 0);
	ck_assert(!fx_info(&f, x).check_slow);
	ck_assert(fx_info(&f, x).check_ms == 0);
	int n = run(&f, x, false, &s, 400, 200, &last);
	printf("# checks gone: x got %d of 400 new keys, %d of the last 200\n", n, last);
	ck_assert_int_ge(last, (int)(0.8 * 200 / 4));
	fx_finish(&f);
}
END_TEST

START_TEST(explore_share_checked)
{
	struct core_params p;
	core_params_defaults(&p);
	struct core *c = NULL;
	p.explore_share = -0.1;
	ck_assert_int_eq(core_create(&c, &p), -22);
	p.explore_share = 1.5;
	ck_assert_int_eq(core_create(&c, &p), -22);
	p.explore_share = 0;
	ck_assert_int_eq(core_create(&c, &p), 0);
	core_destroy(c);
}
END_TEST

/* Anonymous requests answered at once: x's in x_tr ms, every other's in
 * FAST_MS. Returns how many went to x. */
static int run_anon(struct fx *f, int x, int64_t x_tr, int n)
{
	int to_x = 0;
	for (int i = 0; i < n; i++) {
		struct core_request r = { 0 };
		struct core_decision d = fx_decide(f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		int64_t tr = d.endpoint == x ? x_tr : FAST_MS;
		f->now += (uint64_t)tr;
		ck_assert_int_eq(fx_feedback(f, &d, 200, tr, false), 0);
		ck_assert_int_eq(core_endpoint_complete(f->c, d.endpoint), 0);
		f->now += 10;
		to_x += d.endpoint == x;
	}
	return to_x;
}

START_TEST(explore_false_verdict_undone)
{
	/* x, left as slow, answers its probes fast (a still slow endpoint's
	 * short prompts, or its cache hits, do): the verdict "recovered"
	 * gives its stale EWMA the probes' mean. Slow again at once, its
	 * EWMA restarts as a re-trial's does, a mean over its answers since
	 * the verdict (RETRIAL_SAMPLES of them counted): 3 slow answers take
	 * it over the tolerance (2.5 x FAST_MS) again, where power of two
	 * choices under load sees it as slow as it is. Weighed as one
	 * sample in 20 (ewma_alpha), the same answers would take 10. */
	struct fx f;
	int x = setup(&f, 0.25);
	struct core_stats cs;
	int i = 0;
	for (core_stats(f.c, &cs); cs.explore_recovered == 0; core_stats(f.c, &cs)) {
		run_anon(&f, x, FAST_MS, 1);
		ck_assert_int_lt(++i, 5000);
	}
	double at = fx_info(&f, x).ewma_ms[0];
	for (int k = 0; k < 3; k++) {
		f.now += SLOW_MS;
		ck_assert_int_eq(fx_observe(&f, x, 200, SLOW_MS, false, 0, false), 0);
	}
	double after = fx_info(&f, x).ewma_ms[0];
	printf("# a false verdict after %d requests: EWMA %.1f ms, after 3 slow answers %.1f\n",
	       i, at, after);
	ck_assert_double_le(at, 2.5 * FAST_MS);
	ck_assert_double_gt(after, 2.5 * FAST_MS);
	/* and anonymous requests pass it over but for probes */
	int n = run_anon(&f, x, SLOW_MS, 400);
	printf("# x then got %d of the next 400 anonymous requests\n", n);
	ck_assert_int_le(n, 400 / 16);
	fx_finish(&f);
}
END_TEST

/* A probe's answer is its key's, whatever start HAProxy's timers give
 * it (explore.h, explore_heard). x left as slow, then recovered; every
 * answer's start comes out 2 ms (_i 0), then 20 ms (_i 1) before its
 * decision, over EXPLORE_HEARD_SLACK_MS: only the key tells the probe's
 * answer. Before, the first probe was never taken for answered, no
 * other went out, and x got no key back (as on real HAProxy in one run
 * of e2e sizedrecover in five). */
START_TEST(explore_probe_answered_by_its_key)
{
	struct fx f;
	int x = setup(&f, 0.25);
	uint64_t s = 1;
	int64_t skew = _i == 0 ? 2 : 20;
	int last;
	run_ends(&f, x, SLOW_MS, -1, skew, &s, 1000, 1, &last);
	ck_assert_int_eq(fx_info(&f, x).speed, CORE_SPEED_LEFT);
	struct core_stats cs;
	core_stats(f.c, &cs);
	uint64_t probes = cs.explore_probes;
	int back = run_ends(&f, x, FAST_MS, -1, skew, &s, 2000, 1, &last);
	core_stats(f.c, &cs);
	printf("# answers %lld ms early: recovered x got %d of 2000 new keys "
	       "(%llu probes)\n", (long long)skew, back,
	       (unsigned long long)(cs.explore_probes - probes));
	ck_assert_uint_ge(cs.explore_recovered, 1);
	ck_assert_int_ge(back, 2000 / 4 / 2);
	fx_finish(&f);
}
END_TEST

/* A probe whose answer never comes (HAProxy answered it itself, or sent
 * it to another server, and no log input says so) is taken for lost
 * once out 4 x x's EWMA and at least 60 s (explore.c, probe_out): x left
 * as slow, then every request sent to it lost. Its probes keep coming,
 * one per 60 s of the fake clock (about 50 ms a decision). Before, the
 * first lost probe was the last. */
START_TEST(explore_probe_lost)
{
	struct fx f;
	int x = setup(&f, 0.25);
	uint64_t s = 1;
	int last;
	run(&f, x, true, &s, 1000, 100, &last);
	ck_assert_int_eq(fx_info(&f, x).speed, CORE_SPEED_LEFT);
	struct core_stats cs;
	core_stats(f.c, &cs);
	uint64_t probes = cs.explore_probes;
	uint64_t t0 = f.now;
	run_ends(&f, x, -1, -1, 0, &s, 12000, 1, &last);
	core_stats(f.c, &cs);
	uint64_t lost = cs.explore_probes - probes;
	printf("# lost probes: %llu in %llu s\n", (unsigned long long)lost,
	       (unsigned long long)((f.now - t0) / 1000));
	ck_assert_uint_ge(lost, (f.now - t0) / 60000 / 2);
	ck_assert_uint_le(lost, (f.now - t0) / 60000 + 1);
	fx_finish(&f);
}
END_TEST

static Suite *explore_suite(void)
{
	Suite *s = suite_create("core-explore");
	TCase *tc = tcase_create("explore");
	tcase_add_test(tc, explore_still_slow_bounded);
	tcase_add_test(tc, explore_recovered_gets_share_back);
	tcase_add_test(tc, explore_recovered_takes_keys_back);
	tcase_add_test(tc, explore_reclaim_ends_when_left_again);
	tcase_add_test(tc, explore_not_irregular);
	tcase_add_test(tc, explore_sized_alone);
	tcase_add_loop_test(tc, explore_probe_answered_by_its_key, 0, 2);
	tcase_add_test(tc, explore_probe_lost);
	tcase_add_test(tc, explore_quiet_is_not_starved);
	tcase_add_test(tc, explore_quiet_keeps_warm_keys);
	tcase_add_test(tc, explore_not_while_e2e_slow);
	tcase_add_test(tc, explore_headers_judge_e2e_slow);
	tcase_add_test(tc, explore_false_verdict_undone);
	tcase_add_test(tc, check_recovered_gets_share_back);
	tcase_add_test(tc, check_vouches_until_warm);
	tcase_add_test(tc, check_not_judged_without_a_reference);
	tcase_add_test(tc, check_slow_gets_no_new_keys);
	tcase_add_test(tc, check_slow_ends_with_the_checks);
	tcase_add_test(tc, explore_share_checked);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(explore_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
