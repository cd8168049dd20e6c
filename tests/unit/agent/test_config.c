/* test_config.c - agent: configuration defaults, YAML errors, semantic checks. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"

static char err[16384];

static int load(struct config *cfg, const char *yaml)
{
	return config_load_data(cfg, "t.yaml", yaml, strlen(yaml), err,
				sizeof(err));
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;
	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* Field by field: padding bytes need not match. */
static void assert_params_eq(const struct core_params *a,
			     const struct core_params *b)
{
	ck_assert_uint_eq(a->affinity_ttl_ms, b->affinity_ttl_ms);
	ck_assert_uint_eq(a->affinity_max_entries, b->affinity_max_entries);
	ck_assert_uint_eq(a->identity_ladder_len, b->identity_ladder_len);
	for (unsigned i = 0; i < a->identity_ladder_len; i++)
		ck_assert_int_eq(a->identity_ladder[i], b->identity_ladder[i]);
	ck_assert_double_eq(a->ewma_alpha, b->ewma_alpha);
	ck_assert_uint_eq(a->cold_start_samples, b->cold_start_samples);
	ck_assert_double_eq(a->prior_ttfb_ms, b->prior_ttfb_ms);
	ck_assert_uint_eq(a->idle_reset_ms, b->idle_reset_ms);
	ck_assert_double_eq(a->sticky_tolerance, b->sticky_tolerance);
	ck_assert_double_eq(a->load_factor, b->load_factor);
	ck_assert_uint_eq(a->load_floor, b->load_floor);
	ck_assert_double_eq(a->cost_weight_per_ms, b->cost_weight_per_ms);
	ck_assert_uint_eq(a->breaker_window_ms, b->breaker_window_ms);
	ck_assert_uint_eq(a->breaker_min_requests, b->breaker_min_requests);
	ck_assert_double_eq(a->breaker_failure_ratio, b->breaker_failure_ratio);
	ck_assert_uint_eq(a->breaker_consecutive, b->breaker_consecutive);
	ck_assert_uint_eq(a->breaker_cooldown_ms, b->breaker_cooldown_ms);
	ck_assert_uint_eq(a->breaker_cooldown_max_ms, b->breaker_cooldown_max_ms);
	ck_assert_uint_eq(a->half_open_probes, b->half_open_probes);
	ck_assert_uint_eq(a->rate_limit_cooldown_ms, b->rate_limit_cooldown_ms);
	ck_assert_uint_eq(a->rate_limit_cooldown_max_ms, b->rate_limit_cooldown_max_ms);
	ck_assert_int_eq(a->session_scope, b->session_scope);
	ck_assert_uint_eq(a->dead_key_retry_ms, b->dead_key_retry_ms);
	ck_assert_uint_eq(a->model_mismatch_404s, b->model_mismatch_404s);
	ck_assert_uint_eq(a->poll_interval_ms, b->poll_interval_ms);
	ck_assert_uint_eq(a->snapshot_interval_ms, b->snapshot_interval_ms);
}

#define assert_has(text, needle) \
	ck_assert_msg(strstr((text), (needle)) != NULL, \
		      "expected \"%s\" in:\n%s", (needle), (text))

START_TEST(defaults)
{
	struct config cfg;
	struct core_params p;
	ck_assert_int_eq(config_init(&cfg), 0);
	core_params_defaults(&p);
	ck_assert_int_eq(cfg.log_level, LOG_LEVEL_INFO);
	ck_assert_uint_eq(cfg.n_listen, 1);
	ck_assert_int_eq(cfg.listen[0].kind, CONFIG_LISTEN_UNIX);
	ck_assert_str_eq(cfg.listen[0].path, "/var/lib/haproxy/warmlane/spoa.sock");
	ck_assert_uint_eq(cfg.listen[0].mode, 0660);
	ck_assert_uint_eq(cfg.max_frame_size, CONFIG_DEFAULT_MAX_FRAME_SIZE);
	ck_assert_str_eq(cfg.metrics_listen, "127.0.0.1:9901");
	ck_assert_str_eq(cfg.metrics.host, "127.0.0.1");
	ck_assert_uint_eq(cfg.metrics.port, 9901);
	ck_assert_str_eq(cfg.runtime_socket, "/run/haproxy/warmlane.sock");
	ck_assert_str_eq(cfg.state_file, "/var/lib/warmlane/state.msgpack");
	ck_assert_uint_eq(cfg.n_endpoints, 0);
	ck_assert_uint_eq(cfg.n_runtime_backends, 0);
	assert_params_eq(&cfg.params, &p);

	/* An empty document and one with only comments keep them all. */
	ck_assert_int_eq(load(&cfg, ""), 0);
	assert_params_eq(&cfg.params, &p);
	ck_assert_int_eq(load(&cfg, "# nothing here\n"), 0);
	ck_assert_uint_eq(cfg.max_frame_size, CONFIG_DEFAULT_MAX_FRAME_SIZE);
	config_finish(&cfg);
}
END_TEST

