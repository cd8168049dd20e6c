/* test_haplog.c - the HAProxy log line parser (proto/haplog.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "haplog.h"

/* Captured from HAProxy 2.6.12 (RFC 5424, a cut stream), 3.0.11 (RFC 3164,
 * a refused connection) and 3.2.26 (RFC 5424, a client abort) with the
 * log-format of haproxy/haproxy-2.6.cfg (tests/fuzz/capture_haplog.py). */
static const char line_26_cut[] =
	"<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 8237 - - be=llm srv=s1 "
	"st=200 ts=SD-- rc=0 tw=0 tc=0 tr=0 ta=21 tt=21 bytes=117 "
	"at=1795947704.530 wbe=llm wsrv=s1 key=k1 akey=9f86d081884c7d65 "
	"reason=affinity fb=1 stream=1 "
	"id=\"7F000001:CD80_7F000001:D63B_6B0BFCB8_0003:202D\" 127.0.0.1:52608 "
	"[29/Nov/2026:10:21:44.530] llm_in llm/s1 0/0/0/0/21 200 117 - - SD-- "
	"1/1/0/0/0 0/0 \"POST /cut HTTP/1.1\"\n";
static const char line_30_refused[] =
	"<134>Nov 29 10:21:54 localhost haproxy[8393]: be=llm srv=s2 st=503 "
	"ts=SC-- rc=3 tw=0 tc=-1 tr=-1 ta=3007 tt=3007 bytes=217 "
	"at=1795947711.622 wbe=llm wsrv=s2 key=k1 akey=9f86d081884c7d65 "
	"reason=affinity fb=- stream=1 "
	"id=\"7F000001:DBDC_7F000001:CA9D_6B0BFCBF_0004:20C9\" 127.0.0.1:56284 "
	"[29/Nov/2026:10:21:51.622] llm_in llm/s2 0/0/-1/-1/3007 503 217 - - "
	"SC-- 1/1/0/0/3 0/0 \"POST /ok HTTP/1.1\"\n";
static const char line_32_abort[] =
	"<134>1 2026-11-29T10:22:03.607519+00:00 - haproxy 8535 - - be=llm "
	"srv=s1 st=200 ts=CD-- rc=0 tw=0 tc=0 tr=1 ta=602 tt=602 bytes=132 "
	"at=1795947723.005 wbe=llm wsrv=s1 key=k1 akey=9f86d081884c7d65 "
	"reason=affinity fb=1 stream=1 "
	"id=\"7F000001:9AF2_7F000001:A719_6B0BFCCB_0006:2157\" 127.0.0.1:39666 "
	"[29/Nov/2026:10:22:03.005] llm_in llm/s1 0/0/0/1/602 200 132 - - CD-- "
	"1/1/0/0/0 0/0 \"POST /slowstream HTTP/1.1\"\n";

static int parse(const char *s, struct haplog_line *l)
{
	return haplog_parse((const uint8_t *)s, strlen(s), l);
}

/* Parses len bytes placed against the guard page. */
static int parse_guarded(const void *p, size_t len, struct haplog_line *l)
{
	return haplog_parse(guard_place(p, len), len, l);
}

static bool str_eq(struct haplog_str v, const char *s)
{
	return v.len == strlen(s) && memcmp(v.ptr, s, v.len) == 0;
}

START_TEST(golden_26_cut)
{
	struct haplog_line l;
	ck_assert_int_eq(parse_guarded(line_26_cut, strlen(line_26_cut), &l),
			 HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RFC5424);
	ck_assert_int_eq(l.pri, 134);
	ck_assert_uint_eq(l.host.len, 0);
	ck_assert(str_eq(l.tag, "haproxy"));
	ck_assert(str_eq(l.be, "llm") && str_eq(l.srv, "s1"));
	ck_assert(str_eq(l.wbe, "llm") && str_eq(l.wsrv, "s1"));
	ck_assert(str_eq(l.key, "k1") && str_eq(l.reason, "affinity"));
	ck_assert(str_eq(l.ts, "SD--"));
	ck_assert(str_eq(l.id, "7F000001:CD80_7F000001:D63B_6B0BFCB8_0003:202D"));
	ck_assert_int_eq(l.status, 200);
	ck_assert_uint_eq(l.retries, 0);
	ck_assert(!l.redispatched);
	ck_assert_int_eq(l.tw_ms, 0);
	ck_assert_int_eq(l.tr_ms, 0);
	ck_assert_int_eq(l.ta_ms, 21);
	ck_assert_int_eq(l.tt_ms, 21);
	ck_assert_uint_eq(l.bytes, 117);
	ck_assert_uint_eq(l.at_ms, 1795947704530ull);
	ck_assert(l.has_akey);
	ck_assert_uint_eq(l.akey, 0x9f86d081884c7d65ull);
	ck_assert(l.fb && l.stream);
	ck_assert_uint_eq(l.bad, 0);
	/* every field but ra (captured from a format without it; a 200
	 * carries no Retry-After anyway) and the shadow mode's sh, shr (a
	 * format older than them) */
	ck_assert_uint_eq(l.present, ((1u << HAPLOG_F_COUNT) - 1) &
					     ~(uint32_t)(HAPLOG_F_RA | HAPLOG_F_SH |
							 HAPLOG_F_SHR));
}
END_TEST

