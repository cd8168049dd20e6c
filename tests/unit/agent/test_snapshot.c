/* test_snapshot.c - the state snapshot: round trips, every truncation, bit flips, versions (1 still read), expiry, unknown endpoints, sliced captures under changes, the periodic writer (a capture given up after a map rebuild, stopped mid-capture), 10^6 entries, a FIFO at the path. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "core.h"
#include <msgpack.h>

#include "snapshot.h"

#define T0_UNIX_MS INT64_C(1800000000000)

static char dir[256];
static char path[300];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/warmlane-snap.XXXXXX",
		 tmp != NULL ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/state.msgpack", dir);
}

static void teardown(void)
{
	char p[400];
	unlink(path);
	snprintf(p, sizeof(p), "%s.corrupt", path);
	unlink(p);
	rmdir(dir);
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static const struct {
	const char *backend, *server, *key;
} eps[] = {
	{ "llm", "gpu1", NULL },
	{ "llm", "gpu2", "k1" },
	{ "llm", "gpu3", NULL },
	{ "other", "gpu1", NULL },
};
#define N_EPS (sizeof(eps) / sizeof(eps[0]))

/* A core with the endpoints of eps (skip: one left out; reverse: added in
 * reverse order, so that indexes differ from the writer's). */
static struct core *make_core(uint32_t cap, int skip, bool reverse)
{
	struct core_params p;
	struct core *c;
	core_params_defaults(&p);
	p.affinity_max_entries = cap;
	ck_assert_int_eq(core_create(&c, &p), 0);
	for (size_t k = 0; k < N_EPS; k++) {
		size_t i = reverse ? N_EPS - 1 - k : k;
		if ((int)i == skip)
			continue;
		struct core_endpoint_config ec = {
			.backend = eps[i].backend, .server = eps[i].server,
			.key_id = eps[i].key, .weight = 1,
		};
		ck_assert_int_ge(core_endpoint_add(c, &ec, 1000), 0);
	}
	return c;
}

static int ep_index(const struct core *c, size_t i)
{
	return core_endpoint_find(c, core_str_c(eps[i].backend),
				  core_str_c(eps[i].server),
				  core_str_c(eps[i].key));
}

/* Some statistics and n entries (endpoint i % N_EPS, idle i ms). */
static void fill_entries(struct core *c, uint32_t n, uint64_t now)
{
	struct core_endpoint_stats st = {
		.ewma_ms = { 420.5, 90.25 }, .samples = { 30, 7 },
		.breaker = CORE_BREAKER_OPEN, .trips = 2,
		.cooldown_left_ms = 50000, .dead_key_left_ms = 0, .idle_ms = 10,
		.e2e_ewma_ms = { 1500.5, 2500 }, .e2e_samples = { 11, 3 },
	};
	ck_assert_int_eq(core_endpoint_stats_import(c, ep_index(c, 0), now, &st), 0);
	st = (struct core_endpoint_stats){ .ewma_ms = { 800, 0 },
		.samples = { 25, 0 }, .dead_key_left_ms = 40000, .idle_ms = 5 };
	ck_assert_int_eq(core_endpoint_stats_import(c, ep_index(c, 1), now, &st), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct core_affinity_record rec = {
			.akey = 0x9e3779b97f4a7c15ull * (i + 1),
			.endpoint = ep_index(c, i % N_EPS),
			.idle_ms = n - i, /* oldest first */
		};
		ck_assert_int_eq(core_affinity_import(c, &rec, now), 0);
	}
}

/* fill, and a home for every tenth key (the failover tiers' map). */
static void fill(struct core *c, uint32_t n, uint64_t now)
{
	fill_entries(c, n, now);
	for (uint32_t i = 0; i < n; i += 10) {
		struct core_affinity_record rec = {
			.akey = 0x9e3779b97f4a7c15ull * (i + 1),
			.endpoint = ep_index(c, (i + 1) % N_EPS),
			.idle_ms = n - i,
		};
		ck_assert_int_eq(core_homes_import(c, &rec, now), 0);
	}
}

/* c's homes, in the homes map's slot order. */
static int homes_of(const struct core *c, uint64_t now,
		    int (*fn)(void *, const struct core_affinity_record *), void *arg)
{
	struct core_affinity_cursor cur;
	core_homes_cursor_init(c, &cur);
	while (!cur.done)
		ck_assert_int_eq(core_affinity_cursor_next(c, &cur, now, 7, fn, arg), 0);
	return 0;
}

static uint32_t entries(const struct core *c)
{
	struct core_stats s;
	core_stats(c, &s);
	return s.affinity_entries;
}

