/* runtime.h - HAProxy runtime API poller: which servers exist, their state and in-flight, into the core. */
#ifndef WARMLANE_RUNTIME_H
#define WARMLANE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core.h"

struct config;
struct route;
struct stats;

/* Longest CSV line kept (a 3.2 server line is about 500 bytes); a longer
 * one is dropped and the poll removes no server. */
#define RUNTIME_LINE_MAX 16384
/* Failed polls retried at the poll interval before backing off. */
#define RUNTIME_FAST_RETRIES 5
/* Cap of the reconnect backoff after failed polls. */
#define RUNTIME_BACKOFF_MAX_MS 5000
/* A poll that has not reached EOF after this long (or after the poll
 * interval, if longer) is abandoned as failed. */
#define RUNTIME_POLL_TIMEOUT_MS 2000
/* Most server rows applied in one loop turn, and the most time one turn
 * may spend on them (checked after each row): an answer
 * listing 50,000 servers is applied over many turns, SPOP served between
 * them. */
#define RUNTIME_TURN_ROWS      2048
#define RUNTIME_TURN_BUDGET_US 2000
/* Servers named in the one line that sums up a poll's joins and leaves;
 * the rest are counted ("and 9 more"). */
#define RUNTIME_SUMMARY_NAMES  5
/* The command: server lines of every proxy ("-1 4 -1": any proxy, type 4
 * = servers, any id), one command per connection; every
 * RUNTIME_PEERS_EVERY_MS while requests carry shared warm hints, the
 * dump of HAProxy's peers after it (`show peers` isolates HAProxy's
 * threads while it runs: not at every poll, and not for HAProxies that
 * share no hint). */
#define RUNTIME_COMMAND "show stat -1 4 -1\n"
#define RUNTIME_COMMAND_PEERS "show stat -1 4 -1; show peers\n"
#define RUNTIME_PEERS_EVERY_MS 5000

/* ---- the CSV of `show stat`, parsed line by line ---- */

/* Columns used, found by name in the header ("# pxname,svname,..."): the
 * column set and order differ between HAProxy versions. */
enum runtime_col {
	RUNTIME_COL_PXNAME = 0,
	RUNTIME_COL_SVNAME,
	RUNTIME_COL_SCUR,
	RUNTIME_COL_QCUR,
	RUNTIME_COL_STATUS,
	RUNTIME_COL_WEIGHT, /* optional */
	RUNTIME_COL_TYPE,   /* optional: 2 = server */
	RUNTIME_COL_MODE,   /* optional: http, tcp... */
	RUNTIME_COL_BCK,    /* optional: 1 = backup server */
	RUNTIME_COL_SID,    /* optional: the server's numeric id (shared hints) */
	RUNTIME_COL_SLIM,   /* optional: the server's maxconn (its slots) */
	RUNTIME_COL_CHECK_STATUS,   /* optional: its last check's result */
	RUNTIME_COL_CHECK_DURATION, /* optional: and its duration, ms */
	RUNTIME_COL_COUNT
};

/* One server line. Views into the parser's line buffer, valid during the
 * row callback only. */
struct runtime_row {
	struct core_str pxname, svname, mode; /* mode len 0: no column */
	uint32_t scur, qcur;
	enum core_admin admin;
	bool status_known; /* false: admin is DOWN for an unknown status */
	int64_t weight;    /* -1 when absent */
	bool backup;       /* a backup server (bck 1) */
	int64_t sid;       /* the server's id; -1 when absent */
	int64_t slim;      /* its maxconn; -1 when absent or not set */
	/* Its last layer-7 health check's duration in ms (check_status L7OK,
	 * or "* L7OK" while the next one runs); -1 when absent, failed or
	 * not layer 7 (a bare connect). */
	int64_t check_ms;
};

typedef void (*runtime_row_fn)(void *arg, const struct runtime_row *row);

/* The dump of `show peers` (after the CSV's blank line), as far as read:
 * the remote peers of the sections that share a table, and how many of
 * them are connected. */
