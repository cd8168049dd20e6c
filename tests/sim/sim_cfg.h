/* sim_cfg.h - fleet description: endpoint parameters and fault schedule, read from INI-like text. */
#ifndef WARMLANE_SIM_CFG_H
#define WARMLANE_SIM_CFG_H

#include <stddef.h>
#include <stdint.h>

#define SIM_NEVER INT64_MAX

enum sim_fault_kind {
	SIM_FAULT_500,  /* instant 500s */
	SIM_FAULT_503,  /* instant 503s (bursts: a window with a probability) */
	SIM_FAULT_429,  /* rate limited, with Retry-After */
	SIM_FAULT_401,  /* the upstream key is refused */
	SIM_FAULT_SLOW, /* prefill and decode slowed by a factor */
	SIM_FAULT_DOWN, /* connection refused; flaps when period is set */
	SIM_FAULT_CUT,  /* streamed responses cut half-way after their 200 headers */
};

/* What a slow fault slows. */
enum {
	SIM_PHASE_BOTH = 0,
	SIM_PHASE_PREFILL,
	SIM_PHASE_DECODE,
};

struct sim_fault {
	uint32_t ep;
	enum sim_fault_kind kind;
	int64_t start_us, end_us;
	double prob;             /* share of requests affected (error kinds) */
	double factor;           /* slow */
	int phase;               /* slow: SIM_PHASE_* it slows */
	uint32_t retry_after_s;  /* 429; 0 sends no Retry-After */
	int64_t period_us;       /* down: down for the first half of each period */
};

struct sim_ep_params {
	char name[32];
	double prefill_ms_per_ktok;    /* per 1,000 uncached prompt tokens, alone */
	double decode_ms_per_tok;      /* per output token, alone */
	double prefill_batch_slowdown; /* +x per other running request */
	double decode_batch_slowdown;  /* +x per other running request */
	uint32_t max_running;          /* batch cap; FIFO queue behind it */
	uint32_t cache_blocks;         /* KV prefix cache, 512-token blocks */
	int cache_llama;               /* cache = llama: max_running slots each keeping its
					* last prompt + a host prompt cache (sim_llama.h)
					* instead of the block LRU */
	double cache_ram_tokens;       /* llama: host prompt cache, in tokens (--cache-ram
					* over the bytes per token); 0: none */
	double slot_similarity;        /* llama: --slot-prompt-similarity (default 0.1) */
	double speed;                  /* divides every service time */
	double weight;                 /* static weight the router is told */
	double cost_per_mtok;          /* price per million tokens */
	int headers_immediate;         /* headers before prefill (vLLM) */
	double header_ms;              /* delay of immediate headers */
	double error_ms;               /* time to an instant error */
	int64_t start_us, stop_us;     /* present in HAProxy from start to stop */
	uint32_t tier;                 /* warmlane's failover tier (1..8; 0 = 1) */
};

struct sim_fleet_cfg {
	struct sim_ep_params *ep;
	uint32_t nep;
	struct sim_fault *fault;
	uint32_t nfault;
	int64_t poll_interval_us; /* runtime-API poll period (200 ms) */
	int64_t check_fall_us;    /* health checks mark a refusing server DOWN after this */
	int64_t check_rise_us;    /* and UP again this long after it answers */
	/* HAProxy's `retries` with `retry-on 503` and `option redispatch 1`:
	 * a 503 answer is retried on another server up to this many times,
	 * unless warmlane marked the request noretry (0: no retries). */
	uint32_t retries;
};

/* The built-in fleet: 8 identical endpoints, calibrated (see tests/sim/fleet.conf). */
extern const char sim_cfg_default_text[];

/* Parses text (named src in messages) into cfg, which must be zeroed or
 * finished. Sections [defaults], [router], [endpoint], [fault]; "key = value",
 * '#' comments; an [endpoint] starts from the current [defaults]; "count = N"
 * makes N endpoints named <name>1..N; a fault names its endpoint, or "@i" for
 * the i-th (0-based). Times in seconds. Rejects unknown sections and keys, bad
 * numbers and unknown endpoints with "src:line: ..." in err. 0 or -EINVAL/-ENOMEM. */
int sim_cfg_parse(struct sim_fleet_cfg *cfg, const char *text, const char *src, char *err, size_t errlen);

/* Reads a whole file into a malloc'd NUL-terminated string (*out, caller frees). 0 or -errno. */
int sim_cfg_read_file(const char *path, char **out, char *err, size_t errlen);

/* Frees cfg's arrays and zeroes it. */
void sim_cfg_finish(struct sim_fleet_cfg *cfg);

/* Name of a fault kind as written in the file ("500", "429", "slow", ...). */
const char *sim_cfg_fault_name(enum sim_fault_kind k);

#endif
