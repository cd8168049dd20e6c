/* notify.c - NOTIFY dispatch table and ACK construction. */
#include "notify.h"

#include <inttypes.h>
#include <string.h>
#include <uv.h>

#include "log.h"

/* Decisions an ACK can carry: each takes at least 16 bytes (its `reason`
 * set-var) of an ACK of at most CONN_FRAME_MAX (2048); one more is the
 * decision whose answer overflowed. */
#define NOTIFY_MAX_DECIDED (2048 / 16 + 1)

_Static_assert(SPOP_DATA_NULL == 0, "a zeroed spop_data is NULL");
_Static_assert((NOTIFY_TIME_EVERY & (NOTIFY_TIME_EVERY - 1)) == 0,
	       "NOTIFY_TIME_EVERY is a power of two");

/* The ACK being built for one NOTIFY frame. */
struct notify_ack {
	struct spop_writer w;
	bool has_action; /* at least one action appended */
	bool acked;      /* `ack` already set in this ACK */
	const struct spop_frame *frame;
	struct notify_deferred *later;
	/* The endpoints decided in w, to take back if the ACK is cut down to
	 * `ack` (no decision once w has overflowed: none could be sent).
	 * NOTIFY_MAX_DECIDED entries, left uninitialised. */
	int *decided;
	unsigned n_decided;
};

static void ack_set_strn(struct notify_ack *ack, const char *name,
			 size_t name_len, const char *v, size_t len)
{
	spop_ack_set_var_str(&ack->w, SPOP_SCOPE_TXN, name, name_len, v, len);
	ack->has_action = true;
}

/* name is a literal: its length from sizeof, not strlen per frame. */
#define ack_set_str(ack, name, v, len) \
	ack_set_strn((ack), "" name, sizeof(name) - 1, (v), (len))

/* The set-var actions `reason` and `shadow_reason` of every reason,
 * encoded once: the same bytes go into every ACK. */
struct notify_preset {
	uint8_t len; /* 0: did not fit, encode it each time */
	uint8_t b[64];
};
static struct notify_preset notify_reason_var[2][ROUTE_REASON_COUNT];
static struct notify_preset notify_ack_var; /* `ack` true */
static bool notify_reason_ready;

static void notify_reason_init(void)
{
	struct spop_data t = spop_data_bool(true);
	struct spop_writer aw;
	spop_writer_init(&aw, notify_ack_var.b, sizeof(notify_ack_var.b));
	spop_ack_set_var(&aw, SPOP_SCOPE_TXN, NOTIFY_ACK_VAR,
			 sizeof(NOTIFY_ACK_VAR) - 1, &t);
	notify_ack_var.len = aw.overflow ? 0 : (uint8_t)aw.len;
	static const char *const var[2] = { "reason", "shadow_reason" };
	for (unsigned v = 0; v < 2; v++) {
		for (unsigned i = 0; i < ROUTE_REASON_COUNT; i++) {
			struct notify_preset *p = &notify_reason_var[v][i];
			const char *name = route_reason_name(i);
			struct spop_data d = spop_data_string(name, strlen(name));
			struct spop_writer w;
			spop_writer_init(&w, p->b, sizeof(p->b));
			spop_ack_set_var(&w, SPOP_SCOPE_TXN, var[v],
					 strlen(var[v]), &d);
			p->len = w.overflow ? 0 : (uint8_t)w.len;
		}
	}
	notify_reason_ready = true;
}

/* Appends `reason` (shadow 0) or `shadow_reason` (1) for reason. */
static void ack_set_reason(struct notify_ack *ack, unsigned shadow,
			   enum route_reason reason)
{
	if (!notify_reason_ready)
		notify_reason_init();
	const struct notify_preset *p =
		(unsigned)reason < ROUTE_REASON_COUNT
			? &notify_reason_var[shadow][reason] : NULL;
	if (p != NULL && p->len > 0) {
		spop_put_bytes(&ack->w, p->b, p->len);
		ack->has_action = true;
		return;
	}
	const char *name = route_reason_name(reason);
	if (shadow)
		ack_set_str(ack, "shadow_reason", name, strlen(name));
	else
		ack_set_str(ack, "reason", name, strlen(name));
}

/* Sets `ack`, from its bytes encoded once (every feedback's answer). */
static void ack_set_ack(struct notify_ack *ack)
{
	if (ack->acked)
		return;
	if (!notify_reason_ready)
		notify_reason_init();
	spop_put_bytes(&ack->w, notify_ack_var.b, notify_ack_var.len);
	ack->has_action = true;
	ack->acked = true;
}

