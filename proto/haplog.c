/* haplog.c - parser of one HAProxy log datagram: syslog framing and warmlane's key=value fields. */
#include "haplog.h"

#include <string.h>

static const char *const field_names[HAPLOG_F_COUNT] = {
	"be", "srv", "st", "ts", "rc", "tw", "tc", "tr", "ta", "tt",
	"bytes", "at", "wbe", "wsrv", "key", "akey", "reason", "fb", "stream",
	"id", "ra", "sh", "shr",
};

const char *haplog_field_name(uint32_t bit)
{
	for (unsigned i = 0; i < HAPLOG_F_COUNT; i++)
		if (bit == 1u << i)
			return field_names[i];
	return NULL;
}

const char *haplog_status_name(int status)
{
	switch (status) {
	case HAPLOG_OK:
		return "ok";
	case HAPLOG_EEMPTY:
		return "empty";
	case HAPLOG_ETOOLONG:
		return "too_long";
	case HAPLOG_EFRAME:
		return "frame";
	case HAPLOG_ENOFIELDS:
		return "no_fields";
	case HAPLOG_EMISSING:
		return "missing";
	case HAPLOG_EVALUE:
		return "value";
	default:
		return "unknown";
	}
}

static bool is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}

/* ---- framing ------------------------------------------------------------ */

/* "<PRI>": 1 to 3 digits, at most 191. Returns bytes consumed or 0. */
static size_t frame_pri(const uint8_t *p, size_t len, int *pri)
{
	size_t i = 1;
	int v = 0;
	if (len < 3 || p[0] != '<')
		return 0;
	while (i < len && i <= 3 && is_digit(p[i]))
		v = v * 10 + (p[i++] - '0');
	if (i == 1 || i >= len || p[i] != '>' || v > 191)
		return 0;
	*pri = v;
	return i + 1;
}

/* One space-free token starting at p[*i], followed by a space; moves *i
 * past the space. Returns false when the token is empty or the space is
 * missing. */
static bool frame_token(const uint8_t *p, size_t len, size_t *i,
			struct haplog_str *tok)
{
	size_t s = *i, e = s;
	while (e < len && p[e] != ' ')
		e++;
	if (e == s || e >= len)
		return false;
	*tok = (struct haplog_str){ p + s, e - s };
	*i = e + 1;
	return true;
}

/* RFC 5424 structured data at p[*i]: "-" or one or more [ID PARAM="V"...]
 * elements, with \" \\ \] escaped inside values. Moves *i past it. */
static bool frame_sd(const uint8_t *p, size_t len, size_t *i)
{
	size_t k = *i;
	if (k < len && p[k] == '-') {
		*i = k + 1;
		return true;
	}
	if (k >= len || p[k] != '[')
		return false;
	while (k < len && p[k] == '[') {
		bool quoted = false;
		k++;
		for (;;) {
			if (k >= len)
				return false;
			uint8_t c = p[k];
			if (quoted && c == '\\') {
				k += 2;
				continue;
			}
			k++;
			if (c == '"')
				quoted = !quoted;
			else if (c == ']' && !quoted)
				break;
		}
	}
	*i = k;
	return true;
}

/* "Mmm dd hh:mm:ss " (RFC 3164's TIMESTAMP, day space-padded). */
static bool frame_3164_time(const uint8_t *p, size_t len)
{
	static const char pat[] = "Aaa dd dd:dd:dd ";
	if (len < sizeof(pat) - 1)
		return false;
	for (size_t i = 0; i < sizeof(pat) - 1; i++) {
		uint8_t c = p[i];
		switch (pat[i]) {
		case 'A':
			if (c < 'A' || c > 'Z')
				return false;
			break;
		case 'a':
			if (c < 'a' || c > 'z')
				return false;
			break;
		case 'd':
			if (!is_digit(c) && !(i == 4 && c == ' '))
				return false;
			break;
		default:
			if (c != (uint8_t)pat[i])
				return false;
		}
	}
	return true;
}

/* An ISO 8601 time "YYYY-MM-DDT..." and its space (HAProxy's `timed` and
 * `iso`): returns the bytes to skip, or 0. */
static size_t frame_iso_time(const uint8_t *p, size_t len)
{
	static const char pat[] = "dddd-dd-ddT";
	size_t i;
	for (i = 0; i < sizeof(pat) - 1; i++) {
		if (i >= len)
			return 0;
		if (pat[i] == 'd' ? !is_digit(p[i]) : p[i] != (uint8_t)pat[i])
			return 0;
	}
	while (i < len && p[i] != ' ' && p[i] != '=')
		i++;
	return i < len && p[i] == ' ' ? i + 1 : 0;
}

static bool has_byte(struct haplog_str s, uint8_t c)
{
	return s.len > 0 && memchr(s.ptr, c, s.len) != NULL;
}

