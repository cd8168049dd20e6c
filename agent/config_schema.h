/* config_schema.h - the raw configuration as read from YAML, before the checks (config*.c only). */
#ifndef WARMLANE_CONFIG_SCHEMA_H
#define WARMLANE_CONFIG_SCHEMA_H

#include <stdbool.h>

/* What the schema (config_schema.c) describes, in libcyaml's terms, and
 * the loader fills (cfg_load: the schema's offsets, sizes and flags;
 * config_raw_free frees it). Every field optional, numbers behind pointers so an absent
 * one is NULL, durations as strings (checked in the semantic pass, like
 * every range, so that all such problems are reported at once).
 *
 * Adding a key: a member here, a line in its *_fields table in
 * config_schema.c (STR, INT, FLT, STRSEQ; a mapping with
 * CYAML_FIELD_MAPPING_PTR), and its check in
 * the semantic pass (sem_duration, sem_u32, sem_double, ...) with its
 * path, "section.key": that path is what finds its line and column, and
 * the table is what unknown keys are matched against for "did you
 * mean". */
struct raw_metrics {
	char *listen;
	double *max_connections;
	char *connection_timeout;
};

struct raw_spop {
	char *hello_timeout;
	char *idle_timeout;
	double *max_connections;
	double *coalesce_us;
};

struct raw_runtime {
	char *socket;
	char **backends;
	unsigned backends_count;
	char *poll_interval;
};

struct raw_state {
	char *file;
	char *snapshot_interval;
};

struct raw_log_input {
	char *path;
	char *mode;
	double *udp_port;
};

struct raw_command_socket {
	char *path;
	char *mode;
};

struct raw_key_probe {
	char *target;
	char *method;
	char *path;
	char *interval;
	char *timeout;
};

struct raw_engine {
	char *poll_interval;
	char *timeout;
	char *max_age;
	char *info_interval;
};

struct raw_retry_budget {
	bool *enabled;
	double *ratio;
	double *min_per_second;
	char *window;
};

struct raw_policy {
	char *affinity_ttl;
	double *affinity_max_entries;
	char **identity_ladder;
	unsigned identity_ladder_count;
	double *ewma_alpha;
	double *cold_start_samples;
	char *prior_ttfb;
	char *idle_reset;
	double *sticky_tolerance;
	double *slow_run;
	double *load_factor;
	double *load_floor;
	double *load_floor_e2e;
	double *warm_slack;
	double *hot_share;
	double *place_choices;
	double *place_load_z;
	char *routers;
	double *alone_place_load_z;
	char *alone_affinity_ttl;
	double *place_long_kib;
	double *place_long_z;
	double *owned_bound;
	double *slow_start;
	char *owned_half_life;
	double *explore_share;
	double *p2c_margin;
	double *cost_weight_per_ms;
	char *breaker_window;
	double *breaker_min_requests;
	double *breaker_failure_ratio;
	double *breaker_consecutive;
	char *breaker_cooldown;
	char *breaker_cooldown_max;
	double *half_open_probes;
	double *tier_spill;
	char *tier_return;
	char *rate_limit_cooldown;
	char *rate_limit_cooldown_max;
	char *dead_key_retry;
	double *model_mismatch_404s;
	char *score_by;
	char *session_scope;
	bool *artefact_affinity;
	bool *slow_start_leave;
	bool *place_slots;
	char *mode;
};

struct raw_endpoint {
	char *backend;
	char *server;
	char **models;
	unsigned models_count;
	double *weight;
	double *cost_per_mtok;
	double *slots;
	char **keys;
	unsigned keys_count;
	char *engine_metrics;
	char *engine_info;
	double *tier;
};

struct raw_backend {
	char *name;
	double *tier;
};

struct raw_config {
	char *log_level;
	char **listen;
	unsigned listen_count;
	double *max_frame_size;
	struct raw_spop *spop;
	struct raw_metrics *metrics;
	struct raw_runtime *runtime_api;
	struct raw_state *state;
	struct raw_log_input *log_input;
	struct raw_command_socket *command_socket;
	struct raw_key_probe *key_probe;
	struct raw_retry_budget *retry_budget;
	struct raw_engine *engine;
	struct raw_policy *policy;
	struct raw_endpoint *endpoints;
	unsigned endpoints_count;
	struct raw_backend *backends;
	unsigned backends_count;
};

/* libcyaml's description of struct raw_config (a pointer to it); only
 * the loader reads it, so this header needs no cyaml.h. */
struct cyaml_schema_value;
extern const struct cyaml_schema_value config_schema;

/* Frees what the loader filled in by the schema; raw may be NULL. */
void config_raw_free(struct raw_config *raw);

#endif
