/* config_schema.c - the configuration's libcyaml schema: every key, its type and its bounds. */
#include "config_schema.h"

#include <cyaml/cyaml.h>

#define OPT CYAML_FLAG_OPTIONAL
#define OPT_NULL (CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER_NULL)
#define STR(key, st, m) CYAML_FIELD_STRING_PTR(key, OPT, st, m, 0, CYAML_UNLIMITED)
/* Integers are read as numbers: libcyaml 1.3 reads "1.5" as the integer 1,
 * so the semantic pass checks they are whole instead. */
#define INT(key, st, m) CYAML_FIELD_FLOAT_PTR(key, OPT | CYAML_FLAG_STRICT, st, m)
#define FLT(key, st, m) CYAML_FIELD_FLOAT_PTR(key, OPT | CYAML_FLAG_STRICT, st, m)
/* A list of strings of at most max entries: every list is bounded, so
 * that no file can make a check over its entries slow. */
#define STRSEQ(key, st, m, max) \
	CYAML_FIELD_SEQUENCE(key, OPT_NULL, st, m, &str_entry, 0, max)

static const cyaml_schema_value_t str_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static const cyaml_schema_field_t metrics_fields[] = {
	STR("listen", struct raw_metrics, listen),
	INT("max_connections", struct raw_metrics, max_connections),
	STR("connection_timeout", struct raw_metrics, connection_timeout),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t spop_fields[] = {
	STR("hello_timeout", struct raw_spop, hello_timeout),
	STR("idle_timeout", struct raw_spop, idle_timeout),
	INT("max_connections", struct raw_spop, max_connections),
	INT("coalesce_us", struct raw_spop, coalesce_us),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t runtime_fields[] = {
	STR("socket", struct raw_runtime, socket),
	STRSEQ("backends", struct raw_runtime, backends, 1024),
	STR("poll_interval", struct raw_runtime, poll_interval),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t state_fields[] = {
	STR("file", struct raw_state, file),
	STR("snapshot_interval", struct raw_state, snapshot_interval),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t command_socket_fields[] = {
	STR("path", struct raw_command_socket, path),
	STR("mode", struct raw_command_socket, mode),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t log_input_fields[] = {
	STR("path", struct raw_log_input, path),
	STR("mode", struct raw_log_input, mode),
	INT("udp_port", struct raw_log_input, udp_port),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t key_probe_fields[] = {
	STR("target", struct raw_key_probe, target),
	STR("method", struct raw_key_probe, method),
	STR("path", struct raw_key_probe, path),
	STR("interval", struct raw_key_probe, interval),
	STR("timeout", struct raw_key_probe, timeout),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t engine_fields[] = {
	STR("poll_interval", struct raw_engine, poll_interval),
	STR("timeout", struct raw_engine, timeout),
	STR("max_age", struct raw_engine, max_age),
	STR("info_interval", struct raw_engine, info_interval),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t retry_budget_fields[] = {
	CYAML_FIELD_BOOL_PTR("enabled", OPT,
			     struct raw_retry_budget, enabled),
	FLT("ratio", struct raw_retry_budget, ratio),
	FLT("min_per_second", struct raw_retry_budget, min_per_second),
	STR("window", struct raw_retry_budget, window),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t policy_fields[] = {
	STR("affinity_ttl", struct raw_policy, affinity_ttl),
	INT("affinity_max_entries", struct raw_policy, affinity_max_entries),
	STRSEQ("identity_ladder", struct raw_policy, identity_ladder, 16),
	FLT("ewma_alpha", struct raw_policy, ewma_alpha),
	INT("cold_start_samples", struct raw_policy, cold_start_samples),
	STR("prior_ttfb", struct raw_policy, prior_ttfb),
	STR("idle_reset", struct raw_policy, idle_reset),
	FLT("sticky_tolerance", struct raw_policy, sticky_tolerance),
	INT("slow_run", struct raw_policy, slow_run),
	FLT("load_factor", struct raw_policy, load_factor),
	INT("load_floor", struct raw_policy, load_floor),
	INT("load_floor_e2e", struct raw_policy, load_floor_e2e),
	INT("warm_slack", struct raw_policy, warm_slack),
	FLT("hot_share", struct raw_policy, hot_share),
	INT("place_choices", struct raw_policy, place_choices),
	FLT("place_load_z", struct raw_policy, place_load_z),
	STR("routers", struct raw_policy, routers),
	FLT("alone_place_load_z", struct raw_policy, alone_place_load_z),
	STR("alone_affinity_ttl", struct raw_policy, alone_affinity_ttl),
	INT("place_long_kib", struct raw_policy, place_long_kib),
	FLT("place_long_z", struct raw_policy, place_long_z),
	FLT("owned_bound", struct raw_policy, owned_bound),
	FLT("slow_start", struct raw_policy, slow_start),
	STR("owned_half_life", struct raw_policy, owned_half_life),
	FLT("explore_share", struct raw_policy, explore_share),
	FLT("p2c_margin", struct raw_policy, p2c_margin),
	FLT("cost_weight_per_ms", struct raw_policy, cost_weight_per_ms),
	STR("breaker_window", struct raw_policy, breaker_window),
	INT("breaker_min_requests", struct raw_policy, breaker_min_requests),
	FLT("breaker_failure_ratio", struct raw_policy, breaker_failure_ratio),
	INT("breaker_consecutive", struct raw_policy, breaker_consecutive),
	STR("breaker_cooldown", struct raw_policy, breaker_cooldown),
	STR("breaker_cooldown_max", struct raw_policy, breaker_cooldown_max),
	INT("half_open_probes", struct raw_policy, half_open_probes),
	STR("rate_limit_cooldown", struct raw_policy, rate_limit_cooldown),
	STR("rate_limit_cooldown_max", struct raw_policy, rate_limit_cooldown_max),
	STR("dead_key_retry", struct raw_policy, dead_key_retry),
	INT("model_mismatch_404s", struct raw_policy, model_mismatch_404s),
	STR("score_by", struct raw_policy, score_by),
	STR("session_scope", struct raw_policy, session_scope),
	CYAML_FIELD_BOOL_PTR("artefact_affinity", OPT, struct raw_policy,
			     artefact_affinity),
	CYAML_FIELD_BOOL_PTR("slow_start_leave", OPT, struct raw_policy,
			     slow_start_leave),
	CYAML_FIELD_BOOL_PTR("place_slots", OPT, struct raw_policy, place_slots),
	STR("mode", struct raw_policy, mode),
	FLT("tier_spill", struct raw_policy, tier_spill),
	STR("tier_return", struct raw_policy, tier_return),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t endpoint_fields[] = {
	STR("backend", struct raw_endpoint, backend),
	STR("server", struct raw_endpoint, server),
	STRSEQ("models", struct raw_endpoint, models, 256),
	FLT("weight", struct raw_endpoint, weight),
	FLT("cost_per_mtok", struct raw_endpoint, cost_per_mtok),
	INT("slots", struct raw_endpoint, slots),
	STRSEQ("keys", struct raw_endpoint, keys, 256),
	STR("engine_metrics", struct raw_endpoint, engine_metrics),
	STR("engine_info", struct raw_endpoint, engine_info),
	INT("tier", struct raw_endpoint, tier),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t backend_fields[] = {
	STR("name", struct raw_backend, name),
	INT("tier", struct raw_backend, tier),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t backend_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_backend,
			    backend_fields),
};

static const cyaml_schema_value_t endpoint_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_endpoint,
			    endpoint_fields),
};

static const cyaml_schema_field_t top_fields[] = {
	STR("log_level", struct raw_config, log_level),
	STRSEQ("listen", struct raw_config, listen, 64),
	INT("max_frame_size", struct raw_config, max_frame_size),
	CYAML_FIELD_MAPPING_PTR("spop", OPT_NULL, struct raw_config, spop,
				spop_fields),
	CYAML_FIELD_MAPPING_PTR("metrics", OPT_NULL, struct raw_config,
				metrics, metrics_fields),
	CYAML_FIELD_MAPPING_PTR("runtime_api", OPT_NULL, struct raw_config,
				runtime_api, runtime_fields),
	CYAML_FIELD_MAPPING_PTR("state", OPT_NULL, struct raw_config, state,
				state_fields),
	CYAML_FIELD_MAPPING_PTR("log_input", OPT_NULL, struct raw_config,
				log_input, log_input_fields),
	CYAML_FIELD_MAPPING_PTR("command_socket", OPT_NULL, struct raw_config,
				command_socket, command_socket_fields),
	CYAML_FIELD_MAPPING_PTR("key_probe", OPT_NULL, struct raw_config,
				key_probe, key_probe_fields),
	CYAML_FIELD_MAPPING_PTR("retry_budget", OPT_NULL, struct raw_config,
				retry_budget, retry_budget_fields),
	CYAML_FIELD_MAPPING_PTR("engine", OPT_NULL, struct raw_config, engine,
				engine_fields),
	CYAML_FIELD_MAPPING_PTR("policy", OPT_NULL, struct raw_config, policy,
				policy_fields),
	CYAML_FIELD_SEQUENCE("endpoints", OPT_NULL, struct raw_config,
			     endpoints, &endpoint_entry, 0, 4096),
	CYAML_FIELD_SEQUENCE("backends", OPT_NULL, struct raw_config,
			     backends, &backend_entry, 0, 1024),
	CYAML_FIELD_END
};

const cyaml_schema_value_t config_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_config, top_fields),
};

static const cyaml_config_t cy_config = {
	.mem_fn = cyaml_mem,
	.log_level = CYAML_LOG_ERROR,
	.flags = CYAML_CFG_DEFAULT,
};

void config_raw_free(struct raw_config *raw)
{
	cyaml_free(&cy_config, &config_schema, raw, 0);
}
