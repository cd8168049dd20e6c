/* fuzz_artefact.c - libFuzzer harness: one endpoint description (/v1/models, /props) through art_fingerprint. */
#include <string.h>

#include "artefact.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct art_info a, b;
	int r = art_fingerprint(p, size, &a);

	FUZZ_CHECK(r <= ART_OK && r >= ART_ENONE);
	FUZZ_CHECK(strcmp(art_status_name(r), "unknown") != 0);
	FUZZ_CHECK((r == ART_OK) == (a.fingerprint != 0));
	FUZZ_CHECK((r == ART_OK) == (a.fields > 0));
	if (r == ART_EJSON || r == ART_EDEPTH)
		FUZZ_CHECK(a.err_off <= size);
	/* Deterministic, and blanks around the document change nothing. */
	FUZZ_CHECK(art_fingerprint(p, size, &b) == r && b.fingerprint == a.fingerprint);
	if (r != ART_EDEPTH && size < 4096) {
		char buf[4096 + 2];
		buf[0] = ' ';
		memcpy(buf + 1, p, size);
		buf[size + 1] = '\n';
		int r2 = art_fingerprint(buf, size + 2, &b);
		if (r == ART_OK || r == ART_ENONE)
			FUZZ_CHECK(r2 == r && b.fingerprint == a.fingerprint);
	}
	return 0;
}
