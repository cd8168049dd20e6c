/* coalesce.h - spop.coalesce_us: at most one poll per window while SPOP frames keep coming. */
#ifndef WARMLANE_COALESCE_H
#define WARMLANE_COALESCE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

struct server;

/* At moderate rates every frame gets its own wake-up, and the context
 * switch costs more than the decision (docs/operations.md, Benchmarks).
 * With a window W, a loop iteration that served NOTIFY frames less than W
 * after its previous poll began sleeps out the rest of W before it polls
 * again, so the frames that arrive meanwhile are read and answered in
 * one pass. A frame waits at most W more; frames further apart than W, a
 * loop busy for W already and a pass of COALESCE_FULL_PASS frames or more
 * (its wake-up is paid for: a saturated loop never sleeps) never wait.
 * The window is read from the server's running configuration at every
 * iteration (a reload changes it); 0 is off. */
#define COALESCE_FULL_PASS 16

/* On a busy CPU the window costs more than it saves: the sleep ends late
 * (the thread waits for a CPU after its timer fires), so every exchange
 * waits longer than W, and the frames share passes anyway, because the
 * loop is not run the moment they arrive. A sleep that ends more than
 * W / COALESCE_LATE_DIV after its deadline is late; while an EWMA of the
 * late share (alpha 1 / 2^COALESCE_LATE_SHIFT) is over 1 in
 * COALESCE_BUSY_ONE_IN, the loop polls at once, except one pass in
 * COALESCE_PROBE_EVERY, whose sleep keeps the share current. Measured on
 * an idle core: 3% of the sleeps late; through HAProxy on a host whose
 * cores HAProxy and its clients keep busy: 29% (docs/operations.md). */
#define COALESCE_LATE_DIV 4
#define COALESCE_LATE_SHIFT 4
#define COALESCE_BUSY_ONE_IN 8
#define COALESCE_PROBE_EVERY 32
#define COALESCE_LATE_ONE 65536u /* the share's fixed point: 1.0 */

struct coalesce {
	uv_prepare_t prepare;     /* runs just before each poll */
	struct server *srv;
	uint64_t poll_ns;         /* uv_hrtime when the last poll began */
	uint64_t notify_at_poll;  /* NOTIFY frames received by then */
	uint32_t late;            /* EWMA of the late share, of COALESCE_LATE_ONE */
	uint32_t held;            /* passes not delayed since the last probe */
	int started;
	int slack_set;            /* the thread's timer slack lowered */
};

/* Notes one sleep asked for asked_ns in a window of w_ns that took
 * slept_ns in all. */
void coalesce_note_sleep(struct coalesce *c, uint64_t asked_ns,
			 uint64_t slept_ns, uint64_t w_ns);

/* Whether a pass that could sleep polls at once instead (the CPU is busy
 * by the late share); counts it held. Every COALESCE_PROBE_EVERY-th held
 * pass sleeps all the same. */
bool coalesce_busy(struct coalesce *c);

/* Starts c on srv's loop; its handle does not keep the loop alive.
 * Returns 0 or a libuv error. */
int coalesce_init(struct coalesce *c, struct server *srv);

/* Closes c's handle; c may be zeroed or stopped already. */
void coalesce_finish(struct coalesce *c);

#endif
