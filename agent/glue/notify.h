/* notify.h - NOTIFY frames: messages dispatched by name, the ACK built. */
#ifndef WARMLANE_NOTIFY_H
#define WARMLANE_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "route.h"
#include "spop.h"
#include "stats.h"

/* Decisions per one timed for warmlane_decision_duration_seconds (the
 * first is timed, then one in this many). */
#define NOTIFY_TIME_EVERY 16

/* Feedback messages kept per frame to apply after the ACK is queued. */
#define NOTIFY_MAX_DEFERRED 4

/* The variable set by ACKs that have nothing else to say (feedback,
 * unknown messages, an empty NOTIFY): BOOL true. HAProxy 3.1 hangs on an
 * ACK without actions, so there is always one. */
#define NOTIFY_ACK_VAR "ack"

/* Work to do once the ACK is on its way: the feedback messages of the
 * frame (views into the frame's payload: run before the read buffer
 * moves). From notify_answer, fb[i] points into its notify_frame (no copy
 * of a message per feedback: run before that frame changes) or, for the
 * messages past its msgs[], into copy[]; notify_handle copies them all. */
struct notify_deferred {
	const struct route_feedback *fb[NOTIFY_MAX_DEFERRED];
	struct route_feedback copy[NOTIFY_MAX_DEFERRED];
	unsigned n;
};

/* What a NOTIFY needs from the connection. */
struct notify_ctx {
	struct route *route;
	struct stats *stats;
	uint64_t now_ms;  /* uv_now */
	int64_t now_unix_s; /* wall clock (route_wall_s), for Retry-After */
	uint64_t conn_id; /* for log lines */
	bool prefetch;    /* core_prefetch_pays: the map is larger than a cache */
};

/* One message of a NOTIFY, parsed and not yet acted on. */
struct notify_msg {
	enum { NOTIFY_ROUTE, NOTIFY_FEEDBACK, NOTIFY_UNKNOWN } kind;
	struct spop_str name;
	union {
		struct route_request route;
		struct route_feedback fb;
	} u;
};

/* Messages of one frame parsed before any acts: HAProxy sends one per
 * group (warmlane.spoe.conf), so this holds every frame it sends; the
 * messages of a larger frame past these are parsed a second time. */
#define NOTIFY_MAX_MSGS 8

/* A NOTIFY frame parsed whole (notify_parse_frame), not yet answered:
 * views into the frame's payload. */
struct notify_frame {
	struct spop_frame frame;
	struct notify_msg msgs[NOTIFY_MAX_MSGS];
	unsigned nmsg;
	bool more;              /* messages past msgs[], from rest */
	struct spop_reader rest;
	enum core_prefetch stage; /* notify_prefetch's next step */
	bool links;             /* a feedback in msgs[]: it relinks its entry */
};

/* Handles the NOTIFY frame f: each message is dispatched by exact name
 * (`route`, `feedback`; anything else is counted and acknowledged) and
 * the ACK, echoing f's stream-id and frame-id, is written into out[0..cap)
 * (cap: the negotiated max-frame-size + 4 at most). Should the answer not
 * fit, a minimal ACK setting only `ack` is sent instead. Returns the ACK's
 * size, or SPOP_EPROTO with *status (4) for a malformed payload: the whole
 * payload is checked before any message acts, so a refused frame changes
 * nothing (no decision, no in-flight count, no feedback, no counter) and
 * leaves *later empty. Feedback is stored in *later for
 * notify_run_deferred. No allocation. */
ptrdiff_t notify_handle(struct notify_ctx *ctx, const struct spop_frame *f,
			uint8_t *out, size_t cap, struct notify_deferred *later,
			enum spop_status *status);

/* notify_handle in its three steps, for a caller that holds several
 * frames at once (conn.c): notify_parse_frame checks and parses the whole
 * payload into nf (0, or SPOP_EPROTO with *status: nothing changed);
 * notify_prefetch takes each message's next step of loading what it will
 * read in the affinity map (route_prefetch; a step per call, the first
 * at parse time is the caller's; false once the last is taken: the
 * entry for a frame of routes, its LRU neighbours with a feedback), so that
 * the misses of frames parsed ahead overlap with the answers before
 * theirs (worth it only when ctx->prefetch); notify_answer acts and
 * builds the ACK as notify_handle. */
int notify_parse_frame(struct notify_ctx *ctx, const struct spop_frame *f,
		       struct notify_frame *nf, enum spop_status *status);
bool notify_prefetch(struct notify_ctx *ctx, struct notify_frame *nf);
ptrdiff_t notify_answer(struct notify_ctx *ctx, const struct notify_frame *nf,
			uint8_t *out, size_t cap, struct notify_deferred *later,
			enum spop_status *status);

/* Applies the feedback stored by notify_handle, then empties later. */
void notify_run_deferred(struct notify_ctx *ctx,
			 struct notify_deferred *later);

#endif
