/* route.h - the decision behind `route` and the use of `feedback`. */
#ifndef WARMLANE_ROUTE_H
#define WARMLANE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hint.h"
#include "core.h"
#include "haplog.h"
#include "shadow.h"
#include "spop.h"

struct config;
struct config_endpoint;

/* Why an endpoint was chosen, as named in the ACK, metrics, logs and docs
 * (docs/architecture.md, "The decision"): the core's reasons, same numbers. */
enum route_reason {
	ROUTE_AFFINITY = CORE_REASON_AFFINITY,
	ROUTE_HASH = CORE_REASON_HASH,
	ROUTE_SPILL = CORE_REASON_SPILL,
	ROUTE_P2C = CORE_REASON_P2C,
	ROUTE_COOLDOWN_FALLBACK = CORE_REASON_COOLDOWN_FALLBACK,
	ROUTE_KEY_FALLBACK = CORE_REASON_KEY_FALLBACK,
	ROUTE_NO_MODEL = CORE_REASON_NO_MODEL,
	ROUTE_NONE = CORE_REASON_NONE,
	ROUTE_FAILOVER = CORE_REASON_FAILOVER,
	ROUTE_REASON_COUNT = CORE_REASON_COUNT
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
	/* The shared warm hint (docs/peers.md), all four or none: HAProxy's
	 * table_gpt(0..3) of the key's peers-replicated stick-table entry. */
	ROUTE_ARG_HINT_SRV,  /* the server's numeric id (srv_id) */
	ROUTE_ARG_HINT_AT,   /* when: ms since the epoch, low 32 bits */
	ROUTE_ARG_HINT_AKEY, /* low 32 bits of the akey it was recorded for */
	ROUTE_ARG_HINT_NAME, /* xxh32 of "backend/server" */
	ROUTE_ARG_HINT_PEER, /* optional: written by another HAProxy (its
			      * localpeer) than this one; absent: not told */
	ROUTE_ARG_SIZE,      /* the body's advertised bytes (req.body_size) */
	ROUTE_ARG_TURN,      /* the body's count of user messages, when
			      * HAProxy holds it whole (core_request.turn) */
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
	ROUTE_FB_MODEL, /* optional: lets 404s note a model mismatch */
	/* Shadow mode (docs/shadow.md): txn.warmlane.shadow_server and
	 * shadow_reason echoed back, to compare with `server`. */
	ROUTE_FB_SHADOW,
	ROUTE_FB_SHADOW_REASON,
	ROUTE_FB_ID,    /* optional: unique-id, so a response counts once */
	ROUTE_FB_COUNT
};

/* One `route` message. Every argument is optional and of any type: an
 * absent one has type SPOP_DATA_NULL. Views point into the NOTIFY frame
 * and are valid only during route_decide. */
struct route_request {
	struct spop_data args[ROUTE_ARG_COUNT];
	uint64_t now_ms; /* uv_now of the loop */
	/* Set by route_prefetch: the arguments as the core reads them and
	 * the affinity key, so that route_decide does not convert them
	 * again. The parser clears has_core. */
	bool has_core;
	bool has_akey;
	uint64_t akey;
	struct core_request core;
};

/* The answer. Names are the core's (valid until that endpoint is updated
 * or removed: use them at once); NULL when the variable is not to be set. */
struct route_decision {
	enum route_reason reason;
	const char *backend;
	const char *server;
	const char *key;
	bool has_akey;
	uint64_t akey; /* sent as 16 lower-case hex digits */
	int endpoint;  /* the core's index, -1 for none (route_take_back) */
	uint32_t gen;  /* its generation (core_decision.gen) */
	unsigned tier; /* the endpoint's failover tier, 0 for none */
	/* The backend's retry budget is spent: the ACK sets noretry, and the
	 * example configs' disable-l7-retry rule keeps HAProxy from retrying
	 * this request (but for connection failures). */
	bool noretry;
	/* policy.mode shadow: backend and server name warmlane's would-be
	 * choice, for txn.warmlane.shadow_server only; the ACK sets no
	 * backend, server, key or noretry, and reason as shadow_reason.
	 * endpoint is then -1: the decision took nothing to take back
	 * (core_decision_shadow). */
	bool shadow;
};

