/* config_check.c - the configuration's semantic pass: ranges, names, addresses, cross-field rules, at file:line:col. */
#include "config_check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_parse.h"

/* A problem with the value at path, reported at where_path's line and
 * column (path's own when NULL), or not at all when the loader already
 * reported that value (a wrong kind is not also "required"). */
static void check_verr(struct config_check *s, const char *where_path,
		       const char *path, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
static void check_verr(struct config_check *s, const char *where_path,
		       const char *path, const char *fmt, va_list ap)
{
	char msg[384];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	const struct config_pos *at =
		config_pos_find(s->pos, where_path != NULL ? where_path : path);
	if (at != NULL && at->bad)
		return;
	if (at == NULL)
		config_errs_add(s->errs, "%s: %s: %s", s->name, path, msg);
	else
		config_errs_add_at(s->errs, at->line, at->col, "%s:%u:%u: %s: %s",
			s->name, at->line, at->col, path, msg);
}

void config_check_err(struct config_check *s, const char *path,
		      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	check_verr(s, NULL, path, fmt, ap);
	va_end(ap);
}

void config_check_err_at(struct config_check *s, const char *where_path,
			 const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	check_verr(s, where_path, path, fmt, ap);
	va_end(ap);
}

char *config_check_strdup(struct config_check *s, const char *v)
{
	char *d = strdup(v);
	if (d == NULL)
		s->oom = true;
	return d;
}

/* calloc, noting a failure in s->oom. */
static void *check_calloc(struct config_check *s, size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (p == NULL)
		s->oom = true;
	return p;
}

void config_check_duration(struct config_check *s, const char *path,
			   const char *raw, uint64_t min_ms, uint64_t max_ms,
			   uint64_t *dst)
{
	if (raw == NULL)
		return;
	uint64_t ms;
	char a[32], b[32];
	int r = config_parse_duration(raw, &ms);
	if (r == -ERANGE) {
		config_check_err(s, path,
				 "\"%s\" is not a whole number of milliseconds",
				 raw);
		return;
	}
	if (r < 0) {
		config_check_err(s, path,
			"\"%s\" is not a duration (a number and a unit: ms, s, m or h, e.g. \"200ms\", \"5s\")",
			raw);
		return;
	}
	if (ms < min_ms || ms > max_ms) {
		config_check_err(s, path, "must be between %s and %s, got %s",
				 config_fmt_duration(a, sizeof(a), min_ms),
				 config_fmt_duration(b, sizeof(b), max_ms),
				 raw);
		return;
	}
	*dst = ms;
}

void config_check_u32(struct config_check *s, const char *path,
		      const double *raw, uint32_t min, uint32_t max,
		      uint32_t *dst)
{
	if (raw == NULL)
		return;
	double v = *raw;
	if (!isfinite(v) || v != floor(v)) {
		config_check_err(s, path, "must be a whole number, got %.10g",
				 v);
		return;
	}
	if (v < min || v > max) {
		config_check_err(s, path,
				 "must be between %u and %u, got %.10g", min,
				 max, v);
		return;
	}
	*dst = (uint32_t)v;
}

void config_check_double(struct config_check *s, const char *path,
			 const double *raw, double lo, bool lo_closed,
			 double hi, double *dst)
{
	if (raw == NULL)
		return;
	double v = *raw;
	if (!isfinite(v) || (lo_closed ? v < lo : v <= lo) || v > hi) {
		config_check_err(s, path,
				 "must be in %c%.10g, %.10g], got %.10g",
				 lo_closed ? '[' : '(', lo, hi, v);
		return;
	}
	*dst = v;
}
/* One name at path: if_empty when empty, else its length and charset
 * (HAProxy's, else printable ASCII without spaces). */
static void check_name(struct config_check *s, const char *path,
		       const char *v, bool haproxy_charset,
		       const char *if_empty)
{
	if (v[0] == '\0')
		config_check_err(s, path, "%s", if_empty);
	else if (strlen(v) > CONFIG_NAME_MAX)
		config_check_err(s, path, "longer than %d bytes",
				 CONFIG_NAME_MAX);
	else if (haproxy_charset && !config_name_is_haproxy(v))
		config_check_err(s, path,
			"\"%s\" may contain only letters, digits, '-', '_', '.' and ':'",
			v);
	else if (!haproxy_charset && !config_name_is_printable(v))
		config_check_err(s, path,
				 "must be printable ASCII without spaces");
}

/* Copies a list of names into an owned array, checking each one. */
static char **check_names(struct config_check *s, const char *base, char **raw,
			  unsigned n, bool haproxy_charset, size_t *n_out)
{
	char path[96];
	char **v = NULL;
	*n_out = 0;
	if (n == 0)
		return NULL;
	v = check_calloc(s, n, sizeof(*v));
	if (v == NULL)
		return NULL;
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s[%u]", base, i);
		const char *x = raw[i] != NULL ? raw[i] : "";
		check_name(s, path, x, haproxy_charset, "must not be empty");
		for (unsigned j = 0; j < i; j++) {
			if (raw[j] != NULL && strcmp(raw[j], x) == 0 &&
			    x[0] != '\0') {
				config_check_err(s, path,
						 "duplicate of %s[%u] (\"%s\")",
						 base, j, x);
				break;
			}
		}
		v[i] = config_check_strdup(s, x);
		*n_out = i + 1;
	}
	return v;
}

