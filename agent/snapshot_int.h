/* snapshot_int.h - helpers the snapshot's files share and nothing else calls. */
#ifndef WARMLANE_SNAPSHOT_INT_H
#define WARMLANE_SNAPSHOT_INT_H

#include <stddef.h>
#include <stdint.h>

/* Formats into err (errlen bytes, truncated; err NULL or errlen 0: nothing). */
void snapshot_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The wall clock in ms since the epoch (CLOCK_REALTIME; 0 if unreadable):
 * written_unix_ms, and what a load measures the downtime against. */
int64_t snapshot_wall_ms(void);

#endif
