/* sim_test.c - unit tests (TAP) of the simulator's modules: cache, event queue, fleet files, trace reader. */
#include "sim_cfg.h"
#include "sim_evq.h"
#include "sim_fleet.h"
#include "sim_gen.h"
#include "sim_hints.h"
#include "sim_kv.h"
#include "sim_llama.h"
#include "sim_policy.h"
#include "sim_rng.h"
#include "sim_trace.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_no;
static int failures;

static void ok(int cond, const char *what)
{
	test_no++;
	printf("%sok %d - %s\n", cond ? "" : "not ", test_no, what);
	failures += !cond;
}

/* Reference LRU: an array, most recent first. */
struct ref_lru {
	uint64_t k[64];
	uint32_t n, cap;
};

static int ref_has(const struct ref_lru *r, uint64_t key)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->k[i] == key)
			return 1;
	return 0;
}

static void ref_touch(struct ref_lru *r, uint64_t key)
{
	uint32_t i;
	for (i = 0; i < r->n && r->k[i] != key; i++)
		;
	if (i == r->n) {
		if (r->n < r->cap)
			r->n++;
		i = r->n - 1;
	}
	memmove(&r->k[1], &r->k[0], i * sizeof(r->k[0]));
	r->k[0] = key;
}

static void test_kv(void)
{
	struct sim_kv kv;
	ok(sim_kv_init(&kv, 4) == 0, "kv: init");
	uint64_t a[] = { 1, 2, 3 }, b[] = { 5, 6 }, c[] = { 1, 9, 3 };
	ok(sim_kv_use(&kv, a, 3) == 0, "kv: cold prompt has no hits");
	ok(sim_kv_prefix(&kv, a, 3) == 3, "kv: the prompt is resident afterwards");
	ok(sim_kv_prefix(&kv, c, 3) == 1, "kv: a block after a miss is not reusable");
	ok(sim_kv_use(&kv, b, 2) == 0, "kv: second prompt cold");
	ok(sim_kv_prefix(&kv, a, 3) == 2, "kv: LRU evicts the tail of the older prompt first");
	sim_kv_finish(&kv);

	/* random operations against the reference model (exercises deletion) */
	struct sim_rng rng;
	sim_rng_seed(&rng, 7);
	int same = 1;
	for (uint32_t cap = 1; cap <= 40 && same; cap += 13) {
		struct ref_lru ref = { .cap = cap };
		ok(sim_kv_init(&kv, cap) == 0, "kv: init random");
		for (int op = 0; op < 20000 && same; op++) {
			uint64_t blk[8];
			uint32_t n = sim_rng_range(&rng, 1, 8);
			for (uint32_t i = 0; i < n; i++)
				blk[i] = sim_rng_below(&rng, 60);
			uint32_t want = 0;
			while (want < n && ref_has(&ref, blk[want]))
				want++;
			uint32_t got = sim_kv_use(&kv, blk, n);
			uint32_t m = n < cap ? n : cap;
			for (uint32_t k = m; k-- > 0;)
				ref_touch(&ref, blk[k]);
			same = got == want;
		}
		sim_kv_finish(&kv);
	}
	ok(same, "kv: agrees with a reference LRU over 60,000 random prompts");

	ok(sim_kv_init(&kv, 0) == 0 && sim_kv_use(&kv, a, 3) == 0 && sim_kv_prefix(&kv, a, 3) == 0,
	   "kv: a zero-capacity cache caches nothing");
	sim_kv_finish(&kv);
}

static void test_evq(void)
{
	struct sim_evq q;
	struct sim_rng rng;
	sim_evq_init(&q);
	sim_rng_seed(&rng, 3);
	for (uint32_t i = 0; i < 5000; i++)
		sim_evq_push(&q, sim_rng_below(&rng, 100), 0, i);
	struct sim_event ev, prev = { .t_us = -1 };
	int sorted = 1, n = 0;
	while (sim_evq_pop(&q, &ev) == 0) {
		if (ev.t_us < prev.t_us || (ev.t_us == prev.t_us && ev.arg < prev.arg))
			sorted = 0;
		prev = ev;
		n++;
	}
	ok(sorted && n == 5000, "evq: pops by time, equal times in insertion order");
	sim_evq_finish(&q);
}

