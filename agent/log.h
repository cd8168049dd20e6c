/* log.h - logfmt lines on stderr: ts=... level=... msg="..." key=value. */
#ifndef WARMLANE_LOG_H
#define WARMLANE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Ordered by verbosity: a line is written when its level <= the current one.
 * Not LOG_ERR & co.: those are <syslog.h> macros. */
enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN  = 1,
	LOG_LEVEL_INFO  = 2,
	LOG_LEVEL_DEBUG = 3,
};

/* Sets the threshold (default info). */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Redirects output (default stderr); tests capture lines this way. NULL
 * restores stderr. */
void log_set_stream(FILE *f);

/* True when a line at `level` would be written: lets callers skip building
 * expensive arguments for debug lines. */
bool log_enabled(enum log_level level);

/* Parses "error", "warn", "info", "debug" (exactly). Returns 0 or -EINVAL. */
int log_level_parse(const char *s, enum log_level *out);

/* The config name of a level ("info"). */
const char *log_level_name(enum log_level level);

/* Writes one line: ts, level, msg (quoted and escaped), then the caller's
 * printf-formatted key=value pairs (fmt may be NULL). Values that may hold
 * spaces, quotes or '=' must go through log_quote. The line is written with
 * a single fwrite so concurrent writers do not interleave inside it. */
void log_write(enum log_level level, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_error(msg, ...) log_write(LOG_LEVEL_ERROR, msg, __VA_ARGS__)
#define log_warn(msg, ...)  log_write(LOG_LEVEL_WARN, msg, __VA_ARGS__)
#define log_info(msg, ...)  log_write(LOG_LEVEL_INFO, msg, __VA_ARGS__)
#define log_debug(msg, ...) \
	do { \
		if (log_enabled(LOG_LEVEL_DEBUG)) \
			log_write(LOG_LEVEL_DEBUG, msg, __VA_ARGS__); \
	} while (0)

/* The budget of one call site for a line a peer can repeat at will (an
 * ACK that does not fit, a server name HAProxy reports at every poll):
 * the first line is written, then at most one per interval_ms, and each
 * written line reports how many were held back since the one before. One
 * per site, static and initialised with LOG_LIMIT_INIT. */
struct log_limit {
	uint64_t interval_ms;
	uint64_t last_ms;    /* when the last line was written */
	uint64_t suppressed; /* held back since */
	bool armed;          /* a line was written */
};

#define LOG_LIMIT_INIT(ms) { .interval_ms = (ms) }

/* The interval of the sites above: a line a minute, with the count. */
#define LOG_LIMIT_INTERVAL_MS 60000u

/* Whether the site's line is to be written at now_ms (the loop's
 * monotonic milliseconds, uv_now). True: write it, with *suppressed (the
 * lines held back since the last one written; the count restarts). False:
 * counted as held back, *suppressed untouched. */
bool log_limit_allow(struct log_limit *l, uint64_t now_ms,
		     uint64_t *suppressed);

/* Formats s (len bytes, need not be NUL-terminated) as a logfmt value into
 * buf: bare when it is a non-empty run of safe characters, else in double
 * quotes with \" \\ \n \t and \xHH escapes. Truncates to fit (ending with
 * "..." inside the quotes). Returns buf, always NUL-terminated (cap >= 8). */
const char *log_quote(char *buf, size_t cap, const char *s, size_t len);

#endif
