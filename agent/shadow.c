/* shadow.c - shadow mode's tally: the server HAProxy used against warmlane's would-be choice. */
#include "shadow.h"

#include <string.h>

const char *shadow_match_name(enum shadow_match m)
{
	switch (m) {
	case SHADOW_MATCH_YES:
		return "yes";
	case SHADOW_MATCH_NO:
		return "no";
	case SHADOW_MATCH_NONE:
		return "none";
	default:
		return "unknown";
	}
}

static bool view_is(struct core_str v, const char *s, size_t n)
{
	return v.len == n && memcmp(v.ptr, s, n) == 0;
}

static int reason_find(struct core_str name)
{
	for (int i = 0; i < CORE_REASON_COUNT; i++) {
		const char *r = core_reason_name((enum core_reason)i);
		if (view_is(name, r, strlen(r)))
			return i;
	}
	return -1;
}

/* chosen == be "/" srv, compared part by part: no copy. */
static bool same_server(struct core_str chosen, struct core_str be,
			struct core_str srv)
{
	if (be.len == 0 || srv.len == 0 || chosen.len != be.len + 1 + srv.len)
		return false;
	return memcmp(chosen.ptr, be.ptr, be.len) == 0 &&
	       chosen.ptr[be.len] == '/' &&
	       memcmp(chosen.ptr + be.len + 1, srv.ptr, srv.len) == 0;
}

int shadow_count(struct shadow_stats *s, struct core_str reason,
		 struct core_str chosen, struct core_str used_be,
		 struct core_str used_srv)
{
	int r = reason_find(reason);
	if (r < 0) {
		s->bad_reason++;
		return -1;
	}
	enum shadow_match m = chosen.len == 0 ? SHADOW_MATCH_NONE
			      : same_server(chosen, used_be, used_srv)
				      ? SHADOW_MATCH_YES
				      : SHADOW_MATCH_NO;
	s->responses[r][m]++;
	if (r == CORE_REASON_AFFINITY && m != SHADOW_MATCH_NONE) {
		s->warm++;
		if (m == SHADOW_MATCH_NO)
			s->warm_missed++;
	}
	return (int)m;
}

int shadow_count_path(struct shadow_stats *s, struct core_str reason,
		      struct core_str chosen, struct core_str used)
{
	const char *slash = used.len > 0 ? memchr(used.ptr, '/', used.len) : NULL;
	struct core_str be = { NULL, 0 }, srv = { NULL, 0 };
	if (slash != NULL) {
		be = (struct core_str){ used.ptr, (size_t)(slash - used.ptr) };
		srv = (struct core_str){ slash + 1, used.len - be.len - 1 };
	}
	return shadow_count(s, reason, chosen, be, srv);
}

bool shadow_first(struct shadow_stats *s, struct core_str id,
		  bool from_feedback)
{
	if (id.len == 0)
		return true;
	uint64_t h = core_hash_bytes(id.ptr, id.len);
	h += h == 0; /* 0 marks an empty slot */
	uint64_t *slot = &s->seen[h & (SHADOW_SEEN_SLOTS - 1)];
	if (*slot == h) {
		if (!from_feedback)
			*slot = 0;
		s->duplicates++;
		return false;
	}
	if (from_feedback)
		*slot = h;
	return true;
}