static void write_bytes(const char *p, const void *b, size_t n)
{
	FILE *f = fopen(p, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* Replaces the trailer with the checksum of what precedes it. */
static void reseal(uint8_t *b, size_t n)
{
	uint64_t sum = core_hash_bytes(b, n - SNAPSHOT_TRAILER_LEN);
	b[n - SNAPSHOT_TRAILER_LEN] = 0xcf;
	for (int i = 7; i >= 0; i--) {
		b[n - 8 + i] = (uint8_t)sum;
		sum >>= 8;
	}
}

struct rec_list {
	struct core_affinity_record r[128];
	size_t n;
};

static int collect(void *arg, const struct core_affinity_record *rec)
{
	struct rec_list *l = arg;
	if (l->n < 128)
		l->r[l->n++] = *rec;
	return 0;
}

START_TEST(round_trip)
{
	struct core *a = make_core(1024, -1, false);
	char err[512];
	fill(a, 100, 5000);
	ck_assert_int_eq(snapshot_write_sync(a, path, 5000, err, sizeof(err)), 0);

	/* A restarted clock (origin 0) and other indexes. */
	struct core *b = make_core(1024, -1, true);
	struct snapshot_result res;
	ck_assert_int_eq(snapshot_load(b, path, 10, &res, err, sizeof(err)), 0);
	ck_assert_uint_eq(res.version, SNAPSHOT_VERSION);
	ck_assert_uint_eq(res.endpoints, N_EPS);
	ck_assert_uint_eq(res.endpoints_unknown, 0);
	ck_assert_uint_eq(res.entries, 100);
	ck_assert_uint_eq(res.entries_restored, 100);
	ck_assert_uint_eq(entries(b), 100);
	ck_assert_uint_eq(res.homes, 10);
	ck_assert_uint_eq(res.homes_restored, 10);
	ck_assert(exists(path));

	for (size_t i = 0; i < N_EPS; i++) {
		struct core_endpoint_stats sa, sb;
		ck_assert_int_eq(core_endpoint_stats_export(a, ep_index(a, i), 5000, &sa), 0);
		ck_assert_int_eq(core_endpoint_stats_export(b, ep_index(b, i), 10, &sb), 0);
		ck_assert(sa.ewma_ms[0] == sb.ewma_ms[0]);
		ck_assert(sa.ewma_ms[1] == sb.ewma_ms[1]);
		ck_assert_uint_eq(sa.samples[0], sb.samples[0]);
		ck_assert_uint_eq(sa.samples[1], sb.samples[1]);
		ck_assert(sa.e2e_ewma_ms[0] == sb.e2e_ewma_ms[0]);
		ck_assert(sa.e2e_ewma_ms[1] == sb.e2e_ewma_ms[1]);
		ck_assert_uint_eq(sa.e2e_samples[0], sb.e2e_samples[0]);
		ck_assert_uint_eq(sa.e2e_samples[1], sb.e2e_samples[1]);
		ck_assert_int_eq(sa.breaker, sb.breaker);
		ck_assert_uint_eq(sa.trips, sb.trips);
		/* Less the downtime (wall clock between write and load). */
		ck_assert_uint_le(sb.cooldown_left_ms, sa.cooldown_left_ms);
		ck_assert_uint_ge(sb.cooldown_left_ms + res.downtime_ms + 1000,
				  sa.cooldown_left_ms);
		ck_assert_uint_le(sb.dead_key_left_ms, sa.dead_key_left_ms);
	}

	/* The entries map the same keys to the same endpoints, in the same
	 * LRU order. */
	struct rec_list la = { .n = 0 }, lb = { .n = 0 };
	ck_assert_int_eq(core_affinity_export(a, 5000, collect, &la), 0);
	ck_assert_int_eq(core_affinity_export(b, 10, collect, &lb), 0);
	ck_assert_uint_eq(la.n, lb.n);
	for (size_t i = 0; i < la.n; i++) {
		struct core_endpoint_info ia, ib;
		ck_assert_uint_eq(la.r[i].akey, lb.r[i].akey);
		core_endpoint_info(a, la.r[i].endpoint, 5000, &ia);
		core_endpoint_info(b, lb.r[i].endpoint, 10, &ib);
		ck_assert_str_eq(ia.backend, ib.backend);
		ck_assert_str_eq(ia.server, ib.server);
		ck_assert_int_eq(ia.key_id == NULL, ib.key_id == NULL);
	}
	/* The homes too: each key's home is the same endpoint. */
	struct rec_list ha = { .n = 0 }, hb = { .n = 0 };
	homes_of(a, 5000, collect, &ha);
	homes_of(b, 10, collect, &hb);
	ck_assert_uint_eq(ha.n, 10);
	ck_assert_uint_eq(hb.n, 10);
	for (size_t i = 0; i < ha.n; i++) {
		size_t j = 0;
		while (j < hb.n && hb.r[j].akey != ha.r[i].akey)
			j++;
		ck_assert_uint_lt(j, hb.n);
		struct core_endpoint_info ia, ib;
		core_endpoint_info(a, ha.r[i].endpoint, 5000, &ia);
		core_endpoint_info(b, hb.r[j].endpoint, 10, &ib);
		ck_assert_str_eq(ia.server, ib.server);
		ck_assert_str_eq(ia.backend, ib.backend);
	}
	core_destroy(a);
	core_destroy(b);
}
END_TEST

/* Two tier-1 endpoints and a tier-2 one. */
static struct core *tiered_core(void)
{
	struct core_params p;
	struct core *c;
	core_params_defaults(&p);
	ck_assert_int_eq(core_create(&c, &p), 0);
	static const char *const names[] = { "t1a", "t1b", "t2" };
	for (unsigned i = 0; i < 3; i++) {
		struct core_endpoint_config ec = {
			.backend = "llm", .server = names[i], .weight = 1,
			.tier = i < 2 ? 1 : 2,
		};
		ck_assert_int_ge(core_endpoint_add(c, &ec, 1000), 0);
	}
	return c;
}

static int tiered_ep(const struct core *c, const char *server)
{
	return core_endpoint_find(c, core_str_c("llm"), core_str_c(server),
				  core_str_c(NULL));
}

/* A session failed over to tier 2 from a tier-1 endpoint other than its
 * rendezvous choice goes back there after a restart: its home is in the
 * snapshot (docs/policy-v2.md, section 30). */
START_TEST(home_survives_restart)
{
	struct core_request s = { .session = { true, 0x5e55 } };
	struct core_rng rng = { 1 };
	struct core_decision d;
	struct core *a = tiered_core();
	uint64_t akey;
	ck_assert(core_identity(a, &s, &akey));
	/* Its rendezvous choice, and its home the other tier-1 endpoint. */
	core_decide(a, &s, 2000, &rng, &d);
	core_endpoint_complete(a, d.endpoint);
	int hash = d.endpoint;
	int home = hash == tiered_ep(a, "t1a") ? tiered_ep(a, "t1b") : tiered_ep(a, "t1a");
	struct core_affinity_record entry = {
		.akey = akey, .endpoint = tiered_ep(a, "t2"), .idle_ms = 0,
	}, h = { .akey = akey, .endpoint = home, .idle_ms = 0 };
	ck_assert_int_eq(core_affinity_import(a, &entry, 3000), 0);
	ck_assert_int_eq(core_homes_import(a, &h, 3000), 0);
	char *buf;
	size_t len;
	ck_assert_int_eq(snapshot_encode(a, 3000, T0_UNIX_MS, &buf, &len), 0);
	struct core_endpoint_info hi;
	core_endpoint_info(a, home, 3000, &hi);
	char want[32];
	snprintf(want, sizeof(want), "%s", hi.server);
	core_destroy(a);

	struct core *b = tiered_core();
	struct snapshot_result res;
	char err[512];
	ck_assert_int_eq(snapshot_load_buffer(b, (uint8_t *)buf, len, 0, T0_UNIX_MS,
					      &res, err, sizeof(err)), 0);
	ck_assert_uint_eq(res.homes_restored, 1);
	/* Tier 1 serves: the entry's tier-2 endpoint is no candidate. */
	core_decide(b, &s, 1000, &rng, &d);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	core_endpoint_info(b, d.endpoint, 1000, &hi);
	ck_assert_str_eq(hi.server, want);
	core_destroy(b);
	free(buf);
}
END_TEST

/* A home that names no endpoint record: the whole file refused, with the
 * byte, and nothing imported (its entry neither). */
START_TEST(bad_home_refused)
{
	struct core *a = make_core(64, -1, false);
	struct core_affinity_record rec = {
		.akey = 0xabcdef0123456789ull, .endpoint = ep_index(a, 1), .idle_ms = 0,
	};
	ck_assert_int_eq(core_affinity_import(a, &rec, 5000), 0);
	ck_assert_int_eq(core_homes_import(a, &rec, 5000), 0);
	char *buf;
	size_t len;
	ck_assert_int_eq(snapshot_encode(a, 5000, T0_UNIX_MS, &buf, &len), 0);
	core_destroy(a);
	/* The last triple is the home: akey (0xcf + 8), endpoint, idle 0. */
	uint8_t *b = (uint8_t *)buf;
	size_t ep_at = len - SNAPSHOT_TRAILER_LEN - 2;
	ck_assert_uint_eq(b[ep_at + 1], 0);
	ck_assert_uint_eq(b[ep_at - 9], 0xcf);
	b[ep_at] = 0x7f; /* record 127 of 4 */
	reseal(b, len);
	struct core *c = make_core(64, -1, false);
	char err[512];
	ck_assert_int_eq(snapshot_load_buffer(c, b, len, 0, T0_UNIX_MS, NULL, err,
					      sizeof(err)), -EBADMSG);
	ck_assert_msg(strstr(err, "home record invalid near byte") != NULL, "%s", err);
	struct core_stats cs;
	core_stats(c, &cs);
	ck_assert_uint_eq(cs.affinity_entries, 0);
	ck_assert_uint_eq(cs.homes_entries, 0);
	core_destroy(c);
	free(buf);
}
END_TEST

/* A version 3 file (no homes), as the agent wrote it before: loads. */
START_TEST(reads_version_3)
{
	struct core *a = make_core(1024, -1, false);
	fill_entries(a, 20, 5000);
	char *buf;
	size_t len;
	ck_assert_int_eq(snapshot_encode(a, 5000, T0_UNIX_MS, &buf, &len), 0);
	core_destroy(a);
	/* 0x97, 0xa6 "WLSNAP", the version, written (0xd3 + 8), the two
	 * counts (0xcf + 8 each), the verdicts, the homes' count (0xcf +
	 * 8, none here); then the records. Version 3: six fields, no
	 * homes' count. */
	ck_assert_uint_eq((uint8_t)buf[0], 0x97);
	ck_assert_uint_eq((uint8_t)buf[8], SNAPSHOT_VERSION);
	ck_assert_uint_eq((uint8_t)buf[37], 0xcf);
	uint8_t *v3 = malloc(len);
	size_t n = 0;
	v3[n++] = 0x96;
	memcpy(v3 + n, buf + 1, 7); /* "WLSNAP" */
	n += 7;
	v3[n++] = 3;
	memcpy(v3 + n, buf + 9, 37 - 9); /* written, counts, verdicts */
	n += 37 - 9;
	size_t body = len - SNAPSHOT_TRAILER_LEN - 46;
	memcpy(v3 + n, buf + 46, body);
	n += body;
	n += SNAPSHOT_TRAILER_LEN;
	reseal(v3, n);
	struct core *b = make_core(1024, -1, false);
	struct snapshot_result res;
	char err[512];
	ck_assert_msg(snapshot_load_buffer(b, v3, n, 0, T0_UNIX_MS, &res, err,
					   sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(res.version, 3);
	ck_assert_uint_eq(res.entries_restored, 20);
	ck_assert_uint_eq(res.homes, 0);
	struct core_stats cs;
	core_stats(b, &cs);
	ck_assert_uint_eq(cs.homes_entries, 0);
	core_destroy(b);
	free(v3);
	free(buf);
}
END_TEST

/* Sessions routed before a restart land on the same endpoints after it,
 * by affinity, even where the hash would choose another. */
START_TEST(sessions_stay)
{
	struct core *a = make_core(4096, -1, false);
	struct core_rng rng;
	char err[512];
	core_rng_seed(&rng, 1);
	int chosen[64];
	for (int s = 0; s < 64; s++) {
		struct core_request req = {
			.session = { .present = true, .hash = 1000u + (unsigned)s },
		};
		struct core_decision d;
		core_decide(a, &req, 2000, &rng, &d);
		ck_assert_int_ge(d.endpoint, 0);
		/* Move half of them away from the hash's choice. */
		int ep = s % 2 ? d.endpoint :
			 ep_index(a, ((size_t)s / 2) % N_EPS);
		core_endpoint_sync(a, d.endpoint, CORE_ADMIN_ENABLED, 0, 2000);
		struct core_affinity_record rec = { .akey = d.akey,
						    .endpoint = ep };
		ck_assert_int_eq(core_affinity_import(a, &rec, 2000), 0);
		chosen[s] = ep;
	}
	ck_assert_int_eq(snapshot_write_sync(a, path, 3000, err, sizeof(err)), 0);
	struct core *b = make_core(4096, -1, true);
	ck_assert_int_eq(snapshot_load(b, path, 0, NULL, err, sizeof(err)), 0);
	for (int s = 0; s < 64; s++) {
		struct core_request req = {
			.session = { .present = true, .hash = 1000u + (unsigned)s },
		};
		struct core_decision d;
		struct core_endpoint_info ia;
		core_decide(b, &req, 100, &rng, &d);
		ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
		core_endpoint_info(a, chosen[s], 3000, &ia);
		ck_assert_str_eq(d.backend, ia.backend);
		ck_assert_str_eq(d.server, ia.server);
		core_endpoint_sync(b, d.endpoint, CORE_ADMIN_ENABLED, 0, 100);
	}
	core_destroy(a);
	core_destroy(b);
}
END_TEST

static uint8_t *encode_small(size_t *len, uint32_t n)
{
	struct core *a = make_core(1024, -1, false);
	char *buf;
	fill(a, n, 5000);
	ck_assert_int_eq(snapshot_encode(a, 5000, T0_UNIX_MS, &buf, len), 0);
	core_destroy(a);
	return (uint8_t *)buf;
}

START_TEST(every_truncation)
{
	size_t len;
	uint8_t *buf = encode_small(&len, 20);
	char err[512], aside[400];
	snprintf(aside, sizeof(aside), "%s.corrupt", path);
	for (size_t n = 0; n < len; n++) {
		struct core *b = make_core(64, -1, false);
		/* An exact-size copy: ASan sees any read past the end. */
		uint8_t *cut = malloc(n ? n : 1);
		memcpy(cut, buf, n);
		int rc = snapshot_load_buffer(b, cut, n, 0, T0_UNIX_MS, NULL,
					      err, sizeof(err));
		ck_assert_msg(rc == -EBADMSG, "prefix %zu: %d", n, rc);
		ck_assert_uint_eq(entries(b), 0);
		free(cut);

		write_bytes(path, buf, n);
		rc = snapshot_load(b, path, 0, NULL, err, sizeof(err));
		ck_assert_msg(rc == -EBADMSG, "file prefix %zu: %d", n, rc);
		ck_assert(strstr(err, "renamed to") != NULL);
		ck_assert(!exists(path));
		ck_assert(exists(aside));
		ck_assert_uint_eq(entries(b), 0);
		core_destroy(b);
	}
	/* The whole file loads. */
	struct core *b = make_core(64, -1, false);
	ck_assert_int_eq(snapshot_load_buffer(b, buf, len, 0, T0_UNIX_MS, NULL,
					      err, sizeof(err)), 0);
	ck_assert_uint_eq(entries(b), 20);
	core_destroy(b);
	free(buf);
}
END_TEST

/* Every single-bit flip: as is (the checksum rejects it) and resealed (the
 * parser itself must cope): a clean load or a clean rejection. */
START_TEST(bit_flips)
{
	size_t len;
	uint8_t *buf = encode_small(&len, 12);
	uint8_t *x = malloc(len);
	char err[512];
	unsigned loaded = 0, rejected = 0;
	struct core *b = make_core(64, -1, false);
	for (size_t bit = 0; bit < len * 8; bit++) {
		for (int sealed = 0; sealed < 2; sealed++) {
			memcpy(x, buf, len);
			x[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (sealed)
				reseal(x, len);
			int rc = snapshot_load_buffer(b, x, len, 0, T0_UNIX_MS,
						      NULL, err, sizeof(err));
			ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -ENOTSUP,
				      "bit %zu: %d", bit, rc);
			if (rc == 0)
				loaded++;
			else
				rejected++;
			if (!sealed && bit / 8 < len - SNAPSHOT_TRAILER_LEN &&
			    bit >= 16 * 8)
				ck_assert_msg(rc != 0, "bit %zu passed the checksum", bit);
		}
	}
	fprintf(stderr, "# bit flips: %u loaded, %u rejected\n", loaded, rejected);
	ck_assert_uint_gt(rejected, 0);
	core_destroy(b);
	free(x);
	free(buf);
}
END_TEST

/* A FIFO at the state path: refused at once, left alone, no writer
 * needed. A plain open would wait for a writer for ever: the alarm turns
 * that hang into a failure of this test. */
START_TEST(fifo_refused)
{
	char err[512];
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	struct core *b = make_core(64, -1, false);
	alarm(5);
	int rc = snapshot_load(b, path, 0, NULL, err, sizeof(err));
	alarm(0);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(err, "not a regular file (a FIFO)") != NULL,
		      "err: %s", err);
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_uint_eq(entries(b), 0);
	/* The daemon's path: logged, cold start, not counted as corrupt. */
	struct snapshot_stats ss = { 0 };
	alarm(5);
	rc = snapshot_restore(b, path, 0, &ss);
	alarm(0);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_uint_eq(ss.corrupt, 0);
	ck_assert(!ss.loaded);
	core_destroy(b);
}
END_TEST

START_TEST(future_version)
{
	size_t len;
	uint8_t *buf = encode_small(&len, 5);
	char err[512], aside[400];
	/* 0x96, 0xa6 "WLSNAP", then the version as a positive fixint. */
	ck_assert_uint_eq(buf[8], SNAPSHOT_VERSION);
	buf[8] = SNAPSHOT_VERSION + 1;
	reseal(buf, len);
	write_bytes(path, buf, len);
	struct core *b = make_core(64, -1, false);
	struct snapshot_result res;
	ck_assert_int_eq(snapshot_load(b, path, 0, &res, err, sizeof(err)), -ENOTSUP);
	ck_assert_uint_eq(res.version, SNAPSHOT_VERSION + 1);
	char want[32];
	snprintf(want, sizeof(want), "version %u", SNAPSHOT_VERSION + 1);
	ck_assert(strstr(err, want) != NULL);
	snprintf(aside, sizeof(aside), "%s.corrupt", path);
	ck_assert(!exists(path));
	ck_assert(exists(aside));
	ck_assert_uint_eq(entries(b), 0);

	/* Version 0 and a bad magic are rejected too. */
	buf[8] = 0;
	ck_assert_int_eq(snapshot_load_buffer(b, buf, len, 0, T0_UNIX_MS, NULL,
					      err, sizeof(err)), -ENOTSUP);
	buf[8] = SNAPSHOT_VERSION;
	buf[2] = 'X';
	reseal(buf, len);
	ck_assert_int_eq(snapshot_load_buffer(b, buf, len, 0, T0_UNIX_MS, NULL,
					      err, sizeof(err)), -EBADMSG);
	core_destroy(b);
	free(buf);
}
END_TEST

START_TEST(expired_dropped)
{
	size_t len;
	/* 50 entries idle 1..50 ms at writing; the default TTL is 300 s. */
	uint8_t *buf = encode_small(&len, 50);
	struct core *b = make_core(1024, -1, false);
	struct snapshot_result res;
	char err[512];
	/* Down for TTL - 20 ms: entries idle 20 ms or more have expired. */
	int64_t later = T0_UNIX_MS + 300000 - 20;
	ck_assert_int_eq(snapshot_load_buffer(b, buf, len, 0, later, &res, err,
					      sizeof(err)), 0);
	ck_assert_uint_eq(res.downtime_ms, 300000 - 20);
	ck_assert_uint_eq(res.entries, 50);
	ck_assert_uint_eq(res.entries_expired, 31);
	ck_assert_uint_eq(res.entries_restored, 19);
	ck_assert_uint_eq(entries(b), 19);
	/* The breaker's cooldown (50 s) ran out meanwhile. */
	struct core_endpoint_stats st;
	core_endpoint_stats_export(b, ep_index(b, 0), 0, &st);
	ck_assert_uint_eq(st.cooldown_left_ms, 0);
	core_destroy(b);
	free(buf);
}
END_TEST

/* A snapshot written before rate_limit_cooldown_max, holding what a
 * Retry-After of 9*10^14 s asked for (and one of 2^50 ms): the file loads,
 * and no cooldown outlasts rate_limit_cooldown_max (10 min by default). */
START_TEST(huge_cooldown_capped)
{
	static const uint64_t huge[] = { UINT64_C(900000000000000000),
					 UINT64_C(1) << 50 };
	for (size_t k = 0; k < sizeof(huge) / sizeof(huge[0]); k++) {
		/* The writer: an agent that let a 429 set any cooldown. */
		struct core_params p;
		struct core *a, *b;
		core_params_defaults(&p);
		p.rate_limit_cooldown_max_ms = UINT64_C(1) << 62;
		ck_assert_int_eq(core_create(&a, &p), 0);
		for (size_t i = 0; i < N_EPS; i++) {
			struct core_endpoint_config ec = {
				.backend = eps[i].backend, .server = eps[i].server,
				.key_id = eps[i].key, .weight = 1,
			};
			ck_assert_int_ge(core_endpoint_add(a, &ec, 1000), 0);
		}
		struct core_feedback fb = { .endpoint = ep_index(a, 1), .status = 429,
					    .tr_ms = -1, .retry_after_ms = (int64_t)huge[k] };
		ck_assert_int_eq(core_observe(a, &fb, 5000), 0);
		struct core_endpoint_stats st;
		ck_assert_int_eq(core_endpoint_stats_export(a, ep_index(a, 1), 5000, &st), 0);
		ck_assert_uint_eq(st.cooldown_left_ms, huge[k]);
		struct core_affinity_record rec = { .akey = 77, .endpoint = ep_index(a, 0),
						    .idle_ms = 10 };
		ck_assert_int_eq(core_affinity_import(a, &rec, 5000), 0);
		char *buf;
		size_t len;
		ck_assert_int_eq(snapshot_encode(a, 5000, T0_UNIX_MS, &buf, &len), 0);
		core_destroy(a);

		/* The reader, on the defaults. */
		b = make_core(1024, -1, false);
		struct snapshot_result res;
		char err[512];
		write_bytes(path, buf, len);
		int rc = snapshot_load(b, path, 0, &res, err, sizeof(err));
		ck_assert_msg(rc == 0, "%s", err);
		ck_assert(exists(path)); /* not renamed aside */
		ck_assert_uint_eq(res.cooldowns_capped, 1);
		ck_assert_uint_eq(entries(b), 1);
		ck_assert_int_eq(core_endpoint_stats_export(b, ep_index(b, 1), 0, &st), 0);
		ck_assert_int_eq(st.breaker, CORE_BREAKER_OPEN);
		ck_assert_uint_eq(st.cooldown_left_ms, 600000);
		/* and it is probed again after them */
		ck_assert_int_eq(core_endpoint_stats_export(b, ep_index(b, 1), 600000, &st), 0);
		ck_assert_int_eq(st.breaker, CORE_BREAKER_HALF_OPEN);
		core_destroy(b);
		free(buf);
		unlink(path);
	}
}
END_TEST

START_TEST(unknown_dropped)
{
	size_t len;
	uint8_t *buf = encode_small(&len, 40);
	struct core *b = make_core(1024, 2, false); /* llm/gpu3 gone */
	struct snapshot_result res;
	char err[512];
	ck_assert_int_eq(snapshot_load_buffer(b, buf, len, 0, T0_UNIX_MS, &res,
					      err, sizeof(err)), 0);
	ck_assert_uint_eq(res.endpoints, N_EPS);
	ck_assert_uint_eq(res.endpoints_unknown, 1);
	ck_assert_uint_eq(res.entries_unknown, 10);
	ck_assert_uint_eq(res.entries_restored, 30);
	ck_assert_uint_eq(entries(b), 30);
	core_destroy(b);
	free(buf);
}
END_TEST

/* Hand-made hostile inputs: huge counts, nested containers, an oversized
 * file. */
START_TEST(hostile)
{
	char err[512], aside[400];
	struct core *b = make_core(64, -1, false);
	static const uint8_t huge_array[] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t huge_str[] = { 0x95, 0xdb, 0xff, 0xff, 0xff, 0xf0 };
	static const uint8_t nested[] = { 0x92, 0x91, 0x91, 0x90, 0x01 };
	static const uint8_t map[] = { 0x81, 0x01, 0x02 };
	ck_assert_int_eq(snapshot_load_buffer(b, huge_array, sizeof(huge_array),
					      0, 0, NULL, err, sizeof(err)), -EBADMSG);
	ck_assert_int_eq(snapshot_load_buffer(b, huge_str, sizeof(huge_str), 0,
					      0, NULL, err, sizeof(err)), -EBADMSG);
	ck_assert_int_eq(snapshot_load_buffer(b, nested, sizeof(nested), 0, 0,
					      NULL, err, sizeof(err)), -EBADMSG);
	ck_assert_int_eq(snapshot_load_buffer(b, map, sizeof(map), 0, 0, NULL,
					      err, sizeof(err)), -EBADMSG);

	/* A valid header that claims 2^40 entries. */
	size_t len;
	uint8_t *buf = encode_small(&len, 3);
	/* counts: fix_uint64 at 9 + 9 (written_unix_ms is an int64 0xd3/0xcf). */
	size_t at = 9 + 9 + 9 + 1;
	ck_assert_uint_eq(buf[at - 1], 0xcf);
	buf[at + 2] = 1;
	reseal(buf, len);
	ck_assert_int_eq(snapshot_load_buffer(b, buf, len, 0, T0_UNIX_MS, NULL,
					      err, sizeof(err)), -EBADMSG);
	ck_assert(strstr(err, "exceed") != NULL);
	free(buf);

	/* A sparse file just over the cap. */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)SNAPSHOT_MAX_BYTES + 1), 0);
	close(fd);
	ck_assert_int_eq(snapshot_load(b, path, 0, NULL, err, sizeof(err)), -EFBIG);
	snprintf(aside, sizeof(aside), "%s.corrupt", path);
	ck_assert(!exists(path));
	ck_assert(exists(aside));

	/* No file: a cold start, nothing renamed. */
	ck_assert_int_eq(snapshot_load(b, path, 0, NULL, err, sizeof(err)), -ENOENT);
	ck_assert_int_eq(snapshot_restore(b, path, 0, NULL), -ENOENT);
	ck_assert_uint_eq(entries(b), 0);
	core_destroy(b);
}
END_TEST

