/* route_fx.h - agent tests of route and notify: a config from YAML, requests, an idle poll. */
#ifndef WARMLANE_TEST_ROUTE_FX_H
#define WARMLANE_TEST_ROUTE_FX_H

#include <check.h>
#include <string.h>

#include "config.h"
#include "core.h"
#include "route.h"
#include "spop.h"

/* cfg from yaml (the test fails on an error). */
static inline void load(struct config *cfg, const char *yaml)
{
	char err[4096];
	ck_assert_int_eq(config_init(cfg), 0);
	int r = config_load_data(cfg, "t.yaml", yaml, strlen(yaml), err,
				 sizeof(err));
	ck_assert_msg(r == 0, "%s", err);
}

/* A request whose arguments are all absent (NULL). */
static inline void req_init(struct route_request *req)
{
	memset(req, 0, sizeof(*req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req->args[i] = spop_data_null();
}

static inline struct spop_data str(const char *s)
{
	return spop_data_string(s, strlen(s));
}

/* In-flight back to 0 everywhere, as a runtime-API poll of an idle
 * HAProxy would: decisions alone only raise it. */
static inline void idle_poll(struct route *r)
{
	for (int i = core_endpoint_next(r->core, -1); i >= 0;
	     i = core_endpoint_next(r->core, i))
		core_endpoint_sync(r->core, i, CORE_ADMIN_ENABLED, 0, 0);
}

/* The route message's argument names as haproxy/warmlane.spoe.conf sends them,
 * in ROUTE_ARG_* order. */
static const char *const spoe_route_args[] = {
	"session", "prefix1", "prefix2", "prefix3", "install", "caller",
	"src", "model", "stream", "id", "hint_srv", "hint_at", "hint_akey",
	"hint_name", "hint_peer", "size", "turn",
};

#endif
