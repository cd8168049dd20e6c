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
#include "artefact.h"
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
	char url[CONFIG_URL_MAX + 1];      /* engine_metrics; "": none */
	char info_url[CONFIG_URL_MAX + 1]; /* engine_info; "": none */
	char *buf;          /* ENGINE_BODY_MAX, from the first poll on */
	char *info_buf;     /* ENGINE_INFO_MAX, from the first read on */
	bool busy;          /* a poll is out: buf is libcurl's */
	bool info_busy;     /* a read of engine_info is out */
	uint64_t info_next_ms; /* the next read of engine_info */
	uint64_t fingerprint;  /* of the last description read; 0: none */
	bool mismatch;      /* another endpoint of one of its models differs */
	bool info_failing;
	bool gone;          /* no longer in the config: freed when idle */
	bool seen;          /* in the config at this tick */
	bool failing;       /* the last poll failed (logged once per change) */
	bool polled;        /* some poll ended */
};

static void engine_target_free(struct engine_target *t)
{
	free(t->buf);
	free(t->info_buf);
	free(t);
}

/* Core endpoint indices of t's names (one per key id), at most cap. */
static unsigned engine_endpoints(struct engine *en, const struct engine_target *t,
				 int *idx, unsigned cap)
{
	struct route *r = en->route;
	const struct config_endpoint *ep = route_config_find(r, core_str_c(t->backend),
							     core_str_c(t->server));
	size_t nk = ep != NULL && ep->n_keys > 0 ? ep->n_keys : 1;
	unsigned n = 0;
	for (size_t k = 0; k < nk && n < cap; k++) {
		const char *key = ep != NULL && ep->n_keys > 0 ? ep->keys[k] : "";
		int i = core_endpoint_find(r->core, core_str_c(t->backend),
					   core_str_c(t->server), core_str_c(key));
		if (i >= 0)
			idx[n++] = i;
	}
	return n;
}

/* Gives the core one poll's result for every endpoint of t's names;
 * full: the engine's running count when some requests were waiting (it
 * ran all it could), else 0. */
static void engine_apply(struct engine *en, const struct engine_target *t,
			 bool ok, uint32_t load, uint32_t full, double kv)
{
	struct route *r = en->route;
	uint64_t now = uv_now(en->loop);
	int idx[64];
	unsigned n = engine_endpoints(en, t, idx, sizeof(idx) / sizeof(idx[0]));
	/* One engine, n key ids: the core counts each endpoint+key, so the
	 * engine's count is split as the runtime API's is. */
	for (unsigned i = 0; i < n; i++) {
		core_endpoint_engine(r->core, idx[i], ok, route_share(load, i, n),
				     kv, now);
		if (full > 0)
			core_endpoint_engine_full(r->core, idx[i],
						  route_share(full, i, n));
	}
}

/* A count as published (a double; the parser bounds it) as a uint32. */
static uint32_t engine_count(double v)
{
	double x = llround(v);
	return x > UINT32_MAX ? UINT32_MAX : x < 0 ? 0 : (uint32_t)x;
}

static void engine_on_done(void *arg, long status, const char *err,
			   size_t len, bool cut)
{
	struct engine_target *t = arg;
	struct engine *en = t->en;
	t->busy = false;
	if (t->gone || en->stopping) {
		if (t->gone && !t->info_busy)
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
	uint32_t load = 0, full = 0;
	if (ok) {
		load = engine_count(l.running + l.waiting);
		/* waiting beside running: the engine ran all it could */
		if (engine_count(l.waiting) > 0)
			full = engine_count(l.running);
		r->engine.polls_ok++;
	} else {
		r->engine.polls_failed++;
	}
	engine_apply(en, t, ok, load, full, l.kv_usage);
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
		if (ep->engine_metrics == NULL && ep->engine_info == NULL)
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
		snprintf(t->url, sizeof(t->url), "%s",
			 ep->engine_metrics != NULL ? ep->engine_metrics : "");
		if (strcmp(t->info_url, ep->engine_info != NULL ? ep->engine_info : "") != 0) {
			snprintf(t->info_url, sizeof(t->info_url), "%s",
				 ep->engine_info != NULL ? ep->engine_info : "");
			t->info_next_ms = 0; /* read the new one now */
		}
		t->seen = true;
	}
	for (size_t i = 0; i < en->n;) {
		struct engine_target *t = en->t[i];
		if (t->seen) {
			i++;
			continue;
		}
		en->t[i] = en->t[--en->n];
		if (t->busy || t->info_busy)
			t->gone = true; /* freed by its last callback */
		else
			engine_target_free(t);
	}
	return rc;
}

/* Whether config endpoints a and b share a model name (no list: every
 * model). */
static bool engine_share_model(const struct config_endpoint *a,
			       const struct config_endpoint *b, const char **model)
{
	if (a->n_models == 0 || b->n_models == 0) {
		*model = a->n_models > 0 ? a->models[0] : b->n_models > 0 ? b->models[0] : "*";
		return true;
	}
	for (size_t i = 0; i < a->n_models; i++)
		for (size_t j = 0; j < b->n_models; j++)
			if (strcmp(a->models[i], b->models[j]) == 0) {
				*model = a->models[i];
				return true;
			}
	return false;
}

/* Marks the targets whose fingerprint differs from another one's of a
 * shared model name; logs each once when it starts to. O(targets^2),
 * at each description read (engine.info_interval). */
