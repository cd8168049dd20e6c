/* config_check.h - the configuration's semantic pass (config_check*.c), for config.c. */
#ifndef WARMLANE_CONFIG_CHECK_H
#define WARMLANE_CONFIG_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "config_errs.h"
#include "config_pos.h"
#include "config_schema.h"

/* One run of the checks over one file. */
struct config_check {
	const char *name; /* file name for messages */
	struct config_errs *errs;
	const struct config_pos_table *pos; /* positions by path */
	bool oom;
};

/* Checks raw over the defaults in cfg and sets what passes; every problem
 * goes to s->errs at its value's line and column (s->pos), none for a
 * value the loader already refused. s->oom: memory ran out. */
void config_check_run(struct config_check *s, const struct raw_config *raw,
		      struct config *cfg);

/* A problem with the value at path, at its position. */
void config_check_err(struct config_check *s, const char *path,
		      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The same, at where_path's position (path's when NULL). */
void config_check_err_at(struct config_check *s, const char *where_path,
			 const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* strdup, noting a failure in s->oom. */
char *config_check_strdup(struct config_check *s, const char *v);

/* A duration in [min_ms, max_ms] into *dst; raw NULL: absent, *dst kept. */
void config_check_duration(struct config_check *s, const char *path,
			   const char *raw, uint64_t min_ms, uint64_t max_ms,
			   uint64_t *dst);

/* A whole number in [min, max] into *dst; raw NULL: absent. */
void config_check_u32(struct config_check *s, const char *path,
		      const double *raw, uint32_t min, uint32_t max,
		      uint32_t *dst);

/* lo < v (or lo <= v when lo_closed) and v <= hi into *dst; raw NULL:
 * absent. */
void config_check_double(struct config_check *s, const char *path,
			 const double *raw, double lo, bool lo_closed,
			 double hi, double *dst);

/* The policy section (config_check_policy.c): the core's parameters, and
 * policy.mode, the agent's. */
void config_check_policy(struct config_check *s, const struct raw_policy *rp,
			 struct core_params *p);
void config_check_policy_mode(struct config_check *s,
			      const struct raw_policy *rp, struct config *cfg);

/* The cooldowns' order, once both of each pair are known (defaults or
 * the file's); rp may be NULL. */
void config_check_policy_order(struct config_check *s,
			       const struct raw_policy *rp,
			       const struct core_params *p);

#endif
