/* main.c - warmlane: command line, configuration, signals, the event loop. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config.h"
#include "log.h"
#include "logsrc.h"
#include "metrics.h"
#include "runtime.h"
#include "sdnotify.h"
#include "server.h"
#include "snapshot.h"
#include "warmlane_version.h"

/* How long a stopping agent lets connections finish before closing them. */
#define MAIN_GRACE_MS 2000
#define MAIN_MAX_LISTEN 16

enum {
	EXIT_USAGE = 2,
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: warmlane [--config FILE] [--listen ADDR]... [--log-level LEVEL]\n"
		"       warmlane --check-config FILE\n"
		"       warmlane --version | --help\n"
		"\n"
		"HAProxy SPOE agent that routes LLM inference requests.\n"
		"\n"
		"  -c, --config FILE        YAML configuration (default: built-in defaults)\n"
		"  -l, --listen ADDR        where HAProxy connects, repeatable; replaces the\n"
		"                           file's list: unix:PATH[,mode=0660] or tcp:HOST:PORT\n"
		"                           (default unix:/var/lib/haproxy/warmlane/spoa.sock)\n"
		"  -L, --log-level LEVEL    error, warn, info or debug (overrides the file)\n"
		"      --check-config FILE  check FILE, print every problem, exit non-zero\n"
		"                           if there is one\n"
		"  -V, --version            print the version\n"
		"  -h, --help               print this help\n"
		"\n"
		"Logs go to stderr as logfmt. SIGTERM or SIGINT stops the agent after\n"
		"answering what it has read (at most %d ms). SIGHUP reloads the\n"
		"configuration file (a bad one is refused, the running one kept).\n",
		MAIN_GRACE_MS);
}

struct app {
	uv_loop_t *loop;
	struct config *cfg;      /* the running configuration (main's) */
	const char *config_path; /* NULL: defaults, nothing to reload */
	/* Command-line options that override the file, at start and at each
	 * reload. */
	const char *const *cli_listen;
	size_t n_cli_listen;
	bool cli_level;
	enum log_level cli_lvl;
	struct server srv;
	struct metrics *metrics; /* NULL: metrics.listen is "" */
	struct runtime *runtime; /* NULL until started */
	struct snapshot_writer snap; /* zeroed: snapshot_writer_stop is a no-op */
	struct snapshot_stats snap_stats;
	struct sdnotify sd;     /* zeroed: sdnotify_stop too */
	struct logsrc logsrc;   /* zeroed: logsrc_stop too */
	bool restored;          /* the snapshot was loaded (or there was none) */
	bool save_on_exit;      /* stopped by a signal: write the snapshot */
	uv_signal_t sig_term, sig_int, sig_hup;
};

/* ---- metrics and runtime poller, replaceable by a reload ----------------- */

static void main_metrics_free(struct metrics *m, void *arg)
{
	(void)arg;
	free(m);
}

/* Stops m and frees it once its handles are closed. Accepts NULL. */
static void main_metrics_release(struct metrics *m)
{
	if (m != NULL)
		metrics_stop(m, main_metrics_free, NULL);
}

