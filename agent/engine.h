/* engine.h - engine load: polls each endpoint's own /metrics (engine_metrics) on the prober's libcurl multi and gives the core the engine's running and waiting requests. */
#ifndef WARMLANE_ENGINE_H
#define WARMLANE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct config;
struct probe;
struct route;

/* A /metrics body is read up to this, then the poll fails: vLLM's, with
 * its histograms, is some 100-300 KiB. */
#define ENGINE_BODY_MAX (1024 * 1024)
/* An endpoint's description (/v1/models, /props) is read up to this:
 * llama.cpp's /props with its chat template is a few KiB. */
#define ENGINE_INFO_MAX (256 * 1024)

struct engine_target;

/* The poller. Zeroed, engine_finish is a no-op; it must not move once
 * initialised. */
struct engine {
	uv_loop_t *loop;
	struct route *route;
	const struct config *cfg;   /* read at each tick: a reload applies */
	struct probe *probe;        /* the transfers go through its multi */
	uv_timer_t tick;
	uint64_t interval_ms;       /* the tick's period now */
	struct engine_target **t;   /* one per backend/server with a URL */
	size_t n, cap;
	bool started;
	bool stopping;
};

/* Starts en on loop: every cfg->engine_poll_interval_ms it expires the
 * core's engine samples older than params.engine_max_age_ms
 * (core_engine_expire), then GETs each endpoint's engine_metrics through
 * probe_fetch (at most one poll out per endpoint: one still out at the
 * next tick is let run, up to engine_timeout), parses the body
 * (prom_load_parse) and gives running + waiting to every core endpoint of
 * that backend/server (split over its key ids, like the runtime API's
 * scur + qcur), or a failure. Endpoints without a URL are left to the
 * runtime API. probe must be started; cfg, route and probe must outlive
 * en. Returns 0 or -errno. */
int engine_init(struct engine *en, uv_loop_t *loop, struct route *route,
		const struct config *cfg, struct probe *probe);

/* Closes the tick's handle (en must stay put until the loop has run its
 * close callback) and frees en's targets and their buffers. Polls still
 * out are ended by probe_finish, which must come first, in the same loop
 * turn (their callbacks then never come). en may be zeroed or never
 * initialised. */
void engine_finish(struct engine *en);

#endif
