/* config_pos.h - where each value of the configuration file starts, by its path ("policy.ewma_alpha"). */
#ifndef WARMLANE_CONFIG_POS_H
#define WARMLANE_CONFIG_POS_H

#include <stdbool.h>
#include <stddef.h>

/* The longest path kept ("endpoints[12].keys[3]"); a longer one is cut. */
#define CONFIG_PATH_MAX 256u

/* Where the value at a path ("policy.ewma_alpha", "endpoints[1]") starts;
 * bad: the loader already reported it, the semantic pass stays quiet. */
struct config_pos {
	size_t path;   /* offset in the arena */
	const char *p; /* the path itself, once the arena is final */
	unsigned line, col;
	bool bad;
};

/* Filled by the loader, read by the checks; zero-initialised is empty. */
struct config_pos_table {
	char *arena; /* NUL-terminated paths of pos[] */
	size_t alen, acap;
	struct config_pos *pos;
	size_t npos, cpos;
};

/* Notes that the value at path (plen bytes, NUL-terminated) starts at
 * line:col. Returns 0 or -ENOMEM (nothing noted). */
int config_pos_add(struct config_pos_table *t, const char *path, size_t plen,
		   unsigned line, unsigned col, bool bad);

/* Makes the positions searchable by path; after it, no config_pos_add. */
void config_pos_sort(struct config_pos_table *t);

/* The position of path's value, else of the nearest enclosing value the
 * file has (a key the semantic pass misses is reported where its mapping
 * is); NULL when the file has none of them. */
const struct config_pos *config_pos_find(const struct config_pos_table *t,
					 const char *path);

/* Frees what t holds; t is empty after. */
void config_pos_finish(struct config_pos_table *t);

#endif