static const char full_yaml[] =
	"log_level: debug\n"
	"listen: [\"unix:/tmp/w/spoa.sock,mode=0600\", \"tcp:127.0.0.1:12345\"]\n"
	"max_frame_size: 65532\n"
	"metrics: { listen: \"[::1]:9902\" }\n"
	"runtime_api: { socket: \"/run/haproxy/x.sock\", backends: [llm, llm2], poll_interval: 250ms }\n"
	"state: { file: \"/var/tmp/s.msgpack\", snapshot_interval: 1m }\n"
	"policy:\n"
	"  affinity_ttl: 10m\n"
	"  affinity_max_entries: 5000\n"
	"  identity_ladder: [caller, session, src]\n"
	"  ewma_alpha: 1\n"
	"  cold_start_samples: 0\n"
	"  prior_ttfb: 1.5s\n"
	"  idle_reset: 2m\n"
	"  sticky_tolerance: 3\n"
	"  load_factor: 1.25\n"
	"  load_floor: 2\n"
	"  cost_weight_per_ms: 0.01\n"
	"  breaker_window: 30s\n"
	"  breaker_min_requests: 10\n"
	"  breaker_failure_ratio: 0.25\n"
	"  breaker_consecutive: 3\n"
	"  breaker_cooldown: 1s\n"
	"  breaker_cooldown_max: 1h\n"
	"  half_open_probes: 1\n"
	"  rate_limit_cooldown: 90s\n"
	"  rate_limit_cooldown_max: 2m\n"
	"  session_scope: global\n"
	"  dead_key_retry: 5m\n"
	"  model_mismatch_404s: 0\n"
	"endpoints:\n"
	"  - backend: llm\n"
	"    server: gpu1\n"
	"    models: [llama-3.1-8b, \"meta-llama/Llama-3.1-70B\"]\n"
	"    weight: 2.5\n"
	"    cost_per_mtok: 0.6\n"
	"    keys: [team-a, team-b]\n"
	"  - backend: llm2\n"
	"    server: gpu1\n";