/* Whether the argument at p is named w (its length byte and its bytes):
 * two masked words when 16 bytes remain, else a compare of w->len. */
static inline bool notify_wire_is(const uint8_t *p, const uint8_t *end,
				  const struct route_wire_name *w)
{
	uint64_t a, b;
	if (end - p < 16) /* the message's last argument, often */
		return (size_t)(end - p) >= w->len &&
		       spop_bytes_eq(p, (const char *)w->b, w->len);
	memcpy(&a, p, 8);
	memcpy(&b, p + 8, 8);
	return (((a ^ w->w[0]) & w->m[0]) | ((b ^ w->w[1]) & w->m[1])) == 0;
}

/* Reads nargs arguments of a message into args (count of them): the
 * one the SPOE file sends next (wire[*pos]) is matched on its wire bytes
 * and its value decoded into its place; any other goes through the name
 * lookup (another config's order, an older one's fewer arguments,
 * unknown names), which gives the same indexes. Arguments not sent are
 * NULL; a repeated one: the last wins. */
static inline int notify_parse_args(struct spop_reader *r, unsigned nargs,
				    struct spop_data *args, unsigned count,
				    const struct route_wire_name *wire,
				    const uint8_t *order,
				    const struct route_name *names,
				    enum spop_status *status)
{
	const uint8_t *end = r->end;
	unsigned pos = 0;
	uint32_t seen = 0;
	_Static_assert(ROUTE_ARG_COUNT <= 32 && ROUTE_FB_COUNT <= 32,
		       "argument sets fit the mask");
	for (unsigned i = 0; i < nargs; i++) {
		const uint8_t *p = r->p;
		int k;
		if (pos < count && notify_wire_is(p, end, &wire[pos])) {
			k = order[pos];
			p += wire[pos].len;
			ptrdiff_t n = spop_data_read(p, (size_t)(end - p), &args[k]);
			if (n < 0) {
				*status = SPOP_ERR_INVALID;
				return SPOP_EPROTO;
			}
			r->p = p + n;
			pos++;
		} else {
			struct spop_str name;
			struct spop_data val;
			if (spop_arg_read(r, &name, &val, status) != 1)
				return SPOP_EPROTO;
			k = route_lookup_next(name, names, order, count, &pos);
			if (k < 0)
				continue;
			args[k] = val;
		}
		seen |= 1u << k;
	}
	/* HAProxy sends every argument the SPOE file names: usually none
	 * left, where clearing the array first is a memset per message. */
	for (uint32_t m = ~seen & ((1u << count) - 1); m != 0; m &= m - 1)
		args[__builtin_ctz(m)].type = SPOP_DATA_NULL;
	return 0;
}

/* Reads nargs arguments of a `route` message into req. */
static int notify_parse_route(struct notify_ctx *ctx, struct spop_reader *r,
			      unsigned nargs, struct route_request *req,
			      enum spop_status *status)
{
	req->now_ms = ctx->now_ms;
	req->has_core = false;
	return notify_parse_args(r, nargs, req->args, ROUTE_ARG_COUNT,
				 route_arg_wire, route_arg_order,
				 route_arg_names, status);
}

/* akey as 16 lower-case hex digits (what haplog_akey_parse and the
 * feedback read back), a byte at a time from a table of digit pairs. */
static void ack_set_akey(struct notify_ack *ack, const struct route_decision *d)
{
	static char pairs[256][2];
	static bool pairs_ready;
	char akey[16];
	if (!d->has_akey)
		return;
	if (!pairs_ready) {
		static const char hex[16] = "0123456789abcdef";
		for (unsigned b = 0; b < 256; b++) {
			pairs[b][0] = hex[b >> 4];
			pairs[b][1] = hex[b & 15];
		}
		pairs_ready = true;
	}
	uint64_t v = d->akey;
	for (int i = 7; i >= 0; i--) {
		memcpy(&akey[2 * i], pairs[v & 0xff], 2);
		v >>= 8;
	}
	ack_set_str(ack, "akey", akey, sizeof(akey));
}

/* Shadow mode (docs/shadow.md): nothing HAProxy routes by. shadow_server
 * is "backend/server", what the feedback's `server` (%b/%s) and the log
 * line's be and srv are compared with; the reason goes as shadow_reason,
 * since the example configs act on `reason` (no_model: a 404). akey lets
 * the answers teach the map where the request went. */
