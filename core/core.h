/* core.h - warmlane's routing core: which endpoint serves a request, and what its answer teaches.
 *
 * The rules are docs/architecture.md's "The decision", parameters are
 * struct core_params (params.h). The core is pure C: it has no clock, no
 * random source, no I/O and no globals; it is not thread-safe (one core per
 * thread, as the agent's single loop uses it).
 *
 * Time: every now_ms is milliseconds of a monotonic clock owned by the
 * caller (uv_now() in the agent, virtual time in the simulator). It must not
 * decrease from one call to the next on the same core; its origin is
 * arbitrary (0 is fine). Wall-clock time appears only in
 * core_parse_retry_after, to resolve an HTTP date.
 *
 * Randomness: core_decide draws from a struct core_rng the caller owns
 * (splitmix64, seeded with core_rng_seed). Only power-of-two-choices draws,
 * so a seeded run is reproducible decision for decision.
 *
 * Memory: core_create allocates the affinity map (capacity
 * affinity_max_entries, 32-byte entries plus an 8-byte-slot index at most
 * half full: under 64 bytes per entry); adding endpoints may allocate.
 * core_decide, core_observe, core_complete, core_endpoint_sync,
 * core_endpoint_complete, the finders and the introspection calls never
 * allocate.
 *
 * Endpoints are named by an index (>= 0) returned by core_endpoint_add and
 * valid until core_endpoint_remove; a removed index may be reused by a later
 * add, never while the old one is still known to the map (generations).
 */
#ifndef WARMLANE_CORE_H
#define WARMLANE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"

/* A string view: ptr need not be NUL-terminated; len 0 means absent. */
struct core_str {
	const char *ptr;
	size_t len;
};

/* Why an endpoint was chosen (or not), as named in the ACK, metrics, logs
 * and docs. The order is the agent's enum route_reason without its rr. */
enum core_reason {
	CORE_REASON_AFFINITY = 0,          /* warm entry of the affinity map */
	CORE_REASON_HASH,                  /* weighted rendezvous hashing */
	CORE_REASON_SPILL,                 /* every hashed choice over bound */
	CORE_REASON_P2C,                   /* no identity: two random choices */
	CORE_REASON_COOLDOWN_FALLBACK,     /* only breakers excluded all */
	CORE_REASON_KEY_FALLBACK,          /* every serving endpoint+key is
					    * dead: the least recently failed */
	CORE_REASON_NO_MODEL,              /* no endpoint serves the model */
	CORE_REASON_NONE,                  /* nothing usable: HAProxy balances */
	CORE_REASON_FAILOVER,              /* an endpoint of a worse tier than
					    * the best serving one (tier.h):
					    * the better tiers are broken,
					    * rate-limited or full. Last so
					    * that the older reasons keep
					    * their numbers. */
	CORE_REASON_COUNT
};

/* Admin and health state of a server as HAProxy reports it. Anything but
 * ENABLED excludes the endpoint. */
enum core_admin {
	CORE_ADMIN_ENABLED = 0,
	CORE_ADMIN_MAINT,
	CORE_ADMIN_DRAIN,
	CORE_ADMIN_DOWN,
	CORE_ADMIN_NOLB,
	CORE_ADMIN_COUNT
};

enum core_breaker {
	CORE_BREAKER_CLOSED = 0,
	CORE_BREAKER_OPEN,
	CORE_BREAKER_HALF_OPEN,
	CORE_BREAKER_COUNT
};

/* How the latency rules last judged an endpoint (core_endpoint_info):
 * within sticky_tolerance of its peers (or not judged since), over it
 * but kept by its own past, or left as slow (its warm keys move, new keys
 * pass it over; also when its answers ran slower than its queue explains,
 * policy.slow_run). */
enum core_speed {
	CORE_SPEED_FIT = 0,
	CORE_SPEED_KEPT,
	CORE_SPEED_LEFT,
	CORE_SPEED_COUNT
};

/* What a response status means to the core (core_status_class). */
enum core_outcome {
	CORE_OUTCOME_SUCCESS = 0,  /* 1xx-3xx: EWMA, map refresh */
	CORE_OUTCOME_NEUTRAL,      /* other 4xx; 404 also notes a model mismatch */
	CORE_OUTCOME_FAILURE,      /* 5xx (HAProxy's own included), 408 */
	CORE_OUTCOME_RATE_LIMITED, /* 429: breaker OPEN for Retry-After */
	CORE_OUTCOME_KEY_DEAD,     /* 401, 403: endpoint+key suspect (probed) */
	CORE_OUTCOME_INVALID,      /* not an HTTP status (< 100 or > 599) */
	CORE_OUTCOME_COUNT
};

/* What a probe of an upstream key found (core_key_probe_result). */
enum core_probe {
	CORE_PROBE_ACCEPTED = 0,   /* an HTTP answer other than 401/403, 5xx */
	CORE_PROBE_REFUSED,        /* 401 or 403: the key is dead */
	CORE_PROBE_INCONCLUSIVE,   /* 5xx, no answer, timeout: says nothing */
	CORE_PROBE_COUNT
};

/* Request kinds: one EWMA each (headers time of a streamed request and a
 * whole non-streamed generation are different quantities). */
enum core_kind {
	CORE_KIND_PLAIN = 0,
	CORE_KIND_STREAM = 1,
	CORE_KIND_COUNT
};

/* The caller-owned random source: splitmix64. */
struct core_rng {
	uint64_t state;
};

/* Seeds rng; any seed (0 included) gives a full-period sequence. */
void core_rng_seed(struct core_rng *rng, uint64_t seed);

/* Next 64 random bits; advances rng. */
uint64_t core_rng_next(struct core_rng *rng);