/* A metrics server on cfg's address, or NULL with *rc 0 when disabled. */
static struct metrics *main_metrics_start(struct app *app,
					  const struct config *cfg, int *rc,
					  char *err, size_t errlen)
{
	*rc = 0;
	if (cfg->metrics_listen == NULL || cfg->metrics_listen[0] == '\0')
		return NULL;
	struct metrics *m = calloc(1, sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = metrics_start(m, app->loop, &cfg->metrics, &app->srv, err, errlen);
	if (*rc < 0) {
		main_metrics_release(m);
		return NULL;
	}
	return m;
}

/* A stopped poller is freed once libuv has finished closing its handles
 * (close callbacks of handles closed from a close callback run a loop
 * turn later, after the timers): a timer looks for them in the loop. */
struct main_reap {
	uv_timer_t timer;
	struct runtime *rt;
};

struct main_reap_walk {
	const struct runtime *rt;
	bool found;
};

static void main_reap_look(uv_handle_t *h, void *arg)
{
	struct main_reap_walk *w = arg;
	if (h == (const uv_handle_t *)&w->rt->timer ||
	    h == (const uv_handle_t *)&w->rt->pipe)
		w->found = true;
}

static void main_reap_closed(uv_handle_t *h)
{
	free(container_of(h, struct main_reap, timer));
}

static void main_reap_try(uv_timer_t *t)
{
	struct main_reap *r = container_of(t, struct main_reap, timer);
	struct main_reap_walk w = { r->rt, false };
	uv_walk(t->loop, main_reap_look, &w);
	if (w.found)
		return; /* again at the next tick */
	runtime_finish(r->rt);
	free(r->rt);
	r->rt = NULL;
	uv_timer_stop(t);
	uv_close((uv_handle_t *)t, main_reap_closed);
}

static void main_runtime_release(struct app *app, struct runtime *rt)
{
	if (rt == NULL)
		return;
	runtime_stop(rt);
	struct main_reap *r = calloc(1, sizeof(*r));
	if (r == NULL || uv_timer_init(app->loop, &r->timer) < 0) {
		free(r);
		return; /* leaked rather than freed under a pending callback */
	}
	r->rt = rt;
	uv_timer_start(&r->timer, main_reap_try, 0, 10);
}

/* ---- the snapshot: loaded once HAProxy's servers are known --------------- */

static void main_restore(struct app *app)
{
	if (app->restored)
		return;
	app->restored = true;
	uv_update_time(app->loop);
	snapshot_restore(app->srv.route.core, app->cfg->state_file,
			 uv_now(app->loop), &app->snap_stats);
	/* Writes only after the load: an earlier one would replace the file
	 * with a cold map. */
	int r = snapshot_writer_start(&app->snap, app->loop, app->srv.route.core,
				      app->cfg->state_file,
				      app->cfg->params.snapshot_interval_ms,
				      &app->snap_stats);
	if (r < 0)
		log_error("cannot start periodic snapshots", "error=%s",
			  uv_err_name(r));
}

static void main_on_first_poll(struct runtime *rt, bool ok, void *arg)
{
	struct app *app = arg;
	(void)rt;
	log_debug("first runtime-API poll over: loading the snapshot",
		  "ok=%s", ok ? "true" : "false");
	if (!app->srv.stopping)
		main_restore(app);
}

/* Creates and starts a poller on app->cfg. With restore set, the snapshot
 * is loaded after its first poll (at once when polling is off or cannot
 * start). */
static void main_runtime_start(struct app *app, bool restore)
{
	struct runtime *rt = calloc(1, sizeof(*rt));
	int r = rt != NULL ? runtime_init(rt, app->loop, &app->srv.route,
					  &app->srv.stats, app->cfg)
			   : -ENOMEM;
	if (r == 0 && rt->enabled) {
		if (restore) {
			rt->on_first_poll = main_on_first_poll;
			rt->on_first_poll_arg = app;
		}
		r = runtime_start(rt);
	}
	if (r < 0) {
		log_error("cannot start the runtime API poller; routing on configured endpoints",
			  "error=%s", uv_err_name(r));
		if (rt != NULL) {
			runtime_stop(rt);
			runtime_finish(rt);
		}
		free(rt);
		rt = NULL;
	}
	app->runtime = rt;
	if (restore && (rt == NULL || !rt->enabled))
		main_restore(app);
}

/* ---- stopping ------------------------------------------------------------- */

static void main_on_stopped(struct server *s, void *arg)
{
	struct app *app = arg;
	(void)s;
	/* Scrapes are answered until the SPOP side is done. */
	main_metrics_release(app->metrics);
	app->metrics = NULL;
	main_runtime_release(app, app->runtime);
	app->runtime = NULL;
	snapshot_writer_stop(&app->snap);
	sdnotify_stop(&app->sd);
	logsrc_stop(&app->logsrc);
	/* The signal handles are what keeps the loop running now. */
	uv_close((uv_handle_t *)&app->sig_term, NULL);
	uv_close((uv_handle_t *)&app->sig_int, NULL);
	uv_close((uv_handle_t *)&app->sig_hup, NULL);
}

/* ---- reload (SIGHUP) ------------------------------------------------------ */

/* Logs every line of a config error text, one log line each. */
static void main_log_errors(const char *err)
{
	char q[1100];
	for (const char *p = err; *p != '\0';) {
		size_t n = strcspn(p, "\n");
		if (n > 0)
			log_error("configuration error", "error=%s",
				  log_quote(q, sizeof(q), p, n));
		p += n;
		if (*p == '\n')
			p++;
	}
}

static bool main_str_eq(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

static const struct config_endpoint *main_cfg_find(const struct config *cfg,
						   const char *backend,
						   const char *server)
{
	for (size_t i = 0; i < cfg->n_endpoints; i++)
		if (strcmp(cfg->endpoints[i].backend, backend) == 0 &&
		    strcmp(cfg->endpoints[i].server, server) == 0)
			return &cfg->endpoints[i];
	return NULL;
}

/* The key id of ep equal to key ("" or NULL: keyless), as ep's own
 * string; "" for keyless; NULL when ep has no such key. */
static const char *main_cfg_key(const struct config_endpoint *ep,
				const char *key)
{
	if (key == NULL || key[0] == '\0')
		return ep->n_keys == 0 ? "" : NULL;
	for (size_t k = 0; k < ep->n_keys; k++)
		if (strcmp(ep->keys[k], key) == 0)
			return ep->keys[k];
	return NULL;
}

struct main_ep_changes {
	unsigned added, updated, removed, failed;
};

/* Makes the core's endpoints follow next: an endpoint of a server in next
 * takes next's metadata (keeping its statistics and map entries), one of
 * a key id or a server the new file dropped leaves, one next adds joins.
 * Servers that came from HAProxy's runtime API alone (in neither file)
 * stay as they are. */
static void main_reload_endpoints(struct app *app, const struct config *old,
				  const struct config *next,
				  struct main_ep_changes *ch)
{
	struct core *c = app->srv.route.core;
	uint64_t now = uv_now(app->loop);
	int nexti;
	for (int i = core_endpoint_next(c, -1); i >= 0; i = nexti) {
		nexti = core_endpoint_next(c, i);
		struct core_endpoint_info info;
		if (core_endpoint_info(c, i, now, &info) < 0)
			continue;
		const struct config_endpoint *ne =
			main_cfg_find(next, info.backend, info.server);
		const char *key = ne != NULL ? main_cfg_key(ne, info.key_id) : NULL;
		if (ne != NULL && key != NULL) {
			struct core_endpoint_config ec = {
				.backend = ne->backend, .server = ne->server,
				.key_id = key[0] != '\0' ? key : NULL,
				.models = (const char *const *)ne->models,
				.n_models = ne->n_models, .weight = ne->weight,
				.cost_per_mtok = ne->cost_per_mtok,
			};
			int r = core_endpoint_update(c, i, &ec);
			if (r < 0) {
				ch->failed++;
				log_error("endpoint not updated", "backend=%s server=%s error=%s",
					  ne->backend, ne->server, strerror(-r));
			} else {
				ch->updated++;
			}
			continue;
		}
		if (ne == NULL && main_cfg_find(old, info.backend, info.server) == NULL)
			continue; /* HAProxy's alone */
		char b[CONFIG_NAME_MAX + 1], s[CONFIG_NAME_MAX + 1];
		snprintf(b, sizeof(b), "%s", info.backend);
		snprintf(s, sizeof(s), "%s", info.server);
		if (core_endpoint_remove(c, i) == 0) {
			ch->removed++;
			log_info("endpoint left the pool (configuration)",
				 "backend=%s server=%s", b, s);
		}
	}
	for (size_t e = 0; e < next->n_endpoints; e++) {
		const struct config_endpoint *ep = &next->endpoints[e];
		size_t nk = ep->n_keys > 0 ? ep->n_keys : 1;
		for (size_t k = 0; k < nk; k++) {
			const char *key = ep->n_keys > 0 ? ep->keys[k] : NULL;
			if (core_endpoint_find(c, core_str_c(ep->backend),
					       core_str_c(ep->server),
					       core_str_c(key)) >= 0)
				continue;
			struct core_endpoint_config ec = {
				.backend = ep->backend, .server = ep->server,
				.key_id = key, .models = (const char *const *)ep->models,
				.n_models = ep->n_models, .weight = ep->weight,
				.cost_per_mtok = ep->cost_per_mtok,
			};
			int r = core_endpoint_add(c, &ec, now);
			if (r < 0) {
				ch->failed++;
				log_error("endpoint not added", "backend=%s server=%s error=%s",
					  ep->backend, ep->server, strerror(-r));
			} else {
				ch->added++;
				log_info("endpoint joined the pool (configuration)",
					 "backend=%s server=%s", ep->backend, ep->server);
			}
		}
	}
}

/* Whether the poller must be made anew for next: what runtime_init reads
 * once (socket, interval) or sizes by (the endpoint count). */
static bool main_runtime_changed(const struct config *a, const struct config *b)
{
	if (!main_str_eq(a->runtime_socket, b->runtime_socket) ||
	    a->params.poll_interval_ms != b->params.poll_interval_ms ||
	    a->n_endpoints != b->n_endpoints ||
	    a->n_runtime_backends != b->n_runtime_backends)
		return true;
	for (size_t i = 0; i < a->n_runtime_backends; i++)
		if (!main_str_eq(a->runtime_backends[i], b->runtime_backends[i]))
			return true;
	return false;
}

/* Loads and checks the file, then applies it: the steps that can fail
 * (binding new addresses, the metrics port, the core's parameters) first,
 * so that a refused reload changes nothing. Returns 0 or -errno. */
static int main_reload_apply(struct app *app)
{
	static char err[16384];
	struct config next;
	struct server_listener *pending = NULL;
	struct metrics *m = app->metrics;
	int r;

	if (config_init(&next) < 0) {
		log_error("reload refused: out of memory", NULL);
		return -ENOMEM;
	}
	r = config_load_file(&next, app->config_path, err, sizeof(err));
	if (r == 0 && app->n_cli_listen > 0)
		r = config_set_listen(&next, app->cli_listen, app->n_cli_listen,
				      err, sizeof(err));
	if (r < 0) {
		char q[600];
		log_error("reload refused: keeping the running configuration",
			  "config=%s", log_quote(q, sizeof(q), app->config_path,
						 strlen(app->config_path)));
		main_log_errors(err);
		config_finish(&next);
		return r;
	}
	if (app->cli_level)
		next.log_level = app->cli_lvl;

	struct config *cur = app->cfg;
	bool metrics_changed = !main_str_eq(cur->metrics_listen, next.metrics_listen);
	r = server_relisten_prepare(&app->srv, &next, &pending, err, sizeof(err));
	if (r == 0 && metrics_changed)
		m = main_metrics_start(app, &next, &r, err, sizeof(err));
	if (r == 0) {
		r = core_set_params(app->srv.route.core, &next.params);
		if (r < 0)
			snprintf(err, sizeof(err), "the routing core refused the policy: %s",
				 strerror(-r));
	}
	if (r < 0) {
		char q[sizeof(err) + 100];
		log_error("reload refused: keeping the running configuration",
			  "error=%s", log_quote(q, sizeof(q), err, strlen(err)));
		server_relisten_abort(&app->srv, pending);
		if (metrics_changed)
			main_metrics_release(m);
		config_finish(&next);
		return r;
	}

	/* Nothing can fail from here on. */
	server_relisten_commit(&app->srv, &next, pending);
	if (metrics_changed) {
		main_metrics_release(app->metrics);
		app->metrics = m;
	}
	struct main_ep_changes ch = { 0 };
	main_reload_endpoints(app, cur, &next, &ch);
	bool rt_changed = main_runtime_changed(cur, &next);
	bool snap_changed = !main_str_eq(cur->state_file, next.state_file) ||
			    cur->params.snapshot_interval_ms !=
				    next.params.snapshot_interval_ms;
	/* Everyone holds app->cfg: the new contents go in place. */
	struct config old = *cur;
	*cur = next;
	config_finish(&old);
	log_set_level(cur->log_level);
	if (rt_changed) {
		bool restore = !app->restored;
		main_runtime_release(app, app->runtime);
		app->runtime = NULL;
		main_runtime_start(app, restore);
	}
	if (snap_changed && app->restored) {
		r = snapshot_writer_set(&app->snap, cur->state_file,
					cur->params.snapshot_interval_ms);
		if (r < 0)
			log_error("cannot restart periodic snapshots", "error=%s",
				  uv_err_name(r));
	}
	log_info("configuration reloaded",
		 "endpoints_added=%u endpoints_updated=%u endpoints_removed=%u "
		 "endpoints_failed=%u listen=%zu metrics=%s poller=%s snapshot=%s",
		 ch.added, ch.updated, ch.removed, ch.failed, cur->n_listen,
		 metrics_changed ? "changed" : "same",
		 rt_changed ? "restarted" : "same",
		 snap_changed ? "changed" : "same");
	return 0;
}

static void main_reload(struct app *app)
{
	if (app->srv.stopping) {
		log_warn("SIGHUP ignored: stopping", NULL);
		return;
	}
	if (app->config_path == NULL) {
		log_warn("SIGHUP ignored: no --config file to reload", NULL);
		return;
	}
	sdnotify_reloading(&app->sd);
	log_info("reloading", NULL);
	main_reload_apply(app);
	sdnotify_reloaded(&app->sd);
}

static void main_on_signal(uv_signal_t *h, int signum)
{
	struct app *app = h->data;
	if (signum == SIGHUP) {
		main_reload(app);
		return;
	}
	log_info(app->srv.stopping ? "stopping now" : "stopping", "signal=%s",
		 signum == SIGTERM ? "SIGTERM" : "SIGINT");
	sdnotify_stopping(&app->sd);
	app->save_on_exit = true;
	server_stop(&app->srv, MAIN_GRACE_MS, main_on_stopped, app);
}

static int main_check_config(const char *path)
{
	struct config cfg;
	char err[16384];
	if (config_init(&cfg) < 0) {
		fprintf(stderr, "warmlane: out of memory\n");
		return EXIT_FAILURE;
	}
	int r = config_load_file(&cfg, path, err, sizeof(err));
	config_finish(&cfg);
	if (r < 0) {
		fputs(err, stderr);
		return EXIT_FAILURE;
	}
	printf("%s: ok\n", path);
	return EXIT_SUCCESS;
}

static int main_signals(struct app *app)
{
	struct {
		uv_signal_t *h;
		int signum;
	} sigs[] = {
		{ &app->sig_term, SIGTERM },
		{ &app->sig_int, SIGINT },
		{ &app->sig_hup, SIGHUP },
	};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		int r = uv_signal_init(app->loop, sigs[i].h);
		if (r < 0)
			return r;
		sigs[i].h->data = app;
		r = uv_signal_start(sigs[i].h, main_on_signal, sigs[i].signum);
		if (r < 0)
			return r;
	}
	return 0;
}

static int main_run(struct app *app)
{
	struct config *cfg = app->cfg;
	char err[512];
	int rc = EXIT_SUCCESS;

	/* A peer that vanishes must cost a write error, not the process. */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);

	if (server_init(&app->srv, app->loop, cfg) < 0) {
		log_error("cannot initialise the server", NULL);
		return EXIT_FAILURE;
	}
	app->srv.snapshot = &app->snap_stats;
	/* Without a runtime API, state from the last run before the first
	 * request; with one, after its first poll (main_runtime_start), so
	 * that entries of servers only HAProxy names are not dropped as
	 * unknown. */
	bool polling = cfg->runtime_socket != NULL && cfg->runtime_socket[0] != '\0';
	if (!polling)
		main_restore(app);
	int r = server_listen(&app->srv, err, sizeof(err));
	if (r == 0)
		app->metrics = main_metrics_start(app, cfg, &r, err, sizeof(err));
	if (r < 0) {
		char q[600];
		log_error("cannot listen", "error=%s",
			  log_quote(q, sizeof(q), err, strlen(err)));
		snapshot_writer_stop(&app->snap);
		server_stop(&app->srv, 0, NULL, NULL);
		uv_run(app->loop, UV_RUN_DEFAULT);
		server_finish(&app->srv);
		uv_loop_close(app->loop);
		return EXIT_FAILURE;
	}
	/* The poller starts once the agent is reachable: until its first
	 * answer the configured endpoints are the pool. */
	main_runtime_start(app, true);
	/* HAProxy's log lines: without them, in-flight counts fall at
	 * non-streamed feedback and at polls, as before (logsrc.h). */
	if (logsrc_start(&app->logsrc, app->loop, &app->srv.route, cfg, err,
			 sizeof(err)) < 0) {
		char q[600];
		log_warn("cannot open the log input; HAProxy's log lines are not read",
			 "error=%s", log_quote(q, sizeof(q), err, strlen(err)));
	} else if (app->srv.route.log_input) {
		log_info("reading HAProxy's log lines", "path=%s udp_port=%u",
			 cfg->log_input_path[0] != '\0' ? cfg->log_input_path : "-",
			 (unsigned)cfg->log_input_udp_port);
	}
	r = main_signals(app);
	if (r < 0) {
		log_error("cannot install signal handlers", "error=%s",
			  uv_err_name(r));
		rc = EXIT_FAILURE;
		server_stop(&app->srv, 0, main_on_stopped, app);
	} else {
		log_info("started", "version=%s endpoints=%zu max_frame_size=%u",
			 WARMLANE_VERSION, cfg->n_endpoints,
			 (unsigned)cfg->max_frame_size);
		r = sdnotify_start(&app->sd, app->loop, &app->srv.stats);
		if (r < 0)
			log_error("cannot start systemd notifications", "error=%s",
				  uv_err_name(r));
	}

	uv_run(app->loop, UV_RUN_DEFAULT);
	/* Not before the load: the file would lose what it held. */
	if (app->save_on_exit && app->restored) {
		uv_update_time(app->loop);
		snapshot_save(app->srv.route.core, app->cfg->state_file,
			      uv_now(app->loop), &app->snap_stats);
	}
	server_finish(&app->srv);
	uv_loop_close(app->loop);
	if (rc == EXIT_SUCCESS)
		log_info("stopped", NULL);
	return rc;
}

