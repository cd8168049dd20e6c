/* engine.c - engine load: polls each endpoint's own /metrics (engine_metrics) on the prober's libcurl multi and gives the core the engine's running and waiting requests. */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "probe.h"
#include "promtext.h"
#include "route.h"

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* One backend/server polled. Names and URL are copies: a reload may
 * change or remove its config endpoint while a poll is out; the result
 * goes to whatever endpoints have these names then. */
struct engine_target {
	struct engine *en;
	char backend[CONFIG_NAME_MAX + 1];
	char server[CONFIG_NAME_MAX + 1];
	char url[CONFIG_URL_MAX + 1];
	char *buf;          /* ENGINE_BODY_MAX, from the first poll on */
	bool busy;          /* a poll is out: buf is libcurl's */
	bool gone;          /* no longer in the config: freed when idle */
	bool seen;          /* in the config at this tick */
	bool failing;       /* the last poll failed (logged once per change) */
	bool polled;        /* some poll ended */
};

static void engine_target_free(struct engine_target *t)
{
	free(t->buf);
	free(t);
}

/* Gives the core one poll's result for every endpoint of t's names. */
static void engine_apply(struct engine *en, const struct engine_target *t,
			 bool ok, uint32_t load, double kv)
{
	struct route *r = en->route;
	uint64_t now = uv_now(en->loop);
	const struct config_endpoint *ep = route_config_find(r, core_str_c(t->backend),
							     core_str_c(t->server));
	size_t nk = ep != NULL && ep->n_keys > 0 ? ep->n_keys : 1;
	int idx[64];
	unsigned n = 0;
	for (size_t k = 0; k < nk && n < sizeof(idx) / sizeof(idx[0]); k++) {
		const char *key = ep != NULL && ep->n_keys > 0 ? ep->keys[k] : "";
		int i = core_endpoint_find(r->core, core_str_c(t->backend),
					   core_str_c(t->server), core_str_c(key));
		if (i >= 0)
			idx[n++] = i;
	}
	/* One engine, n key ids: the core counts each endpoint+key, so the
	 * engine's count is split as the runtime API's is. */
	for (unsigned i = 0; i < n; i++) {
		uint32_t share = (uint32_t)(load / n + (i < load % n ? 1 : 0));
		core_endpoint_engine(r->core, idx[i], ok, share, kv, now);
	}
}

static void engine_on_done(void *arg, long status, const char *err,
			   size_t len, bool cut)
{
	struct engine_target *t = arg;
	struct engine *en = t->en;
	t->busy = false;
	if (t->gone || en->stopping) {
		if (t->gone)
			engine_target_free(t);
		return;
	}
	struct route *r = en->route;
	char why[160];
	bool ok = false;
	struct prom_load l = { .kv_usage = -1 };
	if (status != 200) {
		if (status == 0)
			snprintf(why, sizeof(why), "no answer: %s", err);
		else
			snprintf(why, sizeof(why), "HTTP status %ld", status);
	} else if (cut) {
		snprintf(why, sizeof(why), "body over %d bytes", ENGINE_BODY_MAX);
	} else {
		int pr = prom_load_parse(t->buf, len, &l);
		if (pr == PROM_OK)
			ok = true;
		else if (pr == PROM_EBAD)
			snprintf(why, sizeof(why), "malformed at line %u col %u",
				 (unsigned)l.err_line, (unsigned)l.err_col);
		else if (pr == PROM_EVALUE)
			snprintf(why, sizeof(why), "a load metric that is no count at line %u",
				 (unsigned)l.err_line);
		else
			snprintf(why, sizeof(why),
				 "no running and waiting metrics of vLLM, SGLang or llama.cpp");
	}
	uint32_t load = 0;
	if (ok) {
		double v = llround(l.running + l.waiting);
		load = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		r->engine.polls_ok++;
	} else {
		r->engine.polls_failed++;
	}
	engine_apply(en, t, ok, load, l.kv_usage);
	char q_why[200];
	if (!ok) {
		log_quote(q_why, sizeof(q_why), why, strlen(why));
		if (!t->failing)
			log_warn("engine metrics poll failed: the runtime API's in-flight view takes over once the last sample is stale",
				 "backend=%s server=%s url=%s error=%s",
				 t->backend, t->server, t->url, q_why);
		else
			log_debug("engine metrics poll failed",
				  "backend=%s server=%s error=%s", t->backend,
				  t->server, q_why);
	} else if (t->failing || !t->polled) {
		log_info("engine metrics read", "backend=%s server=%s engine=%s running=%.0f waiting=%.0f",
			 t->backend, t->server, prom_engine_name(l.engine),
			 l.running, l.waiting);
	}
	t->failing = !ok;
	t->polled = true;
}

