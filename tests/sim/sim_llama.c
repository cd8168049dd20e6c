/* sim_llama.c - llama.cpp's slot and host prompt cache reuse, on block sequences (see sim_llama.h). */
#include "sim_llama.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sim_llama_init(struct sim_llama *l, uint32_t nslot, uint64_t ram_tokens, double similarity)
{
	*l = (struct sim_llama){ .nslot = nslot ? nslot : 1, .ram_tokens = ram_tokens, .similarity = similarity };
	l->slot = calloc(l->nslot, sizeof(*l->slot));
	return l->slot ? 0 : -ENOMEM;
}

void sim_llama_finish(struct sim_llama *l)
{
	free(l->slot);
	free(l->saved);
	l->slot = NULL;
	l->saved = NULL;
}

uint32_t sim_llama_lcp(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb)
{
	uint32_t n = na < nb ? na : nb, i = 0;
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

uint32_t sim_llama_peek(const struct sim_llama *l, const uint64_t *p, uint32_t n)
{
	uint32_t best = 0;
	for (uint32_t s = 0; s < l->nslot; s++) {
		uint32_t c = sim_llama_lcp(l->slot[s].seq.b, l->slot[s].seq.n, p, n);
		best = c > best ? c : best;
	}
	for (uint32_t k = 0; k < l->nsaved; k++) {
		uint32_t c = sim_llama_lcp(l->saved[k].b, l->saved[k].n, p, n);
		best = c > best ? c : best;
	}
	return best;
}

static void drop(struct sim_llama *l, uint32_t k)
{
	l->saved_tokens -= l->saved[k].n;
	memmove(&l->saved[k], &l->saved[k + 1], (l->nsaved - k - 1) * sizeof(*l->saved));
	l->nsaved--;
}

/* The slot's prompt into the host cache (server_prompt_cache::alloc): not
 * when a saved prompt already contains it; saved prompts it contains go. */
static int save(struct sim_llama *l, const struct sim_llama_seq *s)
{
	if (s->n == 0 || l->ram_tokens == 0)
		return 0;
	for (uint32_t k = 0; k < l->nsaved; k++)
		if (sim_llama_lcp(l->saved[k].b, l->saved[k].n, s->b, s->n) == s->n)
			return 0;
	for (uint32_t k = 0; k < l->nsaved;) {
		if (sim_llama_lcp(l->saved[k].b, l->saved[k].n, s->b, s->n) == l->saved[k].n)
			drop(l, k);
		else
			k++;
	}
	if (l->nsaved == l->cap_saved) {
		uint32_t ncap = l->cap_saved ? 2 * l->cap_saved : 16;
		struct sim_llama_seq *n = realloc(l->saved, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		l->saved = n;
		l->cap_saved = ncap;
	}
	l->saved[l->nsaved++] = *s;
	l->saved_tokens += s->n;
	l->saves++;
	return 0;
}

/* The saved prompt that beats the slot's own on both the share of it kept
 * and the share of the new prompt covered (server_prompt_cache::load) goes
 * into the slot and leaves the cache. */
static void load(struct sim_llama *l, struct sim_llama_seq *s, const uint64_t *p, uint32_t n)
{
	uint32_t lcp = sim_llama_lcp(s->b, s->n, p, n);
	double keep_best = s->n ? (double)lcp / s->n : -1.0;
	double sim_best = n ? (double)lcp / n : 0;
	int best = -1;
	for (uint32_t k = 0; k < l->nsaved; k++) {
		uint32_t c = sim_llama_lcp(l->saved[k].b, l->saved[k].n, p, n);
		double keep = (double)c / l->saved[k].n;
		double sim = n ? (double)c / n : 0;
		if (keep < 0.25) /* a large prompt is not thrown away for a small gain */
			continue;
		if (keep_best < keep && sim_best < sim) {
			keep_best = keep;
			sim_best = sim;
			best = (int)k;
		}
	}
	if (best < 0)
		return;
	*s = l->saved[best];
	drop(l, (uint32_t)best);
	l->restores++;
}

/* server_prompt_cache::update: the oldest saves go while over the limit. */
static void trim(struct sim_llama *l)
{
	while (l->nsaved > 1 && l->saved_tokens > l->ram_tokens) {
		drop(l, 0);
		l->evictions++;
	}
}

int sim_llama_start(struct sim_llama *l, const uint64_t *p, uint32_t n, uint32_t *cached)
{
	int pick = -1;
	int through_cache = 0;
	if (l->similarity > 0) {
		double best = 0;
		for (uint32_t s = 0; s < l->nslot; s++) {
			const struct sim_llama_slot *x = &l->slot[s];
			if (x->busy || x->seq.n == 0 || n == 0)
				continue;
			double sim = (double)sim_llama_lcp(x->seq.b, x->seq.n, p, n) / n;
			if (sim > best && sim > l->similarity) {
				best = sim;
				pick = (int)s;
			}
		}
		/* chosen by similarity: through the cache only when the slot
		 * is about to lose more than half of what it holds */
		if (pick >= 0 && best * n / l->slot[pick].seq.n < 0.5)
			through_cache = 1;
	}
	if (pick < 0) {
		for (uint32_t s = 0; s < l->nslot; s++) {
			const struct sim_llama_slot *x = &l->slot[s];
			if (!x->busy && (pick < 0 || x->last_used <= l->slot[pick].last_used))
				pick = (int)s;
		}
		if (pick < 0)
			return -1;
		through_cache = 1;
	}
	struct sim_llama_slot *x = &l->slot[pick];
	if (through_cache && l->ram_tokens > 0) {
		if (save(l, &x->seq) < 0)
			return -ENOMEM;
		load(l, &x->seq, p, n);
		trim(l);
	}
	*cached = sim_llama_lcp(x->seq.b, x->seq.n, p, n);
	x->seq = (struct sim_llama_seq){ .b = p, .n = n };
	x->busy = 1;
	x->last_used = ++l->clock;
	return pick;
}

void sim_llama_done(struct sim_llama *l, int s, const uint64_t *seq, uint32_t n)
{
	if (s < 0 || (uint32_t)s >= l->nslot)
		return;
	l->slot[s].seq = (struct sim_llama_seq){ .b = seq, .n = n };
	l->slot[s].busy = 0;
	l->slot[s].last_used = ++l->clock;
}
