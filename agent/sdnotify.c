/* sdnotify.c - systemd service notifications (the only file with sd-daemon.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "log.h"
#include "sdnotify.h"
#include "stats.h"

static uint64_t sdnotify_decisions(const struct stats *st)
{
	uint64_t n = 0;
	for (int r = 0; r < ROUTE_REASON_COUNT; r++)
		n += st->reasons[r];
	return n;
}

static void sdnotify_status(struct sdnotify *n)
{
	uint64_t now = uv_now(n->loop), d = sdnotify_decisions(n->stats);
	double rate = 0;
	if (now > n->last_ms && n->last_ms != 0)
		rate = (double)(d - n->last_decisions) * 1000.0 /
		       (double)(now - n->last_ms);
	n->last_ms = now;
	n->last_decisions = d;
	sd_notifyf(0, "STATUS=%.0f decisions/s, %" PRIu64
		   " decisions, %" PRIu64 " SPOP connections", rate, d,
		   n->stats->conn_active);
}

static void sdnotify_on_status(uv_timer_t *t)
{
	sdnotify_status(t->data);
}

static void sdnotify_on_watchdog(uv_timer_t *t)
{
	(void)t;
	sd_notify(0, "WATCHDOG=1");
}

int sdnotify_init(struct sdnotify *n, uv_loop_t *loop,
		  const struct stats *stats)
{
	*n = (struct sdnotify){ .loop = loop, .stats = stats };
	n->enabled = getenv("NOTIFY_SOCKET") != NULL;
	if (!n->enabled)
		return 0;
	n->last_ms = uv_now(loop);
	n->last_decisions = sdnotify_decisions(stats);
	int r = uv_timer_init(loop, &n->status_timer);
	if (r < 0)
		return r;
	n->status_init = true;
	n->status_timer.data = n;
	uv_timer_start(&n->status_timer, sdnotify_on_status, SDNOTIFY_STATUS_MS,
		       SDNOTIFY_STATUS_MS);
	/* The status handle must not keep a stopping loop alive. */
	uv_unref((uv_handle_t *)&n->status_timer);

	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		r = uv_timer_init(loop, &n->watchdog_timer);
		if (r < 0) {
			sdnotify_finish(n);
			return r;
		}
		n->watchdog_init = true;
		n->watchdog_usec = usec;
		uint64_t ms = usec / 2000;
		if (ms == 0)
			ms = 1;
		uv_timer_start(&n->watchdog_timer, sdnotify_on_watchdog, ms, ms);
		uv_unref((uv_handle_t *)&n->watchdog_timer);
	}
	sd_notifyf(0, "READY=1\nMAINPID=%lu\nSTATUS=started",
		   (unsigned long)uv_os_getpid());
	if (n->watchdog_usec)
		sd_notify(0, "WATCHDOG=1");
	log_info("systemd notified", "watchdog_ms=%" PRIu64,
		 n->watchdog_usec / 1000);
	return 0;
}

void sdnotify_stopping(struct sdnotify *n)
{
	if (n->enabled)
		sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

void sdnotify_reloading(struct sdnotify *n)
{
	struct timespec ts;
	if (!n->enabled)
		return;
	/* systemd 253+ (Type=notify-reload) wants the monotonic time of the
	 * reload with it; older versions ignore the field. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading",
		   (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

void sdnotify_reloaded(struct sdnotify *n)
{
	if (n->enabled) {
		sd_notify(0, "READY=1");
		sdnotify_status(n);
	}
}

void sdnotify_finish(struct sdnotify *n)
{
	if (n->status_init) {
		uv_timer_stop(&n->status_timer);
		uv_close((uv_handle_t *)&n->status_timer, NULL);
		n->status_init = false;
	}
	if (n->watchdog_init) {
		uv_timer_stop(&n->watchdog_timer);
		uv_close((uv_handle_t *)&n->watchdog_timer, NULL);
		n->watchdog_init = false;
	}
}
