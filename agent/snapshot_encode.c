/* snapshot_encode.c - the snapshot encoder: the core's state captured (at once or in slices), ordered, packed into msgpack. */
#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "snapshot_codec.h"

/* Digits of the radix sort of captured entries. */
#define SNAPSHOT_RADIX_BITS   11u
#define SNAPSHOT_RADIX        ((size_t)1 << SNAPSHOT_RADIX_BITS)

static int snapshot_breaker_code(enum core_breaker b)
{
	switch (b) {
	case CORE_BREAKER_OPEN:
		return SNAPSHOT_BREAKER_OPEN;
	case CORE_BREAKER_HALF_OPEN:
		return SNAPSHOT_BREAKER_HALF_OPEN;
	default:
		return SNAPSHOT_BREAKER_CLOSED;
	}
}

static int snapshot_pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	if (n > SNAPSHOT_NAME_MAX)
		n = SNAPSHOT_NAME_MAX; /* the core refuses longer names anyway */
	int r = msgpack_pack_str(pk, n);
	return r != 0 ? r : msgpack_pack_str_body(pk, s != NULL ? s : "", n);
}

/* Big-endian uint64 at p (the body of a fix_uint64). */
static void snapshot_put_be64(char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (char)(v & 0xff);
		v >>= 8;
	}
}

/* One affinity entry as captured on the loop: its endpoint already the
 * record index, so packing needs nothing of the core. last_ms is on the
 * loop's clock. The array is in visit order until packing sorts it. */
struct snapshot_entry {
	uint64_t akey;
	uint64_t last_ms;
	uint32_t ep;
};

/* The records of one map (the affinity map, or the failover tiers'
 * homes) as captured, and the walk that copies them. */
struct snapshot_list {
	struct core_affinity_cursor cur;
	struct snapshot_entry *e;
	size_t n, cap;
};

/* An endpoint as the capture began: its core index and names, checked at
 * every slice (an index reused by another endpoint must not inherit its
 * entries). */
struct snapshot_cap_ep {
	int idx;
	char *backend, *server, *key;
};

struct snapshot_capture {
	msgpack_sbuffer sb;  /* header and endpoint records, packed at the end */
	msgpack_packer pk;
	size_t counts_at;    /* offset of the two fix_uint64 counts */
	size_t homes_at;     /* offset of the homes' fix_uint64 count */
	struct snapshot_cap_ep *eps;
	size_t n_ep;
	int32_t *file_idx;   /* core index -> record index, -1: none */
	size_t n_idx;
	uint64_t start_ms;   /* loop time of the first slice */
	uint64_t end_ms;     /* loop time of the last slice: idle times end here */
	uint64_t slices;
	struct snapshot_list ent;   /* the affinity entries, walked first */
	struct snapshot_list homes; /* then the homes */
	int failed;
};

void snapshot_capture_free(struct snapshot_capture *cap)
{
	if (cap == NULL)
		return;
	msgpack_sbuffer_destroy(&cap->sb);
	for (size_t i = 0; i < cap->n_ep; i++) {
		free(cap->eps[i].backend);
		free(cap->eps[i].server);
		free(cap->eps[i].key);
	}
	free(cap->eps);
	free(cap->file_idx);
	free(cap->ent.e);
	free(cap->homes.e);
	free(cap);
}