START_TEST(periodic_writer)
{
	uv_loop_t loop;
	struct snapshot_writer w;
	struct snapshot_stats st = { .writes = 0 };
	struct core *a = make_core(1024, -1, false);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	fill(a, 30, uv_now(&loop));
	ck_assert_int_eq(snapshot_writer_init(&w, &loop, a, path, 5, &st), 0);
	w.slice = 7; /* 30 entries: several loop turns */
	while (w.writes < 2)
		uv_run(&loop, UV_RUN_ONCE);
	snapshot_writer_finish(&w);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	ck_assert_uint_eq(w.failures, 0);
	ck_assert_ptr_null(w.path);
	ck_assert_uint_ge(w.last_slices, 5);
	ck_assert_uint_eq(st.writes, w.writes);
	ck_assert_uint_eq(st.last_entries, 30);
	ck_assert_uint_gt(st.last_bytes, 0);
	ck_assert_int_gt(st.last_write_unix_ms, 0);

	struct core *b = make_core(1024, -1, false);
	char err[512];
	ck_assert_int_eq(snapshot_load(b, path, 0, NULL, err, sizeof(err)), 0);
	ck_assert_uint_eq(entries(b), 30);
	core_destroy(a);
	core_destroy(b);

	/* An empty path starts nothing. */
	ck_assert_int_eq(snapshot_writer_init(&w, &loop, a, "", 5, NULL), 0);
	snapshot_writer_finish(&w);
}
END_TEST

