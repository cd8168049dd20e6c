/* config_parse.c - the configuration's pure parsers: durations, addresses, modes, names, URLs. */
#include "config_parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void config_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int config_parse_duration(const char *s, uint64_t *ms)
{
	const char *p = s;
	uint64_t whole = 0, frac = 0, scale = 1;
	bool digits = false;

	while (*p >= '0' && *p <= '9') {
		if (whole > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		whole = whole * 10 + (uint64_t)(*p - '0');
		p++;
		digits = true;
	}
	if (*p == '.') {
		p++;
		bool fdigits = false;
		while (*p >= '0' && *p <= '9') {
			if (scale >= 1000000000u)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
			p++;
			fdigits = true;
		}
		if (!fdigits)
			return -EINVAL;
	}
	if (!digits)
		return -EINVAL;

	uint64_t unit;
	if (strcmp(p, "ms") == 0)
		unit = 1;
	else if (strcmp(p, "s") == 0)
		unit = 1000;
	else if (strcmp(p, "m") == 0)
		unit = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		unit = 3600 * 1000;
	else
		return -EINVAL;

	if (whole > UINT64_MAX / unit)
		return -EINVAL;
	/* frac < scale <= 1e9 and unit <= 3.6e6: the product fits. */
	if (frac * unit % scale != 0)
		return -ERANGE; /* not a whole number of milliseconds */
	uint64_t v = whole * unit, f = frac * unit / scale;
	if (v > UINT64_MAX - f)
		return -EINVAL;
	*ms = v + f;
	return 0;
}

const char *config_fmt_duration(char *buf, size_t cap, uint64_t ms)
{
	if (ms != 0 && ms % 3600000 == 0)
		snprintf(buf, cap, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms != 0 && ms % 60000 == 0)
		snprintf(buf, cap, "%llum", (unsigned long long)(ms / 60000));
	else if (ms != 0 && ms % 1000 == 0)
		snprintf(buf, cap, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, cap, "%llums", (unsigned long long)ms);
	return buf;
}

int config_parse_hostport(const char *s, struct config_hostport *out,
			  char *err, size_t errlen)
{
	struct config_hostport hp = { 0 };
	const char *host, *colon;
	size_t hlen;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL) {
			config_set_err(err, errlen, "missing ']' after the IPv6 address");
			return -EINVAL;
		}
		host = s + 1;
		hlen = (size_t)(close - host);
		if (close[1] != ':') {
			config_set_err(err, errlen, "expected :PORT after ']'");
			return -EINVAL;
		}
		colon = close + 1;
		hp.ipv6 = true;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL) {
			config_set_err(err, errlen, "expected HOST:PORT");
			return -EINVAL;
		}
		host = s;
		hlen = (size_t)(colon - s);
		if (memchr(host, ':', hlen) != NULL) {
			config_set_err(err, errlen,
				"an IPv6 address needs brackets: [ADDR]:PORT");
			return -EINVAL;
		}
	}
	if (hlen == 0) {
		config_set_err(err, errlen, "missing host before the port");
		return -EINVAL;
	}
	if (hlen >= sizeof(hp.host)) {
		config_set_err(err, errlen, "host too long");
		return -EINVAL;
	}
	memcpy(hp.host, host, hlen);
	hp.host[hlen] = '\0';

	/* Only numeric addresses (and two spellings for the obvious ones):
	 * the agent binds at start-up and a resolver there would block. */
	if (!hp.ipv6 && strcmp(hp.host, "localhost") == 0)
		strcpy(hp.host, "127.0.0.1");
	else if (!hp.ipv6 && strcmp(hp.host, "*") == 0)
		strcpy(hp.host, "0.0.0.0");
	unsigned char addr[16];
	if (inet_pton(hp.ipv6 ? AF_INET6 : AF_INET, hp.host, addr) != 1) {
		config_set_err(err, errlen, "\"%s\" is not a numeric %s address",
			hp.host, hp.ipv6 ? "IPv6" : "IPv4");
		return -EINVAL;
	}

	const char *p = colon + 1;
	unsigned long port = 0;
	if (*p == '\0') {
		config_set_err(err, errlen, "missing port");
		return -EINVAL;
	}
	for (; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || port > 65535) {
			config_set_err(err, errlen, "bad port \"%s\"", colon + 1);
			return -EINVAL;
		}
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port == 0 || port > 65535) {
		config_set_err(err, errlen, "port must be between 1 and 65535");
		return -EINVAL;
	}
	hp.port = (uint16_t)port;
	*out = hp;
	return 0;
}

