/* stats.c - helpers to index and label the SPOP counters. */
#include "stats.h"

const uint64_t stats_latency_bounds_ns[STATS_LATENCY_BUCKETS] = {
	1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000,
};

void stats_histogram_observe(struct stats_histogram *h, uint64_t ns)
{
	/* Ten comparisons beat a binary search at this size. */
	unsigned i = 0;
	while (i < STATS_LATENCY_BUCKETS && ns > stats_latency_bounds_ns[i])
		i++;
	h->buckets[i]++;
	h->count++;
	h->sum_ns += ns;
}

unsigned stats_status_index(uint32_t status)
{
	return status < STATS_STATUS_COUNT - 1 ? (unsigned)status
					       : STATS_STATUS_COUNT - 1;
}

uint32_t stats_status_code(unsigned index)
{
	return index < STATS_STATUS_COUNT - 1 ? index : SPOP_ERR_UNKNOWN;
}

const char *stats_frame_name(enum stats_frame f)
{
	static const unsigned types[STATS_FRAME_COUNT] = {
		[STATS_FRAME_HAPROXY_HELLO] = SPOP_FRAME_HAPROXY_HELLO,
		[STATS_FRAME_HAPROXY_DISCONNECT] = SPOP_FRAME_HAPROXY_DISCONNECT,
		[STATS_FRAME_NOTIFY] = SPOP_FRAME_NOTIFY,
		[STATS_FRAME_AGENT_HELLO] = SPOP_FRAME_AGENT_HELLO,
		[STATS_FRAME_AGENT_DISCONNECT] = SPOP_FRAME_AGENT_DISCONNECT,
		[STATS_FRAME_ACK] = SPOP_FRAME_ACK,
	};
	if ((unsigned)f >= STATS_FRAME_COUNT)
		return "UNKNOWN";
	return spop_frame_type_name(types[f]);
}
