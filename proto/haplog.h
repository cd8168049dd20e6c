/* haplog.h - parser of one HAProxy log datagram carrying warmlane's key=value fields.
 *
 * HAProxy writes one log line per request when the stream ends. warmlane's
 * log format (haproxy/haproxy-2.6.cfg, haproxy-3.1.cfg) puts space-separated
 * key=value fields at the start of the message; this parser takes one
 * datagram as HAProxy sends it to a log target and returns views of those
 * fields. No I/O, no allocation, no globals; work is linear in the length.
 *
 * Framing (what precedes the message), detected per datagram:
 * - RFC 5424: "<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG";
 * - RFC 3164: "<PRI>Mmm dd hh:mm:ss [HOST ]TAG[PID]: MSG" (HAProxy's
 *   `rfc3164` and `local`; a tag is optional);
 * - short: "<PRI>[ISO-8601-TIME ]MSG" (HAProxy's `short`, `priority`,
 *   `timed`);
 * - raw: a datagram not starting with '<': "[ISO-8601-TIME ]MSG" (`raw`,
 *   `iso`).
 * Trailing line ends (LF, CR, NUL) are ignored.
 *
 * Fields: warmlane's fields open the message. It is read token by token
 * (tokens separated by spaces) while each is NAME=VALUE with NAME one of
 * the names below (exact match, compared by length first); the first
 * other token ends the fields, and nothing after it is read. A name sets
 * its field the first time it appears; a repeated name is ignored. So
 * nothing a client controls in later parts of the line (captured headers,
 * the request line) can set a field, even one the format lacks. A VALUE
 * starting with '"' runs to the next '"' (or the end of a cut line); a
 * token glued to that closing quote ends the fields. "-" is HAProxy's
 * "no value": the field counts as written (a later occurrence of its name
 * is ignored) but has no value, and its bit is set in neither `present`
 * nor `bad`.
 */
#ifndef WARMLANE_HAPLOG_H
#define WARMLANE_HAPLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* HAProxy's largest `len` for a log target. */
#define HAPLOG_MAX_LEN 65535u

/* Return codes of haplog_parse. */
enum haplog_status {
	HAPLOG_OK = 0,
	HAPLOG_EEMPTY = -1,    /* no byte but line ends */
	HAPLOG_ETOOLONG = -2,  /* longer than HAPLOG_MAX_LEN */
	HAPLOG_EFRAME = -3,    /* '<' without a valid <PRI>, or a bad 5424 header */
	HAPLOG_ENOFIELDS = -4, /* well framed, but the message does not open
				* with one of warmlane's fields */
	HAPLOG_EMISSING = -5,  /* some fields, not every required one */
	HAPLOG_EVALUE = -6,    /* a required field with a malformed value */
};

enum haplog_frame {
	HAPLOG_FRAME_RAW = 0,
	HAPLOG_FRAME_SHORT,
	HAPLOG_FRAME_RFC3164,
	HAPLOG_FRAME_RFC5424,
};

