/* sim_cfg.c - parser of the simulator's fleet files (endpoints, router timing, faults). */
#include "sim_cfg.h"

#include "params.h" /* CORE_TIER_MAX */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char sim_cfg_default_text[] =
	"# 8 identical endpoints serving a large model (70B-class on one 8-GPU node).\n"
	"[router]\n"
	"poll_interval_ms = 200\n"
	"check_fall_s = 6\n"
	"check_rise_s = 4\n"
	"[defaults]\n"
	"prefill_ms_per_ktok = 40\n"
	"decode_ms_per_tok = 30\n"
	"prefill_batch_slowdown = 0.1\n"
	"decode_batch_slowdown = 0.02\n"
	"max_running = 32\n"
	"cache_blocks = 3000\n"
	"speed = 1\n"
	"weight = 1\n"
	"cost_per_mtok = 1\n"
	"headers = first_token\n"
	"header_ms = 5\n"
	"error_ms = 2\n"
	"[endpoint]\n"
	"name = gpu\n"
	"count = 8\n";

void sim_cfg_finish(struct sim_fleet_cfg *cfg)
{
	free(cfg->ep);
	free(cfg->fault);
	*cfg = (struct sim_fleet_cfg){ 0 };
}

const char *sim_cfg_fault_name(enum sim_fault_kind k)
{
	switch (k) {
	case SIM_FAULT_500: return "500";
	case SIM_FAULT_503: return "503";
	case SIM_FAULT_429: return "429";
	case SIM_FAULT_401: return "401";
	case SIM_FAULT_SLOW: return "slow";
	case SIM_FAULT_DOWN: return "down";
	case SIM_FAULT_CUT: return "cut";
	}
	return "?";
}

int sim_cfg_read_file(const char *path, char **out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (len + 1024 + 1 > cap) {
			char *n = realloc(buf, cap * 2);
			if (!n) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = n;
			cap *= 2;
		}
		size_t r = fread(buf + len, 1, 1024, f);
		len += r;
		if (r < 1024)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad) {
		free(buf);
		snprintf(err, errlen, "%s: %s", path, bad ? "read error" : "out of memory");
		return bad ? -EIO : -ENOMEM;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

enum section { SEC_NONE, SEC_DEFAULTS, SEC_ROUTER, SEC_ENDPOINT, SEC_FAULT };

struct parser {
	struct sim_fleet_cfg *cfg;
	struct sim_ep_params defaults;
	struct sim_ep_params cur;
	uint32_t count;
	struct sim_fault fault;
	char fault_ep[32];
	int fault_line;
	enum section sec;
	char *fault_names; /* nfault x 32: endpoint references resolved at the end */
	int *fault_lines;
	const char *src;
	char *err;
	size_t errlen;
};

static int p_num(const char *v, double *out)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (end == v || *end != '\0' || errno || !isfinite(d) || d < 0)
		return -1;
	*out = d;
	return 0;
}

static int p_time(const char *v, int64_t *us)
{
	double d;
	if (strcmp(v, "never") == 0) {
		*us = SIM_NEVER;
		return 0;
	}
	if (p_num(v, &d) < 0 || d > 1e9)
		return -1;
	*us = (int64_t)llround(d * 1e6);
	return 0;
}