/* One rung of identity: present or not, and the value hashed by the caller
 * (core_hash_bytes of the SPOE argument's bytes, or any stable 64-bit
 * value). Equal hashes on different rungs give different affinity keys. */
struct core_id {
	bool present;
	uint64_t hash;
};

/* A shared warm hint (docs/peers.md): the server another HAProxy of the
 * group (or this one) recorded as having served this request's affinity
 * key, read from a peers-replicated stick table. The caller resolves
 * HAProxy's server id to this server's endpoints (one per key id). */
#define CORE_HINT_ENDPOINTS 8
/* Who wrote a hint. Only hints the peers wrote show that the table is
 * shared (policy.routers): one this HAProxy wrote is its own memory,
 * which HAProxies that replicate nothing have too. */
enum core_hint_writer {
	CORE_HINT_WRITER_UNKNOWN = 0, /* not told (a table without it) */
	CORE_HINT_WRITER_OWN,         /* this HAProxy */
	CORE_HINT_WRITER_PEER,        /* another HAProxy of the group */
};
struct core_hint {
	bool present;
	uint32_t akey32;           /* low 32 bits of the akey it was recorded for */
	uint64_t age_ms;           /* since HAProxy recorded it */
	unsigned n;                /* endpoints of the hinted server, <= CORE_HINT_ENDPOINTS */
	int endpoint[CORE_HINT_ENDPOINTS];
	uint8_t writer;            /* enum core_hint_writer */
};

/* What became of a request's hint (core_decision.hint). */
enum core_hint_use {
	CORE_HINT_ABSENT = 0,      /* no hint, or no affinity key */
	CORE_HINT_USED,            /* newer than the own entry, and chosen */
	CORE_HINT_AGREES,          /* names the own entry's server: nothing to do */
	CORE_HINT_OLDER,           /* the own entry is newer: the hint lost */
	CORE_HINT_REFUSED,         /* newer, but health, breaker or load refused it */
	CORE_HINT_MISMATCH,        /* recorded for another akey (ladders differ) */
	CORE_HINT_COUNT
};

/* One `route` message. */
struct core_request {
	struct core_id session;
	struct core_id prefix[3];  /* 1, 4, 8 KiB windows; longest present used */
	struct core_id install;
	struct core_id caller;
	struct core_id src;        /* used only if the ladder holds "src" */
	struct core_str model;     /* len 0: no model, every endpoint serves */
	bool stream;
	uint32_t size_kib;         /* the request body's advertised size in
	                            * KiB (HAProxy's req.body_size / 1024,
	                            * saturated); 0: unknown or under 1 KiB
	                            * (policy.place_long_kib) */
	uint16_t turn;             /* its count of user messages (HAProxy's
	                            * `turn`: a conversation's turn); 0:
	                            * unknown. Whether several HAProxies route
	                            * its key (routers.h, routers_turn) */
	struct core_hint hint;     /* zeroed: none (a single HAProxy) */
	/* core_identity of this request, when the caller has it already
	 * (it prefetched the key's slot): 0 not given (core_decide computes
	 * it), 1 no identity, 2 akey. core_decide trusts it. */
	uint8_t identity;
	uint64_t akey;
};

/* The answer to one request. Names are owned by the core, NUL-terminated,
 * and valid until that endpoint is updated or removed; NULL when unset. */
struct core_decision {
	int endpoint;              /* index, or -1 when none */
	enum core_reason reason;
	const char *backend;
	const char *server;
	const char *key_id;        /* NULL when the endpoint has no key */
	unsigned tier;             /* the endpoint's failover tier; 0: none */
	uint32_t gen;              /* the endpoint's generation: endpoint and
	                            * gen name the same names until it is
	                            * removed (a cache of them may key on both) */
	bool has_akey;             /* false: the request had no identity */
	uint64_t akey;             /* affinity key, echoed back in feedback */
	enum core_hint_use hint;   /* what became of req->hint */
};

/* One `feedback` message. */
struct core_feedback {
	int endpoint;              /* core_endpoint_find* of its server */
	int status;                /* HTTP status */
	int64_t tr_ms;             /* time to response headers; < 0: unknown */
	int64_t retry_after_ms;    /* 429 cooldown; < 0: absent */
	bool stream;               /* kind of the request */
	bool has_akey;             /* akey echoed by HAProxy */
	uint64_t akey;
	struct core_str model;     /* optional: lets a 404 note a mismatch */
	/* A log line (core_complete, feedback_seen) will tell how this
	 * response ended. Then a streamed success is provisional for the
	 * breaker: feedback comes with the headers, before a cut can happen,
	 * and a stream cut later must count as one failure, not as a success
	 * and a failure (which never reach breaker_failure_ratio while other
	 * streams are under way, and close a HALF_OPEN breaker on its probes'
	 * headers). The breaker counts it at the end. */
	bool end_follows;
};

/* How a request ended, from HAProxy's log line (termination state). */
enum core_end {
	CORE_END_COMPLETE = 0,   /* the response ended normally */
	CORE_END_CLIENT_ABORT,   /* the client went away: neutral */
	CORE_END_SERVER_CUT,     /* the server cut the response mid-way: a failure even with status 200 */
	CORE_END_SERVER_FAIL,    /* HAProxy failed it itself: connection refused, connect or server timeout, no response */
	CORE_END_COUNT
};

