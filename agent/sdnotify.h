/* sdnotify.h - systemd service notifications: readiness, stopping, status, watchdog keep-alives. */
#ifndef WARMLANE_SDNOTIFY_H
#define WARMLANE_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct stats;

/* How often STATUS= is refreshed. */
#define SDNOTIFY_STATUS_MS 5000

/* Caller-owned memory. Every call is a no-op when the process was not
 * started by systemd with a notification socket (NOTIFY_SOCKET unset), so
 * the agent runs the same from a shell and in tests. */
struct sdnotify {
	uv_loop_t *loop;
	const struct stats *stats;
	bool enabled;           /* NOTIFY_SOCKET is set */
	bool status_init, watchdog_init;
	uv_timer_t status_timer;
	uv_timer_t watchdog_timer;
	uint64_t watchdog_usec; /* 0: no watchdog asked for */
	uint64_t last_decisions, last_ms;
};

/* Sends READY=1 (call once the listeners are bound) with a first STATUS=,
 * then starts the STATUS= timer (decisions per second from stats, every
 * SDNOTIFY_STATUS_MS) and, when the unit sets WatchdogSec=, WATCHDOG=1
 * keep-alives at half of that interval. stats must outlive n. Returns 0 or
 * -errno from uv_timer_init (nothing left started then). */
int sdnotify_init(struct sdnotify *n, uv_loop_t *loop,
		  const struct stats *stats);

/* STOPPING=1 (SIGTERM received). The keep-alives go on until
 * sdnotify_finish: a slow drain is not a hang. */
void sdnotify_stopping(struct sdnotify *n);

/* RELOADING=1 with MONOTONIC_USEC= before a configuration reload (SIGHUP),
 * READY=1 after it, whether the new file was applied or refused. */
void sdnotify_reloading(struct sdnotify *n);
void sdnotify_reloaded(struct sdnotify *n);

/* Closes the timers. Idempotent; accepts a zeroed n. */
void sdnotify_finish(struct sdnotify *n);

#endif
