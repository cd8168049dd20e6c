/* log.c - logfmt lines on stderr, one fwrite per line. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

static enum log_level log_threshold = LOG_LEVEL_INFO;
static FILE *log_stream;

static const char *const log_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARN] = "warn",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

enum log_level log_get_level(void)
{
	return log_threshold;
}

void log_set_stream(FILE *f)
{
	log_stream = f;
}

bool log_enabled(enum log_level level)
{
	return level <= log_threshold;
}

int log_level_parse(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
		if (strcmp(s, log_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	if ((unsigned)level >= sizeof(log_names) / sizeof(log_names[0]))
		return "unknown";
	return log_names[level];
}

bool log_limit_allow(struct log_limit *l, uint64_t now_ms,
		     uint64_t *suppressed)
{
	/* A clock behind last_ms (another loop's) wraps to a large interval:
	 * the line is written rather than held back for ever. */
	if (l->armed && now_ms - l->last_ms < l->interval_ms) {
		l->suppressed++;
		return false;
	}
	*suppressed = l->suppressed;
	l->suppressed = 0;
	l->last_ms = now_ms;
	l->armed = true;
	return true;
}

/* Characters that may stand unquoted in a logfmt value. */
static bool log_safe_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != '=' && c != '\\';
}

const char *log_quote(char *buf, size_t cap, const char *s, size_t len)
{
	bool bare = len > 0;
	for (size_t i = 0; i < len && bare; i++)
		bare = log_safe_char((unsigned char)s[i]);
	if (bare && len < cap) {
		memcpy(buf, s, len);
		buf[len] = '\0';
		return buf;
	}

	/* Room for the closing quote, "..." and the NUL is kept back. */
	size_t o = 0, limit = cap - 5;
	buf[o++] = '"';
	size_t i;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char tmp[5];
		size_t n;
		if (c == '"' || c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			n = 2;
		} else if (c == '\n') {
			memcpy(tmp, "\\n", 2);
			n = 2;
		} else if (c == '\t') {
			memcpy(tmp, "\\t", 2);
			n = 2;
		} else if (c < 0x20 || c >= 0x7f) {
			static const char hex[] = "0123456789abcdef";
			tmp[0] = '\\';
			tmp[1] = 'x';
			tmp[2] = hex[c >> 4];
			tmp[3] = hex[c & 15];
			n = 4;
		} else {
			tmp[0] = (char)c;
			n = 1;
		}
		if (n > limit - o)
			break;
		memcpy(buf + o, tmp, n);
		o += n;
	}
	if (i < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

void log_write(enum log_level level, const char *msg, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;

	char line[2048];
	size_t o = 0;

	/* Wall-clock time is right here: it is for humans reading logs, never
	 * for measuring intervals. */
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	o += strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
	int n = snprintf(line + o, sizeof(line) - o, ".%03ldZ level=%s msg=",
			 ts.tv_nsec / 1000000L, log_level_name(level));
	if (n > 0)
		o += (size_t)n;

	char q[512];
	log_quote(q, sizeof(q), msg, strlen(msg));
	n = snprintf(line + o, sizeof(line) - o, "%s", q);
	if (n > 0)
		o = o + (size_t)n < sizeof(line) ? o + (size_t)n : sizeof(line) - 1;

	if (fmt != NULL && fmt[0] != '\0' && o < sizeof(line) - 2) {
		line[o++] = ' ';
		va_list ap;
		va_start(ap, fmt);
		n = vsnprintf(line + o, sizeof(line) - o, fmt, ap);
		va_end(ap);
		if (n > 0)
			o = o + (size_t)n < sizeof(line) ? o + (size_t)n
							 : sizeof(line) - 1;
	}
	/* A truncated line still ends with a newline. */
	if (o >= sizeof(line) - 1)
		o = sizeof(line) - 2;
	line[o++] = '\n';

	FILE *f = log_stream != NULL ? log_stream : stderr;
	fwrite(line, 1, o, f);
	fflush(f);
}