/* A 3164 tag "name[pid]:" or "name:" as the token t; sets the name. */
static bool frame_3164_tag(struct haplog_str t, struct haplog_str *tag)
{
	if (t.len < 2 || t.ptr[t.len - 1] != ':' || has_byte(t, '='))
		return false;
	size_t n = t.len - 1;
	const uint8_t *b = memchr(t.ptr, '[', n);
	if (b != NULL) {
		if (t.ptr[n - 1] != ']')
			return false;
		n = (size_t)(b - t.ptr);
	}
	*tag = (struct haplog_str){ t.ptr, n };
	return true;
}

/* Splits the datagram into header views and the message. */
static int frame_parse(const uint8_t *p, size_t len, struct haplog_line *l)
{
	size_t i = frame_pri(p, len, &l->pri);
	l->pri = i > 0 ? l->pri : -1;
	if (i == 0) {
		if (len > 0 && p[0] == '<')
			return HAPLOG_EFRAME;
		l->frame = HAPLOG_FRAME_RAW;
		i = frame_iso_time(p, len);
		l->msg = (struct haplog_str){ p + i, len - i };
		return HAPLOG_OK;
	}
	if (len - i >= 2 && p[i] == '1' && p[i + 1] == ' ') {
		struct haplog_str tsp, host, app, procid, msgid;
		i += 2;
		if (!frame_token(p, len, &i, &tsp) ||
		    !frame_token(p, len, &i, &host) ||
		    !frame_token(p, len, &i, &app) ||
		    !frame_token(p, len, &i, &procid))
			return HAPLOG_EFRAME;
		/* MSGID, then SD, then " MSG" or the end. */
		if (!frame_token(p, len, &i, &msgid) || !frame_sd(p, len, &i))
			return HAPLOG_EFRAME;
		if (i < len) {
			if (p[i] != ' ')
				return HAPLOG_EFRAME;
			i++;
		}
		if (len - i >= 3 && p[i] == 0xef && p[i + 1] == 0xbb &&
		    p[i + 2] == 0xbf)
			i += 3; /* BOM */
		l->frame = HAPLOG_FRAME_RFC5424;
		if (!(host.len == 1 && host.ptr[0] == '-'))
			l->host = host;
		l->tag = app;
		l->msg = (struct haplog_str){ p + i, len - i };
		return HAPLOG_OK;
	}
	if (frame_3164_time(p + i, len - i)) {
		struct haplog_str t1, t2;
		size_t j = i + 16, k;
		l->frame = HAPLOG_FRAME_RFC3164;
		k = j;
		if (frame_token(p, len, &k, &t1)) {
			size_t k2 = k;
			if (frame_3164_tag(t1, &l->tag)) {
				j = k;
			} else if (!has_byte(t1, '=') &&
				   frame_token(p, len, &k2, &t2) &&
				   frame_3164_tag(t2, &l->tag)) {
				l->host = t1;
				j = k2;
			}
		}
		/* else no tag: the message follows the time. */
		l->msg = (struct haplog_str){ p + j, len - j };
		return HAPLOG_OK;
	}
	l->frame = HAPLOG_FRAME_SHORT;
	i += frame_iso_time(p + i, len - i);
	l->msg = (struct haplog_str){ p + i, len - i };
	return HAPLOG_OK;
}

/* ---- values ------------------------------------------------------------- */

/* Decimal digits, at most 18 of them (no overflow). */
static bool val_u64(struct haplog_str v, uint64_t *out)
{
	uint64_t x = 0;
	if (v.len == 0 || v.len > 18)
		return false;
	for (size_t i = 0; i < v.len; i++) {
		if (!is_digit(v.ptr[i]))
			return false;
		x = x * 10 + (uint64_t)(v.ptr[i] - '0');
	}
	*out = x;
	return true;
}

/* A timer: "-1" or digits; plus_ok also accepts a leading '+' (logasap). */
static bool val_timer(struct haplog_str v, bool plus_ok, int64_t *out)
{
	uint64_t x;
	if (v.len == 2 && v.ptr[0] == '-' && v.ptr[1] == '1') {
		*out = -1;
		return true;
	}
	if (plus_ok && v.len > 1 && v.ptr[0] == '+') {
		v.ptr++;
		v.len--;
	}
	if (!val_u64(v, &x))
		return false;
	*out = (int64_t)x;
	return true;
}

static bool val_is(struct haplog_str v, const char *s)
{
	size_t n = strlen(s);
	return v.len == n && memcmp(v.ptr, s, n) == 0;
}

static bool val_bool(struct haplog_str v, bool *out)
{
	if (val_is(v, "1") || val_is(v, "true")) {
		*out = true;
		return true;
	}
	if (val_is(v, "0") || val_is(v, "false")) {
		*out = false;
		return true;
	}
	return false;
}

