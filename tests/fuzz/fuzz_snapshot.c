/* fuzz_snapshot.c - libFuzzer harness: arbitrary bytes through the state snapshot loader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "snapshot_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SNAP_CHECK(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", \
				__FILE__, __LINE__, #c); \
			abort(); \
		} \
	} while (0)

/* The endpoints the seeds name (gen: tests/unit/agent/test_snapshot.c's
 * set), so that valid inputs reach the import. */
static struct core *snap_core(void)
{
	static const char *const names[][3] = {
		{ "llm", "gpu1", NULL },
		{ "llm", "gpu2", "k1" },
		{ "llm", "gpu3", NULL },
	};
	struct core_params p;
	struct core *c;
	core_params_defaults(&p);
	p.affinity_max_entries = 4096;
	SNAP_CHECK(core_create(&c, &p) == 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct core_endpoint_config ec = {
			.backend = names[i][0], .server = names[i][1],
			.key_id = names[i][2], .weight = 1,
		};
		SNAP_CHECK(core_endpoint_add(c, &ec, 0) >= 0);
	}
	return c;
}

/* Loads buf; a load that succeeds must be self-consistent and survive an
 * encode/load round trip. */
static void snap_one(const uint8_t *buf, size_t len)
{
	struct core *c = snap_core();
	struct snapshot_result res;
	char err[512];
	int rc = snapshot_load_buffer(c, buf, len, 1000, INT64_C(1800000000000),
				      &res, err, sizeof(err));
	SNAP_CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOTSUP ||
		   rc == -EFBIG || rc == -ENOMEM);
	if (rc == 0) {
		struct core_stats cs;
		core_stats(c, &cs);
		SNAP_CHECK(res.entries_restored + res.entries_expired +
			   res.entries_unknown == res.entries);
		SNAP_CHECK(cs.affinity_entries <= res.entries_restored);
		SNAP_CHECK(res.endpoints_unknown <= res.endpoints);
		SNAP_CHECK(res.homes_restored <= res.homes);
		SNAP_CHECK(cs.homes_entries <= res.homes_restored);

		char *out;
		size_t n;
		SNAP_CHECK(snapshot_encode(c, 1000, INT64_C(1800000000000), &out,
					   &n) == 0);
		struct core *d = snap_core();
		struct snapshot_result res2;
		SNAP_CHECK(snapshot_load_buffer(d, (const uint8_t *)out, n, 1000,
						INT64_C(1800000000000), &res2,
						err, sizeof(err)) == 0);
		SNAP_CHECK(res2.entries_restored == cs.affinity_entries);
		SNAP_CHECK(res2.homes_restored == cs.homes_entries);
		core_destroy(d);
		free(out);
	} else {
		struct core_stats cs;
		core_stats(c, &cs);
		/* rejected: no change */
		SNAP_CHECK(cs.affinity_entries == 0 && cs.homes_entries == 0);
	}
	core_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* As is: almost always stopped by the checksum. */
	snap_one(data, size);

	/* Sealed with a valid checksum, so that the parser behind it is
	 * reached: the input, then 0xcf and xxh3 of the input, big-endian. */
	uint8_t *x = malloc(size + SNAPSHOT_TRAILER_LEN);
	if (x == NULL)
		return 0;
	if (size)
		memcpy(x, data, size);
	uint64_t sum = core_hash_bytes(data, size);
	x[size] = 0xcf;
	for (int i = 8; i >= 1; i--) {
		x[size + (size_t)i] = (uint8_t)sum;
		sum >>= 8;
	}
	snap_one(x, size + SNAPSHOT_TRAILER_LEN);
	free(x);
	return 0;
}
