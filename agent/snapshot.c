/* snapshot.c - the state snapshot: encode, atomic write, bounded load (the only file with msgpack.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "snapshot.h"

/* Largest duration or cooldown accepted (2^53 ms): now + value can never
 * overflow, and a double holds it exactly. */
#define SNAPSHOT_MAX_MS       (UINT64_C(1) << 53)
/* Digits of the radix sort of captured entries. */
#define SNAPSHOT_RADIX_BITS   11u
#define SNAPSHOT_RADIX        ((size_t)1 << SNAPSHOT_RADIX_BITS)
/* Trips beyond this double the cooldown no further anyway. */
#define SNAPSHOT_MAX_TRIPS    64u
/* Largest EWMA accepted: a day. */
#define SNAPSHOT_MAX_EWMA_MS  86400000.0
/* Fields of a header and of an endpoint record (version 1 had no
 * end-to-end EWMAs). */
#define SNAPSHOT_HEADER_FIELDS      5u
#define SNAPSHOT_ENDPOINT_FIELDS    16u
#define SNAPSHOT_ENDPOINT_FIELDS_V1 12u
/* Breaker states as the file numbers them (independent of the core's enum). */
enum {
	SNAPSHOT_BREAKER_CLOSED = 0,
	SNAPSHOT_BREAKER_OPEN = 1,
	SNAPSHOT_BREAKER_HALF_OPEN = 2,
};

static void snapshot_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void snapshot_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int64_t snapshot_wall_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- encoding -------------------------------------------------------- */

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
	struct snapshot_cap_ep *eps;
	size_t n_ep;
	int32_t *file_idx;   /* core index -> record index, -1: none */
	size_t n_idx;
	struct core_affinity_cursor cur;
	uint64_t start_ms;   /* loop time of the first slice */
	uint64_t end_ms;     /* loop time of the last slice: idle times end here */
	uint64_t slices;
	struct snapshot_entry *e;
	size_t n, cap;
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
	free(cap->e);
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
	cap->cap = (size_t)cs.affinity_entries + cs.affinity_entries / 16 + 64;
	cap->e = malloc(sizeof(*cap->e) * cap->cap);
	if (cap->eps == NULL || cap->file_idx == NULL || cap->e == NULL)
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
	core_affinity_cursor_init(c, &cap->cur);
	cap->start_ms = cap->end_ms = now_ms;
	*out = cap;
	return 0;
fail:
	snapshot_capture_free(cap);
	return -ENOMEM;
}

struct snapshot_slice {
	struct snapshot_capture *cap;
	uint64_t now_ms;
};

static int snapshot_cap_entry(void *arg, const struct core_affinity_record *rec)
{
	struct snapshot_slice *sl = arg;
	struct snapshot_capture *cap = sl->cap;
	if (rec->endpoint < 0 || (size_t)rec->endpoint >= cap->n_idx ||
	    cap->file_idx[rec->endpoint] < 0)
		return 0; /* an endpoint that joined during the walk */
	if (cap->n == cap->cap) {
		size_t ncap = cap->cap * 2;
		struct snapshot_entry *e = realloc(cap->e, sizeof(*e) * ncap);
		if (e == NULL)
			return -ENOMEM;
		cap->e = e;
		cap->cap = ncap;
	}
	cap->e[cap->n] = (struct snapshot_entry){
		.akey = rec->akey,
		.last_ms = sl->now_ms - rec->idle_ms, /* idle <= now */
		.ep = (uint32_t)cap->file_idx[rec->endpoint],
	};
	cap->n++;
	return 0;
}

int snapshot_capture_step(struct snapshot_capture *cap, const struct core *c,
			  uint64_t now_ms, uint32_t max_slots)
{
	if (cap->cur.done)
		return 0;
	if (!snapshot_cap_eps_same(cap, c, now_ms))
		return -ESTALE;
	struct snapshot_slice sl = { cap, now_ms };
	int rc = core_affinity_cursor_next(c, &cap->cur, now_ms, max_slots,
					   snapshot_cap_entry, &sl);
	cap->slices++;
	cap->end_ms = now_ms;
	if (rc < 0)
		return rc;
	return cap->cur.done ? 0 : 1;
}

int snapshot_capture_end(struct snapshot_capture *cap, const struct core *c,
			 uint64_t now_ms, int64_t now_unix_ms)
{
	msgpack_packer *pk = &cap->pk;
	if (!cap->cur.done)
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
	return cap->n;
}

uint64_t snapshot_capture_slices(const struct snapshot_capture *cap)
{
	return cap->slices;
}

static uint64_t snapshot_mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

/* Stable LSD radix sort of the entries by last_ms (11 bits a pass: the
 * 2048 write cursors stay in cache; only the passes the spread of last_ms
 * needs, two for the default TTL). The entries come in visit order, so
 * ties keep it. */