static int same_cfg(const struct sim_fleet_cfg *a, const struct sim_fleet_cfg *b)
{
	if (a->nep != b->nep || a->nfault != b->nfault || a->poll_interval_us != b->poll_interval_us ||
	    a->check_fall_us != b->check_fall_us || a->check_rise_us != b->check_rise_us)
		return 0;
	for (uint32_t i = 0; i < a->nep; i++) {
		const struct sim_ep_params *x = &a->ep[i], *y = &b->ep[i];
		if (strcmp(x->name, y->name) || x->prefill_ms_per_ktok != y->prefill_ms_per_ktok ||
		    x->decode_ms_per_tok != y->decode_ms_per_tok ||
		    x->prefill_batch_slowdown != y->prefill_batch_slowdown ||
		    x->decode_batch_slowdown != y->decode_batch_slowdown || x->max_running != y->max_running ||
		    x->cache_blocks != y->cache_blocks || x->speed != y->speed || x->weight != y->weight ||
		    x->cost_per_mtok != y->cost_per_mtok || x->headers_immediate != y->headers_immediate ||
		    x->header_ms != y->header_ms || x->error_ms != y->error_ms || x->start_us != y->start_us ||
		    x->stop_us != y->stop_us)
			return 0;
	}
	return 1;
}

static void test_cfg(const char *dir)
{
	char path[4096], err[256];
	char *text = NULL;
	struct sim_fleet_cfg a = { 0 }, b = { 0 };
	ok(sim_cfg_parse(&a, sim_cfg_default_text, "built-in", err, sizeof(err)) == 0 && a.nep == 8,
	   "cfg: the built-in fleet parses: 8 endpoints");
	snprintf(path, sizeof(path), "%s/fleet.conf", dir);
	ok(sim_cfg_read_file(path, &text, err, sizeof(err)) == 0 &&
		   sim_cfg_parse(&b, text, path, err, sizeof(err)) == 0,
	   "cfg: fleet.conf parses");
	ok(same_cfg(&a, &b), "cfg: fleet.conf is the built-in fleet");
	free(text);
	text = NULL;
	sim_cfg_finish(&a);
	sim_cfg_finish(&b);

	snprintf(path, sizeof(path), "%s/examples/hetero.conf", dir);
	int rc = sim_cfg_read_file(path, &text, err, sizeof(err));
	if (rc == 0)
		rc = sim_cfg_parse(&a, text, path, err, sizeof(err));
	ok(rc == 0 && a.nep == 8 && a.nfault == 6 && a.ep[0].speed == 2 && a.ep[2].headers_immediate &&
		   a.ep[6].stop_us == 900000000 && a.fault[4].period_us == 60000000 && a.fault[5].ep == 0,
	   "cfg: examples/hetero.conf parses with every fault kind");
	if (rc)
		printf("# %s\n", err);
	free(text);
	sim_cfg_finish(&a);
	snprintf(path, sizeof(path), "%s/examples/llama.conf", dir);
	text = NULL;
	rc = sim_cfg_read_file(path, &text, err, sizeof(err));
	if (rc == 0)
		rc = sim_cfg_parse(&a, text, "llama.conf", err, sizeof(err));
	ok(rc == 0 && a.nep == 4 && a.ep[3].cache_llama && a.ep[0].max_running == 1 &&
	   a.ep[0].cache_ram_tokens == 32768 && a.ep[0].slot_similarity == 0.9,
	   "cfg: examples/llama.conf: four llama.cpp endpoints, one slot, 32,768 tokens of host cache");
	if (rc)
		printf("# %s\n", err);
	free(text);
	sim_cfg_finish(&a);
	ok(sim_cfg_parse(&a, sim_cfg_default_text, "built-in", err, sizeof(err)) == 0 && !a.ep[0].cache_llama &&
	   a.ep[0].slot_similarity == 0.1, "cfg: the block cache by default");
	sim_cfg_finish(&a);

	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "[endpoint]\nspeeed = 2\n", "x:2: unknown key: speeed" },
		{ "[endpoint]\nspeed = -1\n", "x:2: bad value: speed" },
		{ "[endpoint]\n[fault]\nendpoint = nope\nkind = 500\n", "x:3: fault names an unknown endpoint: nope" },
		{ "[endpoint]\n[fault]\nendpoint = @1\n", "x:3: fault names an unknown endpoint: @1" },
		{ "[endpoint]\n[fault]\nendpoint = ep1\nkind = 418\n", "x:4: unknown fault kind (500 503 429 401 slow down cut): 418" },
		{ "[nope]\n", "x:1: unknown section: [nope]" },
		{ "speed = 1\n", "x:1: key outside a section: speed" },
		{ "[defaults]\n", "x:1: no [endpoint]" },
		{ "[endpoint]\nname = a\n[endpoint]\nname = a\n", "x:4: duplicate endpoint name: a" },
		{ "[endpoint]\ncache = lru\n", "x:2: bad value: cache" },
		{ "[endpoint]\nslot_prompt_similarity = -0.5\n", "x:2: bad value: slot_prompt_similarity" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char what[160];
		err[0] = '\0';
		rc = sim_cfg_parse(&a, bad[i].text, "x", err, sizeof(err));
		snprintf(what, sizeof(what), "cfg: rejects with \"%s\"", bad[i].msg);
		ok(rc < 0 && strcmp(err, bad[i].msg) == 0, what);
		if (rc == 0 || strcmp(err, bad[i].msg) != 0)
			printf("# got rc %d \"%s\"\n", rc, err);
		sim_cfg_finish(&a);
	}
}