struct runtime_peers {
	unsigned sections;  /* peers sections that share a table */
	unsigned remote;    /* their remote peers */
	unsigned connected; /* of them, connected */
	bool in_section, table;            /* the section being read */
	unsigned sec_remote, sec_connected;
	bool lost;          /* a line over RUNTIME_LINE_MAX was dropped */
};

void runtime_peers_init(struct runtime_peers *p);
/* One line of the dump (no newline). */
void runtime_peers_line(struct runtime_peers *p, const char *line, size_t len);
/* Ends the dump: CONNECTED when every remote peer of the sections that
 * share a table is connected (none listed: a group of one), APART when
 * one is not, UNKNOWN without such a section (or without a dump, or with
 * a line lost: it might have been a peer's). */
enum core_peers runtime_peers_end(struct runtime_peers *p);

struct runtime_csv {
	int col[RUNTIME_COL_COUNT]; /* index, -1 when absent */
	bool header;                /* the header line was read */
	bool stat_end;              /* and the blank line that ends it: the
				     * rest is `show peers` */
	bool skipping;              /* inside an over-long line */
	size_t len;
	bool pause;                 /* set by the row callback: stop after this line */
	uint64_t rows;              /* server rows delivered */
	uint64_t dropped;           /* over-long lines */
	uint64_t bad;               /* lines that did not parse */
	struct runtime_peers peers;
	char line[RUNTIME_LINE_MAX];
};

/* Resets p for a new response. */
void runtime_csv_init(struct runtime_csv *p);

/* Feeds n bytes of the response; fn is called for every complete server
 * line (FRONTEND and BACKEND lines are skipped). Lines before the header
 * and lines that do not parse are skipped and counted; the first blank
 * line after the header ends the CSV, and what follows is read as
 * `show peers` (p->peers). Returns
 * 0, or -EPROTO when the header lacks a required column (pxname, svname,
 * scur, qcur, status): the rest of the response is then ignored. */
int runtime_csv_feed(struct runtime_csv *p, const char *buf, size_t n,
		     runtime_row_fn fn, void *arg);

/* Same as runtime_csv_feed, but returns after the line during which fn
 * set p->pause (which it clears): the bytes consumed, up to n, or
 * -EPROTO. The caller feeds the rest later, from where it stopped. */
ptrdiff_t runtime_csv_feed_part(struct runtime_csv *p, const char *buf,
				size_t n, runtime_row_fn fn, void *arg);

/* Ends the response: a last line without newline is delivered. Returns 0,
 * or -EPROTO when no valid header was seen. */
int runtime_csv_finish(struct runtime_csv *p, runtime_row_fn fn, void *arg);

/* HAProxy's server status column as an admin state: UP, "UP 1/3",
 * "no check" -> ENABLED; "DOWN", "DOWN 1/2", "DOWN (agent)" -> DOWN;
 * "MAINT", "MAINT (via b/s)", "MAINT (resolution)" -> MAINT; DRAIN ->
 * DRAIN; NOLB -> NOLB. Anything else is DOWN with *known false. */
enum core_admin runtime_status_admin(struct core_str status, bool *known);

/* ---- the poller ---- */

/* Servers that joined or left during one poll: a count and the first
 * names, for one summary line. */
struct runtime_changes {
	unsigned n;
	char names[RUNTIME_SUMMARY_NAMES][2 * 128 + 2]; /* backend/server */
};

enum runtime_state {
	RUNTIME_IDLE = 0,  /* timer armed for the next poll */
	RUNTIME_POLLING,   /* connecting, writing or reading */
	RUNTIME_CLOSING,   /* waiting for the pipe's close callback */
	RUNTIME_STOPPED,
};

