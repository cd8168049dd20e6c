/* sim_hints.h - the shared warm hint of several HAProxies (peers-replicated stick table) as the simulator models it. */
#ifndef WARMLANE_SIM_HINTS_H
#define WARMLANE_SIM_HINTS_H

#include <stdint.h>

/* The replication measured on loopback (docs/peers.md, issue 14): in
 * steady state a write reaches the other HAProxies after 0.2-0.6 ms; in the
 * first second after a start, while the peers' first connections collide
 * and are made again, after up to 1.4 s (HAProxy 2.6), and one write in 60
 * is never seen by the others. */
#define SIM_HINT_DELAY_MIN_US     200
#define SIM_HINT_DELAY_MAX_US     600
#define SIM_HINT_STARTUP_US       1000000
#define SIM_HINT_STARTUP_MAX_US   1400000
#define SIM_HINT_STARTUP_LOSS     60
/* The table's `expire` in haproxy/haproxy-*-peers.cfg: a hint older than
 * this is gone. It is policy.alone_affinity_ttl's default, since agents
 * that share hints route as alone (docs/peers.md). */
#define SIM_HINT_EXPIRE_MS        (30 * 60 * 1000)

struct sim_hint {
	uint64_t key;          /* the affinity key; 0: free slot */
	uint32_t ep, prev_ep;  /* simulator endpoints; UINT32_MAX: none */
	int64_t at_us, prev_at_us;
	int64_t visible_us;    /* when the other HAProxies see (ep, at_us) */
	uint32_t writer;       /* the agent whose HAProxy wrote it */
	uint32_t prev_writer;  /* the one that wrote prev_ep */
};

/* One table shared by every agent of a run (HAProxy's own table: each
 * agent's HAProxy sees its writes at once, the others after the delay). */
struct sim_hints {
	struct sim_hint *t;
	uint32_t mask;
	uint32_t used;
	uint64_t rng;
	int64_t start_us;       /* the HAProxies' start: the start-up window */
	int lone;               /* peers that never connect: each agent's
				 * HAProxy holds only its own writes
				 * (--hints-lone) */
	uint64_t writes, lost;
};

/* 0 or -ENOMEM. */
int sim_hints_init(struct sim_hints *h, uint64_t seed, int64_t start_us);
void sim_hints_finish(struct sim_hints *h);

/* A success of key on ep at now_us through agent's HAProxy. 0 or -ENOMEM. */
int sim_hints_write(struct sim_hints *h, uint64_t key, uint32_t ep, uint32_t agent, int64_t now_us);

/* What agent's HAProxy holds for key at now_us: 1 with *ep, *at_us
 * (when the write was made) and *writer (the agent whose HAProxy made it:
 * the configs' gpt 4) set, 0 when nothing. */
int sim_hints_read(const struct sim_hints *h, uint64_t key, uint32_t agent, int64_t now_us,
		   uint32_t *ep, int64_t *at_us, uint32_t *writer);

#endif
