/* config_yaml.c - the configuration's one bounded libyaml pass: fills the schema's raw structures, notes positions. */
#include "config_yaml.h"

#include <cyaml/cyaml.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* One pass of libyaml's event parser fills the raw structures the schema
 * describes and reports every problem it meets, each at its own line and
 * column: an unknown key (with the nearest known one), a duplicate key, a
 * value of the wrong kind, a list too long. A wrong value is skipped and
 * the pass goes on, so one run reports them all. Only a YAML syntax error
 * stops it (libyaml cannot go past one), and so do the bounds that keep
 * any file cheap: nesting deeper than CONFIG_DEPTH_MAX (libyaml and the
 * walk cost more per level at depth; our schema needs 4), a second
 * document, too many events. Aliases are refused where they appear: the
 * schema needs none, and expanding them is how a small file becomes a
 * huge one. libyaml reads ahead at most about a simple key's 1024
 * characters, so it never sees much past the point where the pass stops. */
#define CONFIG_DEPTH_MAX  16u
#define CONFIG_EVENTS_MAX (1u << 20)
#define CONFIG_FIELDS_MAX 64u

struct cfg_load {
	const char *name;
	struct config_errs *errs;
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have_ev;
	bool fatal; /* parsing stopped: nothing more comes */
	bool oom;
	unsigned depth, docs;
	unsigned long events;
	char path[CONFIG_PATH_MAX];
	size_t plen;
	struct config_pos_table *at; /* where each value starts */
};

static unsigned cl_line(const yaml_mark_t *m)
{
	return (unsigned)m->line + 1;
}

static unsigned cl_col(const yaml_mark_t *m)
{
	return (unsigned)m->column + 1;
}

