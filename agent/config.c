/* config.c - YAML configuration: libcyaml schema, positions, semantic checks. */
#include "config.h"

#include <arpa/inet.h>
#include <cyaml/cyaml.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CONFIG_FILE_MAX (1024 * 1024)

/* ---- error lines ---------------------------------------------------- */

/* Accumulates newline-terminated lines in the caller's buffer; once full,
 * the last line says so, and counting continues so callers still know how
 * many problems there were. */
struct config_errs {
	char *buf;
	size_t cap;
	size_t len;
	unsigned count;
	bool full;
};

static void errs_init(struct config_errs *e, char *buf, size_t cap)
{
	*e = (struct config_errs){ .buf = buf, .cap = cap };
	if (cap > 0)
		buf[0] = '\0';
}

static void errs_vadd(struct config_errs *e, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static void errs_vadd(struct config_errs *e, const char *fmt, va_list ap)
{
	e->count++;
	if (e->full || e->cap == 0)
		return;
	char line[512];
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	size_t ln = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
	static const char more[] = "(more errors not shown)\n";
	if (ln + 1 + sizeof(more) > e->cap - e->len) {
		if (sizeof(more) <= e->cap - e->len) {
			memcpy(e->buf + e->len, more, sizeof(more));
			e->len += sizeof(more) - 1;
		}
		e->full = true;
		return;
	}
	memcpy(e->buf + e->len, line, ln);
	e->len += ln;
	e->buf[e->len++] = '\n';
	e->buf[e->len] = '\0';
}

static void errs_add(struct config_errs *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void errs_add(struct config_errs *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	errs_vadd(e, fmt, ap);
	va_end(ap);
}

/* Copies a one-line message into a caller buffer (snprintf semantics). */
static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- durations and addresses ------------------------------------------ */

int config_parse_duration(const char *s, uint64_t *ms)
{
	const char *p = s;
	uint64_t whole = 0, frac = 0, scale = 1;
	bool digits = false;

	while (*p >= '0' && *p <= '9') {
		if (whole > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		whole = whole * 10 + (uint64_t)(*p - '0');
		p++;
		digits = true;
	}
	if (*p == '.') {
		p++;
		bool fdigits = false;
		while (*p >= '0' && *p <= '9') {
			if (scale >= 1000000000u)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
			p++;
			fdigits = true;
		}
		if (!fdigits)
			return -EINVAL;
	}
	if (!digits)
		return -EINVAL;

	uint64_t unit;
	if (strcmp(p, "ms") == 0)
		unit = 1;
	else if (strcmp(p, "s") == 0)
		unit = 1000;
	else if (strcmp(p, "m") == 0)
		unit = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		unit = 3600 * 1000;
	else
		return -EINVAL;

	if (whole > UINT64_MAX / unit)
		return -EINVAL;
	/* frac < scale <= 1e9 and unit <= 3.6e6: the product fits. */
	if (frac * unit % scale != 0)
		return -ERANGE; /* not a whole number of milliseconds */
	uint64_t v = whole * unit, f = frac * unit / scale;
	if (v > UINT64_MAX - f)
		return -EINVAL;
	*ms = v + f;
	return 0;
}

/* Renders a duration in the largest unit that divides it ("5m", "200ms"). */
static const char *fmt_duration(char *buf, size_t cap, uint64_t ms)
{
	if (ms != 0 && ms % 3600000 == 0)
		snprintf(buf, cap, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms != 0 && ms % 60000 == 0)
		snprintf(buf, cap, "%llum", (unsigned long long)(ms / 60000));
	else if (ms != 0 && ms % 1000 == 0)
		snprintf(buf, cap, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, cap, "%llums", (unsigned long long)ms);
	return buf;
}

int config_parse_hostport(const char *s, struct config_hostport *out,
			  char *err, size_t errlen)
{
	struct config_hostport hp = { 0 };
	const char *host, *colon;
	size_t hlen;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL) {
			set_err(err, errlen, "missing ']' after the IPv6 address");
			return -EINVAL;
		}
		host = s + 1;
		hlen = (size_t)(close - host);
		if (close[1] != ':') {
			set_err(err, errlen, "expected :PORT after ']'");
			return -EINVAL;
		}
		colon = close + 1;
		hp.ipv6 = true;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL) {
			set_err(err, errlen, "expected HOST:PORT");
			return -EINVAL;
		}
		host = s;
		hlen = (size_t)(colon - s);
		if (memchr(host, ':', hlen) != NULL) {
			set_err(err, errlen,
				"an IPv6 address needs brackets: [ADDR]:PORT");
			return -EINVAL;
		}
	}
	if (hlen == 0) {
		set_err(err, errlen, "missing host before the port");
		return -EINVAL;
	}
	if (hlen >= sizeof(hp.host)) {
		set_err(err, errlen, "host too long");
		return -EINVAL;
	}
	memcpy(hp.host, host, hlen);
	hp.host[hlen] = '\0';

	/* Only numeric addresses (and two spellings for the obvious ones):
	 * the agent binds at start-up and a resolver there would block. */
	if (!hp.ipv6 && strcmp(hp.host, "localhost") == 0)
		strcpy(hp.host, "127.0.0.1");
	else if (!hp.ipv6 && strcmp(hp.host, "*") == 0)
		strcpy(hp.host, "0.0.0.0");
	unsigned char addr[16];
	if (inet_pton(hp.ipv6 ? AF_INET6 : AF_INET, hp.host, addr) != 1) {
		set_err(err, errlen, "\"%s\" is not a numeric %s address",
			hp.host, hp.ipv6 ? "IPv6" : "IPv4");
		return -EINVAL;
	}

	const char *p = colon + 1;
	unsigned long port = 0;
	if (*p == '\0') {
		set_err(err, errlen, "missing port");
		return -EINVAL;
	}
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || port > 65535) {
			set_err(err, errlen, "bad port \"%s\"", colon + 1);
			return -EINVAL;
		}
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port == 0 || port > 65535) {
		set_err(err, errlen, "port must be between 1 and 65535");
		return -EINVAL;
	}
	hp.port = (uint16_t)port;
	*out = hp;
	return 0;
}

