/* route.c - the agent's side of the decision: SPOE arguments in, core_decide and core_observe, variables out. */
#include "route.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "log.h"

_Static_assert((int)ROUTE_REASON_COUNT == (int)CORE_REASON_COUNT,
	       "route reasons mirror the core's");

/* Argument names with their lengths, so that a lookup compares lengths
 * first and never strlen's a literal per frame. */
struct route_name {
	const char *s;
	size_t len;
};
#define ROUTE_NAME(x) { x, sizeof(x) - 1 }

static const struct route_name route_arg_names[ROUTE_ARG_COUNT] = {
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
};

static const struct route_name route_fb_names[ROUTE_FB_COUNT] = {
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
static const uint8_t route_arg_order[ROUTE_ARG_COUNT] = {
	ROUTE_ARG_SESSION, ROUTE_ARG_PREFIX1, ROUTE_ARG_PREFIX2,
	ROUTE_ARG_PREFIX3, ROUTE_ARG_INSTALL, ROUTE_ARG_CALLER,
	ROUTE_ARG_SRC, ROUTE_ARG_MODEL, ROUTE_ARG_STREAM, ROUTE_ARG_ID,
	ROUTE_ARG_HINT_SRV, ROUTE_ARG_HINT_AT, ROUTE_ARG_HINT_AKEY,
	ROUTE_ARG_HINT_NAME,
};

static const uint8_t route_fb_order[ROUTE_FB_COUNT] = {
	ROUTE_FB_SERVER, ROUTE_FB_STATUS, ROUTE_FB_TR, ROUTE_FB_RETRY_AFTER,
	ROUTE_FB_KEY, ROUTE_FB_AKEY, ROUTE_FB_STREAM, ROUTE_FB_SHADOW,
	ROUTE_FB_SHADOW_REASON, ROUTE_FB_ID, ROUTE_FB_MODEL,
};

static bool route_name_is(struct spop_str v, const struct route_name *n)
{
	return v.len == n->len && memcmp(v.ptr, n->s, n->len) == 0;
}

/* The name expected at *pos of order first (one compare for a frame sent
 * by the SPOE file), then every name (another config's order, an older
 * one's fewer arguments); *pos moves past the match, so the arguments
 * after a missing or reordered one are found first time again. An
 * unknown name leaves *pos as it was. */
static int route_lookup_next(struct spop_str name,
			     const struct route_name *names,
			     const uint8_t *order, unsigned count,
			     unsigned *pos)
{
	if (*pos < count && route_name_is(name, &names[order[*pos]]))
		return order[(*pos)++];
	for (unsigned i = 0; i < count; i++) {
		if (route_name_is(name, &names[order[i]])) {
			*pos = i + 1;
			return order[i];
		}
	}
	return -1;
}

int route_arg_lookup_next(struct spop_str name, unsigned *pos)
{
	return route_lookup_next(name, route_arg_names, route_arg_order,
				 ROUTE_ARG_COUNT, pos);
}

int route_fb_arg_lookup_next(struct spop_str name, unsigned *pos)
{
	return route_lookup_next(name, route_fb_names, route_fb_order,
				 ROUTE_FB_COUNT, pos);
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

/* ---- endpoints ---------------------------------------------------------- */

static bool str_is(struct core_str a, const char *b)
{
	size_t n = strlen(b);
	return a.len == n && memcmp(a.ptr, b, n) == 0;
}

const struct config_endpoint *route_config_find(const struct route *r,
						struct core_str backend,
						struct core_str server)
{
	for (size_t i = 0; i < r->cfg->n_endpoints; i++) {
		const struct config_endpoint *ep = &r->cfg->endpoints[i];
		if (str_is(backend, ep->backend) && str_is(server, ep->server))
			return ep;
	}
	return NULL;
}

unsigned route_server_find(const struct route *r, struct core_str backend,
			   struct core_str server, int *idx, unsigned max)
{
	const struct config_endpoint *ep = route_config_find(r, backend, server);
	size_t nk = ep != NULL ? ep->n_keys : 0;
	unsigned n = 0;
	if (nk == 0) {
		int i = core_endpoint_find(r->core, backend, server,
					   (struct core_str){ NULL, 0 });
		if (i >= 0 && max > 0)
			idx[n++] = i;
		return n;
	}
	for (size_t k = 0; k < nk && n < max; k++) {
		int i = core_endpoint_find(r->core, backend, server,
					   core_str_c(ep->keys[k]));
		if (i >= 0)
			idx[n++] = i;
	}
	return n;
}

unsigned route_server_find_path(const struct route *r, struct core_str path,
				int *idx, unsigned max)
{
	const char *slash = path.len > 0 ? memchr(path.ptr, '/', path.len) : NULL;
	if (slash == NULL)
		return 0;
	size_t blen = (size_t)(slash - path.ptr);
	struct core_str b = { path.ptr, blen };
	struct core_str s = { slash + 1, path.len - blen - 1 };
	if (b.len == 0 || s.len == 0)
		return 0;
	return route_server_find(r, b, s, idx, max);
}

/* Adds one core endpoint; an existing one counts as not added. */
static int route_add_one(struct route *r, const char *backend,
			 const char *server, const char *key,
			 const struct config_endpoint *ep, uint64_t now_ms)
{
	struct core_endpoint_config ec = {
		.backend = backend,
		.server = server,
		.key_id = key,
		.models = ep != NULL ? (const char *const *)ep->models : NULL,
		.n_models = ep != NULL ? ep->n_models : 0,
		.weight = ep != NULL ? ep->weight : 1.0,
		.cost_per_mtok = ep != NULL ? ep->cost_per_mtok : 0.0,
		.tier = config_tier(r->cfg, backend, ep),
	};
	int i = core_endpoint_add(r->core, &ec, now_ms);
	if (i == -EEXIST)
		return 0;
	return i < 0 ? i : 1;
}

int route_server_add(struct route *r, struct core_str backend,
		     struct core_str server, uint64_t now_ms)
{
	char b[CONFIG_NAME_MAX + 1], s[CONFIG_NAME_MAX + 1];
	if (backend.len == 0 || server.len == 0)
		return -EINVAL;
	if (backend.len > CONFIG_NAME_MAX || server.len > CONFIG_NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(b, backend.ptr, backend.len);
	b[backend.len] = '\0';
	memcpy(s, server.ptr, server.len);
	s[server.len] = '\0';

	const struct config_endpoint *ep = route_config_find(r, backend, server);
	if (ep == NULL || ep->n_keys == 0)
		return route_add_one(r, b, s, NULL, ep, now_ms);
	int added = 0;
	for (size_t k = 0; k < ep->n_keys; k++) {
		int a = route_add_one(r, b, s, ep->keys[k], ep, now_ms);
		if (a < 0)
			return a;
		added += a;
	}
	return added;
}

int route_init(struct route *r, const struct config *cfg)
{
	*r = (struct route){ .cfg = cfg };
	int e = core_create(&r->core, &cfg->params);
	if (e < 0) {
		r->core = NULL;
		return e;
	}
	e = hint_ids_init(&r->hints);
	if (e < 0) {
		route_finish(r);
		return e;
	}
	/* Per process: two agents beside one HAProxy, or a restart, draw
	 * different p2c samples (what keeps them from herding). */
	core_rng_seed(&r->rng, uv_hrtime() ^ ((uint64_t)getpid() << 32) ^
				       (uint64_t)time(NULL));

	for (size_t i = 0; i < cfg->n_endpoints; i++) {
		const struct config_endpoint *ep = &cfg->endpoints[i];
		size_t nk = ep->n_keys > 0 ? ep->n_keys : 1;
		for (size_t k = 0; k < nk; k++) {
			const char *key = ep->n_keys > 0 ? ep->keys[k] : NULL;
			int a = route_add_one(r, ep->backend, ep->server, key,
					      ep, 0);
			if (a == -ENOMEM) {
				route_finish(r);
				return a;
			}
			if (a <= 0)
				log_warn("endpoint not added", "backend=%s server=%s key=%s error=%s",
					 ep->backend, ep->server,
					 key != NULL ? key : "-",
					 a == 0 ? "duplicate" : strerror(-a));
		}
	}
	return 0;
}

void route_finish(struct route *r)
{
	core_destroy(r->core);
	r->core = NULL;
	hint_ids_finish(&r->hints);
	r->cfg = NULL;
}

int64_t route_wall_s(struct route *r, uint64_t now_ms)
{
	if (!r->wall_valid || r->wall_at_ms != now_ms) {
		r->wall_s = (int64_t)time(NULL);
		r->wall_at_ms = now_ms;
		r->wall_valid = true;
	}
	return r->wall_s;
}

uint64_t route_wall_ms(struct route *r, uint64_t now_ms)
{
	if (!r->wall_ms_valid || r->wall_ms_at != now_ms) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r->wall_ms = (uint64_t)ts.tv_sec * 1000u +
			     (uint64_t)ts.tv_nsec / 1000000u;
		r->wall_ms_at = now_ms;
		r->wall_ms_valid = true;
	}
	return r->wall_ms;
}

/* ---- route -------------------------------------------------------------- */

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

/* A 64-bit id of the value, not of its encoding: a prefix key HAProxy
 * sends as INT64 (xxh64) is used as it is, and agrees with the same number
 * as UINT64. The core hashes it again with the rung. */
static struct core_id arg_id(const struct spop_data *d)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					      0xff, 0xff };
	struct core_id id = { .present = arg_present(d) };
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

static struct core_str arg_str(const struct spop_data *d)
{
	if ((d->type == SPOP_DATA_STRING || d->type == SPOP_DATA_BINARY) &&
	    d->u.str.len > 0)
		return (struct core_str){ (const char *)d->u.str.ptr,
					  d->u.str.len };
	return (struct core_str){ NULL, 0 };
}

/* Integers of any width as int64; false for other types. */
static bool arg_int(const struct spop_data *d, int64_t *v)
{
	switch (d->type) {
	case SPOP_DATA_INT32:
		*v = d->u.i32;
		return true;
	case SPOP_DATA_UINT32:
		*v = d->u.u32;
		return true;
	case SPOP_DATA_INT64:
		*v = d->u.i64;
		return true;
	case SPOP_DATA_UINT64:
		*v = d->u.u64 > INT64_MAX ? INT64_MAX : (int64_t)d->u.u64;
		return true;
	default:
		return false;
	}
}

static bool arg_bool(const struct spop_data *d)
{
	int64_t v;
	if (d->type == SPOP_DATA_BOOL)
		return d->u.b;
	if (arg_int(d, &v))
		return v != 0;
	return str_is(arg_str(d), "true");
}

void route_request_core(const struct route_request *req,
			struct core_request *out)
{
	*out = (struct core_request){
		.session = arg_id(&req->args[ROUTE_ARG_SESSION]),
		.prefix = { arg_id(&req->args[ROUTE_ARG_PREFIX1]),
			    arg_id(&req->args[ROUTE_ARG_PREFIX2]),
			    arg_id(&req->args[ROUTE_ARG_PREFIX3]) },
		.install = arg_id(&req->args[ROUTE_ARG_INSTALL]),
		.caller = arg_id(&req->args[ROUTE_ARG_CALLER]),
		.src = arg_id(&req->args[ROUTE_ARG_SRC]),
		.model = arg_str(&req->args[ROUTE_ARG_MODEL]),
		.stream = arg_bool(&req->args[ROUTE_ARG_STREAM]),
	};
}

/* ---- retry budget --------------------------------------------------------- */

static struct route_budget *route_budget_find(struct route *r, const char *b,
					      size_t len)
{
	for (unsigned i = 0; i < r->n_budgets; i++)
		if (r->budgets[i].len == len &&
		    memcmp(r->budgets[i].backend, b, len) == 0)
			return &r->budgets[i];
	return NULL;
}

/* Whether the retry budget of backend is spent at now_ms. The budget is
 * made (and its lines counted: warmlane_retries_total) whatever the
 * settings, but it marks nothing when retry_budget.enabled is false, or
 * without the log input, or while its lines are mostly not in warmlane's
 * format: the retries are counted from them, and a budget that counts
 * nothing would only ever be its floor. */
static bool route_budget_spent(struct route *r, const char *backend,
			       uint64_t now_ms)
{
	const struct config *cfg = r->cfg;
	size_t len = strlen(backend);
	struct route_budget *rb = route_budget_find(r, backend, len);
	if (rb == NULL) {
		if (r->n_budgets == ROUTE_BUDGETS_MAX ||
		    len > CONFIG_NAME_MAX) {
			r->budgets_full++;
			return false;
		}
		/* A fixed slot, no allocation: the decision path. */
		rb = &r->budgets[r->n_budgets++];
		*rb = (struct route_budget){ .len = len };
		memcpy(rb->backend, backend, len);
		rb->backend[len] = '\0';
		budget_init(&rb->b, now_ms);
	}
	rb->spent = cfg->retry_budget_enabled && r->log_input &&
		    !r->log.format_bad &&
		    budget_spent(&rb->b, &cfg->retry_budget, now_ms);
	if (rb->spent)
		rb->noretry++;
	return rb->spent;
}

void route_budget_counts(const struct route *r, unsigned i, uint64_t now_ms,
			 uint64_t *first, uint64_t *retries)
{
	budget_counts(&r->budgets[i].b, &r->cfg->retry_budget, now_ms, first,
		      retries);
}

/* ---- the shared warm hint ------------------------------------------------ */

void route_hint(struct route *r, const struct route_request *req,
		uint64_t wall_ms, struct core_hint *out)
{
	*out = (struct core_hint){ .present = false };
	const struct spop_data *a = req->args;
	int64_t v[4];
	unsigned n = 0;
	for (unsigned i = 0; i < 4; i++)
		if (arg_int(&a[ROUTE_ARG_HINT_SRV + i], &v[i]))
			n++;
	if (n == 0)
		return;
	struct hint_arg_stats *st = &r->hints.args;
	if (n < 4) {
		st->partial++;
		return;
	}
	bool id_known;
	const struct hint_server *s =
		hint_ids_find(&r->hints, (uint32_t)v[0], (uint32_t)v[3], &id_known);
	if (s == NULL) {
		if (!id_known) {
			st->unknown_id++;
			return;
		}
		st->id_mismatch++;
		static struct log_limit limit = LOG_LIMIT_INIT(LOG_LIMIT_INTERVAL_MS);
		uint64_t held;
		if (log_limit_allow(&limit, req->now_ms, &held))
			log_warn("shared hint names a server id this HAProxy gives another server: the peers' server ids differ, set the same `id` on every HAProxy's server lines (docs/peers.md)",
				 "srv_id=%" PRId64 " name_hash=%08" PRIx32 " suppressed=%" PRIu64,
				 v[0], (uint32_t)v[3], held);
		return;
	}
	/* HAProxy keeps 32 bits of ms (49.7 days); the difference modulo
	 * 2^32 is the age, a "negative" one a clock ahead of ours. */
	uint32_t age32 = (uint32_t)wall_ms - (uint32_t)v[1];
	uint64_t age = age32 > UINT32_MAX / 2 ? 0 : age32;
	if (age >= core_params(r->core)->affinity_ttl_ms) {
		st->stale++;
		return;
	}
	int idx[CORE_HINT_ENDPOINTS];
	unsigned k = route_server_find_path(
		r, (struct core_str){ s->name, s->len }, idx, CORE_HINT_ENDPOINTS);
	if (k == 0) {
		st->no_endpoint++;
		return;
	}
	*out = (struct core_hint){
		.present = true, .akey32 = (uint32_t)v[2], .age_ms = age, .n = k,
	};
	memcpy(out->endpoint, idx, k * sizeof(idx[0]));
}

void route_decide(struct route *r, const struct route_request *req,
		  struct route_decision *out)
{
	struct core_request cr;
	struct core_decision d;
	route_request_core(req, &cr);
	/* The clock only for a message that has hint arguments. */
	for (int i = ROUTE_ARG_HINT_SRV; i <= ROUTE_ARG_HINT_NAME; i++) {
		if (req->args[i].type != SPOP_DATA_NULL) {
			route_hint(r, req, route_wall_ms(r, req->now_ms), &cr.hint);
			break;
		}
	}
	core_decide(r->core, &cr, req->now_ms, &r->rng, &d);
	*out = (struct route_decision){
		.reason = (enum route_reason)d.reason,
		.backend = d.backend,
		.server = d.server,
		.key = d.key_id,
		.has_akey = d.has_akey,
		.akey = d.akey,
		.endpoint = d.endpoint,
		.tier = d.tier,
	};
	if (d.endpoint < 0) { /* no endpoint: no variable but the reason */
		out->backend = out->server = out->key = NULL;
		out->endpoint = -1;
	}
	if (r->cfg->mode == CONFIG_MODE_SHADOW) {
		/* HAProxy balances: the decision is only named, and the
		 * request's own answers will say where it went. */
		core_decision_shadow(r->core, &d);
		out->shadow = true;
		out->key = NULL;
		out->endpoint = -1;
		return;
	}
	if (d.endpoint >= 0)
		out->noretry = route_budget_spent(r, d.backend, req->now_ms);
}

void route_take_back(struct route *r, int endpoint)
{
	if (endpoint >= 0)
		core_endpoint_complete(r->core, endpoint);
}

/* ---- feedback ----------------------------------------------------------- */

/* An HTTP status as an integer or 3 decimal digits; -1 otherwise. */
static int parse_status(const struct spop_data *d)
{
	int64_t v;
	if (arg_int(d, &v))
		return v >= 0 && v <= 999 ? (int)v : -1;
	struct core_str s = arg_str(d);
	if (s.len != 3)
		return -1;
	int x = 0;
	for (size_t i = 0; i < 3; i++) {
		if (s.ptr[i] < '0' || s.ptr[i] > '9')
			return -1;
		x = x * 10 + (s.ptr[i] - '0');
	}
	return x;
}

void route_feedback(struct route *r, const struct route_feedback *fb)
{
	const struct spop_data *a = fb->args;
	struct core_feedback cf = {
		.tr_ms = -1,
		.retry_after_ms = -1,
		.stream = arg_bool(&a[ROUTE_FB_STREAM]),
		.model = arg_str(&a[ROUTE_FB_MODEL]),
	};

	struct core_str path = arg_str(&a[ROUTE_FB_SERVER]);
	struct core_str key = arg_str(&a[ROUTE_FB_KEY]);
	/* Shadow mode: HAProxy chose `server`; how it compares with
	 * warmlane's choice is counted whatever the rest says. */
	struct core_str sh_reason = arg_str(&a[ROUTE_FB_SHADOW_REASON]);
	bool shadow = sh_reason.len > 0;
	if (shadow && shadow_first(&r->shadow, arg_str(&a[ROUTE_FB_ID]), true))
		shadow_count_path(&r->shadow, sh_reason,
				  arg_str(&a[ROUTE_FB_SHADOW]), path);
	int idx[ROUTE_FB_MAX_KEYS];
	unsigned n = 0;
	cf.endpoint = core_endpoint_find_path(r->core, path, key);
	if (cf.endpoint >= 0) {
		idx[n++] = cf.endpoint;
		/* A request that does not stream gets its headers with its
		 * whole body: that is its completion, so it leaves the
		 * in-flight count now rather than at the next runtime-API
		 * poll (back-to-back turns of an agent loop would otherwise
		 * pile up as load on their warm endpoint). A streamed request
		 * is still running: its end comes from the poll. Once the log
		 * input reads HAProxy's lines, every request leaves it when its
		 * line arrives (route_log_line), never here: nothing is counted
		 * twice. Until a first line in warmlane's format arrives
		 * (HAProxy may have no log target for the open socket), it
		 * still leaves here. */
		if (!cf.stream && !(r->log_input && r->log_lines) && !shadow)
			core_endpoint_complete(r->core, cf.endpoint);
		/* Its log line will say how a stream ended (cut or not): the
		 * breaker waits for it rather than count the headers as a
		 * success (core_feedback.end_follows). Not while most lines
		 * are not in warmlane's format (logsrc.c): a success that no
		 * line settles would never count, and a HALF_OPEN breaker
		 * would never close on streams. */
		cf.end_follows = r->log_input && r->log_lines && !r->log.format_bad;
	} else if (key.len == 0) {
		/* No key id: HAProxy chose the server itself (no agent
		 * answer, fail open) with the client's own credential. What
		 * the server said is about the server, so it reaches each of
		 * its endpoints; the core never counted it in flight. */
		n = route_server_find_path(r, path, idx, ROUTE_FB_MAX_KEYS);
	}
	if (n == 0) {
		/* A server removed since, one outside the pool, or none. */
		r->fb.unknown_server++;
		return;
	}

	cf.status = parse_status(&a[ROUTE_FB_STATUS]);
	if (core_status_class(cf.status) == CORE_OUTCOME_INVALID) {
		r->fb.bad_status++;
		return;
	}

	int64_t v;
	struct core_str s;
	if (arg_int(&a[ROUTE_FB_TR], &v)) {
		cf.tr_ms = v < 0 ? -1 : v;
	} else if ((s = arg_str(&a[ROUTE_FB_TR])).len > 0) {
		if (core_parse_tr(s, &cf.tr_ms) < 0) {
			r->fb.bad_tr++;
			cf.tr_ms = -1;
		}
	}

	if ((s = arg_str(&a[ROUTE_FB_RETRY_AFTER])).len > 0) {
		if (core_parse_retry_after(s, fb->now_unix_s,
					   &cf.retry_after_ms) < 0) {
			r->fb.bad_retry_after++;
			cf.retry_after_ms = -1;
		}
	} else if (arg_int(&a[ROUTE_FB_RETRY_AFTER], &v) && v >= 0) {
		cf.retry_after_ms = v > INT64_MAX / 1000 ? INT64_MAX : v * 1000;
	}

	if ((s = arg_str(&a[ROUTE_FB_AKEY])).len > 0) {
		cf.has_akey = haplog_akey_parse((const uint8_t *)s.ptr, s.len,
						&cf.akey);
		if (!cf.has_akey)
			r->fb.bad_akey++;
	}

	/* Without a key id a 401/403 judged the client's credential, not
	 * one of ours: no endpoint+key is dead. */
	if (cf.endpoint < 0 && core_status_class(cf.status) == CORE_OUTCOME_KEY_DEAD)
		return;
	for (unsigned i = 0; i < n; i++) {
		cf.endpoint = idx[i];
		if (core_observe(r->core, &cf, fb->now_ms) == -EINVAL)
			r->fb.bad_status++;
	}
}

/* ---- end-of-stream log lines -------------------------------------------- */

const double route_lag_bounds_s[ROUTE_LAG_BUCKETS] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5,
};

