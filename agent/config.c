/* config.c - YAML configuration: libcyaml's schema, read by one bounded libyaml pass, semantic checks. */
#include "config.h"
#include "config_errs.h"
#include "config_parse.h"
#include "config_schema.h"
#include "config_yaml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The largest file read; a bigger one is refused before any parsing. */
#define CONFIG_FILE_MAX (1024 * 1024)

/* ---- defaults and ownership ------------------------------------------- */

static void free_strv(char **v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void config_finish(struct config *cfg)
{
	free(cfg->listen);
	free(cfg->metrics_listen);
	free(cfg->runtime_socket);
	free_strv(cfg->runtime_backends, cfg->n_runtime_backends);
	free(cfg->state_file);
	free(cfg->log_input_path);
	free(cfg->command_socket_path);
	free(cfg->key_probe_target);
	free(cfg->key_probe_method);
	free(cfg->key_probe_path);
	for (size_t i = 0; i < cfg->n_endpoints; i++) {
		struct config_endpoint *ep = &cfg->endpoints[i];
		free(ep->backend);
		free(ep->server);
		free_strv(ep->models, ep->n_models);
		free_strv(ep->keys, ep->n_keys);
		free(ep->engine_metrics);
		free(ep->engine_info);
	}
	free(cfg->endpoints);
	for (size_t i = 0; i < cfg->n_backends; i++)
		free(cfg->backends[i].name);
	free(cfg->backends);
	*cfg = (struct config){ 0 };
}

int config_init(struct config *cfg)
{
	char err[128];
	*cfg = (struct config){
		.log_level = LOG_LEVEL_INFO,
		.max_frame_size = CONFIG_DEFAULT_MAX_FRAME_SIZE,
		.hello_timeout_ms = CONFIG_DEFAULT_HELLO_TIMEOUT_MS,
		.idle_timeout_ms = CONFIG_DEFAULT_IDLE_TIMEOUT_MS,
		.metrics_max_conns = CONFIG_DEFAULT_METRICS_MAX_CONNS,
		.metrics_conn_timeout_ms = CONFIG_DEFAULT_METRICS_CONN_TIMEOUT_MS,
	};
	core_params_defaults(&cfg->params);
	cfg->listen = calloc(1, sizeof(*cfg->listen));
	cfg->metrics_listen = strdup(CONFIG_DEFAULT_METRICS);
	cfg->runtime_socket = strdup(CONFIG_DEFAULT_RUNTIME_SOCKET);
	cfg->state_file = strdup(CONFIG_DEFAULT_STATE_FILE);
	cfg->log_input_path = strdup(CONFIG_DEFAULT_LOG_INPUT);
	cfg->log_input_mode = CONFIG_DEFAULT_SOCKET_MODE;
	cfg->command_socket_path = strdup(CONFIG_DEFAULT_COMMAND_SOCKET);
	cfg->command_socket_mode = CONFIG_DEFAULT_SOCKET_MODE;
	cfg->key_probe_target = strdup("");
	cfg->key_probe_method = strdup(CONFIG_DEFAULT_PROBE_METHOD);
	cfg->key_probe_path = strdup(CONFIG_DEFAULT_PROBE_PATH);
	cfg->key_probe_timeout_ms = CONFIG_DEFAULT_PROBE_TIMEOUT_MS;
	cfg->engine_poll_interval_ms = CONFIG_DEFAULT_ENGINE_POLL_MS;
	cfg->engine_timeout_ms = CONFIG_DEFAULT_ENGINE_TIMEOUT_MS;
	cfg->engine_info_interval_ms = CONFIG_DEFAULT_ENGINE_INFO_MS;
	cfg->retry_budget_enabled = true;
	cfg->retry_budget = (struct budget_params){
		.ratio = CONFIG_DEFAULT_RETRY_RATIO,
		.min_per_s = CONFIG_DEFAULT_RETRY_MIN_PER_S,
		.window_ms = CONFIG_DEFAULT_RETRY_WINDOW_MS,
	};
	if (cfg->listen == NULL || cfg->metrics_listen == NULL ||
	    cfg->runtime_socket == NULL || cfg->state_file == NULL ||
	    cfg->log_input_path == NULL || cfg->command_socket_path == NULL ||
	    cfg->key_probe_target == NULL ||
	    cfg->key_probe_method == NULL || cfg->key_probe_path == NULL) {
		config_finish(cfg);
		return -ENOMEM;
	}
	cfg->n_listen = 1;
	/* The defaults are constants that parse; a failure is a bug here. */
	if (config_parse_listen(CONFIG_DEFAULT_LISTEN, &cfg->listen[0], err,
				sizeof(err)) < 0 ||
	    config_parse_hostport(CONFIG_DEFAULT_METRICS, &cfg->metrics, err,
				  sizeof(err)) < 0) {
		config_finish(cfg);
		return -EINVAL;
	}
	return 0;
}

int config_set_listen(struct config *cfg, const char *const *addrs, size_t n,
		      char *err, size_t errlen)
{
	if (n == 0) {
		config_set_err(err, errlen, "no listen address");
		return -EINVAL;
	}
	struct config_listen *l = calloc(n, sizeof(*l));
	if (l == NULL) {
		config_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		char why[160];
		if (config_parse_listen(addrs[i], &l[i], why, sizeof(why)) < 0) {
			config_set_err(err, errlen, "%s: %s", addrs[i], why);
			free(l);
			return -EINVAL;
		}
	}
	free(cfg->listen);
	cfg->listen = l;
	cfg->n_listen = n;
	return 0;
}

/* ---- the semantic pass ------------------------------------------------ */

struct sem {
	const char *name; /* file name for messages */
	struct config_errs *errs;
	const struct config_pos_table *pos; /* positions by path */
	bool oom;
};

/* A problem with the value at path, reported at where_path's line and
 * column (path's own when NULL), or not at all when the loader already
 * reported that value (a wrong kind is not also "required"). */
static void sem_verr(struct sem *s, const char *where_path, const char *path,
		     const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
static void sem_verr(struct sem *s, const char *where_path, const char *path,
		     const char *fmt, va_list ap)
{
	char msg[384];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	const struct config_pos *at = config_pos_find(s->pos, where_path != NULL
						      ? where_path
						      : path);
	if (at != NULL && at->bad)
		return;
	if (at == NULL)
		config_errs_add(s->errs, "%s: %s: %s", s->name, path, msg);
	else
		config_errs_add_at(s->errs, at->line, at->col, "%s:%u:%u: %s: %s",
			s->name, at->line, at->col, path, msg);
}

static void sem_err(struct sem *s, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void sem_err(struct sem *s, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sem_verr(s, NULL, path, fmt, ap);
	va_end(ap);
}

static void sem_err_at(struct sem *s, const char *where_path, const char *path,
		       const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void sem_err_at(struct sem *s, const char *where_path, const char *path,
		       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sem_verr(s, where_path, path, fmt, ap);
	va_end(ap);
}

static char *sem_strdup(struct sem *s, const char *v)
{
	char *d = strdup(v);
	if (d == NULL)
		s->oom = true;
	return d;
}

static void sem_duration(struct sem *s, const char *path, const char *raw,
			 uint64_t min_ms, uint64_t max_ms, uint64_t *dst)
{
	if (raw == NULL)
		return;
	uint64_t ms;
	char a[32], b[32];
	int r = config_parse_duration(raw, &ms);
	if (r == -ERANGE) {
		sem_err(s, path, "\"%s\" is not a whole number of milliseconds",
			raw);
		return;
	}
	if (r < 0) {
		sem_err(s, path,
			"\"%s\" is not a duration (a number and a unit: ms, s, m or h, e.g. \"200ms\", \"5s\")",
			raw);
		return;
	}
	if (ms < min_ms || ms > max_ms) {
		sem_err(s, path, "must be between %s and %s, got %s",
			config_fmt_duration(a, sizeof(a), min_ms),
			config_fmt_duration(b, sizeof(b), max_ms), raw);
		return;
	}
	*dst = ms;
}

static void sem_u32(struct sem *s, const char *path, const double *raw,
		    uint32_t min, uint32_t max, uint32_t *dst)
{
	if (raw == NULL)
		return;
	double v = *raw;
	if (!isfinite(v) || v != floor(v)) {
		sem_err(s, path, "must be a whole number, got %.10g", v);
		return;
	}
	if (v < min || v > max) {
		sem_err(s, path, "must be between %u and %u, got %.10g", min,
			max, v);
		return;
	}
	*dst = (uint32_t)v;
}

/* Checks lo < v (or lo <= v when lo_closed) and v <= hi. */
static void sem_double(struct sem *s, const char *path, const double *raw,
		       double lo, bool lo_closed, double hi, double *dst)
{
	if (raw == NULL)
		return;
	double v = *raw;
	if (!isfinite(v) || (lo_closed ? v < lo : v <= lo) || v > hi) {
		sem_err(s, path, "must be in %c%.10g, %.10g], got %.10g",
			lo_closed ? '[' : '(', lo, hi, v);
		return;
	}
	*dst = v;
}
/* Copies a list of names into an owned array, checking each one. */
static char **sem_names(struct sem *s, const char *base, char **raw,
			unsigned n, bool haproxy_charset, size_t *n_out)
{
	char path[96];
	char **v = NULL;
	*n_out = 0;
	if (n == 0)
		return NULL;
	v = calloc(n, sizeof(*v));
	if (v == NULL) {
		s->oom = true;
		return NULL;
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s[%u]", base, i);
		const char *x = raw[i] != NULL ? raw[i] : "";
		if (x[0] == '\0')
			sem_err(s, path, "must not be empty");
		else if (strlen(x) > CONFIG_NAME_MAX)
			sem_err(s, path, "longer than %d bytes", CONFIG_NAME_MAX);
		else if (haproxy_charset && !config_name_is_haproxy(x))
			sem_err(s, path,
				"\"%s\" may contain only letters, digits, '-', '_', '.' and ':'",
				x);
		else if (!haproxy_charset && !config_name_is_printable(x))
			sem_err(s, path,
				"must be printable ASCII without spaces");
		for (unsigned j = 0; j < i; j++) {
			if (raw[j] != NULL && strcmp(raw[j], x) == 0 &&
			    x[0] != '\0') {
				sem_err(s, path, "duplicate of %s[%u] (\"%s\")",
					base, j, x);
				break;
			}
		}
		v[i] = sem_strdup(s, x);
		*n_out = i + 1;
	}
	return v;
}

static void sem_policy(struct sem *s, const struct raw_policy *rp,
		       struct core_params *p)
{
	const uint64_t S = 1000, M = 60 * S, H = 60 * M, D = 24 * H;

	sem_duration(s, "policy.affinity_ttl", rp->affinity_ttl, S, 30 * D,
		     &p->affinity_ttl_ms);
	sem_u32(s, "policy.affinity_max_entries", rp->affinity_max_entries, 1,
		1 << 28, &p->affinity_max_entries);

	if (rp->identity_ladder_count > 0) {
		bool seen[CORE_RUNG_COUNT] = { false };
		unsigned n = 0;
		bool bad = false;
		for (unsigned i = 0; i < rp->identity_ladder_count; i++) {
			char path[64];
			snprintf(path, sizeof(path), "policy.identity_ladder[%u]",
				 i);
			const char *name = rp->identity_ladder[i] != NULL
						   ? rp->identity_ladder[i]
						   : "";
			int r = -1;
			for (int k = 0; k < CORE_RUNG_COUNT; k++)
				if (strcmp(name, core_rung_name((enum core_rung)k)) == 0)
					r = k;
			if (r < 0) {
				sem_err(s, path,
					"unknown rung \"%s\" (known: session, prefix, install, caller, src)",
					name);
				bad = true;
			} else if (seen[r]) {
				sem_err(s, path, "rung \"%s\" listed twice", name);
				bad = true;
			} else {
				seen[r] = true;
				p->identity_ladder[n++] = (enum core_rung)r;
			}
		}
		if (!bad)
			p->identity_ladder_len = n;
	}

	sem_double(s, "policy.ewma_alpha", rp->ewma_alpha, 0, false, 1,
		   &p->ewma_alpha);
	sem_u32(s, "policy.cold_start_samples", rp->cold_start_samples, 0,
		1000000, &p->cold_start_samples);
	uint64_t prior = 0;
	if (rp->prior_ttfb != NULL) {
		prior = (uint64_t)p->prior_ttfb_ms;
		sem_duration(s, "policy.prior_ttfb", rp->prior_ttfb, 1, 10 * M,
			     &prior);
		p->prior_ttfb_ms = (double)prior;
	}
	sem_duration(s, "policy.idle_reset", rp->idle_reset, S, 30 * D,
		     &p->idle_reset_ms);
	sem_double(s, "policy.sticky_tolerance", rp->sticky_tolerance, 1, true,
		   1000, &p->sticky_tolerance);
	sem_u32(s, "policy.slow_run", rp->slow_run, 0, 64, &p->slow_run);
	sem_double(s, "policy.load_factor", rp->load_factor, 1, true, 1000,
		   &p->load_factor);
	sem_u32(s, "policy.load_floor", rp->load_floor, 0, 1000000,
		&p->load_floor);
	sem_u32(s, "policy.warm_slack", rp->warm_slack, 0, 1000000,
		&p->warm_slack);
	sem_u32(s, "policy.place_choices", rp->place_choices, 1, 64,
		&p->place_choices);
	/* Negative: off (core_params.owned_bound). */
	sem_double(s, "policy.owned_bound", rp->owned_bound, -1, true, 100,
		   &p->owned_bound);
	sem_duration(s, "policy.owned_half_life", rp->owned_half_life, S, 30 * D,
		     &p->owned_half_life_ms);
	sem_double(s, "policy.cost_weight_per_ms", rp->cost_weight_per_ms, 0,
		   true, 1e12, &p->cost_weight_per_ms);
	sem_duration(s, "policy.breaker_window", rp->breaker_window, 100,
		     1 * H, &p->breaker_window_ms);
	sem_u32(s, "policy.breaker_min_requests", rp->breaker_min_requests, 1,
		1000000, &p->breaker_min_requests);
	sem_double(s, "policy.breaker_failure_ratio", rp->breaker_failure_ratio,
		   0, false, 1, &p->breaker_failure_ratio);
	sem_u32(s, "policy.breaker_consecutive", rp->breaker_consecutive, 1,
		1000000, &p->breaker_consecutive);
	sem_duration(s, "policy.breaker_cooldown", rp->breaker_cooldown, 100,
		     1 * D, &p->breaker_cooldown_ms);
	sem_duration(s, "policy.breaker_cooldown_max", rp->breaker_cooldown_max,
		     100, 1 * D, &p->breaker_cooldown_max_ms);
	sem_u32(s, "policy.half_open_probes", rp->half_open_probes, 1, 1000,
		&p->half_open_probes);
	sem_duration(s, "policy.rate_limit_cooldown", rp->rate_limit_cooldown,
		     S, 1 * D, &p->rate_limit_cooldown_ms);
	sem_duration(s, "policy.rate_limit_cooldown_max",
		     rp->rate_limit_cooldown_max, S, 1 * D,
		     &p->rate_limit_cooldown_max_ms);
	sem_duration(s, "policy.dead_key_retry", rp->dead_key_retry, S, 30 * D,
		     &p->dead_key_retry_ms);
	sem_u32(s, "policy.model_mismatch_404s", rp->model_mismatch_404s, 0,
		1000, &p->model_mismatch_404s);
	sem_double(s, "policy.tier_spill", rp->tier_spill, 0, true, 1e6,
		   &p->tier_spill);
	sem_duration(s, "policy.tier_return", rp->tier_return, 0, 1 * D,
		     &p->tier_return_ms);
	if (rp->score_by != NULL) {
		int k = -1;
		for (int i = 0; i < CORE_SCORE_COUNT; i++)
			if (strcmp(rp->score_by,
				   core_score_by_name((enum core_score_by)i)) == 0)
				k = i;
		if (k < 0)
			sem_err(s, "policy.score_by",
				"\"%s\" is not one of headers, end_to_end, both",
				rp->score_by);
		else
			p->score_by = (enum core_score_by)k;
	}
	if (rp->artefact_affinity != NULL)
		p->artefact_affinity = *rp->artefact_affinity;
	if (rp->session_scope != NULL) {
		int k = -1;
		for (int i = 0; i < CORE_SESSION_SCOPE_COUNT; i++)
			if (strcmp(rp->session_scope,
				   core_session_scope_name((enum core_session_scope)i)) == 0)
				k = i;
		if (k < 0)
			sem_err(s, "policy.session_scope",
				"\"%s\" is not one of global, caller",
				rp->session_scope);
		else
			p->session_scope = (enum core_session_scope)k;
	}
}

const char *config_mode_name(enum config_mode m)
{
	switch (m) {
	case CONFIG_MODE_ROUTE:
		return "route";
	case CONFIG_MODE_SHADOW:
		return "shadow";
	default:
		return NULL;
	}
}

/* policy.mode: the agent's, not the core's (the core decides the same). */
static void sem_policy_mode(struct sem *s, const struct raw_policy *rp,
			    struct config *cfg)
{
	if (rp->mode != NULL) {
		int k = -1;
		for (int i = 0; i < CONFIG_MODE_COUNT; i++)
			if (strcmp(rp->mode, config_mode_name((enum config_mode)i)) == 0)
				k = i;
		if (k < 0)
			sem_err(s, "policy.mode", "\"%s\" is not one of route, shadow",
				rp->mode);
		else
			cfg->mode = (enum config_mode)k;
	}
}

static void sem_endpoints(struct sem *s, const struct raw_config *raw,
			  struct config *cfg)
{
	if (raw->endpoints_count == 0)
		return;
	cfg->endpoints = calloc(raw->endpoints_count, sizeof(*cfg->endpoints));
	if (cfg->endpoints == NULL) {
		s->oom = true;
		return;
	}
	for (unsigned i = 0; i < raw->endpoints_count; i++) {
		const struct raw_endpoint *re = &raw->endpoints[i];
		struct config_endpoint *ep = &cfg->endpoints[i];
		char path[96], base[48];
		snprintf(base, sizeof(base), "endpoints[%u]", i);
		cfg->n_endpoints = i + 1;
		ep->weight = 1;
		ep->cost_per_mtok = 0;

		static const char *const which[] = { "backend", "server" };
		char *const *vals[] = { &re->backend, &re->server };
		char **dsts[] = { &ep->backend, &ep->server };
		for (int k = 0; k < 2; k++) {
			const char *v = *vals[k];
			snprintf(path, sizeof(path), "%s.%s", base, which[k]);
			if (v == NULL || v[0] == '\0')
				sem_err(s, path, "required");
			else if (strlen(v) > CONFIG_NAME_MAX)
				sem_err(s, path, "longer than %d bytes",
					CONFIG_NAME_MAX);
			else if (!config_name_is_haproxy(v))
				sem_err(s, path,
					"\"%s\" may contain only letters, digits, '-', '_', '.' and ':'",
					v);
			*dsts[k] = sem_strdup(s, v != NULL ? v : "");
		}

		snprintf(path, sizeof(path), "%s.models", base);
		ep->models = sem_names(s, path, re->models, re->models_count,
				       false, &ep->n_models);
		snprintf(path, sizeof(path), "%s.keys", base);
		ep->keys = sem_names(s, path, re->keys, re->keys_count, false,
				     &ep->n_keys);
		snprintf(path, sizeof(path), "%s.weight", base);
		sem_double(s, path, re->weight, 0, false, 1e6, &ep->weight);
		snprintf(path, sizeof(path), "%s.cost_per_mtok", base);
		sem_double(s, path, re->cost_per_mtok, 0, true, 1e9,
			   &ep->cost_per_mtok);
		static const char *const urls[] = { "engine_metrics", "engine_info" };
		char *const *uvals[] = { &re->engine_metrics, &re->engine_info };
		char **udsts[] = { &ep->engine_metrics, &ep->engine_info };
		for (int k = 0; k < 2; k++) {
			const char *u = *uvals[k];
			if (u == NULL)
				continue;
			snprintf(path, sizeof(path), "%s.%s", base, urls[k]);
			char why[96];
			if (!config_url_is_http(u, why, sizeof(why)))
				sem_err(s, path, "\"%s\": %s", u, why);
			else
				*udsts[k] = sem_strdup(s, u);
		}
		snprintf(path, sizeof(path), "%s.tier", base);
		sem_u32(s, path, re->tier, 1, CORE_TIER_MAX, &ep->tier);

		if (re->backend == NULL || re->server == NULL ||
		    re->backend[0] == '\0' || re->server[0] == '\0')
			continue; /* already "required" */
		for (unsigned j = 0; j < i; j++) {
			const struct raw_endpoint *o = &raw->endpoints[j];
			if (o->backend != NULL && o->server != NULL &&
			    strcmp(o->backend, re->backend) == 0 &&
			    strcmp(o->server, re->server) == 0) {
				sem_err(s, base,
					"duplicate endpoint %s/%s (already endpoints[%u])",
					re->backend, re->server, j);
				break;
			}
		}
		if (cfg->n_runtime_backends > 0) {
			bool found = false;
			for (size_t j = 0; j < cfg->n_runtime_backends; j++)
				if (strcmp(cfg->runtime_backends[j],
					   re->backend) == 0)
					found = true;
			if (!found) {
				snprintf(path, sizeof(path), "%s.backend", base);
				sem_err(s, path,
					"\"%s\" is not in runtime_api.backends",
					re->backend);
			}
		}
	}
}

/* backends[]: per-backend defaults of its servers (the failover tier). */
static void sem_backends(struct sem *s, const struct raw_config *raw,
			 struct config *cfg)
{
	if (raw->backends_count == 0)
		return;
	cfg->backends = calloc(raw->backends_count, sizeof(*cfg->backends));
	if (cfg->backends == NULL) {
		s->oom = true;
		return;
	}
	for (unsigned i = 0; i < raw->backends_count; i++) {
		const struct raw_backend *rb = &raw->backends[i];
		struct config_backend *b = &cfg->backends[i];
		char path[64];
		cfg->n_backends = i + 1;
		b->tier = 1;
		snprintf(path, sizeof(path), "backends[%u].name", i);
		const char *v = rb->name != NULL ? rb->name : "";
		if (v[0] == '\0')
			sem_err(s, path, "required");
		else if (strlen(v) > CONFIG_NAME_MAX)
			sem_err(s, path, "longer than %d bytes", CONFIG_NAME_MAX);
		else if (!config_name_is_haproxy(v))
			sem_err(s, path,
				"\"%s\" may contain only letters, digits, '-', '_', '.' and ':'",
				v);
		for (unsigned j = 0; j < i && v[0] != '\0'; j++) {
			if (raw->backends[j].name != NULL &&
			    strcmp(raw->backends[j].name, v) == 0) {
				sem_err(s, path, "duplicate of backends[%u] (\"%s\")",
					j, v);
				break;
			}
		}
		b->name = sem_strdup(s, v);
		snprintf(path, sizeof(path), "backends[%u].tier", i);
		sem_u32(s, path, rb->tier, 1, CORE_TIER_MAX, &b->tier);
	}
}

unsigned config_tier(const struct config *cfg, const char *backend,
		     const struct config_endpoint *ep)
{
	if (ep != NULL && ep->tier > 0)
		return ep->tier;
	for (size_t i = 0; i < cfg->n_backends; i++)
		if (cfg->backends[i].name != NULL &&
		    strcmp(cfg->backends[i].name, backend) == 0)
			return cfg->backends[i].tier;
	return 1;
}

static void sem_listen(struct sem *s, const struct raw_config *raw,
		       struct config *cfg)
{
	if (raw->listen_count == 0)
		return; /* absent or [] keeps the default */
	struct config_listen *l = calloc(raw->listen_count, sizeof(*l));
	if (l == NULL) {
		s->oom = true;
		return;
	}
	bool bad = false;
	for (unsigned i = 0; i < raw->listen_count; i++) {
		char path[32], why[160];
		snprintf(path, sizeof(path), "listen[%u]", i);
		const char *a = raw->listen[i] != NULL ? raw->listen[i] : "";
		if (config_parse_listen(a, &l[i], why, sizeof(why)) < 0) {
			sem_err(s, path, "bad address \"%s\": %s", a, why);
			bad = true;
			continue;
		}
		for (unsigned j = 0; j < i; j++) {
			bool same = l[j].kind == l[i].kind &&
				    (l[i].kind == CONFIG_LISTEN_UNIX
					     ? strcmp(l[j].path, l[i].path) == 0
					     : strcmp(l[j].host, l[i].host) == 0 &&
						       l[j].port == l[i].port);
			if (same) {
				sem_err(s, path, "same address as listen[%u]", j);
				bad = true;
				break;
			}
		}
	}
	if (bad) {
		free(l);
		return;
	}
	free(cfg->listen);
	cfg->listen = l;
	cfg->n_listen = raw->listen_count;
}

/* Replaces an owned default string with a copy of raw when raw is set. */
static void sem_replace(struct sem *s, char **dst, const char *raw)
{
	if (raw == NULL)
		return;
	char *d = sem_strdup(s, raw);
	if (d == NULL)
		return;
	free(*dst);
	*dst = d;
}

/* A socket's permission bits: 1 to 4 octal digits, at most 0777. */
static void sem_mode(struct sem *s, const char *field, const char *m,
		     unsigned *out)
{
	if (m == NULL)
		return;
	unsigned v = 0;
	bool ok = m[0] != '\0' && strlen(m) <= 4;
	for (const char *q = m; ok && *q != '\0'; q++) {
		ok = *q >= '0' && *q <= '7';
		v = v * 8 + (unsigned)(*q - '0');
	}
	if (!ok || v > 0777)
		sem_err(s, field,
			"\"%s\" is not octal permission bits (e.g. \"0660\")", m);
	else
		*out = v;
}

/* key_probe: where and how warmlane probes its upstream keys. The target
 * is HAProxy's probe listener (unix:PATH or tcp:HOST:PORT, no options: the
 * agent connects, it does not bind); the method a token, the path
 * origin-form without spaces or controls (they become the request line
 * as they are). */
static void sem_key_probe(struct sem *s, const struct raw_key_probe *kp,
			  struct config *cfg)
{
	if (kp->target != NULL && kp->target[0] != '\0') {
		char why[160];
		struct config_listen l;
		if (strchr(kp->target, ',') != NULL)
			sem_err(s, "key_probe.target",
				"\"%s\": expected unix:PATH or tcp:HOST:PORT (no options)",
				kp->target);
		else if (config_parse_listen(kp->target, &l, why, sizeof(why)) < 0)
			sem_err(s, "key_probe.target", "\"%s\": %s", kp->target,
				why);
		else if (l.kind == CONFIG_LISTEN_TCP &&
			 (strcmp(l.host, "0.0.0.0") == 0 || strcmp(l.host, "::") == 0))
			sem_err(s, "key_probe.target",
				"\"%s\": a probe connects to one address, not *",
				kp->target);
		else
			cfg->key_probe = l;
	}
	sem_replace(s, &cfg->key_probe_target, kp->target);
	if (kp->method != NULL) {
		size_t n = strlen(kp->method);
		bool ok = n > 0 && n <= 16;
		for (size_t i = 0; ok && i < n; i++)
			ok = kp->method[i] >= 'A' && kp->method[i] <= 'Z';
		if (!ok)
			sem_err(s, "key_probe.method",
				"\"%s\" is not an HTTP method (1 to 16 capital letters)",
				kp->method);
		else
			sem_replace(s, &cfg->key_probe_method, kp->method);
	}
	if (kp->path != NULL) {
		size_t n = strlen(kp->path);
		bool ok = n > 0 && n <= CONFIG_PROBE_PATH_MAX && kp->path[0] == '/';
		for (size_t i = 0; ok && i < n; i++)
			ok = (unsigned char)kp->path[i] > 0x20 &&
			     (unsigned char)kp->path[i] < 0x7f;
		if (!ok)
			sem_err(s, "key_probe.path",
				"must start with '/' and hold at most %d printable characters without spaces",
				CONFIG_PROBE_PATH_MAX);
		else
			sem_replace(s, &cfg->key_probe_path, kp->path);
	}
	sem_duration(s, "key_probe.interval", kp->interval, 1000,
		     3600 * 1000, &cfg->params.key_probe_interval_ms);
	sem_duration(s, "key_probe.timeout", kp->timeout, 100, 60 * 1000,
		     &cfg->key_probe_timeout_ms);
}

static void sem_run(struct sem *s, const struct raw_config *raw,
		    struct config *cfg)
{
	if (raw->log_level != NULL &&
	    log_level_parse(raw->log_level, &cfg->log_level) < 0)
		sem_err(s, "log_level",
			"\"%s\" is not one of error, warn, info, debug",
			raw->log_level);

	sem_listen(s, raw, cfg);

	sem_u32(s, "max_frame_size", raw->max_frame_size, CONFIG_MIN_FRAME_SIZE,
		CONFIG_MAX_FRAME_SIZE, &cfg->max_frame_size);

	if (raw->metrics != NULL && raw->metrics->listen != NULL) {
		const char *m = raw->metrics->listen;
		char why[160];
		if (m[0] != '\0' &&
		    config_parse_hostport(m, &cfg->metrics, why, sizeof(why)) < 0)
			sem_err(s, "metrics.listen", "bad address \"%s\": %s", m,
				why);
		sem_replace(s, &cfg->metrics_listen, m);
	}
	if (raw->metrics != NULL) {
		sem_u32(s, "metrics.max_connections",
			raw->metrics->max_connections, 1, 4096,
			&cfg->metrics_max_conns);
		/* libmicrohttpd counts its own timeout in whole seconds. */
		sem_duration(s, "metrics.connection_timeout",
			     raw->metrics->connection_timeout, 1000,
			     3600 * 1000, &cfg->metrics_conn_timeout_ms);
	}

	if (raw->spop != NULL) {
		const struct raw_spop *sp = raw->spop;
		sem_duration(s, "spop.hello_timeout", sp->hello_timeout, 10,
			     60 * 1000, &cfg->hello_timeout_ms);
		sem_duration(s, "spop.idle_timeout", sp->idle_timeout, 100,
			     24ull * 3600 * 1000, &cfg->idle_timeout_ms);
		sem_u32(s, "spop.max_connections", sp->max_connections, 0,
			10000000, &cfg->max_connections);
	}

	if (raw->runtime_api != NULL) {
		const struct raw_runtime *rt = raw->runtime_api;
		if (rt->socket != NULL && strlen(rt->socket) > CONFIG_UNIX_PATH_MAX)
			sem_err(s, "runtime_api.socket",
				"socket path longer than %d bytes",
				CONFIG_UNIX_PATH_MAX);
		sem_replace(s, &cfg->runtime_socket, rt->socket);
		cfg->runtime_backends =
			sem_names(s, "runtime_api.backends", rt->backends,
				  rt->backends_count, true,
				  &cfg->n_runtime_backends);
		sem_duration(s, "runtime_api.poll_interval", rt->poll_interval,
			     10, 60 * 1000, &cfg->params.poll_interval_ms);
	}

	if (raw->state != NULL) {
		sem_replace(s, &cfg->state_file, raw->state->file);
		sem_duration(s, "state.snapshot_interval",
			     raw->state->snapshot_interval, 100,
			     24ull * 3600 * 1000,
			     &cfg->params.snapshot_interval_ms);
	}

	if (raw->log_input != NULL) {
		const struct raw_log_input *li = raw->log_input;
		if (li->path != NULL && strlen(li->path) > CONFIG_UNIX_PATH_MAX)
			sem_err(s, "log_input.path",
				"socket path longer than %d bytes",
				CONFIG_UNIX_PATH_MAX);
		sem_replace(s, &cfg->log_input_path, li->path);
		sem_mode(s, "log_input.mode", li->mode, &cfg->log_input_mode);
		uint32_t port = 0;
		sem_u32(s, "log_input.udp_port", li->udp_port, 0, 65535, &port);
		cfg->log_input_udp_port = (uint16_t)port;
	}

	if (raw->command_socket != NULL) {
		const struct raw_command_socket *cs = raw->command_socket;
		if (cs->path != NULL && strlen(cs->path) > CONFIG_UNIX_PATH_MAX)
			sem_err(s, "command_socket.path",
				"socket path longer than %d bytes",
				CONFIG_UNIX_PATH_MAX);
		sem_replace(s, &cfg->command_socket_path, cs->path);
		sem_mode(s, "command_socket.mode", cs->mode,
			 &cfg->command_socket_mode);
	}

	if (raw->key_probe != NULL)
		sem_key_probe(s, raw->key_probe, cfg);
	cfg->params.key_probe = cfg->key_probe_target[0] != '\0';

	if (raw->retry_budget != NULL) {
		const struct raw_retry_budget *rb = raw->retry_budget;
		if (rb->enabled != NULL)
			cfg->retry_budget_enabled = *rb->enabled;
		sem_double(s, "retry_budget.ratio", rb->ratio, 0, true, 100,
			   &cfg->retry_budget.ratio);
		sem_double(s, "retry_budget.min_per_second", rb->min_per_second,
			   0, true, 100000, &cfg->retry_budget.min_per_s);
		/* At least a second: ten buckets of 100 ms or more. */
		sem_duration(s, "retry_budget.window", rb->window, 1000,
			     3600 * 1000, &cfg->retry_budget.window_ms);
	}

	if (raw->engine != NULL) {
		const struct raw_engine *en = raw->engine;
		sem_duration(s, "engine.poll_interval", en->poll_interval, 10,
			     60 * 1000, &cfg->engine_poll_interval_ms);
		sem_duration(s, "engine.timeout", en->timeout, 10, 60 * 1000,
			     &cfg->engine_timeout_ms);
		sem_duration(s, "engine.max_age", en->max_age, 100, 3600 * 1000,
			     &cfg->params.engine_max_age_ms);
		sem_duration(s, "engine.info_interval", en->info_interval, 1000,
			     24ull * 3600 * 1000, &cfg->engine_info_interval_ms);
	}

	if (raw->policy != NULL) {
		sem_policy(s, raw->policy, &cfg->params);
		sem_policy_mode(s, raw->policy, cfg);
	}
	/* Checked here, after both are known, whichever one the file set. */
	if (cfg->params.breaker_cooldown_ms > cfg->params.breaker_cooldown_max_ms)
	{
		char a[32], b[32];
		/* At the one of the two the file set (the cooldown if both). */
		bool own = raw->policy != NULL &&
			   raw->policy->breaker_cooldown != NULL;
		sem_err_at(s,
			   own ? "policy.breaker_cooldown"
			       : "policy.breaker_cooldown_max",
			   "policy.breaker_cooldown",
			   "%s must not exceed policy.breaker_cooldown_max (%s)",
			config_fmt_duration(a, sizeof(a), cfg->params.breaker_cooldown_ms),
			config_fmt_duration(b, sizeof(b),
				cfg->params.breaker_cooldown_max_ms));
	}
	if (cfg->params.rate_limit_cooldown_ms >
	    cfg->params.rate_limit_cooldown_max_ms) {
		char a[32], b[32];
		sem_err(s, "policy.rate_limit_cooldown",
			"%s must not exceed policy.rate_limit_cooldown_max (%s)",
			config_fmt_duration(a, sizeof(a), cfg->params.rate_limit_cooldown_ms),
			config_fmt_duration(b, sizeof(b),
				cfg->params.rate_limit_cooldown_max_ms));
	}

	sem_endpoints(s, raw, cfg);
	sem_backends(s, raw, cfg);
}

/* ---- loading ---------------------------------------------------------- */

int config_load_data(struct config *cfg, const char *name, const char *data,
		     size_t len, char *err, size_t errlen)
{
	struct config_errs errs;
	config_errs_init(&errs, err, errlen);
	if (len > CONFIG_FILE_MAX) {
		config_set_err(err, errlen, "%s: larger than %d bytes\n", name,
			       CONFIG_FILE_MAX);
		return -EFBIG;
	}

	struct config_pos_table at = { 0 };
	struct raw_config *raw = NULL;
	bool stopped = false;
	int r = config_yaml_read(name, data, len, &errs, &at, &raw, &stopped);
	struct config next;
	if (r == 0)
		r = config_init(&next);
	if (r < 0) {
		config_raw_free(raw);
		config_pos_finish(&at);
		config_errs_add(&errs, "%s: out of memory", name);
		config_errs_flush(&errs);
		return r;
	}
	config_pos_sort(&at);
	struct sem s = { .name = name, .errs = &errs, .pos = &at };
	/* After a syntax error or a bound the rest of the file is unknown:
	 * its defaults would only add wrong complaints. NULL: an empty
	 * document, all defaults. */
	if (raw != NULL && !stopped)
		sem_run(&s, raw, &next);
	config_raw_free(raw);
	config_pos_finish(&at);

	if (s.oom)
		config_errs_add(&errs, "%s: out of memory", name);
	unsigned count = errs.count;
	config_errs_flush(&errs);
	if (count > 0) {
		config_finish(&next);
		return s.oom ? -ENOMEM : -EINVAL;
	}
	config_finish(cfg);
	*cfg = next;
	return 0;
}

int config_load_file(struct config *cfg, const char *path, char *err,
		     size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		int e = errno;
		config_set_err(err, errlen, "%s: %s\n", path, strerror(e));
		return -e;
	}
	char *data = malloc(CONFIG_FILE_MAX + 1);
	if (data == NULL) {
		fclose(f);
		config_set_err(err, errlen, "%s: out of memory\n", path);
		return -ENOMEM;
	}
	size_t len = fread(data, 1, CONFIG_FILE_MAX + 1, f);
	int rerr = ferror(f) ? errno : 0;
	fclose(f);
	int r;
	if (rerr != 0) {
		config_set_err(err, errlen, "%s: %s\n", path, strerror(rerr));
		r = -rerr;
	} else {
		/* A file over the bound is refused by config_load_data
		 * before any parsing. */
		r = config_load_data(cfg, path, data, len, err, errlen);
	}
	free(data);
	return r;
}
