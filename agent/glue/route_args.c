/* route_args.c - SPOE arguments read: the names and their wire order, the typed readers (whatever type HAProxy sends), a route message into a core request. */
#include <inttypes.h>
#include <string.h>

#include "route.h"
#include "route_int.h"

_Static_assert((int)ROUTE_REASON_COUNT == (int)CORE_REASON_COUNT,
	       "route reasons mirror the core's");

/* Argument names with their lengths, so that a lookup compares lengths
 * first and never strlen's a literal per frame. */
#define ROUTE_NAME(x) { x, sizeof(x) - 1 }

const struct route_name route_arg_names[ROUTE_ARG_COUNT] = {
	[ROUTE_ARG_SESSION] = ROUTE_NAME("session"),
	[ROUTE_ARG_PREFIX1] = ROUTE_NAME("prefix1"),
	[ROUTE_ARG_PREFIX2] = ROUTE_NAME("prefix2"),
	[ROUTE_ARG_PREFIX3] = ROUTE_NAME("prefix3"),
	[ROUTE_ARG_INSTALL] = ROUTE_NAME("install"),
	[ROUTE_ARG_CALLER] = ROUTE_NAME("caller"),
	[ROUTE_ARG_SRC] = ROUTE_NAME("src"),
	[ROUTE_ARG_MODEL] = ROUTE_NAME("model"),
	[ROUTE_ARG_STREAM] = ROUTE_NAME("stream"),
	[ROUTE_ARG_ID] = ROUTE_NAME("id"),
	[ROUTE_ARG_HINT_SRV] = ROUTE_NAME("hint_srv"),
	[ROUTE_ARG_HINT_AT] = ROUTE_NAME("hint_at"),
	[ROUTE_ARG_HINT_AKEY] = ROUTE_NAME("hint_akey"),
	[ROUTE_ARG_HINT_NAME] = ROUTE_NAME("hint_name"),
	[ROUTE_ARG_HINT_PEER] = ROUTE_NAME("hint_peer"),
	[ROUTE_ARG_SIZE] = ROUTE_NAME("size"),
	[ROUTE_ARG_TURN] = ROUTE_NAME("turn"),
};

const struct route_name route_fb_names[ROUTE_FB_COUNT] = {
	[ROUTE_FB_SERVER] = ROUTE_NAME("server"),
	[ROUTE_FB_STATUS] = ROUTE_NAME("status"),
	[ROUTE_FB_TR] = ROUTE_NAME("tr"),
	[ROUTE_FB_RETRY_AFTER] = ROUTE_NAME("retry_after"),
	[ROUTE_FB_KEY] = ROUTE_NAME("key"),
	[ROUTE_FB_AKEY] = ROUTE_NAME("akey"),
	[ROUTE_FB_STREAM] = ROUTE_NAME("stream"),
	[ROUTE_FB_MODEL] = ROUTE_NAME("model"),
	[ROUTE_FB_SHADOW] = ROUTE_NAME("shadow"),
	[ROUTE_FB_SHADOW_REASON] = ROUTE_NAME("shadow_reason"),
	[ROUTE_FB_ID] = ROUTE_NAME("id"),
};

/* The order of the `args` lines of haproxy/warmlane.spoe.conf, in which
 * HAProxy sends them; arguments the file does not send (model in
 * feedback) come last. */
const uint8_t route_arg_order[ROUTE_ARG_COUNT] = {
	ROUTE_ARG_SESSION, ROUTE_ARG_PREFIX1, ROUTE_ARG_PREFIX2,
	ROUTE_ARG_PREFIX3, ROUTE_ARG_INSTALL, ROUTE_ARG_CALLER,
	ROUTE_ARG_SRC, ROUTE_ARG_MODEL, ROUTE_ARG_STREAM, ROUTE_ARG_ID,
	ROUTE_ARG_HINT_SRV, ROUTE_ARG_HINT_AT, ROUTE_ARG_HINT_AKEY,
	ROUTE_ARG_HINT_NAME, ROUTE_ARG_HINT_PEER, ROUTE_ARG_SIZE,
	ROUTE_ARG_TURN,
};

const uint8_t route_fb_order[ROUTE_FB_COUNT] = {
	ROUTE_FB_SERVER, ROUTE_FB_STATUS, ROUTE_FB_TR, ROUTE_FB_RETRY_AFTER,
	ROUTE_FB_KEY, ROUTE_FB_AKEY, ROUTE_FB_STREAM, ROUTE_FB_SHADOW,
	ROUTE_FB_SHADOW_REASON, ROUTE_FB_ID, ROUTE_FB_MODEL,
};

static struct route_wire_name route_wire[ROUTE_ARG_COUNT + ROUTE_FB_COUNT];

static void route_wire_set(struct route_wire_name *w, const struct route_name *n)
{
	uint8_t m[16] = { 0 };
	_Static_assert(sizeof(w->b) == 16, "two words");
	/* Every name fits: 13 bytes at most, and test_notify's
	 * notify_wire_names_fit fails for a name longer than 15 (cut here, it
	 * would match a shorter name on the wire). */
	size_t len = n->len < 15 ? n->len : 15;
	memset(w->b, 0, sizeof(w->b));
	w->b[0] = (uint8_t)len;
	memcpy(w->b + 1, n->s, len);
	memset(m, 0xff, len + 1);
	memcpy(w->w, w->b, 16);
	memcpy(w->m, m, 16);
	w->len = (uint8_t)(len + 1);
}

bool route_wire_ready;