int config_parse_listen(const char *s, struct config_listen *out, char *err,
			size_t errlen)
{
	struct config_listen l = { 0 };

	if (strncmp(s, "unix:", 5) == 0) {
		const char *p = s + 5;
		const char *comma = strchr(p, ',');
		size_t plen = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (plen == 0) {
			set_err(err, errlen, "unix: needs a socket path");
			return -EINVAL;
		}
		if (plen > CONFIG_UNIX_PATH_MAX) {
			set_err(err, errlen,
				"socket path longer than %d bytes",
				CONFIG_UNIX_PATH_MAX);
			return -EINVAL;
		}
		l.kind = CONFIG_LISTEN_UNIX;
		memcpy(l.path, p, plen);
		l.mode = CONFIG_DEFAULT_SOCKET_MODE;
		while (comma != NULL) {
			const char *opt = comma + 1;
			comma = strchr(opt, ',');
			size_t olen = comma != NULL ? (size_t)(comma - opt)
						    : strlen(opt);
			if (olen <= 5 || memcmp(opt, "mode=", 5) != 0) {
				set_err(err, errlen,
					"unknown option \"%.*s\" (expected mode=0660)",
					(int)olen, opt);
				return -EINVAL;
			}
			unsigned mode = 0;
			bool ok = olen - 5 <= 4;
			for (size_t i = 5; i < olen && ok; i++) {
				ok = opt[i] >= '0' && opt[i] <= '7';
				mode = mode * 8 + (unsigned)(opt[i] - '0');
			}
			if (!ok || mode > 0777) {
				set_err(err, errlen,
					"mode must be octal permission bits, e.g. mode=0660");
				return -EINVAL;
			}
			l.mode = mode;
		}
		snprintf(l.text, sizeof(l.text), "unix:%s,mode=%04o", l.path,
			 l.mode);
	} else if (strncmp(s, "tcp:", 4) == 0) {
		struct config_hostport hp;
		int r = config_parse_hostport(s + 4, &hp, err, errlen);
		if (r < 0)
			return r;
		l.kind = CONFIG_LISTEN_TCP;
		memcpy(l.host, hp.host, sizeof(l.host));
		l.port = hp.port;
		l.ipv6 = hp.ipv6;
		snprintf(l.text, sizeof(l.text), hp.ipv6 ? "tcp:[%s]:%u" : "tcp:%s:%u",
			 l.host, (unsigned)l.port);
	} else {
		set_err(err, errlen,
			"expected unix:PATH[,mode=0660] or tcp:HOST:PORT");
		return -EINVAL;
	}
	*out = l;
	return 0;
}

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
	for (size_t i = 0; i < cfg->n_endpoints; i++) {
		struct config_endpoint *ep = &cfg->endpoints[i];
		free(ep->backend);
		free(ep->server);
		free_strv(ep->models, ep->n_models);
		free_strv(ep->keys, ep->n_keys);
	}
	free(cfg->endpoints);
	*cfg = (struct config){ 0 };
}