static void notify_route_shadow(struct notify_ctx *ctx,
				const struct route_decision *d,
				struct notify_ack *ack)
{
	char path[2 * CONFIG_NAME_MAX + 2];
	if (d->backend != NULL && d->server != NULL) {
		int n = snprintf(path, sizeof(path), "%s/%s", d->backend,
				 d->server);
		/* names are at most CONFIG_NAME_MAX (route_server_add) */
		if (n > 0 && (size_t)n < sizeof(path))
			ack_set_str(ack, "shadow_server", path, (size_t)n);
	}
	ack_set_akey(ack, d);
	ack_set_reason(ack, 1, d->reason);
	const char *reason = route_reason_name(d->reason);
	log_debug("route",
		  "conn=%" PRIu64 " stream_id=%" PRIu64 " frame_id=%" PRIu64
		  " shadow reason=%s backend=%s server=%s",
		  ctx->conn_id, ack->frame->stream_id, ack->frame->frame_id,
		  reason, d->backend != NULL ? d->backend : "-",
		  d->server != NULL ? d->server : "-");
}

static void ack_set_names_each(struct notify_ack *ack,
			       const struct route_decision *d)
{
	if (d->backend != NULL)
		ack_set_str(ack, "backend", d->backend, strlen(d->backend));
	if (d->server != NULL)
		ack_set_str(ack, "server", d->server, strlen(d->server));
	if (d->key != NULL)
		ack_set_str(ack, "key", d->key, strlen(d->key));
}

/* backend, server and key of d's endpoint: the bytes encoded at its first
 * decision since it got its generation (route_preset). */
static void ack_set_names(struct route *r, struct notify_ack *ack,
			  const struct route_decision *d)
{
	if (d->endpoint < 0 || d->endpoint >= ROUTE_PRESETS) {
		ack_set_names_each(ack, d);
		return;
	}
	struct route_preset *p = &r->presets[d->endpoint];
	if (p->gen1 != d->gen + 1) {
		struct notify_ack enc = { .w = { 0 } };
		spop_writer_init(&enc.w, p->b, sizeof(p->b));
		ack_set_names_each(&enc, d);
		p->len = enc.w.overflow ? 0 : (uint16_t)enc.w.len;
		p->gen1 = d->gen + 1;
	}
	if (p->len == 0) {
		ack_set_names_each(ack, d);
		return;
	}
	spop_put_bytes(&ack->w, p->b, p->len);
	ack->has_action = true;
}

static void notify_route(struct notify_ctx *ctx,
			 const struct route_request *req,
			 struct notify_ack *ack)
{
	ctx->stats->msgs_route++;
	/* The answer cannot be sent any more (the ACK will be cut down to
	 * `ack`): no decision, HAProxy balances on its own. */
	if (ack->w.overflow || ack->n_decided == NOTIFY_MAX_DECIDED)
		return;

	struct route_decision d;
	/* The decision alone, not the parsing around it: the histogram is
	 * there to catch a policy that stops being microseconds. The first
	 * decision and one in NOTIFY_TIME_EVERY after it: two clock reads
	 * cost about 50 ns, a thirtieth of a decision with its feedback. */
	if ((ctx->stats->msgs_route & (NOTIFY_TIME_EVERY - 1)) == 1) {
		uint64_t t0 = uv_hrtime();
		route_decide(ctx->route, req, &d);
		stats_histogram_observe(&ctx->stats->decide_latency,
					uv_hrtime() - t0);
	} else {
		route_decide(ctx->route, req, &d);
	}
	ctx->stats->reasons[d.reason]++;
	ack->decided[ack->n_decided++] = d.endpoint;

	if (d.shadow) {
		notify_route_shadow(ctx, &d, ack);
		return;
	}
	ack_set_names(ctx->route, ack, &d);
	ack_set_akey(ack, &d);
	ack_set_reason(ack, 0, d.reason);
	if (d.noretry) {
		/* Its presence is what the config tests (-m found). */
		struct spop_data t = spop_data_bool(true);
		spop_ack_set_var(&ack->w, SPOP_SCOPE_TXN, "noretry",
				 sizeof("noretry") - 1, &t);
	}

	log_debug("route",
		  "conn=%" PRIu64 " stream_id=%" PRIu64 " frame_id=%" PRIu64
		  " reason=%s backend=%s server=%s tier=%u%s",
		  ctx->conn_id, ack->frame->stream_id, ack->frame->frame_id,
		  route_reason_name(d.reason),
		  d.backend != NULL ? d.backend : "-",
		  d.server != NULL ? d.server : "-", d.tier,
		  d.noretry ? " noretry" : "");
}