static void check_endpoints(struct config_check *s,
			    const struct raw_config *raw, struct config *cfg)
{
	if (raw->endpoints_count == 0)
		return;
	cfg->endpoints = check_calloc(s, raw->endpoints_count,
				      sizeof(*cfg->endpoints));
	if (cfg->endpoints == NULL)
		return;
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
			const char *v = *vals[k] != NULL ? *vals[k] : "";
			snprintf(path, sizeof(path), "%s.%s", base, which[k]);
			check_name(s, path, v, true, "required");
			*dsts[k] = config_check_strdup(s, v);
		}

		snprintf(path, sizeof(path), "%s.models", base);
		ep->models = check_names(s, path, re->models, re->models_count,
					 false, &ep->n_models);
		snprintf(path, sizeof(path), "%s.keys", base);
		ep->keys = check_names(s, path, re->keys, re->keys_count, false,
				       &ep->n_keys);
		snprintf(path, sizeof(path), "%s.weight", base);
		config_check_double(s, path, re->weight, 0, false, 1e6,
				    &ep->weight);
		snprintf(path, sizeof(path), "%s.cost_per_mtok", base);
		config_check_double(s, path, re->cost_per_mtok, 0, true, 1e9,
				    &ep->cost_per_mtok);
		/* 0: unknown (core_endpoint_config.slots) */
		snprintf(path, sizeof(path), "%s.slots", base);
		config_check_u32(s, path, re->slots, 0, 1000000, &ep->slots);
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
				config_check_err(s, path, "\"%s\": %s", u, why);
			else
				*udsts[k] = config_check_strdup(s, u);
		}
		snprintf(path, sizeof(path), "%s.tier", base);
		config_check_u32(s, path, re->tier, 1, CORE_TIER_MAX,
				 &ep->tier);

		if (re->backend == NULL || re->server == NULL ||
		    re->backend[0] == '\0' || re->server[0] == '\0')
			continue; /* already "required" */
		for (unsigned j = 0; j < i; j++) {
			const struct raw_endpoint *o = &raw->endpoints[j];
			if (o->backend != NULL && o->server != NULL &&
			    strcmp(o->backend, re->backend) == 0 &&
			    strcmp(o->server, re->server) == 0) {
				config_check_err(s, base,
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
				config_check_err(s, path,
					"\"%s\" is not in runtime_api.backends",
					re->backend);
			}
		}
	}
}

