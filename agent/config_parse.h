/* config_parse.h - the configuration's pure parsers (no libyaml, no libcyaml), shared by config*.c. */
#ifndef WARMLANE_CONFIG_PARSE_H
#define WARMLANE_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* config_parse_duration, config_parse_listen and config_parse_hostport
 * are public: see config.h. */

/* Copies a one-line message into a caller buffer (snprintf semantics;
 * errlen 0 writes nothing). */
void config_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Renders a duration in the largest unit that divides it ("5m", "200ms")
 * into buf; returns buf. */
const char *config_fmt_duration(char *buf, size_t cap, uint64_t ms);

/* A socket's permission bits: 1 to 4 octal digits (len bytes of s), at
 * most 0777. Returns 0, or -EINVAL with *mode untouched. */
int config_parse_mode(const char *s, size_t len, unsigned *mode);

/* HAProxy's own charset for proxy and server names: non-empty, letters,
 * digits, '-', '_', '.' and ':'. */
bool config_name_is_haproxy(const char *v);

/* Non-empty printable ASCII without spaces: key ids end up as HAProxy
 * map keys. */
bool config_name_is_printable(const char *v);

/* Whether u is an http:// URL libcurl is given as it is: an authority
 * (a host, an optional port) and a path, printable ASCII, no blank, at
 * most CONFIG_URL_MAX bytes. Engines are polled in the clear on a private
 * network or loopback, like HAProxy's own server lines. False with the
 * reason in why. */
bool config_url_is_http(const char *u, char *why, size_t whylen);

#endif