/* Reads nargs arguments of a `feedback` message into fb. */
static int notify_parse_feedback(struct notify_ctx *ctx,
				 struct spop_reader *r, unsigned nargs,
				 struct route_feedback *fb,
				 enum spop_status *status)
{
	fb->now_ms = ctx->now_ms;
	fb->now_unix_s = ctx->now_unix_s;
	fb->akey_read = 0;
	return notify_parse_args(r, nargs, fb->args, ROUTE_FB_COUNT,
				 route_fb_wire, route_fb_order,
				 route_fb_names, status);
}

/* kept: fb outlives notify_answer (a message of its notify_frame). */
static void notify_feedback(struct notify_ctx *ctx,
			    const struct route_feedback *fb, bool kept,
			    struct notify_ack *ack)
{
	ctx->stats->msgs_feedback++;
	ack_set_ack(ack);

	/* The ACK goes first (docs/architecture.md, "Data flow"); a frame with
	 * more feedback than fits the deferred list is applied at once. */
	struct notify_deferred *later = ack->later;
	if (later->n < NOTIFY_MAX_DEFERRED) {
		if (!kept) {
			later->copy[later->n] = *fb;
			fb = &later->copy[later->n];
		}
		later->fb[later->n++] = fb;
	} else {
		route_feedback(ctx->route, fb);
	}
}

static void notify_unknown(struct notify_ctx *ctx, struct spop_str name,
			   struct notify_ack *ack)
{
	/* Acknowledged, never a disconnect, so a newer HAProxy config does
	 * not break an older agent. */
	ctx->stats->msgs_unknown++;
	if (log_enabled(LOG_LEVEL_DEBUG)) {
		char q[96];
		log_debug("unknown message", "conn=%" PRIu64 " name=%s",
			  ctx->conn_id,
			  log_quote(q, sizeof(q), (const char *)name.ptr,
				    name.len));
	}
	ack_set_ack(ack);
}

/* Reads the next message of r, arguments included, into m (the dispatch
 * by exact name). Returns 1, 0 at the end of the payload, or SPOP_EPROTO
 * with *status. */
static int notify_parse(struct notify_ctx *ctx, struct spop_reader *r,
			struct notify_msg *m, enum spop_status *status)
{
	unsigned nargs;
	int k = spop_msg_next(r, &m->name, &nargs, status);
	if (k <= 0)
		return k;
	if (SPOP_STR_EQ_LIT(m->name, "route")) {
		m->kind = NOTIFY_ROUTE;
		k = notify_parse_route(ctx, r, nargs, &m->u.route, status);
	} else if (SPOP_STR_EQ_LIT(m->name, "feedback")) {
		m->kind = NOTIFY_FEEDBACK;
		k = notify_parse_feedback(ctx, r, nargs, &m->u.fb, status);
	} else {
		m->kind = NOTIFY_UNKNOWN;
		k = spop_msg_skip_args(r, nargs, status);
	}
	return k < 0 ? SPOP_EPROTO : 1;
}

/* The handlers: the integration of the core swaps what these call
 * (route_decide, route_feedback), not the dispatch. */
static void notify_act(struct notify_ctx *ctx, const struct notify_msg *m,
		       bool kept, struct notify_ack *ack)
{
	switch (m->kind) {
	case NOTIFY_ROUTE:
		notify_route(ctx, &m->u.route, ack);
		break;
	case NOTIFY_FEEDBACK:
		notify_feedback(ctx, &m->u.fb, kept, ack);
		break;
	default:
		notify_unknown(ctx, m->name, ack);
		break;
	}
}

int notify_parse_frame(struct notify_ctx *ctx, const struct spop_frame *f,
		       struct notify_frame *nf, enum spop_status *status)
{
	struct notify_msg extra;
	struct spop_reader r;
	if (f != &nf->frame) /* the caller may have decoded it in place */
		nf->frame = *f;
	nf->nmsg = 0;
	nf->more = false;
	nf->stage = CORE_PREFETCH_SLOT;
	nf->links = false;
	if (!route_wire_ready)
		route_wire_init();

