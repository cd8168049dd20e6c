/* snapshot_decode.c - the snapshot loader: a msgpack buffer checked whole against explicit limits, then imported into the core. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_codec.h"
#include "snapshot_int.h"

/* Largest duration or cooldown accepted (2^53 ms): now + value can never
 * overflow, and a double holds it exactly. */
#define SNAPSHOT_MAX_MS       (UINT64_C(1) << 53)
/* Trips beyond this double the cooldown no further anyway. */
#define SNAPSHOT_MAX_TRIPS    64u
/* Largest EWMA accepted: a day. */
#define SNAPSHOT_MAX_EWMA_MS  86400000.0

void snapshot_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

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

/* Reads the blocks of affinity triples; imports them when apply is set,
 * into the homes map when homes is. */
static int snapshot_entries(struct snapshot_rd *rd, struct core *c,
			    uint64_t n, const struct snapshot_ep *eps,
			    uint64_t n_ep, uint64_t now_ms, uint64_t downtime,
			    bool apply, bool homes, struct snapshot_result *res)
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
			if (homes) {
				if (rec.endpoint >= 0 &&
				    core_homes_import(c, &rec, now_ms) == 0)
					res->homes_restored++;
				continue;
			}
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
	uint64_t version, n_ep, n_ent, n_homes = 0, routers = 0, downtime = 0;
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
	uint32_t fields = version < 3 ? SNAPSHOT_HEADER_FIELDS_V2 :
			  version < 4 ? SNAPSHOT_HEADER_FIELDS_V3 :
					SNAPSHOT_HEADER_FIELDS;
	if (rd.u.data.via.array.size != fields ||
	    (h[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
	     h[2].type != MSGPACK_OBJECT_NEGATIVE_INTEGER) ||
	    !snapshot_uint(&h[3], SNAPSHOT_MAX_ENDPOINTS, &n_ep) ||
	    !snapshot_uint(&h[4], UINT64_MAX, &n_ent) ||
	    (fields > 5 && !snapshot_uint(&h[5], SNAPSHOT_ROUTERS_ENGINES |
					  SNAPSHOT_ROUTERS_HINTS |
					  SNAPSHOT_ROUTERS_TURNS, &routers)) ||
	    (fields > 6 && !snapshot_uint(&h[6], UINT64_MAX, &n_homes))) {
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
	if (n_ep > left / 15 || ((n_ent > 0 || n_homes > 0) && n_ep == 0) ||
	    n_ent > left / 3 || n_homes > left / 3 ||
	    (n_ent + n_homes) * 3 > left - n_ep * 15) {
		snapshot_err(err, errlen,
			     "counts (%" PRIu64 " endpoints, %" PRIu64
			     " entries, %" PRIu64 " homes) exceed the %zu bytes left",
			     n_ep, n_ent, n_homes, left);
		goto out;
	}
	res->endpoints = n_ep;
	res->entries = n_ent;
	res->homes = n_homes;

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
	/* The records: the affinity entries, then the homes, the same
	 * triples; checked here, imported once everything is. */
	struct {
		uint64_t n;
		bool homes;
		const char *what;
		size_t at;
	} recs[2] = { { n_ent, false, "affinity", 0 }, { n_homes, true, "home", 0 } };
	for (int k = 0; k < 2; k++) {
		recs[k].at = rd.off;
		if (snapshot_entries(&rd, c, recs[k].n, eps, n_ep, now_ms, downtime,
				     false, recs[k].homes, res) < 0) {
			snapshot_err(err, errlen, "%s record invalid near byte %zu",
				     recs[k].what, rd.off);
			goto out;
		}
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
	/* The verdicts first: their TTL is the entries'. */
	core_routers_restore(c, routers & SNAPSHOT_ROUTERS_ENGINES,
			     routers & SNAPSHOT_ROUTERS_HINTS,
			     routers & SNAPSHOT_ROUTERS_TURNS, now_ms);
	for (int k = 0; k < 2; k++) {
		rd.off = recs[k].at;
		snapshot_entries(&rd, c, recs[k].n, eps, n_ep, now_ms, downtime, true,
				 recs[k].homes, res);
	}
	rc = 0;
out:
	msgpack_unpacked_destroy(&rd.u);
	free(eps);
	return rc;
}