/* One end-of-stream log line (core_complete). */
struct core_completion {
	int endpoint;            /* core_endpoint_find* of its server */
	int status;              /* as logged (HAProxy's own 502/503/504 included); -1 unknown */
	enum core_end end;
	int64_t tr_ms;           /* time to response headers as logged; < 0 unknown */
	int64_t total_ms;        /* request end to end (HAProxy's Ta); < 0 unknown */
	uint64_t bytes;          /* bytes sent to the client */
	bool stream;
	bool feedback_seen;      /* the SPOE feedback message already reported this response's status */
	bool has_akey;
	uint64_t akey;
	/* A 429's Retry-After from the log line (HAProxy 2.6 sends no feedback
	 * message: there the line is the only place it is seen). */
	bool has_retry_after;
	int64_t retry_after_ms;  /* >= 0 when has_retry_after */
	/* HAProxy chose cc->endpoint itself: warmlane's decision for the
	 * request, if any, was only compared (the agent's shadow mode,
	 * core_decision_shadow). No decision counted it in flight, so
	 * in-flight is left to the runtime API's next poll. */
	bool shadow;
};

/* An endpoint as configured (warmlane's config plus HAProxy's names). */
struct core_endpoint_config {
	const char *backend;          /* required, non-empty, NUL-terminated */
	const char *server;           /* required, non-empty */
	const char *key_id;           /* NULL or "": no upstream key */
	const char *const *models;    /* n_models names; 0 models: serves all */
	size_t n_models;
	double weight;                /* > 0 (config default 1) */
	double cost_per_mtok;         /* >= 0 */
	/* Requests the engine runs at once (llama.cpp's --parallel, vLLM's
	 * max_num_seqs); more wait in its queue. 0: unknown, then HAProxy's
	 * maxconn for the server if it has one (core_endpoint_limit), else
	 * what its engine was seen running while full
	 * (core_endpoint_engine_full) (policy.place_slots). */
	uint32_t slots;
	bool disabled;                /* excluded by config */
	unsigned tier;                /* 1..CORE_TIER_MAX; 0: 1 */
};

/* An endpoint's state, for metrics and logs. Pointers as in core_decision. */
struct core_endpoint_info {
	const char *backend;
	const char *server;
	const char *key_id;
	double weight;
	double cost_per_mtok;
	uint32_t slots;                      /* in use: configured, else
					      * HAProxy's maxconn, else the
					      * engine's seen; 0 unknown */
	bool disabled;
	unsigned tier;                       /* 1..CORE_TIER_MAX */
	enum core_admin admin;
	uint32_t in_flight;
	double ewma_ms[CORE_KIND_COUNT];     /* own EWMA (0 before samples) */
	uint32_t samples[CORE_KIND_COUNT];   /* successes that entered it */
	/* End-to-end EWMA (core_complete), in ms per KiB sent (responses
	 * under 16 KiB count as 16 KiB); 0 before samples. */
	double e2e_ewma_ms[CORE_KIND_COUNT];
	uint32_t e2e_samples[CORE_KIND_COUNT];  /* successes that entered it */
	enum core_breaker breaker;
	uint64_t cooldown_left_ms;           /* OPEN: until HALF_OPEN */
	uint64_t dead_key_left_ms;           /* refused probe: until re-probed */
	bool key_dead;                       /* excluded: a probe refused its key */
	bool key_suspect;                    /* a 401/403 awaits a probe */
	uint64_t probes[CORE_PROBE_COUNT];   /* probe results */
	uint32_t window_ok, window_fail;     /* over breaker_window */
	uint64_t outcomes[CORE_OUTCOME_COUNT];
	uint64_t completions[CORE_END_COUNT]; /* core_complete, by end */
	uint64_t decisions;                  /* requests routed to it */
	/* Engine load (core_endpoint_engine). */
	bool engine_fresh;                   /* in_flight is the engine's */
	uint32_t engine_load;                /* its last sample: running + waiting */
	uint32_t local_in_flight;            /* the runtime API's / own view */
	double engine_kv;                    /* KV usage 0..1; -1: none */
	uint64_t engine_age_ms;              /* since the sample; UINT64_MAX: none */
	uint64_t engine_polls_ok, engine_polls_failed;
	uint64_t engine_stale;               /* samples that aged out */
	uint64_t artefact;                   /* core_endpoint_artefact; 0: unknown */
	bool artefact_mismatch;              /* core_endpoint_artefact_mismatch */
	bool drained;                        /* core_endpoint_drain */
	/* HAProxy's layer-7 health check (core_endpoint_check). */
	double check_ms;                     /* its last duration; 0: none (or
					      * none in EXPLORE_CHECK_FRESH_MS) */
	bool check_slow;                     /* slow against its peers' since */
	bool check_vouch;                    /* found it recovered: its own
					      * answers do not leave it yet */
	enum core_speed speed;               /* the latency rules' verdict */
	bool probed;                         /* exploration sends it a few
					      * requests to learn whether it
					      * recovered (explore.h) */
	uint64_t rejoin_left_ms;             /* back from DOWN: until its few
					      * requests in flight count as
					      * spare capacity again */
	double load_avg;                     /* in flight, averaged over
					      * idle_reset */
	double ms_per_request;               /* load_avg over the averaged
					      * decision rate (Little's law);
					      * infinite without decisions */
};

