/* names.h - the one enum-to-name lookup behind every core_*_name: a table indexed by the value. */
#ifndef WARMLANE_CORE_NAMES_H
#define WARMLANE_CORE_NAMES_H

#include <stddef.h>

/* names[v] for v < n when set, else none (out of range, or a gap). */
static inline const char *names_get(const char *const *names, size_t n,
				    unsigned v, const char *none)
{
	return v < n && names[v] != NULL ? names[v] : none;
}

/* names_get over a whole array: its length from its type. */
#define NAMES_GET(table, v, none) \
	names_get((table), sizeof(table) / sizeof((table)[0]), (unsigned)(v), (none))

#endif
