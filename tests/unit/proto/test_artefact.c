/* test_artefact.c - the endpoint description fingerprint (proto/artefact.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artefact.h"
#include "golden.h"

/* llama.cpp's llama-server (Debian's llama.cpp-tools 0.7.0, build b11669)
 * started with -m .../tiny-a.gguf --alias tiny -c 4096: its /props and
 * /v1/models, byte for byte but the model's directory (this machine's,
 * replaced by /srv/models/). */
static const char props_a[] =
	"{\"default_generation_settings\":{\"params\":{\"seed\":4294967295,\"temperature\":0.8000"
	"00011920929,\"dynatemp_range\":0.0,\"dynatemp_exponent\":1.0,\"top_k\":40,\"top_p\":0.94"
	"9999988079071,\"min_p\":0.05000000074505806,\"top_n_sigma\":-1.0,\"xtc_probability\":0.0"
	",\"xtc_threshold\":0.10000000149011612,\"typical_p\":1.0,\"repeat_last_n\":64,\"repeat_p"
	"enalty\":1.0,\"presence_penalty\":0.0,\"frequency_penalty\":0.0,\"dry_multiplier\":0.0,"
	"\"dry_base\":1.75,\"dry_allowed_length\":2,\"dry_penalty_last_n\":64,\"mirostat\":0,\"mi"
	"rostat_tau\":5.0,\"mirostat_eta\":0.10000000149011612,\"adaptive_target\":-1.0,\"adaptiv"
	"e_decay\":0.8999999761581421,\"max_tokens\":-1,\"n_predict\":-1,\"n_keep\":0,\"n_discard"
	"\":0,\"ignore_eos\":false,\"stream\":false,\"n_probs\":0,\"min_keep\":0,\"chat_format\":"
	"\"Content-only\",\"reasoning_format\":\"none\",\"reasoning_in_content\":false,\"generati"
	"on_prompt\":\"\",\"samplers\":[\"penalties\",\"dry\",\"top_n_sigma\",\"top_k\",\"typ_p\""
	",\"top_p\",\"min_p\",\"xtc\",\"temperature\"],\"speculative.types\":\"none\",\"timings_p"
	"er_token\":false,\"post_sampling_probs\":false,\"backend_sampling\":false,\"lora\":[]},"
	"\"n_ctx\":4096},\"total_slots\":1,\"model_alias\":\"tiny\",\"model_ftype\":\"(guessed) F"
	"16\",\"model_path\":\"/srv/models/tiny-a.gguf\",\"modalities\":{\"vision\":false,\"video"
	"\":false,\"audio\":false},\"media_marker\":\"<__media_yrBawD6lIY4jzoSy24cMy0JiTCTuexTl__"
	">\",\"endpoint_slots\":true,\"endpoint_props\":false,\"endpoint_metrics\":true,\"ui\":fa"
	"lse,\"ui_settings\":{},\"chat_template\":\"{% for message in messages %}{{'<|im_start|>'"
	" + message['role'] + '\\\\n' + message['content'] + '<|im_end|>' + '\\\\n'}}{% endfor %}"
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\\\n' }}{% endif %}\",\"chat_tem"
	"plate_caps\":{\"supports_object_arguments\":false,\"supports_parallel_tool_calls\":false"
	",\"supports_preserve_reasoning\":false,\"supports_reasoning_effort\":false,\"supports_st"
	"ring_content\":true,\"supports_system_role\":true,\"supports_tool_calls\":false,\"suppor"
	"ts_tools\":false,\"supports_typed_content\":false},\"bos_token\":\"<|endoftext|>\",\"eos"
	"_token\":\"<|endoftext|>\",\"build_info\":\"b11669-Debian\",\"is_sleeping\":false,\"cors"
	"_proxy_enabled\":false}";

static const char models_a[] =
	"{\"models\":[{\"name\":\"tiny\",\"model\":\"tiny\",\"modified_at\":\"\",\"size\":\"\",\""
	"digest\":\"\",\"type\":\"model\",\"description\":\"\",\"tags\":[\"\"],\"capabilities\":["
	"\"completion\"],\"parameters\":\"\",\"details\":{\"parent_model\":\"\",\"format\":\"gguf"
	"\",\"family\":\"\",\"families\":[\"\"],\"parameter_size\":\"\",\"quantization_level\":\""
	"\"}}],\"object\":\"list\",\"data\":[{\"id\":\"tiny\",\"aliases\":[\"tiny\"],\"tags\":[],"
	"\"object\":\"model\",\"architecture\":{\"input_modalities\":[\"text\"],\"output_modaliti"
	"es\":[\"text\"]},\"created\":1796125971,\"owned_by\":\"llamacpp\",\"meta\":{\"vocab_type"
	"\":2,\"n_vocab\":257,\"n_ctx\":4096,\"n_ctx_train\":65536,\"n_embd\":256,\"n_params\":18"
	"36800,\"size\":3676160,\"ftype\":\"(guessed) F16\"}}]}";