static int snapshot_sort(struct snapshot_capture *cap)
{
	size_t n = cap->n;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = cap->e[i].last_ms;
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
	struct snapshot_entry *src = cap->e, *dst = tmp;
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
	if (src != cap->e) {
		memcpy(cap->e, src, n * sizeof(*src));
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
static int snapshot_order(struct snapshot_capture *cap)
{
	if (snapshot_sort(cap) < 0)
		return -ENOMEM;
	size_t n = cap->n, first = n;
	while (first > 0 && cap->e[first - 1].last_ms >= cap->start_ms)
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
		size_t j = (size_t)snapshot_mix(cap->e[i].akey) & (slots - 1);
		while (set[j].at != 0 && set[j].key != cap->e[i].akey)
			j = (j + 1) & (slots - 1);
		set[j].key = cap->e[i].akey;
		set[j].at = i + 1;
	}
	size_t keep = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = (size_t)snapshot_mix(cap->e[i].akey) & (slots - 1);
		while (set[j].at != 0 && set[j].key != cap->e[i].akey)
			j = (j + 1) & (slots - 1);
		if (set[j].at != 0 && set[j].at != i + 1)
			continue; /* a later record of this key follows */
		cap->e[keep++] = cap->e[i];
	}
	free(set);
	cap->n = keep;
	return 0;
}

int snapshot_pack(struct snapshot_capture *cap, char **out, size_t *len)
{
	msgpack_packer *pk = &cap->pk;
	*out = NULL;
	*len = 0;
	if (cap->counts_at == 0 || snapshot_order(cap) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < cap->n && !cap->failed; i += SNAPSHOT_BLOCK) {
		size_t k = cap->n - i < SNAPSHOT_BLOCK ? cap->n - i : SNAPSHOT_BLOCK;
		cap->failed |= msgpack_pack_array(pk, (size_t)3 * k);
		for (size_t j = i; j < i + k; j++) {
			uint64_t last = cap->e[j].last_ms;
			cap->failed |= msgpack_pack_uint64(pk, cap->e[j].akey);
			cap->failed |= msgpack_pack_uint32(pk, cap->e[j].ep);
			cap->failed |= msgpack_pack_uint64(pk, cap->end_ms > last ?
							   cap->end_ms - last : 0);
		}
	}
	if (cap->failed)
		return -ENOMEM;
	/* counts_at points at two fix_uint64: 0xcf + 8 bytes each. */
	snapshot_put_be64(cap->sb.data + cap->counts_at + 10, cap->n);
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

/* ---- writing --------------------------------------------------------- */

int snapshot_write_file(const char *path, const char *buf, size_t len,
			char *err, size_t errlen)
{
	size_t plen = strlen(path);
	char *tmp = malloc(plen + sizeof(".tmp.XXXXXX"));
	char *dir = malloc(plen + 2);
	int fd = -1, dfd = -1, rc = 0;
	const char *step = "";

	if (tmp == NULL || dir == NULL) {
		free(tmp);
		free(dir);
		snapshot_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".tmp.XXXXXX", sizeof(".tmp.XXXXXX"));
	/* The directory, for the fsync that makes the rename durable. */
	memcpy(dir, path, plen + 1);
	char *slash = strrchr(dir, '/');
	if (slash == NULL)
		memcpy(dir, ".", 2);
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';

	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = -errno;
		step = "create";
		tmp[0] = '\0';
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			step = "write";
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) != 0) {
		rc = -errno;
		step = "fsync";
		goto out;
	}
	int cr = close(fd);
	fd = -1;
	if (cr != 0) {
		rc = -errno;
		step = "close";
		goto out;
	}
	if (rename(tmp, path) != 0) {
		rc = -errno;
		step = "rename";
		goto out;
	}
	tmp[0] = '\0'; /* renamed: nothing to remove */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) != 0) {
		rc = -errno;
		step = "fsync directory";
	}
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	if (rc < 0) {
		snapshot_err(err, errlen, "%s %s: %s", step,
			     tmp[0] != '\0' ? tmp : path, strerror(-rc));
		if (tmp[0] != '\0')
			unlink(tmp);
	}
	free(tmp);
	free(dir);
	return rc;
}

int snapshot_write_sync(const struct core *c, const char *path,
			uint64_t now_ms, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc = snapshot_encode(c, now_ms, snapshot_wall_ms(), &buf, &len);
	if (rc < 0) {
		snapshot_err(err, errlen, "encode: out of memory");
		return rc;
	}
	rc = snapshot_write_file(path, buf, len, err, errlen);
	free(buf);
	return rc;
}

/* ---- loading --------------------------------------------------------- */

/* Length of the msgpack object at p: a scalar, a string, or an array of
 * scalars and strings (what the format uses; maps, ext, bin and nested
 * arrays are refused). Every length and count is checked against the
 * bytes left before anything is read, so msgpack never sees a count it
 * would allocate for beyond the buffer. Returns the length, or 0 when the
 * object is truncated or not of those kinds. */