/* The map rebuilt and rebuilt back (affinity_max_entries X, Y, X in two
 * reloads) during a capture: the new map may lie where the old one was,
 * and the cursor still sees the rebuilds. The writer gives the capture
 * up and the next write holds each key once. */
START_TEST(writer_abandons_after_resize)
{
	uv_loop_t loop;
	struct snapshot_writer w;
	struct snapshot_stats st = { .writes = 0 };
	struct core *a = make_core(1024, -1, false);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	fill(a, 300, uv_now(&loop));
	/* The first 100 keys made the most recent: the rebuilt map, laid out
	 * oldest first, holds them last, where the old one held them first. */
	for (uint32_t i = 0; i < 100; i++) {
		struct core_affinity_record rec = {
			.akey = 0x9e3779b97f4a7c15ull * (i + 1),
			.endpoint = ep_index(a, i % N_EPS),
		};
		ck_assert_int_eq(core_affinity_import(a, &rec, uv_now(&loop)), 0);
	}
	ck_assert_int_eq(snapshot_writer_init(&w, &loop, a, path, 5, &st), 0);
	w.slice = 16;
	while (!w.capturing || snapshot_capture_slices(w.cap) < 2)
		uv_run(&loop, UV_RUN_ONCE);
	struct core_params p;
	core_params_defaults(&p);
	p.affinity_max_entries = 4096;
	ck_assert_int_eq(core_set_params(a, &p), 0);
	p.affinity_max_entries = 1024;
	ck_assert_int_eq(core_set_params(a, &p), 0);
	/* The next slice sees the rebuild (twice, back to the same size:
	 * the map may be where it was) and gives the capture up. */
	while (w.abandoned < 1)
		uv_run(&loop, UV_RUN_ONCE);
	ck_assert_uint_eq(st.captures_abandoned, 1);
	while (w.writes < 1)
		uv_run(&loop, UV_RUN_ONCE);
	snapshot_writer_finish(&w);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	ck_assert_uint_eq(w.failures, 0);
	ck_assert_uint_eq(st.last_entries, 300);

	struct core *b = make_core(1024, -1, false);
	char err[512];
	struct snapshot_result res;
	ck_assert_int_eq(snapshot_load(b, path, 0, &res, err, sizeof(err)), 0);
	ck_assert_uint_eq(res.entries, 300);
	ck_assert_uint_eq(entries(b), 300);
	core_destroy(a);
	core_destroy(b);
}
END_TEST