/* backends[]: per-backend defaults of its servers (the failover tier). */
static void check_backends(struct config_check *s, const struct raw_config *raw,
			   struct config *cfg)
{
	if (raw->backends_count == 0)
		return;
	cfg->backends = check_calloc(s, raw->backends_count,
				     sizeof(*cfg->backends));
	if (cfg->backends == NULL)
		return;
	for (unsigned i = 0; i < raw->backends_count; i++) {
		const struct raw_backend *rb = &raw->backends[i];
		struct config_backend *b = &cfg->backends[i];
		char path[64];
		cfg->n_backends = i + 1;
		b->tier = 1;
		snprintf(path, sizeof(path), "backends[%u].name", i);
		const char *v = rb->name != NULL ? rb->name : "";
		check_name(s, path, v, true, "required");
		for (unsigned j = 0; j < i && v[0] != '\0'; j++) {
			if (raw->backends[j].name != NULL &&
			    strcmp(raw->backends[j].name, v) == 0) {
				config_check_err(s, path,
					"duplicate of backends[%u] (\"%s\")", j,
					v);
				break;
			}
		}
		b->name = config_check_strdup(s, v);
		snprintf(path, sizeof(path), "backends[%u].tier", i);
		config_check_u32(s, path, rb->tier, 1, CORE_TIER_MAX, &b->tier);
	}
}