static void test_trace(const char *dir)
{
	char path[4096], err[256];
	struct sim_workload w;
	sim_trace_init(&w, "t");
	snprintf(path, sizeof(path), "%s/testdata/mini.jsonl", dir);
	int rc = sim_trace_load_mooncake(&w, path, 0, err, sizeof(err));
	ok(rc == 0 && w.n == 4, "trace: reads 4 requests, skipping a blank line");
	if (rc == 0 && w.n == 4) {
		ok(w.req[0].input_tokens == 6758 && w.req[0].output_tokens == 500 && w.req[0].nblocks == 14 &&
			   sim_trace_blocks(&w, &w.req[0])[13] == 13,
		   "trace: fields of line 1");
		ok(w.req[3].arrival_us == 3000000 && w.req[3].nblocks == 2 && w.req[3].input_tokens == 700,
		   "trace: keys in any order (line 5)");
		sim_trace_derive_keys(&w, SIM_KEYS_PREFIX);
		ok(w.req[0].prefix[0] && w.req[0].prefix[0] == w.req[1].prefix[0] &&
			   w.req[0].prefix[1] != w.req[1].prefix[1] && w.req[0].prefix[2] && !w.req[0].session,
		   "trace: prefix1 shared (block 0), prefix2/3 per conversation, no session");
		ok(w.req[3].prefix[0] && !w.req[3].prefix[1] && !w.req[3].prefix[2],
		   "trace: a 700-token prompt covers only the 1 KiB window");
		ok(sim_trace_affinity_key(&w.req[0]) == w.req[0].prefix[2] &&
			   sim_trace_affinity_key(&w.req[3]) == w.req[3].prefix[0],
		   "trace: affinity key = the longest prefix key present");
		sim_trace_derive_keys(&w, SIM_KEYS_SESSION);
		ok(w.req[0].session && w.req[0].session != w.req[1].session && !w.req[0].prefix[0] &&
			   sim_trace_affinity_key(&w.req[0]) == w.req[0].session,
		   "trace: session from the first 2 blocks");
	}
	sim_trace_finish(&w);

	/* malformed lines */
	static const char *bad[] = {
		"{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3}\n",
		"{\"timestamp\": -1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": []}\n",
		"{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1,]}\n",
		"{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1]} x\n",
		"{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1]\n",
		"{\"timestamp\": 99999999999999999999999, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1]}\n",
	};
	const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(path, sizeof(path), "%s/warmlane-sim-test-%ld.jsonl", tmpdir, (long)i);
		FILE *f = fopen(path, "w");
		if (!f) {
			ok(0, "trace: temp file");
			continue;
		}
		fputs("{\"timestamp\": 0, \"input_length\": 2, \"output_length\": 3, \"hash_ids\": [1]}\n", f);
		fputs(bad[i], f);
		fclose(f);
		sim_trace_init(&w, "t");
		rc = sim_trace_load_mooncake(&w, path, 0, err, sizeof(err));
		char what[96];
		snprintf(what, sizeof(what), "trace: rejects malformed line %zu with its line number", i + 1);
		ok(rc < 0 && strstr(err, ":2: not a Mooncake trace line") != NULL, what);
		sim_trace_finish(&w);
		remove(path);
	}
}

/* Turns from the prompts' blocks: two conversations sharing a first
 * block (a system prompt), interleaved, a fork, and a request too short
 * to be followed. */
