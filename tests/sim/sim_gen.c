/* sim_gen.c - seeded synthetic workloads whose prompts share prefixes the way chat apps do. */
#include "sim_gen.h"
#include "sim_rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BT 512u /* tokens per KV block */
#define GEN_MAX_BLOCKS 512u

void sim_gen_defaults(const char *name, struct sim_gen_params *p)
{
	*p = (struct sim_gen_params){ .seed = 1, .size = 400, .duration_s = 1800, .rate_scale = 1 };
	if (strcmp(name, "groups") == 0) {
		p->size = 40;
		p->duration_s = 1200;
	} else if (strcmp(name, "mixed") == 0) {
		p->size = 40;
		p->duration_s = 1200;
	} else if (strcmp(name, "engine") == 0) {
		p->size = 32;
	}
}

static uint32_t clampu(double x, uint32_t lo, uint32_t hi)
{
	if (!(x >= lo))
		return lo;
	if (x > hi)
		return hi;
	return (uint32_t)x;
}

/* Fills blk with the prompt's blocks: the first nfixed come from fixed (full
 * blocks shared with other prompts), the rest are fresh ids. */
static uint32_t gen_blocks(uint64_t *blk, uint32_t tokens, const uint64_t *fixed, uint32_t nfixed,
			   uint64_t *next_id)
{
	uint32_t nb = (tokens + BT - 1) / BT;
	if (nb > GEN_MAX_BLOCKS)
		nb = GEN_MAX_BLOCKS;
	for (uint32_t i = 0; i < nb; i++)
		blk[i] = i < nfixed ? fixed[i] : (*next_id)++;
	return nb;
}

int sim_gen_chat(struct sim_workload *w, const struct sim_gen_params *p)
{
	struct sim_rng rng;
	sim_rng_seed(&rng, p->seed ^ 0xc4a7);
	/* (not { next_id++, next_id++ }: an initializer list's order is
	 * indeterminate, clang warns) */
	uint64_t sys[2] = { 1, 2 };
	uint64_t next_id = 3;
	uint64_t *conv = malloc(GEN_MAX_BLOCKS * sizeof(*conv));
	uint64_t *blk = malloc(GEN_MAX_BLOCKS * sizeof(*blk));
	if (!conv || !blk) {
		free(conv);
		free(blk);
		return -ENOMEM;
	}
	int rc = 0;
	for (uint32_t c = 0; c < p->size && rc == 0; c++) {
		double t = sim_rng_unit(&rng) * p->duration_s / (p->rate_scale > 0 ? p->rate_scale : 1);
		uint32_t turns = sim_rng_range(&rng, 10, 20);
		/* context so far: system prompt + a first document/message */
		uint32_t ctx = 1024 + clampu(sim_rng_lognormal(&rng, log(2000), 1.0), 50, 60000);
		memcpy(conv, sys, sizeof(sys));
		uint32_t full = 2; /* full blocks of conv[] with stable ids */
		uint64_t session = sim_rng_mix(p->seed * 1000003u + c + 1) | 1;
		for (uint32_t k = 0; k < turns; k++) {
			uint32_t out = clampu(sim_rng_lognormal(&rng, log(250), 0.8), 4, 2000);
			if (ctx > GEN_MAX_BLOCKS * BT)
				break; /* context window full: the conversation ends */
			while (full < ctx / BT)
				conv[full++] = next_id++;
			uint32_t nb = gen_blocks(blk, ctx, conv, full, &next_id);
			struct sim_req *r =
				sim_trace_add(w, (int64_t)(t * 1e6), ctx, out, blk, nb, 1);
			if (!r) {
				rc = -ENOMEM;
				break;
			}
			r->session = session;
			ctx += out + sim_rng_range(&rng, 50, 400);
			double think = sim_rng_lognormal(&rng, log(90), 1.3);
			if (think > 3600)
				think = 3600;
			/* the answer takes time to read too: about 30 ms per output token */
			t += think + out * 0.03;
		}
	}
	free(conv);
	free(blk);
	if (rc == 0)
		sim_trace_sort(w);
	return rc;
}