/* SIGTERM while a capture is under way: the writer's stop frees it and
 * closes its handles at once (the loop ends), writes nothing; the final
 * snapshot is main's, in one piece. */
START_TEST(writer_stop_mid_capture)
{
	uv_loop_t loop;
	struct snapshot_writer w;
	struct snapshot_stats st = { .writes = 0 };
	struct core *a = make_core(1024, -1, false);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	fill(a, 300, uv_now(&loop));
	ck_assert_int_eq(snapshot_writer_init(&w, &loop, a, path, 5, &st), 0);
	w.slice = 16;
	while (!w.capturing || snapshot_capture_slices(w.cap) < 2)
		uv_run(&loop, UV_RUN_ONCE);
	snapshot_writer_finish(&w);
	ck_assert(!w.capturing);
	ck_assert_ptr_null(w.cap);
	ck_assert_ptr_null(w.path);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	ck_assert_uint_eq(w.writes, 0);
	ck_assert_uint_eq(st.writes, 0);
	ck_assert(!exists(path));
	ck_assert_uint_eq(w.abandoned, 0);
	core_destroy(a);
}
END_TEST

/* A capture in slices with the map changing between them: the file holds
 * each key once, a key copied twice with its later state, and loads. */
START_TEST(sliced_capture_changes)
{
	struct core *a = make_core(1024, -1, false);
	char *buf, err[512];
	size_t len;
	uint64_t now = 5000;
	fill(a, 100, now);
	struct snapshot_capture *cap;
	ck_assert_int_eq(snapshot_capture_begin(a, now, &cap), 0);
	ck_assert_int_eq(snapshot_capture_step(cap, a, now, 50), 1);
	/* The first record (visited: slot 0) is removed, then inserted again
	 * into a free slot not visited yet; another one, not visited yet,
	 * removed. */
	uint64_t k0 = 0x9e3779b97f4a7c15ull * 1, k60 = 0x9e3779b97f4a7c15ull * 61;
	struct core_feedback fb = { .endpoint = ep_index(a, 0), .status = 500,
				    .tr_ms = -1, .retry_after_ms = -1,
				    .has_akey = true, .akey = k0 };
	ck_assert_int_eq(core_observe(a, &fb, now + 1), 0);
	fb.endpoint = ep_index(a, 60 % N_EPS);
	fb.akey = k60;
	ck_assert_int_eq(core_observe(a, &fb, now + 1), 0);
	struct core_affinity_record rec = { .akey = k0,
					    .endpoint = ep_index(a, 2) };
	ck_assert_int_eq(core_affinity_import(a, &rec, now + 2), 0);
	while (snapshot_capture_step(cap, a, now + 3, 50) > 0)
		;
	ck_assert_uint_eq(snapshot_capture_entries(cap), 100); /* k0 twice */
	ck_assert_int_eq(snapshot_capture_end(cap, a, now + 3, T0_UNIX_MS), 0);
	ck_assert_int_eq(snapshot_pack(cap, &buf, &len), 0);
	snapshot_capture_free(cap);

	struct core *b = make_core(1024, -1, true);
	struct snapshot_result res;
	ck_assert_int_eq(snapshot_load_buffer(b, (uint8_t *)buf, len, 0,
					      T0_UNIX_MS, &res, err,
					      sizeof(err)), 0);
	ck_assert_uint_eq(res.entries, 99);
	ck_assert_uint_eq(entries(b), 99);
	struct rec_list l = { .n = 0 };
	ck_assert_int_eq(core_affinity_export(b, 0, collect, &l), 0);
	ck_assert_uint_eq(l.n, 99);
	/* Oldest first in the file: k0, the most recent, is last. */
	ck_assert_uint_eq(l.r[98].akey, k0);
	ck_assert_int_eq(l.r[98].endpoint, ep_index(b, 2));
	for (size_t i = 0; i < l.n; i++)
		ck_assert_uint_ne(l.r[i].akey, k60);
	free(buf);
	core_destroy(b);

	/* An endpoint removed mid-capture: the capture is given up. */
	ck_assert_int_eq(snapshot_capture_begin(a, now, &cap), 0);
	ck_assert_int_eq(snapshot_capture_step(cap, a, now, 10), 1);
	ck_assert_int_eq(core_endpoint_remove(a, ep_index(a, 3)), 0);
	ck_assert_int_eq(snapshot_capture_step(cap, a, now, 10), -ESTALE);
	snapshot_capture_free(cap);
	core_destroy(a);
}
END_TEST