void route_wire_init(void)
{
	for (unsigned i = 0; i < ROUTE_ARG_COUNT; i++)
		route_wire_set(&route_wire[i], &route_arg_names[route_arg_order[i]]);
	for (unsigned i = 0; i < ROUTE_FB_COUNT; i++)
		route_wire_set(&route_wire[ROUTE_ARG_COUNT + i],
			       &route_fb_names[route_fb_order[i]]);
	route_wire_ready = true;
}

const struct route_wire_name *const route_arg_wire = route_wire;
const struct route_wire_name *const route_fb_wire = route_wire + ROUTE_ARG_COUNT;

static bool route_name_is(struct spop_str v, const struct route_name *n)
{
	return v.len == n->len && spop_bytes_eq(v.ptr, n->s, n->len);
}

/* Every name, for a name not where the SPOE file puts it (another
 * config's order, an older one's fewer arguments); *pos moves past the
 * match, so the arguments after a missing or reordered one are found
 * first time again. An unknown name leaves *pos as it was. */
int route_lookup_any(struct spop_str name, const struct route_name *names,
		     const uint8_t *order, unsigned count, unsigned *pos)
{
	for (unsigned i = 0; i < count; i++) {
		if (route_name_is(name, &names[order[i]])) {
			*pos = i + 1;
			return order[i];
		}
	}
	return -1;
}

int route_arg_lookup(struct spop_str name)
{
	unsigned pos = ROUTE_ARG_COUNT;
	return route_arg_lookup_next(name, &pos);
}

int route_fb_arg_lookup(struct spop_str name)
{
	unsigned pos = ROUTE_FB_COUNT;
	return route_fb_arg_lookup_next(name, &pos);
}

const char *route_reason_name(enum route_reason reason)
{
	if ((unsigned)reason >= ROUTE_REASON_COUNT)
		return "unknown";
	return core_reason_name((enum core_reason)reason);
}

/* ---- the typed readers ------------------------------------------------ */

static bool route_arg_present(const struct spop_data *d)
{
	switch (d->type) {
	case SPOP_DATA_NULL:
		return false;
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		/* An empty sample (a missing header through set-var-fmt, say)
		 * identifies nobody. */
		return d->u.str.len > 0;
	default:
		return true;
	}
}

/* A 64-bit id of the value, not of its encoding: a prefix key HAProxy
 * sends as INT64 (xxh64) is used as it is, and agrees with the same number
 * as UINT64. The core hashes it again with the rung. */
static struct core_id route_arg_id(const struct spop_data *d)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					      0xff, 0xff };
	struct core_id id = { .present = route_arg_present(d) };
	if (!id.present)
		return id;
	switch (d->type) {
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		id.hash = core_hash_bytes(d->u.str.ptr, d->u.str.len);
		break;
	case SPOP_DATA_IPV4:
		id.hash = core_hash_bytes(d->u.ipv4, 4);
		break;
	case SPOP_DATA_IPV6:
		/* The same client over a dual-stack listener. */
		if (memcmp(d->u.ipv6, v4mapped, sizeof(v4mapped)) == 0)
			id.hash = core_hash_bytes(d->u.ipv6 + 12, 4);
		else
			id.hash = core_hash_bytes(d->u.ipv6, 16);
		break;
	case SPOP_DATA_BOOL:
		id.hash = d->u.b;
		break;
	case SPOP_DATA_INT32:
		id.hash = (uint64_t)(int64_t)d->u.i32;
		break;
	case SPOP_DATA_UINT32:
		id.hash = d->u.u32;
		break;
	case SPOP_DATA_INT64:
		id.hash = (uint64_t)d->u.i64;
		break;
	default:
		id.hash = d->u.u64;
		break;
	}
	return id;
}

/* A size in bytes as whole KiB, saturated; 0 for none, a negative one
 * or another type (core_request.size_kib). */
static uint32_t route_arg_kib(const struct spop_data *d)
{
	int64_t v;
	if (!route_arg_int(d, &v) || v <= 0)
		return 0;
	return (uint64_t)v / 1024 > UINT32_MAX ? UINT32_MAX :
						 (uint32_t)((uint64_t)v / 1024);
}

/* A turn count, saturated; 0 for none, a negative one or another type
 * (core_request.turn). */
static uint16_t route_arg_turn(const struct spop_data *d)
{
	int64_t v;
	if (!route_arg_int(d, &v) || v <= 0)
		return 0;
	return v > UINT16_MAX ? UINT16_MAX : (uint16_t)v;
}

void route_request_core(const struct route_request *req,
			struct core_request *out)
{
	/* Field by field, not a compound literal: that is zeroed whole
	 * (the hint's endpoint array too) on the stack and copied out. The
	 * core reads the hint only when present, and identity 0 says the
	 * akey is not given. */
	const struct spop_data *a = req->args;
	out->session = route_arg_id(&a[ROUTE_ARG_SESSION]);
	out->prefix[0] = route_arg_id(&a[ROUTE_ARG_PREFIX1]);
	out->prefix[1] = route_arg_id(&a[ROUTE_ARG_PREFIX2]);
	out->prefix[2] = route_arg_id(&a[ROUTE_ARG_PREFIX3]);
	out->install = route_arg_id(&a[ROUTE_ARG_INSTALL]);
	out->caller = route_arg_id(&a[ROUTE_ARG_CALLER]);
	out->src = route_arg_id(&a[ROUTE_ARG_SRC]);
	out->model = route_arg_str(&a[ROUTE_ARG_MODEL]);
	out->stream = route_arg_bool(&a[ROUTE_ARG_STREAM]);
	out->size_kib = route_arg_kib(&a[ROUTE_ARG_SIZE]);
	out->turn = route_arg_turn(&a[ROUTE_ARG_TURN]);
	out->hint.present = false;
	out->hint.n = 0;
	out->identity = 0;
	out->akey = 0;
}
