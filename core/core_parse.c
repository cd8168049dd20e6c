/* core_parse.c - parsing feedback values: HAProxy's %Tr and the Retry-After header. */
#include "core.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define TR_MAX ((int64_t)1 << 53)

int core_parse_tr(struct core_str s, int64_t *ms)
{
	if (s.ptr == NULL || s.len == 0)
		return -EINVAL;
	if (s.len == 2 && s.ptr[0] == '-' && s.ptr[1] == '1') {
		*ms = -1;
		return 0;
	}
	int64_t v = 0;
	for (size_t i = 0; i < s.len; i++) {
		if (s.ptr[i] < '0' || s.ptr[i] > '9')
			return -EINVAL;
		v = v * 10 + (s.ptr[i] - '0');
		if (v > TR_MAX)
			return -EINVAL;
	}
	*ms = v;
	return 0;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil); no timegm, which POSIX lacks. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* A tiny cursor over the header value. */
struct cur {
	const char *p;
	const char *end;
};

static bool lit(struct cur *c, const char *s)
{
	size_t n = strlen(s);
	if (n > (size_t)(c->end - c->p) || memcmp(c->p, s, n) != 0)
		return false;
	c->p += n;
	return true;
}

/* Exactly `width` digits. */
static bool digits(struct cur *c, int width, int64_t *out)
{
	int64_t v = 0;
	int n = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && n < width) {
		v = v * 10 + (*c->p - '0');
		c->p++;
		n++;
	}
	if (n != width)
		return false;
	*out = v;
	return true;
}

static const char *const months[12] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};

static bool month(struct cur *c, int *m)
{
	for (int i = 0; i < 12; i++) {
		if (lit(c, months[i])) {
			*m = i + 1;
			return true;
		}
	}
	return false;
}

static const char *const wkday[7] = {
	"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun",
};
static const char *const weekday[7] = {
	"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
	"Sunday",
};

static bool hms(struct cur *c, int64_t *secs)
{
	int64_t h, mi, s;
	if (!digits(c, 2, &h) || !lit(c, ":") || !digits(c, 2, &mi) ||
	    !lit(c, ":") || !digits(c, 2, &s))
		return false;
	if (h > 23 || mi > 59 || s > 60)
		return false;
	*secs = h * 3600 + mi * 60 + s;
	return true;
}

static bool valid_day(int64_t y, int m, int64_t d)
{
	static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (d < 1 || d > mdays[m - 1])
		return false;
	return !(m == 2 && d == 29 && !leap);
}

/* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994".
 * Returns true with *t in seconds since the epoch. */
static bool http_date(struct cur c, int64_t now_unix_s, int64_t *t)
{
	int64_t d = 0, y = 0, secs = 0;
	int m = 0;
	struct cur s = c;

	for (int i = 0; i < 7; i++) {
		s = c;
		if (lit(&s, weekday[i]) && lit(&s, ", ")) {
			/* RFC 850: two-digit year, read as the one within
			 * 50 years of now (RFC 9110, 5.6.7). */
			if (!digits(&s, 2, &d) || !lit(&s, "-") || !month(&s, &m) ||
			    !lit(&s, "-") || !digits(&s, 2, &y) || !lit(&s, " ") ||
			    !hms(&s, &secs) || !lit(&s, " GMT") || s.p != s.end)
				return false;
			int64_t now_y = 1970 + now_unix_s / 31556952;
			int64_t full = now_y - now_y % 100 + y;
			if (full > now_y + 50)
				full -= 100;
			y = full;
			goto done;
		}
	}
	for (int i = 0; i < 7; i++) {
		s = c;
		if (!lit(&s, wkday[i]))
			continue;
		if (lit(&s, ", ")) {
			if (!digits(&s, 2, &d) || !lit(&s, " ") || !month(&s, &m) ||
			    !lit(&s, " ") || !digits(&s, 4, &y) || !lit(&s, " ") ||
			    !hms(&s, &secs) || !lit(&s, " GMT") || s.p != s.end)
				return false;
			goto done;
		}
		if (lit(&s, " ")) {
			if (!month(&s, &m) || !lit(&s, " "))
				return false;
			/* The day is two characters: " 6" or "16". */
			bool pad = lit(&s, " ");
			if (!digits(&s, pad ? 1 : 2, &d) || !lit(&s, " ") ||
			    !hms(&s, &secs) || !lit(&s, " ") || !digits(&s, 4, &y) ||
			    s.p != s.end)
				return false;
			goto done;
		}
		return false;
	}
	return false;
done:
	if (!valid_day(y, m, d))
		return false;
	*t = days_from_civil(y, m, (int)d) * 86400 + secs;
	return true;
}

int core_parse_retry_after(struct core_str s, int64_t now_unix_s,
			   int64_t *delay_ms)
{
	if (s.ptr == NULL)
		return -EINVAL;
	struct cur c = { s.ptr, s.ptr + s.len };
	while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
		c.p++;
	while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t'))
		c.end--;
	if (c.p == c.end)
		return -EINVAL;
	if (*c.p >= '0' && *c.p <= '9') {
		int64_t v = 0;
		bool big = false;
		for (const char *q = c.p; q < c.end; q++) {
			if (*q < '0' || *q > '9')
				return -EINVAL;
			int d = *q - '0';
			if (big || v > (INT64_MAX / 1000 - d) / 10)
				big = true; /* keep checking the digits */
			else
				v = v * 10 + d;
		}
		*delay_ms = big ? INT64_MAX : v * 1000;
		return 0;
	}
	int64_t t;
	if (!http_date(c, now_unix_s, &t))
		return -EINVAL;
	*delay_ms = t > now_unix_s ? (t - now_unix_s) * 1000 : 0;
	return 0;
}