/* Whole-core counters. */
struct core_stats {
	uint64_t decisions[CORE_REASON_COUNT];
	/* Decisions that named an endpoint, by its tier (index tier - 1). */
	uint64_t tier_decisions[CORE_TIER_MAX];
	uint64_t outcomes[CORE_OUTCOME_COUNT];
	uint64_t completions[CORE_END_COUNT]; /* core_complete calls by end */
	uint32_t endpoints;
	uint32_t affinity_entries;
	uint32_t affinity_capacity;
	uint32_t homes_entries;      /* the failover tiers' homes */
	uint64_t affinity_bytes;       /* allocated: entries plus their index */
	uint64_t affinity_hits;        /* lookups that found a live entry */
	uint64_t affinity_misses;
	uint64_t affinity_evictions;   /* LRU, map full */
	uint64_t affinity_expirations; /* idle past affinity_ttl */
	uint64_t affinity_back;        /* keys that came back (affinity_back) */
	uint64_t affinity_lapsed;      /* keys expired or evicted before that */
	uint64_t hints[CORE_HINT_COUNT]; /* decisions by what became of their hint */
	uint64_t hints_own;            /* of them, hints this HAProxy wrote (not
					* mismatch): no sign of a shared table */
	uint64_t explore_probes;       /* decisions exploration placed (explore.h) */
	uint64_t explore_recovered;    /* its verdicts "recovered" */
	uint64_t check_recovered;      /* health checks' verdicts "recovered"
					* (core_endpoint_check) */
	uint64_t twin_sends;           /* a hot key's requests sent to its
					* second warm endpoint, the cheaper
					* (policy.hot_share) */
	uint64_t twin_spreads;         /* a hot key sent off its only warm
					* endpoint, over the load bound, to
					* warm a second */
};

/* Persistent statistics of an endpoint (state snapshot). Times are
 * durations from now, so a snapshot survives a restart of the clock. */
struct core_endpoint_stats {
	double ewma_ms[CORE_KIND_COUNT];
	uint32_t samples[CORE_KIND_COUNT];
	double e2e_ewma_ms[CORE_KIND_COUNT];   /* end-to-end EWMA, ms per KiB */
	uint32_t e2e_samples[CORE_KIND_COUNT];
	enum core_breaker breaker;
	uint32_t trips;               /* consecutive trips: cooldown doubling */
	uint64_t cooldown_left_ms;
	uint64_t dead_key_left_ms;
	uint64_t idle_ms;             /* since the last feedback; 0: never */
};

/* One affinity entry (state snapshot). */
struct core_affinity_record {
	uint64_t akey;
	int endpoint;
	uint64_t idle_ms;             /* since last refreshed */
};

/* Called once per entry by core_affinity_export, oldest first; a non-zero
 * return stops the walk and is returned by core_affinity_export. */
typedef int (*core_affinity_fn)(void *arg,
				const struct core_affinity_record *rec);

struct core;

/* Creates a core with a copy of p (NULL: defaults). Rejects (-EINVAL)
 * affinity_max_entries of 0 or above 2^30, ewma_alpha outside (0, 1],
 * load_factor < 1, negative tolerances, ratios or tier_spill, an identity ladder longer
 * than CORE_RUNG_COUNT or naming an unknown rung, a score_by that is not an
 * enum core_score_by value. Returns 0 with *out set,
 * or -EINVAL / -ENOMEM. Release with core_destroy. */
int core_create(struct core **out, const struct core_params *p);

/* Frees c and everything it owns. Accepts NULL. */
void core_destroy(struct core *c);

/* Replaces the parameters (SIGHUP reload); state is kept. A new
 * affinity_max_entries rebuilds the map, keeping the most recent entries.
 * Returns 0, -EINVAL (as core_create; c unchanged) or -ENOMEM (c
 * unchanged). */
int core_set_params(struct core *c, const struct core_params *p);

/* The parameters in use (owned by c). */
const struct core_params *core_params(const struct core *c);

/* Adds an endpoint; the core copies every string. The triple backend,
 * server, key_id must be new. Rejects missing names, weight <= 0 or not
 * finite, negative cost, a tier above CORE_TIER_MAX (-EINVAL), a duplicate (-EEXIST), more than 256
 * distinct model names in the pool (-ENOSPC). Returns the index (>= 0) or
 * -errno. Its state starts cold: ENABLED, no samples, breaker CLOSED. */
int core_endpoint_add(struct core *c, const struct core_endpoint_config *cfg,
		      uint64_t now_ms);

/* Changes models, weight, cost, tier and disabled of endpoint idx, keeping its
 * state; cfg's names must be the endpoint's own (else -EINVAL). Returns 0,
 * -ENOENT, -EINVAL, -ENOSPC or -ENOMEM (then nothing changed). Names from
 * earlier decisions stay valid. */
int core_endpoint_update(struct core *c, int idx,
			 const struct core_endpoint_config *cfg);

/* Removes endpoint idx in O(1) (plus freeing its names): map entries that
 * pointed to it are dropped lazily. Returns 0 or -ENOENT. */
int core_endpoint_remove(struct core *c, int idx);

/* Index of the endpoint named backend/server/key_id (key_id len 0: the one
 * without a key), or -ENOENT. Exact matches only. */
int core_endpoint_find(const struct core *c, struct core_str backend,
		       struct core_str server, struct core_str key_id);

/* Same with "backend/server" in one string (HAProxy's be_name/srv_name as
 * the feedback message sends it). -ENOENT also when there is no '/'. */
int core_endpoint_find_path(const struct core *c, struct core_str path,
			    struct core_str key_id);

/* core_endpoint_find_path for an answer that carries the akey its
 * decision gave: the endpoint that decision chose (while the core still
 * holds it: struct asked) when it has these names, without hashing
 * them; else core_endpoint_find_path. The same result either way. */
int core_endpoint_find_akey(const struct core *c, uint64_t akey,
			    struct core_str path, struct core_str key_id);

/* First live index after prev (prev -1: the first), or -1 at the end. */
int core_endpoint_next(const struct core *c, int prev);

/* Runtime-API poll of endpoint idx: admin/health state and in-flight =
 * scur + qcur (kept aside while an engine sample is fresh:
 * core_endpoint_engine). Returns 0 or -ENOENT. Never allocates. */
int core_endpoint_sync(struct core *c, int idx, enum core_admin admin,
		       uint32_t scur_plus_qcur, uint64_t now_ms);

