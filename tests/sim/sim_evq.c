/* sim_evq.c - binary heap of events ordered by time then sequence number. */
#include "sim_evq.h"

#include <errno.h>
#include <stdlib.h>

void sim_evq_init(struct sim_evq *q)
{
	*q = (struct sim_evq){ 0 };
}

void sim_evq_finish(struct sim_evq *q)
{
	free(q->heap);
	sim_evq_init(q);
}

static int ev_less(const struct sim_event *a, const struct sim_event *b)
{
	return a->t_us < b->t_us || (a->t_us == b->t_us && a->seq < b->seq);
}

int sim_evq_push(struct sim_evq *q, int64_t t_us, uint32_t type, uint32_t arg)
{
	if (q->len == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 1024;
		struct sim_event *h = realloc(q->heap, ncap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		q->heap = h;
		q->cap = ncap;
	}
	struct sim_event ev = { .t_us = t_us, .seq = q->next_seq++, .type = type, .arg = arg };
	size_t i = q->len++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ev_less(&ev, &q->heap[p]))
			break;
		q->heap[i] = q->heap[p];
		i = p;
	}
	q->heap[i] = ev;
	return 0;
}

int sim_evq_pop(struct sim_evq *q, struct sim_event *ev)
{
	if (q->len == 0)
		return -1;
	*ev = q->heap[0];
	struct sim_event last = q->heap[--q->len];
	size_t i = 0, n = q->len;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && ev_less(&q->heap[c + 1], &q->heap[c]))
			c++;
		if (!ev_less(&q->heap[c], &last))
			break;
		q->heap[i] = q->heap[c];
		i = c;
	}
	if (n > 0)
		q->heap[i] = last;
	return 0;
}