int config_init(struct config *cfg)
{
	char err[128];
	*cfg = (struct config){
		.log_level = LOG_LEVEL_INFO,
		.max_frame_size = CONFIG_DEFAULT_MAX_FRAME_SIZE,
	};
	core_params_defaults(&cfg->params);
	cfg->listen = calloc(1, sizeof(*cfg->listen));
	cfg->metrics_listen = strdup(CONFIG_DEFAULT_METRICS);
	cfg->runtime_socket = strdup(CONFIG_DEFAULT_RUNTIME_SOCKET);
	cfg->state_file = strdup(CONFIG_DEFAULT_STATE_FILE);
	cfg->log_input_path = strdup(CONFIG_DEFAULT_LOG_INPUT);
	cfg->log_input_mode = CONFIG_DEFAULT_SOCKET_MODE;
	if (cfg->listen == NULL || cfg->metrics_listen == NULL ||
	    cfg->runtime_socket == NULL || cfg->state_file == NULL ||
	    cfg->log_input_path == NULL) {
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
		set_err(err, errlen, "no listen address");
		return -EINVAL;
	}
	struct config_listen *l = calloc(n, sizeof(*l));
	if (l == NULL) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		char why[160];
		if (config_parse_listen(addrs[i], &l[i], why, sizeof(why)) < 0) {
			set_err(err, errlen, "%s: %s", addrs[i], why);
			free(l);
			return -EINVAL;
		}
	}
	free(cfg->listen);
	cfg->listen = l;
	cfg->n_listen = n;
	return 0;
}

/* ---- the schema ------------------------------------------------------- */

/* What libcyaml fills: every field optional, numbers behind pointers so an
 * absent one is NULL, durations as strings (checked in the semantic pass,
 * like every range, so that all such problems are reported at once). */
struct raw_metrics {
	char *listen;
};

struct raw_runtime {
	char *socket;
	char **backends;
	unsigned backends_count;
	char *poll_interval;
};

struct raw_state {
	char *file;
	char *snapshot_interval;
};

struct raw_log_input {
	char *path;
	char *mode;
	double *udp_port;
};

struct raw_policy {
	char *affinity_ttl;
	double *affinity_max_entries;
	char **identity_ladder;
	unsigned identity_ladder_count;
	double *ewma_alpha;
	double *cold_start_samples;
	char *prior_ttfb;
	char *idle_reset;
	double *sticky_tolerance;
	double *load_factor;
	double *load_floor;
	double *cost_weight_per_ms;
	char *breaker_window;
	double *breaker_min_requests;
	double *breaker_failure_ratio;
	double *breaker_consecutive;
	char *breaker_cooldown;
	char *breaker_cooldown_max;
	double *half_open_probes;
	char *rate_limit_cooldown;
	char *rate_limit_cooldown_max;
	char *dead_key_retry;
	double *model_mismatch_404s;
	char *score_by;
	char *session_scope;
};

