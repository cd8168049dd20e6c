/* logsrc.h - the log input: HAProxy's end-of-stream log lines on a unix datagram socket (and UDP on loopback). */
#ifndef WARMLANE_LOGSRC_H
#define WARMLANE_LOGSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct config;
struct route;

/* Datagrams read per readiness callback and socket: at most LOGSRC_BATCH,
 * and no more once the callback has taken LOGSRC_PASS_NS (the line that
 * took it past is the last). The rest waits for the next loop iteration,
 * after the SPOP connections readable with the socket had their turn: a
 * route frame has `timeout processing` (50 ms in the example) to be
 * answered, a line has no deadline. On a busy host a line can take
 * milliseconds of wall time (the agent is preempted): 64 of them in a row
 * once made HAProxy 2.6 give up on the route frames that waited behind
 * them. Lines are not put off until after those frames either: a line
 * that arrived before a frame may end the request whose success the
 * frame's decision needs (the next turn of a conversation, on 2.6). */
#define LOGSRC_BATCH 64
#define LOGSRC_PASS_NS 1000000u
/* logsrc_catch_up's bound in time: the lines it reads were mostly sent
 * before the frames that wait for them, so it may take longer than a
 * readiness callback, but a tenth of the example's `timeout processing`
 * at most (strace of a starved agent: an unbounded catch-up made route
 * frames wait 30 ms behind lines that kept coming). The bound applies
 * from the LOGSRC_CATCH_UP_MIN-th line on: a catch-up preempted on its
 * first line (wall time passes, not its own) used to stop there, leaving
 * behind it the line of the turn the frame continued (e2e agentloop-2.6
 * under ASan, 1 run in about 50: turn 2 by hash; 3 of 5 with a 6 ms
 * stall after each line). The lines queued when a frame is read are
 * about as many as the requests that ended since the last pass: 16 cover
 * a few dozen callers, and take tens of microseconds unpreempted. */
#define LOGSRC_CATCH_UP_NS 5000000u
#define LOGSRC_CATCH_UP_MIN 16
/* Largest datagram read whole (HAProxy's largest `len` is 65535; the
 * example configs use 4096). A longer one is cut and counted. */
#define LOGSRC_BUF 16384
/* Unparseable lines logged per window (their first LOGSRC_LOG_SHOWN bytes,
 * quoted); the others are counted, and their count is logged with the
 * first unparseable line of a later window. */
#define LOGSRC_LOG_BURST 5
#define LOGSRC_LOG_WINDOW_MS 10000
#define LOGSRC_LOG_SHOWN 200
/* Format check (route_log_stats.format_bad): a window is judged early once
 * it holds this many datagrams. When more of them are unparseable than
 * parsed, "log lines are not in warmlane's format" is logged once with a
 * sample, again at most every LOGSRC_FORMAT_REWARN_MS while it lasts. */
#define LOGSRC_FORMAT_MIN 8
#define LOGSRC_FORMAT_REWARN_MS 600000

struct logsrc_sock {
	uv_poll_t poll;
	int fd;                  /* -1: not open */
	bool open;               /* poll handle initialised (needs a close) */
	bool closing;            /* uv_close called: its callback closes fd */
	bool failed;             /* a poll error stopped it: not read again */
	struct logsrc *owner;
};

struct logsrc {
	uv_loop_t *loop;
	struct route *route;
	struct logsrc_sock unix_sock;
	struct logsrc_sock udp_sock;
	uint64_t pass_ns;        /* LOGSRC_PASS_NS (the unit tests lower it) */
	uint64_t catch_up_ns;    /* LOGSRC_CATCH_UP_NS, logsrc_catch_up's */
	char path[108];          /* the unix socket file we bound, or "" */
	unsigned closing;        /* handles still closing */
	/* rate limit of "unparseable log line" messages */
	uint64_t rl_window_ms;
	unsigned rl_logged;
	uint64_t rl_suppressed;
	/* format check: when it was last said (0: never), and the current
	 * window's first unparseable datagram, for the sample */
	uint64_t fmt_warned_ms;
	int fmt_sample_err;
	size_t fmt_sample_len;   /* 0: none in this window */
	size_t fmt_sample_full;  /* its length as received */
	uint8_t fmt_sample[LOGSRC_LOG_SHOWN];
	uint8_t buf[LOGSRC_BUF];
};

/* Opens what cfg->log_input asks for: the unix datagram socket at its path
 * (mode as configured; a stale file is replaced, one another process reads
 * from is not) and, when udp_port is not 0, UDP on 127.0.0.1. Each line
 * read is parsed (proto/haplog.h) and given to route_log_line; counters go
 * to route->log. route->log_input is set while at least one socket is read
 * (libuv stops a socket on a poll error; the last one stopped clears it).
 * Returns 0 (nothing configured is also 0), or -errno with a reason in err:
 * then nothing stays open. ls must stay put until logsrc_finish's handles
 * are closed (the loop has run). */
int logsrc_init(struct logsrc *ls, uv_loop_t *loop, struct route *route,
		const struct config *cfg, char *err, size_t errlen);

/* Closes the sockets (their handles close on the loop) and removes the
 * unix socket file. Clears route->log_input. Safe on a zeroed ls, twice. */
void logsrc_finish(struct logsrc *ls);

/* Reads what the sockets hold now, as a readiness callback would (the
 * same bounds). The server calls it before each read pass of an SPOP
 * connection (server.before_pass): epoll may report a connection before
 * the log socket although HAProxy sent a line first, e.g. the line that
 * ends a conversation's turn before the next turn's route frame, whose
 * decision needs the turn's success. One recv when the sockets are empty;
 * none before HAProxy's first line. arg: the struct logsrc. */
void logsrc_catch_up(void *arg);

/* Parses one datagram and applies it (what the socket callback does for
 * each one; the unit tests call it directly). now_ms: uv_now; wall_ms:
 * the wall clock in ms, for the lag. */
void logsrc_handle(struct logsrc *ls, const uint8_t *p, size_t len,
		   uint64_t now_ms, uint64_t wall_ms);

#endif