static size_t snapshot_skim(const uint8_t *p, size_t len, int depth)
{
	if (len == 0)
		return 0;
	uint8_t b = p[0];
	size_t hdr, body = 0, count = 0;
	bool array = false;

	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
		return 1; /* fixint, nil, bool */
	if ((b & 0xe0) == 0xa0) { /* fixstr */
		hdr = 1;
		body = b & 0x1f;
	} else if ((b & 0xf0) == 0x90) { /* fixarray */
		hdr = 1;
		count = b & 0x0f;
		array = true;
	} else {
		switch (b) {
		case 0xcc: case 0xd0: return len >= 2 ? 2 : 0;
		case 0xcd: case 0xd1: return len >= 3 ? 3 : 0;
		case 0xce: case 0xd2: case 0xca: return len >= 5 ? 5 : 0;
		case 0xcf: case 0xd3: case 0xcb: return len >= 9 ? 9 : 0;
		case 0xd9:
			if (len < 2)
				return 0;
			hdr = 2;
			body = p[1];
			break;
		case 0xda:
		case 0xdc:
			if (len < 3)
				return 0;
			hdr = 3;
			body = (size_t)p[1] << 8 | p[2];
			break;
		case 0xdb:
		case 0xdd:
			if (len < 5)
				return 0;
			hdr = 5;
			body = (size_t)p[1] << 24 | (size_t)p[2] << 16 |
			       (size_t)p[3] << 8 | p[4];
			break;
		default:
			return 0; /* bin, ext, map, 0xc1 */
		}
		if (b == 0xdc || b == 0xdd) {
			count = body;
			body = 0;
			array = true;
		}
	}
	if (!array)
		return body > len - hdr ? 0 : hdr + body;
	if (depth > 0 || count > len - hdr)
		return 0; /* each element takes at least one byte */
	size_t off = hdr;
	for (size_t i = 0; i < count; i++) {
		size_t n = snapshot_skim(p + off, len - off, depth + 1);
		if (n == 0)
			return 0;
		off += n;
	}
	return off;
}

/* A cursor over the buffer, one checked object at a time. */
struct snapshot_rd {
	const uint8_t *p;
	size_t len, off;
	msgpack_unpacked u;
};

/* Unpacks the next object into rd->u. Returns 0 or -EBADMSG. */
static int snapshot_next(struct snapshot_rd *rd)
{
	size_t n = snapshot_skim(rd->p + rd->off, rd->len - rd->off, 0);
	if (n == 0)
		return -EBADMSG;
	size_t off = rd->off;
	msgpack_unpack_return r = msgpack_unpack_next(&rd->u,
		(const char *)rd->p, rd->off + n, &off);
	if (r != MSGPACK_UNPACK_SUCCESS || off != rd->off + n)
		return -EBADMSG;
	rd->off = off;
	return 0;
}

static bool snapshot_uint(const msgpack_object *o, uint64_t max, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return false;
	*v = o->via.u64;
	return true;
}

static bool snapshot_str(const msgpack_object *o, size_t min,
			 struct core_str *s)
{
	if (o->type != MSGPACK_OBJECT_STR || o->via.str.size < min ||
	    o->via.str.size > SNAPSHOT_NAME_MAX)
		return false;
	s->ptr = o->via.str.size ? o->via.str.ptr : "";
	s->len = o->via.str.size;
	return true;
}

static bool snapshot_ewma(const msgpack_object *o, double *v)
{
	double d;
	if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
		d = o->via.f64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		d = (double)o->via.u64;
	else
		return false;
	if (!isfinite(d) || d < 0 || d > SNAPSHOT_MAX_EWMA_MS)
		return false;
	*v = d;
	return true;
}

static uint64_t snapshot_sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* One endpoint record, checked, with where it lives in the core. */
struct snapshot_ep {
	int idx; /* -1: unknown to the core */
	struct core_endpoint_stats st;
};

