/* ctl.c - the command socket: line commands in HAProxy's manner (show, explain, set, clear), plain text or -json. */
#include "ctl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "log.h"
#include "route.h"
#include "server.h"
#include "trace.h"
#include "warmlane_version.h"

/* Room kept at the end of an answer for the line saying it was cut. */
#define CTL_TRAILER 256
/* Words of one command line. */
#define CTL_MAX_WORDS 24

/* ---- answers: a bounded buffer ------------------------------------------ */

struct ctl_out {
	char *p;
	size_t len;
	size_t limit; /* items stop here; the trailer may use up to cap */
	size_t cap;
	bool full;    /* something did not fit */
};

/* Appends, or appends nothing and sets full when it does not fit under
 * the limit. */
static void __attribute__((format(printf, 2, 3)))
out_printf(struct ctl_out *o, const char *fmt, ...)
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
static void out_json_str(struct ctl_out *o, const char *s, size_t len)
{
	out_printf(o, "\"");
	for (size_t i = 0; i < len && !o->full; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			out_printf(o, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			out_printf(o, "\\u%04x", ch);
		else
			out_printf(o, "%c", ch);
	}
	out_printf(o, "\"");
}

static void out_json_cstr(struct ctl_out *o, const char *s)
{
	if (s == NULL)
		out_printf(o, "null");
	else
		out_json_str(o, s, strlen(s));
}

/* A word of the client's line, for an error message: printable ASCII as
 * it is, anything else as \xHH, at most 64 bytes shown. */
static void out_quoted(struct ctl_out *o, const char *s, size_t len)
{
	out_printf(o, "\"");
	for (size_t i = 0; i < len && i < 64 && !o->full; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			out_printf(o, "%c", ch);
		else
			out_printf(o, "\\x%02x", ch);
	}
	if (len > 64)
		out_printf(o, "...");
	out_printf(o, "\"");
}

/* A double for JSON and text: finite with 3 decimals, else null/"-". */
static void out_num(struct ctl_out *o, double v, bool json)
{
	if (isfinite(v))
		out_printf(o, "%.3f", v);
	else
		out_printf(o, json ? "null" : "-");
}

/* ---- one command line --------------------------------------------------- */

struct ctl_word {
	const char *p;
	size_t len;
};

struct ctl_cmd {
	struct ctl *ctl;
	struct ctl_word w[CTL_MAX_WORDS];
	unsigned n;
	bool json;
	uint64_t now_ms;
	struct ctl_out *o;
};

static bool word_is(const struct ctl_word *w, const char *s)
{
	size_t n = strlen(s);
	return w->len == n && memcmp(w->p, s, n) == 0;
}

/* An error answer; the caller returns right after. */
static void __attribute__((format(printf, 2, 3)))
cmd_error(struct ctl_cmd *cmd, const char *fmt, ...)
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
		out_printf(o, "{\"error\":");
		out_json_cstr(o, msg);
		out_printf(o, "}\n");
	} else {
		out_printf(o, "error: %s\n", msg);
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
		if (word_is(&w, "-json")) {
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
static int cmd_request(struct ctl_cmd *cmd, unsigned from, struct ctl_req *r)
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
			cmd_error(cmd, "expected NAME=VALUE or an affinity key of 16 hex digits, got %.*s",
				  (int)(w->len > 64 ? 64 : w->len), w->p);
			return -1;
		}
		size_t nlen = (size_t)(eq - w->p);
		const char *v = eq + 1;
		size_t vlen = w->len - nlen - 1;
		if (nlen == 4 && memcmp(w->p, "akey", 4) == 0) {
			if (!parse_hex64(v, vlen, &r->akey)) {
				cmd_error(cmd, "akey must be 16 hex digits");
				return -1;
			}
			r->has_akey = true;
			continue;
		}
		int a = route_arg_lookup((struct spop_str){ (const uint8_t *)w->p, nlen });
		if (a < 0 || a == ROUTE_ARG_ID) {
			cmd_error(cmd, "unknown argument %.*s (session, prefix1, prefix2, prefix3, install, caller, src, model, stream, akey)",
				  (int)(nlen > 64 ? 64 : nlen), w->p);
			return -1;
		}
		struct spop_data *d = &r->rr.args[a];
		int64_t iv;
		uint8_t ip[16];
		char ipb[64];
		if ((a == ROUTE_ARG_PREFIX1 || a == ROUTE_ARG_PREFIX2 ||
		     a == ROUTE_ARG_PREFIX3 || a == ROUTE_ARG_CALLER) &&
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
static int cmd_akey(struct ctl_cmd *cmd, const struct ctl_req *r,
		    uint64_t *akey)
{
	if (r->has_akey) {
		*akey = r->akey;
		return 0;
	}
	struct core_request cr;
	route_request_core(&r->rr, &cr);
	if (r->n_args == 0 || !core_identity(cmd->ctl->srv->route.core, &cr, akey)) {
		cmd_error(cmd, "no identity: give an affinity key (16 hex digits) or session=, prefix1=..., install=, caller=, src= as the identity ladder reads them");
		return -1;
	}
	return 0;
}

/* ---- endpoint names ----------------------------------------------------- */

static void out_ep_name(struct ctl_out *o, const struct core *core, int idx,
			bool json)
{
	struct core_endpoint_info in;
	if (idx < 0 || core_endpoint_info(core, idx, 0, &in) < 0) {
		out_printf(o, json ? "null" : "-");
		return;
	}
	if (json) {
		out_printf(o, "{\"backend\":");
		out_json_cstr(o, in.backend);
		out_printf(o, ",\"server\":");
		out_json_cstr(o, in.server);
		out_printf(o, ",\"key\":");
		out_json_cstr(o, in.key_id);
		out_printf(o, "}");
		return;
	}
	out_printf(o, "%s/%s", in.backend, in.server);
	if (in.key_id != NULL)
		out_printf(o, "[%s]", in.key_id);
}

/* ---- help, show info ---------------------------------------------------- */

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
	"message's: session= prefix1= prefix2= prefix3= install= caller= src= model= stream=\n";

static void cmd_help(struct ctl_cmd *cmd)
{
	if (!cmd->json) {
		out_printf(cmd->o, "%s", ctl_help);
		return;
	}
	out_printf(cmd->o, "{\"help\":");
	out_json_str(cmd->o, ctl_help, sizeof(ctl_help) - 1);
	out_printf(cmd->o, "}\n");
}

static uint64_t ctl_decisions(const struct ctl *c)
{
	struct core_stats st;
	core_stats(c->srv->route.core, &st);
	uint64_t n = 0;
	for (int r = 0; r < CORE_REASON_COUNT; r++)
		n += st.decisions[r];
	return n;
}

/* Over the samples of the last CTL_RATE_SLOTS - 1 seconds. */
static double ctl_rate(const struct ctl *c, uint64_t now_ms, uint64_t now_n)
{
	if (c->rate_n == 0)
		return 0;
	unsigned oldest = (c->rate_head + CTL_RATE_SLOTS - c->rate_n) % CTL_RATE_SLOTS;
	uint64_t ms = c->rate[oldest].ms, n = c->rate[oldest].decisions;
	if (now_ms <= ms || now_n < n)
		return 0;
	return (double)(now_n - n) * 1000.0 / (double)(now_ms - ms);
}

static void cmd_show_info(struct ctl_cmd *cmd)
{
	struct ctl *c = cmd->ctl;
	struct ctl_out *o = cmd->o;
	struct core_stats st;
	core_stats(c->srv->route.core, &st);
	uint64_t n = ctl_decisions(c);
	double rate = ctl_rate(c, cmd->now_ms, n);
	uint64_t up_s = (cmd->now_ms - c->start_ms) / 1000;
	const char *cfg = c->config_path[0] != '\0' ? c->config_path : NULL;
	if (cmd->json) {
		out_printf(o, "{\"version\":");
		out_json_cstr(o, WARMLANE_VERSION);
		out_printf(o, ",\"pid\":%ld,\"uptime_s\":%" PRIu64 ",\"config\":",
			   (long)getpid(), up_s);
		out_json_cstr(o, cfg);
		out_printf(o, ",\"decisions\":%" PRIu64 ",\"decisions_per_s\":", n);
		out_num(o, rate, true);
		out_printf(o, ",\"endpoints\":%u,\"affinity_entries\":%u,"
			   "\"affinity_capacity\":%u,\"spop_connections\":%" PRIu64
			   ",\"command_connections\":%u}\n",
			   st.endpoints, st.affinity_entries, st.affinity_capacity,
			   c->srv->stats.conn_active, c->n_conns);
		return;
	}
	out_printf(o, "version: %s\npid: %ld\nuptime_s: %" PRIu64 "\nconfig: %s\n"
		   "decisions: %" PRIu64 "\ndecisions_per_s: ",
		   WARMLANE_VERSION, (long)getpid(), up_s, cfg != NULL ? cfg : "-",
		   n);
	out_num(o, rate, false);
	out_printf(o, "\nendpoints: %u\naffinity_entries: %u\naffinity_capacity: %u\n"
		   "spop_connections: %" PRIu64 "\ncommand_connections: %u\n",
		   st.endpoints, st.affinity_entries, st.affinity_capacity,
		   c->srv->stats.conn_active, c->n_conns);
}

/* ---- show endpoints ----------------------------------------------------- */

static const char *ep_key_state(const struct core_endpoint_info *in)
{
	if (in->key_id == NULL)
		return "-";
	return in->key_dead ? "dead" : in->key_suspect ? "suspect" : "ok";
}

static void cmd_show_endpoints(struct ctl_cmd *cmd)
{
	const struct core *core = cmd->ctl->srv->route.core;
	struct ctl_out *o = cmd->o;
	unsigned shown = 0, total = 0;
	if (cmd->json)
		out_printf(o, "{\"endpoints\":[");
	else
		out_printf(o, "# backend server key admin view breaker cooldown_left_ms "
			   "in_flight ewma_ms samples ewma_stream_ms samples_stream "
			   "e2e_ms_per_kib e2e_stream_ms_per_kib key_state dead_key_left_ms "
			   "window_ok window_fail decisions\n");
	for (int i = core_endpoint_next(core, -1); i >= 0;
	     i = core_endpoint_next(core, i)) {
		struct core_endpoint_info in;
		if (core_endpoint_info(core, i, cmd->now_ms, &in) < 0)
			continue;
		total++;
		if (o->full)
			continue;
		size_t mark = o->len;
		const char *view = in.disabled ? "disabled" : in.drained ? "drain" : "ready";
		if (cmd->json) {
			out_printf(o, "%s{\"backend\":", shown > 0 ? "," : "");
			out_json_cstr(o, in.backend);
			out_printf(o, ",\"server\":");
			out_json_cstr(o, in.server);
			out_printf(o, ",\"key\":");
			out_json_cstr(o, in.key_id);
			out_printf(o, ",\"admin\":\"%s\",\"view\":\"%s\",\"breaker\":\"%s\","
				   "\"cooldown_left_ms\":%" PRIu64 ",\"in_flight\":%u,"
				   "\"weight\":",
				   core_admin_name(in.admin), view,
				   core_breaker_name(in.breaker), in.cooldown_left_ms,
				   in.in_flight);
			out_num(o, in.weight, true);
			out_printf(o, ",\"ewma_ms\":");
			out_num(o, in.ewma_ms[CORE_KIND_PLAIN], true);
			out_printf(o, ",\"samples\":%u,\"ewma_stream_ms\":",
				   in.samples[CORE_KIND_PLAIN]);
			out_num(o, in.ewma_ms[CORE_KIND_STREAM], true);
			out_printf(o, ",\"samples_stream\":%u,\"e2e_ms_per_kib\":",
				   in.samples[CORE_KIND_STREAM]);
			out_num(o, in.e2e_ewma_ms[CORE_KIND_PLAIN], true);
			out_printf(o, ",\"e2e_samples\":%u,\"e2e_stream_ms_per_kib\":",
				   in.e2e_samples[CORE_KIND_PLAIN]);
			out_num(o, in.e2e_ewma_ms[CORE_KIND_STREAM], true);
			out_printf(o, ",\"e2e_stream_samples\":%u,\"key_state\":\"%s\","
				   "\"dead_key_left_ms\":%" PRIu64 ",\"window_ok\":%u,"
				   "\"window_fail\":%u,\"decisions\":%" PRIu64 "}",
				   in.e2e_samples[CORE_KIND_STREAM], ep_key_state(&in),
				   in.dead_key_left_ms, in.window_ok, in.window_fail,
				   in.decisions);
		} else {
			out_printf(o, "%s %s %s %s %s %s %" PRIu64 " %u ", in.backend,
				   in.server, in.key_id != NULL ? in.key_id : "-",
				   core_admin_name(in.admin), view,
				   core_breaker_name(in.breaker), in.cooldown_left_ms,
				   in.in_flight);
			out_num(o, in.ewma_ms[CORE_KIND_PLAIN], false);
			out_printf(o, " %u ", in.samples[CORE_KIND_PLAIN]);
			out_num(o, in.ewma_ms[CORE_KIND_STREAM], false);
			out_printf(o, " %u ", in.samples[CORE_KIND_STREAM]);
			out_num(o, in.e2e_ewma_ms[CORE_KIND_PLAIN], false);
			out_printf(o, " ");
			out_num(o, in.e2e_ewma_ms[CORE_KIND_STREAM], false);
			out_printf(o, " %s %" PRIu64 " %u %u %" PRIu64 "\n",
				   ep_key_state(&in), in.dead_key_left_ms,
				   in.window_ok, in.window_fail, in.decisions);
		}
		if (o->full) {
			o->len = mark; /* cut at the last whole endpoint */
			o->p[o->len] = '\0';
			continue;
		}
		shown++;
	}
	bool cut = o->full;
	o->full = false;
	o->limit = o->cap;
	if (cmd->json)
		out_printf(o, "],\"shown\":%u,\"total\":%u,\"truncated\":%s}\n",
			   shown, total, cut ? "true" : "false");
	else if (cut)
		out_printf(o, "# truncated: %u of %u endpoints shown (answers are bounded to %d bytes)\n",
			   shown, total, CTL_ANSWER_MAX);
}

/* ---- show affinity, clear affinity -------------------------------------- */

static void cmd_show_affinity(struct ctl_cmd *cmd)
{
	struct ctl_req r;
	uint64_t akey;
	if (cmd_request(cmd, 2, &r) < 0 || cmd_akey(cmd, &r, &akey) < 0)
		return;
	const struct core *core = cmd->ctl->srv->route.core;
	struct ctl_out *o = cmd->o;
	struct core_affinity_record rec;
	bool found = core_affinity_lookup(core, akey, cmd->now_ms, &rec) == 0;
	uint64_t ttl = core_params(core)->affinity_ttl_ms;
	uint64_t left = found && rec.idle_ms < ttl ? ttl - rec.idle_ms : 0;
	if (cmd->json) {
		out_printf(o, "{\"akey\":\"%016" PRIx64 "\",\"entry\":%s", akey,
			   found ? "true" : "false");
		if (found) {
			out_printf(o, ",\"endpoint\":");
			out_ep_name(o, core, rec.endpoint, true);
			out_printf(o, ",\"idle_ms\":%" PRIu64 ",\"ttl_left_ms\":%" PRIu64,
				   rec.idle_ms, left);
		}
		out_printf(o, "}\n");
		return;
	}
	out_printf(o, "akey: %016" PRIx64 "\n", akey);
	if (!found) {
		out_printf(o, "entry: none\n");
		return;
	}
	out_printf(o, "entry: yes\nendpoint: ");
	out_ep_name(o, core, rec.endpoint, false);
	out_printf(o, "\nidle_ms: %" PRIu64 "\nttl_left_ms: %" PRIu64 "\n",
		   rec.idle_ms, left);
}

static void cmd_clear_affinity(struct ctl_cmd *cmd)
{
	struct ctl_req r;
	uint64_t akey;
	if (cmd_request(cmd, 2, &r) < 0 || cmd_akey(cmd, &r, &akey) < 0)
		return;
	bool had = core_affinity_clear(cmd->ctl->srv->route.core, akey);
	log_info("affinity entry cleared on the command socket",
		 "akey=%016" PRIx64 " found=%s", akey, had ? "true" : "false");
	if (cmd->json)
		out_printf(cmd->o, "{\"akey\":\"%016" PRIx64 "\",\"cleared\":%s}\n",
			   akey, had ? "true" : "false");
	else
		out_printf(cmd->o, "akey %016" PRIx64 ": %s\n", akey,
			   had ? "cleared" : "no entry");
}

/* ---- set endpoint ------------------------------------------------------- */

static void cmd_set_endpoint(struct ctl_cmd *cmd)
{
	if (cmd->n != 4 || !(word_is(&cmd->w[3], "drain") || word_is(&cmd->w[3], "ready"))) {
		cmd_error(cmd, "usage: set endpoint <backend/server> drain|ready");
		return;
	}
	bool drain = word_is(&cmd->w[3], "drain");
	struct route *rt = &cmd->ctl->srv->route;
	int idx[ROUTE_FB_MAX_KEYS];
	struct core_str path = { cmd->w[2].p, cmd->w[2].len };
	unsigned n = route_server_find_path(rt, path, idx, ROUTE_FB_MAX_KEYS);
	if (n == 0) {
		cmd_error(cmd, "no endpoint %.*s (backend/server as HAProxy names them)",
			  (int)(path.len > 128 ? 128 : path.len), path.ptr);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		core_endpoint_drain(rt->core, idx[i], drain);
	char q[300];
	log_info(drain ? "endpoint drained on the command socket"
		       : "endpoint ready again on the command socket",
		 "server=%s endpoints=%u", log_quote(q, sizeof(q), path.ptr, path.len), n);
	if (cmd->json) {
		out_printf(cmd->o, "{\"server\":");
		out_json_str(cmd->o, path.ptr, path.len);
		out_printf(cmd->o, ",\"view\":\"%s\",\"endpoints\":%u}\n",
			   drain ? "drain" : "ready", n);
	} else {
		out_printf(cmd->o, "%.*s: %s (%u endpoint%s)\n", (int)path.len,
			   path.ptr, drain ? "drain" : "ready", n, n == 1 ? "" : "s");
	}
}

/* ---- explain ------------------------------------------------------------ */

/* The load bound of an endpoint as within_bound (core/pick.h) states it, for
 * display: the largest in-flight count it may reach with this request. */
static double bound_cap(const struct core_trace *t, double weight)
{
	if (t->total_weight <= 0)
		return 0;
	return ceil(t->load_factor * ((double)t->total_in_flight + 1) * weight /
		    t->total_weight * (1 - 1e-12));
}

static void explain_text(struct ctl_cmd *cmd, const struct core *core,
			 const struct core_trace *t)
{
	struct ctl_out *o = cmd->o;
	const struct core_decision *d = &t->decision;
	out_printf(o, "1. candidates: %u of %u endpoints", t->candidates, t->n_endpoints);
	if (t->model != -1)
		out_printf(o, " (%u serve the model)", t->serving);
	out_printf(o, ", in flight %" PRIu64 ", weight ", t->total_in_flight);
	out_num(o, t->total_weight, false);
	out_printf(o, "\n");
	for (uint32_t i = 0; i < t->n_ep; i++) {
		const struct core_trace_endpoint *x = &t->ep[i];
		out_printf(o, "   ");
		out_ep_name(o, core, x->endpoint, false);
		if (x->why == CORE_TRACE_CANDIDATE)
			out_printf(o, " candidate");
		else
			out_printf(o, " excluded: %s", core_trace_excl_name(x->why));
		out_printf(o, " admin=%s breaker=%s", core_admin_name(x->admin),
			   core_breaker_name(x->breaker));
		if (x->cooldown_left_ms > 0)
			out_printf(o, " cooldown_left_ms=%" PRIu64, x->cooldown_left_ms);
		out_printf(o, " in_flight=%u weight=", x->in_flight);
		out_num(o, x->weight, false);
		out_printf(o, "\n");
	}
	if (t->n_endpoints > t->n_ep)
		out_printf(o, "   (%u more not listed)\n", t->n_endpoints - t->n_ep);
	if (t->candidates > 0) {
		out_printf(o, "   latency median_ms=");
		out_num(o, t->median[0], false);
		out_printf(o, " tolerated_ms=");
		out_num(o, t->tolerated[0], false);
		if (t->use[1]) {
			out_printf(o, " e2e_median_ms_per_kib=");
			out_num(o, t->median[1], false);
			out_printf(o, " e2e_tolerated=");
			out_num(o, t->tolerated[1], false);
		}
		out_printf(o, "\n");
	}
	if (t->has_akey)
		out_printf(o, "2. identity: akey %016" PRIx64 "\n", t->akey);
	else
		out_printf(o, "2. identity: none (power of two choices)\n");
	if (t->has_akey && t->candidates > 0) {
		out_printf(o, "3. affinity: ");
		if (!t->entry) {
			out_printf(o, "no entry\n");
		} else if (t->entry_stale) {
			out_printf(o, "entry for a removed endpoint (dropped at the next decision)\n");
		} else {
			out_printf(o, "entry -> ");
			out_ep_name(o, core, t->entry_endpoint, false);
			out_printf(o, " idle_ms=%" PRIu64 ": ", t->entry_idle_ms);
			if (!t->entry_candidate)
				out_printf(o, "not a candidate\n");
			else if (!t->entry_closed)
				out_printf(o, "breaker not closed\n");
			else if (!t->entry_fast)
				out_printf(o, "too slow (over sticky_tolerance)\n");
			else if (!t->entry_bounded)
				out_printf(o, "over the load bound\n");
			else
				out_printf(o, "warm hit\n");
		}
	}
	if (t->ranked) {
		out_printf(o, "4. rendezvous ranking (place_choices %u)\n", t->place_choices);
		for (uint32_t i = 0; i < t->n_rank; i++) {
			const struct core_trace_rank *r = &t->rank[i];
			out_printf(o, "   %u ", i + 1);
			out_ep_name(o, core, r->endpoint, false);
			out_printf(o, " score=%.6g", r->score);
			if (!r->walked) {
				out_printf(o, " not walked\n");
				continue;
			}
			out_printf(o, " fast=%s in_flight=%u", r->fast ? "yes" : "no",
				   r->in_flight);
			if (r->in_flight < t->load_floor)
				out_printf(o, " under load_floor %u", t->load_floor);
			else
				out_printf(o, " +1 vs bound %.0f", bound_cap(t, r->weight));
			out_printf(o, ": %s cost=", r->bounded ? "within" : "over");
			out_num(o, r->cost, false);
			out_printf(o, "\n");
		}
		if (t->candidates > t->n_rank)
			out_printf(o, "   (%u more not listed)\n", t->candidates - t->n_rank);
		out_printf(o, "   load bound: in_flight + 1 <= ceil(load_factor ");
		out_num(o, t->load_factor, false);
		out_printf(o, " x (in flight %" PRIu64 " + 1) x weight / ", t->total_in_flight);
		out_num(o, t->total_weight, false);
		out_printf(o, "), or in_flight < load_floor %u\n", t->load_floor);
	}
	if (t->p2c) {
		out_printf(o, "5. %s: ", d->reason == CORE_REASON_SPILL ? "spill, power of two choices"
								     : "power of two choices");
		out_ep_name(o, core, t->p2c_a, false);
		out_printf(o, " cost=");
		out_num(o, t->p2c_cost_a, false);
		out_printf(o, " vs ");
		out_ep_name(o, core, t->p2c_b, false);
		out_printf(o, " cost=");
		out_num(o, t->p2c_cost_b, false);
		out_printf(o, "\n");
	}
	out_printf(o, "decision: ");
	out_ep_name(o, core, d->endpoint, false);
	out_printf(o, " reason=%s\n", core_reason_name(d->reason));
}

static void explain_json(struct ctl_cmd *cmd, const struct core *core,
			 const struct core_trace *t)
{
	struct ctl_out *o = cmd->o;
	const struct core_decision *d = &t->decision;
	out_printf(o, "{\"akey\":");
	if (t->has_akey)
		out_printf(o, "\"%016" PRIx64 "\"", t->akey);
	else
		out_printf(o, "null");
	out_printf(o, ",\"candidates\":{\"count\":%u,\"endpoints\":%u,\"serving\":%u,"
		   "\"in_flight\":%" PRIu64 ",\"weight\":",
		   t->candidates, t->n_endpoints, t->serving, t->total_in_flight);
	out_num(o, t->total_weight, true);
	out_printf(o, ",\"list\":[");
	for (uint32_t i = 0; i < t->n_ep; i++) {
		const struct core_trace_endpoint *x = &t->ep[i];
		out_printf(o, "%s{\"endpoint\":", i > 0 ? "," : "");
		out_ep_name(o, core, x->endpoint, true);
		out_printf(o, ",\"status\":\"%s\",\"admin\":\"%s\",\"breaker\":\"%s\","
			   "\"cooldown_left_ms\":%" PRIu64 ",\"in_flight\":%u}",
			   core_trace_excl_name(x->why), core_admin_name(x->admin),
			   core_breaker_name(x->breaker), x->cooldown_left_ms,
			   x->in_flight);
	}
	out_printf(o, "]},\"median_ms\":");
	out_num(o, t->median[0], true);
	out_printf(o, ",\"tolerated_ms\":");
	out_num(o, t->tolerated[0], true);
	out_printf(o, ",\"affinity\":");
	if (!t->entry) {
		out_printf(o, "null");
	} else {
		out_printf(o, "{\"endpoint\":");
		out_ep_name(o, core, t->entry_stale ? -1 : t->entry_endpoint, true);
		out_printf(o, ",\"idle_ms\":%" PRIu64 ",\"candidate\":%s,\"closed\":%s,"
			   "\"fast\":%s,\"within_bound\":%s}",
			   t->entry_idle_ms, t->entry_candidate ? "true" : "false",
			   t->entry_closed ? "true" : "false",
			   t->entry_fast ? "true" : "false",
			   t->entry_bounded ? "true" : "false");
	}
	out_printf(o, ",\"ranking\":");
	if (!t->ranked) {
		out_printf(o, "null");
	} else {
		out_printf(o, "[");
		for (uint32_t i = 0; i < t->n_rank; i++) {
			const struct core_trace_rank *r = &t->rank[i];
			out_printf(o, "%s{\"endpoint\":", i > 0 ? "," : "");
			out_ep_name(o, core, r->endpoint, true);
			out_printf(o, ",\"score\":%.6g,\"walked\":%s", r->score,
				   r->walked ? "true" : "false");
			if (r->walked) {
				out_printf(o, ",\"fast\":%s,\"within_bound\":%s,\"in_flight\":%u,"
					   "\"bound\":%.0f,\"cost\":",
					   r->fast ? "true" : "false",
					   r->bounded ? "true" : "false", r->in_flight,
					   bound_cap(t, r->weight));
				out_num(o, r->cost, true);
			}
			out_printf(o, "}");
		}
		out_printf(o, "],\"load_bound\":{\"load_factor\":");
		out_num(o, t->load_factor, true);
		out_printf(o, ",\"load_floor\":%u,\"place_choices\":%u}", t->load_floor,
			   t->place_choices);
	}
	out_printf(o, ",\"p2c\":");
	if (!t->p2c) {
		out_printf(o, "null");
	} else {
		out_printf(o, "[{\"endpoint\":");
		out_ep_name(o, core, t->p2c_a, true);
		out_printf(o, ",\"cost\":");
		out_num(o, t->p2c_cost_a, true);
		out_printf(o, "},{\"endpoint\":");
		out_ep_name(o, core, t->p2c_b, true);
		out_printf(o, ",\"cost\":");
		out_num(o, t->p2c_cost_b, true);
		out_printf(o, "}]");
	}
	out_printf(o, ",\"decision\":{\"endpoint\":");
	out_ep_name(o, core, d->endpoint, true);
	out_printf(o, ",\"reason\":\"%s\"}}\n", core_reason_name(d->reason));
}

static void cmd_explain(struct ctl_cmd *cmd)
{
	struct ctl_req r;
	if (cmd_request(cmd, 1, &r) < 0)
		return;
	if (r.has_akey) {
		cmd_error(cmd, "explain takes the route arguments (session=, prefix1=, ...), not an affinity key");
		return;
	}
	struct route *rt = &cmd->ctl->srv->route;
	struct core_request cr;
	route_request_core(&r.rr, &cr);
	/* A copy: the draws p2c would make next, without taking them. */
	struct core_rng rng = rt->rng;
	struct core_decision d;
	struct core_trace *t = malloc(sizeof(*t));
	if (t == NULL || core_explain(rt->core, &cr, cmd->now_ms, &rng, &d, t) < 0) {
		free(t);
		cmd_error(cmd, "out of memory");
		return;
	}
	if (cmd->json)
		explain_json(cmd, rt->core, t);
	else
		explain_text(cmd, rt->core, t);
	free(t);
	/* Bounded by CORE_TRACE_MAX lines per step; never cut in practice. */
	if (cmd->o->full) {
		cmd->o->full = false;
		cmd->o->limit = cmd->o->cap;
		out_printf(cmd->o, cmd->json ? "\n" : "# truncated\n");
	}
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
		cmd_error(&cmd, "more than %d words", CTL_MAX_WORDS);
	} else if (cmd.n == 0) {
		/* An empty line: an empty answer, as HAProxy gives. */
	} else if (cmd.n == 1 && word_is(&cmd.w[0], "help")) {
		cmd_help(&cmd);
	} else if (cmd.n == 1 && (word_is(&cmd.w[0], "quit") || word_is(&cmd.w[0], "exit"))) {
		*close_after = true;
		return 0;
	} else if (cmd.n == 2 && word_is(&cmd.w[0], "show") && word_is(&cmd.w[1], "info")) {
		cmd_show_info(&cmd);
	} else if (cmd.n == 2 && word_is(&cmd.w[0], "show") && word_is(&cmd.w[1], "endpoints")) {
		cmd_show_endpoints(&cmd);
	} else if (cmd.n >= 2 && word_is(&cmd.w[0], "show") && word_is(&cmd.w[1], "affinity")) {
		cmd_show_affinity(&cmd);
	} else if (cmd.n >= 1 && word_is(&cmd.w[0], "explain")) {
		cmd_explain(&cmd);
	} else if (cmd.n >= 2 && word_is(&cmd.w[0], "set") && word_is(&cmd.w[1], "endpoint")) {
		cmd_set_endpoint(&cmd);
	} else if (cmd.n >= 2 && word_is(&cmd.w[0], "clear") && word_is(&cmd.w[1], "affinity")) {
		cmd_clear_affinity(&cmd);
	} else {
		char q[300];
		struct ctl_out qo = { .p = q, .cap = sizeof(q), .limit = sizeof(q) };
		out_quoted(&qo, cmd.w[0].p, cmd.w[0].len);
		cmd_error(&cmd, "unknown command %s%s; \"help\" lists them", q,
			  cmd.n > 1 ? " (or arguments)" : "");
	}
	/* Every answer ends with an empty line (HAProxy's CLI does so). */
	o.full = false;
	o.limit = o.cap;
	out_printf(&o, "\n");
	return o.len;
}

/* ---- connections -------------------------------------------------------- */

struct ctl_conn {
	uv_pipe_t pipe;
	uv_timer_t idle;
	struct ctl *ctl;
	struct ctl_conn *next, **pprev;
	unsigned handles;  /* open: the pipe and the timer */
	unsigned writes;   /* in flight */
	bool prompt;
	bool ending;       /* close once the writes are done */
	bool closing;
	size_t in_len;
	char in[CTL_LINE_MAX + 1];
};

struct ctl_wr {
	uv_write_t req;
	struct ctl_conn *conn;
	char buf[];
};

static void ctl_handle_closed(struct ctl *c)
{
	if (--c->handles == 0 && c->closing)
		free(c);
}

static void conn_close_cb(uv_handle_t *h)
{
	struct ctl_conn *k = h->data;
	if (--k->handles > 0)
		return;
	struct ctl *c = k->ctl;
	free(k);
	ctl_handle_closed(c);
}

static void conn_close(struct ctl_conn *k)
{
	if (k->closing)
		return;
	k->closing = true;
	*k->pprev = k->next;
	if (k->next != NULL)
		k->next->pprev = k->pprev;
	k->ctl->n_conns--;
	uv_close((uv_handle_t *)&k->pipe, conn_close_cb);
	uv_close((uv_handle_t *)&k->idle, conn_close_cb);
}

static void conn_write_cb(uv_write_t *req, int status)
{
	struct ctl_wr *wr = container_of(req, struct ctl_wr, req);
	struct ctl_conn *k = wr->conn;
	free(wr);
	k->writes--;
	if (k->closing)
		return;
	if (status < 0 || (k->ending && k->writes == 0))
		conn_close(k);
}

/* Queues len bytes of s. A client that leaves more than CTL_QUEUE_MAX
 * unread is closed. */
static void conn_send(struct ctl_conn *k, const char *s, size_t len)
{
	if (k->closing || len == 0)
		return;
	struct ctl_wr *wr = malloc(sizeof(*wr) + len);
	if (wr == NULL) {
		conn_close(k);
		return;
	}
	memcpy(wr->buf, s, len);
	wr->conn = k;
	uv_buf_t b = uv_buf_init(wr->buf, (unsigned)len);
	int r = uv_write(&wr->req, (uv_stream_t *)&k->pipe, &b, 1, conn_write_cb);
	if (r < 0) {
		free(wr);
		conn_close(k);
		return;
	}
	k->writes++;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&k->pipe) > CTL_QUEUE_MAX) {
		log_warn("command connection closed: its client does not read its answers",
			 "queued=%zu", uv_stream_get_write_queue_size((uv_stream_t *)&k->pipe));
		conn_close(k);
	}
}