/* vLLM's /v1/models as its OpenAI-compatible server writes it. */
static const char models_vllm[] =
	"{\"object\":\"list\",\"data\":[{\"id\":\"llama\",\"object\":\"model\",\"created\":1733000000,"
	"\"owned_by\":\"vllm\",\"root\":\"meta-llama/Llama-3.1-8B-Instruct\",\"parent\":null,"
	"\"max_model_len\":8192,\"permission\":[{\"id\":\"modelperm-1\",\"object\":\"model_permission\","
	"\"created\":1733000000,\"allow_create_engine\":false}]}]}";

static int fp(const char *s, size_t n, struct art_info *a)
{
	return art_fingerprint((const char *)guard_place(s, n), n, a);
}

static int fps(const char *s, struct art_info *a)
{
	return fp(s, strlen(s), a);
}

/* Replaces the first `from` in s by `to` into buf. */
static const char *subst(char *buf, size_t cap, const char *s, const char *from,
			 const char *to)
{
	const char *at = strstr(s, from);
	ck_assert_ptr_nonnull(at);
	int n = snprintf(buf, cap, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
	ck_assert(n > 0 && (size_t)n < cap);
	return buf;
}

START_TEST(golden_llamacpp)
{
	struct art_info a, b;
	ck_assert_int_eq(fps(props_a, &a), ART_OK);
	/* model_path, build_info, model_ftype, n_ctx */
	ck_assert_uint_eq(a.fields, 4);
	ck_assert_uint_ne(a.fingerprint, 0);
	ck_assert_int_eq(fps(models_a, &b), ART_OK);
	ck_assert_uint_ge(b.fields, 8);
	/* Another file, build or context: another artefact. */
	static char buf[8192];
	static const char *const changes[][2] = {
		{ "/srv/models/tiny-a.gguf\",\"modalities", "/srv/models/tiny-b.gguf\",\"modalities" },
		{ "b11669-Debian", "b11670-Debian" },
		{ "\"n_ctx\":4096", "\"n_ctx\":8192" },
	};
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
		const char *o = subst(buf, sizeof(buf), props_a, changes[i][0], changes[i][1]);
		ck_assert_int_eq(fps(o, &b), ART_OK);
		ck_assert_msg(b.fingerprint != a.fingerprint, "%s", changes[i][1]);
	}
	/* What is not the artefact changes nothing: a random marker, the
	 * sampling defaults, the slots. */
	static char buf2[8192];
	const char *o = subst(buf2, sizeof(buf2), props_a, "\"temperature\":0.8",
			      "\"temperature\":0.7");
	o = subst(buf, sizeof(buf), o, "\"total_slots\":1", "\"total_slots\":4");
	ck_assert_int_eq(fps(o, &b), ART_OK);
	ck_assert_uint_eq(b.fingerprint, a.fingerprint);
}
END_TEST

START_TEST(golden_vllm)
{
	struct art_info a, b;
	ck_assert_int_eq(fps(models_vllm, &a), ART_OK);
	/* id, root, max_model_len, and the permission's id */
	ck_assert_uint_eq(a.fields, 4);
	static char buf[2048];
	/* Another creation time: the same artefact. */
	ck_assert_int_eq(fps(subst(buf, sizeof(buf), models_vllm, "1733000000,\"owned",
				   "1733999999,\"owned"), &b), ART_OK);
	ck_assert_uint_eq(b.fingerprint, a.fingerprint);
	/* Other weights under the same served name. */
	ck_assert_int_eq(fps(subst(buf, sizeof(buf), models_vllm, "Llama-3.1-8B-Instruct",
				   "Llama-3.1-8B-Instruct-AWQ"), &b), ART_OK);
	ck_assert_uint_ne(b.fingerprint, a.fingerprint);
	ck_assert_int_eq(fps(subst(buf, sizeof(buf), models_vllm, "8192", "4096"), &b), ART_OK);
	ck_assert_uint_ne(b.fingerprint, a.fingerprint);
}
END_TEST

