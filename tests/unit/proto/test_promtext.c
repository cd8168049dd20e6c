/* test_promtext.c - the Prometheus text parser and engine load reader (proto/promtext.c). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "promtext.h"

/* llama.cpp's llama-server (Debian's llama.cpp-tools 0.7.0, build
 * b11669) started with --metrics --parallel 2, read while four requests
 * were out: two in slots, two deferred. Byte for byte. */
static const char llamacpp_busy[] =
	"# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens\n"
	"# TYPE llamacpp:prompt_tokens_total counter\n"
	"llamacpp:prompt_tokens_total 23\n"
	"# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache\n"
	"# TYPE llamacpp:prompt_tokens_cached_total counter\n"
	"llamacpp:prompt_tokens_cached_total 10\n"
	"# HELP llamacpp:prompt_seconds_total Total time spent processing prompts\n"
	"# TYPE llamacpp:prompt_seconds_total counter\n"
	"llamacpp:prompt_seconds_total 0.008954\n"
	"# HELP llamacpp:tokens_predicted_total Number of generation tokens processed\n"
	"# TYPE llamacpp:tokens_predicted_total counter\n"
	"llamacpp:tokens_predicted_total 200\n"
	"# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens\n"
	"# TYPE llamacpp:tokens_predicted_seconds_total counter\n"
	"llamacpp:tokens_predicted_seconds_total 0.044344\n"
	"# HELP llamacpp:n_decode_total Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding\n"
	"# TYPE llamacpp:n_decode_total counter\n"
	"llamacpp:n_decode_total 865\n"
	"# HELP llamacpp:n_tokens_max Largest observed sequence length (prompt + generation)\n"
	"# TYPE llamacpp:n_tokens_max counter\n"
	"llamacpp:n_tokens_max 675\n"
	"# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated\n"
	"# TYPE llamacpp:spec_decode_num_draft_tokens_total counter\n"
	"llamacpp:spec_decode_num_draft_tokens_total 0\n"
	"# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted by the target model\n"
	"# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter\n"
	"llamacpp:spec_decode_num_accepted_tokens_total 0\n"
	"# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding verification steps\n"
	"# TYPE llamacpp:spec_decode_num_drafts_total counter\n"
	"llamacpp:spec_decode_num_drafts_total 0\n"
	"# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s\n"
	"# TYPE llamacpp:prompt_tokens_seconds gauge\n"
	"llamacpp:prompt_tokens_seconds 1631.32\n"
	"# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s\n"
	"# TYPE llamacpp:predicted_tokens_seconds gauge\n"
	"llamacpp:predicted_tokens_seconds 0\n"
	"# HELP llamacpp:requests_processing Number of requests processing\n"
	"# TYPE llamacpp:requests_processing gauge\n"
	"llamacpp:requests_processing 2\n"
	"# HELP llamacpp:requests_deferred Number of requests deferred\n"
	"# TYPE llamacpp:requests_deferred gauge\n"
	"llamacpp:requests_deferred 2\n"
	"# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call\n"
	"# TYPE llamacpp:n_busy_slots_per_decode gauge\n"
	"llamacpp:n_busy_slots_per_decode 1.76879\n";

/* vLLM's /metrics as its production metrics page shows it: a model_name
 * label on every series, floats written "1.0", histograms with le
 * labels, and the v1 KV gauge. */
static const char vllm_body[] =
	"# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.\n"
	"# TYPE vllm:iteration_tokens_total histogram\n"
	"vllm:iteration_tokens_total_sum{model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 0.0\n"
	"vllm:iteration_tokens_total_bucket{le=\"1.0\",model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 3.0\n"
	"vllm:iteration_tokens_total_bucket{le=\"+Inf\",model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 3.0\n"
	"# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
	"# TYPE vllm:num_requests_running gauge\n"
	"vllm:num_requests_running{engine=\"0\",model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 5.0\n"
	"# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
	"# TYPE vllm:num_requests_waiting gauge\n"
	"vllm:num_requests_waiting{engine=\"0\",model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 2.0\n"
	"# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
	"# TYPE vllm:kv_cache_usage_perc gauge\n"
	"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 0.4375\n"
	"# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n"
	"# TYPE vllm:prefix_cache_hits_total counter\n"
	"vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"unsloth/Llama-3.2-1B-Instruct\"} 1.2288e+04\n";

