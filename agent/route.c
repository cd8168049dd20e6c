/* route.c - round-robin routing scaffold, until agent/core is wired in. */
#include "route.h"

#include <string.h>
#include <xxhash.h>

#include "config.h"

static const char *const route_arg_names[ROUTE_ARG_COUNT] = {
	[ROUTE_ARG_SESSION] = "session", [ROUTE_ARG_PREFIX1] = "prefix1",
	[ROUTE_ARG_PREFIX2] = "prefix2", [ROUTE_ARG_PREFIX3] = "prefix3",
	[ROUTE_ARG_INSTALL] = "install", [ROUTE_ARG_CALLER] = "caller",
	[ROUTE_ARG_SRC] = "src",	 [ROUTE_ARG_MODEL] = "model",
	[ROUTE_ARG_STREAM] = "stream",	 [ROUTE_ARG_ID] = "id",
};

static const char *const route_fb_names[ROUTE_FB_COUNT] = {
	[ROUTE_FB_SERVER] = "server",	    [ROUTE_FB_STATUS] = "status",
	[ROUTE_FB_TR] = "tr",		    [ROUTE_FB_RETRY_AFTER] = "retry_after",
	[ROUTE_FB_KEY] = "key",		    [ROUTE_FB_AKEY] = "akey",
	[ROUTE_FB_STREAM] = "stream",
};

static const char *const route_reason_names[ROUTE_REASON_COUNT] = {
	[ROUTE_AFFINITY] = "affinity",
	[ROUTE_HASH] = "hash",
	[ROUTE_SPILL] = "spill",
	[ROUTE_P2C] = "p2c",
	[ROUTE_COOLDOWN_FALLBACK] = "cooldown_fallback",
	[ROUTE_NO_MODEL] = "no_model",
	[ROUTE_NONE] = "none",
	[ROUTE_RR] = "rr",
};

int route_arg_lookup(struct spop_str name)
{
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		if (spop_str_eq(name, route_arg_names[i]))
			return i;
	return -1;
}

int route_fb_arg_lookup(struct spop_str name)
{
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		if (spop_str_eq(name, route_fb_names[i]))
			return i;
	return -1;
}

const char *route_reason_name(enum route_reason reason)
{
	if ((unsigned)reason >= ROUTE_REASON_COUNT)
		return "unknown";
	return route_reason_names[reason];
}

int route_init(struct route *r, const struct config *cfg)
{
	*r = (struct route){ .cfg = cfg };
	return 0;
}

void route_finish(struct route *r)
{
	r->cfg = NULL;
}

static bool arg_present(const struct spop_data *d)
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

/* Hashes the value's bytes, not its encoding, so a prefix key sent as
 * INT64 and one sent as UINT64 agree. The rung seeds the hash. */
static uint64_t hash_arg(const struct spop_data *d, uint64_t seed)
{
	uint8_t b[8];
	uint64_t v;
	switch (d->type) {
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		return XXH3_64bits_withSeed(d->u.str.ptr, d->u.str.len, seed);
	case SPOP_DATA_IPV4:
		return XXH3_64bits_withSeed(d->u.ipv4, 4, seed);
	case SPOP_DATA_IPV6:
		return XXH3_64bits_withSeed(d->u.ipv6, 16, seed);
	case SPOP_DATA_BOOL:
		v = d->u.b;
		break;
	case SPOP_DATA_INT32:
		v = (uint64_t)(int64_t)d->u.i32;
		break;
	case SPOP_DATA_UINT32:
		v = d->u.u32;
		break;
	case SPOP_DATA_INT64:
		v = (uint64_t)d->u.i64;
		break;
	default:
		v = d->u.u64;
		break;
	}
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return XXH3_64bits_withSeed(b, sizeof(b), seed);
}

bool route_identity(const struct route_request *req,
		    const enum core_rung *ladder, unsigned ladder_len,
		    uint64_t *key)
{
	for (unsigned i = 0; i < ladder_len; i++) {
		const struct spop_data *d = NULL;
		switch (ladder[i]) {
		case CORE_RUNG_SESSION:
			d = &req->args[ROUTE_ARG_SESSION];
			break;
		case CORE_RUNG_PREFIX:
			/* The longest window present is the most specific. */
			for (int a = ROUTE_ARG_PREFIX3; a >= ROUTE_ARG_PREFIX1; a--) {
				if (arg_present(&req->args[a])) {
					d = &req->args[a];
					break;
				}
			}
			break;
		case CORE_RUNG_INSTALL:
			d = &req->args[ROUTE_ARG_INSTALL];
			break;
		case CORE_RUNG_CALLER:
			d = &req->args[ROUTE_ARG_CALLER];
			break;
		case CORE_RUNG_SRC:
			d = &req->args[ROUTE_ARG_SRC];
			break;
		default:
			break;
		}
		if (d != NULL && arg_present(d)) {
			*key = hash_arg(d, (uint64_t)ladder[i] + 1);
			return true;
		}
	}
	return false;
}

static bool endpoint_serves(const struct config_endpoint *ep,
			    const struct spop_data *model)
{
	if (ep->n_models == 0)
		return true;
	for (size_t i = 0; i < ep->n_models; i++) {
		size_t n = strlen(ep->models[i]);
		if (n == model->u.str.len &&
		    memcmp(ep->models[i], model->u.str.ptr, n) == 0)
			return true;
	}
	return false;
}

void route_decide(struct route *r, const struct route_request *req,
		  struct route_decision *out)
{
	const struct config *cfg = r->cfg;
	*out = (struct route_decision){ .reason = ROUTE_NONE };

	out->has_akey = route_identity(req, cfg->params.identity_ladder,
				       cfg->params.identity_ladder_len,
				       &out->akey);

	if (cfg->n_endpoints == 0)
		return;

	/* A model that is not a non-empty string cannot be matched against
	 * names: treat it as absent rather than refuse the request. */
	const struct spop_data *model = &req->args[ROUTE_ARG_MODEL];
	bool by_model = (model->type == SPOP_DATA_STRING ||
			 model->type == SPOP_DATA_BINARY) &&
			model->u.str.len > 0;

	/* Two passes instead of a candidate array: no allocation, and the
	 * endpoint list is short. */
	size_t n = 0;
	for (size_t i = 0; i < cfg->n_endpoints; i++)
		if (!by_model || endpoint_serves(&cfg->endpoints[i], model))
			n++;
	if (n == 0) {
		out->reason = ROUTE_NO_MODEL;
		return;
	}
	size_t k = (size_t)(r->rr_next++ % n);
	for (size_t i = 0; i < cfg->n_endpoints; i++) {
		const struct config_endpoint *ep = &cfg->endpoints[i];
		if (by_model && !endpoint_serves(ep, model))
			continue;
		if (k-- == 0) {
			out->reason = ROUTE_RR;
			out->backend = ep->backend;
			out->server = ep->server;
			out->key = ep->n_keys > 0 ? ep->keys[0] : NULL;
			return;
		}
	}
}

void route_feedback(struct route *r, const struct route_feedback *fb)
{
	/* Round-robin learns nothing; the core's observe() goes here. */
	(void)r;
	(void)fb;
}
