/* config_errs.c - the configuration's problems: collected with their positions, written in file order. */
#include "config_errs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_errs_init(struct config_errs *e, char *buf, size_t cap)
{
	*e = (struct config_errs){ .buf = buf, .cap = cap };
	if (cap > 0)
		buf[0] = '\0';
}

void config_errs_vadd_at(struct config_errs *e, unsigned line,
			 unsigned col, const char *fmt, va_list ap)
{
	e->count++;
	if (e->cap == 0)
		return;
	char line_txt[512];
	int n = vsnprintf(line_txt, sizeof(line_txt), fmt, ap);
	if (n < 0)
		return;
	/* Values from the file are quoted into messages: one problem must
	 * stay one line whatever they hold. */
	for (char *p = line_txt; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (e->n == e->alloc) {
		size_t na = e->alloc == 0 ? 16 : e->alloc * 2;
		struct config_err *nv = NULL;
		if (e->alloc < CONFIG_ERRS_KEEP)
			nv = realloc(e->v, na * sizeof(*nv));
		if (nv == NULL) {
			e->lost = true;
			return;
		}
		e->v = nv;
		e->alloc = na;
	}
	char *t = strdup(line_txt);
	if (t == NULL) {
		e->lost = true;
		return;
	}
	e->v[e->n] = (struct config_err){ line, col, (unsigned)e->n, t };
	e->n++;
}

void config_errs_add_at(struct config_errs *e, unsigned line,
			unsigned col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	config_errs_vadd_at(e, line, col, fmt, ap);
	va_end(ap);
}

void config_errs_add(struct config_errs *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	config_errs_vadd_at(e, 0, 0, fmt, ap);
	va_end(ap);
}

void config_errs_clear(struct config_errs *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->v[i].text);
	e->n = 0;
	e->count = 0;
	e->lost = false;
}

static int errs_cmp(const void *a, const void *b)
{
	const struct config_err *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void config_errs_flush(struct config_errs *e)
{
	static const char more[] = "(more errors not shown)\n";
	size_t len = 0;
	bool full = false;
	if (e->n > 1)
		qsort(e->v, e->n, sizeof(*e->v), errs_cmp);
	for (size_t i = 0; i < e->n; i++) {
		size_t ln = strlen(e->v[i].text);
		if (!full && ln + 1 + sizeof(more) <= e->cap - len) {
			memcpy(e->buf + len, e->v[i].text, ln);
			len += ln;
			e->buf[len++] = '\n';
			e->buf[len] = '\0';
		} else {
			full = true;
		}
		free(e->v[i].text);
	}
	if ((full || e->lost) && e->cap > 0 && sizeof(more) <= e->cap - len)
		memcpy(e->buf + len, more, sizeof(more));
	free(e->v);
	e->v = NULL;
	e->n = e->alloc = 0;
}
