/* fuzz_promtext.c - libFuzzer harness: one engine /metrics body through prom_load_parse and prom_line. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "promtext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct prom_load l;
	int r = prom_load_parse(p, size, &l);

	FUZZ_CHECK(r <= PROM_OK && r >= PROM_ENOLOAD);
	FUZZ_CHECK(strcmp(prom_status_name(r), "unknown") != 0);
	FUZZ_CHECK(l.samples <= l.lines && l.lines <= size + 1);
	if (r == PROM_OK) {
		FUZZ_CHECK(l.engine > PROM_ENGINE_NONE && l.engine < PROM_ENGINE_COUNT);
		FUZZ_CHECK(l.running >= 0 && l.waiting >= 0 &&
			   l.running + l.waiting <= PROM_COUNT_MAX);
		FUZZ_CHECK(l.kv_usage == -1 || (l.kv_usage >= 0 && l.kv_usage <= 1));
	} else {
		FUZZ_CHECK(l.engine == PROM_ENGINE_NONE);
	}
	if (r == PROM_EBAD || r == PROM_EVALUE)
		FUZZ_CHECK(l.err_line >= 1 && l.err_line <= l.lines);
	if (r == PROM_EBAD)
		FUZZ_CHECK(l.err_col >= 1);

	/* Line by line: views inside the line, the same verdict as the body. */
	size_t i = 0;
	uint32_t line = 0;
	while (i < size) {
		const char *nl = memchr(p + i, '\n', size - i);
		size_t n = nl != NULL ? (size_t)(nl - (p + i)) : size - i;
		struct prom_sample s;
		size_t col = 0;
		int lr = prom_line(p + i, n, &s, &col);
		line++;
		FUZZ_CHECK(lr == 0 || lr == 1 || lr == PROM_EBAD);
		if (lr == PROM_EBAD) {
			FUZZ_CHECK(col >= 1 && col <= n + 1);
			/* The body stops at its first fault: this line's,
			 * or a bad value on an earlier line. */
			FUZZ_CHECK((r == PROM_EBAD && l.err_line == line &&
				    l.err_col == col) ||
				   (r == PROM_EVALUE && l.err_line < line));
			break;
		}
		if (lr == 1) {
			const char *b = p + i;
			FUZZ_CHECK(s.name >= b && s.name_len >= 1 &&
				   s.name_len <= n && (size_t)(s.name - b) <= n - s.name_len);
			if (s.labels != NULL)
				FUZZ_CHECK(s.labels > b && s.labels_len < n &&
					   (size_t)(s.labels - b) <= n - s.labels_len);
			else
				FUZZ_CHECK(s.labels_len == 0);
		}
		i += n + (nl != NULL ? 1 : 0);
	}
	return 0;
}
