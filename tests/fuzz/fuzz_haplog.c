/* fuzz_haplog.c - libFuzzer harness: one log datagram through haplog_parse. */
#include <string.h>

#include "fuzz.h"
#include "haplog.h"

/* A view is empty or lies inside p[0..len). */
static void in_input(struct haplog_str s, const uint8_t *p, size_t len)
{
	if (s.len == 0)
		return;
	FUZZ_CHECK(s.ptr >= p && s.len <= len &&
		   (size_t)(s.ptr - p) <= len - s.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct haplog_line l, m;
	int r = haplog_parse(data, size, &l);

	FUZZ_CHECK(r <= HAPLOG_OK && r >= HAPLOG_EVALUE);
	FUZZ_CHECK(strcmp(haplog_status_name(r), "unknown") != 0);
	if (r == HAPLOG_EEMPTY || r == HAPLOG_ETOOLONG || r == HAPLOG_EFRAME)
		return 0;
	FUZZ_CHECK(l.frame >= HAPLOG_FRAME_RAW && l.frame <= HAPLOG_FRAME_RFC5424);
	FUZZ_CHECK((l.pri == -1) == (l.frame == HAPLOG_FRAME_RAW));
	FUZZ_CHECK(l.pri >= -1 && l.pri <= 191);
	FUZZ_CHECK((l.present & l.bad) == 0);
	FUZZ_CHECK(((l.present | l.bad) >> HAPLOG_F_COUNT) == 0);
	const struct haplog_str views[] = { l.host, l.tag, l.msg, l.be, l.srv,
		l.wbe, l.wsrv, l.key, l.reason, l.id, l.ts, l.sh, l.shr };
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
		in_input(views[i], data, size);
	if (r == HAPLOG_OK) {
		FUZZ_CHECK((l.present & HAPLOG_REQUIRED) == HAPLOG_REQUIRED);
		FUZZ_CHECK(l.be.len > 0 && l.srv.len > 0);
		FUZZ_CHECK(l.ts.len == 2 || l.ts.len == 4);
		FUZZ_CHECK(l.status >= -1 && l.status <= 999);
	}
	FUZZ_CHECK(l.tw_ms >= -1 && l.tc_ms >= -1 && l.tr_ms >= -1 &&
		   l.ta_ms >= -1 && l.tt_ms >= -1);
	FUZZ_CHECK(l.has_akey == ((l.present & HAPLOG_F_AKEY) != 0));
	FUZZ_CHECK((l.retry_after_s >= 0) == ((l.present & HAPLOG_F_RA) != 0));
	FUZZ_CHECK(l.retry_after_s <= 999999999);
	/* A string field is present exactly when it has a value ("-" is
	 * none). */
	const struct {
		uint32_t f;
		struct haplog_str v;
	} strs[] = { { HAPLOG_F_BE, l.be }, { HAPLOG_F_SRV, l.srv },
		     { HAPLOG_F_WBE, l.wbe }, { HAPLOG_F_WSRV, l.wsrv },
		     { HAPLOG_F_KEY, l.key }, { HAPLOG_F_REASON, l.reason },
		     { HAPLOG_F_TS, l.ts }, { HAPLOG_F_SH, l.sh },
		     { HAPLOG_F_SHR, l.shr } };
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		FUZZ_CHECK(((l.present & strs[i].f) != 0) == (strs[i].v.len > 0));
	/* The message alone, as a raw datagram, holds the same fields (when
	 * the raw framing takes it whole: no leading ISO time). */
	if (l.frame != HAPLOG_FRAME_RAW && l.msg.len > 0 &&
	    l.msg.ptr[0] != '<') {
		int r2 = haplog_parse(l.msg.ptr, l.msg.len, &m);
		if (r2 != HAPLOG_EEMPTY && m.msg.len == l.msg.len) {
			FUZZ_CHECK(r2 == r);
			FUZZ_CHECK(m.present == l.present && m.bad == l.bad);
			FUZZ_CHECK(m.status == l.status && m.tt_ms == l.tt_ms &&
				   m.bytes == l.bytes && m.akey == l.akey);
		}
	}
	return 0;
}