int main(int argc, char **argv)
{
	enum { OPT_CHECK = 256 };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "check-config", required_argument, NULL, OPT_CHECK },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *check_path = NULL, *level = NULL;
	const char *listen[MAIN_MAX_LISTEN];
	size_t n_listen = 0;
	int o;

	while ((o = getopt_long(argc, argv, "c:l:L:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config_path = optarg;
			break;
		case 'l':
			if (n_listen == MAIN_MAX_LISTEN) {
				fprintf(stderr, "warmlane: at most %d --listen\n",
					MAIN_MAX_LISTEN);
				return EXIT_USAGE;
			}
			listen[n_listen++] = optarg;
			break;
		case 'L':
			level = optarg;
			break;
		case OPT_CHECK:
			check_path = optarg;
			break;
		case 'V':
			printf("warmlane %s\n", WARMLANE_VERSION);
			return EXIT_SUCCESS;
		case 'h':
			usage(stdout);
			return EXIT_SUCCESS;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "warmlane: unexpected argument \"%s\"\n",
			argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (check_path != NULL)
		return main_check_config(check_path);

	enum log_level lvl = LOG_LEVEL_INFO;
	if (level != NULL && log_level_parse(level, &lvl) < 0) {
		fprintf(stderr,
			"warmlane: --log-level must be error, warn, info or debug\n");
		return EXIT_USAGE;
	}

	struct config cfg;
	char err[16384];
	if (config_init(&cfg) < 0) {
		fprintf(stderr, "warmlane: out of memory\n");
		return EXIT_FAILURE;
	}
	if (config_path != NULL &&
	    config_load_file(&cfg, config_path, err, sizeof(err)) < 0) {
		fputs(err, stderr);
		config_finish(&cfg);
		return EXIT_FAILURE;
	}
	if (n_listen > 0 &&
	    config_set_listen(&cfg, listen, n_listen, err, sizeof(err)) < 0) {
		fprintf(stderr, "warmlane: --listen %s\n", err);
		config_finish(&cfg);
		return EXIT_USAGE;
	}
	if (level != NULL)
		cfg.log_level = lvl;
	log_set_level(cfg.log_level);

	struct app app = {
		.loop = uv_default_loop(), .cfg = &cfg, .config_path = config_path,
		.cli_listen = listen, .n_cli_listen = n_listen,
		.cli_level = level != NULL, .cli_lvl = lvl,
	};
	int rc = main_run(&app);
	config_finish(&cfg);
	return rc;
}
