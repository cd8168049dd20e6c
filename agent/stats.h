/* stats.h - SPOP counters of the agent, read by the metrics endpoint. */
#ifndef WARMLANE_STATS_H
#define WARMLANE_STATS_H

#include <stdint.h>

#include "route.h"
#include "spop.h"

/* Frame types counted, both directions in one array. */
enum stats_frame {
	STATS_FRAME_HAPROXY_HELLO = 0,
	STATS_FRAME_HAPROXY_DISCONNECT,
	STATS_FRAME_NOTIFY,
	STATS_FRAME_AGENT_HELLO,
	STATS_FRAME_AGENT_DISCONNECT,
	STATS_FRAME_ACK,
	STATS_FRAME_COUNT
};

/* Upper bounds of the decision-latency buckets, in nanoseconds (1 us to
 * 1 ms: a decision is microseconds, a millisecond is already a bug); one
 * more bucket holds everything above. */
#define STATS_LATENCY_BUCKETS 10
extern const uint64_t stats_latency_bounds_ns[STATS_LATENCY_BUCKETS];

/* A fixed-bucket histogram of durations: counts per bucket (not
 * cumulative; the last slot is +Inf) and the sum. */
struct stats_histogram {
	uint64_t buckets[STATS_LATENCY_BUCKETS + 1];
	uint64_t count;
	uint64_t sum_ns;
};

/* DISCONNECT statuses 0..13 have their own slot; 99 and any other share
 * the last one. */
#define STATS_STATUS_COUNT 15

/* Monotonic counters (and one gauge) of one server; plain integers, since
 * the agent is single-threaded. */
struct stats {
	uint64_t conn_accepted;
	uint64_t conn_closed;
	uint64_t conn_active;  /* gauge */
	uint64_t conn_refused; /* closed at accept: spop.max_connections reached */
	uint64_t timeouts_hello; /* closed: no HAPROXY-HELLO in spop.hello_timeout */
	uint64_t timeouts_idle;  /* closed: no frame in spop.idle_timeout */
	uint64_t healthchecks; /* health-check HELLOs answered */
	uint64_t frames[STATS_FRAME_COUNT];
	/* AGENT-DISCONNECTs sent, by status: protocol errors (status > 0)
	 * and orderly closes (0). */
	uint64_t disconnects_sent[STATS_STATUS_COUNT];
	/* HAPROXY-DISCONNECTs received, by the status HAProxy gave. */
	uint64_t disconnects_received[STATS_STATUS_COUNT];
	uint64_t msgs_route;
	uint64_t msgs_feedback;
	uint64_t msgs_unknown;
	uint64_t reasons[ROUTE_REASON_COUNT]; /* route decisions by reason */
	uint64_t ack_fallbacks; /* ACKs cut down to fit the frame size */
	uint64_t read_stalls;   /* times reading paused for backpressure */
	uint64_t io_errors;     /* read or write errors other than EOF/RST */
	uint64_t writes;        /* socket writes: several frames may share one */
	uint64_t coalesce_waits; /* polls delayed by spop.coalesce_us */
	uint64_t coalesce_busy;  /* polls not delayed: windows came back late */
	struct stats_histogram decide_latency; /* route_decide, uv_hrtime */
	uint64_t runtime_polls;         /* runtime-API polls started */
	uint64_t runtime_poll_failures; /* polls that got no usable answer */
};

/* Counts one duration of ns nanoseconds into h. No allocation. */
void stats_histogram_observe(struct stats_histogram *h, uint64_t ns);

/* The slot of a DISCONNECT status in the arrays above. */
unsigned stats_status_index(uint32_t status);

/* The status code a slot stands for (99 for the last one). */
uint32_t stats_status_code(unsigned index);

/* The wire name of a counted frame type ("NOTIFY", ...). */
const char *stats_frame_name(enum stats_frame f);

#endif
