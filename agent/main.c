/* main.c - warmlane: command line, configuration, signals, the event loop. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "coalesce.h"
#include "config.h"
#include "ctl.h"
#include "log.h"
#include "logsrc.h"
#include "metrics.h"
#include "engine.h"
#include "probe.h"
#include "reload.h"
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
	/* The file (opts.path NULL: defaults, nothing to reload) and the
	 * command-line options that override it. */
	struct reload_opts opts;
	struct server srv;
	struct metrics *metrics; /* NULL: metrics.listen is "" */
	struct runtime *runtime; /* NULL until created */
	struct snapshot_writer snap; /* zeroed: snapshot_writer_finish is a no-op */
	struct snapshot_stats snap_stats;
	struct sdnotify sd;     /* zeroed: sdnotify_finish too */
	struct logsrc logsrc;   /* zeroed: logsrc_finish too */
	struct probe probe;     /* zeroed: probe_finish too */
	struct engine engine;   /* zeroed: engine_finish too */
	struct coalesce coalesce; /* zeroed: coalesce_finish too */
	struct ctl *ctl;        /* NULL: command_socket.path "" or not bound */
	/* The command socket asked for (started or not), to tell a reload
	 * that changes it. */
	char ctl_path[108];
	unsigned ctl_mode;
	bool restored;          /* the snapshot was loaded (or there was none) */
	/* The state file of the start, loaded once: a reload before the load
	 * changes where writes go, not what the last run wrote. */
	char *load_path;
	bool save_on_exit;      /* stopped by a signal: write the snapshot */
	uv_signal_t sig_term, sig_int, sig_hup;
	struct reload_parse reload; /* SIGHUP's file, read off the loop */
};

/* ---- the snapshot: loaded once HAProxy's servers are known --------------- */

