/* sim_pol_wlmodel.c - "warmlane-model": the decision of docs/architecture.md as first designed, written out in the simulator, to check the design against the core. */
#include "sim_policy.h"
#include "sim_map.h"
#include "sim_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The first design's defaults: params.h holds the same but for ewma_alpha
 * (0.05 there; docs/architecture.md, "Defaults"). */
#define M_TTL_MS 300000
#define M_ALPHA 0.3
#define M_COLD 20
#define M_PRIOR 500.0
#define M_IDLE_RESET_MS 60000
#define M_WINDOW_MS 10000
#define M_MIN_REQ 5
#define M_RATIO 0.5
#define M_CONSEC 5
#define M_COOLDOWN_MS 5000
#define M_COOLDOWN_MAX_MS 300000
#define M_PROBES 3
#define M_RL_COOLDOWN_MS 60000
#define M_DEAD_KEY_MS 60000
#define M_WIN_SLOTS 64

enum m_state { M_CLOSED, M_OPEN, M_HALF };

struct m_ep {
	double ewma[2];          /* [0] not streamed, [1] streamed */
	uint32_t samples[2];
	int64_t last_ms;         /* last success sample (idle reset) */
	enum m_state st;
	int64_t open_until;
	int64_t cooldown;
	uint32_t consec;
	uint32_t probes_out, probes_ok;
	int64_t dead_until;      /* 401/403 */
	int64_t win_t[M_WIN_SLOTS];
	uint8_t win_fail[M_WIN_SLOTS];
	uint32_t win_pos;
};

struct wlm {
	double tol;          /* sticky_tolerance (--set sticky_tolerance=) */
	double lf;           /* load_factor (--set load_factor=) */
	int norm;            /* --set norm=1: EWMA of tr per KiB of body */
	double slack;        /* --set slack=N: the load bound admits N more */
	struct sim_map map;  /* key -> last use ms << 8 | endpoint */
	struct m_ep *ep;
	uint32_t n;
	struct sim_rng rng;
	uint64_t *name_hash;
	double *tmp;
	uint32_t *idx;
	uint8_t *cand;
};

static void *wlm_create(const struct sim_policy_env *env)
{
	struct wlm *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	uint32_t n = env->nep ? env->nep : 1;
	s->n = env->nep;
	s->ep = calloc(n, sizeof(*s->ep));
	s->name_hash = calloc(n, sizeof(*s->name_hash));
	s->tmp = calloc(n, sizeof(*s->tmp));
	s->idx = calloc(n, sizeof(*s->idx));
	s->cand = calloc(n, 1);
	if (!s->ep || !s->name_hash || !s->tmp || !s->idx || !s->cand) {
		free(s->ep);
		free(s->name_hash);
		free(s->tmp);
		free(s->idx);
		free(s->cand);
		free(s);
		return NULL;
	}
	for (uint32_t e = 0; e < env->nep; e++) {
		s->name_hash[e] = XXH64(env->cfg->ep[e].name, strlen(env->cfg->ep[e].name), 0);
		s->ep[e].cooldown = M_COOLDOWN_MS;
	}
	sim_map_init(&s->map);
	sim_rng_seed(&s->rng, env->seed);
	double d;
	s->tol = sim_policy_param(env, "sticky_tolerance", &d) == 1 ? d : 2.5;
	s->lf = sim_policy_param(env, "load_factor", &d) == 1 ? d : 1.5;
	s->norm = sim_policy_param(env, "norm", &d) == 1 && d != 0;
	s->slack = sim_policy_param(env, "slack", &d) == 1 ? d : 0;
	return s;
}

