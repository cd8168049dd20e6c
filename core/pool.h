/* pool.h - the endpoint pool: endpoints by stable index, with names, models, weights and state. */
#ifndef WARMLANE_CORE_POOL_H
#define WARMLANE_CORE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "breaker.h"
#include "slowstart.h"
#include "core.h"

#define POOL_MAX_MODELS     256   /* distinct model names in a pool */
#define POOL_MODEL_WORDS    (POOL_MAX_MODELS / 64)
#define POOL_MODEL_SLOTS    512   /* model name index, a power of two */
#define POOL_MISMATCH_SLOTS 4     /* models with 404s noted per endpoint */
#define POOL_NO_MODEL       0xffffu
/* Latency signals of an endpoint: time to headers per kind, then end to
 * end per kind (pool_sig). */
#define POOL_SIGNALS        (2 * CORE_KIND_COUNT)

static inline unsigned pool_sig(bool e2e, unsigned kind)
{
	return e2e ? CORE_KIND_COUNT + kind : kind;
}

static inline bool pool_sig_e2e(unsigned sig)
{
	return sig >= CORE_KIND_COUNT;
}

/* pool_endpoint.suspect: over sticky_tolerance x the median at some
 * decision since it was last found within it (pick.h, fast_enough). */
enum pool_suspect {
	POOL_FIT = 0,   /* within, or not judged since */
	POOL_KEPT,      /* over, but kept by its own past (time to headers) */
	POOL_LEFT,      /* over, and left */
};

/* 404s seen for one endpoint and model. */
struct pool_mismatch {
	uint64_t until_ms;  /* excluded until then once count reached */
	uint16_t model;     /* model id, POOL_NO_MODEL when free */
	uint16_t count;     /* 404s in a row */
};

/* The fields a warm decision and its feedback read come first, in the
 * fewest cache lines (the array is 64-byte aligned, pool_add): at 64
 * endpoints the pool is larger than an L1, and each decision with its
 * feedback touches one endpoint at random. Line 0 is also what every
 * candidate of a decision, and exploration's scan, read. Moving a field
 * across these groups costs a cache miss per decision (measure it:
 * tests/bench/agent_bench.sh BENCH_CACHESIM=1). */
struct pool_endpoint {
	/* Line 0. */
	_Alignas(64) bool live;
	bool disabled;          /* by config */
	bool all_models;        /* no model list: serves every model */
	bool has_mismatch;      /* some mismatch slot is in use */
	bool seen;              /* some feedback arrived */
	uint8_t admin;          /* enum core_admin */
	uint8_t veteran;        /* bit per signal: was warm once (re-trials) */
	uint8_t suspect;        /* enum pool_suspect: how the decisions since
				 * it was last found fit judged it */
	uint8_t retrials;       /* idle_reset periods doubled: re-trials in a
				 * row that found it slow */
	uint8_t woke;           /* samples forgotten for idleness by a
				 * decision: the next answer is a wake-up */
	uint8_t key_dead;       /* a probe of its key was refused (learn.c,
				 * "upstream key probes") */
	uint8_t slow_run;       /* answers of a run slower than their queue
				 * explains (learn.c, queue_judge) */
	uint8_t run_answers;    /* answers since that run began */
	uint8_t run_pauses;     /* separate pauses its answers need (stall.h) */
	uint8_t drained;        /* `set endpoint ... drain` on the command
				 * socket: excluded, whatever HAProxy says */
	uint8_t tier;           /* 1..CORE_TIER_MAX (tier.h) */
	uint32_t in_flight;     /* the view decisions read: engine_if +
				 * engine_delta while the engine's sample is
				 * fresh, else local_if (core_impl.h, "In flight") */
	uint32_t samples[POOL_SIGNALS]; /* indexed by pool_sig */
	uint32_t gen;           /* bumped on removal: map entries die with it */
	double weight;
	uint64_t last_seen_ms;
	/* In flight, the two views (core_impl.h, "In flight"); engine_if and
	 * the rest of the engine's sample are further down. */
	uint32_t local_if;      /* runtime API scur+qcur, or this agent's own
				 * count, kept with every decision and end */
	bool engine_fresh;      /* in_flight follows the engine */
	/* Exploration (explore.h): while explore_on, answers to requests
	 * started from explore_from_ms are counted towards a verdict. */
	uint8_t explore_on;
	uint8_t explore_left;       /* it was left when they began */
	/* HAProxy's layer-7 check (explore_check): slow against its peers'
	 * (read by p2c and the warm bound), or it found it recovered and
	 * vouches for it until it is warm on cold_start_samples answers. */
	bool check_slow : 1;
	bool check_vouch : 1;
	/* Its answers come at the headers (core_observe, SPOE feedback), not
	 * only at the stream's end (the log line alone, HAProxy 2.6): the
	 * wait unanswered (decide.c) measures is then against its base. */
	bool at_headers : 1;