/* HAProxy's maxconn for endpoint idx's server (the runtime API's slim,
 * its share when the server has several key ids; 0: none): what HAProxy
 * runs at once and queues beyond, the endpoint's slots unless
 * core_endpoint_config.slots gives them (policy.place_slots). Returns 0 or
 * -ENOENT. Never allocates. */
int core_endpoint_limit(struct core *c, int idx, uint32_t maxconn);

/* A sample of endpoint idx's engine with requests waiting: running (its
 * share of the engine's, split as the load is) is what it runs at once
 * while full. The most seen is its slots where neither
 * core_endpoint_config.slots nor core_endpoint_limit gives them
 * (policy.place_slots). Returns 0 or -ENOENT. Never allocates. */
int core_endpoint_engine_full(struct core *c, int idx, uint32_t running);

/* A poll of endpoint idx's engine (agent/engine.c) at now_ms. ok: load =
 * its running + waiting requests, kv its KV-cache usage (0..1, or -1 when
 * it publishes none): from now on, while this sample is at most
 * params.engine_max_age_ms old, the endpoint's in-flight count is load
 * plus this agent's own decisions minus its own ends since now_ms (never
 * below 0), and core_endpoint_sync sets admin only. !ok: a failed poll,
 * counted; the last sample keeps aging. Returns 0 or -ENOENT. Never
 * allocates. */
int core_endpoint_engine(struct core *c, int idx, bool ok, uint32_t load,
			 double kv, uint64_t now_ms);

/* HAProxy's last layer-7 health check of endpoint idx (the runtime API's
 * check_duration with an L7 check_status) took duration_ms, read at
 * now_ms; 0: none (no check, a layer-4 one, or it failed: the last one
 * counts until it is 10 s old). The same
 * request on every server: while the endpoint's check is slow against
 * its peers' it gets no new key and its warm entries no warm_slack, and
 * once it is within sticky_tolerance of theirs again it is re-tried at
 * once (explore.h, explore_check). Returns 0 or -ENOENT. Never
 * allocates. */
int core_endpoint_check(struct core *c, int idx, uint32_t duration_ms,
			uint64_t now_ms);

/* The fingerprint of the artefact endpoint idx serves (agent/engine.c,
 * proto/artefact.c: its own /v1/models or /props); 0: unknown. With
 * params.artefact_affinity, a key warm on an endpoint of fingerprint F
 * that must leave it (health, speed, load) goes only to endpoints of F or
 * of no known fingerprint, by the usual steps over those alone; with none
 * of them a candidate, the answer is none (CORE_REASON_NONE: HAProxy's
 * own balancing). Returns 0 or -ENOENT. Never allocates. */
int core_endpoint_artefact(struct core *c, int idx, uint64_t fingerprint);

/* Whether the agent found endpoint idx serving one of its model names with
 * another fingerprint than some other endpoint (reported, not used by
 * decisions). Returns 0 or -ENOENT. */
int core_endpoint_artefact_mismatch(struct core *c, int idx, bool mismatch);

/* What HAProxy's runtime API says of its peers (`show peers`), for
 * policy.routers auto (routers.h). */
enum core_peers {
	CORE_PEERS_UNKNOWN = 0, /* no peers section shares a table, or not read */
	CORE_PEERS_CONNECTED,   /* every remote peer of those sections is
				 * connected (or none is listed) */
	CORE_PEERS_APART,       /* some remote peer is not */
};

/* Whether this agent routes alone (params.routers, routers.h), as the
 * decisions read it. */
struct core_routers_info {
	enum core_routers mode; /* params.routers */
	bool alone;            /* in force: new keys by alone_place_load_z */
	double share;          /* this HAProxy's share of the engines' load
				* at their samples; -1: not enough to judge */
	bool hints;            /* its decisions carry shared warm hints for
				* their keys (routers.h): auto routes alone */
	bool engines;          /* the engines' counts show this HAProxy
				* carrying their load: auto routes alone */
	double hinted;         /* decisions with a hint for their key, in
				* the window (decayed over idle_reset) */
	bool turns;            /* the requests' turns show no other HAProxy
				* routing its keys: auto routes alone */
	double skips;          /* of the turns that count, the share that
				* skipped one; -1: too few yet */
	bool linked;           /* HAProxy's peers are connected (own hints
				* count, core_peers_note) */
	enum core_peers peers; /* what the last poll said of them */
	uint64_t ttl_ms;       /* the affinity TTL in force */
};
void core_routers_info(const struct core *c, struct core_routers_info *out);

/* Notes what HAProxy said of its peers at now_ms (the runtime API's
 * `show peers`, which the agent asks every 5 s while requests carry
 * hints): connected, hints that are all this HAProxy's own still show
 * that no other HAProxy routes these keys (routers.h, routers_link). */
void core_peers_note(struct core *c, enum core_peers peers, uint64_t now_ms);

/* Restores the verdicts of policy.routers auto (core_routers_info's
 * engines, hints and turns, from a state snapshot) at now_ms, before the
 * snapshot's affinity entries are imported: an agent that routed alone
 * keeps its entries' longer TTL across a restart. Each is judged again
 * as the agent runs; the engines' lapses when no engine sample comes
 * within policy.idle_reset; the turns' counts as ROUTERS_TURN_MIN turns
 * that skipped none (6 skips end it, as they would have before). */
void core_routers_restore(struct core *c, bool engines, bool hints,
			  bool turns, uint64_t now_ms);

/* Ends the engine view of every endpoint whose sample is older than
 * params.engine_max_age_ms at now_ms: its in-flight count is the runtime
 * API's (or the agent's own) again. Returns how many it ended. O(pool);
 * the agent calls it once per engine poll tick. */