/* SGLang's, as its production metrics page shows it, with two tensor
 * parallel ranks (a series each: the counts add up) and e-notation. */
static const char sglang_body[] =
	"# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
	"# TYPE sglang:prompt_tokens_total counter\n"
	"sglang:prompt_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 8.128902e+06\n"
	"# HELP sglang:token_usage The token usage\n"
	"# TYPE sglang:token_usage gauge\n"
	"sglang:token_usage{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",tp_rank=\"0\"} 0.28\n"
	"sglang:token_usage{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",tp_rank=\"1\"} 0.31\n"
	"# HELP sglang:num_running_reqs The number of running requests\n"
	"# TYPE sglang:num_running_reqs gauge\n"
	"sglang:num_running_reqs{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",tp_rank=\"0\"} 4.0\n"
	"sglang:num_running_reqs{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",tp_rank=\"1\"} 3.0\n"
	"# HELP sglang:num_queue_reqs The number of requests in the waiting queue\n"
	"# TYPE sglang:num_queue_reqs gauge\n"
	"sglang:num_queue_reqs{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",tp_rank=\"0\"} 1.0\n"
	"sglang:num_queue_reqs{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",tp_rank=\"1\"} 0.0\n"
	"sglang:cache_hit_rate{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 0.007507552643049313\n";

static int load_guarded(const char *s, size_t n, struct prom_load *l)
{
	return prom_load_parse((const char *)guard_place(s, n), n, l);
}

static int load(const char *s, struct prom_load *l)
{
	return load_guarded(s, strlen(s), l);
}

START_TEST(golden_llamacpp)
{
	struct prom_load l;
	ck_assert_int_eq(load(llamacpp_busy, &l), PROM_OK);
	ck_assert_int_eq(l.engine, PROM_ENGINE_LLAMACPP);
	ck_assert(l.running == 2 && l.waiting == 2);
	ck_assert(l.kv_usage == -1); /* llama.cpp publishes none */
	ck_assert_uint_eq(l.samples, 15);
	ck_assert_uint_eq(l.lines, 45);
	ck_assert_str_eq(prom_engine_name(l.engine), "llamacpp");
}
END_TEST

