/* artefact.c - an inference endpoint's own description (OpenAI /v1/models, llama.cpp /props) reduced to a fingerprint of the artefact it serves. */
#include "artefact.h"

#include <stdbool.h>
#include <string.h>

const char *const art_keys[] = {
	"id", "root", "max_model_len",                 /* OpenAI, vLLM */
	"model_path", "build_info", "n_ctx",           /* llama.cpp /props */
	"n_ctx_train", "n_params", "size", "n_vocab",  /* llama.cpp meta */
	"n_embd", "ftype", "model_ftype",
	NULL,
};

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= FNV_PRIME;
	}
	return h;
}

static bool key_selected(const char *k, size_t n)
{
	for (size_t i = 0; art_keys[i] != NULL; i++)
		if (strlen(art_keys[i]) == n && memcmp(art_keys[i], k, n) == 0)
			return true;
	return false;
}

static size_t skip_ws(const char *p, size_t len, size_t i)
{
	while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return i;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at p[*i] == '"': *i moves past its closing quote. false at the
 * fault (*i there). */
static bool scan_string(const char *p, size_t len, size_t *i)
{
	size_t k = *i + 1;
	for (;;) {
		if (k >= len) {
			*i = k;
			return false;
		}
		unsigned char c = (unsigned char)p[k];
		if (c == '"')
			break;
		if (c < 0x20) {
			*i = k;
			return false;
		}
		if (c == '\\') {
			if (len - k < 2) {
				*i = k;
				return false;
			}
			char e = p[k + 1];
			if (e == 'u') {
				if (len - k < 6 || !is_hex(p[k + 2]) || !is_hex(p[k + 3]) ||
				    !is_hex(p[k + 4]) || !is_hex(p[k + 5])) {
					*i = k;
					return false;
				}
				k += 6;
				continue;
			}
			if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
				*i = k;
				return false;
			}
			k += 2;
			continue;
		}
		k++;
	}
	*i = k + 1;
	return true;
}

static size_t digits(const char *p, size_t len, size_t i)
{
	while (i < len && p[i] >= '0' && p[i] <= '9')
		i++;
	return i;
}

/* A number at p[*i]: RFC 8259's grammar. */
static bool scan_number(const char *p, size_t len, size_t *i)
{
	size_t k = *i;
	if (k < len && p[k] == '-')
		k++;
	if (k < len && p[k] == '0') {
		k++;
	} else {
		size_t d = digits(p, len, k);
		if (d == k) {
			*i = k;
			return false;
		}
		k = d;
	}
	if (k < len && p[k] == '.') {
		size_t d = digits(p, len, k + 1);
		if (d == k + 1) {
			*i = k + 1;
			return false;
		}
		k = d;
	}
	if (k < len && (p[k] == 'e' || p[k] == 'E')) {
		k++;
		if (k < len && (p[k] == '+' || p[k] == '-'))
			k++;
		size_t d = digits(p, len, k);
		if (d == k) {
			*i = k;
			return false;
		}
		k = d;
	}
	*i = k;
	return true;
}

static bool scan_literal(const char *p, size_t len, size_t *i)
{
	static const char *const lits[] = { "true", "false", "null" };
	for (int k = 0; k < 3; k++) {
		size_t n = strlen(lits[k]);
		if (len - *i >= n && memcmp(p + *i, lits[k], n) == 0) {
			*i += n;
			return true;
		}
	}
	return false;
}

enum art_state {
	ST_VALUE,       /* a value must come */
	ST_FIRST_VALUE, /* a value or ']' (just after '[') */
	ST_KEY,         /* a key must come (after ',') */
	ST_FIRST_KEY,   /* a key or '}' (just after '{') */
	ST_COLON,
	ST_AFTER,       /* ',' or the container's end, or the document's end */
};

int art_fingerprint(const char *p, size_t len, struct art_info *out)
{
	*out = (struct art_info){ 0 };
	uint64_t h = FNV_OFFSET;
	uint64_t objects = 0;   /* bit d: container at depth d+1 is an object */
	unsigned depth = 0;
	enum art_state st = ST_VALUE;
	const char *key = NULL; /* the pending key of a selected member */
	size_t key_len = 0;
	size_t i = 0;
	for (;;) {
		i = skip_ws(p, len, i);
		if (st == ST_AFTER && depth == 0) {
			if (i != len)
				goto bad;
			break;
		}
		if (i >= len)
			goto bad;
		char c = p[i];
		bool in_obj = depth > 0 && ((objects >> (depth - 1)) & 1);
		switch (st) {
		case ST_FIRST_VALUE:
			if (c == ']') {
				depth--;
				i++;
				st = ST_AFTER;
				continue;
			}
			/* fall through */
		case ST_VALUE: {
			const char *sel = key;
			size_t sel_len = key_len;
			key = NULL;
			if (c == '{' || c == '[') {
				if (depth == ART_DEPTH_MAX) {
					out->err_off = i;
					out->fields = 0;
					return ART_EDEPTH;
				}
				if (c == '{')
					objects |= 1ull << depth;
				else
					objects &= ~(1ull << depth);
				depth++;
				i++;
				st = c == '{' ? ST_FIRST_KEY : ST_FIRST_VALUE;
				continue;
			}
			size_t s = i;
			bool ok = c == '"' ? scan_string(p, len, &i) :
				  (c == '-' || (c >= '0' && c <= '9')) ? scan_number(p, len, &i) :
				  scan_literal(p, len, &i);
			if (!ok)
				goto bad;
			if (sel != NULL) {
				/* Strings without their quotes: "5" and 5 differ
				 * by the kind byte. */
				const char *v = c == '"' ? p + s + 1 : p + s;
				size_t vn = c == '"' ? i - s - 2 : i - s;
				char kind = c == '"' ? 's' : 'n';
				h = fnv(h, sel, sel_len);
				h = fnv(h, "\0", 1);
				h = fnv(h, &kind, 1);
				h = fnv(h, v, vn);
				h = fnv(h, "\0", 1);
				out->fields++;
			}
			st = ST_AFTER;
			continue;
		}
		case ST_FIRST_KEY:
			if (c == '}') {
				depth--;
				i++;
				st = ST_AFTER;
				continue;
			}
			/* fall through */
		case ST_KEY: {
			if (c != '"')
				goto bad;
			size_t s = i;
			if (!scan_string(p, len, &i))
				goto bad;
			if (key_selected(p + s + 1, i - s - 2)) {
				key = p + s + 1;
				key_len = i - s - 2;
			}
			st = ST_COLON;
			continue;
		}
		case ST_COLON:
			if (c != ':')
				goto bad;
			i++;
			st = ST_VALUE;
			continue;
		case ST_AFTER:
			if (c == ',') {
				i++;
				st = in_obj ? ST_KEY : ST_VALUE;
				continue;
			}
			if ((c == '}' && in_obj) || (c == ']' && !in_obj)) {
				depth--;
				i++;
				continue;
			}
			goto bad;
		}
	}
	if (out->fields == 0)
		return ART_ENONE;
	out->fingerprint = h != 0 ? h : 1;
	return ART_OK;
bad:
	out->err_off = i;
	out->fields = 0;
	return ART_EJSON;
}

const char *art_status_name(int status)
{
	switch (status) {
	case ART_OK: return "ok";
	case ART_EJSON: return "malformed";
	case ART_EDEPTH: return "too_deep";
	case ART_ENONE: return "no_fields";
	default: return "unknown";
	}
}
