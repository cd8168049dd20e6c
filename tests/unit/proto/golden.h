/* golden.h - SPOP test vectors (from docs/spop.md) and test helpers for proto. */
#ifndef WARMLANE_TEST_GOLDEN_H
#define WARMLANE_TEST_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

struct golden {
	const char *name;
	const uint8_t *bytes;
	size_t len;
};

/* Frames of docs/spop.md, byte for byte; the 2.6.12 HELLO with a 36-byte uuid. */
extern const struct golden golden_hello_26;      /* HAPROXY-HELLO, 133 bytes */
extern const struct golden golden_hello_hc;      /* health-check HELLO */
extern const struct golden golden_agent_hello;   /* minimal AGENT-HELLO */
extern const struct golden golden_ack;           /* ACK, stream-id F3 BC 78 */
extern const struct golden golden_disconnect;    /* idle-timeout DISCONNECT */
/* Built for these tests, shaped like what 2.6 sends for the route message:
 * several messages, empty argument names, NULL values, INT64 -5. */
extern const struct golden golden_notify;

/* Every golden frame above, and how many. */
extern const struct golden *const golden_frames[];
extern const size_t golden_frames_count;

/* Copies len bytes so that they end exactly at a PROT_NONE page: any read
 * past the end faults. Returns the copy (valid until the next call), or
 * aborts the test if mmap fails. len must be at most one page. */
const uint8_t *guard_place(const void *p, size_t len);

/* A writable buffer of len bytes (filled with 0xaa) ending at the guard
 * page: a write past the end faults. Shares the page with guard_place. */
uint8_t *guard_buf(size_t len);

#endif