START_TEST(golden_30_refused)
{
	struct haplog_line l;
	ck_assert_int_eq(parse_guarded(line_30_refused, strlen(line_30_refused),
				       &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RFC3164);
	ck_assert(str_eq(l.host, "localhost"));
	ck_assert(str_eq(l.tag, "haproxy"));
	ck_assert(str_eq(l.srv, "s2") && str_eq(l.ts, "SC--"));
	ck_assert_int_eq(l.status, 503);
	ck_assert_uint_eq(l.retries, 3);
	ck_assert_int_eq(l.tc_ms, -1);
	ck_assert_int_eq(l.tr_ms, -1);
	ck_assert_int_eq(l.ta_ms, 3007);
	ck_assert(!l.fb); /* "-": the feedback never ran */
	ck_assert((l.present & HAPLOG_F_FB) == 0 && (l.bad & HAPLOG_F_FB) == 0);
	ck_assert(l.msg.len > 0 && l.msg.ptr[0] == 'b');
}
END_TEST

START_TEST(golden_32_abort)
{
	struct haplog_line l;
	ck_assert_int_eq(parse_guarded(line_32_abort, strlen(line_32_abort), &l),
			 HAPLOG_OK);
	ck_assert(str_eq(l.ts, "CD--"));
	ck_assert_int_eq(l.ta_ms, 602);
	ck_assert_int_eq(l.tr_ms, 1);
}
END_TEST

/* Every prefix of the captured lines: never a read past the end; a line cut
 * after warmlane's fields still parses, and one cut before `ts` is missing
 * a field, never an error of another kind. */
START_TEST(every_prefix)
{
	const char *lines[] = { line_26_cut, line_30_refused, line_32_abort };
	for (size_t k = 0; k < 3; k++) {
		size_t n = strlen(lines[k]);
		const char *ts = strstr(lines[k], " ts=");
		size_t after_ts = (size_t)(ts - lines[k]) + 8; /* " ts=XXXX" */
		for (size_t len = 0; len <= n; len++) {
			struct haplog_line l;
			int r = parse_guarded(lines[k], len, &l);
			if (len >= after_ts)
				ck_assert_msg(r == HAPLOG_OK, "line %zu len %zu: %d", k,
					      len, r);
			else
				ck_assert_msg(r == HAPLOG_EEMPTY || r == HAPLOG_EFRAME ||
						      r == HAPLOG_ENOFIELDS ||
						      r == HAPLOG_EMISSING ||
						      r == HAPLOG_EVALUE ||
						      r == HAPLOG_OK,
					      "line %zu len %zu: %d", k, len, r);
		}
	}
}
END_TEST

START_TEST(framings)
{
	struct haplog_line l;
	const char *body = "be=b srv=s st=200 ts=----";
	char buf[256];

	ck_assert_int_eq(parse(body, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RAW);
	ck_assert_int_eq(l.pri, -1);

	snprintf(buf, sizeof(buf), "<14>%s", body);
	ck_assert_int_eq(parse(buf, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_SHORT);
	ck_assert_int_eq(l.pri, 14);

	/* 3164 without a hostname (HAProxy's `local`), day space-padded */
	snprintf(buf, sizeof(buf), "<134>Nov  9 10:21:54 haproxy[1]: %s", body);
	ck_assert_int_eq(parse(buf, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RFC3164);
	ck_assert(str_eq(l.tag, "haproxy"));
	ck_assert_uint_eq(l.host.len, 0);

	/* 3164 without a tag */
	snprintf(buf, sizeof(buf), "<134>Nov 29 10:21:54 %s", body);
	ck_assert_int_eq(parse(buf, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RFC3164);
	ck_assert_uint_eq(l.tag.len, 0);

	/* HAProxy's `timed` ("<PRI>" ISO time) and `iso` (ISO time alone) */
	snprintf(buf, sizeof(buf), "<6>2026-11-29T10:21:54.552318+00:00 %s", body);
	ck_assert_int_eq(parse(buf, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_SHORT);
	ck_assert(l.msg.ptr[0] == 'b');
	snprintf(buf, sizeof(buf), "2026-11-29T10:21:54Z %s", body);
	ck_assert_int_eq(parse(buf, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RAW);
	ck_assert(l.msg.ptr[0] == 'b');
	/* not a time: the message starts there (and has no field first) */
	ck_assert_int_eq(parse("2026-11-29 be=b srv=s st=200 ts=----", &l),
			 HAPLOG_ENOFIELDS);
	ck_assert_int_eq(parse("2026-11-29T be=b srv=s st=200 ts=----", &l),
			 HAPLOG_OK);
	ck_assert_int_eq(parse("2026-11-29Tbe=b srv=s st=200 ts=----", &l),
			 HAPLOG_ENOFIELDS);

	/* 5424 with structured data holding escapes and a BOM */
	snprintf(buf, sizeof(buf),
		 "<134>1 2026-11-29T10:00:00Z host app 12 ID [x@1 a=\"q\\\"]\"][y] "
		 "\xef\xbb\xbf%s", body);
	ck_assert_int_eq(parse(buf, &l), HAPLOG_OK);
	ck_assert_int_eq(l.frame, HAPLOG_FRAME_RFC5424);
	ck_assert(str_eq(l.host, "host") && str_eq(l.tag, "app"));
	ck_assert(l.msg.ptr[0] == 'b');

	/* 5424 without a message */
	ck_assert_int_eq(parse("<134>1 - - - - - -", &l), HAPLOG_ENOFIELDS);

	/* bad <PRI> */
	ck_assert_int_eq(parse("<192>x", &l), HAPLOG_EFRAME);
	ck_assert_int_eq(parse("<>x", &l), HAPLOG_EFRAME);
	ck_assert_int_eq(parse("<1234>x", &l), HAPLOG_EFRAME);
	ck_assert_int_eq(parse("<13", &l), HAPLOG_EFRAME);
	/* 5424 header cut short, unterminated structured data */
	ck_assert_int_eq(parse("<134>1 2026-11-29T10:00:00Z host", &l),
			 HAPLOG_EFRAME);
	ck_assert_int_eq(parse("<134>1 t h a p m [x a=\"]", &l), HAPLOG_EFRAME);
	ck_assert_int_eq(parse("<134>1 t h a p m x be=b", &l), HAPLOG_EFRAME);
}
END_TEST

START_TEST(errors)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("", &l), HAPLOG_EEMPTY);
	ck_assert_int_eq(parse("\n\r\n", &l), HAPLOG_EEMPTY);
	ck_assert_int_eq(parse("Proxy llm_in started.", &l), HAPLOG_ENOFIELDS);
	ck_assert_int_eq(parse("<133>Nov 29 10:21:54 haproxy[1]: Server llm/s1 is DOWN",
			       &l), HAPLOG_ENOFIELDS);
	ck_assert_int_eq(parse("be=b srv=s st=200", &l), HAPLOG_EMISSING);
	ck_assert_int_eq(parse("be=- srv=s st=200 ts=----", &l), HAPLOG_EMISSING);
	ck_assert_int_eq(parse("be=b srv=s st=2000 ts=----", &l), HAPLOG_EVALUE);
	ck_assert((l.bad & HAPLOG_F_ST) != 0);
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---", &l), HAPLOG_EVALUE);
	ck_assert_int_eq(parse("be=b srv=s st=-2 ts=----", &l), HAPLOG_EVALUE);
	ck_assert_int_eq(parse("be=b\x01 srv=s st=200 ts=----", &l), HAPLOG_EVALUE);

	/* longer than HAProxy can send */
	size_t n = HAPLOG_MAX_LEN + 1;
	char *big = malloc(n);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	ck_assert_int_eq(haplog_parse((const uint8_t *)big, n, &l),
			 HAPLOG_ETOOLONG);
	free(big);

	ck_assert_str_eq(haplog_status_name(HAPLOG_EMISSING), "missing");
	ck_assert_str_eq(haplog_status_name(42), "unknown");
	ck_assert_str_eq(haplog_field_name(HAPLOG_F_AKEY), "akey");
	ck_assert_ptr_null(haplog_field_name(3));
}
END_TEST

/* Optional fields: malformed ones are flagged and keep their default; the
 * line is still used. Values: -1 timers, '+' prefixes, booleans. */
START_TEST(optional_fields)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("be=b srv=s st=-1 ts=CR rc=+2 tw=-1 ta=+15 tt=+20 "
			       "bytes=+300 akey=xyz fb=maybe stream=0 at=12.5 "
			       "tr=99999999999999999999", &l), HAPLOG_OK);
	ck_assert_int_eq(l.status, -1);
	ck_assert(str_eq(l.ts, "CR"));
	ck_assert_uint_eq(l.retries, 2);
	ck_assert(l.redispatched);
	ck_assert_int_eq(l.tw_ms, -1);
	ck_assert_int_eq(l.ta_ms, 15);
	ck_assert_int_eq(l.tt_ms, 20);
	ck_assert_uint_eq(l.bytes, 300);
	ck_assert(!l.has_akey);
	ck_assert_int_eq(l.tr_ms, -1);
	ck_assert_uint_eq(l.bad, HAPLOG_F_AKEY | HAPLOG_F_FB | HAPLOG_F_AT |
				 HAPLOG_F_TR);
	ck_assert((l.present & HAPLOG_F_STREAM) != 0 && !l.stream);
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- rc=+", &l), HAPLOG_OK);
	ck_assert(!l.redispatched && (l.bad & HAPLOG_F_RC));
}
END_TEST

/* The first occurrence of a name wins: what a client puts in later parts
 * of the line (a captured header, the request line) changes nothing. */
START_TEST(first_wins)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- id=\"a b\" "
			       "{st=500 ts=SC--} \"GET /?srv=x HTTP/1.1\" srv=evil",
			       &l), HAPLOG_OK);
	ck_assert_int_eq(l.status, 200);
	ck_assert(str_eq(l.ts, "----") && str_eq(l.srv, "s"));
	ck_assert(str_eq(l.id, "a b"));
	/* a malformed first occurrence is not replaced by a later one */
	ck_assert_int_eq(parse("be=b srv=s st=x ts=---- st=200", &l),
			 HAPLOG_EVALUE);
	/* names are compared whole: "bee=" is not "be=", "status=" not "st=" */
	ck_assert_int_eq(parse("ts=---- bee=b srvx=s status=200 s=1", &l),
			 HAPLOG_EMISSING);
	ck_assert_uint_eq(l.present, HAPLOG_F_TS);
	ck_assert_int_eq(parse("status=200 be=b srv=s st=200 ts=----", &l),
			 HAPLOG_ENOFIELDS);
	/* an unclosed quote runs to the end (a line cut by `len`) */
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- id=\"abc", &l),
			 HAPLOG_OK);
	ck_assert(str_eq(l.id, "abc"));
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- id=\"", &l), HAPLOG_OK);
	ck_assert_uint_eq(l.id.len, 0);
}
END_TEST

