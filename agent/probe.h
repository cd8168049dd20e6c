/* probe.h - upstream key probes: HTTP requests the agent shapes itself, through HAProxy, on libcurl's multi interface driven by libuv. */
#ifndef WARMLANE_PROBE_H
#define WARMLANE_PROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core.h"

struct config;
struct route;

/* How often the core is asked for keys due for a probe. */
#define PROBE_TICK_MS 100
/* Probes out at once; more wait for the next tick. */
#define PROBE_MAX_ACTIVE 8
/* A probe's answer body is read up to this and then cut: only its status
 * matters. */
#define PROBE_BODY_MAX 65536
/* The headers HAProxy's probe frontend reads (haproxy/haproxy-*.cfg): which
 * backend, server and key id to try. The public frontend deletes every
 * header starting with PROBE_HEADER_PREFIX, so that a client cannot send
 * them on. */
#define PROBE_HEADER_PREFIX  "x-warmlane-probe-"
#define PROBE_HEADER_BACKEND "x-warmlane-probe-backend"
#define PROBE_HEADER_SERVER  "x-warmlane-probe-server"
#define PROBE_HEADER_KEY     "x-warmlane-probe-key"

struct probe_req;

/* The prober. Zeroed, probe_finish is a no-op; it must not move once
 * started. */
struct probe {
	uv_loop_t *loop;
	struct route *route;
	const struct config *cfg;  /* read at each probe: a reload applies */
	void *multi;               /* CURLM *, NULL until started */
	uv_timer_t tick;           /* asks the core every PROBE_TICK_MS */
	uv_timer_t curl_timer;     /* libcurl's own timeout */
	struct probe_req *reqs;    /* probes out, a list */
	bool started;
	bool stopping;
};

/* What a probe's answer says (CORE_PROBE_*): 401 and 403 refused, 5xx
 * inconclusive (HAProxy's own 502/503/504 included: nothing said about
 * the key), any other HTTP status accepted; status 0 (no answer)
 * inconclusive. */
enum core_probe probe_classify(long status);

/* Starts p on loop: every PROBE_TICK_MS it takes the endpoint+keys due
 * for a probe from route's core (core_key_probe_next, which hands out
 * none while cfg has no probe target) and sends each one request,
 * `cfg->key_probe_method cfg->key_probe_path` to cfg->key_probe with the
 * PROBE_HEADER_* headers and nothing a client sent, then reports the
 * result (core_key_probe_result). cfg and route must outlive p. Returns 0
 * or -errno (nothing to stop then). */
int probe_init(struct probe *p, uv_loop_t *loop, struct route *route,
	       const struct config *cfg);

/* Cancels the probes out (their keys stay as they were: the core is not
 * told) and the fetches out (their callbacks are not called), and closes
 * p's handles; the loop then ends them. */
void probe_finish(struct probe *p);

/* The end of a probe_fetch: status the HTTP status (0: no answer, err
 * then says why, else "-"), buf[0..len) the body as far as it was read,
 * cut when it was longer than the buffer (the transfer was stopped
 * there). */
typedef void (*probe_fetch_cb)(void *arg, long status, const char *err,
			       size_t len, bool cut);

/* Other modules' GETs on the same libcurl multi and libuv handles as the
 * key probes (engine.c: engines' /metrics): GET url (http:// only, no
 * proxy, no redirect) within timeout_ms, connect included, the body
 * copied into buf up to cap bytes. cb is called once, from the loop,
 * unless probe_finish comes first; buf and arg must live until then.
 * Returns 0, or -ESHUTDOWN (p not started or stopping), -ENOMEM, -EINVAL
 * (libcurl refused an option): then cb is never called. */
int probe_fetch(struct probe *p, const char *url, uint64_t timeout_ms,
		char *buf, size_t cap, probe_fetch_cb cb, void *arg);

#endif
