/* sim_llama.h - a llama.cpp-style endpoint cache: slots keeping their last prompt, a host prompt cache of whole prompts. */
#ifndef WARMLANE_SIM_LLAMA_H
#define WARMLANE_SIM_LLAMA_H

#include <stddef.h>
#include <stdint.h>

/* What llama.cpp's llama-server (tools/server, 2025 and later, the version
 * the engine benchmark runs) does with --parallel N, --cache-ram and
 * --slot-prompt-similarity, in units of the workload's blocks (one token in
 * the engine workload):
 *  - a slot keeps the tokens of its last request (prompt + generated) and
 *    reuses their longest common prefix with the next prompt it runs;
 *  - a request takes the idle slot whose prefix covers more than
 *    `similarity` of the new prompt (the best one), else the least recently
 *    used idle slot;
 *  - unless the slot was chosen by similarity and keeps at least half of
 *    its tokens, its prompt is first saved whole into the host cache (not
 *    when a cached prompt already contains it; cached prompts it contains
 *    are dropped), then the cached prompt that beats the slot's own on both
 *    kept share (LCP / its length, at least 0.25) and similarity (LCP / new
 *    prompt) is restored into the slot and leaves the cache;
 *  - the host cache drops its oldest saves while it holds more than
 *    `ram_tokens` (always keeping one).
 * A block cache (sim_kv.h) keeps any 512-token block of any prompt; this
 * one keeps whole prompts, one per slot plus a few saved ones. */

struct sim_llama_seq {
	const uint64_t *b; /* blocks, owned by the workload */
	uint32_t n;
};

struct sim_llama_slot {
	struct sim_llama_seq seq;
	uint64_t last_used;  /* a counter: LRU among idle slots */
	uint8_t busy;
};

struct sim_llama {
	struct sim_llama_slot *slot;
	uint32_t nslot;
	struct sim_llama_seq *saved; /* host cache, oldest first */
	uint32_t nsaved, cap_saved;
	uint64_t saved_tokens;
	uint64_t ram_tokens;         /* 0: no host cache */
	double similarity;           /* --slot-prompt-similarity; 0: LRU only */
	uint64_t clock;
	uint64_t saves, restores, evictions;
};

/* nslot slots (>= 1), a host cache of ram_tokens blocks. 0 or -ENOMEM. */
int sim_llama_init(struct sim_llama *l, uint32_t nslot, uint64_t ram_tokens, double similarity);

void sim_llama_finish(struct sim_llama *l);

/* Longest common prefix of two block sequences. */
uint32_t sim_llama_lcp(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb);

/* The most leading blocks of p[0..n) any slot or saved prompt holds
 * (what an oracle could reuse; changes nothing). */
uint32_t sim_llama_peek(const struct sim_llama *l, const uint64_t *p, uint32_t n);

/* Starts a request whose prompt is p[0..n): picks an idle slot (which
 * becomes busy), saves and restores through the host cache as llama.cpp
 * does, and returns the slot; *cached gets how many leading blocks of the
 * prompt were already computed. -1 when every slot is busy, -ENOMEM. */
int sim_llama_start(struct sim_llama *l, const uint64_t *p, uint32_t n, uint32_t *cached);

/* The request on slot s ended: the slot keeps seq[0..n) (the prompt and
 * the generated tokens) and is idle again. */
void sim_llama_done(struct sim_llama *l, int s, const uint64_t *seq, uint32_t n);

#endif