static void test_turns(void)
{
	static const uint64_t p[][8] = {
		{ 1, 10, 11, 12 },          /* A1 */
		{ 1, 20, 21 },              /* B1 */
		{ 1, 10, 11, 13, 14, 15 },  /* A2: A1 but its last block */
		{ 1, 20, 22, 23 },          /* B2 */
		{ 1, 10, 11, 13, 14, 16 },  /* A3: extends A2's 1..14 */
		{ 1, 10, 11, 17 },          /* A2': a fork after A1 */
		{ 1, 30 },                  /* C1, too short to be followed */
		{ 1, 30, 31 },              /* C?: C1 has one full block */
	};
	static const uint32_t nb[] = { 4, 3, 6, 4, 6, 4, 2, 3 };
	static const uint16_t want[] = { 1, 1, 2, 2, 3, 2, 1, 1 };
	struct sim_workload w;
	sim_trace_init(&w, "turns");
	for (unsigned i = 0; i < 8; i++)
		sim_trace_add(&w, i, nb[i] * 512, 1, p[i], nb[i], 1);
	int rc = sim_trace_derive_turns(&w);
	bool same = rc == 0;
	for (unsigned i = 0; same && i < 8; i++)
		same = w.req[i].turn == want[i];
	ok(same, "turns: the latest request whose blocks (but its last) a prompt extends, "
		 "plus one; a shared first block is no conversation");
	sim_trace_finish(&w);
}

static void test_rng(void)
{
	struct sim_rng a, b;
	sim_rng_seed(&a, 42);
	sim_rng_seed(&b, 42);
	int same = 1;
	double sum = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = sim_rng_next(&a);
		same &= x == sim_rng_next(&b);
		sum += sim_rng_unit(&a);
		(void)sim_rng_unit(&b);
	}
	ok(same, "rng: equal seeds, equal streams");
	ok(sum > 450 && sum < 550, "rng: unit draws average about 0.5");
}

/* Keys a hashing policy moves when a 9th endpoint comes up: about 1/9, all
 * to it. The ranking's property: warmlane runs with owned_bound off, as
 * its keys get no answer (no entry) and are new again in the second pass,
 * where what the first pass gave each endpoint would steer them. */
static void test_scale_out(const struct sim_policy *pol)
{
	char err[256], what[128];
	struct sim_fleet_cfg cfg = { 0 };
	char text[2048];
	snprintf(text, sizeof(text), "%s[endpoint]\nname = added\n", sim_cfg_default_text);
	if (sim_cfg_parse(&cfg, text, "t", err, sizeof(err)) < 0 || cfg.nep != 9) {
		ok(0, "scale-out: fleet");
		return;
	}
	struct sim_view_ep ep[9];
	for (uint32_t e = 0; e < 9; e++)
		ep[e] = (struct sim_view_ep){ .name = cfg.ep[e].name, .id = e, .present = e < 8, .up = e < 8,
					      .weight = 1, .cost_per_mtok = 1 };
	struct sim_view v = { .now_us = 1000, .n = 9, .ep = ep };
	static const char *const ranking_only[] = { "owned_bound=-1" };
	struct sim_policy_env env = { .nep = 9, .seed = 1, .cfg = &cfg,
				      .set = ranking_only, .nset = 1 };
	void *st = pol->create(&env);
	enum { NKEYS = 20000 };
	static int8_t before[NKEYS];
	uint32_t moved = 0, elsewhere = 0;
	for (int pass = 0; pass < 2; pass++) {
		ep[8].present = ep[8].up = (uint8_t)pass;
		for (uint32_t k = 0; k < NKEYS; k++) {
			struct sim_req r = { .stream = 1, .prefix = { 0, 0, sim_rng_mix(k + 1) } };
			const char *reason;
			if (pol->poll)
				pol->poll(st, &v); /* in-flight back to 0: no load bound in play */
			int e = pol->decide(st, &v, &r, &reason);
			if (pass == 0) {
				before[k] = (int8_t)e;
			} else if (e != before[k]) {
				moved++;
				elsewhere += e != 8;
			}
		}
	}
	pol->destroy(st);
	sim_cfg_finish(&cfg);
	double f = (double)moved / NKEYS;
	snprintf(what, sizeof(what), "%s: a 9th endpoint takes %.3f of keys (1/9 = 0.111), none moves elsewhere",
		 pol->name, f);
	ok(f > 0.08 && f < 0.15 && elsewhere == 0, what);
}

/* The shared hint table: the writer's HAProxy sees a write at once, the
 * others the value before it until the measured delay has passed; in the
 * start-up window, up to 1.4 s later or never. */