/* Makes en's targets those of the config now. Returns 0 or -ENOMEM
 * (then some are missing until a later tick). */
static int engine_sync_targets(struct engine *en)
{
	const struct config *cfg = en->cfg;
	for (size_t i = 0; i < en->n; i++)
		en->t[i]->seen = false;
	int rc = 0;
	for (size_t e = 0; e < cfg->n_endpoints; e++) {
		const struct config_endpoint *ep = &cfg->endpoints[e];
		if (ep->engine_metrics == NULL)
			continue;
		struct engine_target *t = NULL;
		for (size_t i = 0; i < en->n && t == NULL; i++)
			if (strcmp(en->t[i]->backend, ep->backend) == 0 &&
			    strcmp(en->t[i]->server, ep->server) == 0)
				t = en->t[i];
		if (t == NULL) {
			if (en->n == en->cap) {
				size_t nc = en->cap ? en->cap * 2 : 8;
				struct engine_target **nt = realloc(en->t, nc * sizeof(*nt));
				if (nt == NULL) {
					rc = -ENOMEM;
					continue;
				}
				en->t = nt;
				en->cap = nc;
			}
			t = calloc(1, sizeof(*t));
			if (t == NULL) {
				rc = -ENOMEM;
				continue;
			}
			t->en = en;
			snprintf(t->backend, sizeof(t->backend), "%s", ep->backend);
			snprintf(t->server, sizeof(t->server), "%s", ep->server);
			en->t[en->n++] = t;
		}
		/* A changed URL applies from the next poll. */
		snprintf(t->url, sizeof(t->url), "%s", ep->engine_metrics);
		t->seen = true;
	}
	for (size_t i = 0; i < en->n;) {
		struct engine_target *t = en->t[i];
		if (t->seen) {
			i++;
			continue;
		}
		en->t[i] = en->t[--en->n];
		if (t->busy)
			t->gone = true; /* freed by its callback */
		else
			engine_target_free(t);
	}
	return rc;
}

static void engine_on_tick(uv_timer_t *h)
{
	struct engine *en = container_of(h, struct engine, tick);
	struct route *r = en->route;
	const struct config *cfg = en->cfg;
	uint64_t now = uv_now(en->loop);
	core_engine_expire(r->core, now);
	if (cfg->engine_poll_interval_ms != en->interval_ms) {
		en->interval_ms = cfg->engine_poll_interval_ms;
		uv_timer_set_repeat(&en->tick, en->interval_ms);
	}
	if (engine_sync_targets(en) < 0)
		log_warn("engine metrics: out of memory, some endpoints not polled", NULL);
	for (size_t i = 0; i < en->n; i++) {
		struct engine_target *t = en->t[i];
		if (t->busy) {
			r->engine.polls_overlapped++;
			continue;
		}
		if (t->buf == NULL && (t->buf = malloc(ENGINE_BODY_MAX)) == NULL) {
			r->engine.polls_failed++;
			continue;
		}
		int e = probe_fetch(en->probe, t->url, cfg->engine_timeout_ms,
				    t->buf, ENGINE_BODY_MAX, engine_on_done, t);
		if (e < 0) {
			r->engine.polls_failed++;
			engine_apply(en, t, false, 0, -1);
			log_debug("engine metrics poll not sent",
				  "backend=%s server=%s error=%s", t->backend,
				  t->server, strerror(-e));
			continue;
		}
		t->busy = true;
		r->engine.polls++;
	}
}

int engine_start(struct engine *en, uv_loop_t *loop, struct route *route,
		 const struct config *cfg, struct probe *probe)
{
	*en = (struct engine){ .loop = loop, .route = route, .cfg = cfg,
			       .probe = probe,
			       .interval_ms = cfg->engine_poll_interval_ms };
	int r = uv_timer_init(loop, &en->tick);
	if (r < 0)
		return r;
	en->started = true;
	return uv_timer_start(&en->tick, engine_on_tick, en->interval_ms,
			      en->interval_ms);
}

void engine_stop(struct engine *en)
{
	if (!en->started || en->stopping)
		return;
	en->stopping = true;
	uv_timer_stop(&en->tick);
	uv_close((uv_handle_t *)&en->tick, NULL);
}

void engine_finish(struct engine *en)
{
	for (size_t i = 0; i < en->n; i++)
		engine_target_free(en->t[i]);
	free(en->t);
	en->t = NULL;
	en->n = en->cap = 0;
}
