/* coalesce.h - spop.coalesce_us: at most one poll per window while SPOP frames keep coming. */
#ifndef WARMLANE_COALESCE_H
#define WARMLANE_COALESCE_H

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
struct coalesce {
	uv_prepare_t prepare;     /* runs just before each poll */
	struct server *srv;
	uint64_t poll_ns;         /* uv_hrtime when the last poll began */
	uint64_t notify_at_poll;  /* NOTIFY frames received by then */
	int started;
	int slack_set;            /* the thread's timer slack lowered */
};

/* Starts c on srv's loop; its handle does not keep the loop alive.
 * Returns 0 or a libuv error. */
int coalesce_init(struct coalesce *c, struct server *srv);

/* Closes c's handle; c may be zeroed or stopped already. */
void coalesce_finish(struct coalesce *c);

#endif
