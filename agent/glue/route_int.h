/* route_int.h - inside the route module: what route.c, route_args.c and route_end.c share. */
#ifndef WARMLANE_ROUTE_INT_H
#define WARMLANE_ROUTE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "route.h"
#include "spop.h"

/* Whether a is exactly the C string b (lengths first). */
static inline bool route_str_is(struct core_str a, const char *b)
{
	size_t n = strlen(b);
	return a.len == n && memcmp(a.ptr, b, n) == 0;
}

/* ---- SPOE arguments, whatever type HAProxy sends (route_args.c) ---- */

/* Inline: each is read several times per decision and feedback, from
 * three files. */

/* A non-empty string or binary as a view into the frame; else {NULL, 0}. */
static inline struct core_str route_arg_str(const struct spop_data *d)
{
	if ((d->type == SPOP_DATA_STRING || d->type == SPOP_DATA_BINARY) &&
	    d->u.str.len > 0)
		return (struct core_str){ (const char *)d->u.str.ptr,
					  d->u.str.len };
	return (struct core_str){ NULL, 0 };
}

/* Integers of any width as int64 (UINT64 saturated); false for other
 * types. */
static inline bool route_arg_int(const struct spop_data *d, int64_t *v)
{
	switch (d->type) {
	case SPOP_DATA_INT32:
		*v = d->u.i32;
		return true;
	case SPOP_DATA_UINT32:
		*v = d->u.u32;
		return true;
	case SPOP_DATA_INT64:
		*v = d->u.i64;
		return true;
	case SPOP_DATA_UINT64:
		*v = d->u.u64 > INT64_MAX ? INT64_MAX : (int64_t)d->u.u64;
		return true;
	default:
		return false;
	}
}

/* BOOL, a non-zero integer, or the string "true". */
static inline bool route_arg_bool(const struct spop_data *d)
{
	int64_t v;
	if (d->type == SPOP_DATA_BOOL)
		return d->u.b;
	if (route_arg_int(d, &v))
		return v != 0;
	return route_str_is(route_arg_str(d), "true");
}

/* ---- the retry budgets (route.c) ---- */

/* The budget of backend b[0..len), NULL when it has none yet. */
struct route_budget *route_budget_find(struct route *r, const char *b,
				       size_t len);

#endif