struct raw_endpoint {
	char *backend;
	char *server;
	char **models;
	unsigned models_count;
	double *weight;
	double *cost_per_mtok;
	char **keys;
	unsigned keys_count;
};

struct raw_config {
	char *log_level;
	char **listen;
	unsigned listen_count;
	double *max_frame_size;
	struct raw_metrics *metrics;
	struct raw_runtime *runtime_api;
	struct raw_state *state;
	struct raw_log_input *log_input;
	struct raw_policy *policy;
	struct raw_endpoint *endpoints;
	unsigned endpoints_count;
};

#define OPT CYAML_FLAG_OPTIONAL
#define OPT_NULL (CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER_NULL)
#define STR(key, st, m) CYAML_FIELD_STRING_PTR(key, OPT, st, m, 0, CYAML_UNLIMITED)
/* Integers are read as numbers: libcyaml 1.3 reads "1.5" as the integer 1,
 * so the semantic pass checks they are whole instead. */
#define INT(key, st, m) CYAML_FIELD_FLOAT_PTR(key, OPT | CYAML_FLAG_STRICT, st, m)
#define FLT(key, st, m) CYAML_FIELD_FLOAT_PTR(key, OPT | CYAML_FLAG_STRICT, st, m)
#define STRSEQ(key, st, m) \
	CYAML_FIELD_SEQUENCE(key, OPT_NULL, st, m, &str_entry, 0, CYAML_UNLIMITED)