/* Applies key=value to endpoint parameters; 1 if the key is not one of them. */
static int p_ep_key(struct sim_ep_params *e, const char *k, const char *v)
{
	struct {
		const char *name;
		double *dst;
	} dbl[] = {
		{ "prefill_ms_per_ktok", &e->prefill_ms_per_ktok },
		{ "decode_ms_per_tok", &e->decode_ms_per_tok },
		{ "prefill_batch_slowdown", &e->prefill_batch_slowdown },
		{ "decode_batch_slowdown", &e->decode_batch_slowdown },
		{ "speed", &e->speed },
		{ "weight", &e->weight },
		{ "cost_per_mtok", &e->cost_per_mtok },
		{ "header_ms", &e->header_ms },
		{ "error_ms", &e->error_ms },
		{ "cache_ram_tokens", &e->cache_ram_tokens },
		{ "slot_prompt_similarity", &e->slot_similarity },
	};
	for (size_t i = 0; i < sizeof(dbl) / sizeof(dbl[0]); i++)
		if (strcmp(k, dbl[i].name) == 0)
			return p_num(v, dbl[i].dst) < 0 ? -1 : 0;
	double d;
	if (strcmp(k, "tier") == 0) {
		if (p_num(v, &d) < 0 || d != floor(d) || d < 1 || d > CORE_TIER_MAX)
			return -1;
		e->tier = (uint32_t)d;
		return 0;
	}
	if (strcmp(k, "max_running") == 0 || strcmp(k, "cache_blocks") == 0) {
		if (p_num(v, &d) < 0 || d != floor(d) || d > 1e8)
			return -1;
		if (k[0] == 'm')
			e->max_running = (uint32_t)d;
		else
			e->cache_blocks = (uint32_t)d;
		return 0;
	}
	if (strcmp(k, "cache") == 0) {
		if (strcmp(v, "blocks") == 0)
			e->cache_llama = 0;
		else if (strcmp(v, "llama") == 0)
			e->cache_llama = 1;
		else
			return -1;
		return 0;
	}
	if (strcmp(k, "headers") == 0) {
		if (strcmp(v, "first_token") == 0)
			e->headers_immediate = 0;
		else if (strcmp(v, "immediate") == 0)
			e->headers_immediate = 1;
		else
			return -1;
		return 0;
	}
	if (strcmp(k, "start") == 0)
		return p_time(v, &e->start_us);
	if (strcmp(k, "stop") == 0)
		return p_time(v, &e->stop_us);
	return 1;
}

static int p_fail(struct parser *p, int line, const char *msg, const char *k)
{
	snprintf(p->err, p->errlen, "%s:%d: %s%s%s", p->src, line, msg, k ? ": " : "", k ? k : "");
	return -EINVAL;
}