static bool snapshot_same(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* Whether every endpoint of the capture is still the one it began with. */
static bool snapshot_cap_eps_same(const struct snapshot_capture *cap,
				  const struct core *c, uint64_t now_ms)
{
	for (size_t i = 0; i < cap->n_ep; i++) {
		struct core_endpoint_info info;
		const struct snapshot_cap_ep *e = &cap->eps[i];
		if (core_endpoint_info(c, e->idx, now_ms, &info) < 0 ||
		    !snapshot_same(info.backend, e->backend) ||
		    !snapshot_same(info.server, e->server) ||
		    !snapshot_same(info.key_id, e->key))
			return false;
	}
	return true;
}

static char *snapshot_strdup(const char *s)
{
	return strdup(s != NULL ? s : "");
}

int snapshot_capture_begin(const struct core *c, uint64_t now_ms,
			   struct snapshot_capture **out)
{
	struct snapshot_capture *cap = calloc(1, sizeof(*cap));
	struct core_stats cs;
	int max_idx = -1;
	size_t n = 0;

	*out = NULL;
	if (cap == NULL)
		return -ENOMEM;
	msgpack_sbuffer_init(&cap->sb);
	msgpack_packer_init(&cap->pk, &cap->sb, msgpack_sbuffer_write);
	for (int i = core_endpoint_next(c, -1); i >= 0; i = core_endpoint_next(c, i)) {
		max_idx = i;
		n++;
	}
	cap->eps = calloc(n ? n : 1, sizeof(*cap->eps));
	cap->file_idx = malloc(sizeof(*cap->file_idx) * (size_t)(max_idx + 1) + 1);
	core_stats(c, &cs);
	/* Room for the entries live now, and some that come meanwhile. */
	cap->ent.cap = (size_t)cs.affinity_entries + cs.affinity_entries / 16 + 64;
	cap->ent.e = malloc(sizeof(*cap->ent.e) * cap->ent.cap);
	cap->homes.cap = (size_t)cs.homes_entries + cs.homes_entries / 16 + 16;
	cap->homes.e = malloc(sizeof(*cap->homes.e) * cap->homes.cap);
	if (cap->eps == NULL || cap->file_idx == NULL || cap->ent.e == NULL ||
	    cap->homes.e == NULL)
		goto fail;
	cap->n_idx = (size_t)(max_idx + 1);
	for (int i = 0; i <= max_idx; i++)
		cap->file_idx[i] = -1;
	for (int i = core_endpoint_next(c, -1); i >= 0 && cap->n_ep < n;
	     i = core_endpoint_next(c, i)) {
		struct core_endpoint_info info;
		if (core_endpoint_info(c, i, now_ms, &info) < 0 ||
		    cap->n_ep >= SNAPSHOT_MAX_ENDPOINTS)
			continue;
		struct snapshot_cap_ep *e = &cap->eps[cap->n_ep];
		e->idx = i;
		e->backend = snapshot_strdup(info.backend);
		e->server = snapshot_strdup(info.server);
		e->key = snapshot_strdup(info.key_id);
		cap->file_idx[i] = (int32_t)cap->n_ep++;
		if (e->backend == NULL || e->server == NULL || e->key == NULL)
			goto fail;
	}
	core_affinity_cursor_init(c, &cap->ent.cur);
	core_homes_cursor_init(c, &cap->homes.cur);
	cap->start_ms = cap->end_ms = now_ms;
	*out = cap;
	return 0;
fail:
	snapshot_capture_free(cap);
	return -ENOMEM;
}

struct snapshot_slice {
	struct snapshot_capture *cap;
	struct snapshot_list *l;
	uint64_t now_ms;
};

static int snapshot_cap_entry(void *arg, const struct core_affinity_record *rec)
{
	struct snapshot_slice *sl = arg;
	struct snapshot_capture *cap = sl->cap;
	struct snapshot_list *l = sl->l;
	if (rec->endpoint < 0 || (size_t)rec->endpoint >= cap->n_idx ||
	    cap->file_idx[rec->endpoint] < 0)
		return 0; /* an endpoint that joined during the walk */
	if (l->n == l->cap) {
		size_t ncap = l->cap * 2;
		struct snapshot_entry *e = realloc(l->e, sizeof(*e) * ncap);
		if (e == NULL)
			return -ENOMEM;
		l->e = e;
		l->cap = ncap;
	}
	l->e[l->n] = (struct snapshot_entry){
		.akey = rec->akey,
		.last_ms = sl->now_ms - rec->idle_ms, /* idle <= now */
		.ep = (uint32_t)cap->file_idx[rec->endpoint],
	};
	l->n++;
	return 0;
}

int snapshot_capture_step(struct snapshot_capture *cap, const struct core *c,
			  uint64_t now_ms, uint32_t max_slots)
{
	struct snapshot_list *l = !cap->ent.cur.done ? &cap->ent : &cap->homes;
	if (l->cur.done)
		return 0;
	if (!snapshot_cap_eps_same(cap, c, now_ms))
		return -ESTALE;
	struct snapshot_slice sl = { cap, l, now_ms };
	int rc = core_affinity_cursor_next(c, &l->cur, now_ms, max_slots,
					   snapshot_cap_entry, &sl);
	cap->slices++;
	cap->end_ms = now_ms;
	if (rc < 0)
		return rc;
	return cap->ent.cur.done && cap->homes.cur.done ? 0 : 1;
}

int snapshot_capture_end(struct snapshot_capture *cap, const struct core *c,
			 uint64_t now_ms, int64_t now_unix_ms)
{
	msgpack_packer *pk = &cap->pk;
	if (!cap->ent.cur.done || !cap->homes.cur.done)
		return -EINVAL;
	if (!snapshot_cap_eps_same(cap, c, now_ms))
		return -ESTALE;
	cap->end_ms = now_ms;
	/* Header: the counts are fixed-width so they can be patched once the
	 * entries are packed. */
	cap->failed |= msgpack_pack_array(pk, SNAPSHOT_HEADER_FIELDS);
	cap->failed |= snapshot_pack_str(pk, SNAPSHOT_MAGIC);
	cap->failed |= msgpack_pack_uint32(pk, SNAPSHOT_VERSION);
	cap->failed |= msgpack_pack_int64(pk, now_unix_ms);
	cap->counts_at = cap->sb.size;
	cap->failed |= msgpack_pack_fix_uint64(pk, cap->n_ep);
	cap->failed |= msgpack_pack_fix_uint64(pk, 0);
	struct core_routers_info ri;
	core_routers_info(c, &ri);
	unsigned routers = (ri.engines ? SNAPSHOT_ROUTERS_ENGINES : 0) |
			   (ri.hints ? SNAPSHOT_ROUTERS_HINTS : 0) |
			   (ri.turns ? SNAPSHOT_ROUTERS_TURNS : 0);
	cap->failed |= msgpack_pack_uint8(pk, (uint8_t)routers);
	cap->homes_at = cap->sb.size;
	cap->failed |= msgpack_pack_fix_uint64(pk, 0);
	for (size_t i = 0; i < cap->n_ep && !cap->failed; i++) {
		const struct snapshot_cap_ep *e = &cap->eps[i];
		struct core_endpoint_stats st;
		if (core_endpoint_stats_export(c, e->idx, now_ms, &st) < 0)
			return -ESTALE;
		cap->failed |= msgpack_pack_array(pk, SNAPSHOT_ENDPOINT_FIELDS);
		cap->failed |= snapshot_pack_str(pk, e->backend);
		cap->failed |= snapshot_pack_str(pk, e->server);
		cap->failed |= snapshot_pack_str(pk, e->key);
		cap->failed |= msgpack_pack_double(pk, st.ewma_ms[CORE_KIND_PLAIN]);
		cap->failed |= msgpack_pack_double(pk, st.ewma_ms[CORE_KIND_STREAM]);
		cap->failed |= msgpack_pack_uint32(pk, st.samples[CORE_KIND_PLAIN]);
		cap->failed |= msgpack_pack_uint32(pk, st.samples[CORE_KIND_STREAM]);
		cap->failed |= msgpack_pack_uint32(pk,
				(uint32_t)snapshot_breaker_code(st.breaker));
		cap->failed |= msgpack_pack_uint32(pk, st.trips);
		cap->failed |= msgpack_pack_uint64(pk, st.cooldown_left_ms);
		cap->failed |= msgpack_pack_uint64(pk, st.dead_key_left_ms);
		cap->failed |= msgpack_pack_uint64(pk, st.idle_ms);
		cap->failed |= msgpack_pack_double(pk, st.e2e_ewma_ms[CORE_KIND_PLAIN]);
		cap->failed |= msgpack_pack_double(pk, st.e2e_ewma_ms[CORE_KIND_STREAM]);
		cap->failed |= msgpack_pack_uint32(pk, st.e2e_samples[CORE_KIND_PLAIN]);
		cap->failed |= msgpack_pack_uint32(pk, st.e2e_samples[CORE_KIND_STREAM]);
	}
	return cap->failed ? -ENOMEM : 0;
}

int snapshot_capture(const struct core *c, uint64_t now_ms,
		     int64_t now_unix_ms, struct snapshot_capture **out)
{
	struct snapshot_capture *cap;
	int rc = snapshot_capture_begin(c, now_ms, &cap);
	*out = NULL;
	if (rc < 0)
		return rc;
	do
		rc = snapshot_capture_step(cap, c, now_ms, UINT32_MAX);
	while (rc > 0);
	if (rc == 0)
		rc = snapshot_capture_end(cap, c, now_ms, now_unix_ms);
	if (rc < 0) {
		snapshot_capture_free(cap);
		return rc;
	}
	*out = cap;
	return 0;
}

size_t snapshot_capture_entries(const struct snapshot_capture *cap)
{
	return cap->ent.n;
}

uint64_t snapshot_capture_slices(const struct snapshot_capture *cap)
{
	return cap->slices;
}

/* Stable LSD radix sort of the entries by last_ms (11 bits a pass: the
 * 2048 write cursors stay in cache; only the passes the spread of last_ms
 * needs, two for the default TTL). The entries come in visit order, so
 * ties keep it. */
static int snapshot_sort(struct snapshot_list *l)
{
	size_t n = l->n;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = l->e[i].last_ms;
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	if (n < 2 || lo == hi)
		return 0;
	struct snapshot_entry *tmp = malloc(n * sizeof(*tmp));
	size_t *count = malloc(SNAPSHOT_RADIX * sizeof(*count));
	if (tmp == NULL || count == NULL) {
		free(tmp);
		free(count);
		return -ENOMEM;
	}
	struct snapshot_entry *src = l->e, *dst = tmp;
	for (unsigned shift = 0; shift < 64 && ((hi - lo) >> shift) != 0;
	     shift += SNAPSHOT_RADIX_BITS) {
		memset(count, 0, SNAPSHOT_RADIX * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[((src[i].last_ms - lo) >> shift) & (SNAPSHOT_RADIX - 1)]++;
		size_t sum = 0;
		for (size_t d = 0; d < SNAPSHOT_RADIX; d++) {
			size_t c = count[d];
			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[((src[i].last_ms - lo) >> shift) &
				  (SNAPSHOT_RADIX - 1)]++] = src[i];
		struct snapshot_entry *t = src;
		src = dst;
		dst = t;
	}
	if (src != l->e) {
		memcpy(l->e, src, n * sizeof(*src));
	}
	free(tmp);
	free(count);
	return 0;
}

/* Oldest first (what restores the LRU order on load), and each key once.
 * A key is copied twice only when it was removed after its slot was
 * copied and inserted again, at or after start_ms, into a slot copied
 * later: so the records of start_ms or later (a short suffix once sorted)
 * are the only second copies, and the latest record of their keys is
 * kept. */
static int snapshot_order(struct snapshot_list *l, uint64_t start_ms)
{
	if (snapshot_sort(l) < 0)
		return -ENOMEM;
	size_t n = l->n, first = n;
	while (first > 0 && l->e[first - 1].last_ms >= start_ms)
		first--;
	if (first == n)
		return 0;
	size_t recent = n - first, slots = 16;
	while (slots < 2 * recent)
		slots *= 2;
	/* key -> index of its latest record + 1 (0: empty). */
	struct { uint64_t key; size_t at; } *set = calloc(slots, sizeof(*set));
	if (set == NULL)
		return -ENOMEM;
	for (size_t i = first; i < n; i++) {
		size_t j = (size_t)mix64(l->e[i].akey) & (slots - 1);
		while (set[j].at != 0 && set[j].key != l->e[i].akey)
			j = (j + 1) & (slots - 1);
		set[j].key = l->e[i].akey;
		set[j].at = i + 1;
	}
	size_t keep = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = (size_t)mix64(l->e[i].akey) & (slots - 1);
		while (set[j].at != 0 && set[j].key != l->e[i].akey)
			j = (j + 1) & (slots - 1);
		if (set[j].at != 0 && set[j].at != i + 1)
			continue; /* a later record of this key follows */
		l->e[keep++] = l->e[i];
	}
	free(set);
	l->n = keep;
	return 0;
}

/* l's records in arrays of at most SNAPSHOT_BLOCK triples. */
static void snapshot_pack_list(struct snapshot_capture *cap,
			       const struct snapshot_list *l)
{
	msgpack_packer *pk = &cap->pk;
	for (size_t i = 0; i < l->n && !cap->failed; i += SNAPSHOT_BLOCK) {
		size_t k = l->n - i < SNAPSHOT_BLOCK ? l->n - i : SNAPSHOT_BLOCK;
		cap->failed |= msgpack_pack_array(pk, (size_t)3 * k);
		for (size_t j = i; j < i + k; j++) {
			uint64_t last = l->e[j].last_ms;
			cap->failed |= msgpack_pack_uint64(pk, l->e[j].akey);
			cap->failed |= msgpack_pack_uint32(pk, l->e[j].ep);
			cap->failed |= msgpack_pack_uint64(pk, cap->end_ms > last ?
							   cap->end_ms - last : 0);
		}
	}
}

int snapshot_pack(struct snapshot_capture *cap, char **out, size_t *len)
{
	msgpack_packer *pk = &cap->pk;
	*out = NULL;
	*len = 0;
	if (cap->counts_at == 0 || snapshot_order(&cap->ent, cap->start_ms) < 0 ||
	    snapshot_order(&cap->homes, cap->start_ms) < 0)
		return -ENOMEM;
	snapshot_pack_list(cap, &cap->ent);
	snapshot_pack_list(cap, &cap->homes);
	if (cap->failed)
		return -ENOMEM;
	/* counts_at points at two fix_uint64: 0xcf + 8 bytes each; homes_at
	 * at one more. */
	snapshot_put_be64(cap->sb.data + cap->counts_at + 10, cap->ent.n);
	snapshot_put_be64(cap->sb.data + cap->homes_at + 1, cap->homes.n);
	uint64_t sum = core_hash_bytes(cap->sb.data, cap->sb.size);
	if (msgpack_pack_fix_uint64(pk, sum) != 0)
		return -ENOMEM;
	*len = cap->sb.size; /* release zeroes it */
	*out = msgpack_sbuffer_release(&cap->sb);
	return 0;
}

int snapshot_encode(const struct core *c, uint64_t now_ms,
		    int64_t now_unix_ms, char **out, size_t *len)
{
	struct snapshot_capture *cap;
	*out = NULL;
	*len = 0;
	int rc = snapshot_capture(c, now_ms, now_unix_ms, &cap);
	if (rc < 0)
		return rc;
	rc = snapshot_pack(cap, out, len);
	snapshot_capture_free(cap);
	return rc;
}