/* buf with byte off set to v (and its trailer sealed again) is refused
 * by x whole: "bad header". */
static void refused_header(struct core *x, const char *buf, size_t len,
			   size_t off, uint8_t v)
{
	char err[512];
	uint8_t *bad = malloc(len);
	ck_assert_ptr_nonnull(bad);
	memcpy(bad, buf, len);
	bad[off] = v;
	reseal(bad, len);
	ck_assert_int_eq(snapshot_load_buffer(x, bad, len, 0, T0_UNIX_MS, NULL, err,
					      sizeof(err)), -EBADMSG);
	ck_assert_str_eq(err, "bad header");
	free(bad);
}

/* policy.routers auto's verdicts cross a restart: an agent that routed
 * alone by the hints, the engines' counts and the turns comes back
 * alone, so its entries idle 5-30 min (alone_affinity_ttl) are restored,
 * not expired at the default TTL; each verdict is then judged again (the
 * engines' lapses without an engine sample within idle_reset, the turns'
 * after 6 skips). With the file's verdicts cleared (_i 1: several) the
 * same entry expires at load. */
START_TEST(routers_verdicts_restored)
{
	const uint64_t t0 = 5000, idle = 10 * 60 * 1000;
	struct core *a = make_core(1024, -1, false);
	core_routers_restore(a, true, true, true, t0);
	struct core_affinity_record rec = {
		.akey = 0xabcdef, .endpoint = ep_index(a, 0), .idle_ms = 0,
	};
	ck_assert_int_eq(core_affinity_import(a, &rec, t0), 0);
	char *buf;
	size_t len;
	ck_assert_int_eq(snapshot_encode(a, t0 + idle, T0_UNIX_MS, &buf, &len), 0);
	struct core_routers_info ri;
	core_routers_info(a, &ri);
	ck_assert(ri.engines && ri.hints && ri.turns);
	core_destroy(a);
	/* 0x97, 0xa6 "WLSNAP", the version, written (0xd3 + 8), the two
	 * counts (0xcf + 8 each), then the verdicts as a positive fixint. */
	ck_assert_uint_eq((uint8_t)buf[36], SNAPSHOT_ROUTERS_ENGINES | SNAPSHOT_ROUTERS_HINTS |
					    SNAPSHOT_ROUTERS_TURNS);
	/* A verdict byte with an unknown bit, or a header of five fields
	 * (the verdicts' place taken by the homes' count), is refused
	 * whole: "bad header", nothing changed. */
	struct core *x = make_core(64, -1, false);
	refused_header(x, buf, len, 36, 8);
	refused_header(x, buf, len, 0, 0x95);
	core_routers_info(x, &ri);
	ck_assert(!ri.engines && !ri.hints && !ri.turns);
	ck_assert_uint_eq(entries(x), 0);
	core_destroy(x);
	if (_i == 1) {
		buf[36] = 0;
		reseal((uint8_t *)buf, len);
	}

	struct core *b = make_core(64, -1, false);
	struct snapshot_result res;
	char err[512];
	ck_assert_int_eq(snapshot_load_buffer(b, (uint8_t *)buf, len, 0, T0_UNIX_MS,
					      &res, err, sizeof(err)), 0);
	ck_assert_uint_eq(res.version, SNAPSHOT_VERSION);
	core_routers_info(b, &ri);
	if (_i == 0) {
		ck_assert(ri.alone && ri.engines && ri.hints && ri.turns);
		ck_assert_uint_eq(ri.ttl_ms, 30 * 60 * 1000);
		ck_assert_uint_eq(res.entries_restored, 1);
		ck_assert_uint_eq(entries(b), 1);
		/* Judged again: 30 decisions without a hint end the hints'
		 * verdict, no engine sample within idle_reset the engines'. */
		for (uint64_t k = 1; k <= 30; k++) {
			struct core_request rq = {
				.session = { true, k * 0x9e3779b97f4a7c15ull },
			};
			struct core_rng rng = { 1 };
			struct core_decision d;
			core_decide(b, &rq, 1000, &rng, &d);
		}
		int ep = ep_index(b, 0);
		ck_assert_int_eq(core_endpoint_sync(b, ep, CORE_ADMIN_ENABLED, 0, 1000), 0);
		core_routers_info(b, &ri);
		ck_assert(!ri.hints && ri.engines && ri.alone);
		ck_assert_int_eq(core_endpoint_sync(b, ep, CORE_ADMIN_ENABLED, 0,
						    61 * 1000), 0);
		core_routers_info(b, &ri);
		ck_assert(!ri.engines && ri.turns && ri.alone);
		/* The restored entry's key, its turns another HAProxy's every
		 * second one: the 6th skip ends the turns' verdict. */
		struct core_request rq = {
			.session = { true, 1 }, .identity = 2, .akey = 0xabcdef,
		};
		for (uint16_t t = 2, skips = 0; skips <= 6; t += 2) {
			core_routers_info(b, &ri);
			ck_assert_msg(ri.alone == (skips < 6), "%u skips", skips);
			rq.turn = t;
			struct core_rng rng = { 1 };
			struct core_decision d;
			core_decide(b, &rq, 62 * 1000, &rng, &d);
			ck_assert(d.has_akey && d.akey == 0xabcdef);
			skips += t > 2;
		}
		core_routers_info(b, &ri);
		ck_assert(!ri.turns && !ri.alone);
		ck_assert_uint_eq(ri.ttl_ms, 300 * 1000);
	} else {
		ck_assert(!ri.alone && !ri.engines && !ri.hints && !ri.turns);
		ck_assert_uint_eq(res.entries_expired, 1);
		ck_assert_uint_eq(entries(b), 0);
	}
	core_destroy(b);
	free(buf);
}
END_TEST