/* One `feedback` message (same conventions as route_request). */
struct route_feedback {
	struct spop_data args[ROUTE_FB_COUNT];
	uint64_t now_ms;
	int64_t now_unix_s; /* wall clock, for Retry-After dates only */
	/* The akey argument read once (route_fb_akey): 0 not yet, 1 read
	 * into akey, -1 absent or malformed. The parser clears it. */
	int akey_read;
	uint64_t akey;
};

/* Feedback that taught the core nothing, by cause. */
struct route_fb_stats {
	uint64_t unknown_server; /* server/key not in the pool (or no server) */
	uint64_t bad_status;     /* status absent or not an HTTP status */
	uint64_t bad_tr;         /* tr present but unparsable: used as unknown */
	uint64_t bad_retry_after;/* unparsable Retry-After: default cooldown */
	uint64_t bad_akey;       /* akey not 16 hex digits: ignored */
};

/* Bucket bounds of the log lag histogram, seconds (route_log_stats). */
#define ROUTE_LAG_BUCKETS 8
extern const double route_lag_bounds_s[ROUTE_LAG_BUCKETS];

/* The log input (logsrc.c, route_log_line): datagrams and what they did. */
struct route_log_stats {
	uint64_t received;        /* datagrams read */
	uint64_t parsed;          /* haplog_parse returned HAPLOG_OK */
	uint64_t unparseable;     /* anything else */
	uint64_t errors[8];       /* unparseable by -haplog_status (1..6) */
	uint64_t truncated;       /* datagrams larger than the read buffer */
	uint64_t ends[CORE_END_COUNT]; /* lines used, by termination class */
	uint64_t unrouted;        /* parsed, but warmlane did not route it */
	uint64_t unknown_endpoint;/* routed to an endpoint no longer known */
	uint64_t redispatched;    /* warmlane's server failed, another served */
	uint64_t bad_fields;      /* lines with a malformed optional field */
	/* Lag between a request's end (accept time + Tt, HAProxy's wall
	 * clock) and its line's processing (the agent's). */
	uint64_t lag_buckets[ROUTE_LAG_BUCKETS];
	uint64_t lag_count;
	double lag_sum_s;
	/* Whether the datagrams are in warmlane's format (logsrc.c): counted
	 * per window of LOGSRC_LOG_WINDOW_MS, judged once a window holds
	 * LOGSRC_FORMAT_MIN of them and when it ends with any. */
	uint64_t fmt_window_ms;   /* start of the current window; 0: none */
	uint32_t fmt_ok, fmt_bad; /* parsed and unparseable in it */
	bool format_bad;          /* the last judged window: more unparseable */
	double unparsed_ratio;    /* unparseable share of that window */
};

/* Probes of upstream keys (probe.c). */
struct route_probe_stats {
	uint64_t results[CORE_PROBE_COUNT]; /* by what the probe found */
	uint64_t transport_errors; /* no HTTP answer (within the inconclusive) */
	uint32_t active;           /* probes out now */
};

/* Polls of the engines' own /metrics (engine.c). Per endpoint, the core
 * keeps its own counts (core_endpoint_info.engine_*). */
struct route_engine_stats {
	uint64_t polls;            /* started */
	uint64_t polls_ok;         /* a body with an engine's load */
	uint64_t polls_failed;     /* no answer, not 200, cut, unparseable */
	uint64_t polls_overlapped; /* ticks that found the last poll still out */
	uint64_t info_ok;          /* descriptions read (engine_info) */
	uint64_t info_failed;      /* not read or not fingerprinted */
};

/* One backend's retry budget (budget.c, config retry_budget). Made on the
 * decision path for a backend warmlane routes to (even with the budget
 * off, so that its retries are counted), at most
 * ROUTE_BUDGETS_MAX: a log line only counts in an existing one, so no line
 * can make the table grow. */
#define ROUTE_BUDGETS_MAX 64

struct route_budget {
	char backend[CONFIG_NAME_MAX + 1];
	size_t len;
	struct budget b;
	uint64_t requests;  /* log lines counted: first attempts */
	uint64_t retries;   /* retries those lines took (%rc) */
	uint64_t noretry;   /* route ACKs that set noretry */
	bool spent;         /* at the last decision for it */
};

/* The ACK's set-var actions for an endpoint's backend, server and key,
 * encoded at its first decision (notify.c): the same bytes for each of
 * its decisions while it keeps its generation. Endpoints past
 * ROUTE_PRESETS, and names too long for the bytes, are encoded each
 * time. Beside them, the retry budget of its backend (route_decide),
 * found by name at its first decision in that generation: a budget is
 * never removed, and an endpoint's names never change within one. */
