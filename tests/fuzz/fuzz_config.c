/* fuzz_config.c - libFuzzer harness: arbitrary bytes as a configuration file (agent/config*.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CFG_CHECK(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", \
				__FILE__, __LINE__, #c); \
			abort(); \
		} \
	} while (0)

/* Whatever the bytes: a clean refusal (every line "name:..." and ending
 * in a newline) or a configuration that loads again the same way. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char err[16384];
	struct config cfg;
	CFG_CHECK(config_init(&cfg) == 0);
	int r = config_load_data(&cfg, "f.yaml", (const char *)data, size, err,
				 sizeof(err));
	CFG_CHECK(r == 0 || r == -EINVAL || r == -EFBIG || r == -ENOMEM);
	if (r == -EINVAL) {
		size_t n = strlen(err);
		CFG_CHECK(n > 0 && err[n - 1] == '\n');
		for (const char *p = err; *p != '\0';) {
			CFG_CHECK(strncmp(p, "f.yaml:", 7) == 0 ||
				  strncmp(p, "(more errors", 12) == 0);
			p = strchr(p, '\n') + 1;
		}
	}
	if (r == 0) {
		CFG_CHECK(cfg.n_listen > 0);
		for (size_t i = 0; i < cfg.n_endpoints; i++)
			CFG_CHECK(cfg.endpoints[i].backend[0] != '\0' &&
				  cfg.endpoints[i].server[0] != '\0');
	}
	config_finish(&cfg);
	return 0;
}
