/* sim_trace.h - workloads: requests with prompt blocks and affinity keys, and the Mooncake reader. */
#ifndef WARMLANE_SIM_TRACE_H
#define WARMLANE_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define SIM_NPREFIX 3

/* Which identities a replay sends (what HAProxy would pass to warmlane). */
enum sim_keys {
	SIM_KEYS_PREFIX = 1,  /* prefix1..3 from the first bytes of the body */
	SIM_KEYS_SESSION = 2, /* a conversation id */
};

struct sim_req {
	int64_t arrival_us;
	uint32_t input_tokens;
	uint32_t output_tokens;
	uint32_t nblocks;     /* prompt blocks of 512 tokens, last one partial */
	size_t block_off;     /* into sim_workload.blocks */
	uint64_t session;     /* 0: absent */
	uint64_t prefix[SIM_NPREFIX]; /* xxh64 of the first 1, 4, 8 KiB; 0: absent */
	uint64_t caller;      /* hashed API key; 0: absent */
	uint8_t stream;       /* streamed response */
	uint32_t conv;        /* closed-loop workloads: conversation, 1-based (0: none) */
	uint16_t turn;        /* its conversation's turn, as HAProxy's `turn`
			       * counts the body's user messages
			       * (sim_trace_derive_turns); 0: not sent */
	uint32_t gen_blocks;  /* blocks after the prompt's that hold its answer as the
			       * engine keeps it (a llama.cpp slot: prompt + generated
			       * tokens, sim_llama.h); 0: unknown */
};

struct sim_workload {
	char name[48];
	struct sim_req *req;
	size_t n, cap;
	uint64_t *blocks;
	size_t nblocks, blocks_cap;
	uint32_t block_tokens; /* tokens per block; 0: SIM_KV_BLOCK_TOKENS (512) */
	uint32_t closed;       /* > 0: a closed loop of this many clients (arrival_us
				* is ignored: the fleet sends each request when a
				* client is free, in order, never two of a conversation
				* at once, as tests/engine/driver does) */
	uint8_t own_keys;      /* the generator set session and prefix keys itself:
				* sim_trace_derive_keys leaves them, but for
				* --keys none (no identity at all) */
};

/* An empty workload. */
void sim_trace_init(struct sim_workload *w, const char *name);

/* Frees a workload's arrays. */
void sim_trace_finish(struct sim_workload *w);

/* Appends a request whose prompt is blocks[0..nb) (copied). Keys are zero
 * until sim_trace_derive_keys. Returns the new request, or NULL on ENOMEM. */
struct sim_req *sim_trace_add(struct sim_workload *w, int64_t arrival_us, uint32_t input_tokens,
			      uint32_t output_tokens, const uint64_t *blocks, uint32_t nb, int stream);

/* The prompt blocks of r (owned by w). */
const uint64_t *sim_trace_blocks(const struct sim_workload *w, const struct sim_req *r);

/* Reads a Mooncake JSONL trace (timestamp ms, input_length, output_length,
 * hash_ids), at most limit requests (0: all); every request streams. Rejects
 * malformed lines with the line number in err. 0, or -errno / -EINVAL. */
int sim_trace_load_mooncake(struct sim_workload *w, const char *path, size_t limit, char *err,
			    size_t errlen);

/* Sorts requests by arrival, stably. */
void sim_trace_sort(struct sim_workload *w);

/* Divides arrival times by speed (> 1 replays faster) and keeps the first
 * limit requests (0: all). */
void sim_trace_scale(struct sim_workload *w, double speed, size_t limit);

/* Derives the identities a replay sends, per enum sim_keys flags:
 * prefix1..3 = xxh64 of the first 1, 2 and 4 blocks, standing for xxh64 of
 * the first 1, 4 and 8 KiB of the body (about 4 bytes per token: 1 KiB is
 * inside block 0, 4 KiB = 1024 tokens = 2 blocks, 8 KiB = 2048 tokens = 4
 * blocks), each present only when the prompt covers its window (256, 1024,
 * 2048 tokens), as HAProxy sends a key only when req.body_len covers it.
 * session: kept when a generator set one, else xxh64 of the first 2 blocks
 * (the shared-prefix grouping of the trace's README). Flags not given clear
 * the corresponding keys. */
void sim_trace_derive_keys(struct sim_workload *w, unsigned keys);

/* Derives each request's turn from the prompts: a request extending the
 * blocks of an earlier one (all but that one's last, which its answer
 * completes; two at least) is the next turn of the latest such request,
 * else turn 1. What a body's count of user messages gives, for any
 * workload: a generator's conversations and the Mooncake trace's chains
 * of hash_ids alike. 0, or -ENOMEM (turns left 0). */
int sim_trace_derive_turns(struct sim_workload *w);

/* The affinity key HAProxy+warmlane would use by default: session, else the
 * longest prefix key, else caller; 0 when the request has no identity. */
uint64_t sim_trace_affinity_key(const struct sim_req *r);

#endif