static void wlm_destroy(void *st)
{
	struct wlm *s = st;
	if (!s)
		return;
	sim_map_finish(&s->map);
	free(s->ep);
	free(s->name_hash);
	free(s->tmp);
	free(s->idx);
	free(s->cand);
	free(s);
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Breaker transitions that only depend on time. */
static void m_tick(struct m_ep *x, int64_t now)
{
	if (x->st == M_OPEN && now >= x->open_until) {
		x->st = M_HALF;
		x->probes_out = 0;
		x->probes_ok = 0;
	}
}

static void m_trip(struct m_ep *x, int64_t now, int64_t cooldown)
{
	if (cooldown <= 0) {
		cooldown = x->cooldown;
		x->cooldown = x->cooldown * 2 > M_COOLDOWN_MAX_MS ? M_COOLDOWN_MAX_MS : x->cooldown * 2;
	}
	x->st = M_OPEN;
	x->open_until = now + cooldown;
	x->consec = 0;
	memset(x->win_t, 0, sizeof(x->win_t));
	memset(x->win_fail, 0, sizeof(x->win_fail));
}

static double m_ewma(const struct wlm *s, uint32_t e, int kind, double warm_median)
{
	const struct m_ep *x = &s->ep[e];
	return x->samples[kind] >= M_COLD ? x->ewma[kind] : warm_median;
}

static int wlm_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct wlm *s = st;
	int64_t now = v->now_us / 1000;
	int kind = r->stream ? 1 : 0;
	uint32_t nc = 0, nwarm = 0;
	double tot_w = 0, tot_in = 0;
	/* 1. candidates */
	for (uint32_t e = 0; e < v->n; e++) {
		struct m_ep *x = &s->ep[e];
		m_tick(x, now);
		s->cand[e] = v->ep[e].up && now >= x->dead_until &&
			     (x->st == M_CLOSED || (x->st == M_HALF && x->probes_out < M_PROBES));
		if (!s->cand[e])
			continue;
		nc++;
		tot_w += v->ep[e].weight;
		tot_in += v->ep[e].in_flight;
		if (x->samples[kind] >= M_COLD)
			s->tmp[nwarm++] = x->ewma[kind];
	}
	if (nc == 0) {
		/* 7. only breakers exclude: the one whose cooldown ends first */
		int best = -1;
		for (uint32_t e = 0; e < v->n; e++)
			if (v->ep[e].up && s->ep[e].st != M_CLOSED &&
			    (best < 0 || s->ep[e].open_until < s->ep[best].open_until))
				best = (int)e;
		*reason = best >= 0 ? "cooldown_fallback" : "none";
		return best;
	}
	double warm_median = nwarm ? (qsort(s->tmp, nwarm, sizeof(double), dbl_cmp), s->tmp[(nwarm - 1) / 2]) : M_PRIOR;
	/* median EWMA of the candidates (cold ones count as the warm median) */
	uint32_t k = 0;
	for (uint32_t e = 0; e < v->n; e++)
		if (s->cand[e])
			s->tmp[k++] = m_ewma(s, e, kind, warm_median);
	qsort(s->tmp, k, sizeof(double), dbl_cmp);
	double median = s->tmp[(k - 1) / 2];
#define WITHIN(e) (v->ep[e].in_flight + 1 <= ceil(s->lf * (tot_in + 1) * v->ep[e].weight / tot_w) + s->slack)
#define HEALTHY(e) (s->ep[e].st == M_CLOSED && m_ewma(s, e, kind, warm_median) <= s->tol * median)
	uint64_t key = sim_trace_affinity_key(r);
	int chosen = -1;
	if (key) {
		/* 3. warm hit */
		uint64_t *ent = sim_map_get(&s->map, key);
		if (ent && (uint64_t)now - (*ent >> 8) < M_TTL_MS) {
			uint32_t e = (uint32_t)(*ent & 0xff);
			if (e < v->n && s->cand[e] && HEALTHY(e) && WITHIN(e)) {
				*reason = "affinity";
				chosen = (int)e;
			}
		}
		/* 4. weighted rendezvous */
		if (chosen < 0) {
			uint32_t m = 0;
			for (uint32_t e = 0; e < v->n; e++) {
				if (!s->cand[e])
					continue;
				uint64_t h = sim_rng_mix(key ^ s->name_hash[e]);
				double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
				s->tmp[e] = v->ep[e].weight / -log(u);
				s->idx[m++] = e;
			}
			for (uint32_t i = 0; i < m && chosen < 0; i++) {
				uint32_t b = i;
				for (uint32_t j = i + 1; j < m; j++)
					if (s->tmp[s->idx[j]] > s->tmp[s->idx[b]])
						b = j;
				uint32_t t = s->idx[i];
				s->idx[i] = s->idx[b];
				s->idx[b] = t;
				uint32_t e = s->idx[i];
				if ((s->ep[e].st == M_CLOSED || s->ep[e].st == M_HALF) && HEALTHY(e) && WITHIN(e)) {
					*reason = "hash";
					chosen = (int)e;
				}
				if (s->ep[e].st == M_HALF && WITHIN(e) && chosen < 0) {
					*reason = "hash";
					chosen = (int)e;
				}
			}
		}
	}
	if (chosen < 0) {
		/* 6. power of two choices on predicted cost */
		uint32_t m = 0;
		for (uint32_t e = 0; e < v->n; e++)
			if (s->cand[e])
				s->idx[m++] = e;
		uint32_t a = s->idx[sim_rng_below(&s->rng, m)], b = a;
		if (m > 1) {
			uint32_t i = sim_rng_below(&s->rng, m), j = sim_rng_below(&s->rng, m - 1);
			if (j >= i)
				j++;
			a = s->idx[i];
			b = s->idx[j];
		}
		double ca = (v->ep[a].in_flight + 1) * m_ewma(s, a, kind, warm_median) / v->ep[a].weight;
		double cb = (v->ep[b].in_flight + 1) * m_ewma(s, b, kind, warm_median) / v->ep[b].weight;
		chosen = (int)(cb < ca ? b : a);
		*reason = key ? "spill" : "p2c";
	}
#undef WITHIN
#undef HEALTHY
	if (s->ep[chosen].st == M_HALF)
		s->ep[chosen].probes_out++;
	return chosen;
}