	/* Line 1: latency, read by the decision and taught by feedback. */
	double ewma[POOL_SIGNALS];
	double base[CORE_KIND_COUNT];     /* time to headers: its long-run
					   * EWMA, its own history; indexed
					   * by kind = pool_sig(false, kind) */
	uint32_t base_n[CORE_KIND_COUNT]; /* samples in it (kept across idle) */
	uint32_t spread_n[CORE_KIND_COUNT];

	/* Line 2. */
	double spread[CORE_KIND_COUNT];   /* time to headers: EWMA of the
					   * squared distance to base */
	double queue_mean;      /* EWMA of the in-flight requests its keyed
				 * decisions found (queue_judge) */
	/* One block, "backend\0server\0key\0" (pool.c, names_alloc):
	 * backend is what is freed. With their lengths in the same line, a
	 * feedback's name check (pool_is_named) reads it and the block. */
	char *backend;
	char *server;
	char *key_id;           /* NULL: no key */
	/* Their lengths (0 for NULL), so that a lookup compares lengths
	 * before bytes and never strlen's a name. */
	uint32_t backend_len, server_len, key_len;
	int32_t engine_delta;   /* this agent's decisions - ends since it */

	/* Line 3. */
	struct slowstart first[CORE_KIND_COUNT]; /* time to headers, log
						  * domain (slowstart.h) */
	uint64_t explore_sent_ms;   /* a probe out since then; 0 none */
	/* Streamed successes whose breaker outcome waits for their log line
	 * (core_feedback.end_follows). A lost line leaves one counted: the
	 * next normal end of a stream whose feedback did count would count
	 * again as a success, which is harmless. */
	uint32_t provisional;
	/* Per kind, slot + 1 of the comparable peer that last showed it within
	 * sticky_tolerance of its peers (start_keeps in decide.c); 0 none. */
	uint16_t start_witness[CORE_KIND_COUNT];

	/* Line 4. */
	uint64_t outcomes[CORE_OUTCOME_COUNT];
	uint64_t decisions;
	/* The first decision for it since its last answer (last_seen_ms);
	 * at or before that answer: none waits (unanswered in decide.c).
	 * Beside decisions: the commit that sets it writes this line. */
	uint64_t wait_ms;

	/* Lines 5 and 6: the breaker's state. */
	struct breaker br;

	/* Line 7: what a miss (the rendezvous ranking of every candidate)
	 * or p2c reads. */
	double inv_weight;
	uint64_t rdv_seed;      /* from the names: equal in every agent */
	double owned;           /* keys placed on it, decayed (owned.h) */
	double cost_per_mtok;
	uint32_t slots;         /* requests it runs at once; 0 unknown
				 * (pool_slots_apply) */
	uint64_t models[POOL_MODEL_WORDS];