uint32_t core_engine_expire(struct core *c, uint64_t now_ms);

/* End of a stream on endpoint idx with nothing else known: in-flight - 1,
 * not below 0. Returns 0 or -ENOENT. (The log input uses core_complete.) */
int core_endpoint_complete(struct core *c, int idx);

/* One request ended on cc->endpoint (HAProxy's log line; docs/architecture.md,
 * "What answers teach"). Always (but with cc->shadow): in-flight - 1, not
 * below 0; always: the completion counted by its end. Then, never
 * counting twice what feedback told:
 * - cc->feedback_seen (core_observe already took the status): only what
 *   feedback could not know counts. SERVER_CUT and SERVER_FAIL are breaker
 *   failures and evict akey's entry if it points to this endpoint;
 *   COMPLETE and CLIENT_ABORT change no breaker state, except that a
 *   streamed success the feedback left provisional (end_follows) counts
 *   now: COMPLETE as a breaker success, CLIENT_ABORT as neutral (a
 *   HALF_OPEN probe slot freed).
 * - !cc->feedback_seen (HAProxy answered itself, or no feedback was sent):
 *   the status is taken as core_observe takes it (tr_ms as its time to
 *   headers), except that SERVER_CUT and SERVER_FAIL are failures whatever
 *   the status (-1 included), and CLIENT_ABORT never is (a failure status
 *   then counts as neutral). Status -1 with COMPLETE or CLIENT_ABORT only
 *   ends the request.
 * - COMPLETE with a 1xx-3xx status and total_ms >= 0 also enters the
 *   end-to-end EWMA of cc->stream's kind as total_ms per KiB of cc->bytes
 *   (at least 16 KiB counted), unless the request started before the
 *   endpoint's last wake-up after idle_reset (the first answer after it,
 *   told by feedback or by this line, is not a sample, as for the headers
 *   EWMA).
 * - The affinity map: a line never inserts an entry of its own choosing
 *   nor moves one to another endpoint (whoever can write to the log
 *   socket chooses akey); a success refreshes akey's entry only when it
 *   already points to cc->endpoint, or inserts it when core_decide chose
 *   cc->endpoint for akey and no success has confirmed that decision yet
 *   (HAProxy 2.6 sends no feedback message: its log line is the only word
 *   of a success), or for any endpoint after core_decision_shadow; a
 *   failure evicts it only when it points there. A 429
 *   opens the breaker for cc->retry_after_ms when cc->has_retry_after,
 *   else for rate_limit_cooldown.
 * Returns 0; -ENOENT when cc->endpoint is not a live endpoint; -EINVAL for
 * an unknown end or a status that is neither -1 nor an HTTP status
 * (nothing changed). Never allocates. */
int core_complete(struct core *c, const struct core_completion *cc,
		  uint64_t now_ms);

/* The end's name ("complete", "client_abort", "server_cut",
 * "server_fail"), or "unknown". */
const char *core_end_name(enum core_end e);

/* Drains endpoint idx (drain true: no new request goes to it, as if HAProxy
 * had set it to DRAIN, whatever its polls say) or makes it ready again
 * (false). The operator's own view (the command socket's `set endpoint`),
 * kept until the endpoint is removed; not in snapshots. Returns 0 or
 * -ENOENT. Never allocates. */
int core_endpoint_drain(struct core *c, int idx, bool drain);

/* Fills *out with endpoint idx's state at now_ms. Returns 0 or -ENOENT. */
int core_endpoint_info(const struct core *c, int idx, uint64_t now_ms,
		       struct core_endpoint_info *out);

/* Decides one request at now_ms; *out is always filled. The chosen
 * endpoint's in-flight count rises by one (a HALF_OPEN one also takes a
 * probe slot). Draws from rng only for p2c and spill. Never allocates.
 * A present req->hint whose akey32 is the low half of the request's akey
 * is one more warm entry: when the map has none for the key, or one
 * refreshed longer ago than the hint's age, the hint's first endpoint that
 * a warm entry could use (candidate, breaker CLOSED, fast enough, within
 * the load bound) is chosen with reason affinity, as a decision of the
 * agent's own (a success confirms it into the map); refused, the own entry
 * and then the ranking follow as without a hint. */
void core_decide(struct core *c, const struct core_request *req,
		 uint64_t now_ms, struct core_rng *rng,
		 struct core_decision *out);

/* Shadow mode (the agent's policy.mode shadow): d, just filled by
 * core_decide, is not acted on; HAProxy picks the server itself. Undoes
 * what d did only because the request was to go to its endpoint (in-flight
 * + 1, a HALF_OPEN probe slot) and lets the request's log line confirm d's
 * akey on whichever endpoint HAProxy used (see core_complete, "The affinity
 * map"): the map learns where requests really went, so that a later
 * decision's affinity names the server that holds the cache. d stays
 * counted in the decisions by reason. Never allocates. */
void core_decision_shadow(struct core *c, const struct core_decision *d);

/* The affinity key of req under the ladder, as core_decide computes it:
 * xxh3-64 of the first present rung's hash (8 bytes, little-endian), seeded
 * with the rung number + 1. With session_scope CALLER, a session or install
 * rung of a request that has a caller hash is scoped to it: xxh3-64 of the
 * rung's hash then the caller's (16 bytes), same seed; without a caller
 * hash, the id alone (as GLOBAL).
 * Returns true with *akey set, false when no rung of the ladder is
 * present. */
bool core_identity(const struct core *c, const struct core_request *req,
		   uint64_t *akey);