/* Answers what was said, then closes once it is written. */
static void conn_end(struct ctl_conn *k, const char *msg)
{
	if (msg != NULL)
		conn_send(k, msg, strlen(msg));
	k->ending = true;
	if (!k->closing) {
		uv_read_stop((uv_stream_t *)&k->pipe);
		if (k->writes == 0)
			conn_close(k);
	}
}

static void conn_line(struct ctl_conn *k, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	bool quit;
	if (len == 6 && memcmp(line, "prompt", 6) == 0) {
		k->prompt = !k->prompt;
		if (k->prompt)
			conn_send(k, "> ", 2);
		return;
	}
	char *out = malloc(CTL_ANSWER_MAX);
	if (out == NULL) {
		conn_end(k, "error: out of memory\n\n");
		return;
	}
	size_t n = ctl_execute(k->ctl, line, len, out, CTL_ANSWER_MAX, &quit);
	conn_send(k, out, n);
	free(out);
	if (quit)
		conn_end(k, NULL);
	else if (k->prompt)
		conn_send(k, "> ", 2);
}

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct ctl_conn *k = h->data;
	(void)suggested;
	*buf = uv_buf_init(k->in + k->in_len, (unsigned)(sizeof(k->in) - k->in_len));
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct ctl_conn *k = s->data;
	(void)buf;
	if (k->closing || k->ending)
		return;
	if (nread < 0) {
		if (nread == UV_EOF && k->in_len > 0) {
			char msg[96];
			snprintf(msg, sizeof(msg),
				 "error: line without newline (%zu bytes) not run\n\n",
				 k->in_len);
			k->ctl->errors++;
			conn_end(k, msg);
		} else if (nread == UV_EOF) {
			conn_end(k, NULL);
		} else {
			conn_close(k);
		}
		return;
	}
	if (nread == 0)
		return;
	uv_timer_again(&k->idle);
	k->in_len += (size_t)nread;
	size_t start = 0;
	for (size_t i = k->in_len - (size_t)nread; i < k->in_len && !k->closing && !k->ending; i++) {
		if (k->in[i] != '\n')
			continue;
		conn_line(k, k->in + start, i - start);
		start = i + 1;
	}
	if (k->closing || k->ending)
		return;
	memmove(k->in, k->in + start, k->in_len - start);
	k->in_len -= start;
	if (k->in_len == sizeof(k->in)) {
		char msg[96];
		snprintf(msg, sizeof(msg),
			 "error: line longer than %d bytes; closing\n\n", CTL_LINE_MAX);
		k->ctl->errors++;
		conn_end(k, msg);
	}
}