static struct core_str hl_str(struct haplog_str s)
{
	return (struct core_str){ (const char *)s.ptr, s.len };
}

static bool hl_eq(struct haplog_str a, struct haplog_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

enum core_end route_log_end(const struct haplog_line *l)
{
	uint8_t who = l->ts.len >= 2 ? l->ts.ptr[0] : '-';
	uint8_t when = l->ts.len >= 2 ? l->ts.ptr[1] : '-';
	switch (who) {
	case 'C':
	case 'c':
		return CORE_END_CLIENT_ABORT;
	case 'S':
	case 's':
	case 'D':
		return when == 'D' || when == 'L' ? CORE_END_SERVER_CUT
						  : CORE_END_SERVER_FAIL;
	default:
		return CORE_END_COMPLETE;
	}
}

/* A line of shadow mode (route_log_line): HAProxy chose be/srv itself.
 * What happened there teaches that server's endpoints, as feedback without
 * a key id does; the comparison is counted here unless the feedback
 * message already did: fb, or, when its ACK came too late for HAProxy to
 * set fb, the request's id met at the feedback (shadow_first). */
static enum route_log_use route_log_shadow(struct route *r,
					   const struct haplog_line *l,
					   uint64_t now_ms)
{
	bool fb_seen = l->fb;
	if (!fb_seen) {
		fb_seen = !shadow_first(&r->shadow, hl_str(l->id), false);
		if (!fb_seen)
			shadow_count(&r->shadow, hl_str(l->shr), hl_str(l->sh),
				     hl_str(l->be), hl_str(l->srv));
	}
	int idx[ROUTE_FB_MAX_KEYS];
	unsigned n = route_server_find(r, hl_str(l->be), hl_str(l->srv), idx,
				       ROUTE_FB_MAX_KEYS);
	if (n == 0) {
		/* <NOSRV>, or a server outside the pool */
		r->log.unknown_endpoint++;
		return ROUTE_LOG_UNKNOWN;
	}
	struct core_completion cc = {
		.status = l->status,
		.end = route_log_end(l),
		.tr_ms = l->tr_ms,
		.total_ms = l->ta_ms,
		.bytes = l->bytes,
		.stream = l->stream,
		.feedback_seen = fb_seen,
		.has_akey = l->has_akey,
		.akey = l->akey,
		.has_retry_after = l->retry_after_s >= 0,
		.retry_after_ms = l->retry_after_s >= 0 ? l->retry_after_s * 1000 : -1,
		.shadow = true,
	};
	for (unsigned i = 0; i < n; i++) {
		cc.endpoint = idx[i];
		struct core_completion c1 = cc;
		if (core_complete(r->core, &c1, now_ms) < 0) {
			c1.status = -1;
			core_complete(r->core, &c1, now_ms);
		}
	}
	r->log.ends[cc.end]++;
	return ROUTE_LOG_USED;
}

enum route_log_use route_log_line(struct route *r, const struct haplog_line *l,
				  uint64_t now_ms)
{
	r->log_lines = true;
	/* Every request of a budgeted backend counts, routed by warmlane or
	 * not: one first attempt and the retries HAProxy made for it. */
	struct route_budget *rb =
		l->be.len > 0 ? route_budget_find(r, (const char *)l->be.ptr,
						  l->be.len)
			      : NULL;
	if (rb != NULL) {
		budget_record(&rb->b, &r->cfg->retry_budget, l->retries, now_ms);
		rb->requests++;
		rb->retries += l->retries;
	}
	if (l->bad != 0)
		r->log.bad_fields++;
	if ((l->wsrv.len == 0 || l->wbe.len == 0) && l->shr.len > 0)
		return route_log_shadow(r, l, now_ms);
	if (l->wsrv.len == 0 || l->wbe.len == 0) {
		r->log.unrouted++;
		return ROUTE_LOG_UNROUTED;
	}
	int ep = core_endpoint_find(r->core, hl_str(l->wbe), hl_str(l->wsrv),
				    hl_str(l->key));
	if (ep < 0) {
		r->log.unknown_endpoint++;
		return ROUTE_LOG_UNKNOWN;
	}
	bool same = hl_eq(l->wbe, l->be) && hl_eq(l->wsrv, l->srv);
	struct core_completion cc = {
		.endpoint = ep,
		.status = l->status,
		.end = route_log_end(l),
		.tr_ms = l->tr_ms,
		.total_ms = l->ta_ms,
		.bytes = l->bytes,
		.stream = l->stream,
		.feedback_seen = l->fb && same,
		.has_akey = l->has_akey,
		.akey = l->akey,
		/* ra: at most 9 digits of seconds (haplog), no overflow */
		.has_retry_after = l->retry_after_s >= 0,
		.retry_after_ms = l->retry_after_s >= 0 ? l->retry_after_s * 1000 : -1,
	};
	if (!same) {
		/* HAProxy did not end on warmlane's server: redispatched after
		 * failed connections (so it failed), or the rule was not
		 * applied (the server was unusable): then only in-flight. */
		cc.status = -1;
		cc.tr_ms = cc.total_ms = -1;
		cc.bytes = 0;
		cc.end = l->retries > 0 && l->redispatched ? CORE_END_SERVER_FAIL
							   : CORE_END_COMPLETE;
		if (cc.end == CORE_END_SERVER_FAIL)
			r->log.redispatched++;
	}
	if (core_complete(r->core, &cc, now_ms) < 0) {
		/* a status HAProxy would not log: still end the request */
		cc.status = -1;
		core_complete(r->core, &cc, now_ms);
	}
	r->log.ends[cc.end]++;
	return ROUTE_LOG_USED;
}
