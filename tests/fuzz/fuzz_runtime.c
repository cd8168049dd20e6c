/* fuzz_runtime.c - libFuzzer harness: HAProxy's `show stat` CSV and the `show peers` dump after it (agent/runtime_csv.c, runtime_peers.c), whole and in chunks, with pauses. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "runtime.h"

/* What the rows said, folded: the same bytes fed any way must give it. */
struct seen {
	uint64_t rows, digest;
	enum core_peers peers; /* what the dump after the CSV said */
	int pause_every; /* 0: never pause */
	struct runtime_csv *p;
};

static uint64_t fold(uint64_t h, const void *b, size_t n)
{
	const uint8_t *s = b;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull; /* a field's end */
}

static void in_line(const struct runtime_csv *p, struct core_str v)
{
	if (v.len == 0)
		return;
	FUZZ_CHECK(v.ptr >= p->line && v.len <= sizeof(p->line) &&
		   (size_t)(v.ptr - p->line) <= sizeof(p->line) - v.len);
}

static void row_cb(void *arg, const struct runtime_row *row)
{
	struct seen *s = arg;
	FUZZ_CHECK(row->pxname.len > 0 && row->svname.len > 0);
	in_line(s->p, row->pxname);
	in_line(s->p, row->svname);
	in_line(s->p, row->mode);
	FUZZ_CHECK((unsigned)row->admin < CORE_ADMIN_COUNT);
	FUZZ_CHECK(row->status_known || row->admin == CORE_ADMIN_DOWN);
	FUZZ_CHECK(row->weight >= -1 && row->weight <= UINT32_MAX);
	FUZZ_CHECK(row->sid >= -1 && row->sid <= UINT32_MAX);
	FUZZ_CHECK(row->slim >= -1 && row->slim <= UINT32_MAX);
	FUZZ_CHECK(row->check_ms >= -1 && row->check_ms <= UINT32_MAX);
	uint64_t h = s->digest;
	h = fold(h, row->pxname.ptr, row->pxname.len);
	h = fold(h, row->svname.ptr, row->svname.len);
	h = fold(h, row->mode.ptr, row->mode.len);
	int64_t nums[] = { row->scur, row->qcur, row->admin, row->status_known,
			   row->weight, row->backup, row->sid, row->slim,
			   row->check_ms };
	s->digest = fold(h, nums, sizeof(nums));
	s->rows++;
	if (s->pause_every > 0 && s->rows % (uint64_t)s->pause_every == 0)
		s->p->pause = true;
}

static struct runtime_csv parser;

/* Feeds text in chunks of chunk bytes (0: whole), pausing every
 * pause_every rows; returns the verdict and fills *s. */
static int feed(const char *text, size_t len, size_t chunk, int pause_every,
		struct seen *s)
{
	struct runtime_csv *p = &parser;
	runtime_csv_init(p);
	*s = (struct seen){ .digest = 0xcbf29ce484222325ull,
			    .pause_every = pause_every, .p = p };
	size_t off = 0;
	int rc = 0;
	while (off < len && rc == 0) {
		size_t n = chunk == 0 || len - off < chunk ? len - off : chunk;
		if (pause_every > 0) {
			ptrdiff_t used = runtime_csv_feed_part(p, text + off, n, row_cb, s);
			if (used < 0) {
				rc = (int)used;
				break;
			}
			FUZZ_CHECK((size_t)used <= n);
			/* a pause stops after a whole line: something was used */
			FUZZ_CHECK(used > 0 || n == 0);
			off += (size_t)used;
		} else {
			rc = runtime_csv_feed(p, text + off, n, row_cb, s);
			off += n;
		}
	}
	FUZZ_CHECK(rc == 0 || rc == -EPROTO);
	if (rc == 0)
		rc = runtime_csv_finish(p, row_cb, s);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO);
	FUZZ_CHECK(p->rows <= s->rows); /* finish may add the last one */
	s->peers = runtime_peers_end(&p->peers);
	FUZZ_CHECK(p->peers.connected <= p->peers.remote);
	FUZZ_CHECK(s->peers == CORE_PEERS_UNKNOWN || p->peers.sections > 0);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	/* The first byte: the chunk size and the pause of the second way. */
	size_t chunk = 1 + (data[0] & 0x3f);
	int pause_every = 1 + (data[0] >> 6);
	const char *text = (const char *)data + 1;
	size_t len = size - 1;

	struct seen whole, cut, paused;
	int a = feed(text, len, 0, 0, &whole);
	int b = feed(text, len, chunk, 0, &cut);
	int c = feed(text, len, chunk, pause_every, &paused);
	FUZZ_CHECK(a == b && b == c);
	if (a == 0) {
		FUZZ_CHECK(whole.rows == cut.rows && whole.digest == cut.digest);
		FUZZ_CHECK(whole.rows == paused.rows && whole.digest == paused.digest);
		FUZZ_CHECK(whole.peers == cut.peers && whole.peers == paused.peers);
	}
	return 0;
}