static int snapshot_parse_endpoint(struct snapshot_rd *rd, struct core *c,
				   uint64_t version, uint64_t downtime,
				   struct snapshot_ep *ep)
{
	if (snapshot_next(rd) < 0)
		return -EBADMSG;
	const msgpack_object *o = &rd->u.data;
	uint32_t fields = version == 1 ? SNAPSHOT_ENDPOINT_FIELDS_V1
				       : SNAPSHOT_ENDPOINT_FIELDS;
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != fields)
		return -EBADMSG;
	const msgpack_object *f = o->via.array.ptr;
	struct core_str be, sv, key;
	uint64_t samples[2], breaker, trips, cool, dead, idle;
	struct core_endpoint_stats *st = &ep->st;

	if (!snapshot_str(&f[0], 1, &be) || !snapshot_str(&f[1], 1, &sv) ||
	    !snapshot_str(&f[2], 0, &key) ||
	    !snapshot_ewma(&f[3], &st->ewma_ms[CORE_KIND_PLAIN]) ||
	    !snapshot_ewma(&f[4], &st->ewma_ms[CORE_KIND_STREAM]) ||
	    !snapshot_uint(&f[5], UINT32_MAX, &samples[0]) ||
	    !snapshot_uint(&f[6], UINT32_MAX, &samples[1]) ||
	    !snapshot_uint(&f[7], SNAPSHOT_BREAKER_HALF_OPEN, &breaker) ||
	    !snapshot_uint(&f[8], UINT32_MAX, &trips) ||
	    /* Any cooldown: an agent before rate_limit_cooldown_max wrote
	     * what a Retry-After asked for (9*10^17 ms for 9*10^14 s); the
	     * file is sound and the import cuts it (core_cooldown_max_ms). */
	    !snapshot_uint(&f[9], UINT64_MAX, &cool) ||
	    !snapshot_uint(&f[10], SNAPSHOT_MAX_MS, &dead) ||
	    !snapshot_uint(&f[11], SNAPSHOT_MAX_MS, &idle))
		return -EBADMSG;
	st->samples[CORE_KIND_PLAIN] = (uint32_t)samples[0];
	st->samples[CORE_KIND_STREAM] = (uint32_t)samples[1];
	if (fields > SNAPSHOT_ENDPOINT_FIELDS_V1) {
		if (!snapshot_ewma(&f[12], &st->e2e_ewma_ms[CORE_KIND_PLAIN]) ||
		    !snapshot_ewma(&f[13], &st->e2e_ewma_ms[CORE_KIND_STREAM]) ||
		    !snapshot_uint(&f[14], UINT32_MAX, &samples[0]) ||
		    !snapshot_uint(&f[15], UINT32_MAX, &samples[1]))
			return -EBADMSG;
		st->e2e_samples[CORE_KIND_PLAIN] = (uint32_t)samples[0];
		st->e2e_samples[CORE_KIND_STREAM] = (uint32_t)samples[1];
	}
	st->breaker = breaker == SNAPSHOT_BREAKER_OPEN ? CORE_BREAKER_OPEN :
		      breaker == SNAPSHOT_BREAKER_HALF_OPEN ?
		      CORE_BREAKER_HALF_OPEN : CORE_BREAKER_CLOSED;
	st->trips = trips > SNAPSHOT_MAX_TRIPS ? SNAPSHOT_MAX_TRIPS : (uint32_t)trips;
	/* The agent was down for downtime: cooldowns ran meanwhile. */
	st->cooldown_left_ms = snapshot_sat_sub(cool, downtime);
	st->dead_key_left_ms = snapshot_sat_sub(dead, downtime);
	st->idle_ms = idle ? idle + downtime : 0;
	int i = core_endpoint_find(c, be, sv, key);
	ep->idx = i >= 0 ? i : -1;
	return 0;
}

/* Reads the blocks of affinity triples; imports them when apply is set. */
static int snapshot_entries(struct snapshot_rd *rd, struct core *c,
			    uint64_t n, const struct snapshot_ep *eps,
			    uint64_t n_ep, uint64_t now_ms, uint64_t downtime,
			    bool apply, struct snapshot_result *res)
{
	for (uint64_t done = 0; done < n;) {
		if (snapshot_next(rd) < 0)
			return -EBADMSG;
		const msgpack_object *o = &rd->u.data;
		if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size == 0 ||
		    o->via.array.size % 3 != 0 ||
		    o->via.array.size / 3 > SNAPSHOT_BLOCK ||
		    o->via.array.size / 3 > n - done)
			return -EBADMSG;
		const msgpack_object *f = o->via.array.ptr;
		for (uint32_t j = 0; j < o->via.array.size; j += 3) {
			uint64_t akey, ep, idle;
			if (!snapshot_uint(&f[j], UINT64_MAX, &akey) ||
			    !snapshot_uint(&f[j + 1], n_ep - 1, &ep) ||
			    !snapshot_uint(&f[j + 2], SNAPSHOT_MAX_MS, &idle))
				return -EBADMSG;
			if (!apply)
				continue;
			struct core_affinity_record rec = {
				.akey = akey, .endpoint = eps[ep].idx,
				.idle_ms = idle + downtime,
			};
			if (rec.endpoint < 0) {
				res->entries_unknown++;
				continue;
			}
			int r = core_affinity_import(c, &rec, now_ms);
			if (r == 0)
				res->entries_restored++;
			else if (r == -ESTALE)
				res->entries_expired++;
			else
				res->entries_unknown++;
		}
		done += o->via.array.size / 3;
	}
	return 0;
}

int snapshot_load_buffer(struct core *c, const uint8_t *buf, size_t len,
			 uint64_t now_ms, int64_t now_unix_ms,
			 struct snapshot_result *res, char *err, size_t errlen)
{
	struct snapshot_result tmp_res;
	struct snapshot_rd rd = { .p = buf, .len = len };
	struct snapshot_ep *eps = NULL;
	uint64_t version, n_ep, n_ent, downtime = 0;
	int rc = -EBADMSG;

