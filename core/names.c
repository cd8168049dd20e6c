/* names.c - every enum's name, as /metrics, logs, the config and explain spell it: one table each, one lookup (names.h). */
#include "names.h"

#include <stddef.h>

#include "core.h"
#include "params.h"
#include "trace.h"

static const char *const hint_names[CORE_HINT_COUNT] = {
	[CORE_HINT_ABSENT] = "absent",	   [CORE_HINT_USED] = "used",
	[CORE_HINT_AGREES] = "agrees",	   [CORE_HINT_OLDER] = "older",
	[CORE_HINT_REFUSED] = "refused",   [CORE_HINT_MISMATCH] = "mismatch",
};

const char *core_hint_name(enum core_hint_use u)
{
	return NAMES_GET(hint_names, u, "unknown");
}

static const char *const reason_names[CORE_REASON_COUNT] = {
	[CORE_REASON_AFFINITY] = "affinity",
	[CORE_REASON_HASH] = "hash",
	[CORE_REASON_SPILL] = "spill",
	[CORE_REASON_P2C] = "p2c",
	[CORE_REASON_COOLDOWN_FALLBACK] = "cooldown_fallback",
	[CORE_REASON_KEY_FALLBACK] = "key_fallback",
	[CORE_REASON_NO_MODEL] = "no_model",
	[CORE_REASON_NONE] = "none",
	[CORE_REASON_FAILOVER] = "failover",
};

const char *core_reason_name(enum core_reason r)
{
	return NAMES_GET(reason_names, r, "unknown");
}

static const char *const outcome_names[CORE_OUTCOME_COUNT] = {
	[CORE_OUTCOME_SUCCESS] = "success",
	[CORE_OUTCOME_NEUTRAL] = "neutral",
	[CORE_OUTCOME_FAILURE] = "failure",
	[CORE_OUTCOME_RATE_LIMITED] = "rate_limited",
	[CORE_OUTCOME_KEY_DEAD] = "key_dead",
	[CORE_OUTCOME_INVALID] = "invalid",
};

const char *core_outcome_name(enum core_outcome o)
{
	return NAMES_GET(outcome_names, o, "unknown");
}

static const char *const probe_names[CORE_PROBE_COUNT] = {
	[CORE_PROBE_ACCEPTED] = "accepted",
	[CORE_PROBE_REFUSED] = "refused",
	[CORE_PROBE_INCONCLUSIVE] = "inconclusive",
};

const char *core_probe_name(enum core_probe r)
{
	return NAMES_GET(probe_names, r, "unknown");
}

static const char *const end_names[CORE_END_COUNT] = {
	[CORE_END_COMPLETE] = "complete",
	[CORE_END_CLIENT_ABORT] = "client_abort",
	[CORE_END_SERVER_CUT] = "server_cut",
	[CORE_END_SERVER_FAIL] = "server_fail",
};

const char *core_end_name(enum core_end e)
{
	return NAMES_GET(end_names, e, "unknown");
}

static const char *const breaker_names[CORE_BREAKER_COUNT] = {
	[CORE_BREAKER_CLOSED] = "closed",
	[CORE_BREAKER_OPEN] = "open",
	[CORE_BREAKER_HALF_OPEN] = "half_open",
};

const char *core_breaker_name(enum core_breaker b)
{
	return NAMES_GET(breaker_names, b, "unknown");
}

static const char *const speed_names[CORE_SPEED_COUNT] = {
	[CORE_SPEED_FIT] = "fit",
	[CORE_SPEED_KEPT] = "kept",
	[CORE_SPEED_LEFT] = "left",
};

const char *core_speed_name(enum core_speed v)
{
	return NAMES_GET(speed_names, v, "unknown");
}

static const char *const admin_names[CORE_ADMIN_COUNT] = {
	[CORE_ADMIN_ENABLED] = "enabled",
	[CORE_ADMIN_MAINT] = "maint",
	[CORE_ADMIN_DRAIN] = "drain",
	[CORE_ADMIN_DOWN] = "down",
	[CORE_ADMIN_NOLB] = "nolb",
};

const char *core_admin_name(enum core_admin a)
{
	return NAMES_GET(admin_names, a, "unknown");
}

static const char *const trace_excl_names[CORE_TRACE_EXCL_COUNT] = {
	[CORE_TRACE_CANDIDATE] = "candidate",
	[CORE_TRACE_NOT_SERVING] = "not_serving",
	[CORE_TRACE_DISABLED] = "disabled",
	[CORE_TRACE_DRAINED] = "drained",
	[CORE_TRACE_ADMIN] = "admin",
	[CORE_TRACE_MODEL_404] = "model_404",
	[CORE_TRACE_KEY_DEAD] = "key_dead",
	[CORE_TRACE_BREAKER] = "breaker",
};

const char *core_trace_excl_name(enum core_trace_excl e)
{
	return NAMES_GET(trace_excl_names, e, "unknown");
}

static const char *const rung_names[CORE_RUNG_COUNT] = {
	[CORE_RUNG_SESSION] = "session",
	[CORE_RUNG_PREFIX] = "prefix",
	[CORE_RUNG_INSTALL] = "install",
	[CORE_RUNG_CALLER] = "caller",
	[CORE_RUNG_SRC] = "src",
};

const char *core_rung_name(enum core_rung r)
{
	return NAMES_GET(rung_names, r, NULL);
}

static const char *const score_by_names[CORE_SCORE_COUNT] = {
	[CORE_SCORE_HEADERS] = "headers",
	[CORE_SCORE_END_TO_END] = "end_to_end",
	[CORE_SCORE_BOTH] = "both",
};

const char *core_score_by_name(enum core_score_by s)
{
	return NAMES_GET(score_by_names, s, NULL);
}

static const char *const session_scope_names[CORE_SESSION_SCOPE_COUNT] = {
	[CORE_SESSION_GLOBAL] = "global",
	[CORE_SESSION_CALLER] = "caller",
};

const char *core_session_scope_name(enum core_session_scope s)
{
	return NAMES_GET(session_scope_names, s, NULL);
}

static const char *const routers_names[CORE_ROUTERS_COUNT] = {
	[CORE_ROUTERS_AUTO] = "auto",
	[CORE_ROUTERS_ONE] = "one",
	[CORE_ROUTERS_SEVERAL] = "several",
};

const char *core_routers_name(enum core_routers r)
{
	return NAMES_GET(routers_names, r, NULL);
}