	/* The slow-run detector (learn.c, queue_judge): how much of a
	 * queue's wait shows in its times to headers, 1 as for a server
	 * that runs its requests one by one (the most a queue explains),
	 * 0 as for one that runs them at once, and the answers that
	 * taught it (with pool_add's first guess); then its run. */
	double queue_gain;
	uint32_t queue_gain_n;
	double run_sq;          /* squared distances to base of the run's
				 * slow answers, for the spread if it ends */
	uint64_t run_lo_ms;     /* the run's latest pause: its answers' */
	uint64_t run_hi_ms;     /* intersection (stall.h) */
	double run_excess;      /* and their largest excess over base */
	double run_bare;        /* the slowest of the run's answers whose
				 * decision found no queue over the usual */
	uint64_t dead_until_ms; /* key_dead: re-probed from then on */
	/* Feedback and introspection. */
	struct pool_mismatch mismatch[POOL_MISMATCH_SLOTS];
	/* Upstream key: a 401/403 in feedback makes it suspect, only a probe
	 * the agent shapes itself can make it key_dead. */
	bool key_suspect;       /* a 401/403 since the last probe started */
	bool key_probing;       /* a probe is out (core_key_probe_next) */
	uint64_t probe_after_ms;  /* no new probe before then (rate limit) */
	uint64_t key_failed_ms;   /* last refused probe (least recently
				   * failed fallback) */
	uint64_t probes[CORE_PROBE_COUNT]; /* results by enum core_probe */
	uint64_t name_hash;
	uint64_t completions[CORE_END_COUNT];
	uint64_t awake_ms;      /* the last wake-up answer after idleness
				 * (core_complete, beside completions) */
	uint32_t engine_if;     /* the engine's running + waiting, last sample */
	double engine_kv;       /* KV-cache usage 0..1 of the sample; -1 none */
	uint64_t engine_at_ms;  /* the sample's time; 0: none ever */
	uint64_t engine_polls[2]; /* [0] failed, [1] succeeded */
	uint64_t engine_stale;  /* times its sample aged out */
	uint64_t artefact;      /* fingerprint of what it serves; 0: unknown */
	uint32_t slots_cfg;     /* core_endpoint_config.slots; 0: none */
	uint32_t slots_limit;   /* HAProxy's maxconn (core_endpoint_limit) */
	uint32_t slots_seen;    /* the engine's most running with some
				 * waiting (core_endpoint_engine_full) */
	bool artefact_mismatch; /* another endpoint of a model of its differs */
	/* Exploration, the rest (explore_on above). */
	uint64_t explore_next;      /* the explore clock of its next probe */
	uint64_t explore_from_ms;
	uint64_t explore_akey;      /* the probe out's affinity key; 0:
				     * anonymous (explore_sent_ms) */
	double explore_sum;         /* its fast answers' times to headers */
	uint8_t explore_fast;
	uint8_t explore_slow;
	uint8_t explore_shift;      /* verdicts "still slow" in a row */
	uint8_t explore_hdr;        /* its times to headers said slow when
				     * it began: they judge it (e2e_holds) */
	uint8_t explore_end_fast;   /* its probes' ends, with explore_hdr */
	uint8_t explore_end_slow;
	uint8_t explore_sized;      /* its probes are judged sized (explore.c,
				     * sized_answers): explore_fast counts
				     * them all, explore_sum sums them */
	/* in_flight and the rate of this agent's decisions for it, averaged
	 * over time: EWMAs sampled at each runtime poll (core_endpoint_sync),
	 * time constant idle_reset (load_note in core.c); what
	 * within_warm_bound tells a slow server's queue from noise and from
	 * a popular key's by. */
	double load_avg;
	double rate_avg;            /* decisions a second */
	uint64_t load_avg_ms;       /* its last sample, or its addition */
	uint64_t load_avg_decisions; /* decisions at that sample */
	/* HAProxy's layer-7 health check (explore_check, check_slow above):
	 * its last duration and when it was read. */
	uint32_t check_ms;          /* 0: none */
	uint64_t check_at_ms;
	/* HAProxy's health checks (core_endpoint_sync): when they last
	 * marked it DOWN, and, once UP again, until when its emptiness is
	 * not taken for spare capacity (trusted_idle in decide.c). */
	uint64_t down_ms;
	uint64_t rejoin_until_ms;
	uint32_t left_n;        /* times fast_enough left it (the verdicts
				 * of recovery it undid: explore_reclaim) */
};

/* The slots in use: configured, else HAProxy's maxconn, else the most
 * the engine was seen running with requests waiting; 0 unknown. */
