/* coalesce.c - spop.coalesce_us: sleeping out a short window before the next poll, so that dense frames share one wake-up. */
#include "coalesce.h"

#include <errno.h>
#include <time.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "config.h"
#include "server.h"

void coalesce_note_sleep(struct coalesce *c, uint64_t asked_ns,
			 uint64_t slept_ns, uint64_t w_ns)
{
	bool late = slept_ns > asked_ns + w_ns / COALESCE_LATE_DIV;
	c->late += ((late ? COALESCE_LATE_ONE : 0) >> COALESCE_LATE_SHIFT) -
		   (c->late >> COALESCE_LATE_SHIFT);
}

bool coalesce_busy(struct coalesce *c)
{
	if (c->late <= COALESCE_LATE_ONE / COALESCE_BUSY_ONE_IN) {
		c->held = 0;
		return false;
	}
	if (++c->held >= COALESCE_PROBE_EVERY) {
		c->held = 0;
		return false; /* the probe */
	}
	return true;
}

static void coalesce_on_prepare(uv_prepare_t *h)
{
	struct coalesce *c = h->data;
	uint64_t w = (uint64_t)c->srv->cfg->coalesce_us * 1000;
	if (w == 0)
		return; /* off: no clock read per iteration */
	uint64_t frames = c->srv->stats.frames[STATS_FRAME_NOTIFY];
	uint64_t served = frames - c->notify_at_poll;
	uint64_t now = uv_hrtime();
	uint64_t since = now - c->poll_ns;
	c->notify_at_poll = frames;
	c->poll_ns = now;
	/* Only after a pass that served a few frames: a wake-up for a timer
	 * or a scrape says nothing of the next frame, and a pass of
	 * COALESCE_FULL_PASS frames has paid for its wake-up already (so a
	 * saturated loop never sleeps). */
	if (served == 0 || served >= COALESCE_FULL_PASS || since >= w)
		return;
	if (coalesce_busy(c)) {
		c->srv->stats.coalesce_busy++;
		return;
	}
#if defined(__linux__)
	/* The thread's timer slack (50 us by default) would stretch every
	 * window by as much. */
	if (!c->slack_set)
		(void)prctl(PR_SET_TIMERSLACK, 1000UL);
#endif
	c->slack_set = 1;
	uint64_t left = w - since;
	struct timespec ts = { (time_t)(left / 1000000000u),
			       (long)(left % 1000000000u) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	c->srv->stats.coalesce_waits++;
	c->poll_ns = uv_hrtime();
	coalesce_note_sleep(c, left, c->poll_ns - now, w);
}

int coalesce_init(struct coalesce *c, struct server *srv)
{
	c->srv = srv;
	c->notify_at_poll = srv->stats.frames[STATS_FRAME_NOTIFY];
	c->poll_ns = uv_hrtime();
	int r = uv_prepare_init(srv->loop, &c->prepare);
	if (r < 0)
		return r;
	c->prepare.data = c;
	uv_prepare_start(&c->prepare, coalesce_on_prepare);
	uv_unref((uv_handle_t *)&c->prepare);
	c->started = 1;
	return 0;
}

void coalesce_finish(struct coalesce *c)
{
	if (!c->started)
		return;
	c->started = 0;
	uv_close((uv_handle_t *)&c->prepare, NULL);
}