	if (res == NULL)
		res = &tmp_res;
	*res = (struct snapshot_result){ .bytes = len };
	if (len > SNAPSHOT_MAX_BYTES) {
		snapshot_err(err, errlen, "%zu bytes, more than the %u allowed",
			     len, SNAPSHOT_MAX_BYTES);
		return -EFBIG;
	}
	msgpack_unpacked_init(&rd.u);

	/* The header: magic and version first, so that a future version is
	 * told apart from corruption whatever its layout. */
	if (snapshot_next(&rd) < 0 || rd.u.data.type != MSGPACK_OBJECT_ARRAY ||
	    rd.u.data.via.array.size < 2) {
		snapshot_err(err, errlen, "no snapshot header");
		goto out;
	}
	const msgpack_object *h = rd.u.data.via.array.ptr;
	if (h[0].type != MSGPACK_OBJECT_STR ||
	    h[0].via.str.size != sizeof(SNAPSHOT_MAGIC) - 1 ||
	    memcmp(h[0].via.str.ptr, SNAPSHOT_MAGIC, h[0].via.str.size) != 0) {
		snapshot_err(err, errlen, "not a warmlane snapshot (bad magic)");
		goto out;
	}
	if (!snapshot_uint(&h[1], UINT32_MAX, &version)) {
		snapshot_err(err, errlen, "bad version field");
		goto out;
	}
	res->version = (uint32_t)version;
	if (version < SNAPSHOT_VERSION_MIN || version > SNAPSHOT_VERSION) {
		snapshot_err(err, errlen,
			     "format version %" PRIu64 ", this agent reads %u to %u",
			     version, SNAPSHOT_VERSION_MIN, SNAPSHOT_VERSION);
		rc = -ENOTSUP;
		goto out;
	}
	if (rd.u.data.via.array.size != SNAPSHOT_HEADER_FIELDS ||
	    (h[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
	     h[2].type != MSGPACK_OBJECT_NEGATIVE_INTEGER) ||
	    !snapshot_uint(&h[3], SNAPSHOT_MAX_ENDPOINTS, &n_ep) ||
	    !snapshot_uint(&h[4], UINT64_MAX, &n_ent)) {
		snapshot_err(err, errlen, "bad header");
		goto out;
	}
	int64_t written = h[2].via.i64;
	if (h[2].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    h[2].via.u64 > INT64_MAX)
		written = INT64_MAX;
	if (now_unix_ms > written)
		downtime = (uint64_t)now_unix_ms - (uint64_t)written;
	if (downtime > SNAPSHOT_MAX_MS)
		downtime = SNAPSHOT_MAX_MS;
	res->downtime_ms = downtime;

	/* The trailer, then every count against the bytes that remain. */
	if (len - rd.off < SNAPSHOT_TRAILER_LEN ||
	    buf[len - SNAPSHOT_TRAILER_LEN] != 0xcf) {
		snapshot_err(err, errlen, "truncated: no checksum");
		goto out;
	}
	uint64_t sum = 0;
	for (size_t i = len - SNAPSHOT_TRAILER_LEN + 1; i < len; i++)
		sum = sum << 8 | buf[i];
	if (sum != core_hash_bytes(buf, len - SNAPSHOT_TRAILER_LEN)) {
		snapshot_err(err, errlen, "checksum mismatch (truncated or corrupt)");
		goto out;
	}
	rd.len = len - SNAPSHOT_TRAILER_LEN;
	size_t left = rd.len - rd.off;
	/* Smallest records: an endpoint 15 bytes (fixarray, names of 1, 1
	 * and 0 bytes, nine one-byte scalars), an entry 3. */
	if (n_ep > left / 15 || (n_ent > 0 && n_ep == 0) || n_ent > left / 3 ||
	    n_ent * 3 > left - n_ep * 15) {
		snapshot_err(err, errlen,
			     "counts (%" PRIu64 " endpoints, %" PRIu64
			     " entries) exceed the %zu bytes left",
			     n_ep, n_ent, left);
		goto out;
	}
	res->endpoints = n_ep;
	res->entries = n_ent;

	eps = calloc(n_ep ? n_ep : 1, sizeof(*eps));
	if (eps == NULL) {
		snapshot_err(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n_ep; i++) {
		if (snapshot_parse_endpoint(&rd, c, version, downtime, &eps[i]) < 0) {
			snapshot_err(err, errlen, "endpoint record %" PRIu64
				     " at byte %zu is invalid", i, rd.off);
			goto out;
		}
	}
	size_t entries_at = rd.off;
	if (snapshot_entries(&rd, c, n_ent, eps, n_ep, now_ms, downtime, false,
			     res) < 0) {
		snapshot_err(err, errlen, "affinity record invalid near byte %zu",
			     rd.off);
		goto out;
	}
	if (rd.off != rd.len) {
		snapshot_err(err, errlen, "%zu unexpected bytes after the records",
			     rd.len - rd.off);
		goto out;
	}

	/* Valid: only now does the core change. */
	for (uint64_t i = 0; i < n_ep; i++) {
		if (eps[i].idx < 0 ||
		    core_endpoint_stats_import(c, eps[i].idx, now_ms,
					       &eps[i].st) < 0)
			res->endpoints_unknown++;
		else if (eps[i].st.breaker == CORE_BREAKER_OPEN &&
			 eps[i].st.cooldown_left_ms > core_cooldown_max_ms(c))
			res->cooldowns_capped++;
	}
	rd.off = entries_at;
	snapshot_entries(&rd, c, n_ent, eps, n_ep, now_ms, downtime, true, res);
	rc = 0;
out:
	msgpack_unpacked_destroy(&rd.u);
	free(eps);
	return rc;
}

int snapshot_load(struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_result *res, char *err, size_t errlen)
{
	struct snapshot_result tmp_res;
	uint8_t *buf = NULL;
	struct stat st;
	int rc;

	if (res == NULL)
		res = &tmp_res;
	*res = (struct snapshot_result){ .version = 0 };
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	 * writer, for ever, before the fstat below can refuse it. A regular
	 * file's reads ignore the flag. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		snapshot_err(err, errlen, "open %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snapshot_err(err, errlen, "stat %s: %s", path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snapshot_err(err, errlen, "%s is not a regular file (%s), refused",
			     path, S_ISFIFO(st.st_mode) ? "a FIFO"
			     : S_ISDIR(st.st_mode) ? "a directory"
			     : S_ISSOCK(st.st_mode) ? "a socket"
			     : "a device");
		goto out;
	}
	if ((uint64_t)st.st_size > SNAPSHOT_MAX_BYTES) {
		rc = -EFBIG;
		snapshot_err(err, errlen, "%jd bytes, more than the %u allowed",
			     (intmax_t)st.st_size, SNAPSHOT_MAX_BYTES);
	} else {
		size_t size = (size_t)st.st_size, off = 0;
		buf = malloc(size ? size : 1);
		if (buf == NULL) {
			rc = -ENOMEM;
			snapshot_err(err, errlen, "out of memory");
			goto out;
		}
		while (off < size) {
			ssize_t n = read(fd, buf + off, size - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc = -errno;
				snapshot_err(err, errlen, "read %s: %s", path,
					     strerror(-rc));
				goto out;
			}
			if (n == 0)
				break; /* shrank meanwhile: the parser says so */
			off += (size_t)n;
		}
		rc = snapshot_load_buffer(c, buf, off, now_ms, snapshot_wall_ms(),
					  res, err, errlen);
	}
	if (rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG) {
		/* Aside, not deleted: it may be needed to see what went wrong,
		 * and the next snapshot must not be refused by it. */
		size_t plen = strlen(path);
		char *aside = malloc(plen + sizeof(".corrupt"));
		if (aside != NULL) {
			memcpy(aside, path, plen);
			memcpy(aside + plen, ".corrupt", sizeof(".corrupt"));
			int moved = rename(path, aside) == 0 ? 0 : errno;
			if (err != NULL && errlen > 0) {
				size_t elen = strnlen(err, errlen - 1);
				if (moved == 0)
					snapshot_err(err + elen, errlen - elen,
						     "; renamed to %s", aside);
				else
					snapshot_err(err + elen, errlen - elen,
						     "; cannot rename it to %s: %s",
						     aside, strerror(moved));
			}
			free(aside);
		}
	}
out:
	close(fd);
	free(buf);
	return rc;
}

