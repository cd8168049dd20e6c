/* test_hint.c - agent: the shared warm hint's arguments (route_hint) and HAProxy's server ids (hint.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "hint.h"
#include "log.h"
#include "route.h"

static const char *const three =
	"endpoints:\n"
	"  - {backend: llm, server: g1, keys: [ka, kb]}\n"
	"  - {backend: llm, server: g2}\n"
	"  - {backend: llm, server: g3}\n";

static void setup(struct config *cfg, struct route *r)
{
	char err[4096];
	ck_assert_int_eq(config_init(cfg), 0);
	ck_assert_msg(config_load_data(cfg, "t.yaml", three, strlen(three), err,
				       sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(route_init(r, cfg), 0);
	/* As the runtime API's `show stat` rows give them. */
	const char *names[] = { "g1", "g2", "g3" };
	for (int i = 0; i < 3; i++)
		hint_ids_note(&r->hints, core_str_c("llm"), core_str_c(names[i]),
			      (uint32_t)(i + 1));
}

static void req_init(struct route_request *req, uint64_t session)
{
	memset(req, 0, sizeof(*req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req->args[i] = spop_data_null();
	req->args[ROUTE_ARG_SESSION] = spop_data_int64((int64_t)session);
	req->now_ms = 1000;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The four arguments as HAProxy's table_gpt(0..3) sends them (integers):
 * server id, when (ms, low 32 bits), akey's low 32 bits, name hash. */
static void hint_args(struct route_request *req, uint32_t sid, uint64_t at_ms,
		      uint64_t akey, const char *server)
{
	req->args[ROUTE_ARG_HINT_SRV] = spop_data_int64(sid);
	req->args[ROUTE_ARG_HINT_AT] = spop_data_int64((uint32_t)at_ms);
	req->args[ROUTE_ARG_HINT_AKEY] = spop_data_int64((uint32_t)akey);
	req->args[ROUTE_ARG_HINT_NAME] = spop_data_int64(
		hint_name_hash("llm", 3, server, strlen(server)));
}

/* A hashed decision for session s, and a server of another id. */
static void hashed(struct route *r, uint64_t s, struct route_decision *d,
		   const char **other, uint32_t *other_sid)
{
	struct route_request req;
	req_init(&req, s);
	route_decide(r, &req, d);
	ck_assert_int_eq(d->reason, ROUTE_HASH);
	route_take_back(r, d->endpoint);
	*other = strcmp(d->server, "g2") == 0 ? "g3" : "g2";
	*other_sid = strcmp(*other, "g2") == 0 ? 2 : 3;
}

/* Rolling upgrades: a route message without the hint arguments (an old
 * HAProxy config) and one with them are both served; the hint moves the
 * decision to the server another HAProxy saw serve the key. */
START_TEST(with_and_without_hint_arguments)
{
	struct config cfg;
	struct route r;
	struct route_decision d, h;
	const char *other;
	uint32_t sid;
	setup(&cfg, &r);
	hashed(&r, 41, &d, &other, &sid);

	struct route_request req;
	req_init(&req, 41);
	hint_args(&req, sid, wall_ms() - 20, d.akey, other);
	route_decide(&r, &req, &h);
	ck_assert_int_eq(h.reason, ROUTE_AFFINITY);
	ck_assert_str_eq(h.server, other);
	ck_assert_uint_eq(h.akey, d.akey);
	struct core_stats cs;
	core_stats(r.core, &cs);
	ck_assert_uint_eq(cs.hints[CORE_HINT_USED], 1);
	route_take_back(&r, h.endpoint);

	/* g1 has two key ids: its hint names both endpoints. */
	struct core_hint ch;
	req_init(&req, 41);
	hint_args(&req, 1, wall_ms(), d.akey, "g1");
	route_hint(&r, &req, wall_ms(), &ch);
	ck_assert(ch.present);
	ck_assert_uint_eq(ch.n, 2);
	/* hint_peer: the writer, another HAProxy or this one; absent (a
	 * table without gpt 4): not told. */
	ck_assert_uint_eq(ch.writer, CORE_HINT_WRITER_UNKNOWN);
	req.args[ROUTE_ARG_HINT_PEER] = spop_data_bool(true);
	route_hint(&r, &req, wall_ms(), &ch);
	ck_assert_uint_eq(ch.writer, CORE_HINT_WRITER_PEER);
	req.args[ROUTE_ARG_HINT_PEER] = spop_data_int64(7); /* sub's result */
	route_hint(&r, &req, wall_ms(), &ch);
	ck_assert_uint_eq(ch.writer, CORE_HINT_WRITER_PEER);
	/* Anything else a peer's frame may carry there is not "another
	 * HAProxy": such a hint shows no shared table. */
	req.args[ROUTE_ARG_HINT_PEER] = spop_data_string("yes", 3);
	route_hint(&r, &req, wall_ms(), &ch);
	ck_assert_uint_eq(ch.writer, CORE_HINT_WRITER_OWN);
	req.args[ROUTE_ARG_HINT_PEER] = spop_data_bool(false);
	route_hint(&r, &req, wall_ms(), &ch);
	ck_assert_uint_eq(ch.writer, CORE_HINT_WRITER_OWN);
	route_decide(&r, &req, &h);
	route_take_back(&r, h.endpoint);
	core_stats(r.core, &cs);
	ck_assert_uint_eq(cs.hints_own, 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Arguments that make no hint are counted and change nothing: some of
 * the four only, an unknown id, an id this HAProxy gives another server
 * (the peers' ids differ: logged), a hint older than affinity_ttl. A time
 * ahead of the agent's clock counts as age 0. */
START_TEST(bad_hint_arguments_counted)
{
	struct config cfg;
	struct route r;
	struct core_hint ch;
	struct route_request req;
	setup(&cfg, &r);
	uint64_t now = wall_ms();

	req_init(&req, 42);
	req.args[ROUTE_ARG_HINT_SRV] = spop_data_int64(2);
	route_hint(&r, &req, now, &ch);
	ck_assert(!ch.present);
	ck_assert_uint_eq(r.hints.args.partial, 1);

	req_init(&req, 42);
	hint_args(&req, 9, now, 0, "g2");
	route_hint(&r, &req, now, &ch);
	ck_assert(!ch.present);
	ck_assert_uint_eq(r.hints.args.unknown_id, 1);

	/* id 2 is g2 here; the other HAProxy's id 2 was g3. */
	req_init(&req, 42);
	hint_args(&req, 2, now, 0, "g3");
	route_hint(&r, &req, now, &ch);
	ck_assert(!ch.present);
	ck_assert_uint_eq(r.hints.args.id_mismatch, 1);

	req_init(&req, 42);
	hint_args(&req, 2, now - 301000, 0, "g2");
	route_hint(&r, &req, now, &ch);
	ck_assert(!ch.present);
	ck_assert_uint_eq(r.hints.args.stale, 1);

	req_init(&req, 42);
	hint_args(&req, 2, now + 50, 7, "g2");
	route_hint(&r, &req, now, &ch);
	ck_assert(ch.present);
	ck_assert_uint_eq(ch.age_ms, 0);
	ck_assert_uint_eq(ch.akey32, 7);
	hint_args(&req, 2, now - 250, 7, "g2");
	route_hint(&r, &req, now, &ch);
	ck_assert_uint_eq(ch.age_ms, 250);
	/* Across the 32-bit wrap of HAProxy's ms. */
	uint64_t wrap = (uint64_t)1 << 32;
	hint_args(&req, 2, wrap - 100, 7, "g2");
	route_hint(&r, &req, wrap + 100, &ch);
	ck_assert(ch.present);
	ck_assert_uint_eq(ch.age_ms, 200);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* A server that HAProxy renumbers (a reload with other ids) is found
 * under its new id only; the table never grows past its size. */
START_TEST(ids_follow_haproxy)
{
	struct hint_ids h;
	bool known;
	ck_assert_int_eq(hint_ids_init(&h), 0);
	uint32_t g1 = hint_name_hash("llm", 3, "g1", 2);
	hint_ids_note(&h, core_str_c("llm"), core_str_c("g1"), 1);
	hint_ids_note(&h, core_str_c("llm"), core_str_c("g1"), 1);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_ptr_nonnull(hint_ids_find(&h, 1, g1, &known));
	hint_ids_note(&h, core_str_c("llm"), core_str_c("g1"), 5);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_uint_eq(h.renamed, 1);
	ck_assert_ptr_null(hint_ids_find(&h, 1, g1, &known));
	ck_assert(!known);
	const struct hint_server *s = hint_ids_find(&h, 5, g1, &known);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->name, "llm/g1");
	/* The same id in two backends: the name hash tells them apart. */
	hint_ids_note(&h, core_str_c("other"), core_str_c("g1"), 5);
	s = hint_ids_find(&h, 5, hint_name_hash("other", 5, "g1", 2), &known);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->name, "other/g1");
	char name[16];
	for (int i = 0; i < HINT_SERVERS_MAX + 10; i++) {
		snprintf(name, sizeof(name), "x%d", i);
		hint_ids_note(&h, core_str_c("big"), core_str_c(name),
			      (uint32_t)(1000 + i));
	}
	ck_assert_uint_eq(h.n, HINT_SERVERS_MAX);
	ck_assert_uint_eq(h.full, 12);
	/* xxh32 of "llm/g1" as HAProxy's `xxh32` converter computes it
	 * (%[str(llm/g1),xxh32] on 2.6 and 3.2). */
	ck_assert_uint_eq(g1, 2622755158u);
	hint_ids_finish(&h);
}
END_TEST

static Suite *hint_suite(void)
{
	Suite *s = suite_create("agent-hint");
	TCase *tc = tcase_create("hint");
	tcase_add_test(tc, with_and_without_hint_arguments);
	tcase_add_test(tc, bad_hint_arguments_counted);
	tcase_add_test(tc, ids_follow_haproxy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hint_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
