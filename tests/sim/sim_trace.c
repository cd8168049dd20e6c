/* sim_trace.c - workload storage, key derivation and a fixed-shape Mooncake JSONL parser. */
#include "sim_trace.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void sim_trace_init(struct sim_workload *w, const char *name)
{
	*w = (struct sim_workload){ 0 };
	snprintf(w->name, sizeof(w->name), "%s", name);
}

void sim_trace_finish(struct sim_workload *w)
{
	free(w->req);
	free(w->blocks);
	w->req = NULL;
	w->blocks = NULL;
	w->n = w->cap = w->nblocks = w->blocks_cap = 0;
}

struct sim_req *sim_trace_add(struct sim_workload *w, int64_t arrival_us, uint32_t input_tokens,
			      uint32_t output_tokens, const uint64_t *blocks, uint32_t nb, int stream)
{
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 1024;
		struct sim_req *r = realloc(w->req, ncap * sizeof(*r));
		if (!r)
			return NULL;
		w->req = r;
		w->cap = ncap;
	}
	if (w->nblocks + nb > w->blocks_cap) {
		size_t ncap = w->blocks_cap ? w->blocks_cap : 4096;
		while (ncap < w->nblocks + nb)
			ncap *= 2;
		uint64_t *b = realloc(w->blocks, ncap * sizeof(*b));
		if (!b)
			return NULL;
		w->blocks = b;
		w->blocks_cap = ncap;
	}
	if (nb)
		memcpy(w->blocks + w->nblocks, blocks, nb * sizeof(*blocks));
	struct sim_req *r = &w->req[w->n++];
	*r = (struct sim_req){
		.arrival_us = arrival_us,
		.input_tokens = input_tokens,
		.output_tokens = output_tokens,
		.nblocks = nb,
		.block_off = w->nblocks,
		.stream = (uint8_t)(stream != 0),
	};
	w->nblocks += nb;
	return r;
}

const uint64_t *sim_trace_blocks(const struct sim_workload *w, const struct sim_req *r)
{
	return w->blocks + r->block_off;
}

/* --- Mooncake JSONL ------------------------------------------------------ */

struct jcur {
	const char *p, *end;
};

static void j_ws(struct jcur *c)
{
	while (c->p < c->end && isspace((unsigned char)*c->p))
		c->p++;
}

static int j_char(struct jcur *c, char ch)
{
	j_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return 0;
	}
	return -1;
}