/* An error at the current event's start, prefixed with the current path. */
static void cl_err(struct cfg_load *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void cl_err(struct cfg_load *l, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const yaml_mark_t *m = &l->ev.start_mark;
	config_errs_add_at(l->errs, cl_line(m), cl_col(m), "%s:%u:%u: %s%s%s",
			   l->name, cl_line(m), cl_col(m), l->path,
			   l->plen > 0 ? ": " : "", msg);
}

/* Notes where the current event's value for the current path starts. */
static void cl_note(struct cfg_load *l, bool bad)
{
	if (config_pos_add(l->at, l->path, l->plen, cl_line(&l->ev.start_mark),
			   cl_col(&l->ev.start_mark), bad) < 0)
		l->oom = true;
}

/* Appends ".key" (or "key" at the top) or "[i]" to the path; returns the
 * length to restore. A path too long is cut: only messages read it. */
static size_t cl_push(struct cfg_load *l, const char *key, size_t klen,
		      long idx)
{
	size_t old = l->plen;
	size_t room = sizeof(l->path) - l->plen;
	int n;
	if (idx >= 0)
		n = snprintf(l->path + l->plen, room, "[%ld]", idx);
	else
		n = snprintf(l->path + l->plen, room, "%s%.*s",
			     l->plen > 0 ? "." : "", (int)klen, key);
	if (n > 0)
		l->plen += (size_t)n < room ? (size_t)n : room - 1;
	return old;
}

static void cl_pop(struct cfg_load *l, size_t old)
{
	l->plen = old;
	l->path[old] = '\0';
}

/* The next event in l->ev. False once parsing has stopped (syntax error,
 * a bound, out of memory): the caller unwinds. */
static bool cl_next(struct cfg_load *l)
{
	if (l->have_ev) {
		yaml_event_delete(&l->ev);
		l->have_ev = false;
	}
	if (l->fatal)
		return false;
	if (!yaml_parser_parse(&l->parser, &l->ev)) {
		yaml_parser_t *p = &l->parser;
		unsigned line = (unsigned)p->problem_mark.line + 1;
		unsigned col = (unsigned)p->problem_mark.column + 1;
		const char *problem = p->problem != NULL ? p->problem
							 : "syntax error";
		/* What came before is dropped: a syntax error makes the
		 * events before it doubtful (a line indented one space too
		 * far turns into part of the previous value). */
		config_errs_clear(l->errs);
		if (p->error == YAML_MEMORY_ERROR) {
			l->oom = true;
		} else if (p->context != NULL) {
			config_errs_add_at(l->errs, line, col,
				"%s:%u:%u: %s (%s at line %lu; nothing after a YAML syntax error is checked)",
				l->name, line, col, problem, p->context,
				(unsigned long)p->context_mark.line + 1);
		} else {
			config_errs_add_at(l->errs, line, col,
				"%s:%u:%u: %s (nothing after a YAML syntax error is checked)",
				l->name, line, col, problem);
		}
		l->fatal = true;
		return false;
	}
	l->have_ev = true;
	const yaml_mark_t *m = &l->ev.start_mark;
	if (++l->events > CONFIG_EVENTS_MAX) {
		config_errs_add_at(l->errs, cl_line(m), cl_col(m),
			"%s:%u:%u: more than %u YAML nodes, not read further",
			l->name, cl_line(m), cl_col(m), CONFIG_EVENTS_MAX);
		l->fatal = true;
		return false;
	}
	switch (l->ev.type) {
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		if (++l->depth > CONFIG_DEPTH_MAX) {
			config_errs_add_at(l->errs, cl_line(m), cl_col(m),
				"%s:%u:%u: nested deeper than %u levels, not read further",
				l->name, cl_line(m), cl_col(m),
				CONFIG_DEPTH_MAX);
			l->fatal = true;
			return false;
		}
		break;
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		l->depth--;
		break;
	case YAML_DOCUMENT_START_EVENT:
		if (++l->docs > 1) {
			config_errs_add_at(l->errs, cl_line(m), cl_col(m),
				"%s:%u:%u: a second YAML document: the file must hold one",
				l->name, cl_line(m), cl_col(m));
			l->fatal = true;
			return false;
		}
		break;
	case YAML_ALIAS_EVENT:
		cl_err(l, "aliases (*%s) are not supported",
		       (const char *)l->ev.data.alias.anchor);
		break;
	default:
		break;
	}
	return true;
}

/* Consumes the value that starts at l->ev. */
static void cl_skip(struct cfg_load *l)
{
	yaml_event_type_t t = l->ev.type;
	if (t != YAML_MAPPING_START_EVENT && t != YAML_SEQUENCE_START_EVENT)
		return;
	unsigned nest = 1;
	while (nest > 0 && cl_next(l)) {
		t = l->ev.type;
		if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT)
			nest++;
		else if (t == YAML_MAPPING_END_EVENT ||
			 t == YAML_SEQUENCE_END_EVENT)
			nest--;
	}
}

static const char *cl_kind(enum cyaml_type t)
{
	switch (t) {
	case CYAML_STRING: return "a string";
	case CYAML_INT:
	case CYAML_UINT: return "an integer";
	case CYAML_FLOAT: return "a number";
	case CYAML_BOOL: return "a boolean";
	case CYAML_MAPPING: return "a mapping";
	case CYAML_SEQUENCE: return "a list";
	default: return "a value";
	}
}

static const char *cl_found(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_MAPPING_START_EVENT: return "a mapping";
	case YAML_SEQUENCE_START_EVENT: return "a list";
	case YAML_ALIAS_EVENT: return "an alias";
	default: return "a scalar value";
	}
}

