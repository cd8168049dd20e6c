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

/* A non-empty string or binary as a view into the frame; else {NULL, 0}. */
struct core_str route_arg_str(const struct spop_data *d);
/* Integers of any width as int64 (UINT64 saturated); false for other
 * types. */
bool route_arg_int(const struct spop_data *d, int64_t *v);
/* BOOL, a non-zero integer, or the string "true". */
bool route_arg_bool(const struct spop_data *d);

/* ---- the retry budgets (route.c) ---- */

/* The budget of backend b[0..len), NULL when it has none yet. */
struct route_budget *route_budget_find(struct route *r, const char *b,
				       size_t len);

#endif