static void engine_mismatches(struct engine *en)
{
	struct route *r = en->route;
	for (size_t i = 0; i < en->n; i++) {
		struct engine_target *t = en->t[i];
		const struct config_endpoint *a = route_config_find(r, core_str_c(t->backend),
								    core_str_c(t->server));
		const struct engine_target *other = NULL;
		const char *model = NULL;
		for (size_t j = 0; j < en->n && other == NULL && a != NULL; j++) {
			const struct engine_target *u = en->t[j];
			if (u == t || t->fingerprint == 0 || u->fingerprint == 0 ||
			    u->fingerprint == t->fingerprint)
				continue;
			const struct config_endpoint *b = route_config_find(
				r, core_str_c(u->backend), core_str_c(u->server));
			if (b != NULL && engine_share_model(a, b, &model))
				other = u;
		}
		bool mm = other != NULL;
		if (mm && !t->mismatch)
			log_warn("endpoints serving one model name serve different artefacts: their outputs differ",
				 "backend=%s server=%s fingerprint=%016llx model=%s other=%s/%s other_fingerprint=%016llx",
				 t->backend, t->server, (unsigned long long)t->fingerprint,
				 model, other->backend, other->server,
				 (unsigned long long)other->fingerprint);
		else if (!mm && t->mismatch)
			log_info("endpoint's artefact matches the others' of its models again",
				 "backend=%s server=%s fingerprint=%016llx", t->backend,
				 t->server, (unsigned long long)t->fingerprint);
		t->mismatch = mm;
		int idx[64];
		unsigned n = engine_endpoints(en, t, idx, sizeof(idx) / sizeof(idx[0]));
		for (unsigned k = 0; k < n; k++)
			core_endpoint_artefact_mismatch(r->core, idx[k], mm);
	}
}

static void engine_on_info(void *arg, long status, const char *err,
			   size_t len, bool cut)
{
	struct engine_target *t = arg;
	struct engine *en = t->en;
	t->info_busy = false;
	if (t->gone || en->stopping) {
		if (t->gone && !t->busy)
			engine_target_free(t);
		return;
	}
	struct route *r = en->route;
	char why[160];
	struct art_info a = { 0 };
	int ar = ART_EJSON;
	if (status == 0)
		snprintf(why, sizeof(why), "no answer: %s", err);
	else if (status != 200)
		snprintf(why, sizeof(why), "HTTP status %ld", status);
	else if (cut)
		snprintf(why, sizeof(why), "body over %d bytes", ENGINE_INFO_MAX);
	else if ((ar = art_fingerprint(t->info_buf, len, &a)) != ART_OK)
		snprintf(why, sizeof(why), "%s at byte %zu", art_status_name(ar),
			 a.err_off);
	if (status == 200 && !cut && ar == ART_OK) {
		r->engine.info_ok++;
		if (a.fingerprint != t->fingerprint)
			log_info("endpoint artefact read", "backend=%s server=%s fingerprint=%016llx fields=%u",
				 t->backend, t->server, (unsigned long long)a.fingerprint,
				 (unsigned)a.fields);
		t->fingerprint = a.fingerprint;
		t->info_failing = false;
		int idx[64];
		unsigned n = engine_endpoints(en, t, idx, sizeof(idx) / sizeof(idx[0]));
		for (unsigned k = 0; k < n; k++)
			core_endpoint_artefact(r->core, idx[k], a.fingerprint);
		engine_mismatches(en);
		return;
	}
	/* The last fingerprint read stays: a server that does not answer
	 * has not changed what it serves. */
	r->engine.info_failed++;
	if (!t->info_failing) {
		char q[200];
		log_quote(q, sizeof(q), why, strlen(why));
		log_warn("endpoint description not read: its artefact fingerprint stays as it was",
			 "backend=%s server=%s url=%s error=%s", t->backend, t->server,
			 t->info_url, q);
	}
	t->info_failing = true;
}

/* Starts the reads of engine_info that are due. */
static void engine_info_tick(struct engine *en, uint64_t now)
{
	const struct config *cfg = en->cfg;
	for (size_t i = 0; i < en->n; i++) {
		struct engine_target *t = en->t[i];
		if (t->info_url[0] == '\0' || t->info_busy || now < t->info_next_ms)
			continue;
		if (t->info_buf == NULL && (t->info_buf = malloc(ENGINE_INFO_MAX)) == NULL)
			continue;
		t->info_next_ms = now + cfg->engine_info_interval_ms;
		if (probe_fetch(en->probe, t->info_url, cfg->engine_timeout_ms, t->info_buf,
				ENGINE_INFO_MAX, engine_on_info, t) == 0)
			t->info_busy = true;
		else
			en->route->engine.info_failed++;
	}
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
	engine_info_tick(en, now);
	for (size_t i = 0; i < en->n; i++) {
		struct engine_target *t = en->t[i];
		if (t->url[0] == '\0')
			continue;
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
			engine_apply(en, t, false, 0, 0, -1);
			log_debug("engine metrics poll not sent",
				  "backend=%s server=%s error=%s", t->backend,
				  t->server, strerror(-e));
			continue;
		}
		t->busy = true;
		r->engine.polls++;
	}
}

int engine_init(struct engine *en, uv_loop_t *loop, struct route *route,
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

void engine_finish(struct engine *en)
{
	if (en->started && !en->stopping) {
		en->stopping = true;
		uv_timer_stop(&en->tick);
		uv_close((uv_handle_t *)&en->tick, NULL);
	}
	for (size_t i = 0; i < en->n; i++)
		engine_target_free(en->t[i]);
	free(en->t);
	en->t = NULL;
	en->n = en->cap = 0;
}