#define ROUTE_PRESETS 128
#define ROUTE_PRESET_BYTES 160
struct route_preset {
	uint32_t gen1;  /* the endpoint's generation + 1; 0: not encoded */
	uint16_t len;   /* 0: did not fit */
	uint16_t budget; /* index in route.budgets, when budget_gen1 */
	uint32_t budget_gen1; /* the generation + 1 it was found for; 0 none */
	uint8_t b[ROUTE_PRESET_BYTES];
};

struct route {
	const struct config *cfg;
	struct core *core;     /* the policy; metrics read it (core_stats...) */
	struct core_rng rng;   /* seeded per process by route_init */
	struct route_fb_stats fb;
	/* At least one log input socket is read (logsrc.c). */
	bool log_input;
	/* A line in warmlane's format arrived (route_log_line): HAProxy does
	 * send them. From then on, with log_input, requests leave the
	 * in-flight count when their line arrives, not at non-streamed
	 * feedback. Before it (a socket open but HAProxy not configured to
	 * write to it), non-streamed feedback still ends requests. */
	bool log_lines;
	struct route_log_stats log;
	struct route_probe_stats probe;
	struct route_engine_stats engine;
	struct shadow_stats shadow; /* shadow mode's comparisons */
	struct route_budget budgets[ROUTE_BUDGETS_MAX];
	unsigned n_budgets;
	uint64_t budgets_full;  /* decisions for a backend past the table */
	uint64_t wall_at_ms;   /* uv_now when wall_s was read (route_wall_s) */
	int64_t wall_s;
	bool wall_valid;
	/* HAProxy's server ids, for the shared warm hint (hint.c). */
	struct hint_ids hints;
	uint64_t wall_ms_at;   /* uv_now when wall_ms was read (route_wall_ms) */
	uint64_t wall_ms;
	bool wall_ms_valid;
	struct route_preset presets[ROUTE_PRESETS];
};

/* Creates r's core from cfg->params and adds cfg's endpoints: one core
 * endpoint per key id of a config endpoint (one without key when it has
 * none). cfg must outlive r. The RNG is seeded from the time and the pid.
 * Returns 0, or -EINVAL (parameters the core refuses) / -ENOMEM with
 * nothing to release. A config endpoint the core refuses is logged and
 * skipped. */
int route_init(struct route *r, const struct config *cfg);

/* Destroys the core; r may be zeroed or finished already. */
void route_finish(struct route *r);

/* Decides one request through core_decide (see route_request_core for the
 * arguments), and whether its backend's retry budget is spent (noretry:
 * only with retry_budget.enabled, the log input read and its lines in
 * warmlane's format). In shadow mode (r->cfg->mode) the decision is only
 * named (route_decision.shadow, core_decision_shadow) and no budget is
 * looked at. Never allocates. */
void route_decide(struct route *r, const struct route_request *req,
		  struct route_decision *out);

/* Starts loading what route_decide (req) or route_feedback (fb) will read
 * in the core's affinity map, one dependent step per stage
 * (core_prefetch); route_prefetch's first stage also converts req's
 * arguments for route_decide. A decision reads the slot and the entry, a
 * feedback also relinks the entry: stages past those do nothing. For a
 * read pass holding several messages (conn.c). Never allocates. */
void route_prefetch(struct route *r, struct route_request *req,
		    enum core_prefetch stage);
void route_fb_prefetch(struct route *r, struct route_feedback *fb,
		       enum core_prefetch stage);

/* Takes back a decision for endpoint (route_decision.endpoint; -1 does
 * nothing) whose answer never reached HAProxy (an ACK cut down to fit the
 * frame size): its in-flight count falls again, as no feedback or log line
 * will ever name it. A HALF_OPEN probe slot it took expires with the
 * breaker window. Never allocates. */
void route_take_back(struct route *r, int endpoint);

