/* promtext.c - parser of the Prometheus text exposition format, and the engine load it carries. */
#include "promtext.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A float token longer than this is no float any exporter writes. */
#define PROM_NUM_MAX 64

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_alpha_(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool name_is(const char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && memcmp(p, lit, n) == 0;
}

/* Parses the float token t[0..n): decimal or one of Prometheus' words.
 * strtod alone would take hex, "infinity" and "nan(...)": the bytes are
 * checked first, then it reads a NUL-terminated copy (no read past n). */
static bool parse_float(const char *t, size_t n, double *out)
{
	if (name_is(t, n, "NaN")) {
		*out = NAN;
		return true;
	}
	if (name_is(t, n, "+Inf") || name_is(t, n, "Inf")) {
		*out = INFINITY;
		return true;
	}
	if (name_is(t, n, "-Inf")) {
		*out = -INFINITY;
		return true;
	}
	if (n == 0 || n > PROM_NUM_MAX)
		return false;
	bool digit = false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		if (is_digit(c))
			digit = true;
		else if (c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-')
			return false;
	}
	if (!digit)
		return false;
	char buf[PROM_NUM_MAX + 1];
	memcpy(buf, t, n);
	buf[n] = '\0';
	char *end;
	double v = strtod(buf, &end);
	if (end != buf + n)
		return false;
	*out = v;
	return true;
}

/* Skips the labels after '{' at p[i]: returns the index just past the
 * '}' or 0 (with *bad at the fault). */
static size_t skip_labels(const char *p, size_t len, size_t i, size_t *bad)
{
	i++; /* '{' */
	for (;;) {
		while (i < len && is_blank(p[i]))
			i++;
		if (i < len && p[i] == '}')
			return i + 1;
		if (i >= len || !is_alpha_(p[i])) {
			*bad = i;
			return 0;
		}
		while (i < len && (is_alpha_(p[i]) || is_digit(p[i])))
			i++;
		while (i < len && is_blank(p[i]))
			i++;
		if (i >= len || p[i] != '=') {
			*bad = i;
			return 0;
		}
		i++;
		while (i < len && is_blank(p[i]))
			i++;
		if (i >= len || p[i] != '"') {
			*bad = i;
			return 0;
		}
		i++;
		for (;;) {
			if (i >= len) {
				*bad = i;
				return 0;
			}
			char c = p[i];
			if (c == '"')
				break;
			if (c == '\\') {
				if (len - i < 2 || (p[i + 1] != '\\' &&
						    p[i + 1] != '"' && p[i + 1] != 'n')) {
					*bad = i;
					return 0;
				}
				i += 2;
				continue;
			}
			i++;
		}
		i++; /* closing quote */
		while (i < len && is_blank(p[i]))
			i++;
		if (i < len && p[i] == ',') {
			i++;
			continue;
		}
		if (i < len && p[i] == '}')
			return i + 1;
		*bad = i;
		return 0;
	}
}

int prom_line(const char *p, size_t len, struct prom_sample *out,
	      size_t *err_col)
{
	if (len > 0 && p[len - 1] == '\r')
		len--;
	size_t i = 0;
	while (i < len && is_blank(p[i]))
		i++;
	if (i == len || p[i] == '#')
		return 0;
	size_t bad = i;
	if (!is_alpha_(p[i]) && p[i] != ':')
		goto fail;
	size_t ns = i;
	while (i < len && (is_alpha_(p[i]) || is_digit(p[i]) || p[i] == ':'))
		i++;
	*out = (struct prom_sample){ .name = p + ns, .name_len = i - ns };
	if (i < len && p[i] == '{') {
		size_t ls = i + 1;
		size_t e = skip_labels(p, len, i, &bad);
		if (e == 0)
			goto fail;
		out->labels = p + ls;
		out->labels_len = e - 1 - ls;
		i = e;
	}
	bad = i;
	if (i >= len || !is_blank(p[i]))
		goto fail;
	while (i < len && is_blank(p[i]))
		i++;
	size_t vs = i;
	while (i < len && !is_blank(p[i]))
		i++;
	bad = vs;
	if (!parse_float(p + vs, i - vs, &out->value))
		goto fail;
	while (i < len && is_blank(p[i]))
		i++;
	if (i < len) {
		/* A timestamp: milliseconds, an optional sign. */
		size_t ts = i;
		if (p[i] == '-' || p[i] == '+')
			i++;
		size_t d = i;
		while (i < len && is_digit(p[i]))
			i++;
		bad = ts;
		if (i == d)
			goto fail;
		while (i < len && is_blank(p[i]))
			i++;
		bad = i;
		if (i < len)
			goto fail;
	}
	return 1;
fail:
	*err_col = bad + 1;
	return PROM_EBAD;
}

/* Which metric a sample is, per engine. */
enum prom_what {
	PROM_RUNNING,
	PROM_WAITING,
	PROM_KV,
	PROM_WHAT_COUNT,
};

static const struct {
	enum prom_engine engine;
	enum prom_what what;
	const char *name;
} prom_names[] = {
	{ PROM_ENGINE_VLLM, PROM_RUNNING, "vllm:num_requests_running" },
	{ PROM_ENGINE_VLLM, PROM_WAITING, "vllm:num_requests_waiting" },
	{ PROM_ENGINE_VLLM, PROM_KV, "vllm:kv_cache_usage_perc" },
	{ PROM_ENGINE_VLLM, PROM_KV, "vllm:gpu_cache_usage_perc" },
	{ PROM_ENGINE_SGLANG, PROM_RUNNING, "sglang:num_running_reqs" },
	{ PROM_ENGINE_SGLANG, PROM_WAITING, "sglang:num_queue_reqs" },
	{ PROM_ENGINE_SGLANG, PROM_KV, "sglang:token_usage" },
	{ PROM_ENGINE_LLAMACPP, PROM_RUNNING, "llamacpp:requests_processing" },
	{ PROM_ENGINE_LLAMACPP, PROM_WAITING, "llamacpp:requests_deferred" },
};

int prom_load_parse(const char *p, size_t len, struct prom_load *out)
{
	*out = (struct prom_load){ .kv_usage = -1 };
	double sum[PROM_ENGINE_COUNT][PROM_WHAT_COUNT] = { { 0 } };
	unsigned seen[PROM_ENGINE_COUNT] = { 0 };
	size_t i = 0;
	while (i < len) {
		const char *nl = memchr(p + i, '\n', len - i);
		size_t n = nl != NULL ? (size_t)(nl - (p + i)) : len - i;
		out->lines++;
		struct prom_sample s;
		size_t col = 0;
		int r = prom_line(p + i, n, &s, &col);
		if (r < 0) {
			out->err_line = out->lines;
			out->err_col = (uint32_t)col;
			return PROM_EBAD;
		}
		if (r == 1) {
			out->samples++;
			for (size_t k = 0; k < sizeof(prom_names) / sizeof(prom_names[0]); k++) {
				if (!name_is(s.name, s.name_len, prom_names[k].name))
					continue;
				enum prom_engine e = prom_names[k].engine;
				enum prom_what w = prom_names[k].what;
				bool ok = w == PROM_KV ?
					  s.value >= 0 && s.value <= 1 :
					  s.value >= 0 && s.value <= PROM_COUNT_MAX;
				if (!ok) { /* NaN fails both comparisons */
					out->err_line = out->lines;
					return PROM_EVALUE;
				}
				if (w == PROM_KV)
					sum[e][w] = (seen[e] & (1u << w)) && sum[e][w] > s.value ?
						    sum[e][w] : s.value;
				else
					sum[e][w] += s.value;
				seen[e] |= 1u << w;
				break;
			}
		}
		i += n + (nl != NULL ? 1 : 0);
	}
	const unsigned both = (1u << PROM_RUNNING) | (1u << PROM_WAITING);
	for (int e = PROM_ENGINE_VLLM; e < PROM_ENGINE_COUNT; e++) {
		if ((seen[e] & both) != both)
			continue;
		out->engine = (enum prom_engine)e;
		out->running = sum[e][PROM_RUNNING];
		out->waiting = sum[e][PROM_WAITING];
		if (seen[e] & (1u << PROM_KV))
			out->kv_usage = sum[e][PROM_KV];
		/* A sum of many counts may pass the bound each kept. */
		if (out->running + out->waiting > PROM_COUNT_MAX)
			return PROM_EVALUE;
		return PROM_OK;
	}
	return PROM_ENOLOAD;
}

const char *prom_engine_name(enum prom_engine e)
{
	switch (e) {
	case PROM_ENGINE_VLLM: return "vllm";
	case PROM_ENGINE_SGLANG: return "sglang";
	case PROM_ENGINE_LLAMACPP: return "llamacpp";
	default: return "none";
	}
}

const char *prom_status_name(int status)
{
	switch (status) {
	case PROM_OK: return "ok";
	case PROM_EBAD: return "malformed";
	case PROM_EVALUE: return "bad_value";
	case PROM_ENOLOAD: return "no_load";
	default: return "unknown";
	}
}
