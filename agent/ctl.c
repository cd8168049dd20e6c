/* ctl.c - the command socket's line commands: the answer buffer, parsing a line and its request, help, the dispatch (ctl_execute). */
#include "ctl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "ctl_cmd.h"
#include "route.h"
#include "server.h"

/* Room kept at the end of an answer for the line saying it was cut. */
#define CTL_TRAILER 256

/* ---- answers: a bounded buffer ------------------------------------------ */

/* Appends, or appends nothing and sets full when it does not fit under
 * the limit. */
void __attribute__((format(printf, 2, 3)))
ctl_out_printf(struct ctl_out *o, const char *fmt, ...)
{
	if (o->full)
		return;
	size_t room = o->limit > o->len ? o->limit - o->len : 0;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->p + o->len, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room) {
		o->full = true;
		if (room > 0)
			o->p[o->len] = '\0';
		return;
	}
	o->len += (size_t)n;
}

/* A JSON string of s (len bytes): quotes, backslashes and control bytes
 * escaped, other bytes as they are (names come from the config and
 * HAProxy). */
void ctl_out_json_str(struct ctl_out *o, const char *s, size_t len)
{
	ctl_out_printf(o, "\"");
	for (size_t i = 0; i < len && !o->full; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			ctl_out_printf(o, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			ctl_out_printf(o, "\\u%04x", ch);
		else
			ctl_out_printf(o, "%c", ch);
	}
	ctl_out_printf(o, "\"");
}

void ctl_out_json_cstr(struct ctl_out *o, const char *s)
{
	if (s == NULL)
		ctl_out_printf(o, "null");
	else
		ctl_out_json_str(o, s, strlen(s));
}

/* A word of the client's line, for an error message: printable ASCII as
 * it is, anything else as \xHH, at most 64 bytes shown. */
void ctl_out_quoted(struct ctl_out *o, const char *s, size_t len)
{
	ctl_out_printf(o, "\"");
	for (size_t i = 0; i < len && i < 64 && !o->full; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			ctl_out_printf(o, "%c", ch);
		else
			ctl_out_printf(o, "\\x%02x", ch);
	}
	if (len > 64)
		ctl_out_printf(o, "...");
	ctl_out_printf(o, "\"");
}

/* A double for JSON and text: finite with 3 decimals, else null/"-". */
void ctl_out_num(struct ctl_out *o, double v, bool json)
{
	if (isfinite(v))
		ctl_out_printf(o, "%.3f", v);
	else
		ctl_out_printf(o, json ? "null" : "-");
}

/* ---- one command line --------------------------------------------------- */

bool ctl_word_is(const struct ctl_word *w, const char *s)
{
	size_t n = strlen(s);
	return w->len == n && memcmp(w->p, s, n) == 0;
}

/* An error answer; the caller returns right after. */
void __attribute__((format(printf, 2, 3)))
ctl_cmd_error(struct ctl_cmd *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cmd->ctl->errors++;
	struct ctl_out *o = cmd->o;
	o->len = 0;
	o->full = false;
	if (cmd->json) {
		ctl_out_printf(o, "{\"error\":");
		ctl_out_json_cstr(o, msg);
		ctl_out_printf(o, "}\n");
	} else {
		ctl_out_printf(o, "error: %s\n", msg);
	}
}

/* Splits line into words (spaces and tabs); "-json" anywhere sets json.
 * Returns 0, or -E2BIG for more than CTL_MAX_WORDS. */
static int cmd_split(struct ctl_cmd *cmd, const char *line, size_t len)
{
	size_t i = 0;
	cmd->n = 0;
	while (i < len) {
		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i == len)
			break;
		size_t start = i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		struct ctl_word w = { line + start, i - start };
		if (ctl_word_is(&w, "-json")) {
			cmd->json = true;
			continue;
		}
		if (cmd->n == CTL_MAX_WORDS)
			return -E2BIG;
		cmd->w[cmd->n++] = w;
	}
	return 0;
}

/* ---- the request of explain / show affinity / clear affinity ------------- */

static bool parse_hex64(const char *p, size_t len, uint64_t *v)
{
	if (len != 16)
		return false;
	uint64_t x = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = p[i];
		unsigned d;
		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			d = (unsigned)(ch - 'A' + 10);
		else
			return false;
		x = x << 4 | d;
	}
	*v = x;
	return true;
}

/* A decimal int64, optional '-': HAProxy's xxh64 is a signed integer. */
static bool parse_i64(const char *p, size_t len, int64_t *v)
{
	char b[24];
	if (len == 0 || len >= sizeof(b))
		return false;
	memcpy(b, p, len);
	b[len] = '\0';
	char *end;
	errno = 0;
	long long x = strtoll(b, &end, 10);
	if (errno != 0 || *end != '\0' || !(b[0] == '-' || (b[0] >= '0' && b[0] <= '9')))
		return false;
	*v = x;
	return true;
}

