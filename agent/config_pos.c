/* config_pos.c - the positions of the configuration's values, found by path for the checks' messages. */
#include "config_pos.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int config_pos_add(struct config_pos_table *t, const char *path, size_t plen,
		   unsigned line, unsigned col, bool bad)
{
	if (t->npos == t->cpos) {
		size_t n = t->cpos == 0 ? 64 : t->cpos * 2;
		struct config_pos *v = realloc(t->pos, n * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		t->pos = v;
		t->cpos = n;
	}
	if (plen + 1 > t->acap - t->alen) {
		size_t n = t->acap == 0 ? 4096 : t->acap * 2;
		while (plen + 1 > n - t->alen)
			n *= 2;
		char *a = realloc(t->arena, n);
		if (a == NULL)
			return -ENOMEM;
		t->arena = a;
		t->acap = n;
	}
	memcpy(t->arena + t->alen, path, plen + 1);
	t->pos[t->npos++] = (struct config_pos){
		.path = t->alen, .line = line, .col = col, .bad = bad,
	};
	t->alen += plen + 1;
	return 0;
}

static int pos_cmp(const void *a, const void *b)
{
	const struct config_pos *x = a, *y = b;
	return strcmp(x->p, y->p);
}

/* Once the arena moves no more, the paths can be pointed at. */
void config_pos_sort(struct config_pos_table *t)
{
	for (size_t i = 0; i < t->npos; i++)
		t->pos[i].p = t->arena + t->pos[i].path;
	if (t->npos > 1)
		qsort(t->pos, t->npos, sizeof(*t->pos), pos_cmp);
}

const struct config_pos *config_pos_find(const struct config_pos_table *t,
					 const char *path)
{
	char buf[CONFIG_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (;;) {
		struct config_pos key = { .p = buf };
		const struct config_pos *r = NULL;
		if (t->npos > 0)
			r = bsearch(&key, t->pos, t->npos, sizeof(*t->pos),
				    pos_cmp);
		if (r != NULL)
			return r;
		char *dot = strrchr(buf, '.'), *br = strrchr(buf, '[');
		char *cut = dot > br ? dot : br;
		if (cut == NULL)
			return NULL;
		*cut = '\0';
	}
}

void config_pos_finish(struct config_pos_table *t)
{
	free(t->pos);
	free(t->arena);
	*t = (struct config_pos_table){ 0 };
}
