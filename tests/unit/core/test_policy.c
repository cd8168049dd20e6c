/* test_policy.c - core: routing policy v2 (issue 12): when a warm entry
 * leaves its endpoint (the warm bound, the slow-run detector). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "fixture.h"
#include "trace.h"

/* A key whose first rendezvous choice, on an idle twin of f's pool, is ep
 * (searched from session hash from upwards). */
static uint64_t session_homed_on(const struct core_params *p, int n, int ep,
				 uint64_t from)
{
	struct fx g;
	fx_init(&g, n, p);
	uint64_t s = from;
	for (; s < from + 10000; s++) {
		struct core_request r = fx_session(s);
		struct core_decision d = fx_decide(&g, &r);
		core_endpoint_complete(g.c, d.endpoint);
		if (d.endpoint == ep)
			break;
	}
	fx_finish(&g);
	ck_assert_uint_lt(s, from + 10000);
	return s;
}

/* A pool of 4 with p and session 1 confirmed on its endpoint, returned,
 * nothing in flight. */
static int confirmed_session(struct fx *f, const struct core_params *p,
			     struct core_request *a)
{
	fx_init(f, 4, p);
	*a = fx_session(1);
	struct core_decision d = fx_decide(f, a);
	ck_assert_int_ge(d.endpoint, 0);
	ck_assert_int_eq(fx_feedback(f, &d, 200, 40, false), 0);
	core_endpoint_complete(f->c, d.endpoint);
	ck_assert_uint_eq(fx_info(f, d.endpoint).in_flight, 0);
	return d.endpoint;
}

/* confirmed_session with the defaults but load_floor 0, so that only the
 * bounds speak. */
static int floorless_session(struct fx *f, struct core_request *a)
{
	struct core_params p;
	core_params_defaults(&p);
	p.load_floor = 0;
	return confirmed_session(f, &p, a);
}

/* How many of n more requests of a, none completing, stay on x (reason
 * affinity), until one goes elsewhere. */
static int stays(struct fx *f, const struct core_request *a, int x, int n)
{
	int stayed = 0;
	for (int i = 0; i < n; i++) {
		struct core_decision d = fx_decide(f, a);
		if (d.endpoint != x)
			break;
		ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
		stayed++;
	}
	return stayed;
}

START_TEST(warm_entry_tolerates_slack)
{
	/* A session confirmed on x, then 6 more of its requests while none
	 * completes, on a pool of 4 with nothing else in flight (load_floor
	 * 0, so that only the bounds speak). The load_factor bound alone
	 * (warm_slack 0) moves it at the second: 2 > ceil(1.5 x 2 / 4). With
	 * warm_slack 6 it stays while in_flight + 1 <= ceil((total + 1) / 4 +
	 * 6): all 6 times (the 6th: 7 <= ceil(7/4 + 6) = 8). A new key whose
	 * first choice is x keeps the bound alone and goes elsewhere. */
	for (int slack = 0; slack < 2; slack++) {
		struct core_params p;
		core_params_defaults(&p);
		p.load_floor = 0;
		p.warm_slack = slack ? 6 : 0;
		struct fx f;
		struct core_request a;
		int x = confirmed_session(&f, &p, &a);
		int stayed = stays(&f, &a, x, 6);
		if (slack) {
			ck_assert_int_eq(stayed, 6);
			uint64_t s = session_homed_on(&p, 4, x, 1000);
			struct core_request b = fx_session(s);
			struct core_decision db = fx_decide(&f, &b);
			ck_assert_int_ne(db.endpoint, x);
			ck_assert_int_eq(db.reason, CORE_REASON_HASH);
		} else {
			ck_assert_int_eq(stayed, 1);
		}
		fx_finish(&f);
	}
}
END_TEST

START_TEST(warm_slack_not_while_check_slow)
{
	/* warm_entry_tolerates_slack's session, its endpoint x's HAProxy
	 * check 5x its peers' (100 ms): the load over the bound is then the
	 * slowdown's queue, not noise, and x has no slack: the session moves
	 * at its second request as with warm_slack 0. Its check as fast as
	 * theirs: it stays all 6 times. */
	for (int slow = 0; slow < 2; slow++) {
		struct fx f;
		struct core_request a;
		int x = floorless_session(&f, &a);
		/* two polls: the first one's checks are the second's peers */
		for (int poll = 0; poll < 2; poll++, f.now += 200)
			for (int k = 0; k < 4; k++)
				ck_assert_int_eq(core_endpoint_check(f.c, f.ep[k],
								     f.ep[k] == x && slow ? 500 : 100,
								     f.now), 0);
		ck_assert(fx_info(&f, x).check_slow == (slow != 0));
		ck_assert_int_eq(stays(&f, &a, x, 6), slow ? 1 : 6);
		fx_finish(&f);
	}
}
END_TEST

START_TEST(warm_slack_ends_where_bound_is_larger)
{
	/* Under heavy load the load_factor bound is the larger and decides
	 * alone: with 40 requests in flight on each of 4 endpoints, a warm
	 * entry on x stays until x holds ceil(1.5 x (total + 1) / 4), never
	 * beyond, whatever warm_slack (6 < 0.5 x the fair share). */
	struct core_params p;
	core_params_defaults(&p);
	struct fx f;
	fx_init(&f, 4, &p);
	struct core_request a = fx_session(1);
	struct core_decision d = fx_decide(&f, &a);
	int x = d.endpoint;
	ck_assert_int_eq(fx_feedback(&f, &d, 200, 40, false), 0);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(core_endpoint_sync(f.c, f.ep[k], CORE_ADMIN_ENABLED,
						    40, f.now), 0);
	uint32_t max_seen = 0;
	for (int i = 0; i < 40; i++) {
		d = fx_decide(&f, &a);
		uint32_t mine = fx_info(&f, x).in_flight;
		max_seen = mine > max_seen ? mine : max_seen;
		if (d.endpoint != x)
			break;
	}
	/* total 160 + the ones added to x: the bound is ceil(1.5 x (total
	 * + 1) / 4), about 61 at most; fair + 6 about 47. */
	uint32_t total = 0;
	for (int k = 0; k < 4; k++)
		total += fx_info(&f, f.ep[k]).in_flight;
	ck_assert_uint_le(max_seen, (uint32_t)ceil(1.5 * total / 4));
	ck_assert_uint_gt(max_seen, (uint32_t)ceil(total / 4.0 + 6));
	fx_finish(&f);
}
END_TEST

/* One runtime poll, 200 ms after the last: 4 anonymous requests, and
 * with popular 4 of a's, on x, all completing at once; then x at mine
 * in flight and its peers at others. */
