/* runtime_csv.c - the CSV of `show stat`, parsed line by line into server rows; no I/O. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "runtime.h"

static const char *const runtime_col_names[RUNTIME_COL_COUNT] = {
	[RUNTIME_COL_PXNAME] = "pxname", [RUNTIME_COL_SVNAME] = "svname",
	[RUNTIME_COL_SCUR] = "scur",	 [RUNTIME_COL_QCUR] = "qcur",
	[RUNTIME_COL_STATUS] = "status", [RUNTIME_COL_WEIGHT] = "weight",
	[RUNTIME_COL_TYPE] = "type",	 [RUNTIME_COL_MODE] = "mode",
	[RUNTIME_COL_BCK] = "bck",	 [RUNTIME_COL_SID] = "sid",
	[RUNTIME_COL_SLIM] = "slim",
	[RUNTIME_COL_CHECK_STATUS] = "check_status",
	[RUNTIME_COL_CHECK_DURATION] = "check_duration",
};

/* ---- CSV ---------------------------------------------------------------- */

void runtime_csv_init(struct runtime_csv *p)
{
	for (int i = 0; i < RUNTIME_COL_COUNT; i++)
		p->col[i] = -1;
	p->header = false;
	p->stat_end = false;
	runtime_peers_init(&p->peers);
	p->skipping = false;
	p->len = 0;
	p->rows = p->dropped = p->bad = 0;
}

static bool view_is(struct core_str v, const char *s)
{
	size_t n = strlen(s);
	return v.len == n && memcmp(v.ptr, s, n) == 0;
}

/* Whether a check_status says a layer-7 check passed: L7OK (L7OKC too,
 * a 404 with disable-on-404), "* " first while the next check runs
 * (HAProxy then still shows the last one's duration). */
static bool check_l7ok(struct core_str v)
{
	if (v.len >= 2 && v.ptr[0] == '*' && v.ptr[1] == ' ') {
		v.ptr += 2;
		v.len -= 2;
	}
	return v.len >= 4 && memcmp(v.ptr, "L7OK", 4) == 0;
}

/* Splits line into fields (commas; a field may be double-quoted with ""
 * inside, as HAProxy's csv_enc writes descriptions) and calls back with
 * each one's index and view, up to field last. Returns the number of
 * fields seen. */
static int csv_fields(const char *line, size_t len, int last,
		      struct core_str *out, const int *want, int nwant)
{
	size_t i = 0;
	int f = 0;
	for (;;) {
		size_t start = i, end;
		if (i < len && line[i] == '"') {
			start = ++i;
			while (i < len) {
				if (line[i] == '"') {
					if (i + 1 < len && line[i + 1] == '"') {
						i += 2;
						continue;
					}
					break;
				}
				i++;
			}
			end = i;
			if (i < len) /* the closing quote */
				i++;
			while (i < len && line[i] != ',')
				i++;
		} else {
			while (i < len && line[i] != ',')
				i++;
			end = i;
		}
		for (int w = 0; w < nwant; w++)
			if (want[w] == f)
				out[w] = (struct core_str){ line + start, end - start };
		f++;
		if (f > last || i >= len)
			return f;
		i++; /* the comma */
	}
}

static int csv_header(struct runtime_csv *p, const char *line, size_t len)
{
	/* "# pxname,svname,...": the names, in this version's order. */
	size_t i = 1;
	while (i < len && line[i] == ' ')
		i++;
	for (int c = 0; c < RUNTIME_COL_COUNT; c++)
		p->col[c] = -1;
	int f = 0;
	while (i <= len) {
		size_t s = i;
		while (i < len && line[i] != ',')
			i++;
		struct core_str name = { line + s, i - s };
		for (int c = 0; c < RUNTIME_COL_COUNT; c++)
			if (p->col[c] < 0 && view_is(name, runtime_col_names[c]))
				p->col[c] = f;
		f++;
		i++;
	}
	for (int c = RUNTIME_COL_PXNAME; c <= RUNTIME_COL_STATUS; c++)
		if (p->col[c] < 0)
			return -EPROTO;
	p->header = true;
	return 0;
}

/* Decimal digits into a uint32 (empty: 0). */
static bool parse_u32(struct core_str s, uint32_t *v)
{
	uint64_t x = 0;
	for (size_t i = 0; i < s.len; i++) {
		if (s.ptr[i] < '0' || s.ptr[i] > '9')
			return false;
		x = x * 10 + (uint64_t)(s.ptr[i] - '0');
		if (x > UINT32_MAX)
			return false;
	}
	*v = (uint32_t)x;
	return true;
}

enum core_admin runtime_status_admin(struct core_str status, bool *known)
{
	static const struct {
		const char *word;
		enum core_admin admin;
	} words[] = {
		{ "UP", CORE_ADMIN_ENABLED },	 { "DOWN", CORE_ADMIN_DOWN },
		{ "MAINT", CORE_ADMIN_MAINT },	 { "DRAIN", CORE_ADMIN_DRAIN },
		{ "NOLB", CORE_ADMIN_NOLB },
	};
	*known = true;
	if (view_is(status, "no check"))
		return CORE_ADMIN_ENABLED;
	/* The first word: "UP 1/3", "MAINT (via llm/s3)", "DOWN (agent)". */
	struct core_str w = status;
	const char *sp = w.len > 0 ? memchr(w.ptr, ' ', w.len) : NULL;
	if (sp != NULL)
		w.len = (size_t)(sp - w.ptr);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (view_is(w, words[i].word))
			return words[i].admin;
	*known = false;
	return CORE_ADMIN_DOWN;
}