/* 0x10 | each hex digit's value; 0 for a byte that is not one. */
#define HEX_OK 0x10
static const uint8_t hex_digit[256] = {
	['0'] = HEX_OK | 0, ['1'] = HEX_OK | 1, ['2'] = HEX_OK | 2,
	['3'] = HEX_OK | 3, ['4'] = HEX_OK | 4, ['5'] = HEX_OK | 5,
	['6'] = HEX_OK | 6, ['7'] = HEX_OK | 7, ['8'] = HEX_OK | 8,
	['9'] = HEX_OK | 9,
	['a'] = HEX_OK | 10, ['b'] = HEX_OK | 11, ['c'] = HEX_OK | 12,
	['d'] = HEX_OK | 13, ['e'] = HEX_OK | 14, ['f'] = HEX_OK | 15,
	['A'] = HEX_OK | 10, ['B'] = HEX_OK | 11, ['C'] = HEX_OK | 12,
	['D'] = HEX_OK | 13, ['E'] = HEX_OK | 14, ['F'] = HEX_OK | 15,
};

bool haplog_akey_parse(const uint8_t *p, size_t len, uint64_t *out)
{
	/* Once per feedback and per log line: a table and no branch per
	 * digit, where the digit-or-letter tests of random hex digits
	 * mispredict. */
	uint64_t x = 0;
	unsigned ok = HEX_OK;
	if (len != 16)
		return false;
	for (size_t i = 0; i < 16; i++) {
		unsigned d = hex_digit[p[i]];
		ok &= d;
		x = x << 4 | (d & 15);
	}
	if (!ok)
		return false;
	*out = x;
	return true;
}

/* Printable ASCII other than space: names, the termination state. */
static bool val_printable(struct haplog_str v)
{
	for (size_t i = 0; i < v.len; i++)
		if (v.ptr[i] <= 0x20 || v.ptr[i] >= 0x7f)
			return false;
	return v.len > 0;
}

/* Stores value v of field bit f; false when it is malformed. */
static bool field_set(struct haplog_line *l, uint32_t f, struct haplog_str v)
{
	uint64_t u;
	switch (f) {
	case HAPLOG_F_BE:
	case HAPLOG_F_SRV:
	case HAPLOG_F_WBE:
	case HAPLOG_F_WSRV:
	case HAPLOG_F_KEY:
	case HAPLOG_F_REASON:
	case HAPLOG_F_SH:
	case HAPLOG_F_SHR: {
		struct haplog_str *dst = f == HAPLOG_F_BE ? &l->be
				       : f == HAPLOG_F_SRV ? &l->srv
				       : f == HAPLOG_F_WBE ? &l->wbe
				       : f == HAPLOG_F_WSRV ? &l->wsrv
				       : f == HAPLOG_F_KEY ? &l->key
				       : f == HAPLOG_F_SH ? &l->sh
				       : f == HAPLOG_F_SHR ? &l->shr
				       : &l->reason;
		if (v.len > 255 || !val_printable(v))
			return false;
		*dst = v;
		return true;
	}
	case HAPLOG_F_ID:
		if (v.len > 1024)
			return false;
		l->id = v;
		return true;
	case HAPLOG_F_ST:
		if (val_is(v, "-1")) {
			l->status = -1;
			return true;
		}
		if (!val_u64(v, &u) || u > 999)
			return false;
		l->status = (int)u;
		return true;
	case HAPLOG_F_TS:
		if ((v.len != 2 && v.len != 4) || !val_printable(v))
			return false;
		l->ts = v;
		return true;
	case HAPLOG_F_RC:
		if (v.len > 1 && v.ptr[0] == '+') {
			l->redispatched = true;
			v.ptr++;
			v.len--;
		}
		if (!val_u64(v, &u) || u > UINT32_MAX) {
			l->redispatched = false;
			return false;
		}
		l->retries = (uint32_t)u;
		return true;
	case HAPLOG_F_TW:
		return val_timer(v, false, &l->tw_ms);
	case HAPLOG_F_TC:
		return val_timer(v, false, &l->tc_ms);
	case HAPLOG_F_TR:
		return val_timer(v, false, &l->tr_ms);
	case HAPLOG_F_TA:
		return val_timer(v, true, &l->ta_ms);
	case HAPLOG_F_TT:
		return val_timer(v, true, &l->tt_ms);
	case HAPLOG_F_BYTES:
		if (v.len > 1 && v.ptr[0] == '+') {
			v.ptr++;
			v.len--;
		}
		return val_u64(v, &l->bytes);
	case HAPLOG_F_AT: {
		/* seconds '.' three digits of milliseconds */
		const uint8_t *dot = v.len > 0 ? memchr(v.ptr, '.', v.len) : NULL;
		uint64_t s, ms;
		if (dot == NULL)
			return false;
		struct haplog_str a = { v.ptr, (size_t)(dot - v.ptr) };
		struct haplog_str b = { dot + 1, v.len - a.len - 1 };
		if (b.len != 3 || a.len > 12 || !val_u64(a, &s) ||
		    !val_u64(b, &ms))
			return false;
		l->at_ms = s * 1000 + ms;
		return true;
	}
	case HAPLOG_F_AKEY:
		if (!haplog_akey_parse(v.ptr, v.len, &l->akey))
			return false;
		l->has_akey = true;
		return true;
	case HAPLOG_F_FB:
		return val_bool(v, &l->fb);
	case HAPLOG_F_STREAM:
		return val_bool(v, &l->stream);
	case HAPLOG_F_RA:
		/* Seconds (the delta form of Retry-After; the configs log it only
		 * when it is digits). 9 digits: 31 years, no overflow in ms. */
		if (v.len > 9 || !val_u64(v, &u))
			return false;
		l->retry_after_s = (int64_t)u;
		return true;
	default:
		return false;
	}
}