struct runtime {
	uv_loop_t *loop;
	struct route *route;
	struct stats *stats; /* runtime_polls, runtime_poll_failures */
	const struct config *cfg;
	char path[108];
	char path_log[240];  /* path quoted for logfmt */
	uint64_t interval_ms;
	enum runtime_state state;
	bool enabled;        /* a socket is configured */
	bool timer_init, pipe_open;
	bool poll_ok;        /* the current poll reached EOF with a header */
	bool reachable;      /* the last poll succeeded */
	bool peers_asked;    /* this poll's command has `show peers` */
	uint64_t peers_ms;   /* when it was last asked; 0: never */
	bool warned;         /* the unreachable socket was logged */
	unsigned failures;   /* in a row: backoff */
	uint64_t poll_started_ms;
	uint32_t gen;        /* poll generation, for seen[] */
	uint32_t *seen;      /* per core endpoint index: gen of its last row */
	size_t seen_cap;
	bool *cfg_missing;   /* per config endpoint: reported missing */
	uv_timer_t timer;
	uv_idle_t resume;    /* applies the rest of a read on the next turns */
	bool resume_init;
	size_t pend_off, pend_len; /* bytes of rbuf not applied yet */
	bool ending;               /* EOF read: the poll's end is being applied */
	int end_cursor;            /* where that goes on (-1: from the start) */
	uint64_t turn_start_ns;    /* this turn's slice (uv_hrtime) */
	unsigned turn_rows;
	uint64_t slices;     /* loop turns answers were applied in */
	uint64_t slices_cut; /* of which ended by the row or time budget */
	uint64_t slice_max_ns; /* the longest of them */
	struct runtime_changes joined, left;
	uv_pipe_t pipe;
	uv_connect_t connect_req;
	uv_write_t write_req;
	/* Counters beyond stats: */
	uint64_t servers_added, servers_removed, rows_unknown_status;
	/* See runtime_create; NULL: nothing. */
	void (*on_first_poll)(struct runtime *rt, bool ok, void *arg);
	void *on_first_poll_arg;
	bool first_poll_done;
	/* Handles runtime_destroy closed whose close callbacks are still due,
	 * and what to call once there are none and rt is freed. */
	unsigned closing;
	void (*on_destroyed)(void *arg);
	void *on_destroyed_arg;
	struct runtime_csv csv;
	char rbuf[65536];
};

/* Called once, when a poller's first poll ends (ok: a complete answer was
 * applied; false: it failed). */
typedef void (*runtime_first_poll_fn)(struct runtime *rt, bool ok, void *arg);

/* Allocates a poller of cfg->runtime_socket, every params.poll_interval_ms
 * into route's core, counting into stats, and starts its first poll at
 * once. An empty socket disables polling (*out still set, rt->enabled
 * false); so does a "tcp:" address (unix sockets only), with a warning.
 * Never blocks: a socket that is missing or refuses is logged once and
 * retried, at the poll interval RUNTIME_FAST_RETRIES times, then with a
 * backoff doubling up to RUNTIME_BACKOFF_MAX_MS, while routing goes on
 * with config endpoints and local in-flight counts. on_first_poll (may be
 * NULL) is for what must wait for HAProxy's view of the servers (the
 * snapshot load); it is not called when polling is disabled. loop, route,
 * stats and cfg must outlive rt. Returns 0, or -ENOMEM or a libuv error
 * with *out NULL (nothing to destroy then). */
int runtime_create(struct runtime **out, uv_loop_t *loop, struct route *route,
		   struct stats *stats, const struct config *cfg,
		   runtime_first_poll_fn on_first_poll, void *arg);

/* Abandons a poll in progress and closes rt's handles; rt is freed once
 * libuv has run their close callbacks (at once when none is open), then
 * done(arg) is called (done may be NULL). Accepts NULL (done not called).
 * A poller replaced by a reload goes this way. */
void runtime_destroy(struct runtime *rt, void (*done)(void *arg), void *arg);

/* Applies one parsed server row to the core at now_ms (what each poll does
 * for every line; for tests): a watched backend's server new to the core
 * joins it, its admin state and scur + qcur (split over its key ids) are
 * synced. Returns true when the row was for a watched backend. */
bool runtime_apply_row(struct runtime *rt, const struct runtime_row *row,
		       uint64_t now_ms);

/* Ends a complete poll (for tests): endpoints of watched backends absent
 * from it leave the core; a config endpoint HAProxy lacks is reported
 * once. Then starts a new generation. */
void runtime_apply_end(struct runtime *rt);

#endif