int snapshot_restore(struct core *c, const char *path, uint64_t now_ms,
		     struct snapshot_stats *st)
{
	struct snapshot_result res;
	char err[1024], q[1100], qp[600];

	if (path == NULL || path[0] == '\0')
		return 0;
	log_quote(qp, sizeof(qp), path, strlen(path));
	uint64_t t0 = uv_hrtime();
	int rc = snapshot_load(c, path, now_ms, &res, err, sizeof(err));
	uint64_t us = (uv_hrtime() - t0) / 1000;
	if (rc == 0) {
		log_info("snapshot loaded",
			 "file=%s bytes=%" PRIu64 " version=%" PRIu32
			 " endpoints=%" PRIu64
			 " endpoints_unknown=%" PRIu64 " entries=%" PRIu64
			 " restored=%" PRIu64 " expired=%" PRIu64
			 " unknown_endpoint=%" PRIu64 " cooldowns_capped=%" PRIu64
			 " downtime_ms=%" PRIu64 " load_us=%" PRIu64,
			 qp, res.bytes, res.version, res.endpoints,
			 res.endpoints_unknown, res.entries, res.entries_restored,
			 res.entries_expired, res.entries_unknown,
			 res.cooldowns_capped, res.downtime_ms, us);
		if (st != NULL) {
			st->loaded = true;
			st->load_us = us;
			st->restored = res.entries_restored;
			st->dropped_expired = res.entries_expired;
			st->dropped_unknown = res.entries_unknown;
		}
	} else if (rc == -ENOENT) {
		log_info("no snapshot: starting cold", "file=%s", qp);
	} else if (rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG) {
		log_error("snapshot rejected: starting cold", "file=%s error=%s",
			  qp, log_quote(q, sizeof(q), err, strlen(err)));
		if (st != NULL)
			st->corrupt++;
	} else if (rc == -EINVAL) {
		/* A FIFO or a device put there by mistake: left in place (the
		 * next write renames its temp file over it). */
		log_error("snapshot path is not a regular file: starting cold",
			  "file=%s error=%s", qp,
			  log_quote(q, sizeof(q), err, strlen(err)));
	} else {
		log_error("cannot read the snapshot: starting cold",
			  "file=%s error=%s", qp,
			  log_quote(q, sizeof(q), err, strlen(err)));
	}
	return rc;
}