/* Takes one feedback into account through core_observe (called after its
 * ACK is queued). server "backend/server" and key name the endpoint; status
 * (integer or decimal STRING), tr (INT64, or STRING as %Tr: "-1" unknown),
 * retry_after (STRING: seconds or HTTP date, against fb->now_unix_s), akey
 * (16 hex digits), stream (BOOL) and model are used when present. Feedback
 * the core cannot use is counted in r->fb, never an error. Without the log
 * input (r->log_input false, or no line in warmlane's format received
 * yet: r->log_lines false), a request that does not stream is complete
 * once its headers are in: it leaves the endpoint's in-flight count here;
 * with it, its log line does that (route_log_line). Feedback carrying
 * shadow_reason (shadow mode: HAProxy chose `server` itself) is compared
 * with shadow (r->shadow) and changes no in-flight count. */
void route_feedback(struct route *r, const struct route_feedback *fb);

/* First attempts and retries in the window of budget i (< r->n_budgets) at
 * now_ms, for metrics. */
void route_budget_counts(const struct route *r, unsigned i, uint64_t now_ms,
			 uint64_t *first, uint64_t *retries);

/* What route_log_line did with a line. */
enum route_log_use {
	ROUTE_LOG_USED = 0,       /* core_complete on warmlane's endpoint */
	ROUTE_LOG_UNROUTED,       /* no warmlane decision (fail open): ignored */
	ROUTE_LOG_UNKNOWN,        /* that endpoint is not (any more) known */
};

/* How a request ended, from the line's termination state (first two
 * characters of %tsc) and retries: C/c (client abort or timeout) ->
 * CLIENT_ABORT; S/s/D (server abort, timeout, or server marked down) during
 * the data phase (D, L) -> SERVER_CUT, before it -> SERVER_FAIL; anything
 * else (normal, or HAProxy's own doing: P, L, R, I, K, U) -> COMPLETE, where
 * the status speaks. */
enum core_end route_log_end(const struct haplog_line *l);

/* Takes one parsed end-of-stream line into account (l from haplog_parse,
 * HAPLOG_OK). The request counts on the endpoint warmlane chose for it
 * (wbe/wsrv/key, what its decision added to in-flight): a line without
 * them is a request warmlane did not route and changes nothing. When
 * HAProxy ended on another server after retries with redispatch, the
 * chosen one failed to connect: SERVER_FAIL with no status for it.
 * feedback_seen is the line's fb (txn.warmlane.ack: the feedback ACK was
 * received) when the chosen server answered. Sets r->log_lines. Updates
 * r->log. Whatever warmlane decided, the line counts in the retry budget of
 * its backend (be), when that backend has one: one first attempt and its
 * rc retries. A shadow line (shr, no wbe/wsrv: docs/shadow.md) counts on
 * the endpoints of the server HAProxy used (be/srv, every key id of it),
 * in-flight untouched (core_completion.shadow), and is compared with sh
 * in r->shadow unless its feedback was (fb). */
enum route_log_use route_log_line(struct route *r, const struct haplog_line *l,
				  uint64_t now_ms);

/* Maps req's SPOE arguments to a core request. Identities: any type; NULL,
 * an empty STRING or BINARY are absent; integers of any width give their
 * value (so INT64 and UINT64 of the same number agree), STRING and BINARY
 * the xxh3 of their bytes, IPV4 and IPV6 of their address bytes (an
 * IPv4-mapped IPv6 as the IPv4). model: a non-empty STRING or BINARY (a
 * view into req), else absent. stream: BOOL true, a non-zero integer or
 * the STRING "true". */
void route_request_core(const struct route_request *req,
			struct core_request *out);

/* The wall clock in seconds, read at most once per distinct now_ms (the
 * loop's uv_now): one clock read per loop iteration, not per message. */
int64_t route_wall_s(struct route *r, uint64_t now_ms);

/* The wall clock in milliseconds since the epoch, read as route_wall_s. */
uint64_t route_wall_ms(struct route *r, uint64_t now_ms);

/* The hint arguments of req (hint_srv, hint_at, hint_akey, hint_name:
 * integers of any width) as a core_hint at wall-clock wall_ms: none when
 * all four are absent (an HAProxy without the hint table, or no entry for
 * the key); counted in r->hints.args and none when only some are present,
 * when no server of this HAProxy has the id under that name (id_mismatch
 * is logged, at most once a minute: the peers' ids differ, see
 * docs/peers.md), when it was recorded longer than affinity_ttl ago (a
 * time in the future, clocks apart, counts as age 0), or when the server
 * has no endpoint in the pool. Never allocates. */
void route_hint(struct route *r, const struct route_request *req,
		uint64_t wall_ms, struct core_hint *out);