/* warmlane's fields are the leading tokens; the first other one ends them.
 * A format that lacks a field (an older or edited one: here no fb, wbe,
 * wsrv) cannot have it supplied by what a client controls after them: a
 * captured header with spaces and '=' (HAProxy encodes '"', '{', '|', '}'
 * and '#' in it, not those), a request line, or a unique id with a '"'. */
START_TEST(fields_end_at_first_other_token)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("be=b srv=s st=502 ts=SH-- 127.0.0.1:5 "
			       "{x fb=1 wbe=b wsrv=s st=200 ts=----} "
			       "\"GET /?x HTTP/1.1\"", &l), HAPLOG_OK);
	ck_assert(!l.fb && l.wbe.len == 0 && l.wsrv.len == 0);
	ck_assert_int_eq(l.status, 502);
	ck_assert_uint_eq(l.present, HAPLOG_REQUIRED);
	/* an unknown name ends them as well */
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- hdr=x fb=1 wbe=b", &l),
			 HAPLOG_OK);
	ck_assert(!l.fb && l.wbe.len == 0);
	/* a quoted value's closing quote with a token glued to it */
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- id=\"a\"b fb=1", &l),
			 HAPLOG_OK);
	ck_assert(str_eq(l.id, "a") && !l.fb);
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- id=\"a\"fb=1 wbe=b",
			       &l), HAPLOG_OK);
	ck_assert(!l.fb && l.wbe.len == 0);
	/* a quoted value with spaces, then more fields: all read */
	ck_assert_int_eq(parse("id=\"a b=c\" be=b srv=s st=200 ts=---- fb=1", &l),
			 HAPLOG_OK);
	ck_assert(str_eq(l.id, "a b=c") && l.fb);
	/* required fields after the end are missing */
	ck_assert_int_eq(parse("be=b srv=s - st=200 ts=----", &l), HAPLOG_EMISSING);
	ck_assert_uint_eq(l.present, HAPLOG_F_BE | HAPLOG_F_SRV);
}
END_TEST