/* One complete line (no newline). */
static int csv_line(struct runtime_csv *p, const char *line, size_t len,
		    runtime_row_fn fn, void *arg)
{
	if (p->stat_end) {
		runtime_peers_line(&p->peers, line, len);
		return 0;
	}
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0) {
		p->stat_end = p->header;
		return 0;
	}
	if (line[0] == '#') {
		if (csv_header(p, line, len) < 0)
			return -EPROTO;
		return 0;
	}
	if (!p->header) { /* an error message, say "Permission denied" */
		p->bad++;
		return 0;
	}

	struct core_str v[RUNTIME_COL_COUNT] = { 0 };
	int last = 0;
	for (int c = 0; c < RUNTIME_COL_COUNT; c++)
		if (p->col[c] > last)
			last = p->col[c];
	int nf = csv_fields(line, len, last, v, p->col, RUNTIME_COL_COUNT);
	if (nf <= p->col[RUNTIME_COL_STATUS] || nf <= p->col[RUNTIME_COL_SCUR] ||
	    nf <= p->col[RUNTIME_COL_QCUR] || nf <= p->col[RUNTIME_COL_SVNAME] ||
	    nf <= p->col[RUNTIME_COL_PXNAME]) {
		p->bad++;
		return 0;
	}
	struct core_str sv = v[RUNTIME_COL_SVNAME];
	if (p->col[RUNTIME_COL_TYPE] >= 0 && nf > p->col[RUNTIME_COL_TYPE]) {
		if (!view_is(v[RUNTIME_COL_TYPE], "2"))
			return 0; /* frontend, backend, listener */
	} else if (view_is(sv, "FRONTEND") || view_is(sv, "BACKEND")) {
		return 0;
	}

	struct runtime_row row = {
		.pxname = v[RUNTIME_COL_PXNAME],
		.svname = sv,
		.mode = v[RUNTIME_COL_MODE],
		.weight = -1,
		.sid = -1,
		.slim = -1,
		.check_ms = -1,
	};
	uint32_t w;
	if (row.pxname.len == 0 || row.svname.len == 0 ||
	    !parse_u32(v[RUNTIME_COL_SCUR], &row.scur) ||
	    !parse_u32(v[RUNTIME_COL_QCUR], &row.qcur)) {
		p->bad++;
		return 0;
	}
	if (p->col[RUNTIME_COL_WEIGHT] >= 0 && v[RUNTIME_COL_WEIGHT].len > 0 &&
	    parse_u32(v[RUNTIME_COL_WEIGHT], &w))
		row.weight = w;
	row.backup = p->col[RUNTIME_COL_BCK] >= 0 && view_is(v[RUNTIME_COL_BCK], "1");
	if (p->col[RUNTIME_COL_SID] >= 0 && v[RUNTIME_COL_SID].len > 0 &&
	    parse_u32(v[RUNTIME_COL_SID], &w))
		row.sid = w;
	if (p->col[RUNTIME_COL_SLIM] >= 0 && v[RUNTIME_COL_SLIM].len > 0 &&
	    parse_u32(v[RUNTIME_COL_SLIM], &w))
		row.slim = w;
	if (p->col[RUNTIME_COL_CHECK_STATUS] >= 0 && p->col[RUNTIME_COL_CHECK_DURATION] >= 0 &&
	    check_l7ok(v[RUNTIME_COL_CHECK_STATUS]) && v[RUNTIME_COL_CHECK_DURATION].len > 0 &&
	    parse_u32(v[RUNTIME_COL_CHECK_DURATION], &w))
		row.check_ms = w;
	row.admin = runtime_status_admin(v[RUNTIME_COL_STATUS], &row.status_known);
	p->rows++;
	fn(arg, &row);
	return 0;
}

ptrdiff_t runtime_csv_feed_part(struct runtime_csv *p, const char *buf,
				size_t n, runtime_row_fn fn, void *arg)
{
	size_t total = n;
	p->pause = false;
	while (n > 0) {
		const char *nl = memchr(buf, '\n', n);
		size_t take = nl != NULL ? (size_t)(nl - buf) : n;
		if (!p->skipping) {
			if (take > sizeof(p->line) - p->len) {
				/* Over-long: dropped up to its newline (in
				 * the peers dump: a peer line may be the one
				 * lost, so its verdict is unknown). */
				if (p->stat_end)
					p->peers.lost = true;
				else
					p->dropped++;
				p->skipping = true;
				p->len = 0;
			} else {
				memcpy(p->line + p->len, buf, take);
				p->len += take;
			}
		}
		if (nl == NULL)
			return (ptrdiff_t)total;
		if (!p->skipping) {
			int r = csv_line(p, p->line, p->len, fn, arg);
			if (r < 0)
				return r;
		}
		p->skipping = false;
		p->len = 0;
		buf += take + 1;
		n -= take + 1;
		if (p->pause) {
			p->pause = false;
			return (ptrdiff_t)(total - n);
		}
	}
	return (ptrdiff_t)total;
}

int runtime_csv_feed(struct runtime_csv *p, const char *buf, size_t n,
		     runtime_row_fn fn, void *arg)
{
	while (n > 0) {
		ptrdiff_t used = runtime_csv_feed_part(p, buf, n, fn, arg);
		if (used < 0)
			return (int)used;
		buf += used;
		n -= (size_t)used;
	}
	return 0;
}

int runtime_csv_finish(struct runtime_csv *p, runtime_row_fn fn, void *arg)
{
	if (!p->skipping && p->len > 0) {
		int r = csv_line(p, p->line, p->len, fn, arg);
		if (r < 0)
			return r;
	}
	p->skipping = false;
	p->len = 0;
	return p->header ? 0 : -EPROTO;
}