static void check_listen(struct config_check *s, const struct raw_config *raw,
			 struct config *cfg)
{
	if (raw->listen_count == 0)
		return; /* absent or [] keeps the default */
	struct config_listen *l = check_calloc(s, raw->listen_count, sizeof(*l));
	if (l == NULL)
		return;
	bool bad = false;
	for (unsigned i = 0; i < raw->listen_count; i++) {
		char path[32], why[160];
		snprintf(path, sizeof(path), "listen[%u]", i);
		const char *a = raw->listen[i] != NULL ? raw->listen[i] : "";
		if (config_parse_listen(a, &l[i], why, sizeof(why)) < 0) {
			config_check_err(s, path, "bad address \"%s\": %s", a,
					 why);
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
				config_check_err(s, path,
						 "same address as listen[%u]",
						 j);
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
static void check_replace(struct config_check *s, char **dst, const char *raw)
{
	if (raw == NULL)
		return;
	char *d = config_check_strdup(s, raw);
	if (d == NULL)
		return;
	free(*dst);
	*dst = d;
}

/* A unix socket's path ("" disables it) into *dst when raw is set. */
static void check_socket(struct config_check *s, const char *field,
			 const char *raw, char **dst)
{
	if (raw != NULL && strlen(raw) > CONFIG_UNIX_PATH_MAX)
		config_check_err(s, field, "socket path longer than %d bytes",
				 CONFIG_UNIX_PATH_MAX);
	check_replace(s, dst, raw);
}

/* A socket's permission bits: 1 to 4 octal digits, at most 0777. */
static void check_mode(struct config_check *s, const char *field, const char *m,
		       unsigned *out)
{
	if (m != NULL && config_parse_mode(m, strlen(m), out) < 0)
		config_check_err(s, field,
			"\"%s\" is not octal permission bits (e.g. \"0660\")",
			m);
}

/* key_probe: where and how warmlane probes its upstream keys. The target
 * is HAProxy's probe listener (unix:PATH or tcp:HOST:PORT, no options: the
 * agent connects, it does not bind); the method a token, the path
 * origin-form without spaces or controls (they become the request line
 * as they are). */
static void check_key_probe(struct config_check *s,
			    const struct raw_key_probe *kp, struct config *cfg)
{
	if (kp->target != NULL && kp->target[0] != '\0') {
		char why[160];
		struct config_listen l;
		if (strchr(kp->target, ',') != NULL)
			config_check_err(s, "key_probe.target",
				"\"%s\": expected unix:PATH or tcp:HOST:PORT (no options)",
				kp->target);
		else if (config_parse_listen(kp->target, &l, why, sizeof(why)) < 0)
			config_check_err(s, "key_probe.target", "\"%s\": %s",
					 kp->target, why);
		else if (l.kind == CONFIG_LISTEN_TCP &&
			 (strcmp(l.host, "0.0.0.0") == 0 || strcmp(l.host, "::") == 0))
			config_check_err(s, "key_probe.target",
				"\"%s\": a probe connects to one address, not *",
				kp->target);
		else
			cfg->key_probe = l;
	}
	check_replace(s, &cfg->key_probe_target, kp->target);
	if (kp->method != NULL) {
		size_t n = strlen(kp->method);
		bool ok = n > 0 && n <= 16;
		for (size_t i = 0; ok && i < n; i++)
			ok = kp->method[i] >= 'A' && kp->method[i] <= 'Z';
		if (!ok)
			config_check_err(s, "key_probe.method",
				"\"%s\" is not an HTTP method (1 to 16 capital letters)",
				kp->method);
		else
			check_replace(s, &cfg->key_probe_method, kp->method);
	}
	if (kp->path != NULL) {
		size_t n = strlen(kp->path);
		bool ok = n > 0 && n <= CONFIG_PROBE_PATH_MAX && kp->path[0] == '/';
		for (size_t i = 0; ok && i < n; i++)
			ok = (unsigned char)kp->path[i] > 0x20 &&
			     (unsigned char)kp->path[i] < 0x7f;
		if (!ok)
			config_check_err(s, "key_probe.path",
				"must start with '/' and hold at most %d printable characters without spaces",
				CONFIG_PROBE_PATH_MAX);
		else
			check_replace(s, &cfg->key_probe_path, kp->path);
	}
	config_check_duration(s, "key_probe.interval", kp->interval, 1000,
			      3600 * 1000, &cfg->params.key_probe_interval_ms);
	config_check_duration(s, "key_probe.timeout", kp->timeout, 100,
			      60 * 1000, &cfg->key_probe_timeout_ms);
}

void config_check_run(struct config_check *s, const struct raw_config *raw,
		      struct config *cfg)
{
	if (raw->log_level != NULL &&
	    log_level_parse(raw->log_level, &cfg->log_level) < 0)
		config_check_err(s, "log_level",
			"\"%s\" is not one of error, warn, info, debug",
			raw->log_level);

	check_listen(s, raw, cfg);

	config_check_u32(s, "max_frame_size", raw->max_frame_size,
			 CONFIG_MIN_FRAME_SIZE, CONFIG_MAX_FRAME_SIZE,
			 &cfg->max_frame_size);

	if (raw->metrics != NULL && raw->metrics->listen != NULL) {
		const char *m = raw->metrics->listen;
		char why[160];
		if (m[0] != '\0' &&
		    config_parse_hostport(m, &cfg->metrics, why, sizeof(why)) < 0)
			config_check_err(s, "metrics.listen",
					 "bad address \"%s\": %s", m, why);
		check_replace(s, &cfg->metrics_listen, m);
	}
	if (raw->metrics != NULL) {
		config_check_u32(s, "metrics.max_connections",
				 raw->metrics->max_connections, 1, 4096,
				 &cfg->metrics_max_conns);
		/* libmicrohttpd counts its own timeout in whole seconds. */
		config_check_duration(s, "metrics.connection_timeout",
				      raw->metrics->connection_timeout, 1000,
				      3600 * 1000,
				      &cfg->metrics_conn_timeout_ms);
	}

	if (raw->spop != NULL) {
		const struct raw_spop *sp = raw->spop;
		config_check_duration(s, "spop.hello_timeout",
				      sp->hello_timeout, 10, 60 * 1000,
				      &cfg->hello_timeout_ms);
		config_check_duration(s, "spop.idle_timeout", sp->idle_timeout,
				      100, 24ull * 3600 * 1000,
				      &cfg->idle_timeout_ms);
		config_check_u32(s, "spop.max_connections", sp->max_connections,
				 0, 10000000, &cfg->max_connections);
		config_check_u32(s, "spop.coalesce_us", sp->coalesce_us, 0, 1000,
				 &cfg->coalesce_us);
	}

	if (raw->runtime_api != NULL) {
		const struct raw_runtime *rt = raw->runtime_api;
		check_socket(s, "runtime_api.socket", rt->socket,
			     &cfg->runtime_socket);
		cfg->runtime_backends =
			check_names(s, "runtime_api.backends", rt->backends,
				    rt->backends_count, true,
				    &cfg->n_runtime_backends);
		config_check_duration(s, "runtime_api.poll_interval",
				      rt->poll_interval, 10, 60 * 1000,
				      &cfg->params.poll_interval_ms);
	}

	if (raw->state != NULL) {
		check_replace(s, &cfg->state_file, raw->state->file);
		config_check_duration(s, "state.snapshot_interval",
				      raw->state->snapshot_interval, 100,
				      24ull * 3600 * 1000,
				      &cfg->params.snapshot_interval_ms);
	}

	if (raw->log_input != NULL) {
		const struct raw_log_input *li = raw->log_input;
		check_socket(s, "log_input.path", li->path,
			     &cfg->log_input_path);
		check_mode(s, "log_input.mode", li->mode, &cfg->log_input_mode);
		uint32_t port = 0;
		config_check_u32(s, "log_input.udp_port", li->udp_port, 0,
				 65535, &port);
		cfg->log_input_udp_port = (uint16_t)port;
	}

	if (raw->command_socket != NULL) {
		const struct raw_command_socket *cs = raw->command_socket;
		check_socket(s, "command_socket.path", cs->path,
			     &cfg->command_socket_path);
		check_mode(s, "command_socket.mode", cs->mode,
			   &cfg->command_socket_mode);
	}

	if (raw->key_probe != NULL)
		check_key_probe(s, raw->key_probe, cfg);
	cfg->params.key_probe = cfg->key_probe_target[0] != '\0';

	if (raw->retry_budget != NULL) {
		const struct raw_retry_budget *rb = raw->retry_budget;
		if (rb->enabled != NULL)
			cfg->retry_budget_enabled = *rb->enabled;
		config_check_double(s, "retry_budget.ratio", rb->ratio, 0, true,
				    100, &cfg->retry_budget.ratio);
		config_check_double(s, "retry_budget.min_per_second",
				    rb->min_per_second, 0, true, 100000,
				    &cfg->retry_budget.min_per_s);
		/* At least a second: ten buckets of 100 ms or more. */
		config_check_duration(s, "retry_budget.window", rb->window,
				      1000, 3600 * 1000,
				      &cfg->retry_budget.window_ms);
	}

	if (raw->engine != NULL) {
		const struct raw_engine *en = raw->engine;
		config_check_duration(s, "engine.poll_interval",
				      en->poll_interval, 10, 60 * 1000,
				      &cfg->engine_poll_interval_ms);
		config_check_duration(s, "engine.timeout", en->timeout, 10,
				      60 * 1000, &cfg->engine_timeout_ms);
		config_check_duration(s, "engine.max_age", en->max_age, 100,
				      3600 * 1000,
				      &cfg->params.engine_max_age_ms);
		config_check_duration(s, "engine.info_interval",
				      en->info_interval, 1000,
				      24ull * 3600 * 1000,
				      &cfg->engine_info_interval_ms);
	}

	if (raw->policy != NULL) {
		config_check_policy(s, raw->policy, &cfg->params);
		config_check_policy_mode(s, raw->policy, cfg);
	}
	/* After both of each pair are known, whichever one the file set. */
	config_check_policy_order(s, raw->policy, &cfg->params);

	check_endpoints(s, raw, cfg);
	check_backends(s, raw, cfg);
}
