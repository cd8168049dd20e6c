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
		"answering what it has read (at most %d ms).\n",
		MAIN_GRACE_MS);
}

struct app {
	uv_loop_t *loop;
	struct server srv;
	struct metrics metrics; /* zeroed: metrics_stop is a no-op */
	struct runtime runtime; /* zeroed: runtime_stop is a no-op */
	struct snapshot_writer snap; /* zeroed: snapshot_writer_stop too */
	struct sdnotify sd;     /* zeroed: sdnotify_stop too */
	bool save_on_exit;      /* stopped by a signal: write the snapshot */
	uv_signal_t sig_term, sig_int, sig_hup;
};

static void main_on_stopped(struct server *s, void *arg)
{
	struct app *app = arg;
	(void)s;
	/* Scrapes are answered until the SPOP side is done. */
	metrics_stop(&app->metrics, NULL, NULL);
	runtime_stop(&app->runtime);
	snapshot_writer_stop(&app->snap);
	sdnotify_stop(&app->sd);
	/* The signal handles are what keeps the loop running now. */
	uv_close((uv_handle_t *)&app->sig_term, NULL);
	uv_close((uv_handle_t *)&app->sig_int, NULL);
	uv_close((uv_handle_t *)&app->sig_hup, NULL);
}

static void main_on_signal(uv_signal_t *h, int signum)
{
	struct app *app = h->data;
	if (signum == SIGHUP) {
		log_warn("SIGHUP ignored: restart warmlane to apply a new configuration",
			 NULL);
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

static int main_run(struct config *cfg)
{
	struct app app = { .loop = uv_default_loop() };
	char err[512];
	int rc = EXIT_SUCCESS;

	/* A peer that vanishes must cost a write error, not the process. */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);

	if (server_init(&app.srv, app.loop, cfg) < 0) {
		log_error("cannot initialise the server", NULL);
		return EXIT_FAILURE;
	}
	/* State from the last run, before the first request. */
	snapshot_restore(app.srv.route.core, cfg->state_file, uv_now(app.loop));
	int r = server_listen(&app.srv, err, sizeof(err));
	if (r == 0 && cfg->metrics_listen[0] != '\0')
		r = metrics_start(&app.metrics, app.loop, &cfg->metrics,
				  &app.srv, err, sizeof(err));
	if (r < 0) {
		char q[600];
		log_error("cannot listen", "error=%s",
			  log_quote(q, sizeof(q), err, strlen(err)));
		metrics_stop(&app.metrics, NULL, NULL);
		server_stop(&app.srv, 0, NULL, NULL);
		uv_run(app.loop, UV_RUN_DEFAULT);
		server_finish(&app.srv);
		uv_loop_close(app.loop);
		return EXIT_FAILURE;
	}
	/* The poller starts once the agent is reachable: until its first
	 * answer the configured endpoints are the pool. */
	r = runtime_init(&app.runtime, app.loop, &app.srv.route,
			 &app.srv.stats, cfg);
	if (r == 0)
		r = runtime_start(&app.runtime);
	if (r < 0)
		log_error("cannot start the runtime API poller; routing on configured endpoints",
			  "error=%s", uv_err_name(r));
	r = main_signals(&app);
	if (r < 0) {
		log_error("cannot install signal handlers", "error=%s",
			  uv_err_name(r));
		rc = EXIT_FAILURE;
		server_stop(&app.srv, 0, main_on_stopped, &app);
	} else {
		log_info("started", "version=%s endpoints=%zu max_frame_size=%u",
			 WARMLANE_VERSION, cfg->n_endpoints,
			 (unsigned)cfg->max_frame_size);
		r = snapshot_writer_start(&app.snap, app.loop, app.srv.route.core,
					  cfg->state_file,
					  cfg->params.snapshot_interval_ms);
		if (r < 0)
			log_error("cannot start periodic snapshots", "error=%s",
				  uv_err_name(r));
		r = sdnotify_start(&app.sd, app.loop, &app.srv.stats);
		if (r < 0)
			log_error("cannot start systemd notifications", "error=%s",
				  uv_err_name(r));
	}

	uv_run(app.loop, UV_RUN_DEFAULT);
	if (app.save_on_exit) {
		uv_update_time(app.loop);
		snapshot_save(app.srv.route.core, cfg->state_file, uv_now(app.loop));
	}
	runtime_finish(&app.runtime);
	server_finish(&app.srv);
	uv_loop_close(app.loop);
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

	int rc = main_run(&cfg);
	config_finish(&cfg);
	return rc;
}
