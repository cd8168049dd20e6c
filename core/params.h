/* params.h - the routing policy's parameters and their defaults.
 *
 * docs/architecture.md's defaults table lists them. Durations are in
 * milliseconds of the monotonic clock the caller passes to the core. The
 * config loader (agent/config.c) fills this struct; the core only reads it.
 */
#ifndef WARMLANE_CORE_PARAMS_H
#define WARMLANE_CORE_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

/* Failover tiers (docs/tiers.md): 1 is the best, CORE_TIER_MAX the worst
 * an endpoint may have; an endpoint config's tier 0 means 1. */
#define CORE_TIER_MAX 8

/* Rungs of the identity ladder: which request attribute names the caller. */
enum core_rung {
	CORE_RUNG_SESSION = 0,
	CORE_RUNG_PREFIX  = 1, /* the longest prefix key present */
	CORE_RUNG_INSTALL = 2,
	CORE_RUNG_CALLER  = 3,
	CORE_RUNG_SRC     = 4,
	CORE_RUNG_COUNT
};

/* Which latency the scoring (the sticky tolerance and the p2c cost) uses.
 * HEADERS: the EWMA of time to response headers (SPOE feedback, or the log
 * line when feedback was not sent), judged against the candidates' median
 * and the endpoint's own past (pick.h, fast_enough). END_TO_END: the EWMA
 * of the whole request per KiB sent, from HAProxy's log line
 * (core_complete), judged against the median; while no candidate has
 * enough end-to-end samples (no log input) it falls back to HEADERS. BOTH:
 * an endpoint must be fit on each signal that has warm candidates, and p2c
 * weighs the two relative to their medians.
 *
 * Default BOTH, measured with the simulator (docs/routing-quality.md):
 * without the log input it is HEADERS. With it, all three keep 0.94 of the
 * oracle's hit rate on the Mooncake trace, and a 5x slow endpoint gets,
 * with BOTH, END_TO_END, HEADERS: 0.65%, 0.91%, 1.84% of the trace's
 * requests; 1.63%, 1.94%, 1.69% of synthetic chat's (the end-to-end time
 * arrives at the end of a stream, which a slow endpoint makes long, the
 * time to headers at its start). On a fleet whose servers send headers
 * before prefill (vLLM), only the end-to-end signal sees a slow endpoint:
 * 1.94% with BOTH or END_TO_END, 5.53% with HEADERS, on synthetic chat. */
enum core_score_by {
	CORE_SCORE_HEADERS = 0,
	CORE_SCORE_END_TO_END,
	CORE_SCORE_BOTH,
	CORE_SCORE_COUNT
};

/* Who else routes to the same engines (policy.routers; config names
 * "auto", "one", "several"). ONE: this agent's HAProxy alone, or several
 * that share the warm hint (docs/peers.md): whoever routes a key's next
 * request finds where it went. SEVERAL: HAProxies that share nothing,
 * which agree on a new key only where its hash puts it. AUTO: ONE while
 * the engines' own counts (engine_metrics) show this HAProxy carrying
 * their load (routers.h), else SEVERAL (without engine counts, always). */
enum core_routers {
	CORE_ROUTERS_AUTO = 0,
	CORE_ROUTERS_ONE,
	CORE_ROUTERS_SEVERAL,
	CORE_ROUTERS_COUNT
};

/* Whose session and install ids they are (core_identity). GLOBAL: the id
 * alone names the affinity entry, whoever sends it. CALLER: the id and the
 * caller's hash together, so that another caller sending the same
 * x-session-id gets another entry and cannot move this one; a request
 * without a caller hash falls back to the id alone (it can meet only other
 * requests without one). Prefix keys are never scoped: they are hashes of
 * the prompt's content, and a different caller sending the same prefix
 * (a shared system prompt) finds the same warm KV cache, which is the
 * point. */
enum core_session_scope {
	CORE_SESSION_GLOBAL = 0,
	CORE_SESSION_CALLER,
	CORE_SESSION_SCOPE_COUNT
};