/* The config endpoint named backend/server, or NULL. */
const struct config_endpoint *route_config_find(const struct route *r,
						struct core_str backend,
						struct core_str server);

/* Core indexes of server backend/server: one per key id of its config
 * entry (the keyless one without an entry), written to idx[0..max).
 * Returns how many exist in the core (0 when none). */
unsigned route_server_find(const struct route *r, struct core_str backend,
			   struct core_str server, int *idx, unsigned max);

/* The same with "backend/server" in one string (the feedback's `server`
 * argument). 0 when path has no '/' or an empty part. */
unsigned route_server_find_path(const struct route *r, struct core_str path,
				int *idx, unsigned max);

/* Most endpoints (key ids) of one server that a keyless feedback reaches. */
#define ROUTE_FB_MAX_KEYS 64

/* Adds server backend/server to the core, with its config entry's
 * metadata (one endpoint per key) or the defaults (weight 1, every model,
 * no key). Endpoints already there are kept. Returns how many were added,
 * or -errno from core_endpoint_add (those added before stay). */
int route_server_add(struct route *r, struct core_str backend,
		     struct core_str server, uint64_t now_ms);

/* Index of a route argument by exact name, or -1. */
int route_arg_lookup(struct spop_str name);

/* Index of a feedback argument by exact name, or -1. */
int route_fb_arg_lookup(struct spop_str name);

/* The same, for the arguments of one message read in turn: *pos starts at
 * 0 for each message. The name HAProxy sends next when it follows
 * haproxy/warmlane.spoe.conf is tried first, then every name, so any
 * order and any subset give the same indexes as the lookups above. The
 * first try is inline (24 arguments per decision with its feedback): the
 * name tables and the wire order below, the rest in route_lookup_any. */
struct route_name {
	const char *s;
	size_t len;
};
extern const struct route_name route_arg_names[ROUTE_ARG_COUNT];
extern const struct route_name route_fb_names[ROUTE_FB_COUNT];
extern const uint8_t route_arg_order[ROUTE_ARG_COUNT];
extern const uint8_t route_fb_order[ROUTE_FB_COUNT];
int route_lookup_any(struct spop_str name, const struct route_name *names,
		     const uint8_t *order, unsigned count, unsigned *pos);

static inline int route_lookup_next(struct spop_str name,
				    const struct route_name *names,
				    const uint8_t *order, unsigned count,
				    unsigned *pos)
{
	if (*pos < count) {
		const struct route_name *n = &names[order[*pos]];
		if (name.len == n->len && spop_bytes_eq(name.ptr, n->s, n->len))
			return order[(*pos)++];
	}
	return route_lookup_any(name, names, order, count, pos);
}

static inline int route_arg_lookup_next(struct spop_str name, unsigned *pos)
{
	return route_lookup_next(name, route_arg_names, route_arg_order,
				 ROUTE_ARG_COUNT, pos);
}

static inline int route_fb_arg_lookup_next(struct spop_str name,
					   unsigned *pos)
{
	return route_lookup_next(name, route_fb_names, route_fb_order,
				 ROUTE_FB_COUNT, pos);
}

/* The names as they are on the wire, in the SPOE file's order (the
 * length byte, then the bytes, padded with zeroes to 16): a parser
 * compares the next argument with the one expected in two masked 8-byte
 * words, length included, where the lookup above reads the length, then
 * compares (notify.c). Every name fits (at most 15 bytes). */
struct route_wire_name {
	uint64_t w[2];   /* the bytes as two native words */
	uint64_t m[2];   /* the mask of the len bytes */
	uint8_t b[16];
	uint8_t len;     /* 1 + the name's length */
};
extern const struct route_wire_name *const route_arg_wire;
extern const struct route_wire_name *const route_fb_wire;
/* Fills the two tables (zeroed, they would match any name): before the
 * first parse, when route_wire_ready is false. */
extern bool route_wire_ready;
void route_wire_init(void);

/* The reason's name ("affinity", "no_model", ...), or "unknown". */
const char *route_reason_name(enum route_reason reason);

/* The i-th of n shares of a server's count v (its key ids are n core
 * endpoints, the server one engine): the first v % n get one more, so
 * that the shares sum to v. */
static inline uint32_t route_share(uint32_t v, unsigned i, unsigned n)
{
	return v / n + (i < v % n ? 1 : 0);
}

#endif
