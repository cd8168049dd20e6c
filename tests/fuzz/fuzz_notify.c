/* fuzz_notify.c - libFuzzer harness: a raw NOTIFY payload through the
 * message and argument readers (and, on the same bytes, the KV-list,
 * action and DISCONNECT readers). */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_notify(data, size);
	fuzz_kv(data, size);
	fuzz_actions(data, size);
	fuzz_disconnect(data, size);
	return 0;
}
