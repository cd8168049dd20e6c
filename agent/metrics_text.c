/* metrics_text.c - the Prometheus text format 0.0.4 written into a growable buffer: no I/O. */
#include "metrics_text.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void metrics_text_finish(struct metrics_text *t)
{
	free(t->p);
	*t = (struct metrics_text){ 0 };
}

/* Room for more bytes and the NUL after them. */
static bool text_reserve(struct metrics_text *t, size_t more)
{
	if (t->oom)
		return false;
	if (more < t->cap - t->len)
		return true;
	size_t cap = t->cap > 0 ? t->cap : 4096;
	while (more >= cap - t->len) {
		if (cap > SIZE_MAX / 2) {
			t->oom = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(t->p, cap);
	if (p == NULL) {
		t->oom = true;
		return false;
	}
	t->p = p;
	t->cap = cap;
	return true;
}

void metrics_text_put(struct metrics_text *t, const char *s, size_t n)
{
	if (!text_reserve(t, n))
		return;
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void metrics_text_puts(struct metrics_text *t, const char *s)
{
	metrics_text_put(t, s, strlen(s));
}

void metrics_text_printf(struct metrics_text *t, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		t->oom = true;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		metrics_text_put(t, small, (size_t)n);
		return;
	}
	/* A long help line: formatted again, in place. */
	if (!text_reserve(t, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(t->p + t->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

void metrics_text_label_value(struct metrics_text *t, const char *v)
{
	metrics_text_put(t, "\"", 1);
	for (const char *s = v; *s != '\0';) {
		size_t run = strcspn(s, "\\\"\n");
		metrics_text_put(t, s, run);
		s += run;
		if (*s == '\0')
			break;
		metrics_text_put(t, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\",
				 2);
		s++;
	}
	metrics_text_put(t, "\"", 1);
}

void metrics_text_family(struct metrics_text *t, const char *name,
			 const char *type, const char *help)
{
	metrics_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
			    type);
}

void metrics_text_u64(struct metrics_text *t, const char *name, uint64_t v)
{
	metrics_text_printf(t, "%s %" PRIu64 "\n", name, v);
}

void metrics_text_u64_label(struct metrics_text *t, const char *name,
			    const char *label, const char *value, uint64_t v)
{
	metrics_text_printf(t, "%s{%s=", name, label);
	metrics_text_label_value(t, value);
	metrics_text_printf(t, "} %" PRIu64 "\n", v);
}

void metrics_text_histogram_end(struct metrics_text *t, const char *name,
				uint64_t inf, double sum, uint64_t count)
{
	metrics_text_printf(t,
			    "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n"
			    "%s_sum %.9g\n"
			    "%s_count %" PRIu64 "\n",
			    name, inf, name, sum, name, count);
}