/* "-" is HAProxy's "no value": the field is neither present nor bad (so a
 * caller testing `present` never reads its default as a value), and it
 * still holds its name against a later occurrence. */
START_TEST(dash_is_no_value)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=---- at=- akey=- fb=- wbe=- "
			       "stream=- at=1795947704.530 wbe=evil fb=1", &l),
			 HAPLOG_OK);
	ck_assert_uint_eq(l.present, HAPLOG_REQUIRED);
	ck_assert_uint_eq(l.bad, 0);
	ck_assert_uint_eq(l.at_ms, 0);
	ck_assert(!l.has_akey && !l.fb && !l.stream);
	ck_assert_uint_eq(l.wbe.len, 0);
	/* required ones written "-" are missing, not malformed */
	ck_assert_int_eq(parse("be=b srv=- st=200 ts=---- srv=s", &l),
			 HAPLOG_EMISSING);
	ck_assert_uint_eq(l.bad, 0);
}
END_TEST

/* ra: a 429's Retry-After in seconds (HAProxy 2.6's only way to tell it):
 * digits, at most 9; "-" or absent is none, anything else malformed. */
START_TEST(retry_after)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("be=b srv=s st=429 ts=---- ra=20", &l), HAPLOG_OK);
	ck_assert_int_eq(l.retry_after_s, 20);
	ck_assert((l.present & HAPLOG_F_RA) != 0);
	ck_assert_int_eq(parse("be=b srv=s st=429 ts=---- ra=999999999", &l), HAPLOG_OK);
	ck_assert_int_eq(l.retry_after_s, 999999999);
	const char *bad[] = { "ra=1000000000", "ra=1.5", "ra=-5", "ra=", "ra=20s",
			      "ra=\"Wed, 21 Oct 2015 07:28:00 GMT\"" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char line[128];
		snprintf(line, sizeof line, "be=b srv=s st=429 ts=---- %s", bad[i]);
		ck_assert_int_eq(parse(line, &l), HAPLOG_OK);
		ck_assert_msg(l.bad == HAPLOG_F_RA && l.retry_after_s == -1, "%s", bad[i]);
	}
	ck_assert_int_eq(parse("be=b srv=s st=429 ts=---- ra=- ra=7", &l), HAPLOG_OK);
	ck_assert_int_eq(l.retry_after_s, -1);
	ck_assert_uint_eq(l.present, HAPLOG_REQUIRED);
	ck_assert_int_eq(parse("be=b srv=s st=200 ts=----", &l), HAPLOG_OK);
	ck_assert_int_eq(l.retry_after_s, -1);
}
END_TEST

