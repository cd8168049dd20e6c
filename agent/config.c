/* config.c - the configuration: its defaults, who owns what, and loading (read, check, swap in). */
#include "config.h"
#include "config_check.h"
#include "config_errs.h"
#include "config_parse.h"
#include "config_schema.h"
#include "config_yaml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		.coalesce_us = CONFIG_DEFAULT_COALESCE_US,
		.metrics_max_conns = CONFIG_DEFAULT_METRICS_MAX_CONNS,
		.metrics_conn_timeout_ms = CONFIG_DEFAULT_METRICS_CONN_TIMEOUT_MS,
	};
	core_params_defaults(&cfg->params);
	/* The owned strings, each replaced by the file's value if it has one. */
	const struct {
		char **dst;
		const char *v;
	} strs[] = {
		{ &cfg->metrics_listen, CONFIG_DEFAULT_METRICS },
		{ &cfg->runtime_socket, CONFIG_DEFAULT_RUNTIME_SOCKET },
		{ &cfg->state_file, CONFIG_DEFAULT_STATE_FILE },
		{ &cfg->log_input_path, CONFIG_DEFAULT_LOG_INPUT },
		{ &cfg->command_socket_path, CONFIG_DEFAULT_COMMAND_SOCKET },
		{ &cfg->key_probe_target, "" },
		{ &cfg->key_probe_method, CONFIG_DEFAULT_PROBE_METHOD },
		{ &cfg->key_probe_path, CONFIG_DEFAULT_PROBE_PATH },
	};
	bool oom = false;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		*strs[i].dst = strdup(strs[i].v);
		oom = oom || *strs[i].dst == NULL;
	}
	cfg->listen = calloc(1, sizeof(*cfg->listen));
	cfg->log_input_mode = CONFIG_DEFAULT_SOCKET_MODE;
	cfg->command_socket_mode = CONFIG_DEFAULT_SOCKET_MODE;
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
	if (oom || cfg->listen == NULL) {
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

const char *config_mode_name(enum config_mode m)
{
	static const char *const names[CONFIG_MODE_COUNT] = {
		[CONFIG_MODE_ROUTE] = "route",
		[CONFIG_MODE_SHADOW] = "shadow",
	};
	return (unsigned)m < CONFIG_MODE_COUNT ? names[m] : NULL;
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
	struct config_check s = { .name = name, .errs = &errs, .pos = &at };
	/* After a syntax error or a bound the rest of the file is unknown:
	 * its defaults would only add wrong complaints. NULL: an empty
	 * document, all defaults. */
	if (raw != NULL && !stopped)
		config_check_run(&s, raw, &next);
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
