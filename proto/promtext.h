/* promtext.h - parser of the Prometheus text exposition format, and the engine load it carries.
 *
 * Inference engines publish their scheduler state on /metrics in the
 * Prometheus text format (version 0.0.4). warmlane reads one body as
 * the engine sent it and takes the requests running and waiting, and the
 * KV-cache usage where the engine publishes one. No I/O, no allocation,
 * no globals; work is linear in the length; results are views into the
 * caller's buffer.
 *
 * Lines (LF-separated; a CR before the LF is ignored):
 * - empty or blank: ignored;
 * - first non-blank byte '#': a comment (HELP, TYPE or other), ignored;
 * - else a sample: NAME [ "{" LABELS "}" ] VALUE [ TIMESTAMP ], tokens
 *   separated by blanks (spaces, tabs). NAME is [a-zA-Z_:][a-zA-Z0-9_:]*;
 *   LABELS is `lname="value"` pairs separated by ',' (a trailing ',' is
 *   allowed), lname [a-zA-Z_][a-zA-Z0-9_]*, the value a quoted string in
 *   which only \\, \" and \n are escapes; VALUE is a decimal float
 *   (digits, '.', an exponent, a sign), NaN, +Inf, -Inf or Inf;
 *   TIMESTAMP an optional-signed integer. Anything else is malformed.
 */
#ifndef WARMLANE_PROMTEXT_H
#define WARMLANE_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>

/* Return codes. */
enum prom_status {
	PROM_OK = 0,
	PROM_EBAD = -1,     /* a malformed line (err_line, err_col) */
	PROM_EVALUE = -2,   /* a load metric with a value that is no count
			     * (negative, NaN, infinite, over PROM_COUNT_MAX)
			     * or a KV usage outside [0, 1] (err_line) */
	PROM_ENOLOAD = -3,  /* well formed, but no engine's running and
			     * waiting metrics were both there */
};

/* The largest running or waiting count believed: more is a broken
 * exporter, not a load. */
#define PROM_COUNT_MAX 1e7

/* One sample line: views into the line. */
struct prom_sample {
	const char *name;
	size_t name_len;
	const char *labels;    /* between the braces, unparsed; NULL, 0: none */
	size_t labels_len;
	double value;
};

/* Parses one line p[0..len) without its LF (a trailing CR is ignored).
 * Returns 1 with *out set for a sample, 0 for a blank line or a comment,
 * PROM_EBAD for anything else, with *err_col (1-based) at the first byte
 * that does not fit. */
int prom_line(const char *p, size_t len, struct prom_sample *out,
	      size_t *err_col);

/* Engines whose load metrics are known (their published names). */
enum prom_engine {
	PROM_ENGINE_NONE = 0,
	PROM_ENGINE_VLLM,     /* vllm:num_requests_running / _waiting,
			       * vllm:kv_cache_usage_perc (older:
			       * vllm:gpu_cache_usage_perc) */
	PROM_ENGINE_SGLANG,   /* sglang:num_running_reqs / num_queue_reqs,
			       * sglang:token_usage */
	PROM_ENGINE_LLAMACPP, /* llamacpp:requests_processing / _deferred;
			       * no KV gauge */
	PROM_ENGINE_COUNT,
};

/* What one body says. */
struct prom_load {
	enum prom_engine engine;  /* the one whose counts were taken */
	double running;           /* summed over label sets (model, rank) */
	double waiting;
	double kv_usage;          /* 0..1, the highest of its lines; -1: none */
	uint32_t lines;           /* lines read */
	uint32_t samples;         /* sample lines among them */
	uint32_t err_line;        /* PROM_EBAD, PROM_EVALUE: 1-based */
	uint32_t err_col;         /* PROM_EBAD: 1-based */
};

/* Reads a whole exposition body p[0..len) into *out. When several known
 * engines' metrics are present, the first complete one in the order of
 * enum prom_engine is taken. Returns PROM_OK (out->engine set; running
 * and waiting as published: the caller rounds), PROM_EBAD, PROM_EVALUE or PROM_ENOLOAD.
 * A body cut inside its last line (no final LF) is read as it is: that
 * line must still be well formed. */
int prom_load_parse(const char *p, size_t len, struct prom_load *out);

/* "vllm", "sglang", "llamacpp" or "none". */
const char *prom_engine_name(enum prom_engine e);

/* "ok", "malformed", "bad_value", "no_load" or "unknown". */
const char *prom_status_name(int status);

#endif