static void test_hints(void)
{
	struct sim_hints h;
	uint32_t ep, w;
	int64_t at;
	int64_t t0 = 5000000;
	if (sim_hints_init(&h, 7, 0) < 0) {
		ok(0, "hints: init");
		return;
	}
	ok(!sim_hints_read(&h, 42, 0, t0, &ep, &at, &w), "hints: nothing before a write");
	sim_hints_write(&h, 42, 3, 0, t0);
	ok(sim_hints_read(&h, 42, 0, t0, &ep, &at, &w) && ep == 3 && at == t0 && w == 0,
	   "hints: the writer's HAProxy sees its write at once, its own");
	ok(!sim_hints_read(&h, 42, 1, t0 + SIM_HINT_DELAY_MIN_US - 1, &ep, &at, &w),
	   "hints: another HAProxy sees nothing before the delay");
	ok(sim_hints_read(&h, 42, 1, t0 + SIM_HINT_DELAY_MAX_US, &ep, &at, &w) && ep == 3,
	   "hints: another HAProxy sees it within the delay");
	sim_hints_write(&h, 42, 5, 1, t0 + 10000);
	ok(sim_hints_read(&h, 42, 0, t0 + 10000, &ep, &at, &w) && ep == 3 && at == t0 && w == 0,
	   "hints: until the next write arrives, the one before");
	ok(sim_hints_read(&h, 42, 0, t0 + 10000 + SIM_HINT_DELAY_MAX_US, &ep, &at, &w) && ep == 5 &&
	   w == 1, "hints: then the new one, the other's");
	/* --hints-lone: peers that never connect, each HAProxy its own. */
	h.lone = 1;
	sim_hints_write(&h, 43, 2, 0, t0);
	ok(!sim_hints_read(&h, 43, 1, t0 + 60000000, &ep, &at, &w),
	   "hints, lone: another HAProxy never sees it");
	ok(sim_hints_read(&h, 43, 0, t0, &ep, &at, &w) && ep == 2 && w == 0,
	   "hints, lone: the writer's HAProxy does, its own");
	h.lone = 0;
	/* 2000 writes in the start-up window: delays up to 1.4 s, about 1 in
	 * 60 lost for the others. */
	int late = 0, seen = 0;
	for (uint64_t k = 100; k < 2100; k++) {
		sim_hints_write(&h, k, 1, 0, 0);
		late += !sim_hints_read(&h, k, 1, 1000, &ep, &at, &w);
		seen += sim_hints_read(&h, k, 1, SIM_HINT_STARTUP_MAX_US, &ep, &at, &w);
	}
	char what[160];
	snprintf(what, sizeof(what), "hints: start-up window, %d of 2000 later than 1 ms, %d seen by 1.4 s, %llu lost",
		 late, seen, (unsigned long long)h.lost);
	ok(late > 1900 && seen + (int)h.lost == 2000 && h.lost > 10 && h.lost < 70, what);
	sim_hints_finish(&h);
}

/* Two warmlane agents sharing the table: a key one of them moved off its
 * hashed endpoint is sent there by the other too; without the table the
 * other hashes it back. */
static void test_hints_policy(void)
{
	char err[256];
	struct sim_fleet_cfg cfg = { 0 };
	if (sim_cfg_parse(&cfg, sim_cfg_default_text, "t", err, sizeof(err)) < 0) {
		ok(0, "hints policy: fleet");
		return;
	}
	struct sim_view_ep ep[16];
	uint32_t n = cfg.nep < 16 ? cfg.nep : 16;
	for (uint32_t e = 0; e < n; e++)
		ep[e] = (struct sim_view_ep){ .name = cfg.ep[e].name, .id = e, .present = 1, .up = 1,
					      .weight = 1, .cost_per_mtok = 1 };
	struct sim_view v = { .now_us = 10000000, .n = n, .ep = ep };
	struct sim_req r = { .stream = 1, .prefix = { 0, 0, sim_rng_mix(99) } };
	const char *reason;
	for (int shared = 0; shared < 2; shared++) {
		struct sim_hints h;
		sim_hints_init(&h, 1, 0);
		struct sim_policy_env e0 = { .nep = n, .seed = 1, .cfg = &cfg, .agent = 0,
					     .hints = shared ? &h : NULL };
		struct sim_policy_env e1 = e0;
		e1.agent = 1;
		e1.seed = 2;
		void *a = sim_pol_warmlane.create(&e0), *b = sim_pol_warmlane.create(&e1);
		int hashed = sim_pol_warmlane.decide(a, &v, &r, &reason);
		uint32_t moved = (uint32_t)(hashed + 1) % n;
		struct sim_feedback fb = { .status = 200, .tr_ms = 100, .stream = 1 };
		sim_pol_warmlane.feedback(a, &v, &r, moved, &fb); /* a's HAProxy redispatched it */
		v.now_us += 1000;
		int got = sim_pol_warmlane.decide(b, &v, &r, &reason);
		char what[160];
		snprintf(what, sizeof(what), "hints policy: %s, the other agent sends the key to %d (hash %d, moved %u)",
			 shared ? "shared" : "independent", got, hashed, moved);
		ok(shared ? got == (int)moved : got == hashed, what);
		sim_pol_warmlane.destroy(a);
		sim_pol_warmlane.destroy(b);
		sim_hints_finish(&h);
	}
	sim_cfg_finish(&cfg);
}

