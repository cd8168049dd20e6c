/* shadow.h - shadow mode's tally: the server HAProxy used against warmlane's would-be choice (docs/shadow.md). */
#ifndef WARMLANE_SHADOW_H
#define WARMLANE_SHADOW_H

#include <stdint.h>

#include "core.h"

/* How HAProxy's pick compares with warmlane's shadow choice. */
enum shadow_match {
	SHADOW_MATCH_YES = 0, /* the same backend/server */
	SHADOW_MATCH_NO,      /* another server (or none: HAProxy's own error) */
	SHADOW_MATCH_NONE,    /* warmlane had no server (no_model, none) */
	SHADOW_MATCH_COUNT
};

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

#endif