/* Shadow mode's fields (docs/shadow.md): warmlane's would-be server as
 * backend/server and its reason; printable names of at most 255 bytes,
 * like the other names. */
START_TEST(shadow_fields)
{
	struct haplog_line l;
	ck_assert_int_eq(parse("be=llm srv=s2 st=200 ts=---- wbe=- wsrv=- "
			       "sh=llm/s1 shr=affinity fb=- reason=- x", &l),
			 HAPLOG_OK);
	ck_assert(str_eq(l.sh, "llm/s1") && str_eq(l.shr, "affinity"));
	ck_assert(l.wbe.len == 0 && l.wsrv.len == 0 && l.reason.len == 0);
	ck_assert_uint_eq(l.present & (HAPLOG_F_SH | HAPLOG_F_SHR),
			  HAPLOG_F_SH | HAPLOG_F_SHR);
	ck_assert_uint_eq(l.bad, 0);
	/* no shadow choice (reason none): "-" is no value */
	ck_assert_int_eq(parse("be=llm srv=s2 st=200 ts=---- sh=- shr=none", &l),
			 HAPLOG_OK);
	ck_assert(l.sh.len == 0 && str_eq(l.shr, "none"));
	ck_assert_uint_eq(l.present & HAPLOG_F_SH, 0);
	char line[400];
	snprintf(line, sizeof line, "be=b srv=s st=200 ts=---- sh=%0300d", 7);
	ck_assert_int_eq(parse(line, &l), HAPLOG_OK);
	ck_assert(l.sh.len == 0 && l.bad == HAPLOG_F_SH);
	ck_assert_str_eq(haplog_field_name(HAPLOG_F_SHR), "shr");
}
END_TEST