/* The field bit of name, or 0. */
static uint32_t field_lookup(struct haplog_str name)
{
	for (unsigned i = 0; i < HAPLOG_F_COUNT; i++) {
		size_t n = strlen(field_names[i]);
		if (name.len == n && memcmp(name.ptr, field_names[i], n) == 0)
			return 1u << i;
	}
	return 0;
}

/* Walks the message's leading NAME=VALUE tokens, NAME one of warmlane's,
 * and sets the fields. The first other token (no '=', an unknown name, or
 * anything glued to a closing quote) ends them: what follows (HAProxy's own
 * fields, captured headers, the request line) is never read, so a client
 * cannot supply a field even when the format lacks it. */
static void fields_parse(struct haplog_str m, struct haplog_line *l,
			 uint32_t *seen)
{
	size_t i = 0;
	while (i < m.len) {
		if (m.ptr[i] == ' ') {
			i++;
			continue;
		}
		size_t s = i, eq = i;
		while (eq < m.len && m.ptr[eq] != ' ' && m.ptr[eq] != '=')
			eq++;
		if (eq >= m.len || m.ptr[eq] != '=')
			return; /* not NAME=VALUE */
		uint32_t f = field_lookup((struct haplog_str){ m.ptr + s, eq - s });
		if (f == 0)
			return; /* not one of warmlane's */
		struct haplog_str v;
		size_t vs = eq + 1;
		bool last = false;
		if (vs < m.len && m.ptr[vs] == '"') {
			const uint8_t *q = vs + 1 < m.len
				? memchr(m.ptr + vs + 1, '"', m.len - vs - 1)
				: NULL;
			size_t ve = q != NULL ? (size_t)(q - m.ptr) : m.len;
			v = (struct haplog_str){ m.ptr + vs + 1, ve - vs - 1 };
			i = q != NULL ? ve + 1 : m.len;
			last = i < m.len && m.ptr[i] != ' ';
		} else {
			size_t ve = vs;
			while (ve < m.len && m.ptr[ve] != ' ')
				ve++;
			v = (struct haplog_str){ m.ptr + vs, ve - vs };
			i = ve;
		}
		/* The first occurrence wins; "-" is HAProxy's "no value":
		 * written, absent. */
		if ((*seen & f) == 0) {
			*seen |= f;
			if (!(v.len == 1 && v.ptr[0] == '-')) {
				if (field_set(l, f, v))
					l->present |= f;
				else
					l->bad |= f;
			}
		}
		if (last)
			return;
	}
}

int haplog_parse(const uint8_t *p, size_t len, struct haplog_line *out)
{
	struct haplog_line l = {
		.status = -1,
		.tw_ms = -1, .tc_ms = -1, .tr_ms = -1, .ta_ms = -1, .tt_ms = -1,
		.retry_after_s = -1,
	};
	*out = l;
	while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r' ||
			   p[len - 1] == '\0'))
		len--;
	if (len == 0)
		return HAPLOG_EEMPTY;
	if (len > HAPLOG_MAX_LEN)
		return HAPLOG_ETOOLONG;
	int r = frame_parse(p, len, &l);
	if (r == HAPLOG_OK) {
		uint32_t seen = 0;
		fields_parse(l.msg, &l, &seen);
		if (seen == 0)
			r = HAPLOG_ENOFIELDS;
		else if ((l.bad & HAPLOG_REQUIRED) != 0)
			r = HAPLOG_EVALUE;
		else if ((l.present & HAPLOG_REQUIRED) != HAPLOG_REQUIRED)
			r = HAPLOG_EMISSING;
	}
	*out = l;
	return r;
}