static void main_restore(struct app *app)
{
	if (app->restored)
		return;
	app->restored = true;
	uv_update_time(app->loop);
	snapshot_restore(app->srv.route.core,
			 app->load_path != NULL ? app->load_path
						: app->cfg->state_file,
			 uv_now(app->loop), &app->snap_stats);
	free(app->load_path);
	app->load_path = NULL;
	/* Writes only after the load: an earlier one would replace the file
	 * with a cold map. */
	int r = snapshot_writer_init(&app->snap, app->loop, app->srv.route.core,
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

/* Creates a poller on app->cfg. With restore set, the snapshot is loaded
 * after its first poll (at once when polling is off or cannot start). */
static void main_runtime_create(struct app *app, bool restore)
{
	int r = runtime_create(&app->runtime, app->loop, &app->srv.route,
			       &app->srv.stats, app->cfg,
			       restore ? main_on_first_poll : NULL, app);
	if (r < 0)
		log_error("cannot start the runtime API poller; routing on configured endpoints",
			  "error=%s", uv_err_name(r));
	if (restore && (app->runtime == NULL || !app->runtime->enabled))
		main_restore(app);
}

/* Endpoints with an engine_metrics URL. */
static size_t main_engine_endpoints(const struct config *cfg)
{
	size_t n = 0;
	for (size_t i = 0; i < cfg->n_endpoints; i++)
		n += cfg->endpoints[i].engine_metrics != NULL;
	return n;
}

/* ---- the command socket, replaceable by a reload -------------------------- */

/* Opens the command socket of app->cfg (none when its path is ""). One
 * that cannot be opened is logged and the agent goes on: routing does not
 * need it. */
static void main_ctl_start(struct app *app)
{
	const struct config *cfg = app->cfg;
	snprintf(app->ctl_path, sizeof(app->ctl_path), "%s",
		 cfg->command_socket_path);
	app->ctl_mode = cfg->command_socket_mode;
	if (cfg->command_socket_path[0] == '\0')
		return;
	char err[512], q[600];
	int r = ctl_create(&app->ctl, app->loop, &app->srv,
			   cfg->command_socket_path, cfg->command_socket_mode,
			   app->opts.path, err, sizeof(err));
	if (r < 0)
		log_warn("cannot open the command socket; warmlanectl will not reach this agent",
			 "error=%s", log_quote(q, sizeof(q), err, strlen(err)));
	else
		log_info("command socket open", "path=%s mode=%04o",
			 cfg->command_socket_path, cfg->command_socket_mode);
}

/* After a reload: the socket again when its path or mode changed. */
static void main_ctl_reload(struct app *app)
{
	const struct config *cfg = app->cfg;
	if (strcmp(app->ctl_path, cfg->command_socket_path) == 0 &&
	    app->ctl_mode == cfg->command_socket_mode)
		return;
	ctl_destroy(app->ctl);
	app->ctl = NULL;
	main_ctl_start(app);
}

/* ---- stopping ------------------------------------------------------------- */

static void main_on_stopped(struct server *s, void *arg)
{
	struct app *app = arg;
	(void)s;
	/* Scrapes are answered until the SPOP side is done. */
	metrics_destroy(app->metrics, NULL, NULL);
	app->metrics = NULL;
	runtime_destroy(app->runtime, NULL, NULL);
	app->runtime = NULL;
	snapshot_writer_finish(&app->snap);
	sdnotify_finish(&app->sd);
	logsrc_finish(&app->logsrc);
	reload_parse_finish(&app->reload);
	probe_finish(&app->probe); /* first: the engine's polls are the prober's */
	engine_finish(&app->engine);
	coalesce_finish(&app->coalesce);
	ctl_destroy(app->ctl);
	app->ctl = NULL;
	/* The signal handles are what keeps the loop running now. */
	uv_close((uv_handle_t *)&app->sig_term, NULL);
	uv_close((uv_handle_t *)&app->sig_int, NULL);
	/* SIGHUP's handle is never closed: closing the last one gives the
	 * signal its default action back (libuv), which ends the process,
	 * and no sigaction after it can close the window on every thread.
	 * Unreferenced, it no longer keeps the loop running and a reload
	 * asked until the process has exited is ignored ("SIGHUP ignored:
	 * stopping" while the loop runs; after it, a byte in libuv's signal
	 * pipe). A second SIGTERM may still end the process. */
	uv_unref((uv_handle_t *)&app->sig_hup);
}

/* ---- reload (SIGHUP) ------------------------------------------------------ */

/* reload_prepare does what can fail with the parsed file next (nothing
 * changes when it does), then reload_commit and what depends on the new
 * file here. Returns 0 or -errno. */
static int main_reload_apply(struct app *app, struct config *next)
{
	struct reload_plan p;
	int r = reload_prepare(&p, &app->srv, app->cfg, next, app->opts.path);
	if (r < 0)
		return r;
	struct reload_changes ch;
	uv_update_time(app->loop);
	reload_commit(&p, &app->srv, app->cfg, &app->metrics, uv_now(app->loop),
		      &ch);
	struct config *cur = app->cfg;
	log_set_level(cur->log_level);
	if (p.runtime_changed) {
		bool restore = !app->restored;
		runtime_destroy(app->runtime, NULL, NULL);
		app->runtime = NULL;
		main_runtime_create(app, restore);
	}
	if (p.snapshot_changed && app->restored) {
		r = snapshot_writer_set(&app->snap, cur->state_file,
					cur->params.snapshot_interval_ms);
		if (r < 0)
			log_error("cannot restart periodic snapshots", "error=%s",
				  uv_err_name(r));
	}
	main_ctl_reload(app);
	log_info("configuration reloaded",
		 "endpoints_added=%u endpoints_updated=%u endpoints_removed=%u "
		 "endpoints_failed=%u listen=%zu metrics=%s poller=%s snapshot=%s mode=%s",
		 ch.added, ch.updated, ch.removed, ch.failed, cur->n_listen,
		 p.metrics_changed ? "changed" : "same",
		 p.runtime_changed ? "restarted" : "same",
		 p.snapshot_changed ? "changed" : "same",
		 config_mode_name(cur->mode));
	return 0;
}

/* The file, parsed on the threadpool, back on the loop thread. */
static void main_reload_parsed(struct reload_parse *rp, int rc,
			       struct config *next, const char *err, void *arg)
{
	struct app *app = arg;
	(void)rp;
	if (app->srv.stopping)
		log_warn("reload dropped: stopping", NULL);
	else if (rc < 0)
		reload_log_refused(app->opts.path, err);
	else
		main_reload_apply(app, next);
	sdnotify_reloaded(&app->sd);
}

static void main_reload(struct app *app)
{
	if (app->srv.stopping) {
		log_warn("SIGHUP ignored: stopping", NULL);
		return;
	}
	if (app->opts.path == NULL) {
		log_warn("SIGHUP ignored: no --config file to reload", NULL);
		return;
	}
	sdnotify_reloading(&app->sd);
	int r = reload_parse_request(&app->reload);
	if (r == 1) {
		log_info("reloading: a parse is running, the file is read again after it",
			 NULL);
	} else if (r < 0) {
		log_error("reload refused: cannot queue the parse", "error=%s",
			  uv_err_name(r));
		sdnotify_reloaded(&app->sd);
	} else {
		log_info("reloading", NULL);
	}
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

	if (cfg->state_file != NULL &&
	    (app->load_path = strdup(cfg->state_file)) == NULL) {
		log_error("cannot start: out of memory", NULL);
		return EXIT_FAILURE;
	}
	if (server_init(&app->srv, app->loop, cfg) < 0) {
		free(app->load_path);
		log_error("cannot initialise the server", NULL);
		return EXIT_FAILURE;
	}
	app->srv.snapshot = &app->snap_stats;
	/* Without a runtime API, state from the last run before the first
	 * request; with one, after its first poll (main_runtime_create), so
	 * that entries of servers only HAProxy names are not dropped as
	 * unknown. */
	bool polling = cfg->runtime_socket != NULL && cfg->runtime_socket[0] != '\0';
	if (!polling)
		main_restore(app);
	int r = server_listen(&app->srv, err, sizeof(err));
	if (r == 0 && cfg->metrics_listen != NULL && cfg->metrics_listen[0] != '\0')
		r = metrics_create(&app->metrics, app->loop, &cfg->metrics,
				   &app->srv, err, sizeof(err));
	if (r < 0) {
		char q[600];
		log_error("cannot listen", "error=%s",
			  log_quote(q, sizeof(q), err, strlen(err)));
		snapshot_writer_finish(&app->snap);
		server_stop(&app->srv, 0, NULL, NULL);
		uv_run(app->loop, UV_RUN_DEFAULT);
		server_finish(&app->srv);
		uv_loop_close(app->loop);
		free(app->load_path);
		return EXIT_FAILURE;
	}
	/* The poller starts once the agent is reachable: until its first
	 * answer the configured endpoints are the pool. */
	main_runtime_create(app, true);
	r = coalesce_init(&app->coalesce, &app->srv);
	if (r < 0)
		log_error("cannot start spop.coalesce; every frame wakes the loop",
			  "error=%s", uv_err_name(r));
	/* HAProxy's log lines: without them, in-flight counts fall at
	 * non-streamed feedback and at polls, as before (logsrc.h). */
	if (logsrc_init(&app->logsrc, app->loop, &app->srv.route, cfg, err,
			sizeof(err)) < 0) {
		char q[600];
		log_warn("cannot open the log input; HAProxy's log lines are not read",
			 "error=%s", log_quote(q, sizeof(q), err, strlen(err)));
	} else if (app->srv.route.log_input) {
		log_info("reading HAProxy's log lines", "path=%s udp_port=%u",
			 cfg->log_input_path[0] != '\0' ? cfg->log_input_path : "-",
			 (unsigned)cfg->log_input_udp_port);
		/* lines sent before a frame are applied before it */
		app->srv.before_pass = logsrc_catch_up;
		app->srv.before_pass_arg = &app->logsrc;
	}
	reload_parse_init(&app->reload, app->loop, &app->opts,
			  main_reload_parsed, app);
	main_ctl_start(app);
	/* Key probes: the only evidence that kills an upstream key. */
	r = probe_init(&app->probe, app->loop, &app->srv.route, cfg);
	if (r < 0)
		log_error("cannot start key probes; no 401/403 will exclude a key",
			  "error=%s", strerror(-r));
	else if (cfg->params.key_probe)
		log_info("probing upstream keys after 401/403s", "target=%s method=%s path=%s interval_ms=%llu",
			 cfg->key_probe_target, cfg->key_probe_method,
			 cfg->key_probe_path,
			 (unsigned long long)cfg->params.key_probe_interval_ms);
	else
		log_info("key probes off (no key_probe.target): 401/403 never exclude an upstream key", NULL);
	/* Engine load: started even with no engine_metrics yet, so that a
	 * reload adding some applies. */
	if (r == 0) {
		r = engine_init(&app->engine, app->loop, &app->srv.route, cfg,
				&app->probe);
		if (r < 0)
			log_error("cannot start engine metrics polls; in-flight counts stay HAProxy's",
				  "error=%s", uv_err_name(r));
		else
			log_info("engine metrics polls", "endpoints=%zu interval_ms=%llu max_age_ms=%llu",
				 main_engine_endpoints(cfg),
				 (unsigned long long)cfg->engine_poll_interval_ms,
				 (unsigned long long)cfg->params.engine_max_age_ms);
	}
	r = main_signals(app);
	if (r < 0) {
		log_error("cannot install signal handlers", "error=%s",
			  uv_err_name(r));
		rc = EXIT_FAILURE;
		server_stop(&app->srv, 0, main_on_stopped, app);
	} else {
		log_info("started", "version=%s endpoints=%zu max_frame_size=%u mode=%s",
			 WARMLANE_VERSION, cfg->n_endpoints,
			 (unsigned)cfg->max_frame_size, config_mode_name(cfg->mode));
		r = sdnotify_init(&app->sd, app->loop, &app->srv.stats);
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
	/* EBUSY after a stop: SIGHUP's handle stays open (main_on_stopped);
	 * the default loop's memory is libuv's own. */
	uv_loop_close(app->loop);
	free(app->load_path); /* stopped before the load */
	app->load_path = NULL;
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
		.loop = uv_default_loop(), .cfg = &cfg,
		.opts = { .path = config_path, .cli_listen = listen,
			  .n_cli_listen = n_listen, .cli_level = level != NULL,
			  .cli_lvl = lvl },
	};
	int rc = main_run(&app);
	config_finish(&cfg);
	return rc;
}
