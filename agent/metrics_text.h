/* metrics_text.h - the Prometheus text format 0.0.4 written into a growable buffer: no I/O. */
#ifndef WARMLANE_METRICS_TEXT_H
#define WARMLANE_METRICS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable text buffer (one scrape), NUL-terminated once anything was
 * written. A failed allocation sets oom and turns every later append
 * into a no-op, so renderers check once. A zeroed one is empty. */
struct metrics_text {
	char *p;
	size_t len, cap;
	bool oom;
};

/* Frees t's memory and zeroes it. */
void metrics_text_finish(struct metrics_text *t);

/* Appends n bytes of s. */
void metrics_text_put(struct metrics_text *t, const char *s, size_t n);

/* Appends the string s. */
void metrics_text_puts(struct metrics_text *t, const char *s);

/* Appends printf's output, of any length (an encoding error sets oom). */
void metrics_text_printf(struct metrics_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Appends v quoted as a label value: \\, \" and \n escaped, any other
 * byte as it is (names come from configuration and HAProxy). */
void metrics_text_label_value(struct metrics_text *t, const char *v);

/* Appends "# HELP name help" and "# TYPE name type": every sample of the
 * family must follow before the next family starts. */
void metrics_text_family(struct metrics_text *t, const char *name,
			 const char *type, const char *help);

/* Appends "name v" (an unlabelled sample). */
void metrics_text_u64(struct metrics_text *t, const char *name, uint64_t v);

/* Appends name{label="value"} v, value escaped. */
void metrics_text_u64_label(struct metrics_text *t, const char *name,
			    const char *label, const char *value, uint64_t v);

/* Appends the end of a histogram's samples: name_bucket{le="+Inf"} inf,
 * name_sum sum (%.9g), name_count count. */
void metrics_text_histogram_end(struct metrics_text *t, const char *name,
				uint64_t inf, double sum, uint64_t count);

#endif