static void conn_idle_cb(uv_timer_t *t)
{
	struct ctl_conn *k = t->data;
	conn_close(k);
}

static void ctl_refused_close_cb(uv_handle_t *h)
{
	struct ctl *c = h->data;
	free(h);
	ctl_handle_closed(c);
}

static void ctl_on_connection(uv_stream_t *ls, int status)
{
	struct ctl *c = ls->data;
	if (status < 0 || c->closing)
		return;
	struct ctl_conn *k = calloc(1, sizeof(*k));
	if (k == NULL || c->n_conns >= CTL_MAX_CONNS) {
		/* Taken and closed: libuv stops watching a listener whose
		 * connection is not accepted. */
		free(k);
		uv_pipe_t *p = malloc(sizeof(*p));
		if (p == NULL || uv_pipe_init(c->loop, p, 0) < 0) {
			free(p);
			return;
		}
		p->data = c;
		c->handles++;
		if (uv_accept(ls, (uv_stream_t *)p) == 0) {
			static const char msg[] = "error: too many command connections\n\n";
			int fd;
			if (uv_fileno((uv_handle_t *)p, &fd) == 0 &&
			    write(fd, msg, sizeof(msg) - 1) < 0) {
				/* a refusal need not be heard */
			}
		}
		uv_close((uv_handle_t *)p, ctl_refused_close_cb);
		return;
	}
	k->ctl = c;
	uv_pipe_init(c->loop, &k->pipe, 0);
	uv_timer_init(c->loop, &k->idle);
	k->pipe.data = k;
	k->idle.data = k;
	k->handles = 2;
	c->handles++;
	k->next = c->conns;
	k->pprev = &c->conns;
	if (c->conns != NULL)
		c->conns->pprev = &k->next;
	c->conns = k;
	c->n_conns++;
	if (uv_accept(ls, (uv_stream_t *)&k->pipe) < 0 ||
	    uv_read_start((uv_stream_t *)&k->pipe, conn_alloc_cb, conn_read_cb) < 0) {
		conn_close(k);
		return;
	}
	uv_timer_start(&k->idle, conn_idle_cb, c->idle_ms, c->idle_ms);
}