START_TEST(full_file)
{
	struct config cfg;
	ck_assert_int_eq(config_init(&cfg), 0);
	int r = load(&cfg, full_yaml);
	ck_assert_msg(r == 0, "%s", err);
	ck_assert_int_eq(cfg.log_level, LOG_LEVEL_DEBUG);
	ck_assert_uint_eq(cfg.n_listen, 2);
	ck_assert_str_eq(cfg.listen[0].path, "/tmp/w/spoa.sock");
	ck_assert_uint_eq(cfg.listen[0].mode, 0600);
	ck_assert_int_eq(cfg.listen[1].kind, CONFIG_LISTEN_TCP);
	ck_assert_str_eq(cfg.listen[1].host, "127.0.0.1");
	ck_assert_uint_eq(cfg.listen[1].port, 12345);
	ck_assert_uint_eq(cfg.max_frame_size, 65532);
	ck_assert(cfg.metrics.ipv6);
	ck_assert_str_eq(cfg.metrics.host, "::1");
	ck_assert_uint_eq(cfg.metrics.port, 9902);
	ck_assert_str_eq(cfg.runtime_socket, "/run/haproxy/x.sock");
	ck_assert_uint_eq(cfg.n_runtime_backends, 2);
	ck_assert_str_eq(cfg.runtime_backends[1], "llm2");
	ck_assert_uint_eq(cfg.params.poll_interval_ms, 250);
	ck_assert_str_eq(cfg.state_file, "/var/tmp/s.msgpack");
	ck_assert_uint_eq(cfg.params.snapshot_interval_ms, 60000);

	const struct core_params *p = &cfg.params;
	ck_assert_uint_eq(p->affinity_ttl_ms, 600000);
	ck_assert_uint_eq(p->affinity_max_entries, 5000);
	ck_assert_uint_eq(p->identity_ladder_len, 3);
	ck_assert_int_eq(p->identity_ladder[0], CORE_RUNG_CALLER);
	ck_assert_int_eq(p->identity_ladder[1], CORE_RUNG_SESSION);
	ck_assert_int_eq(p->identity_ladder[2], CORE_RUNG_SRC);
	ck_assert_double_eq(p->ewma_alpha, 1.0);
	ck_assert_uint_eq(p->cold_start_samples, 0);
	ck_assert_double_eq(p->prior_ttfb_ms, 1500.0);
	ck_assert_uint_eq(p->idle_reset_ms, 120000);
	ck_assert_double_eq(p->sticky_tolerance, 3.0);
	ck_assert_double_eq(p->load_factor, 1.25);
	ck_assert_uint_eq(p->load_floor, 2);
	ck_assert_double_eq(p->cost_weight_per_ms, 0.01);
	ck_assert_uint_eq(p->breaker_window_ms, 30000);
	ck_assert_uint_eq(p->breaker_min_requests, 10);
	ck_assert_double_eq(p->breaker_failure_ratio, 0.25);
	ck_assert_uint_eq(p->breaker_consecutive, 3);
	ck_assert_uint_eq(p->breaker_cooldown_ms, 1000);
	ck_assert_uint_eq(p->breaker_cooldown_max_ms, 3600000);
	ck_assert_uint_eq(p->half_open_probes, 1);
	ck_assert_uint_eq(p->rate_limit_cooldown_ms, 90000);
	ck_assert_uint_eq(p->rate_limit_cooldown_max_ms, 120000);
	ck_assert_int_eq(p->session_scope, CORE_SESSION_GLOBAL);
	ck_assert_uint_eq(p->dead_key_retry_ms, 300000);
	ck_assert_uint_eq(p->model_mismatch_404s, 0);

	ck_assert_uint_eq(cfg.n_endpoints, 2);
	const struct config_endpoint *e = &cfg.endpoints[0];
	ck_assert_str_eq(e->backend, "llm");
	ck_assert_str_eq(e->server, "gpu1");
	ck_assert_uint_eq(e->n_models, 2);
	ck_assert_str_eq(e->models[1], "meta-llama/Llama-3.1-70B");
	ck_assert_double_eq(e->weight, 2.5);
	ck_assert_double_eq(e->cost_per_mtok, 0.6);
	ck_assert_uint_eq(e->n_keys, 2);
	ck_assert_str_eq(e->keys[0], "team-a");
	e = &cfg.endpoints[1];
	ck_assert_str_eq(e->backend, "llm2");
	ck_assert_uint_eq(e->n_models, 0);
	ck_assert_uint_eq(e->n_keys, 0);
	ck_assert_double_eq(e->weight, 1.0);
	ck_assert_double_eq(e->cost_per_mtok, 0.0);
	config_finish(&cfg);
}
END_TEST