/* Field bits of haplog_line.present and .bad, one per name. */
enum haplog_field {
	HAPLOG_F_BE = 1u << 0,     /* be: backend (%b) */
	HAPLOG_F_SRV = 1u << 1,    /* srv: server (%s), "<NOSRV>" when none */
	HAPLOG_F_ST = 1u << 2,     /* st: status (%ST), -1 or 0..999 */
	HAPLOG_F_TS = 1u << 3,     /* ts: termination state (%ts or %tsc) */
	HAPLOG_F_RC = 1u << 4,     /* rc: retries (%rc), '+' when redispatched */
	HAPLOG_F_TW = 1u << 5,     /* tw, tc, tr: %Tw %Tc %Tr, ms, -1 unknown */
	HAPLOG_F_TC = 1u << 6,
	HAPLOG_F_TR = 1u << 7,
	HAPLOG_F_TA = 1u << 8,     /* ta, tt: %Ta %Tt, ms ('+' of logasap ok) */
	HAPLOG_F_TT = 1u << 9,
	HAPLOG_F_BYTES = 1u << 10, /* bytes: %B, bytes read from the server */
	HAPLOG_F_AT = 1u << 11,    /* at: %Ts.%ms, accept time, Unix ms */
	HAPLOG_F_WBE = 1u << 12,   /* wbe, wsrv: warmlane's chosen backend/server */
	HAPLOG_F_WSRV = 1u << 13,
	HAPLOG_F_KEY = 1u << 14,   /* key: warmlane's key id */
	HAPLOG_F_AKEY = 1u << 15,  /* akey: 16 hex digits */
	HAPLOG_F_REASON = 1u << 16,/* reason: warmlane's reason */
	HAPLOG_F_FB = 1u << 17,    /* fb: feedback answered (txn.warmlane.ack) */
	HAPLOG_F_STREAM = 1u << 18,/* stream: 1 or 0 */
	HAPLOG_F_ID = 1u << 19,    /* id: unique id (%ID) */
	HAPLOG_F_RA = 1u << 20,    /* ra: a Retry-After in seconds (digits only) */
	HAPLOG_F_SH = 1u << 21,    /* sh: warmlane's shadow choice, backend/server */
	HAPLOG_F_SHR = 1u << 22,   /* shr: the reason of that shadow choice */
	HAPLOG_F_COUNT = 23,
};

/* The fields without which a line is not used. */
#define HAPLOG_REQUIRED (HAPLOG_F_BE | HAPLOG_F_SRV | HAPLOG_F_ST | HAPLOG_F_TS)

/* A view into the caller's datagram. Not NUL-terminated. */
struct haplog_str {
	const uint8_t *ptr;
	size_t len;
};

/* One parsed line. Views point into the datagram. A field absent, "-", or
 * malformed (its bit is then set in `bad`) keeps the default given here. */
struct haplog_line {
	enum haplog_frame frame;
	int pri;                   /* 0..191, -1 for raw */
	struct haplog_str host;    /* 3164/5424 hostname; empty when none or "-" */
	struct haplog_str tag;     /* 3164 tag without [pid], 5424 APP-NAME */
	struct haplog_str msg;     /* the message, line ends removed */
	struct haplog_str be, srv, wbe, wsrv, key, reason, id; /* empty: absent */
	struct haplog_str sh, shr; /* shadow mode (docs/shadow.md); empty: absent */
	struct haplog_str ts;      /* 2 or 4 characters */
	int status;                /* -1: none */
	uint32_t retries;          /* 0 */
	bool redispatched;         /* rc had a '+' */
	int64_t tw_ms, tc_ms, tr_ms, ta_ms, tt_ms; /* -1: unknown */
	uint64_t bytes;            /* 0 */
	uint64_t at_ms;            /* 0: absent */
	bool has_akey;
	uint64_t akey;
	bool fb;                   /* false */
	bool stream;               /* false */
	int64_t retry_after_s;     /* ra, at most 9 digits; -1: none */
	uint32_t present;          /* HAPLOG_F_* found with a usable value ("-" is none) */
	uint32_t bad;              /* HAPLOG_F_* found with a malformed value */
};

/* Parses one datagram p[0..len). Returns HAPLOG_OK with *out filled, or a
 * negative enum haplog_status (then *out holds what was parsed so far and
 * must not be used, except frame/pri/msg after HAPLOG_ENOFIELDS and later,
 * and `bad` after HAPLOG_EVALUE). Never reads outside p[0..len). */
int haplog_parse(const uint8_t *p, size_t len, struct haplog_line *out);

/* The status's name ("ok", "empty", "too_long", "frame", "no_fields",
 * "missing", "value"), or "unknown". */
const char *haplog_status_name(int status);

/* The name of one HAPLOG_F_* bit ("be", "srv", ...), or NULL. */
const char *haplog_field_name(uint32_t bit);

/* The affinity key as warmlane writes txn.warmlane.akey (the `akey` field
 * here, the `akey` argument of the SPOE feedback message): exactly 16 hex
 * digits, either case, nothing else (no "0x", no sign, no space). Returns
 * true with *out set, or false with *out untouched. */
bool haplog_akey_parse(const uint8_t *p, size_t len, uint64_t *out);

#endif