static inline void pool_slots_apply(struct pool_endpoint *e)
{
	e->slots = e->slots_cfg > 0 ? e->slots_cfg :
		   e->slots_limit > 0 ? e->slots_limit : e->slots_seen;
}

/* The groups above, checked where they are measured to matter. */
_Static_assert(offsetof(struct pool_endpoint, ewma) == 64 &&
	       offsetof(struct pool_endpoint, spread) == 128 &&
	       offsetof(struct pool_endpoint, backend_len) < 192 &&
	       offsetof(struct pool_endpoint, first) == 192 &&
	       offsetof(struct pool_endpoint, outcomes) == 256 &&
	       offsetof(struct pool_endpoint, br) == 320 &&
	       offsetof(struct pool_endpoint, inv_weight) == 448,
	       "pool_endpoint's hot fields stay in their cache lines");

struct pool_model {
	char *name;
	size_t len;
	uint64_t hash;
	uint32_t refs;          /* endpoints serving it; 0: free for reuse */
};

struct pool {
	struct pool_endpoint *ep;
	uint32_t cap;           /* slots allocated */
	uint32_t end;           /* one past the highest slot ever used */
	uint32_t live;          /* live endpoints */
	uint32_t *by_name;      /* open addressing on name_hash: index + 1 */
	uint32_t name_mask;
	struct pool_model models[POOL_MAX_MODELS];
	uint32_t n_models;      /* ids handed out (some may be free) */
	uint16_t model_slots[POOL_MODEL_SLOTS]; /* id + 1, 0 empty */
	uint64_t version;       /* bumped by add, update, remove */
};

/* Empties p (nothing allocated until the first add). */
void pool_init(struct pool *p);

/* Frees what p owns; p may be half-built. */
void pool_finish(struct pool *p);

/* Adds an endpoint (see core_endpoint_add for what is rejected). Returns
 * its index or -EINVAL, -EEXIST, -ENOSPC, -ENOMEM. */
int pool_add(struct pool *p, const struct core_endpoint_config *cfg,
	     uint64_t now_ms);

/* Replaces models, weight, cost and disabled of idx (names must match).
 * 0, -ENOENT, -EINVAL, -ENOSPC or -ENOMEM (nothing changed). */
int pool_update(struct pool *p, int idx, const struct core_endpoint_config *cfg);

/* Removes idx: frees its names, bumps its generation. 0 or -ENOENT. */
int pool_remove(struct pool *p, int idx);

/* Whether idx is a live endpoint named backend/server/key exactly (what
 * pool_find would return for those names: names are unique). */
bool pool_is_named(const struct pool *p, uint32_t idx, struct core_str backend,
		   struct core_str server, struct core_str key);

/* Index of backend/server/key (key len 0: no key), or -ENOENT. */
int pool_find(const struct pool *p, struct core_str backend,
	      struct core_str server, struct core_str key);

/* Id of a model name, or -1 when no endpoint ever named it. */
int pool_model_find(const struct pool *p, const char *name, size_t len);

/* The live endpoint idx, or NULL. */
static inline struct pool_endpoint *pool_get(const struct pool *p, int idx)
{
	if (idx < 0 || (uint32_t)idx >= p->end || !p->ep[idx].live)
		return NULL;
	return &p->ep[idx];
}

/* Whether e serves model id (-1: no model in the request). */
static inline bool pool_serves(const struct pool_endpoint *e, int model)
{
	if (model < 0 || e->all_models)
		return true;
	return (e->models[(unsigned)model / 64] >> ((unsigned)model % 64)) & 1u;
}

/* Whether 404s exclude e for model at now_ms. */
bool pool_mismatched(const struct pool_endpoint *e, int model, uint64_t now_ms);

/* Notes a 404 of e for model: after `threshold` in a row (0: never) e is
 * excluded for that model for `duration_ms`. */
void pool_note_404(struct pool_endpoint *e, int model, uint32_t threshold,
		   uint64_t duration_ms, uint64_t now_ms);

/* A success of e for model clears its 404 run. */
void pool_note_served(struct pool_endpoint *e, int model);

#endif
