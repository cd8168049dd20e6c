/* reload.h - SIGHUP: a new configuration file checked, then applied whole or not at all. */
#ifndef WARMLANE_RELOAD_H
#define WARMLANE_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "log.h"

struct metrics;
struct server;
struct server_listener;

/* Command-line options that override the file, at start and at every
 * reload. */
struct reload_opts {
	const char *path;                /* --config */
	const char *const *cli_listen;   /* --listen, n_cli_listen of them */
	size_t n_cli_listen;
	bool cli_level;                  /* --log-level given */
	enum log_level cli_lvl;
};

/* A reload between reload_prepare and reload_commit: next is checked and
 * everything that can fail is done, nothing is visible yet. */
struct reload_plan {
	struct config next;
	struct server_listener *pending; /* server_relisten_prepare's */
	struct metrics *metrics;         /* the new metrics server, or NULL */
	bool metrics_changed;            /* metrics.listen differs */
	bool runtime_changed;            /* the poller must be made anew */
	bool snapshot_changed;           /* state.file or its interval */
};

/* What reload_commit did to the core's endpoints. */
struct reload_changes {
	unsigned added, updated, removed, failed;
};

/* A metrics server on cfg's address for srv, or NULL with *rc 0 when
 * metrics.listen is "". On failure NULL, *rc -errno and err set. Stop it
 * with reload_metrics_release. */
struct metrics *reload_metrics_start(struct server *srv,
				     const struct config *cfg, int *rc,
				     char *err, size_t errlen);

/* Stops m and frees it once its handles are closed. Accepts NULL. */
void reload_metrics_release(struct metrics *m);

/* Loads o->path with o's overrides and does, against the running
 * configuration cur (srv's), every step that can fail: the new listen
 * addresses bound (server_relisten_prepare), a new metrics address bound,
 * the core's parameters set (last: the one step that cannot be undone). On
 * failure everything is undone, the reason logged (one `configuration
 * error` line per problem the loader found, FILE:LINE:COL or FILE:
 * field.path) and -errno returned; p is then empty. 0: call
 * reload_commit. */
int reload_prepare(struct reload_plan *p, struct server *srv,
		   const struct config *cur, const struct reload_opts *o);

/* Makes p's configuration the running one, in place in *cur (everyone
 * holds that pointer): listeners closed, kept or adopted, the metrics
 * server swapped (*metrics), the core's endpoints following the file
 * (see README "Reload"), counted in *ch. Cannot fail; an endpoint the
 * core refuses is logged and counted in ch->failed. p's next, pending
 * and metrics are taken; its flags stay, for the caller's own steps. */
void reload_commit(struct reload_plan *p, struct server *srv,
		   struct config *cur, struct metrics **metrics,
		   uint64_t now_ms, struct reload_changes *ch);

#endif