/* ---- the socket --------------------------------------------------------- */

static void ctl_on_rate(uv_timer_t *t)
{
	struct ctl *c = t->data;
	c->rate[c->rate_head].ms = uv_now(c->loop);
	c->rate[c->rate_head].decisions = ctl_decisions(c);
	c->rate_head = (c->rate_head + 1) % CTL_RATE_SLOTS;
	if (c->rate_n < CTL_RATE_SLOTS)
		c->rate_n++;
}

static void ctl_close_cb(uv_handle_t *h)
{
	ctl_handle_closed(h->data);
}

int ctl_start(struct ctl **out, uv_loop_t *loop, struct server *srv,
	      const char *path, unsigned mode, const char *config_path,
	      char *err, size_t errlen)
{
	*out = NULL;
	if (strlen(path) >= sizeof(((struct ctl *)0)->path)) {
		snprintf(err, errlen, "%s: socket path too long", path);
		return -ENAMETOOLONG;
	}
	int r = server_unix_prepare(path, err, errlen);
	if (r < 0)
		return r;
	struct ctl *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	c->loop = loop;
	c->srv = srv;
	c->mode = mode;
	c->idle_ms = CTL_IDLE_MS;
	c->start_ms = uv_now(loop);
	if (config_path != NULL)
		snprintf(c->config_path, sizeof(c->config_path), "%s", config_path);
	uv_pipe_init(loop, &c->pipe, 0);
	uv_timer_init(loop, &c->rate_timer);
	c->pipe.data = c;
	c->rate_timer.data = c;
	c->handles = 2;
	/* Born with the requested mode at most, as the SPOP socket. */
	mode_t old = umask((mode_t)(~mode & 0777));
	r = uv_pipe_bind(&c->pipe, path);
	umask(old);
	if (r < 0) {
		/* libuv turns ENOENT into EACCES here: say which it is. */
		char dir[sizeof(c->path)];
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/');
		struct stat st;
		if (slash != NULL && slash != dir)
			*slash = '\0';
		if (slash != NULL && slash != dir && stat(dir, &st) < 0 && errno == ENOENT)
			snprintf(err, errlen, "%s: cannot bind: the directory %s does not exist",
				 path, dir);
		else
			snprintf(err, errlen, "%s: cannot bind: %s", path, uv_strerror(r));
		goto fail;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	if (chmod(path, (mode_t)mode) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: chmod %04o: %s", path, mode, strerror(-r));
		goto fail;
	}
	r = uv_listen((uv_stream_t *)&c->pipe, 16, ctl_on_connection);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot listen: %s", path, uv_strerror(r));
		goto fail;
	}
	ctl_on_rate(&c->rate_timer);
	uv_timer_start(&c->rate_timer, ctl_on_rate, 1000, 1000);
	/* Neither keeps the loop running: the SPOP side decides when the
	 * agent stops. */
	uv_unref((uv_handle_t *)&c->rate_timer);
	*out = c;
	return 0;
fail:
	ctl_close(c);
	return r;
}

void ctl_close(struct ctl *c)
{
	if (c == NULL || c->closing)
		return;
	c->closing = true;
	while (c->conns != NULL)
		conn_close(c->conns);
	if (c->path[0] != '\0') {
		unlink(c->path);
		c->path[0] = '\0';
	}
	uv_close((uv_handle_t *)&c->pipe, ctl_close_cb);
	uv_close((uv_handle_t *)&c->rate_timer, ctl_close_cb);
}
