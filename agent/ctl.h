/* ctl.h - the command socket: HAProxy-style line commands that show and explain what the agent decides (docs/ctl.md). */
#ifndef WARMLANE_CTL_H
#define WARMLANE_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct server;

/* Longest command line, its newline excluded: a longer one is answered
 * with an error and the connection closed. */
#define CTL_LINE_MAX 4096
/* Longest answer (one command's output): lists past it are cut at an item
 * and say so. */
#define CTL_ANSWER_MAX (256 * 1024)
/* Answers a connection may leave unread: a client that sends commands and
 * never reads is closed past it. */
#define CTL_QUEUE_MAX (1024 * 1024)
/* Connections at once; one more is told so and closed. */
#define CTL_MAX_CONNS 16
/* A connection without a byte from its client this long is closed. */
#define CTL_IDLE_MS 60000
/* Decisions per second: over the last CTL_RATE_SLOTS - 1 seconds. */
#define CTL_RATE_SLOTS 11

struct ctl_conn;

struct ctl {
	uv_loop_t *loop;
	struct server *srv;        /* route (core, rng) and stats */
	uv_pipe_t pipe;
	uv_timer_t rate_timer;
	char path[108];            /* the socket file we created, or "" */
	unsigned mode;
	char config_path[4096];    /* "" when started on the defaults */
	uint64_t start_ms;         /* uv_now at ctl_create */
	uint64_t idle_ms;          /* CTL_IDLE_MS; tests shorten it */
	struct ctl_conn *conns;
	unsigned n_conns;
	unsigned handles;          /* open handles, conns' included */
	bool closing;
	struct {
		uint64_t ms, decisions;
	} rate[CTL_RATE_SLOTS];
	unsigned rate_n, rate_head; /* samples held, next slot */
	uint64_t commands;          /* lines executed */
	uint64_t errors;            /* answered with an error */
};

/* Creates the command socket at path (mode: its permission bits) on loop
 * for srv (which must outlive it). A socket file already there is replaced
 * only when nothing answers on it. config_path (NULL: defaults) is shown
 * by `show info`. On failure err says why and *out is NULL. Returns 0 or
 * -errno. */
int ctl_create(struct ctl **out, uv_loop_t *loop, struct server *srv,
	       const char *path, unsigned mode, const char *config_path,
	       char *err, size_t errlen);

/* Closes the socket (its file removed) and every connection; memory goes
 * once libuv has closed the handles. Accepts NULL. */
void ctl_destroy(struct ctl *c);

/* Runs one command line (line[0..len), no newline) and writes its answer,
 * ending with an empty line, into out (cap bytes, at least CTL_ANSWER_MAX
 * for whole answers). Returns the answer's length. *close_after is set
 * when the command ends the connection (quit). For tests and for the
 * connections. */
size_t ctl_execute(struct ctl *c, const char *line, size_t len, char *out,
		   size_t cap, bool *close_after);

#endif