/* A Zipf(1) draw in [0, n) by inversion of the precomputed CDF. */
static uint32_t zipf_draw(struct sim_rng *rng, const double *cdf, uint32_t n)
{
	double u = sim_rng_unit(rng) * cdf[n - 1];
	uint32_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int sim_gen_groups(struct sim_workload *w, const struct sim_gen_params *p)
{
	struct sim_rng rng;
	sim_rng_seed(&rng, p->seed ^ 0x960f);
	uint32_t g = p->size ? p->size : 1;
	uint64_t next_id = 1;
	double *cdf = malloc(g * sizeof(*cdf));
	uint32_t *sys_tokens = malloc(g * sizeof(*sys_tokens));
	uint64_t *sys = malloc((size_t)g * GEN_MAX_BLOCKS * sizeof(*sys));
	uint64_t *blk = malloc(GEN_MAX_BLOCKS * sizeof(*blk));
	int rc = 0;
	if (!cdf || !sys_tokens || !sys || !blk) {
		rc = -ENOMEM;
		goto out;
	}
	double acc = 0;
	for (uint32_t i = 0; i < g; i++) {
		acc += 1.0 / (i + 1);
		cdf[i] = acc;
		sys_tokens[i] = clampu(sim_rng_lognormal(&rng, log(6000), 0.6), 1024, 60000);
		for (uint32_t b = 0; b < GEN_MAX_BLOCKS; b++)
			sys[(size_t)i * GEN_MAX_BLOCKS + b] = next_id++;
	}
	double rate = 3.0 * (p->rate_scale > 0 ? p->rate_scale : 1);
	for (double t = sim_rng_exp(&rng, 1 / rate); t < p->duration_s; t += sim_rng_exp(&rng, 1 / rate)) {
		uint32_t grp = zipf_draw(&rng, cdf, g);
		uint32_t in = sys_tokens[grp] + sim_rng_range(&rng, 50, 400);
		uint32_t out = sim_rng_range(&rng, 20, 300);
		uint32_t nb = gen_blocks(blk, in, sys + (size_t)grp * GEN_MAX_BLOCKS,
					 sys_tokens[grp] / BT, &next_id);
		if (!sim_trace_add(w, (int64_t)(t * 1e6), in, out, blk, nb, 1)) {
			rc = -ENOMEM;
			goto out;
		}
	}
out:
	free(cdf);
	free(sys_tokens);
	free(sys);
	free(blk);
	return rc;
}

int sim_gen_mixed(struct sim_workload *w, const struct sim_gen_params *p)
{
	struct sim_rng rng;
	sim_rng_seed(&rng, p->seed ^ 0x313d);
	uint64_t next_id = 1;
	uint64_t tmpl[5][2];
	uint64_t blk[GEN_MAX_BLOCKS];
	for (int i = 0; i < 5; i++) {
		tmpl[i][0] = next_id++;
		tmpl[i][1] = next_id++;
	}
	uint64_t instr = next_id++;
	double n = (p->size ? p->size : 1) * 100.0;
	double rate = n / (p->duration_s > 0 ? p->duration_s : 1) * (p->rate_scale > 0 ? p->rate_scale : 1);
	for (double t = sim_rng_exp(&rng, 1 / rate); t < p->duration_s; t += sim_rng_exp(&rng, 1 / rate)) {
		struct sim_req *r;
		if (sim_rng_unit(&rng) < 0.7) {
			uint32_t k = sim_rng_below(&rng, 5);
			uint32_t in = 1024 + sim_rng_range(&rng, 100, 1500);
			uint32_t nb = gen_blocks(blk, in, tmpl[k], 2, &next_id);
			r = sim_trace_add(w, (int64_t)(t * 1e6), in, sim_rng_range(&rng, 1, 3), blk, nb, 0);
		} else {
			uint32_t in = sim_rng_range(&rng, 8000, 12000);
			uint32_t nb = gen_blocks(blk, in, &instr, 1, &next_id);
			r = sim_trace_add(w, (int64_t)(t * 1e6), in, sim_rng_range(&rng, 300, 800), blk, nb, 1);
		}
		if (!r)
			return -ENOMEM;
	}
	return 0;
}

/* The engine benchmark's traffic (tests/bench/engine.sh, tests/engine/driver)
 * as the byte-level model sees it: one token per byte of ChatML text (the
 * chat template: "<|im_start|>" and "<|im_end|>" are 12 and 10 byte tokens
 * there), so turn 1 is 1,380 prompt tokens of which the first 947 are the
 * shared system message and the next message's header, and each later turn
 * adds 477, as llama-server's logs count them. The user turns are the
 * driver's: words drawn from its list, so two conversations often start
 * with the same letters or word, which matters to llama.cpp's host prompt
 * cache (a saved prompt goes to whichever request shares the longest prefix
 * with it). A block id is a hash of the whole text up to that byte, so equal
 * ids mean equal prefixes, for the block cache as for the slots. */
#define ENG_SYSTEM 900u
#define ENG_OUT 16u

static const char *const eng_words[] = {
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
	"on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
	"they", "you", "were", "her", "she", "there", "been", "one", "all", "we", "their", "cache",
	"prompt", "server", "token", "route", "model", "prefix", "engine", "warm", "cold", "request",
	"answer",
};

/* Appends s to buf at *len; the buffers are sized for the whole
 * conversation (eng_maxlen), so nothing is cut. */
static void eng_put(char *buf, uint32_t *len, const char *s, size_t n)
{
	memcpy(buf + *len, s, n);
	*len += (uint32_t)n;
}

static void eng_str(char *buf, uint32_t *len, const char *s)
{
	eng_put(buf, len, s, strlen(s));
}

/* n characters of words from the driver's list, as its text() makes them
 * (a word may run 7 characters past n before the cut). */
static void eng_text(struct sim_rng *rng, char *buf, uint32_t *len, uint32_t n)
{
	uint32_t start = *len;
	while (*len - start < n) {
		const char *w = eng_words[sim_rng_below(rng, sizeof(eng_words) / sizeof(eng_words[0]))];
		eng_str(buf, len, w);
		eng_str(buf, len, " ");
	}
	if (*len > start + n)
		*len = start + n;
}

/* ids[k] = a hash of text[0..k]: equal ids, equal prefixes. */
static void eng_ids(const char *text, uint32_t n, uint64_t *ids)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (uint32_t k = 0; k < n; k++) {
		h = sim_rng_mix(h ^ (unsigned char)text[k]);
		ids[k] = h;
	}
}