START_TEST(golden_vllm)
{
	struct prom_load l;
	ck_assert_int_eq(load(vllm_body, &l), PROM_OK);
	ck_assert_int_eq(l.engine, PROM_ENGINE_VLLM);
	ck_assert(l.running == 5 && l.waiting == 2);
	ck_assert(l.kv_usage == 0.4375);
	/* The older gauge name. */
	ck_assert_int_eq(load("vllm:num_requests_running 1\n"
			      "vllm:num_requests_waiting 0\n"
			      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n", &l),
			 PROM_OK);
	ck_assert(l.kv_usage == 0.5);
}
END_TEST

START_TEST(golden_sglang)
{
	struct prom_load l;
	ck_assert_int_eq(load(sglang_body, &l), PROM_OK);
	ck_assert_int_eq(l.engine, PROM_ENGINE_SGLANG);
	ck_assert(l.running == 7 && l.waiting == 1);
	ck_assert(l.kv_usage == 0.31); /* the fuller rank */
}
END_TEST

/* Every prefix of every golden body, against the guard page: never a
 * read past the end, and a prefix cut inside a line is either still
 * well formed or refused at that line. */
START_TEST(every_prefix)
{
	const char *bodies[] = { llamacpp_busy, vllm_body, sglang_body };
	for (size_t b = 0; b < 3; b++) {
		size_t n = strlen(bodies[b]);
		for (size_t k = 0; k <= n; k++) {
			struct prom_load l;
			int r = load_guarded(bodies[b], k, &l);
			ck_assert(r == PROM_OK || r == PROM_ENOLOAD || r == PROM_EBAD);
			if (r == PROM_EBAD) {
				/* Only the cut line may be at fault. */
				uint32_t nl = 0;
				for (size_t i = 0; i < k; i++)
					nl += bodies[b][i] == '\n';
				ck_assert_uint_eq(l.err_line, nl + 1);
			}
			if (k == n)
				ck_assert_int_eq(r, PROM_OK);
		}
	}
}
END_TEST

START_TEST(lines)
{
	static const struct {
		const char *s;
		int r;
		const char *name;
		const char *labels; /* NULL: none */
		double v;
		size_t col;
	} t[] = {
		{ "", 0, NULL, NULL, 0, 0 },
		{ "   \t ", 0, NULL, NULL, 0, 0 },
		{ "# HELP x y", 0, NULL, NULL, 0, 0 },
		{ "  # TYPE x gauge", 0, NULL, NULL, 0, 0 },
		{ "a 1", 1, "a", NULL, 1, 0 },
		{ "a 1\r", 1, "a", NULL, 1, 0 },
		{ ":a_b:c9 -2.5e-3", 1, ":a_b:c9", NULL, -2.5e-3, 0 },
		{ "a{} 3", 1, "a", "", 3, 0 },
		{ "a{x=\"1\",} 3", 1, "a", "x=\"1\",", 3, 0 },
		{ "a{ x = \"}\\\"\\n\\\\\" , y=\"\"} 4 1700000000000", 1, "a",
		  " x = \"}\\\"\\n\\\\\" , y=\"\"", 4, 0 },
		{ "a +Inf", 1, "a", NULL, INFINITY, 0 },
		{ "a -Inf -5", 1, "a", NULL, -INFINITY, 0 },
		{ "a\t7\t", 1, "a", NULL, 7, 0 },
		/* Refused, at their fault. */
		{ "9a 1", PROM_EBAD, NULL, NULL, 0, 1 },
		{ "a", PROM_EBAD, NULL, NULL, 0, 2 },
		{ "a ", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a{x=1} 1", PROM_EBAD, NULL, NULL, 0, 5 },
		{ "a{x=\"1\" 1", PROM_EBAD, NULL, NULL, 0, 9 },
		{ "a{x=\"1} 1", PROM_EBAD, NULL, NULL, 0, 10 },
		{ "a{x=\"\\t\"} 1", PROM_EBAD, NULL, NULL, 0, 6 },
		{ "a{9=\"1\"} 1", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a{x\"1\"} 1", PROM_EBAD, NULL, NULL, 0, 4 },
		{ "a 0x10", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a infinity", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a nan", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a 1.2.3", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a .", PROM_EBAD, NULL, NULL, 0, 3 },
		{ "a 1 x", PROM_EBAD, NULL, NULL, 0, 5 },
		{ "a 1 2 3", PROM_EBAD, NULL, NULL, 0, 7 },
		{ "a 1 -", PROM_EBAD, NULL, NULL, 0, 5 },
		{ "a-b 1", PROM_EBAD, NULL, NULL, 0, 2 },
		{ "a 1111111111111111111111111111111111111111111111111111111111111111111", PROM_EBAD, NULL, NULL, 0, 3 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t n = strlen(t[i].s);
		struct prom_sample s;
		size_t col = 0;
		int r = prom_line((const char *)guard_place(t[i].s, n), n, &s, &col);
		ck_assert_msg(r == t[i].r, "%s: %d", t[i].s, r);
		if (r == PROM_EBAD)
			ck_assert_msg(col == t[i].col, "%s: col %zu", t[i].s, col);
		if (r != 1)
			continue;
		ck_assert(s.name_len == strlen(t[i].name) &&
			  memcmp(s.name, t[i].name, s.name_len) == 0);
		if (t[i].labels == NULL)
			ck_assert(s.labels == NULL && s.labels_len == 0);
		else
			ck_assert_msg(s.labels_len == strlen(t[i].labels) &&
				      memcmp(s.labels, t[i].labels, s.labels_len) == 0,
				      "%s", t[i].s);
		ck_assert(s.value == t[i].v);
	}
	struct prom_sample s;
	size_t col = 0;
	ck_assert_int_eq(prom_line("a NaN", 5, &s, &col), 1);
	ck_assert(isnan(s.value));
}
END_TEST

START_TEST(bodies)
{
	struct prom_load l;
	/* Only one of the pair: no load. */
	ck_assert_int_eq(load("vllm:num_requests_running 1\n", &l), PROM_ENOLOAD);
	ck_assert_int_eq(load("", &l), PROM_ENOLOAD);
	ck_assert_int_eq(load("# nothing\n\n", &l), PROM_ENOLOAD);
	/* Names compared whole: a longer or shorter name is another metric. */
	ck_assert_int_eq(load("llamacpp:requests_processing_x 1\n"
			      "llamacpp:requests_deferred 1\n", &l), PROM_ENOLOAD);
	/* No final LF: the last line still counts. */
	ck_assert_int_eq(load("llamacpp:requests_processing 3\n"
			      "llamacpp:requests_deferred 4", &l), PROM_OK);
	ck_assert(l.running == 3 && l.waiting == 4);
	/* CRLF line ends. */
	ck_assert_int_eq(load("sglang:num_running_reqs 1\r\n"
			      "sglang:num_queue_reqs 2\r\n", &l), PROM_OK);
	ck_assert(l.running == 1 && l.waiting == 2 && l.kv_usage == -1);
	/* Two engines: the first complete one in enum order. */
	ck_assert_int_eq(load("llamacpp:requests_processing 3\n"
			      "llamacpp:requests_deferred 4\n"
			      "vllm:num_requests_waiting 9\n"
			      "sglang:num_running_reqs 1\n"
			      "sglang:num_queue_reqs 2\n", &l), PROM_OK);
	ck_assert_int_eq(l.engine, PROM_ENGINE_SGLANG);
	/* A malformed line anywhere refuses the body, at its line and column. */
	ck_assert_int_eq(load("llamacpp:requests_processing 3\n"
			      "# ok\n"
			      "llamacpp:requests_deferred{ 4\n", &l), PROM_EBAD);
	ck_assert_uint_eq(l.err_line, 3);
	ck_assert_uint_eq(l.err_col, 29);
	/* Values that are no count. */
	static const char *const badv[] = {
		"vllm:num_requests_running -1\nvllm:num_requests_waiting 0\n",
		"vllm:num_requests_running NaN\nvllm:num_requests_waiting 0\n",
		"vllm:num_requests_running +Inf\nvllm:num_requests_waiting 0\n",
		"vllm:num_requests_running 1e8\nvllm:num_requests_waiting 0\n",
		"vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 1.5\n",
		"sglang:num_running_reqs 6e6\nsglang:num_running_reqs 6e6\nsglang:num_queue_reqs 0\n",
	};
	for (size_t i = 0; i < sizeof(badv) / sizeof(badv[0]); i++)
		ck_assert_msg(load(badv[i], &l) == PROM_EVALUE, "%zu", i);
	/* A metric nobody reads may hold anything a float can. */
	ck_assert_int_eq(load("other -Inf\nllamacpp:requests_processing 0\n"
			      "llamacpp:requests_deferred 0\n", &l), PROM_OK);
	ck_assert_str_eq(prom_status_name(PROM_EVALUE), "bad_value");
	ck_assert_str_eq(prom_status_name(7), "unknown");
}
END_TEST

/* A few bytes flipped in every position of the llama.cpp body: whatever
 * comes back is one of the documented statuses. */
START_TEST(flips)
{
	size_t n = strlen(llamacpp_busy);
	char buf[4096];
	ck_assert_uint_lt(n, sizeof(buf));
	static const char subst[] = { '\0', '\n', '{', '}', '"', '\\', ' ', '#', 'x', '9' };
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < sizeof(subst); k++) {
			memcpy(buf, llamacpp_busy, n);
			buf[i] = subst[k];
			struct prom_load l;
			int r = load_guarded(buf, n, &l);
			ck_assert(r <= PROM_OK && r >= PROM_ENOLOAD);
		}
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("promtext");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, golden_llamacpp);
	tcase_add_test(tc, golden_vllm);
	tcase_add_test(tc, golden_sglang);
	tcase_add_test(tc, every_prefix);
	tcase_add_test(tc, lines);
	tcase_add_test(tc, bodies);
	tcase_add_test(tc, flips);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
