/* config.h - warmlane's configuration: defaults, YAML loading, checks. */
#ifndef WARMLANE_CONFIG_H
#define WARMLANE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"
#include "log.h"
#include "params.h"

#define CONFIG_DEFAULT_LISTEN         "unix:/var/lib/haproxy/warmlane/spoa.sock"
#define CONFIG_DEFAULT_SOCKET_MODE    0660u
#define CONFIG_DEFAULT_MAX_FRAME_SIZE 65532u /* tune.bufsize 65536 - 4 */
#define CONFIG_MIN_FRAME_SIZE         256u
#define CONFIG_MAX_FRAME_SIZE         1048576u
/* HAProxy's own `timeout hello` default in our SPOE file: a connection
 * that has not sent its HAPROXY-HELLO by then is closed. */
#define CONFIG_DEFAULT_HELLO_TIMEOUT_MS 500u
/* Twice the SPOE file's `timeout idle 30s` (2.6-3.0) and the agent
 * backend's `timeout server 30s` (3.1+): HAProxy closes its idle
 * connections first; the agent only reaps those HAProxy forgot. */
#define CONFIG_DEFAULT_IDLE_TIMEOUT_MS  60000u
/* spop.coalesce_us: a quarter of a millisecond against times to first token
 * of hundreds (docs/operations.md, "Benchmarks"). */
#define CONFIG_DEFAULT_COALESCE_US      250u
/* libmicrohttpd connections on /metrics, and the longest any may live. */
#define CONFIG_DEFAULT_METRICS_MAX_CONNS 64u
#define CONFIG_DEFAULT_METRICS_CONN_TIMEOUT_MS 10000u
#define CONFIG_DEFAULT_METRICS        "127.0.0.1:9901"
#define CONFIG_DEFAULT_RUNTIME_SOCKET "/run/haproxy/warmlane.sock"
#define CONFIG_DEFAULT_STATE_FILE     "/var/lib/warmlane/state.msgpack"
/* HAProxy's end-of-stream log lines, inside Debian's HAProxy chroot like
 * the SPOP socket (/warmlane/log.sock in a chrooted HAProxy's config). */
#define CONFIG_DEFAULT_LOG_INPUT      "/var/lib/haproxy/warmlane/log.sock"
/* The command socket (ctl.c), beside the SPOP and log sockets. */
#define CONFIG_DEFAULT_COMMAND_SOCKET "/var/lib/haproxy/warmlane/ctl.sock"
/* Longest backend, server, key or model name accepted: keeps every ACK far
 * below the smallest frame HAProxy may negotiate (see notify.c). */
/* Upstream key probes (probe.c): off until a target is given. */
#define CONFIG_DEFAULT_PROBE_METHOD   "GET"
#define CONFIG_DEFAULT_PROBE_PATH     "/v1/models"
#define CONFIG_DEFAULT_PROBE_TIMEOUT_MS 5000u
#define CONFIG_PROBE_PATH_MAX         1024
/* Retry budget (route.c): HAProxy's retries per backend, read from the log
 * input, at most ratio x first attempts + min_per_second over the window. */
#define CONFIG_DEFAULT_RETRY_RATIO    0.2
#define CONFIG_DEFAULT_RETRY_MIN_PER_S 1.0
#define CONFIG_DEFAULT_RETRY_WINDOW_MS 10000u
/* Engine load (engine.c): each endpoint's own /metrics, polled when it
 * has an engine_metrics URL. */
#define CONFIG_DEFAULT_ENGINE_POLL_MS    200u
#define CONFIG_DEFAULT_ENGINE_TIMEOUT_MS 1000u
#define CONFIG_DEFAULT_ENGINE_INFO_MS    30000u
#define CONFIG_URL_MAX                1024
#define CONFIG_NAME_MAX               128
#define CONFIG_UNIX_PATH_MAX          107 /* sun_path minus the NUL */

enum config_listen_kind {
	CONFIG_LISTEN_UNIX,
	CONFIG_LISTEN_TCP,
};

/* One listen address, parsed from "unix:PATH[,mode=0660]" or
 * "tcp:HOST:PORT" (HOST: IPv4, [IPv6], localhost or *). */
struct config_listen {
	enum config_listen_kind kind;
	char path[CONFIG_UNIX_PATH_MAX + 1]; /* unix */
	unsigned mode;                       /* unix: permission bits */
	char host[64];                       /* tcp: numeric, no brackets */
	uint16_t port;                       /* tcp */
	bool ipv6;                           /* tcp */
	char text[160];                      /* canonical form, for logs */
};

/* A HOST:PORT address (metrics). */
struct config_hostport {
	char host[64];
	uint16_t port;
	bool ipv6;
};

/* One inference server, keyed by HAProxy's backend/server names. */
struct config_endpoint {
	char *backend;
	char *server;
	char **models;        /* empty: serves every model */
	size_t n_models;
	double weight;        /* > 0, default 1 */
	double cost_per_mtok; /* >= 0, default 0 */
	uint32_t slots;       /* requests its engine runs at once; 0 unknown */
	char **keys;          /* upstream key ids; the first is used */
	size_t n_keys;
	char *engine_metrics; /* http:// URL of the engine's /metrics; NULL: none */
	char *engine_info;    /* http:// URL of its own description (/v1/models,
			       * /props): the artefact fingerprint; NULL: none */
	/* Failover tier (docs/tiers.md), 1..CORE_TIER_MAX; 0: not given,
	 * the backend's (config_tier). Given, it also lets warmlane use an
	 * HAProxy backup server as an endpoint of that tier. */
	unsigned tier;
};