/* A non-negative integer that fits in 63 bits (a trailing ".0" is accepted). */
static int j_uint(struct jcur *c, uint64_t *v)
{
	j_ws(c);
	if (c->p >= c->end || !isdigit((unsigned char)*c->p))
		return -1;
	uint64_t x = 0;
	while (c->p < c->end && isdigit((unsigned char)*c->p)) {
		if (x > (UINT64_MAX / 2 - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*c->p++ - '0');
	}
	if (c->p < c->end && *c->p == '.') {
		c->p++;
		while (c->p < c->end && *c->p == '0')
			c->p++;
	}
	*v = x;
	return 0;
}

/* A key string without escapes into buf; -1 if absent, too long or escaped. */
static int j_key(struct jcur *c, char *buf, size_t len)
{
	if (j_char(c, '"') < 0)
		return -1;
	size_t i = 0;
	while (c->p < c->end && *c->p != '"') {
		if (*c->p == '\\' || i + 1 >= len)
			return -1;
		buf[i++] = *c->p++;
	}
	if (c->p >= c->end)
		return -1;
	c->p++;
	buf[i] = '\0';
	return 0;
}

struct mc_line {
	uint64_t ts, in, out;
	uint64_t *ids;
	size_t nids, cap;
	unsigned seen;
};

static int mc_parse(struct mc_line *m, const char *s, size_t len)
{
	struct jcur c = { s, s + len };
	char key[32];
	m->nids = 0;
	m->seen = 0;
	if (j_char(&c, '{') < 0)
		return -1;
	for (;;) {
		if (j_key(&c, key, sizeof(key)) < 0 || j_char(&c, ':') < 0)
			return -1;
		if (strcmp(key, "hash_ids") == 0) {
			if (j_char(&c, '[') < 0)
				return -1;
			j_ws(&c);
			if (c.p < c.end && *c.p == ']') {
				c.p++;
			} else {
				for (;;) {
					uint64_t v;
					if (j_uint(&c, &v) < 0)
						return -1;
					if (m->nids == m->cap) {
						size_t ncap = m->cap ? m->cap * 2 : 256;
						uint64_t *n = realloc(m->ids, ncap * sizeof(*n));
						if (!n)
							return -2;
						m->ids = n;
						m->cap = ncap;
					}
					m->ids[m->nids++] = v;
					if (j_char(&c, ',') == 0)
						continue;
					if (j_char(&c, ']') < 0)
						return -1;
					break;
				}
			}
			m->seen |= 8;
		} else {
			uint64_t v;
			if (j_uint(&c, &v) < 0)
				return -1;
			if (strcmp(key, "timestamp") == 0) {
				m->ts = v;
				m->seen |= 1;
			} else if (strcmp(key, "input_length") == 0) {
				m->in = v;
				m->seen |= 2;
			} else if (strcmp(key, "output_length") == 0) {
				m->out = v;
				m->seen |= 4;
			}
			/* other numeric fields are ignored */
		}
		if (j_char(&c, ',') == 0)
			continue;
		if (j_char(&c, '}') < 0)
			return -1;
		break;
	}
	j_ws(&c);
	if (c.p != c.end || m->seen != 15)
		return -1;
	if (m->in > UINT32_MAX || m->out > UINT32_MAX || m->ts > INT64_MAX / 1000)
		return -1;
	return 0;
}

int sim_trace_load_mooncake(struct sim_workload *w, const char *path, size_t limit, char *err,
			    size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	size_t lineno = 0;
	struct mc_line m = { 0 };
	int rc = 0;
	while ((limit == 0 || w->n < limit) && (len = getline(&line, &lcap, f)) >= 0) {
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		size_t k = 0;
		while (k < (size_t)len && isspace((unsigned char)line[k]))
			k++;
		if (k == (size_t)len)
			continue;
		int p = mc_parse(&m, line, (size_t)len);
		if (p == -2) {
			rc = -ENOMEM;
			snprintf(err, errlen, "%s:%zu: out of memory", path, lineno);
			break;
		}
		if (p < 0 || m.nids > UINT32_MAX) {
			rc = -EINVAL;
			snprintf(err, errlen, "%s:%zu: not a Mooncake trace line", path, lineno);
			break;
		}
		if (!sim_trace_add(w, (int64_t)m.ts * 1000, (uint32_t)m.in, (uint32_t)m.out, m.ids,
				   (uint32_t)m.nids, 1)) {
			rc = -ENOMEM;
			snprintf(err, errlen, "%s:%zu: out of memory", path, lineno);
			break;
		}
	}
	free(m.ids);
	free(line);
	fclose(f);
	if (rc == 0 && w->n == 0) {
		snprintf(err, errlen, "%s: no requests", path);
		rc = -EINVAL;
	}
	if (rc == 0)
		sim_trace_sort(w);
	return rc;
}

/* --- ordering, scaling, keys ---------------------------------------------- */

static int req_cmp(const void *a, const void *b)
{
	const struct sim_req *x = a, *y = b;
	if (x->arrival_us != y->arrival_us)
		return x->arrival_us < y->arrival_us ? -1 : 1;
	/* block_off is unique and grows with insertion order: a stable tie-break */
	return x->block_off < y->block_off ? -1 : x->block_off > y->block_off;
}

void sim_trace_sort(struct sim_workload *w)
{
	if (w->n > 1)
		qsort(w->req, w->n, sizeof(*w->req), req_cmp);
}

void sim_trace_scale(struct sim_workload *w, double speed, size_t limit)
{
	if (speed > 0 && speed != 1.0) {
		for (size_t i = 0; i < w->n; i++)
			w->req[i].arrival_us = (int64_t)((double)w->req[i].arrival_us / speed);
	}
	if (limit && limit < w->n)
		w->n = limit;
}

void sim_trace_derive_keys(struct sim_workload *w, unsigned keys)
{
	static const uint32_t nb[SIM_NPREFIX] = { 1, 2, 4 };
	static const uint32_t window_tokens[SIM_NPREFIX] = { 256, 1024, 2048 };
	if (w->own_keys && keys != 0)
		return; /* the generator set what HAProxy would send */
	for (size_t i = 0; i < w->n; i++) {
		struct sim_req *r = &w->req[i];
		const uint64_t *b = sim_trace_blocks(w, r);
		for (int k = 0; k < SIM_NPREFIX; k++) {
			r->prefix[k] = 0;
			if ((keys & SIM_KEYS_PREFIX) && r->nblocks >= nb[k] &&
			    r->input_tokens >= window_tokens[k])
				r->prefix[k] = XXH64(b, nb[k] * sizeof(*b), (uint64_t)k + 1) | 1;
		}
		if (!(keys & SIM_KEYS_SESSION))
			r->session = 0;
		else if (r->session == 0 && r->nblocks >= 2)
			r->session = XXH64(b, 2 * sizeof(*b), 100) | 1;
	}
}

/* A prompt's first blocks, hashed one block at a time. */
static uint64_t chain_step(uint64_t h, uint64_t block)
{
	return XXH64(&block, sizeof(block), h) | 1; /* 0: an empty slot */
}

int sim_trace_derive_turns(struct sim_workload *w)
{
	struct turn_slot {
		uint64_t h;
		uint16_t turn;
	};
	uint32_t most = 0;
	for (size_t i = 0; i < w->n; i++)
		most = w->req[i].nblocks > most ? w->req[i].nblocks : most;
	size_t cap = 64;
	while (cap < 2 * w->n)
		cap *= 2;
	struct turn_slot *t = calloc(cap, sizeof(*t));
	uint64_t *chain = malloc(((size_t)most + 1) * sizeof(*chain));
	if (t == NULL || chain == NULL) {
		free(t);
		free(chain);
		return -ENOMEM;
	}
	for (size_t i = 0; i < w->n; i++) {
		struct sim_req *r = &w->req[i];
		const uint64_t *b = sim_trace_blocks(w, r);
		chain[0] = 1;
		for (uint32_t k = 1; k <= r->nblocks; k++)
			chain[k] = chain_step(chain[k - 1], b[k - 1]);
		unsigned turn = 1;
		for (uint32_t k = r->nblocks; k >= 2 && turn == 1; k--) {
			for (size_t j = chain[k] & (cap - 1); t[j].h != 0; j = (j + 1) & (cap - 1)) {
				if (t[j].h == chain[k]) {
					turn = t[j].turn + 1u;
					break;
				}
			}
		}
		r->turn = turn > UINT16_MAX ? UINT16_MAX : (uint16_t)turn;
		if (r->nblocks < 3)
			continue;
		uint64_t h = chain[r->nblocks - 1];
		size_t j = h & (cap - 1);
		while (t[j].h != 0 && t[j].h != h)
			j = (j + 1) & (cap - 1);
		t[j] = (struct turn_slot){ h, r->turn }; /* the latest wins */
	}
	free(t);
	free(chain);
	return 0;
}

uint64_t sim_trace_affinity_key(const struct sim_req *r)
{
	if (r->session)
		return r->session;
	for (int k = SIM_NPREFIX; k-- > 0;)
		if (r->prefix[k])
			return r->prefix[k];
	return r->caller;
}