/* llama.cpp's slots and host prompt cache (sim_llama.h). */
static void test_llama(void)
{
	struct sim_llama l;
	uint32_t c = 99;
	/* a: a conversation (10 shared blocks, then its own); a1: a and its
	 * answer; a2: its next turn; b: another conversation */
	uint64_t a2[40], b[30], y[30], big[100];
	for (uint32_t k = 0; k < 40; k++)
		a2[k] = k < 10 ? 1000 + k : 2000 + k;
	for (uint32_t k = 0; k < 30; k++) {
		b[k] = k < 10 ? 1000 + k : 3000 + k;
		y[k] = k < 10 ? 1000 + k : k < 20 ? 2000 + k : 4000 + k; /* starts like a2 */
	}
	for (uint32_t k = 0; k < 100; k++)
		big[k] = k < 10 ? 1000 + k : 5000 + k;
	ok(sim_llama_lcp(a2, 40, b, 30) == 10 && sim_llama_lcp(a2, 20, a2, 40) == 20,
	   "llama: longest common prefix");
	ok(sim_llama_init(&l, 1, 1000, 0.9) == 0, "llama: init");
	int s = sim_llama_start(&l, a2, 20, &c);
	ok(s == 0 && c == 0, "llama: a cold slot computes the whole prompt");
	ok(sim_llama_start(&l, b, 20, &c) == -1, "llama: no idle slot while the only one runs");
	sim_llama_done(&l, s, a2, 24); /* the prompt and 4 generated tokens */
	s = sim_llama_start(&l, a2, 30, &c);
	ok(s == 0 && c == 24, "llama: the next turn reuses the slot's prompt and its answer");
	sim_llama_done(&l, s, a2, 34);
	s = sim_llama_start(&l, b, 30, &c);
	ok(c == 10 && l.nsaved == 1 && l.saved[0].b == a2 && l.saved[0].n == 34,
	   "llama: another prompt reuses the shared prefix, the slot's prompt is saved whole (its "
	   "earlier save, inside it, dropped)");
	sim_llama_done(&l, s, b, 30);
	s = sim_llama_start(&l, a2, 40, &c);
	ok(c == 34 && l.restores == 1 && l.nsaved == 1 && l.saved[0].b == b,
	   "llama: a saved prompt is restored for its next turn and leaves the cache");
	sim_llama_done(&l, s, a2, 40);
	/* the slot holds a2; b is saved. y shares 20 blocks with a2, 10 with b */
	s = sim_llama_start(&l, b, 30, &c);
	sim_llama_done(&l, s, b, 30); /* slot: b; saved: a2 */
	s = sim_llama_start(&l, y, 30, &c);
	ok(c == 20 && l.nsaved == 1 && l.saved[0].b == b,
	   "llama: a prompt sharing a longer prefix with a saved one than with the slot takes it");
	sim_llama_done(&l, s, y, 30);
	s = sim_llama_start(&l, a2, 40, &c);
	ok(c == 20, "llama: ... and that conversation's next turn finds only the common prefix");
	sim_llama_done(&l, s, a2, 40);
	/* a saved prompt is not thrown away for a request using less than a
	 * quarter of it: big saved, the slot holding big2 (both 100 blocks,
	 * 10 shared); z shares 20 with big (1/5 of it), z2 30 */
	uint64_t big2[100], z[40], z2[40];
	for (uint32_t k = 0; k < 100; k++)
		big2[k] = k < 10 ? 1000 + k : 6000 + k;
	for (uint32_t k = 0; k < 40; k++) {
		z[k] = k < 20 ? big[k] : 7000 + k;
		z2[k] = k < 30 ? big[k] : 8000 + k;
	}
	s = sim_llama_start(&l, big, 100, &c);
	sim_llama_done(&l, s, big, 100);
	s = sim_llama_start(&l, big2, 100, &c); /* saves big */
	sim_llama_done(&l, s, big2, 100);
	s = sim_llama_start(&l, z, 40, &c);
	ok(c == 10, "llama: a saved prompt a request would use less than a quarter of stays saved");
	sim_llama_done(&l, s, big2, 100); /* the slot back to big2 */
	s = sim_llama_start(&l, z2, 40, &c);
	ok(c == 30, "llama: ... and is restored for one using more (control)");
	sim_llama_done(&l, s, z2, 40);
	sim_llama_finish(&l);

	/* the host cache: oldest save out first, one always kept; a prompt
	 * already inside a saved one is not saved; saved prompts inside the
	 * new save go */
	ok(sim_llama_init(&l, 1, 50, 0) == 0, "llama: init small");
	uint64_t p[3][30];
	for (int i = 0; i < 3; i++)
		for (uint32_t k = 0; k < 30; k++)
			p[i][k] = (uint64_t)(i + 1) * 100000 + k;
	for (int i = 0; i < 3; i++) {
		s = sim_llama_start(&l, p[i], 30, &c);
		sim_llama_done(&l, s, p[i], 30);
	}
	ok(l.nsaved == 1 && l.saved[0].b == p[1] && l.evictions == 1,
	   "llama: over its size the host cache drops its oldest save");
	s = sim_llama_start(&l, p[1], 10, &c); /* restores p[1]; saves p[2] */
	ok(c == 10 && l.nsaved == 1 && l.saved[0].b == p[2], "llama: restore from the cache (p[1])");
	sim_llama_done(&l, s, p[1], 10);
	uint64_t saves = l.saves;
	s = sim_llama_start(&l, p[2], 30, &c); /* the slot's p[1][0..10) is inside nothing saved */
	sim_llama_done(&l, s, p[2], 30);
	ok(l.saves == saves + 1 && c == 30, "llama: the slot's prefix is saved, p[2] restored");
	s = sim_llama_start(&l, p[0], 30, &c); /* saves p[2][0..30): drops the saved p[1][0..10)? no: not inside */
	sim_llama_done(&l, s, p[0], 30);
	saves = l.saves;
	s = sim_llama_start(&l, p[0], 20, &c); /* the slot's p[0] is not inside anything saved: saved */
	sim_llama_done(&l, s, p[0], 20);
	s = sim_llama_start(&l, p[2], 5, &c); /* slot p[0][0..20) is inside the saved p[0][0..30) */
	ok(l.saves == saves + 1, "llama: a prompt already inside a saved one is not saved again");
	sim_llama_done(&l, s, p[2], 5);
	sim_llama_finish(&l);

	/* slots: by similarity above the threshold, else least recently used */
	ok(sim_llama_init(&l, 2, 1000, 0.5) == 0, "llama: init 2 slots");
	int s0 = sim_llama_start(&l, a2, 20, &c);
	int s1 = sim_llama_start(&l, b, 20, &c);
	sim_llama_done(&l, s0, a2, 20);
	sim_llama_done(&l, s1, b, 20);
	s = sim_llama_start(&l, a2, 30, &c);
	ok(s == s0 && c == 20 && l.saves == 0,
	   "llama: the slot holding most of the prompt, nothing saved when it keeps all");
	sim_llama_done(&l, s, a2, 30);
	s = sim_llama_start(&l, p[0], 30, &c);
	ok(s == s1 && c == 0 && l.saves == 1, "llama: no similar slot: the least recently used, saved first");
	sim_llama_finish(&l);
}