/* Defaults of one HAProxy backend's servers (backends[]). */
struct config_backend {
	char *name;
	unsigned tier;        /* 1..CORE_TIER_MAX, default 1 */
};

/* policy.mode: whether HAProxy is told where to send each request. */
enum config_mode {
	CONFIG_MODE_ROUTE = 0, /* the ACK sets backend, server, key: routing */
	CONFIG_MODE_SHADOW,    /* decide and learn, set only shadow_server and
				* shadow_reason: HAProxy balances (docs/shadow.md) */
	CONFIG_MODE_COUNT
};

/* "route", "shadow", or NULL for a value out of range. */
const char *config_mode_name(enum config_mode m);

struct config {
	enum log_level log_level;
	enum config_mode mode;          /* policy.mode, default route */
	struct config_listen *listen;
	size_t n_listen;
	uint32_t max_frame_size;
	uint64_t hello_timeout_ms;      /* spop.hello_timeout */
	uint64_t idle_timeout_ms;       /* spop.idle_timeout */
	uint32_t max_connections;       /* spop.max_connections; 0: from RLIMIT_NOFILE */
	uint32_t coalesce_us;           /* spop.coalesce_us; 0: off (coalesce.h) */
	char *metrics_listen;           /* "" disables the metrics endpoint */
	struct config_hostport metrics; /* parsed metrics_listen */
	uint32_t metrics_max_conns;     /* metrics.max_connections */
	uint64_t metrics_conn_timeout_ms; /* metrics.connection_timeout: total */
	char *runtime_socket;           /* "" disables runtime-API polling */
	char **runtime_backends;        /* empty: the endpoints' backends */
	size_t n_runtime_backends;
	char *state_file;               /* "" disables snapshots */
	char *log_input_path;           /* unix datagram socket; "" disables */
	unsigned log_input_mode;        /* its permission bits (0660) */
	uint16_t log_input_udp_port;    /* UDP on 127.0.0.1; 0: none */
	char *command_socket_path;      /* command socket (ctl.c); "" disables */
	unsigned command_socket_mode;   /* its permission bits (0660) */
	/* Key probes: HAProxy's probe listener ("" disables: then
	 * params.key_probe is false and no 401/403 excludes a key). */
	char *key_probe_target;
	struct config_listen key_probe; /* parsed target */
	char *key_probe_method;         /* an HTTP method token */
	char *key_probe_path;           /* origin-form: "/..." */
	uint64_t key_probe_timeout_ms;  /* whole probe, connect included */
	/* retry_budget: when spent, the route ACK sets txn.warmlane.noretry.
	 * Needs the log input (the retries are counted from its lines). */
	bool retry_budget_enabled;
	struct budget_params retry_budget;
	/* engine: polls of the endpoints' engine_metrics (engine.c); the
	 * age past which a sample is ignored is params.engine_max_age_ms. */
	uint64_t engine_poll_interval_ms;
	uint64_t engine_timeout_ms;     /* one poll, connect included */
	uint64_t engine_info_interval_ms; /* reads of the engine_info URLs */
	struct core_params params;      /* policy, poll and snapshot periods */
	struct config_endpoint *endpoints;
	size_t n_endpoints;
	struct config_backend *backends;
	size_t n_backends;
};

/* The failover tier of server `server` of `backend`: its endpoints[]
 * entry's tier, else its backends[] entry's, else 1. ep: the server's
 * entry or NULL. */
unsigned config_tier(const struct config *cfg, const char *backend,
		     const struct config_endpoint *ep);

/* Fills cfg with the defaults of docs/architecture.md (no endpoints, the default
 * socket). Returns 0 or -ENOMEM. Release with config_finish. */
int config_init(struct config *cfg);

/* Frees what cfg owns; cfg may be zeroed or half-built. */
void config_finish(struct config *cfg);

/* Loads the YAML file at path over the defaults. On success, replaces *cfg
 * (finishing the old contents) and returns 0. On failure *cfg is untouched,
 * err holds one line per problem, every one found, in file order
 * ("PATH:LINE:COL: field.path: message"; a YAML syntax error is then the
 * only line, the parser cannot go past it) and the return is -EINVAL,
 * -EFBIG over 1 MiB, or -errno when the file cannot be read. Bounded
 * whatever the file holds: nesting, documents, aliases and list lengths
 * are refused past their limits (see config_yaml.c). Touches no global
 * state: safe on any thread. */
int config_load_file(struct config *cfg, const char *path, char *err,
		     size_t errlen);

/* Same as config_load_file on an in-memory document; name labels messages. */
int config_load_data(struct config *cfg, const char *name, const char *data,
		     size_t len, char *err, size_t errlen);

/* Replaces cfg's listen list with the n addresses (the --listen options).
 * Returns 0, -EINVAL (err names the bad address) or -ENOMEM. */
int config_set_listen(struct config *cfg, const char *const *addrs, size_t n,
		      char *err, size_t errlen);

/* Parses a duration with a unit: "200ms", "5s", "1.5m", "1h" (digits, an
 * optional fraction, then ms, s, m or h; nothing else). Returns 0, -ERANGE
 * when the value is not a whole number of milliseconds, or -EINVAL for
 * anything else (overflow included). */
int config_parse_duration(const char *s, uint64_t *ms);

/* Parses one listen address (see struct config_listen). Returns 0 or
 * -EINVAL with a reason in err. */
int config_parse_listen(const char *s, struct config_listen *out, char *err,
			size_t errlen);

/* Parses "HOST:PORT" as for tcp: listen addresses. Returns 0 or -EINVAL. */
int config_parse_hostport(const char *s, struct config_hostport *out,
			  char *err, size_t errlen);

#endif
