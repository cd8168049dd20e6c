/* ctl_cmd.h - inside the command socket: the answer buffer, one parsed command line and the commands, shared by ctl.c and ctl_show.c. */
#ifndef WARMLANE_CTL_CMD_H
#define WARMLANE_CTL_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "route.h"

struct core;

/* Words of one command line. */
#define CTL_MAX_WORDS 24

/* An answer being written: a bounded buffer. */
struct ctl_out {
	char *p;
	size_t len;
	size_t limit; /* items stop here; the trailer may use up to cap */
	size_t cap;
	bool full;    /* something did not fit */
};

/* One word of the line: a view into it. */
struct ctl_word {
	const char *p;
	size_t len;
};

/* The command being run: its words, -json, the time, its answer. */
struct ctl_cmd {
	struct ctl *ctl;
	struct ctl_word w[CTL_MAX_WORDS];
	unsigned n;
	bool json;
	uint64_t now_ms;
	struct ctl_out *o;
};

/* The arguments of a route message given as name=value words (the SPOE
 * names of haproxy/warmlane.spoe.conf), with the types HAProxy sends:
 * prefix1..3 and caller are integers (xxh64) when they read as one, src
 * an address, the others strings. akey=HEX16 (or a bare 16-hex-digit
 * word) names an affinity key directly. */
struct ctl_req {
	struct route_request rr;
	bool has_akey;     /* given directly */
	uint64_t akey;
	unsigned n_args;
};

/* ---- the answer (ctl.c) ---- */

/* Appends, or appends nothing and sets full when it does not fit under
 * the limit. */
void __attribute__((format(printf, 2, 3)))
ctl_out_printf(struct ctl_out *o, const char *fmt, ...);
/* s[0..len) as a JSON string: quotes, backslashes and control bytes
 * escaped, other bytes as they are. */
void ctl_out_json_str(struct ctl_out *o, const char *s, size_t len);
/* A C string as a JSON string; NULL as null. */
void ctl_out_json_cstr(struct ctl_out *o, const char *s);
/* A word of the client's line, for an error message: printable ASCII as
 * it is, anything else as \xHH, at most 64 bytes shown. */
void ctl_out_quoted(struct ctl_out *o, const char *s, size_t len);
/* A double for JSON and text: finite with 3 decimals, else null/"-". */
void ctl_out_num(struct ctl_out *o, double v, bool json);
/* backend/server[key] of core endpoint idx ("-" or null when none). */
void ctl_out_ep_name(struct ctl_out *o, const struct core *core, int idx,
		     bool json);

/* ---- the command line (ctl.c) ---- */

/* Whether w is exactly s. */
bool ctl_word_is(const struct ctl_word *w, const char *s);
/* An error answer; the caller returns right after. */
void __attribute__((format(printf, 2, 3)))
ctl_cmd_error(struct ctl_cmd *cmd, const char *fmt, ...);
/* Reads the words from index from as a ctl_req. Returns 0, or an error
 * answer and -1. */
int ctl_cmd_request(struct ctl_cmd *cmd, unsigned from, struct ctl_req *r);
/* The affinity key of r: given, or from its arguments (core_identity).
 * Returns 0, or an error answer and -1. */
int ctl_cmd_akey(struct ctl_cmd *cmd, const struct ctl_req *r,
		 uint64_t *akey);

/* ---- the commands (ctl_show.c), each writing its answer ---- */

/* Decisions made so far (what the rate sampler records each second). */
uint64_t ctl_decisions(const struct ctl *c);

void ctl_cmd_show_info(struct ctl_cmd *cmd);
void ctl_cmd_show_endpoints(struct ctl_cmd *cmd);
void ctl_cmd_show_affinity(struct ctl_cmd *cmd);
void ctl_cmd_clear_affinity(struct ctl_cmd *cmd);
void ctl_cmd_set_endpoint(struct ctl_cmd *cmd);
void ctl_cmd_explain(struct ctl_cmd *cmd);

#endif