/* Fills r from words w[from..n). Returns 0, or an error answer and -1. */
int ctl_cmd_request(struct ctl_cmd *cmd, unsigned from, struct ctl_req *r)
{
	*r = (struct ctl_req){ .rr.now_ms = cmd->now_ms };
	for (unsigned i = from; i < cmd->n; i++) {
		const struct ctl_word *w = &cmd->w[i];
		const char *eq = memchr(w->p, '=', w->len);
		if (eq == NULL) {
			if (parse_hex64(w->p, w->len, &r->akey)) {
				r->has_akey = true;
				continue;
			}
			ctl_cmd_error(cmd, "expected NAME=VALUE or an affinity key of 16 hex digits, got %.*s",
				      (int)(w->len > 64 ? 64 : w->len), w->p);
			return -1;
		}
		size_t nlen = (size_t)(eq - w->p);
		const char *v = eq + 1;
		size_t vlen = w->len - nlen - 1;
		if (nlen == 4 && memcmp(w->p, "akey", 4) == 0) {
			if (!parse_hex64(v, vlen, &r->akey)) {
				ctl_cmd_error(cmd, "akey must be 16 hex digits");
				return -1;
			}
			r->has_akey = true;
			continue;
		}
		int a = route_arg_lookup((struct spop_str){ (const uint8_t *)w->p, nlen });
		if (a < 0 || a == ROUTE_ARG_ID) {
			ctl_cmd_error(cmd, "unknown argument %.*s (session, prefix1, prefix2, prefix3, install, caller, src, model, stream, size, turn, akey)",
				      (int)(nlen > 64 ? 64 : nlen), w->p);
			return -1;
		}
		struct spop_data *d = &r->rr.args[a];
		int64_t iv;
		uint8_t ip[16];
		char ipb[64];
		if (a == ROUTE_ARG_SIZE && !parse_i64(v, vlen, &iv)) {
			/* HAProxy sends an integer; a string would be size 0 */
			ctl_cmd_error(cmd, "size must be the body's bytes, a whole number");
			return -1;
		}
		if (a == ROUTE_ARG_TURN && !parse_i64(v, vlen, &iv)) {
			ctl_cmd_error(cmd, "turn must be the count of user messages, a whole number");
			return -1;
		}
		if ((a == ROUTE_ARG_PREFIX1 || a == ROUTE_ARG_PREFIX2 ||
		     a == ROUTE_ARG_PREFIX3 || a == ROUTE_ARG_CALLER ||
		     a == ROUTE_ARG_SIZE || a == ROUTE_ARG_TURN) &&
		    parse_i64(v, vlen, &iv)) {
			d->type = SPOP_DATA_INT64;
			d->u.i64 = iv;
		} else if (a == ROUTE_ARG_SRC && vlen < sizeof(ipb)) {
			memcpy(ipb, v, vlen);
			ipb[vlen] = '\0';
			if (inet_pton(AF_INET, ipb, ip) == 1) {
				d->type = SPOP_DATA_IPV4;
				memcpy(d->u.ipv4, ip, 4);
			} else if (inet_pton(AF_INET6, ipb, ip) == 1) {
				d->type = SPOP_DATA_IPV6;
				memcpy(d->u.ipv6, ip, 16);
			} else {
				d->type = SPOP_DATA_STRING;
				d->u.str = (struct spop_str){ (const uint8_t *)v, vlen };
			}
		} else {
			d->type = SPOP_DATA_STRING;
			d->u.str = (struct spop_str){ (const uint8_t *)v, vlen };
		}
		r->n_args++;
	}
	return 0;
}

/* The affinity key of r: given, or from its arguments (core_identity).
 * Returns 0, or an error answer and -1. */
int ctl_cmd_akey(struct ctl_cmd *cmd, const struct ctl_req *r,
		 uint64_t *akey)
{
	if (r->has_akey) {
		*akey = r->akey;
		return 0;
	}
	struct core_request cr;
	route_request_core(&r->rr, &cr);
	if (r->n_args == 0 || !core_identity(cmd->ctl->srv->route.core, &cr, akey)) {
		ctl_cmd_error(cmd, "no identity: give an affinity key (16 hex digits) or session=, prefix1=..., install=, caller=, src= as the identity ladder reads them");
		return -1;
	}
	return 0;
}

/* ---- endpoint names ----------------------------------------------------- */