int sim_gen_engine(struct sim_workload *w, const struct sim_gen_params *p)
{
	struct sim_rng rng, srng;
	sim_rng_seed(&rng, p->seed ^ 0xe961);
	sim_rng_seed(&srng, 7); /* the system prompt: the same for every seed, as the driver's */
	uint32_t nconv = p->size ? p->size : 32;
	uint32_t turns = p->turns ? p->turns : 4;
	uint32_t user = p->user_chars ? p->user_chars : 400;
	/* the system message, then per turn the user's text (one word past
	 * its length at most), 77 characters of framing and the answer */
	size_t maxlen = ENG_SYSTEM + 64 + (size_t)turns * (user + 16 + 100);
	char *text = malloc((size_t)nconv * maxlen);
	uint32_t *len = calloc(nconv, sizeof(*len));
	uint8_t *session = malloc(nconv);
	uint64_t *ids = malloc(maxlen * sizeof(*ids));
	char sys[ENG_SYSTEM + 64];
	uint32_t nsys = 0;
	int rc = 0;
	if (!text || !len || !session || !ids) {
		rc = -ENOMEM;
		goto out;
	}
	eng_str(sys, &nsys, "<|im_start|>system\nYou are a helpful assistant. ");
	eng_text(&srng, sys, &nsys, ENG_SYSTEM - 29);
	eng_str(sys, &nsys, "<|im_end|>\n");
	for (uint32_t c = 0; c < nconv; c++) {
		session[c] = sim_rng_unit(&rng) < 0.5;
		eng_put(text + (size_t)c * maxlen, &len[c], sys, nsys);
	}
	w->block_tokens = 1;
	w->closed = p->clients ? p->clients : 4;
	w->own_keys = 1;
	/* round by round, as the driver queues them */
	for (uint32_t t = 0; t < turns && rc == 0; t++) {
		for (uint32_t c = 0; c < nconv; c++) {
			char *b = text + (size_t)c * maxlen;
			int stream = sim_rng_unit(&rng) < 0.5;
			eng_str(b, &len[c], "<|im_start|>user\n");
			eng_text(&rng, b, &len[c], user);
			eng_str(b, &len[c], "<|im_end|>\n<|im_start|>assistant\n");
			uint32_t n = len[c];
			/* the answer: 16 printable tokens of noise, sent back in
			 * the next turn; the slot keeps all but the last */
			for (uint32_t k = 0; k < ENG_OUT; k++) {
				char ch = (char)(' ' + sim_rng_below(&rng, 95));
				eng_put(b, &len[c], &ch, 1);
			}
			eng_str(b, &len[c], "<|im_end|>\n");
			eng_ids(b, n + ENG_OUT - 1, ids);
			struct sim_req *r = sim_trace_add(w, 0, n, ENG_OUT, ids, n + ENG_OUT - 1, stream);
			if (!r) {
				rc = -ENOMEM;
				break;
			}
			r->nblocks = n;
			r->gen_blocks = ENG_OUT - 1;
			r->conv = c + 1;
			/* a session id for half the conversations; the others
			 * are keyed by the body's first KiB (the system prompt
			 * and their first words); bodies stay under 4 KiB */
			if (session[c])
				r->session = sim_rng_mix(p->seed * 1000003u + c + 1) | 1;
			else
				r->prefix[0] = sim_rng_mix(0xf1125u ^ ((uint64_t)(c + 1) << 20)) | 1;
		}
	}
out:
	free(text);
	free(len);
	free(session);
	free(ids);
	return rc;
}

int sim_gen_run(const char *name, struct sim_workload *w, const struct sim_gen_params *p)
{
	if (strcmp(name, "engine") == 0)
		return sim_gen_engine(w, p);
	if (strcmp(name, "chat") == 0)
		return sim_gen_chat(w, p);
	if (strcmp(name, "groups") == 0)
		return sim_gen_groups(w, p);
	if (strcmp(name, "mixed") == 0)
		return sim_gen_mixed(w, p);
	return -EINVAL;
}
