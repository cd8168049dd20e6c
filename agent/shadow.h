/* shadow.h - shadow mode's tally: the server HAProxy used against warmlane's would-be choice (docs/shadow.md). */
#ifndef WARMLANE_SHADOW_H
#define WARMLANE_SHADOW_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

/* How HAProxy's pick compares with warmlane's shadow choice. */
enum shadow_match {
	SHADOW_MATCH_YES = 0, /* the same backend/server */
	SHADOW_MATCH_NO,      /* another server (or none: HAProxy's own error) */
	SHADOW_MATCH_NONE,    /* warmlane had no server (no_model, none) */
	SHADOW_MATCH_COUNT
};

#define SHADOW_SEEN_SLOTS 4096u

/* Responses compared in shadow mode, one each: from the feedback message
 * (HAProxy 3.0+), else from the end-of-stream log line (2.6, and HAProxy's
 * own answers, which send no feedback). */
struct shadow_stats {
	uint64_t responses[CORE_REASON_COUNT][SHADOW_MATCH_COUNT];
	/* Compared responses that had a warm entry warmlane would have kept
	 * (reason affinity), and those of them HAProxy sent elsewhere: the
	 * requests whose cache warmlane would have kept. */
	uint64_t warm;
	uint64_t warm_missed;
	/* A shadow answer whose reason is not one of the core's (a forged
	 * log line, a config that logs something else): not compared. */
	uint64_t bad_reason;
	/* Answers of a request already compared (its unique id seen): a
	 * feedback whose ACK reached HAProxy too late, after `timeout
	 * processing`, leaves fb unset in its log line, which would count
	 * it again. */
	uint64_t duplicates;
	/* Hashes of the unique ids compared at the feedback, direct-mapped
	 * (0: empty): the log line that follows finds its own. A slot taken
	 * by a later request only costs that rare late-ACK line its check. */
	uint64_t seen[SHADOW_SEEN_SLOTS];
};

/* "yes", "no", "none", or "unknown". */
const char *shadow_match_name(enum shadow_match m);

/* Counts one response in s. reason: warmlane's shadow_reason (a core
 * reason's name); chosen: its shadow_server, "backend/server" (len 0:
 * none); used_be, used_srv: the server HAProxy used (len 0 or HAProxy's
 * "<NOSRV>": none). Names compare exactly, length first. Returns the
 * match, or -1 for an unknown reason (counted in bad_reason). Never
 * allocates. */
int shadow_count(struct shadow_stats *s, struct core_str reason,
		 struct core_str chosen, struct core_str used_be,
		 struct core_str used_srv);

/* used as "backend/server" in one string (the feedback's `server`
 * argument); no '/' counts as no server. */
int shadow_count_path(struct shadow_stats *s, struct core_str reason,
		      struct core_str chosen, struct core_str used);

/* Whether the request with unique id (HAProxy's %ID: the feedback's `id`,
 * the log line's id; len 0: unknown, never a duplicate) is compared for
 * the first time. from_feedback: its id is remembered for its log line;
 * else (the log line, which comes last) it is forgotten. A false return
 * is counted in s->duplicates. */
bool shadow_first(struct shadow_stats *s, struct core_str id,
		  bool from_feedback);

#endif