int config_parse_listen(const char *s, struct config_listen *out, char *err,
			size_t errlen)
{
	struct config_listen l = { 0 };

	if (strncmp(s, "unix:", 5) == 0) {
		const char *p = s + 5;
		const char *comma = strchr(p, ',');
		size_t plen = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (plen == 0) {
			config_set_err(err, errlen, "unix: needs a socket path");
			return -EINVAL;
		}
		if (plen > CONFIG_UNIX_PATH_MAX) {
			config_set_err(err, errlen,
				       "socket path longer than %d bytes",
				       CONFIG_UNIX_PATH_MAX);
			return -EINVAL;
		}
		l.kind = CONFIG_LISTEN_UNIX;
		memcpy(l.path, p, plen);
		l.mode = CONFIG_DEFAULT_SOCKET_MODE;
		while (comma != NULL) {
			const char *opt = comma + 1;
			comma = strchr(opt, ',');
			size_t olen = comma != NULL ? (size_t)(comma - opt)
						    : strlen(opt);
			if (olen <= 5 || memcmp(opt, "mode=", 5) != 0) {
				config_set_err(err, errlen,
					"unknown option \"%.*s\" (expected mode=0660)",
					(int)olen, opt);
				return -EINVAL;
			}
			unsigned mode;
			if (config_parse_mode(opt + 5, olen - 5, &mode) < 0) {
				config_set_err(err, errlen,
					"mode must be octal permission bits, e.g. mode=0660");
				return -EINVAL;
			}
			l.mode = mode;
		}
		snprintf(l.text, sizeof(l.text), "unix:%s,mode=%04o", l.path,
			 l.mode);
	} else if (strncmp(s, "tcp:", 4) == 0) {
		struct config_hostport hp;
		int r = config_parse_hostport(s + 4, &hp, err, errlen);
		if (r < 0)
			return r;
		l.kind = CONFIG_LISTEN_TCP;
		memcpy(l.host, hp.host, sizeof(l.host));
		l.port = hp.port;
		l.ipv6 = hp.ipv6;
		snprintf(l.text, sizeof(l.text), hp.ipv6 ? "tcp:[%s]:%u" : "tcp:%s:%u",
			 l.host, (unsigned)l.port);
	} else {
		config_set_err(err, errlen,
			"expected unix:PATH[,mode=0660] or tcp:HOST:PORT");
		return -EINVAL;
	}
	*out = l;
	return 0;
}

int config_parse_mode(const char *s, size_t len, unsigned *mode)
{
	unsigned v = 0;
	if (len == 0 || len > 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '7')
			return -EINVAL;
		v = v * 8 + (unsigned)(s[i] - '0');
	}
	if (v > 0777)
		return -EINVAL;
	*mode = v;
	return 0;
}

bool config_name_is_haproxy(const char *v)
{
	if (v[0] == '\0')
		return false;
	for (const char *p = v; *p != '\0'; p++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '-' || c == '_' ||
			  c == '.' || c == ':';
		if (!ok)
			return false;
	}
	return true;
}

bool config_name_is_printable(const char *v)
{
	if (v[0] == '\0')
		return false;
	for (const char *p = v; *p != '\0'; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return false;
	return true;
}

bool config_url_is_http(const char *u, char *why, size_t whylen)
{
	static const char scheme[] = "http://";
	size_t n = strlen(u);
	if (n > CONFIG_URL_MAX) {
		snprintf(why, whylen, "longer than %d bytes", CONFIG_URL_MAX);
		return false;
	}
	if (n < sizeof(scheme) || memcmp(u, scheme, sizeof(scheme) - 1) != 0) {
		snprintf(why, whylen, "not an http:// URL");
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)u[i];
		if (c <= 0x20 || c >= 0x7f) {
			snprintf(why, whylen, "byte %zu is a blank or not printable ASCII",
				 i + 1);
			return false;
		}
	}
	const char *host = u + sizeof(scheme) - 1;
	if (*host == '/' || *host == ':' || *host == '@' || strchr(host, '@') != NULL) {
		snprintf(why, whylen, "no host, or credentials in the URL");
		return false;
	}
	return true;
}
