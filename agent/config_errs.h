/* config_errs.h - the configuration's problem lines, collected by the loader and the checks (config*.c). */
#ifndef WARMLANE_CONFIG_ERRS_H
#define WARMLANE_CONFIG_ERRS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Problems are collected with their position, then written in file order
 * (the semantic pass visits fields in its own order). At most
 * CONFIG_ERRS_KEEP are kept: past that they are counted, not shown. */
#define CONFIG_ERRS_KEEP 10000u

struct config_err {
	unsigned line, col; /* 1-based; 0: no position, sorts first */
	unsigned seq;       /* arrival order, for equal positions */
	char *text;         /* one line, no newline */
};

struct config_errs {
	char *buf;
	size_t cap;
	struct config_err *v;
	size_t n, alloc;
	unsigned count; /* every problem, shown or not */
	bool lost;      /* one was not kept (memory, CONFIG_ERRS_KEEP) */
};

/* Starts an empty list writing into buf (cap bytes; 0: count only). */
void config_errs_init(struct config_errs *e, char *buf, size_t cap);

/* One problem at line:col (1-based; 0:0, no position: sorts first).
 * Control bytes become '?', so one problem stays one line. Memory
 * trouble loses the line but not the count. */
void config_errs_vadd_at(struct config_errs *e, unsigned line,
			 unsigned col, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
void config_errs_add_at(struct config_errs *e, unsigned line,
			unsigned col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A problem without a position (memory, the file as a whole). */
void config_errs_add(struct config_errs *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Forgets every problem collected so far. */
void config_errs_clear(struct config_errs *e);

/* Writes the kept lines into the caller's buffer in file order; once it
 * is full, or when some were not kept, the last line says so. Frees them;
 * e->count stays. */
void config_errs_flush(struct config_errs *e);

#endif