/* Ends the current section, committing the endpoint(s) or fault it described. */
static int p_close(struct parser *p, int line)
{
	struct sim_fleet_cfg *c = p->cfg;
	if (p->sec == SEC_ENDPOINT) {
		if (p->cur.max_running == 0 || p->cur.speed <= 0 || p->cur.weight <= 0)
			return p_fail(p, line, "endpoint needs max_running > 0, speed > 0, weight > 0", p->cur.name);
		struct sim_ep_params *n = realloc(c->ep, (c->nep + p->count) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->ep = n;
		for (uint32_t i = 0; i < p->count; i++) {
			struct sim_ep_params *e = &c->ep[c->nep + i];
			*e = p->cur;
			if (p->count > 1)
				snprintf(e->name, sizeof(e->name), "%.20s%u", p->cur.name, i + 1);
			for (uint32_t j = 0; j < c->nep + i; j++)
				if (strcmp(c->ep[j].name, e->name) == 0)
					return p_fail(p, line, "duplicate endpoint name", e->name);
		}
		c->nep += p->count;
	} else if (p->sec == SEC_FAULT) {
		if (!p->fault_ep[0])
			return p_fail(p, line, "fault without endpoint", NULL);
		struct sim_fault *n = realloc(c->fault, (c->nfault + 1) * sizeof(*n));
		char *names = realloc(p->fault_names, (c->nfault + 1) * 32);
		if (names)
			p->fault_names = names;
		int *lines = realloc(p->fault_lines, (c->nfault + 1) * sizeof(int));
		if (lines)
			p->fault_lines = lines;
		if (!n || !names || !lines) {
			if (n)
				c->fault = n;
			return -ENOMEM;
		}
		c->fault = n;
		memcpy(p->fault_names + (size_t)c->nfault * 32, p->fault_ep, 32);
		p->fault_lines[c->nfault] = p->fault_line;
		c->fault[c->nfault++] = p->fault;
	}
	p->sec = SEC_NONE;
	return 0;
}

static int p_line(struct parser *p, char *s, int line)
{
	if (s[0] == '[') {
		int rc = p_close(p, line);
		if (rc < 0)
			return rc;
		if (strcmp(s, "[defaults]") == 0) {
			p->sec = SEC_DEFAULTS;
		} else if (strcmp(s, "[router]") == 0) {
			p->sec = SEC_ROUTER;
		} else if (strcmp(s, "[endpoint]") == 0) {
			p->sec = SEC_ENDPOINT;
			p->cur = p->defaults;
			p->count = 1;
			snprintf(p->cur.name, sizeof(p->cur.name), "ep%u", p->cfg->nep + 1);
		} else if (strcmp(s, "[fault]") == 0) {
			p->sec = SEC_FAULT;
			p->fault = (struct sim_fault){ .start_us = 0, .end_us = SIM_NEVER, .prob = 1,
						       .factor = 5, .retry_after_s = 30 };
			p->fault_ep[0] = '\0';
			p->fault_line = line;
		} else {
			return p_fail(p, line, "unknown section", s);
		}
		return 0;
	}
	char *eq = strchr(s, '=');
	if (!eq)
		return p_fail(p, line, "expected key = value", s);
	char *k = s, *v = eq + 1;
	char *ke = eq;
	while (ke > k && isspace((unsigned char)ke[-1]))
		ke--;
	*ke = '\0';
	while (isspace((unsigned char)*v))
		v++;
	double d;
	switch (p->sec) {
	case SEC_NONE:
		return p_fail(p, line, "key outside a section", k);
	case SEC_DEFAULTS: {
		int rc = p_ep_key(&p->defaults, k, v);
		if (rc)
			return p_fail(p, line, rc < 0 ? "bad value" : "unknown key", k);
		return 0;
	}
	case SEC_ROUTER:
		if (p_num(v, &d) < 0)
			return p_fail(p, line, "bad value", k);
		if (strcmp(k, "poll_interval_ms") == 0 && d >= 1)
			p->cfg->poll_interval_us = (int64_t)llround(d * 1000);
		else if (strcmp(k, "check_fall_s") == 0)
			p->cfg->check_fall_us = (int64_t)llround(d * 1e6);
		else if (strcmp(k, "check_rise_s") == 0)
			p->cfg->check_rise_us = (int64_t)llround(d * 1e6);
		else if (strcmp(k, "retries") == 0 && d >= 0 && d <= 16 && d == floor(d))
			p->cfg->retries = (uint32_t)d;
		else
			return p_fail(p, line, "unknown key or bad value", k);
		return 0;
	case SEC_ENDPOINT: {
		if (strcmp(k, "name") == 0) {
			if (!*v || strlen(v) >= 20)
				return p_fail(p, line, "bad name", v);
			snprintf(p->cur.name, sizeof(p->cur.name), "%s", v);
			return 0;
		}
		if (strcmp(k, "count") == 0) {
			if (p_num(v, &d) < 0 || d < 1 || d > 1024 || d != floor(d))
				return p_fail(p, line, "bad count", v);
			p->count = (uint32_t)d;
			return 0;
		}
		int rc = p_ep_key(&p->cur, k, v);
		if (rc)
			return p_fail(p, line, rc < 0 ? "bad value" : "unknown key", k);
		return 0;
	}
	case SEC_FAULT:
		if (strcmp(k, "endpoint") == 0) {
			if (!*v || strlen(v) >= 32)
				return p_fail(p, line, "bad endpoint", v);
			snprintf(p->fault_ep, sizeof(p->fault_ep), "%s", v);
			p->fault_line = line;
		} else if (strcmp(k, "kind") == 0) {
			static const enum sim_fault_kind kinds[] = { SIM_FAULT_500, SIM_FAULT_503,
				SIM_FAULT_429, SIM_FAULT_401, SIM_FAULT_SLOW, SIM_FAULT_DOWN,
				SIM_FAULT_CUT };
			size_t i;
			for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
				if (strcmp(v, sim_cfg_fault_name(kinds[i])) == 0)
					break;
			if (i == sizeof(kinds) / sizeof(kinds[0]))
				return p_fail(p, line, "unknown fault kind (500 503 429 401 slow down cut)", v);
			p->fault.kind = kinds[i];
		} else if (strcmp(k, "start") == 0) {
			if (p_time(v, &p->fault.start_us) < 0)
				return p_fail(p, line, "bad time", v);
		} else if (strcmp(k, "end") == 0) {
			if (p_time(v, &p->fault.end_us) < 0)
				return p_fail(p, line, "bad time", v);
		} else if (strcmp(k, "period") == 0) {
			if (p_time(v, &p->fault.period_us) < 0 || p->fault.period_us == SIM_NEVER)
				return p_fail(p, line, "bad period", v);
		} else if (strcmp(k, "prob") == 0) {
			if (p_num(v, &p->fault.prob) < 0 || p->fault.prob > 1)
				return p_fail(p, line, "bad probability", v);
		} else if (strcmp(k, "factor") == 0) {
			if (p_num(v, &p->fault.factor) < 0 || p->fault.factor <= 0)
				return p_fail(p, line, "bad factor", v);
		} else if (strcmp(k, "phase") == 0) {
			if (strcmp(v, "both") == 0)
				p->fault.phase = SIM_PHASE_BOTH;
			else if (strcmp(v, "prefill") == 0)
				p->fault.phase = SIM_PHASE_PREFILL;
			else if (strcmp(v, "decode") == 0)
				p->fault.phase = SIM_PHASE_DECODE;
			else
				return p_fail(p, line, "bad phase (both prefill decode)", v);
		} else if (strcmp(k, "retry_after") == 0) {
			if (p_num(v, &d) < 0 || d > 86400 || d != floor(d))
				return p_fail(p, line, "bad retry_after", v);
			p->fault.retry_after_s = (uint32_t)d;
		} else {
			return p_fail(p, line, "unknown key", k);
		}
		return 0;
	}
	return 0;
}

int sim_cfg_parse(struct sim_fleet_cfg *cfg, const char *text, const char *src, char *err, size_t errlen)
{
	struct parser p = {
		.cfg = cfg,
		.src = src,
		.err = err,
		.errlen = errlen,
		.defaults = {
			.name = "ep",
			.prefill_ms_per_ktok = 40,
			.decode_ms_per_tok = 30,
			.prefill_batch_slowdown = 0.1,
			.decode_batch_slowdown = 0.02,
			.max_running = 32,
			.cache_blocks = 3000,
			.speed = 1,
			.weight = 1,
			.cost_per_mtok = 1,
			.header_ms = 5,
			.error_ms = 2,
			.slot_similarity = 0.1,
			.start_us = 0,
			.stop_us = SIM_NEVER,
		},
	};
	if (cfg->poll_interval_us == 0)
		cfg->poll_interval_us = 200000;
	if (cfg->check_fall_us == 0)
		cfg->check_fall_us = 6000000;
	if (cfg->check_rise_us == 0)
		cfg->check_rise_us = 4000000;
	int rc = 0, line = 0;
	const char *s = text;
	char buf[512];
	while (*s && rc == 0) {
		line++;
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		if (len >= sizeof(buf)) {
			rc = p_fail(&p, line, "line too long", NULL);
			break;
		}
		memcpy(buf, s, len);
		buf[len] = '\0';
		s += len + (nl ? 1 : 0);
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = '\0';
		char *b = buf;
		while (isspace((unsigned char)*b))
			b++;
		char *e = b + strlen(b);
		while (e > b && isspace((unsigned char)e[-1]))
			e--;
		*e = '\0';
		if (*b)
			rc = p_line(&p, b, line);
	}
	if (rc == 0)
		rc = p_close(&p, line);
	/* resolve fault endpoint references */
	for (uint32_t i = 0; rc == 0 && i < cfg->nfault; i++) {
		const char *name = p.fault_names + (size_t)i * 32;
		uint32_t j;
		if (name[0] == '@') {
			char *end;
			unsigned long ix = strtoul(name + 1, &end, 10);
			j = (*end || ix >= cfg->nep) ? cfg->nep : (uint32_t)ix;
		} else {
			for (j = 0; j < cfg->nep; j++)
				if (strcmp(cfg->ep[j].name, name) == 0)
					break;
		}
		if (j == cfg->nep)
			rc = p_fail(&p, p.fault_lines[i], "fault names an unknown endpoint", name);
		else
			cfg->fault[i].ep = j;
	}
	if (rc == 0 && cfg->nep == 0)
		rc = p_fail(&p, line, "no [endpoint]", NULL);
	free(p.fault_names);
	free(p.fault_lines);
	return rc;
}
