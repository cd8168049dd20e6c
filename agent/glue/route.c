/* route.c - the agent's side of the decision: the endpoint table, retry budgets, the shared hint, core_decide (arguments: route_args.c; answers: route_end.c). */
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
#include "route_int.h"

/* ---- endpoints ---------------------------------------------------------- */

const struct config_endpoint *route_config_find(const struct route *r,
						struct core_str backend,
						struct core_str server)
{
	for (size_t i = 0; i < r->cfg->n_endpoints; i++) {
		const struct config_endpoint *ep = &r->cfg->endpoints[i];
		if (route_str_is(backend, ep->backend) &&
		    route_str_is(server, ep->server))
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
		.slots = ep != NULL ? ep->slots : 0,
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

/* ---- retry budget --------------------------------------------------------- */

struct route_budget *route_budget_find(struct route *r, const char *b,
				       size_t len)
{
	for (unsigned i = 0; i < r->n_budgets; i++)
		if (r->budgets[i].len == len &&
		    memcmp(r->budgets[i].backend, b, len) == 0)
			return &r->budgets[i];
	return NULL;
}

/* The retry budget of d's backend, made at its first decision (NULL
 * when the table is full or the name too long: counted in budgets_full).
 * Through d's preset while its endpoint keeps its generation: no strlen
 * and no compare of the names per decision. */
static struct route_budget *route_budget_of(struct route *r,
					    const struct route_decision *d,
					    uint64_t now_ms)
{
	struct route_preset *p = (unsigned)d->endpoint < ROUTE_PRESETS
					 ? &r->presets[d->endpoint] : NULL;
	if (p != NULL && p->budget_gen1 == d->gen + 1)
		return &r->budgets[p->budget];
	size_t len = strlen(d->backend);
	struct route_budget *rb = route_budget_find(r, d->backend, len);
	if (rb == NULL) {
		if (r->n_budgets == ROUTE_BUDGETS_MAX ||
		    len > CONFIG_NAME_MAX) {
			r->budgets_full++;
			return NULL;
		}
		/* A fixed slot, no allocation: the decision path. */
		rb = &r->budgets[r->n_budgets++];
		*rb = (struct route_budget){ .len = len };
		memcpy(rb->backend, d->backend, len);
		rb->backend[len] = '\0';
		budget_init(&rb->b, now_ms);
	}
	if (p != NULL) {
		p->budget = (uint16_t)(rb - r->budgets);
		p->budget_gen1 = d->gen + 1;
	}
	return rb;
}

/* Whether the retry budget of d's backend is spent at now_ms. The budget
 * is made (and its lines counted: warmlane_retries_total) whatever the
 * settings, but it marks nothing when retry_budget.enabled is false, or
 * without the log input, or while its lines are mostly not in warmlane's
 * format: the retries are counted from them, and a budget that counts
 * nothing would only ever be its floor. */
static bool route_budget_spent(struct route *r, const struct route_decision *d,
			       uint64_t now_ms)
{
	const struct config *cfg = r->cfg;
	struct route_budget *rb = route_budget_of(r, d, now_ms);
	if (rb == NULL)
		return false;
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
		if (route_arg_int(&a[ROUTE_ARG_HINT_SRV + i], &v[i]))
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
	const struct spop_data *peer = &a[ROUTE_ARG_HINT_PEER];
	*out = (struct core_hint){
		.present = true, .akey32 = (uint32_t)v[2], .age_ms = age, .n = k,
		.writer = peer->type == SPOP_DATA_NULL ? CORE_HINT_WRITER_UNKNOWN :
			  route_arg_bool(peer) ? CORE_HINT_WRITER_PEER :
			  CORE_HINT_WRITER_OWN,
	};
	memcpy(out->endpoint, idx, k * sizeof(idx[0]));
}

void route_decide(struct route *r, const struct route_request *req,
		  struct route_decision *out)
{
	struct core_request cr;
	struct core_decision d;
	const struct core_request *in = &cr;
	if (req->has_core)
		in = &req->core;
	else
		route_request_core(req, &cr);
	/* The clock only for a message that has hint arguments. */
	for (int i = ROUTE_ARG_HINT_SRV; i <= ROUTE_ARG_HINT_NAME; i++) {
		if (req->args[i].type != SPOP_DATA_NULL) {
			if (in != &cr)
				cr = *in;
			in = &cr;
			route_hint(r, req, route_wall_ms(r, req->now_ms), &cr.hint);
			break;
		}
	}
	core_decide(r->core, in, req->now_ms, &r->rng, &d);
	*out = (struct route_decision){
		.reason = (enum route_reason)d.reason,
		.backend = d.backend,
		.server = d.server,
		.key = d.key_id,
		.has_akey = d.has_akey,
		.akey = d.akey,
		.endpoint = d.endpoint,
		.gen = d.gen,
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
		out->noretry = route_budget_spent(r, out, req->now_ms);
}

void route_prefetch(struct route *r, struct route_request *req,
		    enum core_prefetch stage)
{
	if (stage == CORE_PREFETCH_SLOT) {
		route_request_core(req, &req->core);
		req->has_core = true;
		req->has_akey = core_identity(r->core, &req->core, &req->akey);
		req->core.identity = req->has_akey ? 2 : 1;
		req->core.akey = req->akey;
	}
	/* A decision reads the entry and leaves the LRU list alone. */
	if (req->has_core && req->has_akey && stage != CORE_PREFETCH_LINKS)
		core_prefetch(r->core, req->akey, stage);
}

void route_take_back(struct route *r, int endpoint)
{
	if (endpoint >= 0)
		core_endpoint_complete(r->core, endpoint);
}
