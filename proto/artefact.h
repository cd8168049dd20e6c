/* artefact.h - an inference endpoint's own description (OpenAI /v1/models, llama.cpp /props) reduced to a fingerprint of the artefact it serves.
 *
 * Two endpoints answering to one model name may serve different weights,
 * precisions or builds. What each says of itself is JSON: OpenAI-compatible
 * servers list their models at /v1/models (`id`, vLLM's `root` and
 * `max_model_len`, llama.cpp's `meta` with `n_params`, `size`, `n_vocab`,
 * `n_ctx_train`...); llama.cpp's /props has `model_path`, `build_info` and
 * the context `n_ctx`. The fingerprint is a 64-bit FNV-1a hash of the
 * scalar values of those keys (art_keys), in document order, each with
 * its key: equal descriptions give equal fingerprints, whatever else the
 * document holds (timestamps such as `created`, sampling defaults, chat
 * templates are not read).
 *
 * The document must be well formed JSON (RFC 8259) up to ART_DEPTH_MAX
 * nested containers; strings are hashed as their raw bytes between the
 * quotes (escapes as sent). No I/O, no allocation, no globals; linear in
 * the length.
 */
#ifndef WARMLANE_ARTEFACT_H
#define WARMLANE_ARTEFACT_H

#include <stddef.h>
#include <stdint.h>

#define ART_DEPTH_MAX 64

enum art_status {
	ART_OK = 0,
	ART_EJSON = -1,   /* not well formed JSON: err_off */
	ART_EDEPTH = -2,  /* nested deeper than ART_DEPTH_MAX: err_off */
	ART_ENONE = -3,   /* well formed, but none of art_keys with a scalar */
};

struct art_info {
	uint64_t fingerprint; /* ART_OK: never 0 (0 is "unknown") */
	uint32_t fields;      /* key/value pairs hashed */
	size_t err_off;       /* ART_EJSON, ART_EDEPTH: byte offset of the fault */
};

/* The keys read, NULL-terminated. */
extern const char *const art_keys[];

/* Fingerprints the JSON document p[0..len). Returns ART_OK, ART_EJSON,
 * ART_EDEPTH or ART_ENONE. */
int art_fingerprint(const char *p, size_t len, struct art_info *out);

/* "ok", "malformed", "too_deep", "no_fields" or "unknown". */
const char *art_status_name(int status);

#endif
