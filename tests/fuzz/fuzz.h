/* fuzz.h - shared by the libFuzzer harnesses and their standalone driver. */
#ifndef WARMLANE_FUZZ_H
#define WARMLANE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "spop.h"

/* The libFuzzer entry point each harness defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: abort so that libFuzzer and the replay tests see it. */
#define FUZZ_CHECK(c) \
	do { \
		if (!(c)) \
			fuzz_fail(#c, __FILE__, __LINE__); \
	} while (0)

void fuzz_fail(const char *what, const char *file, int line);

/* Walkers over one payload; each checks the codec's invariants (views stay
 * inside the payload, statuses are the documented ones, decoded values
 * encode back to the same bytes) and returns what the parser returned. */
int fuzz_notify(const uint8_t *p, size_t len);
int fuzz_kv(const uint8_t *p, size_t len);
int fuzz_actions(const uint8_t *p, size_t len);
int fuzz_hello(const uint8_t *p, size_t len);
int fuzz_disconnect(const uint8_t *p, size_t len);

#endif
