/* reload.c - SIGHUP: a new configuration file checked, then applied whole or not at all. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "metrics.h"
#include "reload.h"
#include "route.h"
#include "server.h"

/* ---- what changed --------------------------------------------------------- */

static bool reload_str_eq(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* Whether the poller must be made anew for b: what runtime_create reads
 * once (socket, interval) or sizes by (the endpoint count). */
static bool reload_runtime_changed(const struct config *a,
				   const struct config *b)
{
	if (!reload_str_eq(a->runtime_socket, b->runtime_socket) ||
	    a->params.poll_interval_ms != b->params.poll_interval_ms ||
	    a->n_endpoints != b->n_endpoints ||
	    a->n_runtime_backends != b->n_runtime_backends)
		return true;
	for (size_t i = 0; i < a->n_runtime_backends; i++)
		if (!reload_str_eq(a->runtime_backends[i], b->runtime_backends[i]))
			return true;
	return false;
}

/* ---- loading and the steps that can fail ---------------------------------- */

/* Logs every line of a config error text, one log line each. */
static void reload_log_errors(const char *err)
{
	char q[1100];
	for (const char *p = err; *p != '\0';) {
		size_t n = strcspn(p, "\n");
		if (n > 0)
			log_error("configuration error", "error=%s",
				  log_quote(q, sizeof(q), p, n));
		p += n;
		if (*p == '\n')
			p++;
	}
}

int reload_load(struct config *next, const struct reload_opts *o, char *err,
		size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	int r = config_init(next);
	if (r < 0) {
		snprintf(err, errlen, "out of memory\n");
		return r;
	}
	r = config_load_file(next, o->path, err, errlen);
	if (r == 0 && o->n_cli_listen > 0)
		r = config_set_listen(next, o->cli_listen, o->n_cli_listen, err,
				      errlen);
	if (r < 0) {
		config_finish(next);
		return r;
	}
	if (o->cli_level)
		next->log_level = o->cli_lvl;
	return 0;
}

void reload_log_refused(const char *path, const char *err)
{
	char q[600];
	log_error("reload refused: keeping the running configuration",
		  "config=%s", log_quote(q, sizeof(q), path, strlen(path)));
	reload_log_errors(err);
}

int reload_prepare(struct reload_plan *p, struct server *srv,
		   const struct config *cur, struct config *parsed,
		   const char *path)
{
	static char err[16384]; /* the loop thread's alone */
	int r;

	memset(p, 0, sizeof(*p));
	p->next = *parsed;
	memset(parsed, 0, sizeof(*parsed));
	err[0] = '\0';

	const struct config *next = &p->next;
	p->metrics_changed = !reload_str_eq(cur->metrics_listen,
					    next->metrics_listen);
	p->runtime_changed = reload_runtime_changed(cur, next);
	p->snapshot_changed =
		!reload_str_eq(cur->state_file, next->state_file) ||
		cur->params.snapshot_interval_ms != next->params.snapshot_interval_ms;

	r = server_relisten_prepare(srv, next, &p->pending, err, sizeof(err));
	if (r == 0 && p->metrics_changed && next->metrics_listen != NULL &&
	    next->metrics_listen[0] != '\0')
		r = metrics_create(&p->metrics, srv->loop, &next->metrics, srv,
				   err, sizeof(err));
	if (r == 0) {
		r = core_set_params(srv->route.core, &next->params);
		if (r < 0)
			snprintf(err, sizeof(err),
				 "the routing core refused the policy: %s",
				 strerror(-r));
	}
	if (r < 0) {
		char q[sizeof(err) + 100], qp[600];
		log_error("reload refused: keeping the running configuration",
			  "config=%s error=%s",
			  log_quote(qp, sizeof(qp), path, strlen(path)),
			  log_quote(q, sizeof(q), err, strlen(err)));
		server_relisten_abort(srv, p->pending);
		/* Only what this reload started: the running server stays. */
		metrics_destroy(p->metrics, NULL, NULL);
		config_finish(&p->next);
		memset(p, 0, sizeof(*p));
		return r;
	}
	return 0;
}

/* ---- applying ------------------------------------------------------------- */

/* Whether cfg names the server backend/server (any key). */
static bool reload_in_file(const struct config *cfg, const char *backend,
			   const char *server)
{
	for (size_t i = 0; i < cfg->n_endpoints; i++)
		if (strcmp(cfg->endpoints[i].backend, backend) == 0 &&
		    strcmp(cfg->endpoints[i].server, server) == 0)
			return true;
	return false;
}

/* The key id of ep equal to key ("" or NULL: keyless), as ep's own
 * string; "" for keyless; NULL when ep has no such key. */
static const char *reload_key(const struct config_endpoint *ep,
			      const char *key)
{
	if (key == NULL || key[0] == '\0')
		return ep->n_keys == 0 ? "" : NULL;
	for (size_t k = 0; k < ep->n_keys; k++)
		if (strcmp(ep->keys[k], key) == 0)
			return ep->keys[k];
	return NULL;
}

/* Makes the core's endpoints follow r->cfg (already the new file): an
 * endpoint of a server in it takes its metadata (keeping its statistics
 * and map entries), one of a key id or a server the new file dropped
 * leaves, one it adds joins (route_server_add, as a poll would add it).
 * Servers of neither file (HAProxy's runtime API alone) stay as they
 * are. */
static void reload_endpoints(struct route *r, const struct config *old,
			     uint64_t now, struct reload_changes *ch)
{
	struct core *c = r->core;
	int nexti;
	for (int i = core_endpoint_next(c, -1); i >= 0; i = nexti) {
		nexti = core_endpoint_next(c, i);
		struct core_endpoint_info info;
		if (core_endpoint_info(c, i, now, &info) < 0)
			continue;
		const struct config_endpoint *ne = route_config_find(
			r, core_str_c(info.backend), core_str_c(info.server));
		const char *key = ne != NULL ? reload_key(ne, info.key_id) : NULL;
		if (key != NULL) {
			struct core_endpoint_config ec = {
				.backend = ne->backend, .server = ne->server,
				.key_id = key[0] != '\0' ? key : NULL,
				.models = (const char *const *)ne->models,
				.n_models = ne->n_models, .weight = ne->weight,
				.cost_per_mtok = ne->cost_per_mtok,
				.slots = ne->slots,
				.tier = config_tier(r->cfg, ne->backend, ne),
			};
			int e = core_endpoint_update(c, i, &ec);
			if (e < 0) {
				ch->failed++;
				log_error("endpoint not updated",
					  "backend=%s server=%s error=%s",
					  ne->backend, ne->server, strerror(-e));
			} else {
				ch->updated++;
			}
			continue;
		}
		if (ne == NULL && !reload_in_file(old, info.backend, info.server)) {
			/* HAProxy's alone: the defaults, but its backend's
			 * tier (backends[]) may have changed. */
			unsigned t = config_tier(r->cfg, info.backend, NULL);
			if (info.key_id == NULL && t != info.tier) {
				struct core_endpoint_config ec = {
					.backend = info.backend, .server = info.server,
					.weight = info.weight,
					.cost_per_mtok = info.cost_per_mtok,
					.slots = info.slots,
					.tier = t,
				};
				if (core_endpoint_update(c, i, &ec) == 0)
					ch->updated++;
				else
					ch->failed++;
			}
			continue;
		}
		/* info's strings are the core's: copied before the removal. */
		char b[CONFIG_NAME_MAX + 1], s[CONFIG_NAME_MAX + 1];
		snprintf(b, sizeof(b), "%s", info.backend);
		snprintf(s, sizeof(s), "%s", info.server);
		if (core_endpoint_remove(c, i) == 0) {
			ch->removed++;
			log_info("endpoint left the pool (configuration)",
				 "backend=%s server=%s", b, s);
		}
	}
	for (size_t e = 0; e < r->cfg->n_endpoints; e++) {
		const struct config_endpoint *ep = &r->cfg->endpoints[e];
		int a = route_server_add(r, core_str_c(ep->backend),
					 core_str_c(ep->server), now);
		if (a < 0) {
			ch->failed++;
			log_error("endpoint not added", "backend=%s server=%s error=%s",
				  ep->backend, ep->server, strerror(-a));
		} else if (a > 0) {
			ch->added += (unsigned)a;
			log_info("endpoint joined the pool (configuration)",
				 "backend=%s server=%s", ep->backend, ep->server);
		}
	}
}

void reload_commit(struct reload_plan *p, struct server *srv,
		   struct config *cur, struct metrics **metrics,
		   uint64_t now_ms, struct reload_changes *ch)
{
	memset(ch, 0, sizeof(*ch));
	server_relisten_commit(srv, &p->next, p->pending);
	if (p->metrics_changed) {
		metrics_destroy(*metrics, NULL, NULL);
		*metrics = p->metrics;
	}
	/* In place: the server, the route, the poller and the log input
	 * hold cur. The old contents live until the endpoints are done. */
	struct config old = *cur;
	*cur = p->next;
	reload_endpoints(&srv->route, &old, now_ms, ch);
	config_finish(&old);
	memset(&p->next, 0, sizeof(p->next)); /* *cur's now */
	p->pending = NULL;
	p->metrics = NULL;
}

/* ---- the file read off the loop ------------------------------------------- */

static void reload_parse_done(uv_work_t *w, int status);

static void reload_parse_work(uv_work_t *w)
{
	struct reload_parse *rp = container_of(w, struct reload_parse, work);
	/* The threadpool: only rp's own fields and the loader. */
	rp->rc = reload_load(&rp->next, rp->opts, rp->err, sizeof(rp->err));
}

static int reload_parse_queue(struct reload_parse *rp)
{
	rp->busy = true;
	int r = uv_queue_work(rp->loop, &rp->work, reload_parse_work,
			      reload_parse_done);
	if (r < 0)
		rp->busy = false;
	return r;
}

static void reload_parse_done(uv_work_t *w, int status)
{
	struct reload_parse *rp = container_of(w, struct reload_parse, work);
	rp->busy = false;
	if (status == 0)
		rp->parses++;
	bool deliver = status == 0 && !rp->stopped && !rp->again;
	if (!deliver) {
		if (status == 0 && rp->rc == 0)
			config_finish(&rp->next);
		if (rp->again && !rp->stopped) {
			rp->again = false;
			log_info("reload superseded by a newer request: reading the file again",
				 NULL);
			int r = reload_parse_queue(rp);
			if (r < 0) {
				snprintf(rp->err, sizeof(rp->err),
					 "%s: cannot queue the parse: %s\n",
					 rp->opts->path, uv_strerror(r));
				rp->cb(rp, r, NULL, rp->err, rp->arg);
			}
		}
		return;
	}
	if (rp->rc == 0) {
		rp->cb(rp, 0, &rp->next, "", rp->arg);
		/* Whatever the callee left is freed, not leaked. */
		config_finish(&rp->next);
	} else {
		rp->cb(rp, rp->rc, NULL, rp->err, rp->arg);
	}
}

void reload_parse_init(struct reload_parse *rp, uv_loop_t *loop,
		       const struct reload_opts *o, reload_parsed_fn cb,
		       void *arg)
{
	memset(rp, 0, sizeof(*rp));
	rp->loop = loop;
	rp->opts = o;
	rp->cb = cb;
	rp->arg = arg;
}

int reload_parse_request(struct reload_parse *rp)
{
	if (rp->stopped)
		return -ECANCELED;
	if (rp->busy) {
		rp->again = true;
		return 1;
	}
	return reload_parse_queue(rp);
}

void reload_parse_finish(struct reload_parse *rp)
{
	rp->stopped = true;
	rp->again = false;
	/* A parse not started yet ends now (status UV_ECANCELED); a running
	 * one finishes on its thread, the loop waiting for it. */
	if (rp->busy)
		uv_cancel((uv_req_t *)&rp->work);
}
