/* notify.c - NOTIFY dispatch table and ACK construction. */
#include "notify.h"

#include <inttypes.h>
#include <string.h>
#include <uv.h>

#include "log.h"

/* The ACK being built for one NOTIFY frame. */
struct notify_ack {
	struct spop_writer w;
	bool has_action; /* at least one action appended */
	bool acked;      /* `ack` already set in this ACK */
	const struct spop_frame *frame;
	struct notify_deferred *later;
};

typedef int (*notify_handler_fn)(struct notify_ctx *ctx,
				 struct spop_reader *r, unsigned nargs,
				 struct notify_ack *ack,
				 enum spop_status *status);

static void ack_set_str(struct notify_ack *ack, const char *name,
			const char *v, size_t len)
{
	struct spop_data d = spop_data_string(v, len);
	spop_ack_set_var(&ack->w, SPOP_SCOPE_TXN, name, strlen(name), &d);
	ack->has_action = true;
}

static void ack_set_ack(struct notify_ack *ack)
{
	if (ack->acked)
		return;
	struct spop_data d = spop_data_bool(true);
	spop_ack_set_var(&ack->w, SPOP_SCOPE_TXN, NOTIFY_ACK_VAR,
			 sizeof(NOTIFY_ACK_VAR) - 1, &d);
	ack->has_action = true;
	ack->acked = true;
}

static int notify_route(struct notify_ctx *ctx, struct spop_reader *r,
			unsigned nargs, struct notify_ack *ack,
			enum spop_status *status)
{
	struct route_request req = { .now_ms = ctx->now_ms };
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req.args[i] = spop_data_null();
	for (unsigned i = 0; i < nargs; i++) {
		struct spop_str name;
		struct spop_data val;
		if (spop_arg_next(r, &name, &val, status) != 1)
			return SPOP_EPROTO;
		int k = route_arg_lookup(name);
		if (k >= 0)
			req.args[k] = val; /* a repeated argument: the last wins */
	}

	struct route_decision d;
	/* The decision alone, not the parsing around it: the histogram is
	 * there to catch a policy that stops being microseconds. */
	uint64_t t0 = uv_hrtime();
	route_decide(ctx->route, &req, &d);
	stats_histogram_observe(&ctx->stats->decide_latency, uv_hrtime() - t0);
	ctx->stats->msgs_route++;
	ctx->stats->reasons[d.reason]++;

	if (d.backend != NULL)
		ack_set_str(ack, "backend", d.backend, strlen(d.backend));
	if (d.server != NULL)
		ack_set_str(ack, "server", d.server, strlen(d.server));
	if (d.key != NULL)
		ack_set_str(ack, "key", d.key, strlen(d.key));
	char akey[17];
	if (d.has_akey) {
		snprintf(akey, sizeof(akey), "%016" PRIx64, d.akey);
		ack_set_str(ack, "akey", akey, 16);
	}
	const char *reason = route_reason_name(d.reason);
	ack_set_str(ack, "reason", reason, strlen(reason));

	log_debug("route",
		  "conn=%" PRIu64 " stream_id=%" PRIu64 " frame_id=%" PRIu64
		  " reason=%s backend=%s server=%s",
		  ctx->conn_id, ack->frame->stream_id, ack->frame->frame_id,
		  reason, d.backend != NULL ? d.backend : "-",
		  d.server != NULL ? d.server : "-");
	return 0;
}

static int notify_feedback(struct notify_ctx *ctx, struct spop_reader *r,
			   unsigned nargs, struct notify_ack *ack,
			   enum spop_status *status)
{
	struct route_feedback fb = { .now_ms = ctx->now_ms,
				     .now_unix_s = ctx->now_unix_s };
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	for (unsigned i = 0; i < nargs; i++) {
		struct spop_str name;
		struct spop_data val;
		if (spop_arg_next(r, &name, &val, status) != 1)
			return SPOP_EPROTO;
		int k = route_fb_arg_lookup(name);
		if (k >= 0)
			fb.args[k] = val;
	}
	ctx->stats->msgs_feedback++;
	ack_set_ack(ack);

	/* The ACK goes first (docs/architecture.md, "Data flow"); a frame with
	 * more feedback than fits the deferred list is applied at once. */
	if (ack->later->n < NOTIFY_MAX_DEFERRED)
		ack->later->fb[ack->later->n++] = fb;
	else
		route_feedback(ctx->route, &fb);
	return 0;
}

/* The dispatch table: the integration of the core swaps what these
 * handlers call (route_decide, route_feedback), not the table. */
static const struct {
	const char *name;
	notify_handler_fn fn;
} notify_handlers[] = {
	{ "route", notify_route },
	{ "feedback", notify_feedback },
};

ptrdiff_t notify_handle(struct notify_ctx *ctx, const struct spop_frame *f,
			uint8_t *out, size_t cap, struct notify_deferred *later,
			enum spop_status *status)
{
	struct notify_ack ack = { .frame = f, .later = later };
	struct spop_reader r;
	later->n = 0;
	spop_ack_begin(&ack.w, out, cap, f->stream_id, f->frame_id);
	spop_reader_init(&r, f->payload, f->payload_len);

	for (;;) {
		struct spop_str name;
		unsigned nargs;
		int m = spop_msg_next(&r, &name, &nargs, status);
		if (m == 0)
			break;
		if (m < 0)
			return SPOP_EPROTO;

		notify_handler_fn fn = NULL;
		for (size_t i = 0; i < sizeof(notify_handlers) / sizeof(notify_handlers[0]); i++)
			if (spop_str_eq(name, notify_handlers[i].name))
				fn = notify_handlers[i].fn;
		if (fn != NULL) {
			if (fn(ctx, &r, nargs, &ack, status) < 0)
				return SPOP_EPROTO;
			continue;
		}

		/* Unknown: acknowledged, never a disconnect, so a newer
		 * HAProxy config does not break an older agent. */
		if (spop_msg_skip_args(&r, nargs, status) < 0)
			return SPOP_EPROTO;
		ctx->stats->msgs_unknown++;
		if (log_enabled(LOG_LEVEL_DEBUG)) {
			char q[96];
			log_debug("unknown message", "conn=%" PRIu64 " name=%s",
				  ctx->conn_id,
				  log_quote(q, sizeof(q), (const char *)name.ptr,
					    name.len));
		}
		ack_set_ack(&ack);
	}
	if (!ack.has_action)
		ack_set_ack(&ack);

	ptrdiff_t n = spop_ack_finish(&ack.w);
	if (n > 0)
		return n;

	/* Only names far longer than usual meet a small negotiated frame
	 * size here; HAProxy then balances on its own (fail open). */
	ctx->stats->ack_fallbacks++;
	log_warn("ACK does not fit the frame size; sending a bare ack",
		 "conn=%" PRIu64 " max=%zu", ctx->conn_id, cap);
	ack = (struct notify_ack){ .frame = f, .later = later };
	spop_ack_begin(&ack.w, out, cap, f->stream_id, f->frame_id);
	ack_set_ack(&ack);
	n = spop_ack_finish(&ack.w);
	if (n > 0)
		return n;
	*status = SPOP_ERR_RES;
	return SPOP_EPROTO;
}

void notify_run_deferred(struct notify_ctx *ctx,
			 struct notify_deferred *later)
{
	for (unsigned i = 0; i < later->n; i++)
		route_feedback(ctx->route, &later->fb[i]);
	later->n = 0;
}