int snapshot_save(const struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_stats *st)
{
	char err[512], q[600], qp[600];
	if (path == NULL || path[0] == '\0')
		return 0;
	log_quote(qp, sizeof(qp), path, strlen(path));
	uint64_t t0 = uv_hrtime();
	int rc = snapshot_write_sync(c, path, now_ms, err, sizeof(err));
	uint64_t us = (uv_hrtime() - t0) / 1000;
	if (rc == 0) {
		log_info("snapshot written", "file=%s write_us=%" PRIu64, qp, us);
		if (st != NULL) {
			st->writes++;
			st->last_write_unix_ms = snapshot_wall_ms();
			st->last_write_us = us;
			st->last_hold_us = us; /* at exit, all on the loop */
		}
	} else {
		log_error("snapshot not written", "file=%s error=%s", qp,
			  log_quote(q, sizeof(q), err, strlen(err)));
		if (st != NULL)
			st->write_failures++;
	}
	return rc;
}

/* ---- the periodic writer --------------------------------------------- */

/* On a threadpool thread: only w->path, w->cap, w->buf and w->len are
 * touched, and the loop leaves them alone while busy. */
static void snapshot_work(uv_work_t *req)
{
	struct snapshot_writer *w = req->data;
	uint64_t t0 = uv_hrtime();
	w->result = snapshot_pack(w->cap, &w->buf, &w->len);
	uint64_t t1 = uv_hrtime();
	w->last_pack_us = (t1 - t0) / 1000;
	if (w->result < 0) {
		snprintf(w->err, sizeof(w->err), "encode: out of memory");
		return;
	}
	w->last_bytes = w->len;
	w->result = snapshot_write_file(w->path, w->buf, w->len, w->err,
					sizeof(w->err));
	w->last_write_us = (uv_hrtime() - t1) / 1000;
}

static void snapshot_fail(struct snapshot_writer *w, const char *why)
{
	char q[300];
	/* Once per failure streak would hide a fix; every interval is at
	 * most one line per 100 ms (the smallest interval). */
	w->failures++;
	if (w->st != NULL)
		w->st->write_failures++;
	log_error("snapshot not written", "error=%s",
		  log_quote(q, sizeof(q), why, strlen(why)));
}

static void snapshot_after_work(uv_work_t *req, int status)
{
	struct snapshot_writer *w = req->data;
	size_t entries = snapshot_capture_entries(w->cap);
	free(w->buf);
	w->buf = NULL;
	snapshot_capture_free(w->cap);
	w->cap = NULL;
	w->busy = false;
	if (status < 0) {
		snapshot_fail(w, uv_err_name(status));
	} else if (w->result < 0) {
		snapshot_fail(w, w->err);
	} else {
		uint64_t total_us = (uv_hrtime() - w->started_ns) / 1000;
		w->writes++;
		if (w->st != NULL) {
			w->st->writes++;
			w->st->last_write_unix_ms = snapshot_wall_ms();
			w->st->last_write_us = total_us;
			w->st->last_bytes = w->last_bytes;
			w->st->last_entries = entries;
			w->st->last_hold_us = w->last_max_slice_us;
		}
		log_debug("snapshot written",
			  "bytes=%" PRIu64 " entries=%zu slices=%" PRIu64
			  " capture_us=%" PRIu64 " max_slice_us=%" PRIu64
			  " pack_us=%" PRIu64 " write_us=%" PRIu64
			  " total_us=%" PRIu64,
			  w->last_bytes, entries, w->last_slices,
			  w->last_capture_us, w->last_max_slice_us,
			  w->last_pack_us, w->last_write_us, total_us);
	}
	if (w->path_pending) {
		free(w->path);
		w->path = w->next_path;
		w->next_path = NULL;
		w->path_pending = false;
	}
	if (w->stopped) {
		free(w->path);
		w->path = NULL;
	}
}