static void poll_once(struct fx *f, const struct core_request *a, int x,
		      bool popular, uint32_t mine, uint32_t others)
{
	f->now += 200;
	for (int j = 0; j < 4; j++) {
		struct core_request r = { 0 };
		struct core_decision d = fx_decide(f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		core_endpoint_complete(f->c, d.endpoint);
	}
	for (int j = 0; popular && j < 4; j++) {
		struct core_decision d = fx_decide(f, a);
		ck_assert_int_eq(d.endpoint, x);
		core_endpoint_complete(f->c, d.endpoint);
	}
	for (int k = 0; k < f->n; k++)
		ck_assert_int_eq(core_endpoint_sync(f->c, f->ep[k], CORE_ADMIN_ENABLED,
						    f->ep[k] == x ? mine : others,
						    f->now), 0);
}

START_TEST(warm_slack_not_while_queued_on_average)
{
	/* warm_entry_tolerates_slack's session on x, then a minute of runtime
	 * polls (every 200 ms), each after 4 anonymous requests that complete
	 * at once:
	 * - slow: x at 8 in flight, its peers at 2. x's average (8) is over
	 *   twice its fair share of the averages ((8 + 3 x 2) / 4 = 3.5), and
	 *   power of two choices sends it few of the requests, so its time
	 *   per request (in flight over rate) is many times its peers': a
	 *   slow server's queue (one that sends its headers before prefill
	 *   shows nothing else). No slack: at the session's next request (x
	 *   at 8, 9 > ceil(1.5 x 15 / 4) = 6) it moves.
	 * - noise: the minute at 2 like its peers, then one poll at 8 (a
	 *   burst): its average stays near 2, and the slack keeps it (9 <=
	 *   ceil(15 / 4 + 6) = 10).
	 * - popular: x at 8 as in slow, but the session itself sends x 4
	 *   requests a poll, completing at once: x's queue comes with its
	 *   rate, its time per request is its peers', and the slack keeps
	 *   it (a popular key's endpoint, as the groups workload has). */
	enum { SLOW, NOISE, POPULAR };
	for (int kind = SLOW; kind <= POPULAR; kind++) {
		struct fx f;
		struct core_request a;
		int x = floorless_session(&f, &a);
		for (int poll = 0; poll <= 300; poll++)
			poll_once(&f, &a, x, kind == POPULAR,
				  poll == 300 || kind != NOISE ? 8 : 2, 2);
		ck_assert_uint_eq(fx_info(&f, x).in_flight, 8);
		struct core_decision d = fx_decide(&f, &a);
		if (kind == SLOW) {
			ck_assert_int_ne(d.endpoint, x);
		} else {
			ck_assert_int_eq(d.endpoint, x);
			ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
		}
		fx_finish(&f);
	}
}
END_TEST

START_TEST(load_floor_lifted_while_queued)
{
	/* A session confirmed on x with the defaults (load_floor 6; new keys
	 * by rendezvous alone, place_load_z 0, so that only the bounds
	 * speak), then a minute of runtime polls (every 200 ms), each after
	 * 4 anonymous requests that complete at once, x's peers at 0 in
	 * flight:
	 * - slow: x at 3 all the minute. Its average (3) is a request or more
	 *   and over twice its fair share (3 / 4), and power of two choices
	 *   sends it none of the requests: its time per request is many
	 *   times the candidates' (over sticky_tolerance, 2.5), a slow
	 *   server's queue. The floor no longer holds, and at 3 in flight
	 *   (4 > ceil(1.5 x 4 / 4) = 2) the session moves, and so does a new
	 *   key hashed to x.
	 * - burst: x at 0 all the minute, then one poll at 3: its average
	 *   stays near 0, and the floor keeps both (3 < 6).
	 * - light: x at 1 and 0 in turn, then one poll at 3: its average
	 *   (about 0.5) is under one request, where each of 4 agents' counts
	 *   are noise: the floor keeps both.
	 * - popular: x at 3 as in slow, but the session itself sends x 4
	 *   requests a poll, completing at once, as many as its peers get:
	 *   x's time per request is twice the candidates', under
	 *   sticky_tolerance: its queue comes with its rate, and the floor
	 *   keeps both. */
	enum { SLOW, BURST, LIGHT, POPULAR };
	for (int kind = SLOW; kind <= POPULAR; kind++) {
		struct core_params p;
		core_params_defaults(&p);
		p.place_load_z = 0;
		struct fx f;
		struct core_request a;
		int x = confirmed_session(&f, &p, &a);
		for (int poll = 0; poll <= 300; poll++)
			poll_once(&f, &a, x, kind == POPULAR,
				  poll == 300 || kind == SLOW || kind == POPULAR ? 3 :
				  kind == LIGHT ? (uint32_t)(poll & 1) : 0, 0);
		ck_assert_uint_eq(fx_info(&f, x).in_flight, 3);
		/* the new key first, completed: the session's request would
		 * put x at the floor; explain names the lifted floor
		 * (warmlanectl's "no load_floor") */
		struct core_request b = fx_session(session_homed_on(&p, 4, x, 1000));
		struct core_trace t;
		struct core_rng copy = f.rng;
		struct core_decision e;
		ck_assert_int_eq(core_explain(f.c, &b, f.now, &copy, &e, &t), 0);
		ck_assert(t.ranked && t.n_rank > 0 && t.rank[0].walked);
		ck_assert_int_eq(t.rank[0].endpoint, x);
		ck_assert(t.rank[0].floor_lifted == (kind == SLOW));
		ck_assert(t.rank[0].bounded == (kind != SLOW));
		struct core_decision db = fx_decide(&f, &b);
		ck_assert_int_eq(db.endpoint, e.endpoint);
		core_endpoint_complete(f.c, db.endpoint);
		struct core_decision d = fx_decide(&f, &a);
		if (kind == SLOW) {
			ck_assert_int_ne(d.endpoint, x);
			ck_assert_int_ne(db.endpoint, x);
		} else {
			ck_assert_int_eq(d.endpoint, x);
			ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
			ck_assert_int_eq(db.endpoint, x);
		}
		fx_finish(&f);
	}
}
END_TEST

/* Answers of tr ms to the session's requests, one after the other, each
 * decided with others requests already in flight on its endpoint, and on
 * each of its peers (a queue of the whole pool's, not of x's alone: the
 * warm slack holds), nothing completing between the decision and its
 * answer: how many answers its endpoint x gave before a decision sent the
 * session elsewhere (max: never). */
static int answers_before_leaving(struct fx *f, const struct core_request *a,
				  int x, int64_t tr, uint32_t others, int max)
{
	for (int n = 0; n < max; n++) {
		for (int k = 0; k < f->n; k++)
			ck_assert_int_eq(core_endpoint_sync(f->c, f->ep[k], CORE_ADMIN_ENABLED,
							    others, f->now), 0);
		struct core_decision d = fx_decide(f, a);
		if (d.endpoint != x)
			return n;
		f->now += (uint64_t)tr; /* its headers, tr after its start */
		ck_assert_int_eq(fx_feedback(f, &d, 200, tr, false), 0);
		core_endpoint_complete(f->c, x);
		f->now += 100;
	}
	return max;
}

static int64_t regular(int i)
{
	(void)i;
	return 40;
}

/* One answer in 10 at 2,000 ms, the others at 20 (mean 218). */
static int64_t irregular(int i)
{
	return i % 10 == 9 ? 2000 : 20;
}

/* A pool of 4, the three endpoints other than x warm at 40 ms to headers,
 * and a session homed on x (its first decision's endpoint) that had 60
 * answers of pattern(i) ms with nothing else in flight. */
static void warm_pool(struct fx *f, const struct core_params *p,
		      struct core_request *a, int *x, int64_t (*pattern)(int))
{
	fx_init(f, 4, p);
	*a = fx_session(1);
	struct core_decision d = fx_decide(f, a);
	*x = d.endpoint;
	ck_assert_int_ge(*x, 0);
	ck_assert_int_eq(fx_feedback(f, &d, 200, pattern(0), false), 0);
	core_endpoint_complete(f->c, *x);
	for (int k = 0; k < 4; k++)
		if (f->ep[k] != *x)
			fx_warm(f, f->ep[k], 40, 30);
	for (int i = 1; i < 60; i++)
		ck_assert_int_eq(answers_before_leaving(f, a, *x, pattern(i), 0, 1), 1);
}

START_TEST(slow_run_leaves_within_a_few_answers)
{
	/* x turns 5x slower (40 -> 200 ms) with nothing queued: slow_run (4)
	 * slow answers and the session leaves. The EWMA alone (slow_run 0)
	 * needs about 10 (0.05-alpha: 40 + 160 x (1 - 0.95^n) > 100). */
	for (int on = 0; on < 2; on++) {
		struct core_params p;
		core_params_defaults(&p);
		p.slow_run = on ? 4 : 0;
		struct fx f;
		struct core_request a;
		int x;
		warm_pool(&f, &p, &a, &x, regular);
		int n = answers_before_leaving(&f, &a, x, 200, 0, 40);
		if (on)
			ck_assert_int_eq(n, 4);
		else
			ck_assert_int_ge(n, 8);
		fx_finish(&f);
	}
}
END_TEST

START_TEST(slow_run_not_from_queue)
{
	/* The same 5x times, each answer's request decided behind 4 others
	 * in flight where x's decisions usually found none: 200 x (1 + ~0) /
	 * (1 + 4) is within the tolerance (100), the queue may explain it,
	 * and no run starts (the EWMA rule still leaves it later). */
	struct core_params p;
	core_params_defaults(&p);
	p.slow_run = 4; /* opt-in */
	struct fx f;
	struct core_request a;
	int x;
	warm_pool(&f, &p, &a, &x, regular); /* its decisions found nothing in flight */
	ck_assert_int_ge(answers_before_leaving(&f, &a, x, 200, 4, 40), 6);
	fx_finish(&f);
}
END_TEST

START_TEST(slow_run_not_on_irregular_answers)
{
	/* x's usual answers are irregular (one in 10 takes 2,000 ms, the
	 * others 20: mean about 218, spread about 600): one answer says
	 * little, and 4 answers at 1,100 ms (over 2.5 x the mean, and 2.5 x
	 * the peers' 40) start no run; only the EWMA rule judges it (it
	 * leaves once its EWMA is over 2.5 x its base: after 8 of them). */
	struct core_params p;
	core_params_defaults(&p);
	p.slow_run = 4; /* opt-in */
	struct fx f;
	struct core_request a;
	int x;
	warm_pool(&f, &p, &a, &x, irregular);
	ck_assert_int_ge(answers_before_leaving(&f, &a, x, 1100, 0, 6), 5);
	fx_finish(&f);
}
END_TEST

START_TEST(slow_run_queue_of_its_own_slowness)
{
	/* x's warm answers never found a queue (its gain untaught: 1, a
	 * queue explains as much as for a server serving one by one). It
	 * turns 5x slower: the first 200 ms answer found nothing in flight,
	 * the next ones 3, as its clients' requests pile up on it, and are
	 * no slower: the queue's wait does not show, the run counts them,
	 * and x is left on its 4th slow answer (the 3rd of them). Judged by
	 * their queue alone they were explained, and x kept the session
	 * until the EWMA left it. */
	struct core_params p;
	core_params_defaults(&p);
	struct fx f;
	struct core_request a;
	int x;
	warm_pool(&f, &p, &a, &x, regular);
	ck_assert_int_eq(answers_before_leaving(&f, &a, x, 200, 0, 1), 1);
	ck_assert_int_eq(answers_before_leaving(&f, &a, x, 200, 3, 12), 3);
	fx_finish(&f);
}
END_TEST

START_TEST(slow_run_queue_gain_learnt)
{
	/* x's warm answers alternate between decisions that found nothing
	 * and one request in flight. A server that runs its requests one by
	 * one answers the second kind in twice the time (40 / 80 ms); one
	 * that runs them at once, as the e2e fake servers do, in the same
	 * 40. Then answers of 220 ms decided behind 3 in flight: what the
	 * first one's queue explains (4 x 55), 5x slower for the second.
	 * The first keeps the session over 6 of them (the EWMA leaves it
	 * later); the second is left after slow_run (4), where a queue gain
	 * fixed at 1 (every queue explains as the first's) kept it as long
	 * as the first. */
	for (int serial = 0; serial < 2; serial++) {
		struct core_params p;
		core_params_defaults(&p);
		struct fx f;
		struct core_request a;
		int x;
		warm_pool(&f, &p, &a, &x, regular);
		for (int i = 0; i < 60; i++) {
			uint32_t q = (uint32_t)(i & 1);
			ck_assert_int_eq(answers_before_leaving(&f, &a, x, serial ? 40 * (1 + q) : 40,
								q, 1), 1);
		}
		int n = answers_before_leaving(&f, &a, x, 220, 3, 12);
		printf("# %s server: %d answers of 220 ms behind 3 before leaving\n",
		       serial ? "serial" : "concurrent", n);
		if (serial)
			ck_assert_int_ge(n, 6);
		else
			ck_assert_int_eq(n, 4);
		fx_finish(&f);
	}
}
END_TEST

/* n sessions whose first rendezvous choice, on an idle pool of 4, is
 * endpoint ep (the former rule, owned_bound off), from session 1 up. */
static void sessions_homed_on(int ep, uint64_t *out, int n)
{
	struct core_params p;
	core_params_defaults(&p);
	p.owned_bound = -1;
	uint64_t s = 1;
	for (int i = 0; i < n; i++) {
		s = session_homed_on(&p, 4, ep, s);
		out[i] = s++;
	}
}

START_TEST(owned_bound_spreads_new_keys)
{
	/* 32 new sessions whose first rendezvous choice is all the same
	 * endpoint x, each answered before the next (nothing in flight: the
	 * load bound never binds, as on a lightly loaded fleet). The former
	 * rule puts all 32 on x; with owned_bound 0.25 no endpoint owns more
	 * than 1.25 x the mean (8) + 1 key, and every key is still placed by
	 * the ranking (reason hash). */
	uint64_t keys[32];
	sessions_homed_on(0, keys, 32);
	for (int on = 0; on < 2; on++) {
		struct core_params p;
		core_params_defaults(&p);
		p.owned_bound = on ? 0.25 : -1;
		struct fx f;
		fx_init(&f, 4, &p);
		int count[4] = { 0 };
		for (int i = 0; i < 32; i++) {
			struct core_request r = fx_session(keys[i]);
			struct core_decision d = fx_decide(&f, &r);
			ck_assert_int_eq(d.reason, CORE_REASON_HASH);
			ck_assert_int_eq(fx_feedback(&f, &d, 200, 40, false), 0);
			core_endpoint_complete(f.c, d.endpoint);
			count[fx_which(&f, d.endpoint)]++;
			f.now += 1000;
		}
		int most = 0;
		for (int e = 0; e < 4; e++)
			most = count[e] > most ? count[e] : most;
		if (on)
			ck_assert_int_le(most, 11);
		else
			ck_assert_int_eq(count[0], 32);
		/* A placed key's entry is what keeps it: its next turn stays,
		 * whatever x owns. */
		struct core_request r = fx_session(keys[31]);
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
		fx_finish(&f);
	}
}
END_TEST

START_TEST(owned_counts_decay)
{
	/* Three new sessions homed on x: the third is passed over (x owns 2,
	 * over 1.25 x 2/4 + 1). After 10 half-lives what x was given is
	 * forgotten: a fourth new session homed on x goes to x. With a
	 * half-life far longer than the pause it is passed over again. Then,
	 * after 50 more half-lives (past the 40 at which the clock's epoch
	 * moves and every count is rescaled), x owning 2 of what it was
	 * given 10 half-lives ago and 1 since, a fifth goes to x too. */
	uint64_t keys[5];
	sessions_homed_on(0, keys, 5);
	for (int decays = 0; decays < 2; decays++) {
		struct core_params p;
		core_params_defaults(&p);
		p.owned_bound = 0.25;
		p.owned_half_life_ms = decays ? 1000 : 1000 * 1000 * 1000;
		struct fx f;
		fx_init(&f, 4, &p);
		int x = f.ep[0];
		for (int i = 0; i < 3; i++) {
			struct core_request r = fx_session(keys[i]);
			struct core_decision d = fx_decide(&f, &r);
			ck_assert_int_eq(fx_feedback(&f, &d, 200, 40, false), 0);
			core_endpoint_complete(f.c, d.endpoint);
			if (i < 2)
				ck_assert_int_eq(d.endpoint, x);
			else
				ck_assert_int_ne(d.endpoint, x);
		}
		f.now += 10 * 1000;
		struct core_request r = fx_session(keys[3]);
		struct core_decision d = fx_decide(&f, &r);
		if (decays)
			ck_assert_int_eq(d.endpoint, x);
		else
			ck_assert_int_ne(d.endpoint, x);
		core_endpoint_complete(f.c, d.endpoint);
		if (decays) {
			f.now += 50 * 1000;
			r = fx_session(keys[4]);
			d = fx_decide(&f, &r);
			ck_assert_int_eq(d.endpoint, x);
		}
		fx_finish(&f);
	}
}
END_TEST

START_TEST(owned_counts_a_key_once)
{
	/* One session id used in turn for model m-a (served by a1, a2) and
	 * m-b (b1, b2), each answered: every m-b success moves the entry to
	 * a b server, so each m-a turn is placed by the ranking again while
	 * the key has an entry elsewhere. It was counted when it was new:
	 * charged again at each turn, its a server would own 5 after 5 turns,
	 * over 1.5 x 5/2 + 1, and the 6th turn would move it to the other a
	 * server and its cold cache. */
	struct core_params p;
	core_params_defaults(&p);
	struct fx f;
	fx_init(&f, 0, &p);
	fx_add(&f, "a1", NULL, 1, "m-a");
	fx_add(&f, "a2", NULL, 1, "m-a");
	fx_add(&f, "b1", NULL, 1, "m-b");
	fx_add(&f, "b2", NULL, 1, "m-b");
	int first = -1;
	for (int i = 0; i < 16; i++) {
		struct core_request r = fx_session(77);
		r.model = core_str_c(i % 2 == 0 ? "m-a" : "m-b");
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_ge(d.endpoint, 0);
		ck_assert_int_eq(fx_feedback(&f, &d, 200, 40, false), 0);
		core_endpoint_complete(f.c, d.endpoint);
		if (i % 2 == 0) {
			ck_assert_int_eq(d.reason, CORE_REASON_HASH);
			if (first < 0)
				first = d.endpoint;
			ck_assert_int_eq(d.endpoint, first);
		}
		f.now += 1000;
	}
	fx_finish(&f);
}
END_TEST

START_TEST(owned_counts_concurrent_requests_once)
{
	/* Six requests of one new session sent together, none answered yet
	 * (no entry): one key, not six. Counted six times, its endpoint would
	 * own 5 at the sixth (over 1.5 x 5/2 + 1 on a pool of 2) and that one
	 * would go to the other server (the engineload e2e test). All six go
	 * where the first went. */
	struct core_params p;
	core_params_defaults(&p);
	p.load_floor = 100; /* only the owned rule speaks */
	struct fx f;
	fx_init(&f, 2, &p);
	struct core_request r = fx_session(5);
	int first = fx_decide(&f, &r).endpoint;
	for (int i = 1; i < 6; i++)
		ck_assert_int_eq(fx_decide(&f, &r).endpoint, first);
	fx_finish(&f);
}
END_TEST

START_TEST(owned_bound_rejects_bad_params)
{
	struct core_params p;
	core_params_defaults(&p);
	struct core *c = NULL;
	p.owned_bound = NAN;
	ck_assert_int_eq(core_create(&c, &p), -EINVAL);
	p.owned_bound = 0.25;
	p.owned_half_life_ms = 0;
	ck_assert_int_eq(core_create(&c, &p), -EINVAL);
	p.owned_bound = -1; /* off: the half-life is not used */
	ck_assert_int_eq(core_create(&c, &p), 0);
	core_destroy(c);
}
END_TEST

/* Four sessions homed on one endpoint x, each sending its next request
 * as soon as its previous one answers (four clients), so that x always
 * has four requests in flight, started 10 ms apart. x does 38-42 ms of
 * work per request; from change_at on, either it stops for pause_ms (a
 * stall: every request in flight then is delayed by it; healthy before
 * and after) or its work takes slow_ms (a slower regime). */
enum { PIPE = 4 };
struct pipe {
	struct fx f;
	int x;
	struct core_request r[PIPE];
	struct core_decision d[PIPE];
	uint64_t start[PIPE], due[PIPE];
	uint64_t change_at, pause_ms;
	int64_t slow_ms;
	unsigned served;             /* requests x did, for the jitter */
};

static uint64_t pipe_due(struct pipe *pp, int ep, uint64_t start)
{
	int64_t work = 38 + (int64_t)(pp->served++ % 5);
	if (ep != pp->x)
		return start + 40;
	if (pp->slow_ms > 0 && start >= pp->change_at)
		work = pp->slow_ms;
	uint64_t due = start + (uint64_t)work;
	uint64_t p0 = pp->change_at, p1 = pp->change_at + pp->pause_ms;
	if (pp->pause_ms > 0 && start < p0 && due > p0)
		due += pp->pause_ms;
	else if (pp->pause_ms > 0 && start >= p0 && start < p1)
		due = p1 + (uint64_t)work;
	return due;
}

static void pipe_init(struct pipe *pp, int slow_run)
{
	struct core_params p;
	core_params_defaults(&p);
	p.owned_bound = -1;
	p.slow_run = (uint32_t)slow_run;
	*pp = (struct pipe){ .change_at = UINT64_MAX };
	fx_init(&pp->f, 4, &p);
	pp->x = pp->f.ep[0];
	uint64_t s[PIPE];
	sessions_homed_on(pp->x, s, PIPE);
	for (int k = 1; k < 4; k++)
		fx_warm(&pp->f, pp->f.ep[k], 40, 30);
	for (int i = 0; i < PIPE; i++) {
		pp->r[i] = fx_session(s[i]);
		pp->d[i] = fx_decide(&pp->f, &pp->r[i]);
		ck_assert_int_eq(pp->d[i].endpoint, pp->x);
		pp->start[i] = pp->f.now;
		pp->due[i] = pipe_due(pp, pp->x, pp->f.now);
		pp->f.now += 10;
	}
}

/* Runs n answers; returns how many requests were decided to x at or
 * after change_at before the first decision elsewhere (*left set), or
 * all of them. */
static int pipe_run(struct pipe *pp, int n, bool *left)
{
	int to_x = 0;
	*left = false;
	for (int k = 0; k < n; k++) {
		int i = 0;
		for (int j = 1; j < PIPE; j++)
			if (pp->due[j] < pp->due[i])
				i = j;
		struct fx *f = &pp->f;
		f->now = pp->due[i];
		ck_assert_int_eq(fx_feedback(f, &pp->d[i], 200,
					     (int64_t)(pp->due[i] - pp->start[i]),
					     false), 0);
		core_endpoint_complete(f->c, pp->d[i].endpoint);
		pp->d[i] = fx_decide(f, &pp->r[i]);
		ck_assert_int_ge(pp->d[i].endpoint, 0);
		if (pp->d[i].endpoint != pp->x)
			*left = true;
		else if (!*left && f->now >= pp->change_at)
			to_x++;
		pp->start[i] = f->now;
		pp->due[i] = pipe_due(pp, pp->d[i].endpoint, f->now);
	}
	return to_x;
}

START_TEST(slow_run_not_on_one_stall)
{
	/* x stops for 300 ms with its four requests in flight (each decided
	 * behind the usual three), healthy before and after: four answers
	 * of 300-340 ms in a row, over 2.5 x the base and the median, that
	 * the queue does not explain. One pause fits inside all four
	 * requests (stall.h): it is one piece of evidence, the run waits for
	 * another, the next answers are healthy and end it. Its sessions
	 * stay, over 200 answers after. */
	struct pipe pp;
	pipe_init(&pp, 4);
	bool left;
	pipe_run(&pp, 240, &left);
	ck_assert(!left);
	pp.change_at = pp.f.now + 5;
	pp.pause_ms = 300;
	pipe_run(&pp, 200, &left);
	ck_assert(!left);
	fx_finish(&pp.f);
}
END_TEST

START_TEST(slow_run_leaves_concurrent_slowdown)
{
	/* The same four clients, x turning 5x slower (200 ms): the first
	 * four slow answers are one pause as far as they tell (their
	 * requests started within 30 ms), the next round's, sent after them,
	 * is another, and x is left: within 10 of its requests after the
	 * change (8: its two rounds). The EWMA alone (slow_run 0) needs
	 * more. */
	for (int on = 0; on < 2; on++) {
		struct pipe pp;
		pipe_init(&pp, on ? 4 : 0);
		bool left;
		pipe_run(&pp, 240, &left);
		ck_assert(!left);
		pp.change_at = pp.f.now + 5;
		pp.slow_ms = 200;
		int n = pipe_run(&pp, 100, &left);
		printf("# slow_run %d: %d requests to x after the change\n",
		       on ? 4 : 0, n);
		ck_assert(left);
		if (on)
			ck_assert_int_le(n, 10);
		else
			ck_assert_int_gt(n, 10);
		fx_finish(&pp.f);
	}
}
END_TEST

/* Times to headers of requests whose prompts differ: a prefill-bound
 * server's answers, base x the prompt's factor. */
static const int64_t prompt_factor[8] = { 1, 3, 1, 6, 2, 1, 4, 2 };

/* Answers of endpoint ep, n of them, base_ms x the prompt factors
 * (requests of one kind, streamed or not, no key: only the endpoint's
 * statistics learn). */
static void answers_of(struct fx *f, int ep, int64_t base_ms, int n, bool stream)
{
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(fx_observe(f, ep, 200, base_ms * prompt_factor[i % 8],
					    false, 0, stream), 0);
}

/* answers_of plain requests. */
static void answers(struct fx *f, int ep, int64_t base_ms, int n)
{
	answers_of(f, ep, base_ms, n, false);
}

/* 20 new sessions whose first rendezvous choice is endpoint 0 (x), after
 * x answered x_answers times at x_ms and each peer 8 times at peer_ms
 * (prefill-bound: x_ms, peer_ms times the prompt factors; peer_ms
 * negative: a vLLM-style peer, -peer_ms whatever the prompt; x_ms
 * negative: -x_ms whatever the prompt, every answer cold or queued). Each
 * session answered before the next comes, x at x_ms, the others at
 * |peer_ms|, nothing in flight (the load bound never binds). Returns how
 * many x got; every one placed by the ranking. */
static int new_keys_to_x(double slow_start, int64_t x_ms, int x_answers, int64_t peer_ms)
{
	uint64_t keys[20];
	sessions_homed_on(0, keys, 20);
	struct core_params p;
	core_params_defaults(&p);
	p.owned_bound = -1;
	p.slow_start = slow_start;
	struct fx f;
	fx_init(&f, 4, &p);
	ck_assert_int_eq(f.ep[0], 0);
	if (x_ms < 0)
		for (int i = 0; i < x_answers; i++)
			ck_assert_int_eq(fx_observe(&f, 0, 200, -x_ms, false, 0, false), 0);
	else
		answers(&f, 0, x_ms, x_answers);
	for (int e = 1; e < 4; e++) {
		if (peer_ms < 0)
			for (int i = 0; i < 8; i++)
				ck_assert_int_eq(fx_observe(&f, f.ep[e], 200, -peer_ms, false, 0, false), 0);
		else
			answers(&f, f.ep[e], peer_ms, 8);
	}
	int got = 0;
	for (int i = 0; i < 20; i++) {
		struct core_request r = fx_session(keys[i]);
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_eq(d.reason, CORE_REASON_HASH);
		got += d.endpoint == 0;
		ck_assert_int_eq(fx_feedback(&f, &d, 200, d.endpoint == 0 ? llabs(x_ms) : llabs(peer_ms), false), 0);
		core_endpoint_complete(f.c, d.endpoint);
		f.now += 1000;
	}
	fx_finish(&f);
	return got;
}

START_TEST(slow_start_passes_over_new_keys)
{
	/* x 5x slower than its peers from its first answer: after 5 answers,
	 * far under cold_start_samples (20), no new key whose hash chooses it
	 * goes to it; with the rule off all 20 do (nothing else judges an
	 * endpoint with no past of its own). */
	ck_assert_int_eq(new_keys_to_x(2, 500, 5, 100), 0);
	ck_assert_int_eq(new_keys_to_x(0, 500, 5, 100), 20);
	/* Before its 5th answer it is not judged: its first key, answered
	 * (its 5th), then none. */
	ck_assert_int_eq(new_keys_to_x(2, 500, 4, 100), 1);
}
END_TEST

START_TEST(slow_start_judges_comparable_peers_only)
{
	/* Twice slower than its peers: within sticky_tolerance (2.5), it
	 * keeps its share. */
	ck_assert_int_eq(new_keys_to_x(2, 200, 8, 100), 20);
	/* Peers that send their headers before prefill (vLLM: 5 ms whatever
	 * the prompt) say nothing of a prefill-bound x 20x over them. */
	ck_assert_int_eq(new_keys_to_x(2, 100, 8, -5), 20);
	/* The other way round they compare: an x answering every prompt in
	 * 1.5 s, alike, beside prefill-bound peers whose cache hits make
	 * theirs vary (about 200 ms), is slow from its start. */
	ck_assert_int_eq(new_keys_to_x(2, -1500, 8, 100), 0);
	/* Within sticky_tolerance of them (400 ms): kept. */
	ck_assert_int_eq(new_keys_to_x(2, -400, 8, 100), 20);
}
END_TEST

/* 20 new plain sessions whose first rendezvous choice is endpoint 0
 * (x), after 8 answers of each kind from every endpoint (prefill-bound,
 * the prompt factors): x's plain ones at x_plain, its streamed ones at
 * x_stream, every peer's at 100 ms. Returns how many x got. */
static int new_keys_to_x_by_kind(int64_t x_plain, int64_t x_stream)
{
	uint64_t keys[20];
	sessions_homed_on(0, keys, 20);
	struct core_params p;
	core_params_defaults(&p);
	p.owned_bound = -1;
	struct fx f;
	fx_init(&f, 4, &p);
	ck_assert_int_eq(f.ep[0], 0);
	answers_of(&f, 0, x_plain, 8, false);
	answers_of(&f, 0, x_stream, 8, true);
	for (int e = 1; e < 4; e++) {
		answers_of(&f, f.ep[e], 100, 8, false);
		answers_of(&f, f.ep[e], 100, 8, true);
	}
	int got = 0;
	for (int i = 0; i < 20; i++) {
		struct core_request r = fx_session(keys[i]);
		struct core_decision d = fx_decide(&f, &r);
		got += d.endpoint == 0;
		ck_assert_int_eq(fx_feedback(&f, &d, 200, d.endpoint == 0 ? x_plain : 100, false), 0);
		core_endpoint_complete(f.c, d.endpoint);
		f.now += 1000;
	}
	fx_finish(&f);
	return got;
}


/* n sessions (at most 4) whose rendezvous choice is endpoint 0 (x),
 * placed there before x answered anything and answered at x_ms x the
 * prompt factors, then x's more answers (8 in all) and each peer's 8 at
 * peer_ms x the same factors; with x_stream > 0, 8 streamed answers of
 * x's at x_stream and of each peer's at peer_ms too. Returns how many of
 * their second turns stay on x (a warm hit; one placed there again
 * fails the test). */
static int warm_turns_stay_on_kinds(bool leave, int64_t x_ms, int64_t x_stream,
				    int64_t peer_ms, int n, double owned_bound)
{
	uint64_t keys[4];
	sessions_homed_on(0, keys, 4);
	struct core_params p;
	core_params_defaults(&p);
	p.owned_bound = owned_bound;
	p.slow_start_leave = leave;
	struct fx f;
	fx_init(&f, 4, &p);
	ck_assert_int_eq(f.ep[0], 0);
	for (int i = 0; i < n; i++) {
		struct core_request r = fx_session(keys[i]);
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_eq(d.endpoint, 0);
		ck_assert_int_eq(fx_feedback(&f, &d, 200, x_ms * prompt_factor[i], false), 0);
		core_endpoint_complete(f.c, d.endpoint);
		f.now += 1000;
	}
	for (int i = n; i < 8; i++)
		ck_assert_int_eq(fx_observe(&f, 0, 200, x_ms * prompt_factor[i],
					    false, 0, false), 0);
	for (int e = 1; e < 4; e++)
		answers(&f, f.ep[e], peer_ms, 8);
	if (x_stream > 0) {
		answers_of(&f, 0, x_stream, 8, true);
		for (int e = 1; e < 4; e++)
			answers_of(&f, f.ep[e], peer_ms, 8, true);
	}
	int stayed = 0;
	for (int i = 0; i < n; i++) {
		struct core_request r = fx_session(keys[i]);
		/* explain names the rule (warmlanectl explain: "slow from
		 * its start") and decides as the decision does */
		static struct core_trace t;
		struct core_rng copy = f.rng;
		struct core_decision e;
		ck_assert_int_eq(core_explain(f.c, &r, f.now, &copy, &e, &t), 0);
		struct core_decision d = fx_decide(&f, &r);
		ck_assert_int_eq(e.endpoint, d.endpoint);
		ck_assert(t.entry && t.entry_endpoint == 0 && t.entry_bounded);
		ck_assert(t.entry_start == (d.endpoint == 0));
		if (d.endpoint == 0) {
			ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
			stayed++;
		} else {
			ck_assert_int_eq(d.reason, CORE_REASON_HASH);
		}
		ck_assert_int_eq(fx_feedback(&f, &d, 200, d.endpoint == 0 ? x_ms : peer_ms, false), 0);
		core_endpoint_complete(f.c, d.endpoint);
		f.now += 1000;
	}
	fx_finish(&f);
	return stayed;
}

static int warm_turns_stay_on(bool leave, int64_t x_ms, int64_t peer_ms, int n,
			      double owned_bound)
{
	return warm_turns_stay_on_kinds(leave, x_ms, 0, peer_ms, n, owned_bound);
}

static int warm_turns_stay_on_x(bool leave, int64_t x_ms, int64_t peer_ms)
{
	return warm_turns_stay_on(leave, x_ms, peer_ms, 4, -1);
}

START_TEST(slow_start_in_every_kind)
{
	/* x's plain answers 5x its peers', its streamed ones as fast as
	 * theirs: it was given the costlier plain work (a cold fleet's first
	 * long prompts), it is not slow from its start. */
	ck_assert_int_eq(new_keys_to_x_by_kind(500, 100), 20);
	/* 5x slower in both kinds: slow from its start. */
	ck_assert_int_eq(new_keys_to_x_by_kind(500, 500), 0);
	/* Its streamed answers 3x (over sticky_tolerance) agree. */
	ck_assert_int_eq(new_keys_to_x_by_kind(500, 300), 0);
	/* Warm keys by the same judgement (slow_start_leave): the first
	 * hit walks the candidates, the next ones pass on the streamed
	 * answers' witness. */
	ck_assert_int_eq(warm_turns_stay_on_kinds(true, 500, 100, 100, 4, -1), 4);
	ck_assert_int_eq(warm_turns_stay_on_kinds(true, 500, 500, 100, 4, -1), 0);
}
END_TEST

START_TEST(slow_start_leave_moves_warm_keys)
{
	/* x 5x slower than every peer from its first answer: with the rule,
	 * the sessions it took before it was judged leave it at their next
	 * turn; without it they stay (its own past is as slow: the sticky
	 * rule keeps them). */
	ck_assert_int_eq(warm_turns_stay_on_x(true, 500, 100), 0);
	ck_assert_int_eq(warm_turns_stay_on_x(false, 500, 100), 4);
	/* Twice slower, within sticky_tolerance: they stay. */
	ck_assert_int_eq(warm_turns_stay_on_x(true, 200, 100), 4);
	/* As fast as its peers: they stay (the witness's path). */
	ck_assert_int_eq(warm_turns_stay_on_x(true, 100, 100), 4);
	/* With owned_bound on, one session: its first placement, answered,
	 * is no longer an unanswered one that step 4 keeps where it went
	 * (its pending slot stayed after the answer: it stayed on x). */
	ck_assert_int_eq(warm_turns_stay_on(true, 500, 100, 1, 0.5), 0);
}
END_TEST

/* A prefix key's request of turn turn (0: unknown), with a session id
 * of the same hash if session. */
static struct core_request hot_req(uint64_t h, uint16_t turn, bool session)
{
	return (struct core_request){ .prefix = { { true, h } }, .turn = turn,
				      .session = { session, h } };
}

/* One request of r, answered at 40 ms and completed: its endpoint. */
static int hot_answered(struct fx *f, const struct core_request *r)
{
	struct core_decision d = fx_decide(f, r);
	ck_assert_int_eq(fx_feedback(f, &d, 200, 40, false), 0);
	core_endpoint_complete(f->c, d.endpoint);
	return d.endpoint;
}

/* The pool of 4 the hot key tests run on: load_floor 0, hot_share. */
static void hot_pool(struct fx *f, double hot_share)
{
	struct core_params p;
	core_params_defaults(&p);
	p.load_floor = 0;
	p.hot_share = hot_share;
	fx_init(f, 4, &p);
}

/* Hot keys (policy.hot_share): how one prefix key's requests of turn
 * turn (0: unknown) go, on a pool of 4 with load_floor 0 so that the load
 * bound speaks at a request or two, after `others` requests of other
 * keys, each answered. Its first request is answered on x; its second
 * goes there too (nothing in flight); its third, with the second still
 * out, finds x over the bound (2 > ceil(1.5 x 2 / 4)). Returns the third
 * one's endpoint, x in *x; *spreads the core's count. */
static int hot_third(double hot_share, uint16_t turn_step, bool session,
		     int others, int *x, uint64_t *spreads)
{
	struct fx f;
	hot_pool(&f, hot_share);
	for (int i = 0; i < others; i++, f.now += 10) {
		struct core_request o = hot_req(1000 + (uint64_t)i, 1, false);
		hot_answered(&f, &o);
	}
	uint16_t turn = 1;
	struct core_request a = hot_req(7, turn, session);
	*x = hot_answered(&f, &a);
	f.now += 10;
	a.turn = turn += turn_step;
	struct core_decision d2 = fx_decide(&f, &a);
	ck_assert_int_eq(d2.endpoint, *x);
	ck_assert_int_eq(d2.reason, CORE_REASON_AFFINITY);
	a.turn = turn += turn_step;
	struct core_decision d3 = fx_decide(&f, &a);
	struct core_stats cs;
	core_stats(f.c, &cs);
	*spreads = cs.twin_spreads;
	fx_finish(&f);
	return d3.endpoint;
}

START_TEST(hot_key_spreads_only_when_hot_and_shared)
{
	/* The third request leaves x only for a key that is hot (all the
	 * traffic here), whose turns go back (1, 1, 1) and that has no
	 * session id; with hot_share 0, turns that step forward (one
	 * conversation), a session id, or a share under hot_share x 1/4
	 * (3 of 43 requests: 7%, under 12.5%) it keeps its warm entry
	 * within the warm slack. */
	int x;
	uint64_t spreads;
	int e = hot_third(0.5, 0, false, 0, &x, &spreads);
	ck_assert_int_ne(e, x);
	ck_assert_uint_eq(spreads, 1);
	e = hot_third(0, 0, false, 0, &x, &spreads);
	ck_assert_int_eq(e, x);
	ck_assert_uint_eq(spreads, 0);
	e = hot_third(0.5, 1, false, 0, &x, &spreads);
	ck_assert_int_eq(e, x);
	ck_assert_uint_eq(spreads, 0);
	e = hot_third(0.5, 0, true, 0, &x, &spreads);
	ck_assert_int_eq(e, x);
	ck_assert_uint_eq(spreads, 0);
	e = hot_third(0.5, 0, false, 40, &x, &spreads);
	ck_assert_int_eq(e, x);
	ck_assert_uint_eq(spreads, 0);
}
END_TEST

START_TEST(hot_share_rejects_bad_params)
{
	/* Not a finite share of 0 or more: refused at creation and by a
	 * reload, which keeps the value in force. */
	struct core_params p;
	core_params_defaults(&p);
	struct core *c = NULL;
	const double bad[] = { NAN, INFINITY, -0.5 };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p.hot_share = bad[i];
		ck_assert_int_eq(core_create(&c, &p), -EINVAL);
	}
	p.hot_share = 0; /* off */
	ck_assert_int_eq(core_create(&c, &p), 0);
	p.hot_share = NAN;
	ck_assert_int_eq(core_set_params(c, &p), -EINVAL);
	ck_assert(core_params(c)->hot_share == 0);
	core_destroy(c);
}
END_TEST