/* A plain empty, ~ or null scalar: an absent mapping or list. */
static bool cl_is_null(const yaml_event_t *ev)
{
	if (ev->type != YAML_SCALAR_EVENT ||
	    ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)ev->data.scalar.value;
	return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	       strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* Optimal string alignment distance (edits and adjacent swaps) between
 * short strings; anything longer than 63 bytes is simply far. */
static unsigned cl_distance(const char *a, size_t na, const char *b)
{
	size_t nb = strlen(b);
	if (na > 63 || nb > 63)
		return 99;
	unsigned d[64][64];
	for (size_t i = 0; i <= na; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= nb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= na; i++) {
		for (size_t j = 1; j <= nb; j++) {
			unsigned cost = a[i - 1] != b[j - 1];
			unsigned v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[na][nb];
}

/* The known key nearest to an unknown one, when it is near enough to be
 * a typo (1 edit for short keys, up to 3 for long ones), else NULL. */
static const char *cl_suggest(const cyaml_schema_field_t *fields,
			      const char *key, size_t klen)
{
	unsigned limit = klen <= 4 ? 1 : klen <= 8 ? 2 : 3;
	unsigned best = limit + 1;
	const char *pick = NULL;
	for (const cyaml_schema_field_t *f = fields; f->key != NULL; f++) {
		unsigned d = cl_distance(key, klen, f->key);
		if (d < best) {
			best = d;
			pick = f->key;
		}
	}
	return pick;
}

static void cl_value(struct cfg_load *l, const cyaml_schema_value_t *sv,
		     void *dst, void *count_dst, uint8_t count_size);

/* Stores a scalar of type sv (the event is a scalar) at dst. */
static void cl_scalar(struct cfg_load *l, const cyaml_schema_value_t *sv,
		      void *dst)
{
	const char *v = (const char *)l->ev.data.scalar.value;
	size_t vlen = l->ev.data.scalar.length;
	bool ptr = (sv->flags & CYAML_FLAG_POINTER) != 0;
	union {
		double d;
		float f;
		int64_t i;
		uint64_t u;
		bool b;
	} num = { 0 };
	size_t size = sv->data_size;

	if (sv->type == CYAML_STRING) {
		if (!ptr || memchr(v, '\0', vlen) != NULL) {
			cl_err(l, ptr ? "a string must not contain NUL"
				      : "unsupported schema type (a bug)");
			cl_note(l, true);
			return;
		}
		char *s = strdup(v);
		if (s == NULL) {
			l->oom = true;
			return;
		}
		*(char **)dst = s;
		cl_note(l, false);
		return;
	}

	char *end = NULL;
	bool ok = vlen > 0;
	switch (sv->type) {
	case CYAML_FLOAT:
		errno = 0;
		num.d = strtod(v, &end);
		ok = ok && end == v + vlen && errno != ERANGE;
		if (size == sizeof(float))
			num.f = (float)num.d;
		else
			ok = ok && size == sizeof(double);
		break;
	case CYAML_INT:
		errno = 0;
		num.i = strtoll(v, &end, 0);
		ok = ok && end == v + vlen && errno != ERANGE &&
		     size == sizeof(int64_t);
		break;
	case CYAML_UINT:
		errno = 0;
		num.u = strtoull(v, &end, 0);
		ok = ok && v[0] != '-' && end == v + vlen && errno != ERANGE &&
		     size == sizeof(uint64_t);
		break;
	case CYAML_BOOL:
		if (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
		    strcasecmp(v, "on") == 0)
			num.b = true;
		else if (!(strcasecmp(v, "false") == 0 ||
			   strcasecmp(v, "no") == 0 ||
			   strcasecmp(v, "off") == 0))
			ok = false;
		ok = ok && size == sizeof(bool);
		break;
	default:
		cl_err(l, "unsupported schema type (a bug)");
		cl_note(l, true);
		return;
	}
	if (!ok) {
		cl_err(l, "\"%.80s\" is not %s", v, cl_kind(sv->type));
		cl_note(l, true);
		return;
	}
	if (ptr) {
		void *p = malloc(size);
		if (p == NULL) {
			l->oom = true;
			return;
		}
		memcpy(p, &num, size);
		*(void **)dst = p;
	} else {
		memcpy(dst, &num, size);
	}
	cl_note(l, false);
}

/* Fills the mapping that starts at l->ev into base, field by field. */
static void cl_mapping(struct cfg_load *l, const cyaml_schema_field_t *fields,
		       uint8_t *base)
{
	bool seen[CONFIG_FIELDS_MAX] = { false };
	while (cl_next(l) && l->ev.type != YAML_MAPPING_END_EVENT) {
		if (l->ev.type != YAML_SCALAR_EVENT) {
			if (l->ev.type != YAML_ALIAS_EVENT)
				cl_err(l, "a key must be a plain name, found %s",
				       cl_found(&l->ev));
			cl_skip(l);
			if (cl_next(l))
				cl_skip(l);
			continue;
		}
		const char *key = (const char *)l->ev.data.scalar.value;
		size_t klen = l->ev.data.scalar.length;
		size_t k = 0;
		const cyaml_schema_field_t *f = fields;
		for (; f->key != NULL; f++, k++)
			if (strlen(f->key) == klen && memcmp(f->key, key, klen) == 0)
				break;
		if (f->key == NULL) {
			const char *near = cl_suggest(fields, key, klen);
			cl_err(l, "unknown key \"%.80s\"%s%s%s", key,
			       near != NULL ? " (did you mean \"" : "",
			       near != NULL ? near : "",
			       near != NULL ? "\"?)" : "");
		} else if (k >= CONFIG_FIELDS_MAX) {
			cl_err(l, "too many fields in the schema (a bug)");
		} else if (seen[k]) {
			size_t old = cl_push(l, key, klen, -1);
			cl_err(l, "duplicate key \"%s\"", f->key);
			cl_pop(l, old);
		} else {
			seen[k] = true;
			size_t old = cl_push(l, key, klen, -1);
			if (cl_next(l))
				cl_value(l, &f->value, base + f->data_offset,
					 base + f->count_offset, f->count_size);
			cl_pop(l, old);
			continue;
		}
		if (cl_next(l))
			cl_skip(l);
	}
	if (l->fatal)
		return;
	for (size_t i = 0; fields[i].key != NULL && i < CONFIG_FIELDS_MAX; i++)
		if (!seen[i] && !(fields[i].value.flags & CYAML_FLAG_OPTIONAL))
			cl_err(l, "missing required key \"%s\"", fields[i].key);
}

/* Fills the list that starts at l->ev: an array of entries at *dst, its
 * length in the count_size bytes at count_dst. */
static void cl_sequence(struct cfg_load *l, const cyaml_schema_value_t *sv,
			void *dst, void *count_dst, uint8_t count_size)
{
	const cyaml_schema_value_t *ent = sv->sequence.entry;
	size_t esize = (ent->flags & CYAML_FLAG_POINTER) ? sizeof(void *)
							 : ent->data_size;
	uint8_t *arr = NULL;
	uint64_t n = 0, cap = 0;
	bool reported = false;
	while (cl_next(l) && l->ev.type != YAML_SEQUENCE_END_EVENT) {
		if (n >= sv->sequence.max) {
			if (!reported)
				cl_err(l, "more than %u entries", sv->sequence.max);
			reported = true;
			cl_skip(l);
			continue;
		}
		if (n == cap) {
			uint64_t nc = cap == 0 ? 4 : cap * 2;
			uint8_t *na = realloc(arr, (size_t)nc * esize);
			if (na == NULL) {
				l->oom = true;
				cl_skip(l);
				break;
			}
			arr = na;
			cap = nc;
		}
		/* Counted before it is read: an entry cut short (a bound
		 * crossed inside it) is still freed with the others. */
		uint8_t *e = arr + n * esize;
		memset(e, 0, esize);
		size_t old = cl_push(l, NULL, 0, (long)n);
		n++;
		cl_value(l, ent, e, NULL, 0);
		cl_pop(l, old);
	}
	if (n < sv->sequence.min && !l->fatal) {
		cl_err(l, "at least %u entries needed", sv->sequence.min);
		cl_note(l, true);
	}
	*(void **)dst = arr;
	/* libcyaml's counts are unsigned of count_size bytes. */
	if (count_size == sizeof(uint32_t)) {
		uint32_t c = (uint32_t)n;
		memcpy(count_dst, &c, sizeof(c));
	} else if (count_size == sizeof(uint64_t)) {
		memcpy(count_dst, &n, sizeof(n));
	} else if (count_size == sizeof(uint16_t)) {
		uint16_t c = (uint16_t)n;
		memcpy(count_dst, &c, sizeof(c));
	} else if (count_size == sizeof(uint8_t)) {
		uint8_t c = (uint8_t)n;
		memcpy(count_dst, &c, sizeof(c));
	}
}

/* Reads the value that starts at l->ev as sv into dst (the pointer's
 * place for pointer types). */
static void cl_value(struct cfg_load *l, const cyaml_schema_value_t *sv,
		     void *dst, void *count_dst, uint8_t count_size)
{
	yaml_event_type_t t = l->ev.type;
	if (t == YAML_ALIAS_EVENT) { /* reported by cl_next */
		cl_note(l, true);
		return;
	}
	if (sv->type == CYAML_MAPPING || sv->type == CYAML_SEQUENCE) {
		yaml_event_type_t want = sv->type == CYAML_MAPPING
						 ? YAML_MAPPING_START_EVENT
						 : YAML_SEQUENCE_START_EVENT;
		if (t != want) {
			if ((sv->flags & CYAML_FLAG_POINTER_NULL) && cl_is_null(&l->ev)) {
				cl_note(l, false);
				return;
			}
			cl_err(l, "expected %s, found %s", cl_kind(sv->type),
			       cl_found(&l->ev));
			cl_note(l, true);
			cl_skip(l);
			return;
		}
		cl_note(l, false);
		if (sv->type == CYAML_SEQUENCE) {
			cl_sequence(l, sv, dst, count_dst, count_size);
			return;
		}
		uint8_t *base = dst;
		if (sv->flags & CYAML_FLAG_POINTER) {
			base = calloc(1, sv->data_size);
			if (base == NULL) {
				l->oom = true;
				cl_skip(l);
				return;
			}
			*(void **)dst = base;
		}
		cl_mapping(l, sv->mapping.fields, base);
		return;
	}
	if (t != YAML_SCALAR_EVENT) {
		cl_err(l, "expected %s, found %s", cl_kind(sv->type),
		       cl_found(&l->ev));
		cl_note(l, true);
		cl_skip(l);
		return;
	}
	cl_scalar(l, sv, dst);
}

int config_yaml_read(const char *name, const char *data, size_t len,
		     struct config_errs *errs, struct config_pos_table *at,
		     struct raw_config **raw, bool *stopped)
{
	struct cfg_load ld = { .name = name, .errs = errs, .at = at };
	struct cfg_load *l = &ld;
	*raw = NULL;
	*stopped = false;
	if (!yaml_parser_initialize(&l->parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&l->parser, (const unsigned char *)data,
				     len);
	bool root = false;
	while (cl_next(l) && l->ev.type != YAML_STREAM_END_EVENT) {
		yaml_event_type_t t = l->ev.type;
		if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT ||
		    t == YAML_DOCUMENT_END_EVENT)
			continue;
		if (root) { /* libyaml gives one root per document */
			cl_skip(l);
			continue;
		}
		root = true;
		if (!cl_is_null(&l->ev)) /* a bare "---": all defaults */
			cl_value(l, &config_schema, raw, NULL, 0);
	}
	if (l->have_ev)
		yaml_event_delete(&l->ev);
	l->have_ev = false;
	yaml_parser_delete(&l->parser);
	*stopped = l->fatal;
	return l->oom ? -ENOMEM : 0;
}
