/* route.h - the decision behind `route` and the use of `feedback`. */
#ifndef WARMLANE_ROUTE_H
#define WARMLANE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "spop.h"

struct config;

/* Why an endpoint was chosen, as named in the ACK, metrics, logs and docs
 * (ARCHITECTURE.md, "The decision"). ROUTE_RR is the scaffold used until
 * the core is wired in; the others are the core's. */
enum route_reason {
	ROUTE_AFFINITY = 0,
	ROUTE_HASH,
	ROUTE_SPILL,
	ROUTE_P2C,
	ROUTE_COOLDOWN_FALLBACK,
	ROUTE_NO_MODEL,
	ROUTE_NONE,
	ROUTE_RR,
	ROUTE_REASON_COUNT
};

/* Arguments of the `route` message, by their SPOE names. */
enum route_arg {
	ROUTE_ARG_SESSION = 0,
	ROUTE_ARG_PREFIX1,
	ROUTE_ARG_PREFIX2,
	ROUTE_ARG_PREFIX3,
	ROUTE_ARG_INSTALL,
	ROUTE_ARG_CALLER,
	ROUTE_ARG_SRC,
	ROUTE_ARG_MODEL,
	ROUTE_ARG_STREAM,
	ROUTE_ARG_ID,
	ROUTE_ARG_COUNT
};

/* Arguments of the `feedback` message. */
enum route_fb_arg {
	ROUTE_FB_SERVER = 0,
	ROUTE_FB_STATUS,
	ROUTE_FB_TR,
	ROUTE_FB_RETRY_AFTER,
	ROUTE_FB_KEY,
	ROUTE_FB_AKEY,
	ROUTE_FB_STREAM,
	ROUTE_FB_COUNT
};

/* One `route` message. Every argument is optional and of any type: an
 * absent one has type SPOP_DATA_NULL. Views point into the NOTIFY frame
 * and are valid only during route_decide. */
struct route_request {
	struct spop_data args[ROUTE_ARG_COUNT];
	uint64_t now_ms; /* uv_now of the loop */
};

/* The answer. Names point into the configuration (valid until it is
 * replaced); NULL when the variable is not to be set. */
struct route_decision {
	enum route_reason reason;
	const char *backend;
	const char *server;
	const char *key;
	bool has_akey;
	uint64_t akey; /* sent as 16 lower-case hex digits */
};

/* One `feedback` message (same conventions as route_request). */
struct route_feedback {
	struct spop_data args[ROUTE_FB_COUNT];
	uint64_t now_ms;
};

struct route {
	const struct config *cfg;
	uint64_t rr_next; /* round-robin position */
};

/* Binds r to cfg (which must outlive r or be rebound). Returns 0. */
int route_init(struct route *r, const struct config *cfg);

/* Releases what r holds (nothing yet; kept for the core's state). */
void route_finish(struct route *r);

/* Decides one request. Until the core is wired in: round-robin over the
 * endpoints serving req's model (every endpoint when no model is given, an
 * endpoint without models serving every model), reason ROUTE_RR;
 * ROUTE_NO_MODEL with no endpoint when none serves it; ROUTE_NONE when no
 * endpoint is configured. akey is set whenever an identity argument of the
 * ladder is present. Never allocates. */
void route_decide(struct route *r, const struct route_request *req,
		  struct route_decision *out);

/* Takes one feedback into account (called after its ACK is queued). A
 * no-op until the core is wired in. */
void route_feedback(struct route *r, const struct route_feedback *fb);

/* Index of a route argument by exact name, or -1. */
int route_arg_lookup(struct spop_str name);

/* Index of a feedback argument by exact name, or -1. */
int route_fb_arg_lookup(struct spop_str name);

/* The reason's name ("rr", "no_model", ...), or "unknown". */
const char *route_reason_name(enum route_reason reason);

/* The affinity key of req under ladder: the first present rung ("prefix"
 * meaning the longest prefix key present), hashed with the rung so equal
 * values of different rungs differ. Absent: NULL, or an empty STRING or
 * BINARY. Returns true with *key set, false when no rung is present. */
bool route_identity(const struct route_request *req,
		    const enum core_rung *ladder, unsigned ladder_len,
		    uint64_t *key);

#endif