START_TEST(hot_key_goes_to_the_cheaper_twin)
{
	/* A hot key spread from x to y (hot_third's first case), answered
	 * there: both warm, each later request goes to the one with fewer
	 * in flight (equal latencies; a tie keeps the entry's), reason
	 * affinity, and an answer from the twin swaps the two. */
	struct fx f;
	hot_pool(&f, 0.5);
	struct core_request a = hot_req(7, 1, false);
	int x = hot_answered(&f, &a);
	f.now += 10;
	struct core_decision d2 = fx_decide(&f, &a); /* x: 1 in flight */
	ck_assert_int_eq(d2.endpoint, x);
	/* explain says so first, and changes nothing */
	struct core_trace t;
	struct core_decision de;
	struct core_rng rng = f.rng;
	ck_assert_int_eq(core_explain(f.c, &a, f.now, &rng, &de, &t), 0);
	ck_assert(t.twin_spread);
	ck_assert_int_eq(t.twin_endpoint, -1);
	ck_assert(t.hot_share > 0.99);
	ck_assert_int_ne(de.endpoint, x);
	struct core_decision d3 = fx_decide(&f, &a); /* spread */
	ck_assert_int_eq(d3.endpoint, de.endpoint);
	int y = d3.endpoint;
	ck_assert_int_ne(y, x);
	ck_assert_int_eq(d3.reason, CORE_REASON_HASH);
	ck_assert_int_eq(fx_feedback(&f, &d3, 200, 40, false), 0);
	core_endpoint_complete(f.c, y);
	/* x 1 in flight, y 0: y (its entry now) */
	struct core_decision d4 = fx_decide(&f, &a);
	ck_assert_int_eq(d4.endpoint, y);
	ck_assert_int_eq(d4.reason, CORE_REASON_AFFINITY);
	/* 1 and 1: a tie keeps the entry's, y */
	struct core_decision d5 = fx_decide(&f, &a);
	ck_assert_int_eq(d5.endpoint, y);
	/* y 2, x 1: its twin x */
	rng = f.rng;
	ck_assert_int_eq(core_explain(f.c, &a, f.now, &rng, &de, &t), 0);
	ck_assert(!t.twin_spread);
	ck_assert_int_eq(t.twin_endpoint, x);
	ck_assert_int_eq(de.endpoint, x);
	struct core_decision d6 = fx_decide(&f, &a);
	ck_assert_int_eq(d6.endpoint, x);
	ck_assert_int_eq(d6.reason, CORE_REASON_AFFINITY);
	struct core_stats cs;
	core_stats(f.c, &cs);
	ck_assert_uint_eq(cs.twin_sends, 1);
	ck_assert_uint_eq(cs.twin_spreads, 1);
	/* x answers it: the entry names x, y is the twin; with y lighter
	 * (its two complete) the next goes to y. */
	ck_assert_int_eq(fx_feedback(&f, &d6, 200, 40, false), 0);
	core_endpoint_complete(f.c, y);
	core_endpoint_complete(f.c, y);
	struct core_decision d7 = fx_decide(&f, &a);
	ck_assert_int_eq(d7.endpoint, y);
	core_stats(f.c, &cs);
	ck_assert_uint_eq(cs.twin_sends, 2);
	fx_finish(&f);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("core-policy");
	TCase *tc = tcase_create("warm bound");
	tcase_add_test(tc, warm_entry_tolerates_slack);
	tcase_add_test(tc, warm_slack_ends_where_bound_is_larger);
	tcase_add_test(tc, warm_slack_not_while_check_slow);
	tcase_add_test(tc, warm_slack_not_while_queued_on_average);
	tcase_add_test(tc, load_floor_lifted_while_queued);
	suite_add_tcase(s, tc);
	tc = tcase_create("slow run");
	tcase_add_test(tc, slow_run_leaves_within_a_few_answers);
	tcase_add_test(tc, slow_run_not_from_queue);
	tcase_add_test(tc, slow_run_not_on_irregular_answers);
	tcase_add_test(tc, slow_run_not_on_one_stall);
	tcase_add_test(tc, slow_run_leaves_concurrent_slowdown);
	tcase_add_test(tc, slow_run_queue_gain_learnt);
	tcase_add_test(tc, slow_run_queue_of_its_own_slowness);
	suite_add_tcase(s, tc);
	tc = tcase_create("owned keys");
	tcase_add_test(tc, owned_bound_spreads_new_keys);
	tcase_add_test(tc, owned_counts_decay);
	tcase_add_test(tc, owned_counts_a_key_once);
	tcase_add_test(tc, owned_counts_concurrent_requests_once);
	tcase_add_test(tc, owned_bound_rejects_bad_params);
	suite_add_tcase(s, tc);
	tc = tcase_create("hot keys");
	tcase_add_test(tc, hot_key_spreads_only_when_hot_and_shared);
	tcase_add_test(tc, hot_key_goes_to_the_cheaper_twin);
	tcase_add_test(tc, hot_share_rejects_bad_params);
	suite_add_tcase(s, tc);
	tc = tcase_create("slow start");
	tcase_add_test(tc, slow_start_passes_over_new_keys);
	tcase_add_test(tc, slow_start_judges_comparable_peers_only);
	tcase_add_test(tc, slow_start_in_every_kind);
	tcase_add_test(tc, slow_start_leave_moves_warm_keys);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
