/* reload.h - SIGHUP: a new configuration file checked, then applied whole or not at all. */
#ifndef WARMLANE_RELOAD_H
#define WARMLANE_RELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

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

/* Reads and checks o->path with o's overrides (--listen, --log-level)
 * into next, which it initialises. Touches nothing but its arguments, so
 * it may run on any thread. Returns 0, or -errno with next finished and
 * err holding one line per problem (FILE:LINE:COL: ...). */
int reload_load(struct config *next, const struct reload_opts *o, char *err,
		size_t errlen);

/* Logs a refused file: one `reload refused` line naming path, then one
 * `configuration error` line per line of err. */
void reload_log_refused(const char *path, const char *err);

/* Does, for next (reload_load's, taken: p owns it from here on, also on
 * failure) against the running configuration cur (srv's), every step that
 * can fail: the new listen addresses bound (server_relisten_prepare), a
 * new metrics address bound, the core's parameters set (last: the one
 * step that cannot be undone). On failure everything is undone, the
 * reason logged and -errno returned; p is then empty. 0: call
 * reload_commit. path is for the log lines. */
int reload_prepare(struct reload_plan *p, struct server *srv,
		   const struct config *cur, struct config *next,
		   const char *path);

/* ---- the file read off the loop ------------------------------------------
 *
 * A file is read and parsed on libuv's threadpool (uv_queue_work), never
 * on the loop: whatever it holds, and however slow its disk, SPOP answers
 * go on meanwhile. Its result is handed over on the loop thread, where
 * reload_prepare and reload_commit apply it. A request while a parse runs
 * is coalesced: that parse's result is dropped (the file changed since it
 * began) and one more parse follows it, however many requests came. */
struct reload_parse;

/* On the loop thread, once per parse that was not superseded: rc 0 and
 * next a loaded configuration the callee takes (moves out, zeroing
 * *next), or rc -errno and err the loader's lines. */
typedef void (*reload_parsed_fn)(struct reload_parse *rp, int rc,
				 struct config *next, const char *err,
				 void *arg);

struct reload_parse {
	uv_work_t work;
	uv_loop_t *loop;
	const struct reload_opts *opts; /* must outlive rp */
	reload_parsed_fn cb;
	void *arg;
	bool busy;        /* a parse is on the threadpool */
	bool again;       /* requested while busy */
	bool stopped;     /* no more parses, no more callbacks */
	unsigned parses;  /* parses run to their end, superseded ones too */
	/* Written by the worker, read on the loop after it. */
	int rc;
	struct config next;
	char err[16384];
};

/* Sets rp up on loop; nothing runs until reload_parse_request. */
void reload_parse_init(struct reload_parse *rp, uv_loop_t *loop,
		       const struct reload_opts *o, reload_parsed_fn cb,
		       void *arg);

/* Asks for a parse of o->path. Returns 0 when one was queued, 1 when one
 * is running already (it is superseded, see above), -ECANCELED after
 * reload_parse_finish, or uv_queue_work's -errno (no callback then). */
int reload_parse_request(struct reload_parse *rp);

/* No parse starts and no callback is called after this; a parse running
 * ends on its thread and its result is dropped (the loop runs until it
 * has). */
void reload_parse_finish(struct reload_parse *rp);

/* Makes p's configuration the running one, in place in *cur (everyone
 * holds that pointer): listeners closed, kept or adopted, the metrics
 * server swapped (*metrics), the core's endpoints following the file
 * (see docs/operations.md, "Reload"), counted in *ch. Cannot fail; an endpoint the
 * core refuses is logged and counted in ch->failed. p's next, pending
 * and metrics are taken; its flags stay, for the caller's own steps. */
void reload_commit(struct reload_plan *p, struct server *srv,
		   struct config *cur, struct metrics **metrics,
		   uint64_t now_ms, struct reload_changes *ch);

#endif