static void snapshot_capture_stop(struct snapshot_writer *w)
{
	if (w->capturing) {
		uv_idle_stop(&w->idle);
		snapshot_capture_free(w->cap);
		w->cap = NULL;
		w->capturing = false;
	}
}

/* One slice per loop turn; the last one hands the capture to the
 * threadpool. */
static void snapshot_on_idle(uv_idle_t *h)
{
	struct snapshot_writer *w = h->data;
	uint64_t t0 = uv_hrtime();
	uint64_t now = uv_now(w->loop);
	int r = snapshot_capture_step(w->cap, w->core, now, w->slice);
	if (r == 0)
		r = snapshot_capture_end(w->cap, w->core, now, snapshot_wall_ms());
	uint64_t us = (uv_hrtime() - t0) / 1000;
	w->last_capture_us += us;
	if (us > w->last_max_slice_us)
		w->last_max_slice_us = us;
	if (us > w->max_slice_us)
		w->max_slice_us = us;
	if (r > 0)
		return;
	w->last_slices = snapshot_capture_slices(w->cap);
	if (r == -ESTALE) {
		/* An endpoint left (its entries cannot be told apart any
		 * more) or the map was rebuilt meanwhile: the next tick
		 * starts over. */
		snapshot_capture_stop(w);
		w->abandoned++;
		if (w->st != NULL)
			w->st->captures_abandoned++;
		log_debug("snapshot capture abandoned: endpoints or map changed", NULL);
		return;
	}
	if (r < 0) {
		snapshot_capture_stop(w);
		snapshot_fail(w, "out of memory");
		return;
	}
	uv_idle_stop(&w->idle);
	w->capturing = false;
	w->work.data = w;
	r = uv_queue_work(w->loop, &w->work, snapshot_work, snapshot_after_work);
	if (r < 0) {
		snapshot_capture_free(w->cap);
		w->cap = NULL;
		snapshot_fail(w, uv_err_name(r));
		return;
	}
	w->busy = true;
}

static void snapshot_tick(uv_timer_t *t)
{
	struct snapshot_writer *w = t->data;
	if (w->busy || w->capturing || w->stopped || w->path == NULL) {
		w->skipped++;
		return;
	}
	w->started_ns = uv_hrtime();
	w->last_capture_us = 0;
	w->last_max_slice_us = 0;
	int r = snapshot_capture_begin(w->core, uv_now(w->loop), &w->cap);
	if (r == 0 && !w->idle_init) {
		r = uv_idle_init(w->loop, &w->idle);
		w->idle_init = r == 0;
		w->idle.data = w;
	}
	if (r == 0)
		r = uv_idle_start(&w->idle, snapshot_on_idle);
	if (r < 0) {
		snapshot_capture_free(w->cap);
		w->cap = NULL;
		snapshot_fail(w, r == -ENOMEM ? "out of memory" : uv_err_name(r));
		return;
	}
	w->capturing = true;
}

int snapshot_writer_init(struct snapshot_writer *w, uv_loop_t *loop,
			 const struct core *c, const char *path,
			 uint64_t interval_ms, struct snapshot_stats *st)
{
	*w = (struct snapshot_writer){ .loop = loop, .core = c, .st = st,
				       .slice = SNAPSHOT_SLICE };
	return snapshot_writer_set(w, path, interval_ms);
}

int snapshot_writer_set(struct snapshot_writer *w, const char *path,
			uint64_t interval_ms)
{
	char *np = NULL;
	bool on = path != NULL && path[0] != '\0' && interval_ms > 0;
	if (on && (np = strdup(path)) == NULL)
		return -ENOMEM;
	if (on && !w->timer_init) {
		int r = uv_timer_init(w->loop, &w->timer);
		if (r < 0) {
			free(np);
			return r;
		}
		w->timer_init = true;
		w->timer.data = w;
	}
	if (w->busy) {
		free(w->next_path);
		w->next_path = np;
		w->path_pending = true;
	} else {
		free(w->path);
		w->path = np;
	}
	w->interval_ms = interval_ms;
	w->stopped = !on;
	if (!on) {
		snapshot_capture_stop(w);
		if (w->timer_init)
			uv_timer_stop(&w->timer);
		return 0;
	}
	return uv_timer_start(&w->timer, snapshot_tick, interval_ms, interval_ms);
}

void snapshot_writer_finish(struct snapshot_writer *w)
{
	snapshot_capture_stop(w);
	if (w->idle_init) {
		uv_close((uv_handle_t *)&w->idle, NULL);
		w->idle_init = false;
	}
	if (w->timer_init) {
		uv_timer_stop(&w->timer);
		uv_close((uv_handle_t *)&w->timer, NULL);
		w->timer_init = false;
	}
	w->stopped = true;
	free(w->next_path);
	w->next_path = NULL;
	w->path_pending = false;
	if (!w->busy) {
		free(w->path);
		w->path = NULL;
	}
}