/* A version 1 file (no end-to-end EWMAs), written by hand, still loads. */
START_TEST(reads_version_1)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 5);
	msgpack_pack_str(&pk, 6);
	msgpack_pack_str_body(&pk, "WLSNAP", 6);
	msgpack_pack_uint32(&pk, 1);
	msgpack_pack_int64(&pk, T0_UNIX_MS);
	msgpack_pack_fix_uint64(&pk, 1);
	msgpack_pack_fix_uint64(&pk, 2);
	msgpack_pack_array(&pk, 12);
	msgpack_pack_str(&pk, 3);
	msgpack_pack_str_body(&pk, "llm", 3);
	msgpack_pack_str(&pk, 4);
	msgpack_pack_str_body(&pk, "gpu1", 4);
	msgpack_pack_str(&pk, 0);
	msgpack_pack_double(&pk, 321.5);
	msgpack_pack_double(&pk, 0);
	msgpack_pack_uint32(&pk, 40);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint64(&pk, 0);
	msgpack_pack_uint64(&pk, 0);
	msgpack_pack_uint64(&pk, 7);
	msgpack_pack_array(&pk, 6);
	msgpack_pack_uint64(&pk, 111);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint64(&pk, 20);
	msgpack_pack_uint64(&pk, 222);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint64(&pk, 10);
	msgpack_pack_fix_uint64(&pk, core_hash_bytes(sb.data, sb.size));
	struct core *b = make_core(64, -1, false);
	struct snapshot_result res;
	char err[512];
	ck_assert_int_eq(snapshot_load_buffer(b, (uint8_t *)sb.data, sb.size, 0,
					      T0_UNIX_MS, &res, err,
					      sizeof(err)), 0);
	ck_assert_uint_eq(res.version, 1);
	ck_assert_uint_eq(res.entries_restored, 2);
	struct core_endpoint_stats st;
	ck_assert_int_eq(core_endpoint_stats_export(b, ep_index(b, 0), 0, &st), 0);
	ck_assert(st.ewma_ms[0] == 321.5);
	ck_assert_uint_eq(st.samples[0], 40);
	ck_assert(st.e2e_ewma_ms[0] == 0);
	ck_assert_uint_eq(st.e2e_samples[0], 0);
	core_destroy(b);
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* 10^6 entries: size, encode, write and restore times (printed). */
START_TEST(million)
{
	const uint32_t n = 1000000;
	struct core *a = make_core(n, -1, false);
	struct core_affinity_record rec;
	for (uint32_t i = 0; i < n; i++) {
		rec = (struct core_affinity_record){
			.akey = 0x9e3779b97f4a7c15ull * (i + 1),
			.endpoint = ep_index(a, i % N_EPS),
			.idle_ms = (uint64_t)(n - i) / 10,
		};
		core_affinity_import(a, &rec, 200000);
	}
	ck_assert_uint_eq(entries(a), n);
	char *buf, err[512];
	size_t len;
	struct snapshot_capture *cap;
	/* As the periodic writer does: slices of SNAPSHOT_SLICE slots. */
	uint64_t t0 = uv_hrtime(), hold = 0, slices = 0;
	int r;
	ck_assert_int_eq(snapshot_capture_begin(a, 200000, &cap), 0);
	do {
		uint64_t s0 = uv_hrtime();
		r = snapshot_capture_step(cap, a, 200000, SNAPSHOT_SLICE);
		if (r == 0)
			r = snapshot_capture_end(cap, a, 200000, T0_UNIX_MS);
		uint64_t d = uv_hrtime() - s0;
		hold = d > hold ? d : hold;
		slices++;
	} while (r > 0);
	ck_assert_int_eq(r, 0);
	uint64_t tc = uv_hrtime();
	ck_assert_int_eq(snapshot_pack(cap, &buf, &len), 0);
	snapshot_capture_free(cap);
	uint64_t t1 = uv_hrtime();
	ck_assert_int_eq(snapshot_write_file(path, buf, len, err, sizeof(err)), 0);
	uint64_t t2 = uv_hrtime();
	free(buf);
	/* For measuring the daemon on it (docs/operations.md, "State snapshot"). */
	const char *keep = getenv("WARMLANE_SNAPSHOT_KEEP");
	if (keep != NULL && keep[0] != '\0') {
		char *copy;
		size_t clen;
		ck_assert_int_eq(snapshot_encode(a, 200000, T0_UNIX_MS, &copy, &clen), 0);
		ck_assert_int_eq(snapshot_write_file(keep, copy, clen, err, sizeof(err)), 0);
		free(copy);
	}
	struct core *b = make_core(n, -1, true);
	struct snapshot_result res;
	uint64_t t3 = uv_hrtime();
	ck_assert_int_eq(snapshot_load(b, path, 0, &res, err, sizeof(err)), 0);
	uint64_t t4 = uv_hrtime();
	ck_assert_uint_eq(res.entries_restored + res.entries_expired, n);
	ck_assert_uint_eq(entries(b), res.entries_restored);
	fprintf(stderr,
		"# 10^6 entries: %zu bytes, capture (loop) %.1f ms in %" PRIu64
		" slices (mean %.3f ms), longest %.3f ms, pack %.1f ms, "
		"write+fsync %.1f ms, load %.1f ms\n",
		len, (double)(tc - t0) / 1e6, slices,
		(double)(tc - t0) / 1e6 / (double)slices, (double)hold / 1e6,
		(double)(t1 - tc) / 1e6,
		(double)(t2 - t1) / 1e6,
		(double)(t4 - t3) / 1e6);
	core_destroy(a);
	core_destroy(b);
}
END_TEST

static Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("snapshot");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, sessions_stay);
	tcase_add_test(tc, every_truncation);
	tcase_add_test(tc, bit_flips);
	tcase_add_test(tc, future_version);
	tcase_add_test(tc, fifo_refused);
	tcase_add_test(tc, expired_dropped);
	tcase_add_test(tc, unknown_dropped);
	tcase_add_test(tc, huge_cooldown_capped);
	tcase_add_test(tc, hostile);
	tcase_add_test(tc, periodic_writer);
	tcase_add_test(tc, sliced_capture_changes);
	tcase_add_test(tc, writer_abandons_after_resize);
	tcase_add_test(tc, writer_stop_mid_capture);
	tcase_add_test(tc, reads_version_1);
	tcase_add_test(tc, reads_version_3);
	tcase_add_test(tc, home_survives_restart);
	tcase_add_test(tc, bad_home_refused);
	tcase_add_loop_test(tc, routers_verdicts_restored, 0, 2);
	tcase_add_test(tc, million);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(snapshot_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
