/* sim_gen.h - synthetic workload generators: multi-turn chat, shared-prefix groups, mixed sizes. */
#ifndef WARMLANE_SIM_GEN_H
#define WARMLANE_SIM_GEN_H

#include "sim_trace.h"

#include <stdint.h>

struct sim_gen_params {
	uint64_t seed;
	uint32_t size;       /* chat: conversations; groups: groups; mixed: requests/100 */
	double duration_s;   /* span over which sessions start / requests arrive */
	double rate_scale;   /* multiplies arrival rates (1 = default load) */
	uint32_t turns;      /* engine: turns per conversation (0: 4) */
	uint32_t clients;    /* engine: closed-loop clients (0: 4) */
	uint32_t user_chars; /* engine: characters per user turn (0: 400) */
};

/* Defaults for the named generator ("chat", "groups", "mixed"). */
void sim_gen_defaults(const char *name, struct sim_gen_params *p);

/* Multi-turn chat: size conversations starting uniformly over the first
 * duration_s, 10-20 turns each, every prompt = a 1024-token system prompt
 * shared by all + the conversation so far; think times lognormal (median
 * 90 s, sigma 1.3: about 18% of gaps beyond the 300 s affinity TTL). Each
 * request carries its conversation as session id. 0 or -ENOMEM. */
int sim_gen_chat(struct sim_workload *w, const struct sim_gen_params *p);

/* Shared-prefix groups: size groups, each a long system prompt (lognormal,
 * median 6,000 tokens), popularity Zipf(1), short questions (50-400 tokens),
 * Poisson arrivals (about 3 req/s x rate_scale) over duration_s. No session. */
int sim_gen_groups(struct sim_workload *w, const struct sim_gen_params *p);

/* Mixed sizes: 70% yes/no classifications (one of 5 templates of 1,024
 * tokens + 100-1,500 tokens of item, 1-3 output tokens, not streamed) and 30%
 * summaries of unique 8,000-12,000-token documents (300-800 output tokens,
 * streamed); Poisson arrivals over duration_s. No session. */
int sim_gen_mixed(struct sim_workload *w, const struct sim_gen_params *p);

/* The engine benchmark's traffic (tests/bench/engine.sh): size
 * conversations (32) x turns (4), round by round, clients (4) in a closed loop
 * (w->closed), never two requests of a conversation at once; one block per
 * token of ChatML text (w->block_tokens = 1): a shared 947-token system
 * prefix, 1,380 tokens at turn 1 and 477 more per turn (user_chars 400),
 * user turns of the
 * driver's words, 16-token answers that the next turn sends back
 * (gen_blocks); half the conversations carry a session id,
 * the others a prefix key of their own (w->own_keys); half the requests
 * streamed. 0 or -ENOMEM. */
int sim_gen_engine(struct sim_workload *w, const struct sim_gen_params *p);

/* Dispatches by name; -EINVAL for an unknown name. */
int sim_gen_run(const char *name, struct sim_workload *w, const struct sim_gen_params *p);

#endif