/* Starts loading into the cache what a lookup of akey in the affinity map
 * will read, one dependent step per stage: CORE_PREFETCH_SLOT its index
 * slot, CORE_PREFETCH_ENTRY the entry the slot points to (reads the slot),
 * CORE_PREFETCH_LINKS that entry's LRU neighbours, which a feedback's
 * refresh relinks (reads the entry). For a caller holding several requests
 * at once (a read pass of the agent): each stage issued a request's worth
 * of work before the next, the misses of a large map overlap instead of
 * following each other. Changes nothing; never allocates. */
enum core_prefetch {
	CORE_PREFETCH_SLOT,
	CORE_PREFETCH_ENTRY,
	CORE_PREFETCH_LINKS,
};
void core_prefetch(const struct core *c, uint64_t akey,
		   enum core_prefetch stage);

/* Whether core_prefetch is worth its instructions: the map (index and
 * entries) is larger than CORE_PREFETCH_MIN_BYTES, so that its lookups
 * miss a core's cache. Below it they hit, and the steps only cost. */
#define CORE_PREFETCH_MIN_BYTES ((size_t)1 << 20)
bool core_prefetch_pays(const struct core *c);

/* Takes one response into account (see docs/architecture.md, "What answers teach"):
 * - success: the EWMA of fb->stream's kind (when tr_ms >= 0), the map entry
 *   akey -> endpoint refreshed; the first answer after idle_reset without
 *   feedback is not used and the endpoint starts cold again (params.h,
 *   idle_reset_ms: a re-trial once it was warm); a breaker success, except
 *   for a streamed one with fb->end_follows, which waits for core_complete;
 * - failure (5xx, 408): breaker failure, akey's entry evicted if it points
 *   here; never enters the EWMA;
 * - 429: breaker OPEN for retry_after_ms (>= 0) else rate_limit_cooldown,
 *   at most rate_limit_cooldown_max (any int64 is safe);
 * - 401/403: this endpoint (backend/server/key), if it has a key, becomes
 *   suspect: core_key_probe_next will hand it out for a probe (at most
 *   once per key_probe_interval); only the probe's answer can exclude it
 *   (the client shapes the request a 401/403 judged). Nothing else;
 * - other 4xx: neutral; model_mismatch_404s 404s in a row for fb->model
 *   exclude the endpoint for that model for dead_key_retry.
 * Returns 0; -ENOENT when fb->endpoint is not a live endpoint; -EINVAL when
 * the status is not an HTTP status (nothing changed). In-flight is not
 * decremented: response headers are not completion. Never allocates. */
int core_observe(struct core *c, const struct core_feedback *fb,
		 uint64_t now_ms);

/* Upstream keys. A 401/403 in feedback makes an endpoint+key suspect; the
 * agent then probes that key itself (a request it shapes, carrying only the
 * key id) and reports what the probe found. A refused probe excludes the
 * endpoint+key (key_dead) until a later probe accepts it: re-probed every
 * dead_key_retry, or sooner when a 401/403 arrives for it (the key
 * fallback below still sends it traffic). An endpoint+key that is dead is a
 * last resort: chosen (reason key_fallback) only when no other endpoint
 * serving the model is a candidate or a breaker fallback, the least
 * recently refused first, so that HAProxy never goes without a credential
 * while keys exist. Without params.key_probe nothing is probed and no key
 * dies (a restored dead one comes back after its dead_key_retry). */

/* The next endpoint+key due for a probe at now_ms (suspect, or dead with
 * its dead_key_retry over; not probing; its last probe at least
 * key_probe_interval ago), marked as probing, or -1 when none (or
 * !params.key_probe). Endpoints are handed out in turn from where the last
 * call stopped. Each one handed out must be answered with
 * core_key_probe_result (or be removed). Never allocates. */
int core_key_probe_next(struct core *c, uint64_t now_ms);

/* The answer to a probe of endpoint idx's key (find it again by its names:
 * the index may have been removed meanwhile). ACCEPTED clears suspicion and
 * death, REFUSED makes it dead (re-probed after dead_key_retry),
 * INCONCLUSIVE changes nothing but leaves it to be probed again after
 * key_probe_interval. Returns 0, -ENOENT (not live), -EINVAL (no key, no
 * such result). Never allocates. */
int core_key_probe_result(struct core *c, int idx, enum core_probe result,
			  uint64_t now_ms);

/* The probe result's name ("accepted", "refused", "inconclusive"), or
 * "unknown". */
const char *core_probe_name(enum core_probe r);

/* The class of an HTTP status (see enum core_outcome). */
enum core_outcome core_status_class(int status);

/* Parses HAProxy's %Tr as a STRING (2.6): decimal digits, or "-1" (no
 * server time, returned as -1). Leading/trailing spaces are rejected, as
 * are signs other than that "-1", empty strings and values above 2^53.
 * An INT64 (3.x) needs no parsing: use it as is. Returns 0 with *ms set, or
 * -EINVAL. */
int core_parse_tr(struct core_str s, int64_t *ms);

/* Parses a Retry-After header value: delay-seconds (digits) or an HTTP
 * date in any of RFC 9110's three forms (IMF-fixdate, RFC 850, asctime),
 * resolved against now_unix_s (the caller's wall clock, seconds since the
 * epoch). A date in the past gives 0. Surrounding spaces are ignored.
 * delay-seconds too large for int64 milliseconds (any number of digits is
 * valid HTTP) saturate at INT64_MAX: the core caps the wait
 * (rate_limit_cooldown_max), a rejection would have meant the short
 * default. Returns 0 with *delay_ms set, or -EINVAL. */
int core_parse_retry_after(struct core_str s, int64_t now_unix_s,
			   int64_t *delay_ms);

/* xxh3-64 of len bytes, for identity values (struct core_id). */
uint64_t core_hash_bytes(const void *p, size_t len);