/* The first syntax error, at the line and column libyaml gives. */
START_TEST(syntax_error_position)
{
	static const struct {
		const char *yaml, *prefix, *text;
	} cases[] = {
		{ "policy:\n  ewma_alpha: 0.3\n   load_factor: 2\n",
		  "t.yaml:3:15: ", "mapping values are not allowed" },
		{ "policy:\n\tewma_alpha: 0.3\n", "t.yaml:2:1: ",
		  "cannot start any token" },
		{ "listen: [\"unix:/a\"\nlog_level: info\n", "t.yaml:2:1: ",
		  "flow sequence" },
		{ "log_level: \"info\n", "t.yaml:2:1: ", "quoted scalar at line 1" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config cfg;
		ck_assert_int_eq(config_init(&cfg), 0);
		ck_assert_int_eq(load(&cfg, cases[i].yaml), -EINVAL);
		ck_assert_msg(strncmp(err, cases[i].prefix,
				      strlen(cases[i].prefix)) == 0,
			      "case %zu: expected prefix %s, got %s", i,
			      cases[i].prefix, err);
		assert_has(err, cases[i].text);
		ck_assert_uint_eq(count_lines(err), 1);
		config_finish(&cfg);
	}
}
END_TEST

/* Schema errors stop libcyaml at once: reported where the offending token
 * is, with the field's path. */
START_TEST(schema_error_position)
{
	static const struct {
		const char *yaml, *line;
	} cases[] = {
		{ "log_level: info\npolicy:\n  ewma_alpha: 0.3\n  bogus: 4\n",
		  "t.yaml:4:3: policy: unknown key \"bogus\"\n" },
		{ "log_level: info\nlisten_on: x\n",
		  "t.yaml:2:1: unknown key \"listen_on\"\n" },
		{ "log_level: [info]\n",
		  "t.yaml:1:12: log_level: expected a string, found a list\n" },
		{ "policy:\n  ewma_alpha: fast\n",
		  "t.yaml:2:15: policy.ewma_alpha: \"fast\" is not a number\n" },
		{ "endpoints:\n  - backend: a\n    server: b\n  - backend: c\n    wieght: 2\n",
		  "t.yaml:5:5: endpoints[1]: unknown key \"wieght\"\n" },
		{ "endpoints:\n  - backend: a\n    weight: {x: 1}\n",
		  "t.yaml:3:13: endpoints[0].weight: expected a number, found a mapping\n" },
		{ "- a\n- b\n", "t.yaml:1:1: expected a mapping, found a list\n" },
		{ "policy: {ewma_alpha: 0.1, ewma_alpha: 0.2}\n",
		  "t.yaml:1:27: policy.ewma_alpha: duplicate key \"ewma_alpha\"\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config cfg;
		ck_assert_int_eq(config_init(&cfg), 0);
		ck_assert_int_eq(load(&cfg, cases[i].yaml), -EINVAL);
		ck_assert_msg(strncmp(err, cases[i].line, strlen(cases[i].line)) == 0,
			      "case %zu: expected %s, got %s", i, cases[i].line, err);
		ck_assert_uint_eq(count_lines(err), 1);
		config_finish(&cfg);
	}
}
END_TEST

static const char bad_yaml[] =
	"log_level: loud\n"
	"listen: [\"unix:/tmp/x.sock,mode=999\", \"tcp:1.2.3:80\", \"udp:x\"]\n"
	"max_frame_size: 100\n"
	"metrics: { listen: \"localhost\" }\n"
	"runtime_api: { backends: [llm], poll_interval: 5 }\n"
	"state: { snapshot_interval: 1.5ms }\n"
	"policy:\n"
	"  affinity_ttl: 0s\n"
	"  identity_ladder: [session, cookie, session]\n"
	"  ewma_alpha: 1.5\n"
	"  half_open_probes: 0\n"
	"  breaker_consecutive: 2.5\n"
	"  breaker_cooldown: 10m\n"
	"  breaker_cooldown_max: 5m\n"
	"endpoints:\n"
	"  - backend: llm\n"
	"    server: gpu1\n"
	"    weight: 0\n"
	"  - backend: llm\n"
	"    server: gpu1\n"
	"    keys: [\"\", \"a b\"]\n"
	"  - server: gpu3\n"
	"  - backend: other\n"
	"    server: \"x y\"\n";

START_TEST(semantic_all_reported)
{
	struct config cfg;
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_int_eq(load(&cfg, "max_frame_size: 4096\n"), 0);
	ck_assert_int_eq(load(&cfg, bad_yaml), -EINVAL);
	static const char *const lines[] = {
		"t.yaml: log_level: \"loud\" is not one of error, warn, info, debug\n",
		"t.yaml: listen[0]: bad address \"unix:/tmp/x.sock,mode=999\": mode must be octal",
		"t.yaml: listen[1]: bad address \"tcp:1.2.3:80\": \"1.2.3\" is not a numeric IPv4 address\n",
		"t.yaml: listen[2]: bad address \"udp:x\"",
		"t.yaml: max_frame_size: must be between 256 and 1048576, got 100\n",
		"t.yaml: metrics.listen: bad address \"localhost\"",
		"t.yaml: runtime_api.poll_interval: \"5\" is not a duration",
		"t.yaml: state.snapshot_interval: \"1.5ms\" is not a whole number of milliseconds\n",
		"t.yaml: policy.affinity_ttl: must be between 1s and 720h, got 0s\n",
		"t.yaml: policy.identity_ladder[1]: unknown rung \"cookie\"",
		"t.yaml: policy.identity_ladder[2]: rung \"session\" listed twice\n",
		"t.yaml: policy.ewma_alpha: must be in (0, 1], got 1.5\n",
		"t.yaml: policy.half_open_probes: must be between 1 and 1000, got 0\n",
		"t.yaml: policy.breaker_consecutive: must be a whole number, got 2.5\n",
		"t.yaml: policy.breaker_cooldown: 10m must not exceed policy.breaker_cooldown_max (5m)\n",
		"t.yaml: endpoints[0].weight: must be in (0, 1000000], got 0\n",
		"t.yaml: endpoints[1].keys[0]: must not be empty\n",
		"t.yaml: endpoints[1].keys[1]: must be printable ASCII without spaces\n",
		"t.yaml: endpoints[1]: duplicate endpoint llm/gpu1 (already endpoints[0])\n",
		"t.yaml: endpoints[2].backend: required\n",
		"t.yaml: endpoints[3].server: \"x y\" may contain only",
		"t.yaml: endpoints[3].backend: \"other\" is not in runtime_api.backends\n",
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		assert_has(err, lines[i]);
	ck_assert_uint_eq(count_lines(err), sizeof(lines) / sizeof(lines[0]));
	/* A refused file leaves the previous configuration as it was. */
	ck_assert_uint_eq(cfg.max_frame_size, 4096);
	config_finish(&cfg);
}
END_TEST

START_TEST(semantic_cooldown_order)
{
	struct config cfg;
	ck_assert_int_eq(config_init(&cfg), 0);
	/* Only the max is set, below the default cooldown of 5s. */
	ck_assert_int_eq(load(&cfg, "policy: {breaker_cooldown_max: 2s}\n"),
			 -EINVAL);
	assert_has(err, "policy.breaker_cooldown: 5s must not exceed");
	ck_assert_int_eq(load(&cfg, "policy: {breaker_cooldown: 5s, breaker_cooldown_max: 5s}\n"),
			 0);
	/* The same for the rate limit's default and its cap. */
	ck_assert_int_eq(load(&cfg, "policy: {rate_limit_cooldown_max: 30s}\n"),
			 -EINVAL);
	assert_has(err, "t.yaml: policy.rate_limit_cooldown: 1m must not exceed policy.rate_limit_cooldown_max (30s)\n");
	ck_assert_int_eq(load(&cfg, "policy: {rate_limit_cooldown_max: 0s}\n"),
			 -EINVAL);
	assert_has(err, "t.yaml: policy.rate_limit_cooldown_max: must be between 1s and");
	ck_assert_int_eq(load(&cfg, "policy: {rate_limit_cooldown: 30s, rate_limit_cooldown_max: 30s}\n"),
			 0);
	ck_assert_uint_eq(cfg.params.rate_limit_cooldown_max_ms, 30000);
	config_finish(&cfg);
}
END_TEST

START_TEST(semantic_session_scope)
{
	struct config cfg;
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_int_eq(cfg.params.session_scope, CORE_SESSION_CALLER);
	ck_assert_int_eq(cfg.params.rate_limit_cooldown_max_ms, 600000);
	ck_assert_int_eq(load(&cfg, "policy: {session_scope: global}\n"), 0);
	ck_assert_int_eq(cfg.params.session_scope, CORE_SESSION_GLOBAL);
	ck_assert_int_eq(load(&cfg, "policy: {session_scope: caller}\n"), 0);
	ck_assert_int_eq(cfg.params.session_scope, CORE_SESSION_CALLER);
	ck_assert_int_eq(load(&cfg, "policy: {session_scope: Caller}\n"), -EINVAL);
	assert_has(err, "t.yaml: policy.session_scope: \"Caller\" is not one of global, caller\n");
	ck_assert_int_eq(load(&cfg, "policy: {session_scope: callerx}\n"), -EINVAL);
	ck_assert_int_eq(cfg.params.session_scope, CORE_SESSION_CALLER);
	config_finish(&cfg);
}
END_TEST

START_TEST(durations)
{
	static const struct {
		const char *s;
		int r;
		uint64_t ms;
	} cases[] = {
		{ "200ms", 0, 200 },	     { "5s", 0, 5000 },
		{ "5m", 0, 300000 },	     { "1h", 0, 3600000 },
		{ "0s", 0, 0 },		     { "1.5s", 0, 1500 },
		{ "0.25m", 0, 15000 },	     { "300s", 0, 300000 },
		{ "007ms", 0, 7 },	     { "0.5ms", -ERANGE, 0 },
		{ "1.0001s", -ERANGE, 0 },   { "5", -EINVAL, 0 },
		{ "s", -EINVAL, 0 },	     { "", -EINVAL, 0 },
		{ "5 s", -EINVAL, 0 },	     { "-1s", -EINVAL, 0 },
		{ "1.s", -EINVAL, 0 },	     { ".5s", -EINVAL, 0 },
		{ "1d", -EINVAL, 0 },	     { "5S", -EINVAL, 0 },
		{ "5sec", -EINVAL, 0 },	     { "1e3ms", -EINVAL, 0 },
		{ "99999999999999999999h", -EINVAL, 0 },
		{ "18446744073709551615h", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t ms = 12345;
		int r = config_parse_duration(cases[i].s, &ms);
		ck_assert_msg(r == cases[i].r, "\"%s\": %d", cases[i].s, r);
		if (r == 0)
			ck_assert_uint_eq(ms, cases[i].ms);
		else
			ck_assert_uint_eq(ms, 12345);
	}
}
END_TEST

START_TEST(listen_addresses)
{
	struct config_listen l;
	char why[160];

	ck_assert_int_eq(config_parse_listen("unix:/run/a.sock", &l, why, sizeof(why)), 0);
	ck_assert_int_eq(l.kind, CONFIG_LISTEN_UNIX);
	ck_assert_str_eq(l.path, "/run/a.sock");
	ck_assert_uint_eq(l.mode, 0660);
	ck_assert_str_eq(l.text, "unix:/run/a.sock,mode=0660");
	ck_assert_int_eq(config_parse_listen("unix:rel.sock,mode=600", &l, why, sizeof(why)), 0);
	ck_assert_uint_eq(l.mode, 0600);
	ck_assert_int_eq(config_parse_listen("tcp:127.0.0.1:12345", &l, why, sizeof(why)), 0);
	ck_assert_int_eq(l.kind, CONFIG_LISTEN_TCP);
	ck_assert_str_eq(l.host, "127.0.0.1");
	ck_assert_uint_eq(l.port, 12345);
	ck_assert(!l.ipv6);
	ck_assert_int_eq(config_parse_listen("tcp:[::1]:80", &l, why, sizeof(why)), 0);
	ck_assert(l.ipv6);
	ck_assert_str_eq(l.host, "::1");
	ck_assert_str_eq(l.text, "tcp:[::1]:80");
	ck_assert_int_eq(config_parse_listen("tcp:localhost:1", &l, why, sizeof(why)), 0);
	ck_assert_str_eq(l.host, "127.0.0.1");
	ck_assert_int_eq(config_parse_listen("tcp:*:65535", &l, why, sizeof(why)), 0);
	ck_assert_str_eq(l.host, "0.0.0.0");
	ck_assert_uint_eq(l.port, 65535);

	char longpath[200] = "unix:/";
	memset(longpath + 6, 'a', 150);
	longpath[156] = '\0';
	const char *const bad[] = {
		"unix:", "unix:,mode=0660", "unix:/a,mode=0800", "unix:/a,mode=",
		"unix:/a,mode=01777", "unix:/a,owner=x", "tcp:1.2.3.4",
		"tcp:1.2.3.4:", "tcp:1.2.3.4:0", "tcp:1.2.3.4:65536",
		"tcp:1.2.3.4:80x", "tcp:::1:80", "tcp:[::1:80", "tcp:[::1]80",
		"tcp:example.com:80", "tcp::80", "udp:1.2.3.4:80", "/run/a.sock",
		"", longpath,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(config_parse_listen(bad[i], &l, why, sizeof(why)) == -EINVAL,
			      "\"%s\" accepted", bad[i]);
		ck_assert_uint_gt(strlen(why), 0);
	}

	struct config_hostport hp;
	ck_assert_int_eq(config_parse_hostport("127.0.0.1:9901", &hp, why, sizeof(why)), 0);
	ck_assert_uint_eq(hp.port, 9901);
	ck_assert_int_eq(config_parse_hostport("9901", &hp, why, sizeof(why)), -EINVAL);
}
END_TEST

START_TEST(listen_override)
{
	struct config cfg;
	char why[256];
	ck_assert_int_eq(config_init(&cfg), 0);
	const char *const addrs[] = { "unix:/tmp/a.sock", "tcp:127.0.0.1:9" };
	ck_assert_int_eq(config_set_listen(&cfg, addrs, 2, why, sizeof(why)), 0);
	ck_assert_uint_eq(cfg.n_listen, 2);
	ck_assert_uint_eq(cfg.listen[1].port, 9);
	const char *const bad[] = { "unix:/tmp/b.sock", "tcp:nowhere" };
	ck_assert_int_eq(config_set_listen(&cfg, bad, 2, why, sizeof(why)), -EINVAL);
	assert_has(why, "tcp:nowhere");
	ck_assert_uint_eq(cfg.n_listen, 2); /* unchanged */
	ck_assert_str_eq(cfg.listen[0].path, "/tmp/a.sock");
	config_finish(&cfg);
}
END_TEST

START_TEST(file_errors)
{
	struct config cfg;
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_int_eq(config_load_file(&cfg, "/nonexistent/warmlane.yaml",
					  err, sizeof(err)), -ENOENT);
	assert_has(err, "/nonexistent/warmlane.yaml: ");

	char dir[64], path[96];
	make_temp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/c.yaml", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("log_level: warn\nendpoints:\n  - {backend: b, server: s}\n", f);
	fclose(f);
	ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof(err)), 0);
	ck_assert_int_eq(cfg.log_level, LOG_LEVEL_WARN);
	ck_assert_uint_eq(cfg.n_endpoints, 1);
	unlink(path);
	rmdir(dir);
	config_finish(&cfg);
}
END_TEST

/* Many problems: the buffer fills, the count does not stop, and the text
 * says some were left out. */
START_TEST(many_errors_truncated)
{
	char yaml[32768] = "endpoints:\n";
	for (int i = 0; i < 300; i++)
		strcat(yaml, "  - {backend: \"\", server: s}\n");
	struct config cfg;
	char small[1024];
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_int_eq(config_load_data(&cfg, "t.yaml", yaml, strlen(yaml),
					  small, sizeof(small)), -EINVAL);
	assert_has(small, "t.yaml: endpoints[0].backend: required\n");
	assert_has(small, "(more errors not shown)\n");
	config_finish(&cfg);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("agent-config");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, full_file);
	tcase_add_test(tc, syntax_error_position);
	tcase_add_test(tc, schema_error_position);
	tcase_add_test(tc, semantic_all_reported);
	tcase_add_test(tc, semantic_cooldown_order);
	tcase_add_test(tc, semantic_session_scope);
	tcase_add_test(tc, durations);
	tcase_add_test(tc, listen_addresses);
	tcase_add_test(tc, listen_override);
	tcase_add_test(tc, file_errors);
	tcase_add_test(tc, many_errors_truncated);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
