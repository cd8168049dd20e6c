/* fuzz_hello.c - libFuzzer harness: a raw HAPROXY-HELLO payload through
 * spop_hello_parse and spop_hello_negotiate. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_hello(data, size);
	return 0;
}