/* The engine benchmark's workload and the closed loop that replays it. */
static void test_engine(void)
{
	struct sim_workload w;
	struct sim_gen_params gp;
	sim_gen_defaults("engine", &gp);
	sim_trace_init(&w, "engine");
	if (sim_gen_run("engine", &w, &gp) < 0 || w.n != 128) {
		ok(0, "engine: workload");
		sim_trace_finish(&w);
		return;
	}
	const struct sim_req *r0 = &w.req[0], *r1 = &w.req[1], *r0b = &w.req[32], *r0d = &w.req[96];
	ok(w.closed == 4 && w.block_tokens == 1 && r0->input_tokens == 1380 && r0b->input_tokens == 1857 &&
	   r0d->input_tokens == 2811, "engine: 4 clients, one block per token, 1380 + 477 per turn");
	ok(sim_llama_lcp(sim_trace_blocks(&w, r0), r0->nblocks, sim_trace_blocks(&w, r1), r1->nblocks) >= 947 &&
	   sim_llama_lcp(sim_trace_blocks(&w, r0), r0->nblocks + r0->gen_blocks, sim_trace_blocks(&w, r0b),
			 r0b->nblocks) == 1395 && r0->conv == r0b->conv,
	   "engine: the system prefix shared, the next turn starts with the prompt and the answer");
	struct sim_workload w2;
	struct sim_gen_params g2 = gp;
	g2.turns = 2;
	g2.clients = 2;
	g2.user_chars = 100;
	sim_trace_init(&w2, "engine");
	ok(sim_gen_run("engine", &w2, &g2) == 0 && w2.n == 64 && w2.closed == 2 &&
	   w2.req[0].input_tokens == 1080 && w2.req[32].input_tokens == 1257,
	   "engine: --turns 2 --clients 2 --user-chars 100: 64 requests, 2 clients, 1080 then 1257 tokens");
	sim_trace_finish(&w2);
	uint32_t sess = 0;
	for (size_t i = 0; i < 32; i++)
		sess += w.req[i].session != 0 && !w.req[i].prefix[0];
	ok(sess > 8 && sess < 24, "engine: about half the conversations send a session id");

	char err[256];
	struct sim_fleet_cfg cfg[2] = { { 0 }, { 0 } };
	static const char *const conf[2] = {
		"[defaults]\nprefill_ms_per_ktok = 700\ndecode_ms_per_tok = 3\nmax_running = 1\n"
		"prefill_batch_slowdown = 0\ndecode_batch_slowdown = 0\n"
		"cache = llama\ncache_ram_tokens = 32768\nslot_prompt_similarity = 0.9\n[endpoint]\nname = e\ncount = 4\n",
		"[defaults]\nprefill_ms_per_ktok = 700\ndecode_ms_per_tok = 3\nmax_running = 1\n"
		"prefill_batch_slowdown = 0\ndecode_batch_slowdown = 0\n"
		"cache = blocks\ncache_blocks = 64\n[endpoint]\nname = e\ncount = 4\n",
	};
	uint32_t lost[2] = { 0, 0 };
	for (int m = 0; m < 2; m++) {
		if (sim_cfg_parse(&cfg[m], conf[m], "engine", err, sizeof(err)) < 0) {
			ok(0, err);
			continue;
		}
		struct sim_run_opts ro = { .policy = &sim_pol_ttl, .agents = 1, .seed = 1 };
		struct sim_run run;
		if (sim_fleet_run(&cfg[m], &w, &ro, &run, err, sizeof(err)) < 0) {
			ok(0, err);
			sim_cfg_finish(&cfg[m]);
			continue;
		}
		/* never more than 4 in flight, never two of one conversation,
		 * every request served */
		uint32_t worst = 0, overlap_conv = 0, served = 0;
		for (size_t i = 0; i < w.n; i++) {
			uint32_t live = 0;
			served += run.rec[i].status == 200;
			for (size_t j = 0; j < w.n; j++) {
				if (w.req[j].arrival_us <= w.req[i].arrival_us && run.rec[j].t_end_us > w.req[i].arrival_us) {
					live++;
					overlap_conv += j != i && w.req[j].conv == w.req[i].conv;
				}
			}
			worst = live > worst ? live : worst;
		}
		for (size_t i = 32; i < w.n; i++) /* later turns on their own server that lost it */
			if (run.rec[i].ep == run.rec[i - 32].ep &&
			    run.rec[i].cached_tokens < 0.9 * w.req[i - 32].input_tokens)
				lost[m]++;
		char what[160];
		snprintf(what, sizeof(what), "engine (%s): at most 4 in flight (%u), no conversation twice, all served",
			 m == 0 ? "llama" : "blocks", worst);
		ok(worst == 4 && overlap_conv == 0 && served == w.n, what);
		sim_fleet_run_finish(&run);
		sim_cfg_finish(&cfg[m]);
	}
	char what[200];
	snprintf(what, sizeof(what), "engine: a stick table keeps every conversation home; llama.cpp's cache still "
		 "loses %u later turns there (the block cache %u), as the real fleet does", lost[0], lost[1]);
	ok(lost[0] >= 10 && lost[1] == 0, what);
	sim_trace_finish(&w);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	test_kv();
	test_evq();
	test_cfg(dir);
	test_trace(dir);
	test_rng();
	test_turns();
	test_scale_out(&sim_pol_chash);
	test_scale_out(&sim_pol_wlmodel);
	test_scale_out(&sim_pol_warmlane);
	test_hints();
	test_hints_policy();
	test_llama();
	test_engine();
	printf("1..%d\n", test_no);
	return failures ? 1 : 0;
}
