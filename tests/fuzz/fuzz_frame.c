/* fuzz_frame.c - libFuzzer harness: a byte stream through the frame decoder,
 * each frame's payload through its parser. */
#include <string.h>

#include "fuzz.h"

static void reencode(const struct spop_frame *f, const uint8_t *in, size_t n)
{
	uint8_t out[SPOP_DEFAULT_FRAME_SIZE + 4];
	struct spop_writer w;
	ptrdiff_t r;

	/* Varints have one encoding each, so the frame comes back identical. */
	spop_frame_begin(&w, out, sizeof(out), f->type, f->flags,
			 f->stream_id, f->frame_id);
	spop_put_bytes(&w, f->payload, f->payload_len);
	r = spop_frame_finish(&w);
	FUZZ_CHECK(r > 0 && (size_t)r == n);
	FUZZ_CHECK(memcmp(out, in, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	size_t n = size;

	for (;;) {
		struct spop_frame f;
		enum spop_status st = SPOP_ERR_NONE;
		ptrdiff_t r = spop_frame_decode(p, n, SPOP_DEFAULT_FRAME_SIZE,
						&f, &st);

		if (r == SPOP_NEED_MORE) {
			FUZZ_CHECK(n < 4 || ((size_t)p[0] << 24 |
					     (size_t)p[1] << 16 |
					     (size_t)p[2] << 8 | p[3]) > n - 4);
			break;
		}
		if (r < 0) {
			FUZZ_CHECK(r == SPOP_EPROTO);
			FUZZ_CHECK(st == SPOP_ERR_TOO_BIG ||
				   st == SPOP_ERR_INVALID ||
				   st == SPOP_ERR_FRAG_NOT_SUPPORTED);
			break;
		}
		FUZZ_CHECK(r >= SPOP_FRAME_HEADER_MIN && (size_t)r <= n);
		FUZZ_CHECK(f.payload >= p + SPOP_FRAME_HEADER_MIN &&
			   f.payload + f.payload_len == p + r);
		FUZZ_CHECK(f.flags & SPOP_FLAG_FIN);
		reencode(&f, p, (size_t)r);
		{
			/* What follows the frame does not matter, and one
			 * byte less is incomplete, not invalid. */
			struct spop_frame g;

			FUZZ_CHECK(spop_frame_decode(p, (size_t)r,
						     SPOP_DEFAULT_FRAME_SIZE,
						     &g, &st) == r);
			FUZZ_CHECK(spop_frame_decode(p, (size_t)r - 1,
						     SPOP_DEFAULT_FRAME_SIZE,
						     &g, &st) ==
				   SPOP_NEED_MORE);
		}
		switch (f.type) {
		case SPOP_FRAME_HAPROXY_HELLO:
			fuzz_hello(f.payload, f.payload_len);
			break;
		case SPOP_FRAME_HAPROXY_DISCONNECT:
		case SPOP_FRAME_AGENT_DISCONNECT:
			fuzz_disconnect(f.payload, f.payload_len);
			break;
		case SPOP_FRAME_NOTIFY:
			fuzz_notify(f.payload, f.payload_len);
			break;
		case SPOP_FRAME_ACK:
			fuzz_actions(f.payload, f.payload_len);
			break;
		case SPOP_FRAME_AGENT_HELLO:
			fuzz_kv(f.payload, f.payload_len);
			break;
		case SPOP_FRAME_UNSET:
			FUZZ_CHECK(0); /* a fragment is never returned */
			break;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}
