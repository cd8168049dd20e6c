/* sim_evq.h - the discrete-event queue: a binary min-heap on (time, insertion order). */
#ifndef WARMLANE_SIM_EVQ_H
#define WARMLANE_SIM_EVQ_H

#include <stddef.h>
#include <stdint.h>

struct sim_event {
	int64_t t_us;   /* virtual time, microseconds */
	uint64_t seq;   /* insertion order: breaks ties deterministically */
	uint32_t type;
	uint32_t arg;
};

struct sim_evq {
	struct sim_event *heap;
	size_t len, cap;
	uint64_t next_seq;
};

/* An empty queue. */
void sim_evq_init(struct sim_evq *q);

/* Frees the queue's memory. */
void sim_evq_finish(struct sim_evq *q);

/* Schedules an event; events at equal times pop in insertion order. 0 or -ENOMEM. */
int sim_evq_push(struct sim_evq *q, int64_t t_us, uint32_t type, uint32_t arg);

/* Pops the earliest event into *ev; 0, or -1 when the queue is empty. */
int sim_evq_pop(struct sim_evq *q, struct sim_event *ev);

#endif