/* A view of the NUL-terminated s (NULL gives the empty view). */
struct core_str core_str_c(const char *s);

/* The hint use's name ("absent", "used", "agrees", "older", "refused",
 * "mismatch"), or "unknown". */
const char *core_hint_name(enum core_hint_use u);

/* The reason's name ("affinity", "hash", ...), or "unknown". */
const char *core_reason_name(enum core_reason r);

/* The outcome's name ("success", "neutral", ...), or "unknown". */
const char *core_outcome_name(enum core_outcome o);

/* The breaker state's name ("closed", "open", "half_open"), or "unknown". */
const char *core_breaker_name(enum core_breaker b);

/* The speed verdict's name ("fit", "kept", "left"), or "unknown". */
const char *core_speed_name(enum core_speed v);

/* The admin state's name ("enabled", "maint", ...), or "unknown". */
const char *core_admin_name(enum core_admin a);

/* Fills *out with the counters. */
void core_stats(const struct core *c, struct core_stats *out);

/* Drops up to max entries idle past affinity_ttl, oldest first (lookups
 * drop them anyway; this keeps the size metric honest), and as many of
 * the failover tiers' homes. Returns how many entries of the map. */
uint32_t core_affinity_expire(struct core *c, uint64_t now_ms, uint32_t max);

/* Walks the live affinity entries, oldest first, calling fn on each.
 * Importing them in that order restores the LRU order. Returns 0 or fn's
 * first non-zero return. The map must not be changed during the walk. */
int core_affinity_export(const struct core *c, uint64_t now_ms,
			 core_affinity_fn fn, void *arg);

/* A resumable walk over the affinity map, for a snapshot taken in slices
 * between which the map keeps serving. Caller-owned; set up with
 * core_affinity_cursor_init. */
struct core_affinity_cursor {
	uint32_t pos;          /* next entry slot of the map's array */
	uint64_t map_rebuilds; /* the core's count of map rebuilds at init */
	bool done;             /* every slot was visited */
	bool homes;            /* the homes map (core_homes_cursor_init) */
};

/* Starts a walk of c's map at its first slot. */
void core_affinity_cursor_init(const struct core *c,
			       struct core_affinity_cursor *cur);

/* Goes on with the walk: visits at most max slots of the map's entry
 * array (live or free, so one call costs O(max) whatever the map holds),
 * in array order, and calls fn with each live entry (endpoint live, idle
 * < affinity_ttl at now_ms), as it is when its slot is reached. Sets
 * cur->done once the last slot was visited. Between calls the map may
 * change, and a walk then sees:
 * - an entry refreshed, moved to another endpoint or removed after its
 *   slot was visited: as it was when visited;
 * - one changed before its slot is reached: as it is then (a removed one
 *   not at all);
 * - a key inserted after the walk passed the slot it landed in: not at
 *   all; in a slot not yet visited: once;
 * - a key removed after its visit and inserted again into a later slot:
 *   twice, the later record the more recent (smaller idle_ms at a later
 *   now_ms). A reader that must hold each key once keeps the latest.
 * Each slot is visited once, so a walk ends after at most capacity / max
 * calls. Returns 0, fn's first non-zero return (the walk can go on with
 * the next slot), or -ESTALE when the map was rebuilt since
 * core_affinity_cursor_init (core_set_params with a new
 * affinity_max_entries, however many times): start over. */
int core_affinity_cursor_next(const struct core *c,
			      struct core_affinity_cursor *cur,
			      uint64_t now_ms, uint32_t max,
			      core_affinity_fn fn, void *arg);

/* Inserts one record (LRU: it becomes the most recent). Returns 0, -ENOENT
 * for an unknown endpoint, -ESTALE when idle_ms has reached affinity_ttl
 * (not inserted). A full map evicts its least recently used entry. */
int core_affinity_import(struct core *c, const struct core_affinity_record *rec,
			 uint64_t now_ms);

/* The failover tiers' homes (docs/policy-v2.md, section 30): for a key
 * whose entry is on a worse tier, the endpoint it came from, in a map of
 * the affinity map's kind. The same walk (core_affinity_cursor_next,
 * records of the home's endpoint) and the same import (into the homes
 * map) as the affinity map's, for the state snapshot. */
void core_homes_cursor_init(const struct core *c, struct core_affinity_cursor *cur);
int core_homes_import(struct core *c, const struct core_affinity_record *rec,
		      uint64_t now_ms);

/* The live entry of akey at now_ms in *rec, read without touching the map
 * (no hit counted, no LRU move). Returns 0, or -ENOENT when there is none
 * (or its endpoint is gone). */
int core_affinity_lookup(const struct core *c, uint64_t akey, uint64_t now_ms,
			 struct core_affinity_record *rec);

/* Drops akey's entry, whatever endpoint it points to. Returns whether
 * there was one. */
bool core_affinity_clear(struct core *c, uint64_t akey);

/* Fills *out with endpoint idx's persistent statistics. 0 or -ENOENT. */
int core_endpoint_stats_export(const struct core *c, int idx, uint64_t now_ms,
			       struct core_endpoint_stats *out);

/* The longest cooldown the parameters can give an open breaker: the larger
 * of rate_limit_cooldown_max and breaker_cooldown_max. */
uint64_t core_cooldown_max_ms(const struct core *c);

/* Restores endpoint idx's statistics from *st (EWMAs, samples, breaker
 * with its remaining cooldown, cut to core_cooldown_max_ms, dead key).
 * Rejects negative or non-finite EWMAs and unknown breaker states
 * (-EINVAL). 0, -ENOENT or -EINVAL. */
int core_endpoint_stats_import(struct core *c, int idx, uint64_t now_ms,
			       const struct core_endpoint_stats *st);

#endif