struct core_params {
	uint64_t affinity_ttl_ms;          /* 300 s */
	uint32_t affinity_max_entries;     /* 1,000,000 */
	enum core_rung identity_ladder[CORE_RUNG_COUNT];
	unsigned identity_ladder_len;      /* session, prefix, install, caller */
	/* 0.05, not the first design's 0.3: the time to headers of an
	 * LLM request varies a hundredfold with the prompt and its cache hits;
	 * at 0.3 (about the last 3 samples) a couple of cold long prompts put
	 * an endpoint past 2.5x the median and its sessions were sent away
	 * (hit rate 0.80 of the oracle's on the Mooncake trace; 0.94 at 0.05,
	 * which still sees a 5x slowdown within about 10 samples). The EWMA
	 * is the mean of the samples until there are 1/alpha of them. */
	double ewma_alpha;                 /* 0.05 */
	/* Successes before the sticky tolerance judges an endpoint by its own
	 * EWMA. Power of two choices believes it from 3 on (pick.h,
	 * P2C_OWN_SAMPLES): a wrong guess there costs one request, not a
	 * session's warm cache. */
	uint32_t cold_start_samples;       /* 20 */
	double prior_ttfb_ms;              /* 500 */
	/* After this much silence an endpoint's first answer is dropped and
	 * its samples forgotten: cold again, for cold_start_samples, or for a
	 * re-trial of 4 samples once it was warm. An endpoint found too slow
	 * since its last reset waits twice as long for the next one (up to 16
	 * times): idleness forgives a scaled-to-zero backend its first answer,
	 * not a slow endpoint its slowness. */
	uint64_t idle_reset_ms;            /* 60 s */
	double sticky_tolerance;           /* 2.5 */
	/* Answers in a row after which an endpoint is left as slow, each
	 * over sticky_tolerance x its base and x the candidates' median
	 * though its queue does not explain it (learn.c, queue_judge): a
	 * faster detector than the EWMA (about 10 answers for a 5x
	 * slowdown), for endpoints whose times to headers are regular
	 * enough (spread under their mean) for one answer to say something.
	 * The answers must need two separate pauses of the server (stall.h):
	 * one stall delaying every request in flight at once is not a
	 * slowdown. 0: off. */
	uint32_t slow_run;                 /* 4 */
	/* What sticky_tolerance and p2c compare (enum
	 * core_score_by; config names "headers", "end_to_end", "both"). */
	enum core_score_by score_by;       /* both */
	/* See enum core_session_scope (config names "global", "caller"). */
	enum core_session_scope session_scope; /* caller */
	double load_factor;                /* 1.5 */
	/* In-flight requests an endpoint may always hold
	 * whatever the bound says. At low load the bound alone is too tight
	 * for LLM servers, which batch many requests: with 4 endpoints and one
	 * request in flight, ceil(1.5 x 2 / 4) = 1 would move a second session
	 * off its warm endpoint. Not for an endpoint that holds a slow
	 * server's queue, a request or more on average over idle_reset,
	 * over twice its fair share and with a time per request (Little's
	 * law) over sticky_tolerance x the candidates' (pick.h,
	 * floor_lifted; docs/policy-v2.md, section 23). 6, not 4: once
	 * floor_lifted sheds a slow server's queue, the floor only keeps
	 * keys home through load noise, and each of several agents counts
	 * its own share of it (Mooncake, 2 agents 0.925 -> 0.961 of one
	 * agent's hit rate; 8 cost the keyed recovery; section 24). */
	uint32_t load_floor;               /* 6 */
	/* load_floor for an endpoint whose end-to-end times the decision
	 * scores (score_by, with the log input: warm on them). Without
	 * them the bound is also what sheds a server that got slow but
	 * still answers headers early (vLLM's): its requests pile up, and
	 * only the count shows it. With them its times show it, and the
	 * bound has only overload to guard against, which a batching
	 * server is far from at a few requests. At 4, each of several
	 * agents, seeing its own share of the in-flight requests (2 per
	 * endpoint on the Mooncake trace with 2 agents), moves new keys off
	 * their rendezvous choice on noise, each a different one: with the
	 * log input, 2 agents 0.92 of one agent's hit rate, 0.97 at 8
	 * (docs/policy-v2.md, section 15). Below load_floor it is
	 * load_floor. */
	uint32_t load_floor_e2e;           /* 8 */
	/* A key's warm entry keeps its endpoint while that endpoint's
	 * in-flight, with this request, is within its fair share (its weight's
	 * part of the candidates' in-flight + 1) plus warm_slack, even past
	 * the load_factor bound; new keys keep the bound alone. Leaving a warm
	 * entry throws its cache away: at light load the bound (1.5 x a fair
	 * share of ~4) moved warm keys on noise of a few requests, where
	 * a batching server takes them at a small slowdown and the new
	 * endpoint prefills the whole prompt again. At heavy load the
	 * bound is the larger and decides alone. Measured
	 * (docs/routing-quality.md): Mooncake hit rate 0.283 -> 0.303 (oracle
	 * 0.305), speed 3 unchanged; a looser factor for warm entries
	 * instead (2, 3) gave the same at speed 1 but a TTFT p90 at speed 3
	 * of 2,817-2,822 ms against 2,580. None for an endpoint holding a
	 * slow server's queue on average over idle_reset (pick.h, queued).
	 * 0: the bound alone. */
	uint32_t warm_slack;               /* 6 */
	/* A key is hot while its share of the last minute's keyed
	 * decisions (hot.h) is over hot_share x its warm endpoint's part of
	 * the candidates' weight: one key that alone is worth half a
	 * server's traffic, a system prompt shared by many callers. When
	 * its requests go back to the same turn (a shared prefix, not one
	 * conversation: AFFINITY_SHARED) and carry no session id, and its
	 * endpoint is over the load bound (within_bound, not the warm
	 * slack), it is sent once by the rendezvous ranking to warm a
	 * second endpoint, its twin; from then on each of its requests
	 * goes to the cheaper of the two (p2c_cost), both warm. One
	 * endpoint serving a key of a quarter of the traffic keeps a batch
	 * around each of its hits that the TTFT p90 measures. Measured
	 * (docs/policy-v2.md, section 47; the simulator's groups, seeds
	 * 1-10): TTFT p90 37.2 -> 35.3 ms at a hit rate of 0.9231 ->
	 * 0.9236 (chash-bounded 35.1 at 0.9067, spreading the key over
	 * four); 0.25 gives 34.7 at 0.9233, 1 gives 35.7. 0: off. */
	double hot_share;                  /* 0.5 */
	/* A key without a warm entry (new, expired, or its endpoint left)
	 * goes to the cheapest (pick.h, p2c_cost: in flight x latency /
	 * weight) of the first place_choices rendezvous candidates that are
	 * fast enough and within the bound, the rendezvous order breaking
	 * ties. 1, the default: the first of them, blind to load below the
	 * bound. Measured (docs/routing-quality.md, "Policy changes tried"):
	 * 2 gains one agent on the Mooncake trace (hit rate 0.283 -> 0.288,
	 * TTFT p90 1268 -> 1245 ms; at speed 3 2580 -> 2444 ms) but loses
	 * where the rendezvous order's determinism is the point: independent
	 * agents, each seeing its own load, place the same new key apart (2
	 * agents 0.268 -> 0.232, 4 agents 0.290 -> 0.221), and a session
	 * whose entry expired no longer returns to its still-warm endpoint
	 * (synthetic chat 83.5% -> 82.6%). For one agent with short-lived
	 * keys. */
	uint32_t place_choices;            /* 1 */
	/* A new key (no entry, or an expired one) the ranking placed on X
	 * goes instead to the least loaded candidate L (in flight + 1 over
	 * weight; ties in rendezvous order; one not left as slow, fit and
	 * within the bounds as X) when X's load exceeds L's by more than
	 * place_load_z standard deviations of the counting noise of both
	 * (place_load_z x sqrt(X's + L's)). The tail of time to first token
	 * is the cold long prompts of new keys, whose prefill the endpoint's
	 * batch slows: the rendezvous choice put them on endpoints with ~3
	 * more requests in flight than the least loaded at speed 1, ~10 at
	 * speed 3 (docs/policy-v2.md, section 6). A difference of a few
	 * requests that an agent's own view cannot tell from noise keeps
	 * the rendezvous choice, so that independent agents, each seeing
	 * only its own requests, still mostly agree; the threshold grows
	 * with the counts, so that a busier view needs a larger gap. 0: off
	 * (the rendezvous choice below the bound). */
	double place_load_z;               /* 1.5 */
	/* Routing alone (routers): a new key leaves its rendezvous choice on
	 * a gap of alone_place_load_z deviations instead, and an entry lives
	 * alone_affinity_ttl_ms (or affinity_ttl_ms if longer): a key placed
	 * by load is then remembered where its cache is, not sent back to its
	 * hash choice when its entry expires. One agent's Mooncake TTFT p90
	 * 1,223 -> 1,187 ms (the stick table's 1,195), mixed's 485 -> 469;
	 * agents that share nothing would fall to 0.80 (2) and 0.63 (4) of
	 * one agent's hit rate (docs/policy-v2.md, sections 28 and 29). */
	enum core_routers routers;         /* auto */
	double alone_place_load_z;         /* 0.5 */
	uint64_t alone_affinity_ttl_ms;    /* 30 min */
	/* A new key whose request body is at least place_long_kib KiB
	 * (core_request.size_kib) is held to place_long_z instead of
	 * place_load_z, where its rendezvous choice and the lighter
	 * candidate both have the SLOWSTART_ANSWERS slow_start judges by.
	 * Its cold prefill is what the batch slows (prefill x (1 + slowdown
	 * x running)): a gap of a request or two that place_load_z leaves
	 * as noise costs a long prompt tens of ms per request and a short
	 * one nothing. The tail of time to first token is these prompts
	 * (docs/policy-v2.md, section 14). Placing them by load costs
	 * agreement where agents do not share placements: for one HAProxy,
	 * or several that share the warm hint (docs/peers.md); independent
	 * agents lose their long prompts' hits (Mooncake, 2 agents 0.92 ->
	 * 0.86 of one). And the latency rules read raw times while this one
	 * chooses which prompts an endpoint answers (section 14). 0: off. */
	uint32_t place_long_kib;           /* 0 */
	double place_long_z;               /* 0.5 */
	/* A new key whose choice X (after place_load_z) has every slot busy
	 * (in flight >= its configured slots, core_endpoint_config.slots)
	 * goes instead to the first candidate in the key's rendezvous order
	 * with a slot free (in flight below its slots, or none in flight
	 * where its slots are unknown), one not left as slow, fit and within
	 * the bounds as X. On X the key's cold prefill would wait for a whole
	 * request to end; on the free slot it starts now. The counting noise
	 * place_load_z allows for cannot tell a busy one-slot engine (1 in
	 * flight) from an idle one (0): this rule needs no statistics, only
	 * the engine's size, and agents that see the same counts still pick
	 * the same candidate (docs/policy-v2.md, section 13). No slot free
	 * anywhere, to the first with the fewest requests waiting for one,
	 * at least X's slots fewer than X has (a wait shorter by a whole
	 * request), unless other HAProxies that share no placements are
	 * configured or shown: between two polls the agent counts its own
	 * decisions and not yet the answers, so every one-slot engine looks
	 * busy just after a round of answers, and the hash alone put three
	 * of four new keys on one (section 48). Endpoints without slots are
	 * never left by it. false: off. */
	bool place_slots;                  /* true */
	/* A key placed by the rendezvous ranking (no usable warm entry)
	 * passes over candidates that already own more than (1 + owned_bound)
	 * x their weight's part of the keys the candidates were given, plus
	 * one key: the count of keys each endpoint was given decays with
	 * half-life owned_half_life_ms (owned.h). The 1.5x in-flight bound
	 * never binds at light load, so rendezvous alone spread sessions as
	 * unevenly as a hash (docs/engine-benchmark.md: 52 and 16 requests on
	 * two of four servers); in-flight counts are noisy and each agent
	 * sees its own (place_choices), while independent agents behind a
	 * random spray see about the same stream of keys, so their counts,
	 * and their choices, mostly agree. Negative: off (the former rule).
	 * A key counts once, when new (no entry, no unconfirmed placement).
	 * Measured (docs/policy-v2.md, section 3): 0.5 leaves every Mooncake
	 * and fault figure as it was and binds only on a clearly uneven
	 * spread; 0 spreads a few sessions best but costs independent agents
	 * their agreement (Mooncake, 2 agents: 0.283 -> 0.252 at 0). */
	double owned_bound;                /* 0.5 */
	/* A key placed by the rendezvous ranking passes over a candidate
	 * whose times to headers, from its 5th answer on, are over
	 * sticky_tolerance x those of its comparable peers (of the same
	 * header behaviour, or more variable: slowstart.h) in the log domain, by slow_start standard
	 * errors of its own mean: an endpoint slow from its first request
	 * has no past of its own to be slower than (the sticky rule) and
	 * would take its hash's share of new keys until cold_start_samples.
	 * 0: off. docs/policy-v2.md, section 4. */
	double slow_start;                 /* 2 */
	/* The same judgement for a key warm on such an endpoint: it leaves
	 * (is placed again, as a new key is) instead of staying. Its cache
	 * there is worth less than the time it loses: the endpoint is
	 * slower than every comparable peer by more than sticky_tolerance, the
	 * ratio the sticky rule leaves a warm endpoint at against its own
	 * past. false: the warm entry is kept (only new keys pass over it).
	 * docs/policy-v2.md, section 12. */
	bool slow_start_leave;             /* true */
	/* About half the affinity TTL: a session older than that has either
	 * sent its turns or is on its own warm entry. */
	uint64_t owned_half_life_ms;       /* 150 s */
	/* An endpoint left as slow, or starved by a stale EWMA, gets this
	 * fraction of its fair share of the pool's decisions as new keys
	 * and anonymous requests, one at a time, until its answers say it
	 * recovered (explore.h; docs/policy-v2.md, "Exploration"). 0: off,
	 * a left endpoint then waits for idle_reset's re-trial. */
	double explore_share;              /* 0.25 */
	/* Power of two choices weighs the latency of its pair only where one
	 * is more than this fraction over the other; within it the two count
	 * as equally fast, and requests in flight (then the random draw)
	 * decide. Without it, four identical servers behind one client at a
	 * time (none in flight) split anonymous requests by EWMAs 0.1-1.6%
	 * apart, and the one with the highest lost every pair (e2e `spread`:
	 * 0 of 237; docs/policy-v2.md, section 19). Well under
	 * sticky_tolerance: an endpoint 1.25 times as slow still loses its
	 * pairs at any load. 0: every difference counts. */
	double p2c_margin;                 /* 0.25 */
	double cost_weight_per_ms;         /* 0: cost ignored */
	uint64_t breaker_window_ms;        /* 10 s */
	uint32_t breaker_min_requests;     /* 5 */
	double breaker_failure_ratio;      /* 0.5 */
	uint32_t breaker_consecutive;      /* 5 */
	uint64_t breaker_cooldown_ms;      /* 5 s */
	uint64_t breaker_cooldown_max_ms;  /* 300 s */
	uint32_t half_open_probes;         /* 3 */
	uint64_t rate_limit_cooldown_ms;   /* 60 s */
	/* The longest a 429's Retry-After may keep an
	 * endpoint out (feedback and log lines alike), and with
	 * breaker_cooldown_max the longest cooldown a snapshot restores.
	 * Without it a Retry-After of 9*10^14 s closed an endpoint for good,
	 * across restarts. 10 min: rate limits of LLM APIs are per minute
	 * (tokens or requests per minute), so an honest Retry-After is
	 * seconds to a minute or two; past 10 min a half-open probe every
	 * 10 min costs one request and finds out whether the limit is
	 * really still there. */
	uint64_t rate_limit_cooldown_max_ms; /* 600 s */
	/* A key whose probe was refused is probed again after this (and
	 * excluded until a probe accepts it). */
	uint64_t dead_key_retry_ms;        /* 60 s */
	/* Whether the agent probes keys (it has a probe
	 * target). Without, a 401/403 never excludes a key: it judged a
	 * request the client shaped, and nothing else can tell. */
	bool key_probe;                    /* false */
	/* A key whose warm endpoint has a known artefact fingerprint
	 * (core_endpoint_artefact) is never moved to an endpoint with another
	 * one: the other candidates are only those of the same fingerprint or
	 * of none known. */
	bool artefact_affinity;            /* false */
	/* Probes of one key start at most this often, however many 401/403s
	 * callers cause. */
	uint64_t key_probe_interval_ms;    /* 10 s */
	/* 404s in a row for one endpoint+model before it
	 * counts as not serving that model (for dead_key_retry_ms). 0: never. */
	uint32_t model_mismatch_404s;      /* 3 */
	/* Failover tiers (tier.h, docs/tiers.md). A tier whose candidates
	 * hold at least tier_spill requests in flight per unit of weight is
	 * full, and the next tier becomes a candidate too. 0, the default:
	 * never full, only broken, rate-limited, dead-key or excluded tiers
	 * are left. How many requests a server batches before its time to
	 * first token suffers (vLLM's --max-num-seqs, TGI's
	 * --max-concurrent-requests) is the server's setting, which warmlane
	 * cannot see; a guessed bound either never spills or pays a costlier
	 * tier while the primary still had room, and legible billing is the
	 * point of tiers. A server that is really full answers 429 or 503, or
	 * times out, and its breaker leaves it; the operator who knows the
	 * batch size sets tier_spill to it. */
	double tier_spill;                 /* 0: never full */
	/* A session warm on a worse tier goes back once a better tier has
	 * been up (a CLOSED breaker and room) this long. 0, the default: as
	 * soon as one of its breakers closed, which takes half_open_probes
	 * successes; a primary that fails again reopens with a doubled
	 * cooldown, so a flapping one moves sessions ever less often. More
	 * keeps them where their cache is warm through a primary's flaps
	 * (new keys go to the better tier at once either way). */
	uint64_t tier_return_ms;           /* 0 */
	uint64_t poll_interval_ms;         /* 200 ms (agent) */
	/* An engine's own load (agent/engine.c, core_endpoint_engine) is the
	 * endpoint's in-flight count while its last sample is at most this
	 * old; past it the runtime API's view (or the agent's own count)
	 * takes over again. The Kubernetes inference gateway's figure. */
	uint64_t engine_max_age_ms;        /* 2 s */
	uint64_t snapshot_interval_ms;     /* 10 s (agent) */
};

/* Fills p with the defaults (docs/architecture.md, "Defaults"). */
void core_params_defaults(struct core_params *p);

/* The config name of a score_by value ("headers", "end_to_end", "both"),
 * or NULL. */
const char *core_score_by_name(enum core_score_by s);

/* The config name of a session scope ("global", "caller"), or NULL. */
const char *core_session_scope_name(enum core_session_scope s);

/* The config name of a routers value ("auto", "one", "several"), or NULL. */
const char *core_routers_name(enum core_routers r);

/* The config name of a rung ("session", "prefix", ...), or NULL. */
const char *core_rung_name(enum core_rung r);

#endif