START_TEST(documents)
{
	static const struct {
		const char *s;
		int r;
		size_t off;
	} t[] = {
		{ "{\"id\":\"m\"}", ART_OK, 0 },
		{ " [ {\"id\" : 5} , {\"root\":true} ] ", ART_OK, 0 },
		{ "{\"id\":\"\\u00e9\\n\\\"\"}", ART_OK, 0 },
		{ "{\"id\":-0.5e+3}", ART_OK, 0 },
		{ "{\"other\":1}", ART_ENONE, 0 },
		{ "{\"id\":{\"x\":1}}", ART_ENONE, 0 },  /* containers are not values read */
		{ "{\"id\":[1,2]}", ART_ENONE, 0 },
		{ "[]", ART_ENONE, 0 },
		{ "{}", ART_ENONE, 0 },
		{ "", ART_EJSON, 0 },
		{ "{", ART_EJSON, 1 },
		{ "{\"id\":1,}", ART_EJSON, 8 },
		{ "{\"id\" 1}", ART_EJSON, 6 },
		{ "{\"id\":01}", ART_EJSON, 7 },
		{ "{\"id\":1.}", ART_EJSON, 8 },
		{ "{\"id\":1e}", ART_EJSON, 8 },
		{ "{\"id\":-}", ART_EJSON, 7 },
		{ "{\"id\":tru}", ART_EJSON, 6 },
		{ "{\"id\":\"a\\x\"}", ART_EJSON, 8 },
		{ "{\"id\":\"a\\u12g4\"}", ART_EJSON, 8 },
		{ "{\"id\":\"a\nb\"}", ART_EJSON, 8 },
		{ "{\"id\":\"a", ART_EJSON, 8 },
		{ "{\"id\":1]", ART_EJSON, 7 },
		{ "[1}", ART_EJSON, 2 },
		{ "{1:2}", ART_EJSON, 1 },
		{ "{\"id\":1} x", ART_EJSON, 9 },
		{ "{\"id\":1}{}", ART_EJSON, 8 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct art_info a;
		int r = fps(t[i].s, &a);
		ck_assert_msg(r == t[i].r, "%s: %d", t[i].s, r);
		if (r == ART_EJSON)
			ck_assert_msg(a.err_off == t[i].off, "%s: off %zu", t[i].s, a.err_off);
		if (r == ART_OK)
			ck_assert_uint_ne(a.fingerprint, 0);
	}
	/* A string and a number that read the same are not the same. */
	struct art_info a, b;
	ck_assert_int_eq(fps("{\"n_ctx\":\"5\"}", &a), ART_OK);
	ck_assert_int_eq(fps("{\"n_ctx\":5}", &b), ART_OK);
	ck_assert_uint_ne(a.fingerprint, b.fingerprint);
	/* Nesting: ART_DEPTH_MAX containers are fine, one more is not. */
	char deep[2 * ART_DEPTH_MAX + 16];
	size_t n = 0;
	for (int k = 0; k < ART_DEPTH_MAX; k++)
		deep[n++] = '[';
	for (int k = 0; k < ART_DEPTH_MAX; k++)
		deep[n++] = ']';
	ck_assert_int_eq(fp(deep, n, &a), ART_ENONE);
	n = 0;
	for (int k = 0; k <= ART_DEPTH_MAX; k++)
		deep[n++] = '[';
	ck_assert_int_eq(fp(deep, n, &a), ART_EDEPTH);
	ck_assert_uint_eq(a.err_off, ART_DEPTH_MAX);
	ck_assert_str_eq(art_status_name(ART_EDEPTH), "too_deep");
	ck_assert_str_eq(art_status_name(5), "unknown");
}
END_TEST

/* Every prefix of the captures against the guard page: only the whole
 * document is well formed. */
START_TEST(every_prefix)
{
	const char *docs[] = { props_a, models_a, models_vllm };
	for (size_t d = 0; d < 3; d++) {
		size_t n = strlen(docs[d]);
		for (size_t k = 0; k < n; k++) {
			struct art_info a;
			int r = fp(docs[d], k, &a);
			ck_assert_msg(r == ART_EJSON, "%zu/%zu: %d", k, n, r);
			ck_assert_uint_le(a.err_off, k);
		}
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("artefact");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, golden_llamacpp);
	tcase_add_test(tc, golden_vllm);
	tcase_add_test(tc, documents);
	tcase_add_test(tc, every_prefix);
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