void ctl_out_ep_name(struct ctl_out *o, const struct core *core, int idx,
		     bool json)
{
	struct core_endpoint_info in;
	if (idx < 0 || core_endpoint_info(core, idx, 0, &in) < 0) {
		ctl_out_printf(o, json ? "null" : "-");
		return;
	}
	if (json) {
		ctl_out_printf(o, "{\"backend\":");
		ctl_out_json_cstr(o, in.backend);
		ctl_out_printf(o, ",\"server\":");
		ctl_out_json_cstr(o, in.server);
		ctl_out_printf(o, ",\"key\":");
		ctl_out_json_cstr(o, in.key_id);
		ctl_out_printf(o, "}");
		return;
	}
	ctl_out_printf(o, "%s/%s", in.backend, in.server);
	if (in.key_id != NULL)
		ctl_out_printf(o, "[%s]", in.key_id);
}

/* ---- help ---------------------------------------------------- */

static const char ctl_help[] =
	"help                                   this list\n"
	"show info                              version, uptime, config, decisions per second\n"
	"show endpoints                         state, in-flight, EWMAs, breaker, cooldown, keys, samples\n"
	"show affinity <akey>|<name=value>...   the map entry of a key: endpoint, idle, TTL left\n"
	"explain <name=value>...                the decision the core would take now, step by step\n"
	"set endpoint <backend/server> drain|ready  warmlane's own view of a server\n"
	"clear affinity <akey>|<name=value>...  drop a key's map entry\n"
	"prompt                                 interactive mode: a \"> \" prompt after each answer\n"
	"quit                                   close the connection\n"
	"Add -json to any command for a JSON answer. Request arguments are the route\n"
	"message's: session= prefix1= prefix2= prefix3= install= caller= src= model= stream=\n"
	"size= (the body's bytes) turn= (its user messages)\n";

static void cmd_help(struct ctl_cmd *cmd)
{
	if (!cmd->json) {
		ctl_out_printf(cmd->o, "%s", ctl_help);
		return;
	}
	ctl_out_printf(cmd->o, "{\"help\":");
	ctl_out_json_str(cmd->o, ctl_help, sizeof(ctl_help) - 1);
	ctl_out_printf(cmd->o, "}\n");
}

/* ---- dispatch ----------------------------------------------------------- */

size_t ctl_execute(struct ctl *c, const char *line, size_t len, char *out,
		   size_t cap, bool *close_after)
{
	struct ctl_out o = { .p = out, .cap = cap > 1 ? cap - 1 : 0 };
	o.limit = o.cap > CTL_TRAILER ? o.cap - CTL_TRAILER : o.cap;
	struct ctl_cmd cmd = { .ctl = c, .o = &o, .now_ms = uv_now(c->loop) };
	*close_after = false;
	c->commands++;
	if (cap > 0)
		out[0] = '\0';
	if (cmd_split(&cmd, line, len) < 0) {
		ctl_cmd_error(&cmd, "more than %d words", CTL_MAX_WORDS);
	} else if (cmd.n == 0) {
		/* An empty line: an empty answer, as HAProxy gives. */
	} else if (cmd.n == 1 && ctl_word_is(&cmd.w[0], "help")) {
		cmd_help(&cmd);
	} else if (cmd.n == 1 && (ctl_word_is(&cmd.w[0], "quit") || ctl_word_is(&cmd.w[0], "exit"))) {
		*close_after = true;
		return 0;
	} else if (cmd.n == 2 && ctl_word_is(&cmd.w[0], "show") && ctl_word_is(&cmd.w[1], "info")) {
		ctl_cmd_show_info(&cmd);
	} else if (cmd.n == 2 && ctl_word_is(&cmd.w[0], "show") && ctl_word_is(&cmd.w[1], "endpoints")) {
		ctl_cmd_show_endpoints(&cmd);
	} else if (cmd.n >= 2 && ctl_word_is(&cmd.w[0], "show") && ctl_word_is(&cmd.w[1], "affinity")) {
		ctl_cmd_show_affinity(&cmd);
	} else if (cmd.n >= 1 && ctl_word_is(&cmd.w[0], "explain")) {
		ctl_cmd_explain(&cmd);
	} else if (cmd.n >= 2 && ctl_word_is(&cmd.w[0], "set") && ctl_word_is(&cmd.w[1], "endpoint")) {
		ctl_cmd_set_endpoint(&cmd);
	} else if (cmd.n >= 2 && ctl_word_is(&cmd.w[0], "clear") && ctl_word_is(&cmd.w[1], "affinity")) {
		ctl_cmd_clear_affinity(&cmd);
	} else {
		char q[300];
		struct ctl_out qo = { .p = q, .cap = sizeof(q), .limit = sizeof(q) };
		ctl_out_quoted(&qo, cmd.w[0].p, cmd.w[0].len);
		ctl_cmd_error(&cmd, "unknown command %s%s; \"help\" lists them", q,
			      cmd.n > 1 ? " (or arguments)" : "");
	}
	/* Every answer ends with an empty line (HAProxy's CLI does so). */
	o.full = false;
	o.limit = o.cap;
	ctl_out_printf(&o, "\n");
	return o.len;
}