static const cyaml_schema_value_t str_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static const cyaml_schema_field_t metrics_fields[] = {
	STR("listen", struct raw_metrics, listen),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t runtime_fields[] = {
	STR("socket", struct raw_runtime, socket),
	STRSEQ("backends", struct raw_runtime, backends),
	STR("poll_interval", struct raw_runtime, poll_interval),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t state_fields[] = {
	STR("file", struct raw_state, file),
	STR("snapshot_interval", struct raw_state, snapshot_interval),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t log_input_fields[] = {
	STR("path", struct raw_log_input, path),
	STR("mode", struct raw_log_input, mode),
	INT("udp_port", struct raw_log_input, udp_port),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t policy_fields[] = {
	STR("affinity_ttl", struct raw_policy, affinity_ttl),
	INT("affinity_max_entries", struct raw_policy, affinity_max_entries),
	STRSEQ("identity_ladder", struct raw_policy, identity_ladder),
	FLT("ewma_alpha", struct raw_policy, ewma_alpha),
	INT("cold_start_samples", struct raw_policy, cold_start_samples),
	STR("prior_ttfb", struct raw_policy, prior_ttfb),
	STR("idle_reset", struct raw_policy, idle_reset),
	FLT("sticky_tolerance", struct raw_policy, sticky_tolerance),
	FLT("load_factor", struct raw_policy, load_factor),
	INT("load_floor", struct raw_policy, load_floor),
	FLT("cost_weight_per_ms", struct raw_policy, cost_weight_per_ms),
	STR("breaker_window", struct raw_policy, breaker_window),
	INT("breaker_min_requests", struct raw_policy, breaker_min_requests),
	FLT("breaker_failure_ratio", struct raw_policy, breaker_failure_ratio),
	INT("breaker_consecutive", struct raw_policy, breaker_consecutive),
	STR("breaker_cooldown", struct raw_policy, breaker_cooldown),
	STR("breaker_cooldown_max", struct raw_policy, breaker_cooldown_max),
	INT("half_open_probes", struct raw_policy, half_open_probes),
	STR("rate_limit_cooldown", struct raw_policy, rate_limit_cooldown),
	STR("rate_limit_cooldown_max", struct raw_policy, rate_limit_cooldown_max),
	STR("dead_key_retry", struct raw_policy, dead_key_retry),
	INT("model_mismatch_404s", struct raw_policy, model_mismatch_404s),
	STR("score_by", struct raw_policy, score_by),
	STR("session_scope", struct raw_policy, session_scope),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t endpoint_fields[] = {
	STR("backend", struct raw_endpoint, backend),
	STR("server", struct raw_endpoint, server),
	STRSEQ("models", struct raw_endpoint, models),
	FLT("weight", struct raw_endpoint, weight),
	FLT("cost_per_mtok", struct raw_endpoint, cost_per_mtok),
	STRSEQ("keys", struct raw_endpoint, keys),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t endpoint_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_endpoint,
			    endpoint_fields),
};

static const cyaml_schema_field_t top_fields[] = {
	STR("log_level", struct raw_config, log_level),
	STRSEQ("listen", struct raw_config, listen),
	INT("max_frame_size", struct raw_config, max_frame_size),
	CYAML_FIELD_MAPPING_PTR("metrics", OPT_NULL, struct raw_config,
				metrics, metrics_fields),
	CYAML_FIELD_MAPPING_PTR("runtime_api", OPT_NULL, struct raw_config,
				runtime_api, runtime_fields),
	CYAML_FIELD_MAPPING_PTR("state", OPT_NULL, struct raw_config, state,
				state_fields),
	CYAML_FIELD_MAPPING_PTR("log_input", OPT_NULL, struct raw_config,
				log_input, log_input_fields),
	CYAML_FIELD_MAPPING_PTR("policy", OPT_NULL, struct raw_config, policy,
				policy_fields),
	CYAML_FIELD_SEQUENCE("endpoints", OPT_NULL, struct raw_config,
			     endpoints, &endpoint_entry, 0, CYAML_UNLIMITED),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t top_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_config, top_fields),
};

/* ---- where libcyaml stopped ------------------------------------------- */

/* libcyaml 1.3 reports its first error through the log callback: a message,
 * then a backtrace of "in mapping field 'x' (line: L, column: C)" lines.
 * Those positions are where the enclosing values started or the previous
 * event was, not where the offending token is. Its debug log also names
 * every YAML event it pulls ("Load: Event: ..."), one per libyaml event, so
 * counting them gives the index of the event it failed on, and a libyaml
 * pass over the same bytes turns that index into an exact line and column. */
struct cy_capture {
	unsigned events;      /* events pulled until the first error */
	bool failed;          /* an error message was seen */
	char msg[320];        /* the first error message, "Load: " removed */
	char segs[8][72];     /* backtrace path, innermost first */
	unsigned nsegs;
	unsigned bt_line, bt_col; /* innermost backtrace position, 1-based */
	bool in_backtrace;
};

static void cy_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
	__attribute__((format(printf, 3, 0)));
static void cy_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
	struct cy_capture *c = ctx;
	char line[320];
	vsnprintf(line, sizeof(line), fmt, args);
	size_t n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';

	if (!c->failed) {
		if (strncmp(line, "Load: Event: ", 13) == 0)
			c->events++;
		if (level >= CYAML_LOG_ERROR &&
		    strncmp(line, "Load: Backtrace", 15) != 0) {
			const char *m = strncmp(line, "Load: ", 6) == 0 ? line + 6
									: line;
			snprintf(c->msg, sizeof(c->msg), "%s", m);
			c->failed = true;
		}
		return;
	}
	if (level < CYAML_LOG_ERROR)
		return;
	if (strncmp(line, "Load: Backtrace", 15) == 0) {
		c->in_backtrace = true;
		return;
	}
	if (!c->in_backtrace || strncmp(line, "  in ", 5) != 0)
		return;

	const char *pos = strstr(line, "(line: ");
	if (pos != NULL && c->bt_line == 0) {
		unsigned l, col;
		if (sscanf(pos, "(line: %u, column: %u)", &l, &col) == 2) {
			c->bt_line = l;
			c->bt_col = col;
		}
	}
	if (c->nsegs >= sizeof(c->segs) / sizeof(c->segs[0]))
		return;
	const char *q;
	if ((q = strstr(line, "field '")) != NULL) {
		q += 7;
		const char *e = strchr(q, '\'');
		if (e != NULL)
			snprintf(c->segs[c->nsegs++], sizeof(c->segs[0]), "%.*s",
				 (int)(e - q), q);
	} else if ((q = strstr(line, "entry '")) != NULL) {
		/* libcyaml counts entries from 1; paths here count from 0. */
		unsigned idx;
		if (sscanf(q + 7, "%u", &idx) == 1 && idx > 0)
			snprintf(c->segs[c->nsegs++], sizeof(c->segs[0]),
				 "[%u]", idx - 1);
	}
}

/* Joins the backtrace segments outermost first: endpoints[1].weight. */
static void cy_path(const struct cy_capture *c, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = '\0';
	for (unsigned i = c->nsegs; i-- > 0;) {
		const char *s = c->segs[i];
		int n = snprintf(buf + o, cap - o, "%s%s",
				 (o > 0 && s[0] != '[') ? "." : "", s);
		if (n < 0 || (size_t)n >= cap - o)
			break;
		o += (size_t)n;
	}
}

/* Rewrites libcyaml's common messages in the words of a config file. */
static void cy_message(const char *msg, char *buf, size_t cap)
{
	static const struct {
		const char *from, *to;
	} kinds[] = {
		{ "STRING", "a string" },	{ "INT", "an integer" },
		{ "UINT", "an integer" },	{ "FLOAT", "a number" },
		{ "BOOL", "a boolean" },	{ "MAPPING", "a mapping" },
		{ "SEQUENCE", "a list" },	{ "SCALAR", "a scalar value" },
		{ "SEQUENCE_START", "a list" }, { "MAPPING_START", "a mapping" },
		{ "ALIAS", "an alias" },
	};
	char want[32], got[32];
	if (strncmp(msg, "Unexpected key: ", 16) == 0) {
		snprintf(buf, cap, "unknown key \"%s\"", msg + 16);
		return;
	}
	if (sscanf(msg, "Expecting %31[A-Z_], got event: %31[A-Z_]", want,
		   got) == 2) {
		const char *w = want, *g = got;
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
			if (strcmp(want, kinds[i].from) == 0)
				w = kinds[i].to;
			if (strcmp(got, kinds[i].from) == 0)
				g = kinds[i].to;
		}
		snprintf(buf, cap, "expected %s, found %s", w, g);
		return;
	}
	if (strncmp(msg, "Invalid FLOAT value: ", 21) == 0) {
		snprintf(buf, cap, "\"%s\" is not a number", msg + 21);
		return;
	}
	if (strncmp(msg, "Mapping field already seen: ", 28) == 0) {
		snprintf(buf, cap, "duplicate key \"%s\"", msg + 28);
		return;
	}
	snprintf(buf, cap, "%s", msg);
}

/* The libyaml pre-pass: reports a syntax error with its exact position
 * (returns -EINVAL), notes whether aliases occur (their replay would skew
 * the event count), and can find the start of the n-th event (1-based). */
struct prepass {
	bool has_alias;
	unsigned want;      /* event index to locate, 0 for none */
	unsigned line, col; /* its start, 1-based */
};

static int prepass_run(const char *name, const char *data, size_t len,
		       struct prepass *pp, struct config_errs *errs)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	unsigned n = 0;
	int rc = 0;

	if (!yaml_parser_initialize(&parser)) {
		errs_add(errs, "%s: out of memory", name);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	for (;;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			unsigned long l = (unsigned long)parser.problem_mark.line + 1;
			unsigned long c = (unsigned long)parser.problem_mark.column + 1;
			const char *problem = parser.problem != NULL
						      ? parser.problem
						      : "syntax error";
			if (parser.context != NULL)
				errs_add(errs, "%s:%lu:%lu: %s (%s at line %lu)",
					 name, l, c, problem, parser.context,
					 (unsigned long)parser.context_mark.line + 1);
			else
				errs_add(errs, "%s:%lu:%lu: %s", name, l, c,
					 problem);
			rc = -EINVAL;
			break;
		}
		n++;
		if (ev.type == YAML_ALIAS_EVENT)
			pp->has_alias = true;
		if (n == pp->want) {
			pp->line = (unsigned)ev.start_mark.line + 1;
			pp->col = (unsigned)ev.start_mark.column + 1;
		}
		yaml_event_type_t t = ev.type;
		yaml_event_delete(&ev);
		if (t == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&parser);
	return rc;
}

/* ---- the semantic pass ------------------------------------------------ */

struct sem {
	const char *name; /* file name for messages */
	struct config_errs *errs;
	bool oom;
};

static void sem_err(struct sem *s, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void sem_err(struct sem *s, const char *path, const char *fmt, ...)
{
	char msg[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errs_add(s->errs, "%s: %s: %s", s->name, path, msg);
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
			fmt_duration(a, sizeof(a), min_ms),
			fmt_duration(b, sizeof(b), max_ms), raw);
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

/* HAProxy's own charset for proxy and server names. */
static bool name_is_haproxy(const char *v)
{
	if (v[0] == '\0')
		return false;
	for (const char *p = v; *p != '\0'; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' ||
			  c == '.' || c == ':';
		if (!ok)
			return false;
	}
	return true;
}

/* Printable ASCII without spaces: key ids end up as HAProxy map keys. */
static bool name_is_printable(const char *v)
{
	if (v[0] == '\0')
		return false;
	for (const char *p = v; *p != '\0'; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return false;
	return true;
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
		else if (haproxy_charset && !name_is_haproxy(x))
			sem_err(s, path,
				"\"%s\" may contain only letters, digits, '-', '_', '.' and ':'",
				x);
		else if (!haproxy_charset && !name_is_printable(x))
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
	sem_double(s, "policy.load_factor", rp->load_factor, 1, true, 1000,
		   &p->load_factor);
	sem_u32(s, "policy.load_floor", rp->load_floor, 0, 1000000,
		&p->load_floor);
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
			else if (!name_is_haproxy(v))
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

		if (re->backend == NULL || re->server == NULL)
			continue;
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
		if (li->mode != NULL) {
			const char *m = li->mode;
			unsigned v = 0;
			bool ok = m[0] != '\0' && strlen(m) <= 4;
			for (const char *q = m; ok && *q != '\0'; q++) {
				ok = *q >= '0' && *q <= '7';
				v = v * 8 + (unsigned)(*q - '0');
			}
			if (!ok || v > 0777)
				sem_err(s, "log_input.mode",
					"\"%s\" is not octal permission bits (e.g. \"0660\")",
					m);
			else
				cfg->log_input_mode = v;
		}
		uint32_t port = 0;
		sem_u32(s, "log_input.udp_port", li->udp_port, 0, 65535, &port);
		cfg->log_input_udp_port = (uint16_t)port;
	}

	if (raw->policy != NULL)
		sem_policy(s, raw->policy, &cfg->params);
	/* Checked here, after both are known, whichever one the file set. */
	if (cfg->params.breaker_cooldown_ms > cfg->params.breaker_cooldown_max_ms)
	{
		char a[32], b[32];
		sem_err(s, "policy.breaker_cooldown",
			"%s must not exceed policy.breaker_cooldown_max (%s)",
			fmt_duration(a, sizeof(a), cfg->params.breaker_cooldown_ms),
			fmt_duration(b, sizeof(b),
				     cfg->params.breaker_cooldown_max_ms));
	}
	if (cfg->params.rate_limit_cooldown_ms >
	    cfg->params.rate_limit_cooldown_max_ms) {
		char a[32], b[32];
		sem_err(s, "policy.rate_limit_cooldown",
			"%s must not exceed policy.rate_limit_cooldown_max (%s)",
			fmt_duration(a, sizeof(a), cfg->params.rate_limit_cooldown_ms),
			fmt_duration(b, sizeof(b),
				     cfg->params.rate_limit_cooldown_max_ms));
	}

	sem_endpoints(s, raw, cfg);
}

/* ---- loading ---------------------------------------------------------- */

int config_load_data(struct config *cfg, const char *name, const char *data,
		     size_t len, char *err, size_t errlen)
{
	struct config_errs errs;
	struct prepass pp = { 0 };
	errs_init(&errs, err, errlen);

	int r = prepass_run(name, data, len, &pp, &errs);
	if (r < 0)
		return r;

	struct cy_capture cap = { 0 };
	const cyaml_config_t cy = {
		.log_fn = cy_log,
		.log_ctx = &cap,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_DEBUG, /* for the event count */
		.flags = CYAML_CFG_DEFAULT,
	};
	struct raw_config *raw = NULL;
	cyaml_err_t cr = cyaml_load_data((const uint8_t *)data, len, &cy,
					 &top_schema, (cyaml_data_t **)&raw,
					 NULL);
	if (cr != CYAML_OK) {
		unsigned line = cap.bt_line, col = cap.bt_col;
		if (cap.events > 0 && !pp.has_alias) {
			struct prepass at = { .want = cap.events };
			struct config_errs none;
			errs_init(&none, NULL, 0);
			if (prepass_run(name, data, len, &at, &none) == 0 &&
			    at.line > 0) {
				line = at.line;
				col = at.col;
			}
		}
		char path[256], msg[320];
		cy_path(&cap, path, sizeof(path));
		cy_message(cap.failed ? cap.msg : cyaml_strerror(cr), msg,
			   sizeof(msg));
		if (cr == CYAML_ERR_OOM) {
			errs_add(&errs, "%s: out of memory", name);
			return -ENOMEM;
		}
		errs_add(&errs, "%s:%u:%u: %s%s%s", name, line, col, path,
			 path[0] != '\0' ? ": " : "", msg);
		return -EINVAL;
	}

	struct config next;
	r = config_init(&next);
	if (r < 0) {
		cyaml_free(&cy, &top_schema, raw, 0);
		errs_add(&errs, "%s: out of memory", name);
		return r;
	}
	struct sem s = { .name = name, .errs = &errs };
	if (raw != NULL) /* NULL: an empty document, all defaults */
		sem_run(&s, raw, &next);
	cyaml_free(&cy, &top_schema, raw, 0);

	if (s.oom) {
		errs_add(&errs, "%s: out of memory", name);
		config_finish(&next);
		return -ENOMEM;
	}
	if (errs.count > 0) {
		config_finish(&next);
		return -EINVAL;
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
		set_err(err, errlen, "%s: %s\n", path, strerror(e));
		return -e;
	}
	char *data = malloc(CONFIG_FILE_MAX + 1);
	if (data == NULL) {
		fclose(f);
		set_err(err, errlen, "%s: out of memory\n", path);
		return -ENOMEM;
	}
	size_t len = fread(data, 1, CONFIG_FILE_MAX + 1, f);
	int rerr = ferror(f) ? errno : 0;
	fclose(f);
	int r;
	if (rerr != 0) {
		set_err(err, errlen, "%s: %s\n", path, strerror(rerr));
		r = -rerr;
	} else if (len > CONFIG_FILE_MAX) {
		set_err(err, errlen, "%s: larger than %d bytes\n", path,
			CONFIG_FILE_MAX);
		r = -EFBIG;
	} else {
		r = config_load_data(cfg, path, data, len, err, errlen);
	}
	free(data);
	return r;
}