/* The one parser of warmlane's affinity key (the log's akey field and the
 * feedback's akey argument): 16 hex digits exactly, either case. */
START_TEST(akey_parse)
{
	static const struct {
		const char *s;
		bool ok;
		uint64_t v;
	} t[] = {
		{ "0000000000000000", true, 0 },
		{ "ffffffffffffffff", true, UINT64_MAX },
		{ "9F86d081884C7d65", true, 0x9f86d081884c7d65ull },
		{ "0123456789abcdef", true, 0x0123456789abcdefull },
		{ "123456789abcdef", false, 0 },   /* 15 */
		{ "0123456789abcdef0", false, 0 }, /* 17 */
		{ "0x23456789abcdef", false, 0 },
		{ "0123456789abcdeg", false, 0 },
		{ "012345678 abcdef", false, 0 },
		{ "-123456789abcdef", false, 0 },
		{ "", false, 0 },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t v = 42;
		size_t n = strlen(t[i].s);
		bool ok = haplog_akey_parse(guard_place(t[i].s, n), n, &v);
		ck_assert_msg(ok == t[i].ok, "%s", t[i].s);
		ck_assert_uint_eq(v, t[i].ok ? t[i].v : 42);
	}
	/* bytes beyond the ASCII letters (':' '@' 'G' '`' 'g' and high bit) */
	uint8_t b[16];
	memset(b, '0', sizeof(b));
	static const uint8_t odd[] = { '/', ':', '@', 'G', '`', 'g', 0x80, 0xff,
				       0 };
	for (size_t i = 0; i < sizeof(odd); i++) {
		uint64_t v;
		b[15] = odd[i];
		ck_assert(!haplog_akey_parse(b, sizeof(b), &v));
	}
	/* Every byte in every position, against the definition. */
	for (size_t at = 0; at < 16; at++) {
		for (unsigned c = 0; c < 256; c++) {
			memcpy(b, "0123456789abcdef", 16);
			b[at] = (uint8_t)c;
			int d = c >= '0' && c <= '9' ? (int)c - '0'
				: c >= 'a' && c <= 'f' ? (int)c - 'a' + 10
				: c >= 'A' && c <= 'F' ? (int)c - 'A' + 10 : -1;
			uint64_t want = 0x0123456789abcdefull;
			unsigned shift = (unsigned)(15 - at) * 4;
			want = (want & ~(15ull << shift)) | ((uint64_t)(d & 15) << shift);
			uint64_t v = 42;
			bool ok = haplog_akey_parse(b, sizeof(b), &v);
			ck_assert_msg(ok == (d >= 0), "byte %u at %zu", c, at);
			ck_assert_uint_eq(v, d >= 0 ? want : 42);
		}
	}
}
END_TEST

/* Byte by byte: each prefix of a line parsed on its own, against the
 * guard page, and a few bytes flipped in every position. */
START_TEST(flips)
{
	size_t n = strlen(line_30_refused);
	char buf[sizeof(line_30_refused)];
	for (size_t i = 0; i < n; i++) {
		static const char subs[] = { '\0', ' ', '=', '"', '<', '-', '\n',
					     '\xff' };
		for (size_t k = 0; k < sizeof(subs); k++) {
			struct haplog_line l;
			memcpy(buf, line_30_refused, n);
			buf[i] = subs[k];
			int r = parse_guarded(buf, n, &l);
			ck_assert(r <= HAPLOG_OK && r >= HAPLOG_EVALUE);
		}
	}
}
END_TEST

static Suite *haplog_suite(void)
{
	Suite *s = suite_create("haplog");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, golden_26_cut);
	tcase_add_test(tc, golden_30_refused);
	tcase_add_test(tc, golden_32_abort);
	tcase_add_test(tc, every_prefix);
	tcase_add_test(tc, framings);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, optional_fields);
	tcase_add_test(tc, first_wins);
	tcase_add_test(tc, fields_end_at_first_other_token);
	tcase_add_test(tc, dash_is_no_value);
	tcase_add_test(tc, retry_after);
	tcase_add_test(tc, akey_parse);
	tcase_add_test(tc, shadow_fields);
	tcase_add_test(tc, flips);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(haplog_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