static void wlm_feedback(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t e,
			 const struct sim_feedback *fb)
{
	struct wlm *s = st;
	struct m_ep *x = &s->ep[e];
	int64_t now = v->now_us / 1000;
	uint64_t key = sim_trace_affinity_key(r);
	int kind = fb->stream ? 1 : 0;
	m_tick(x, now);
	int fail = fb->status >= 500 || fb->status == 408;
	if (fb->status == 429) {
		m_trip(x, now, fb->retry_after_s ? (int64_t)fb->retry_after_s * 1000 : M_RL_COOLDOWN_MS);
		return;
	}
	if (fb->status == 401 || fb->status == 403) {
		x->dead_until = now + M_DEAD_KEY_MS;
		return;
	}
	if (fb->status >= 400 && !fail)
		return; /* neutral */
	if (!fail) {
		double sample = (double)fb->tr_ms;
		if (s->norm) /* tr per KiB of body (content-length, ~4 bytes per token) */
			sample = sample / (1.0 + r->input_tokens * 4.0 / 1024.0);
		if (now - x->last_ms < M_IDLE_RESET_MS || x->last_ms == 0) {
			x->ewma[kind] = x->samples[kind] ? M_ALPHA * sample + (1 - M_ALPHA) * x->ewma[kind]
							 : sample;
			x->samples[kind]++;
		}
		x->last_ms = now;
		x->consec = 0;
		if (key)
			(void)sim_map_put(&s->map, key, (uint64_t)now << 8 | e);
		if (x->st == M_HALF) {
			if (x->probes_out)
				x->probes_out--;
			if (++x->probes_ok >= M_PROBES) {
				x->st = M_CLOSED;
				x->cooldown = M_COOLDOWN_MS;
			}
		}
	} else {
		if (key) {
			uint64_t *ent = sim_map_get(&s->map, key);
			if (ent && (*ent & 0xff) == e)
				*ent = 0; /* expired */
		}
		if (x->st == M_HALF) {
			m_trip(x, now, 0);
			return;
		}
		x->consec++;
	}
	if (x->st != M_CLOSED)
		return;
	x->win_t[x->win_pos] = now;
	x->win_fail[x->win_pos] = (uint8_t)fail;
	x->win_pos = (x->win_pos + 1) % M_WIN_SLOTS;
	uint32_t seen = 0, failed = 0;
	for (uint32_t i = 0; i < M_WIN_SLOTS; i++) {
		if (x->win_t[i] && now - x->win_t[i] <= M_WINDOW_MS) {
			seen++;
			failed += x->win_fail[i];
		}
	}
	if (x->consec >= M_CONSEC || (seen >= M_MIN_REQ && failed >= M_RATIO * seen))
		m_trip(x, now, 0);
}

const struct sim_policy sim_pol_wlmodel = {
	.name = "warmlane-model",
	.desc = "the first design's decision (docs/architecture.md) re-implemented in the simulator (design check; not the core)",
	.create = wlm_create,
	.destroy = wlm_destroy,
	.decide = wlm_decide,
	.feedback = wlm_feedback,
};