	/* The whole payload is parsed before any message acts: a frame is
	 * taken whole or refused whole. A `route` decided before a malformed
	 * message would raise an in-flight count that no ACK, feedback or
	 * log line ever lowers; feedback applied before it would count again
	 * if HAProxy sent it anew. */
	spop_reader_init(&r, f->payload, f->payload_len);
	nf->rest = r;
	for (;;) {
		if (nf->nmsg == NOTIFY_MAX_MSGS && !nf->more) {
			nf->rest = r;
			nf->more = true;
		}
		int m = notify_parse(ctx, &r, nf->more ? &extra : &nf->msgs[nf->nmsg],
				     status);
		if (m == 0)
			return 0;
		if (m < 0)
			return SPOP_EPROTO;
		if (!nf->more)
			nf->links |= nf->msgs[nf->nmsg++].kind == NOTIFY_FEEDBACK;
	}
}

bool notify_prefetch(struct notify_ctx *ctx, struct notify_frame *nf)
{
	for (unsigned i = 0; i < nf->nmsg; i++) {
		struct notify_msg *m = &nf->msgs[i];
		if (m->kind == NOTIFY_ROUTE)
			route_prefetch(ctx->route, &m->u.route, nf->stage);
		else if (m->kind == NOTIFY_FEEDBACK)
			route_fb_prefetch(ctx->route, &m->u.fb, nf->stage);
	}
	/* A decision leaves the LRU list alone: a frame of routes has no
	 * third step to take. */
	return nf->stage++ < (nf->links ? CORE_PREFETCH_LINKS : CORE_PREFETCH_ENTRY);
}

ptrdiff_t notify_answer(struct notify_ctx *ctx, const struct notify_frame *nf,
			uint8_t *out, size_t cap, struct notify_deferred *later,
			enum spop_status *status)
{
	const struct spop_frame *f = &nf->frame;
	int decided[NOTIFY_MAX_DECIDED];
	struct notify_ack ack = { .frame = f, .later = later,
				  .decided = decided };
	struct notify_msg extra;
	struct spop_reader rest = nf->rest;
	later->n = 0;

	spop_ack_begin(&ack.w, out, cap, f->stream_id, f->frame_id);
	for (unsigned i = 0; i < nf->nmsg; i++)
		notify_act(ctx, &nf->msgs[i], true, &ack);
	/* Checked whole by notify_parse_frame: parsing the same bytes again
	 * cannot fail. */
	while (nf->more && notify_parse(ctx, &rest, &extra, status) == 1)
		notify_act(ctx, &extra, false, &ack);
	if (!ack.has_action)
		ack_set_ack(&ack);

	ptrdiff_t n = spop_ack_finish(&ack.w);
	if (n > 0)
		return n;

	/* Only names far longer than usual meet a small negotiated frame
	 * size here; HAProxy then balances on its own (fail open). Every
	 * NOTIFY of the connection meets it again: a line a minute, the
	 * metric counts them all (warmlane_spop_ack_fallbacks_total). */
	static struct log_limit fallback_limit =
		LOG_LIMIT_INIT(LOG_LIMIT_INTERVAL_MS);
	uint64_t held;
	ctx->stats->ack_fallbacks++;
	for (unsigned i = 0; i < ack.n_decided; i++)
		route_take_back(ctx->route, ack.decided[i]);
	if (log_limit_allow(&fallback_limit, ctx->now_ms, &held))
		log_warn("ACK does not fit the frame size; sending a bare ack",
			 "conn=%" PRIu64 " max=%zu suppressed=%" PRIu64,
			 ctx->conn_id, cap, held);
	ack.has_action = false;
	ack.acked = false;
	ack.n_decided = 0;
	spop_ack_begin(&ack.w, out, cap, f->stream_id, f->frame_id);
	ack_set_ack(&ack);
	n = spop_ack_finish(&ack.w);
	if (n > 0)
		return n;
	*status = SPOP_ERR_RES;
	return SPOP_EPROTO;
}

ptrdiff_t notify_handle(struct notify_ctx *ctx, const struct spop_frame *f,
			uint8_t *out, size_t cap, struct notify_deferred *later,
			enum spop_status *status)
{
	struct notify_frame nf;
	later->n = 0;
	if (notify_parse_frame(ctx, f, &nf, status) < 0)
		return SPOP_EPROTO;
	ptrdiff_t n = notify_answer(ctx, &nf, out, cap, later, status);
	/* nf ends here: the deferred feedback is copied out of it. */
	for (unsigned i = 0; i < later->n; i++) {
		if (later->fb[i] != &later->copy[i]) {
			later->copy[i] = *later->fb[i];
			later->fb[i] = &later->copy[i];
		}
	}
	return n;
}

void notify_run_deferred(struct notify_ctx *ctx,
			 struct notify_deferred *later)
{
	for (unsigned i = 0; i < later->n; i++)
		route_feedback(ctx->route, later->fb[i]);
	later->n = 0;
}
