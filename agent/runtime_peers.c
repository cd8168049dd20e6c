/* runtime_peers.c - the dump of `show peers`, read line by line into whether HAProxy's peers are connected; no I/O. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "runtime.h"

/*
 * What the dump looks like (HAProxy 2.6 to 3.2; addresses and counters
 * vary, the words used here do not):
 *
 *   0x55cc..: [06/Dec/2026:14:39:36] id=warmlane disabled=0 flags=0x6811 ...
 *     0x55cc..: id=haproxy2(remote,active) addr=10.0.0.2:10000 ... last_status=ESTA last_hdshk=1s
 *           reconnect=3s heartbeat=1s confirm=0 ...
 *           flags=0x200 appctx:0x7efd.. st0=7 st1=0 task_calls=3 state=EST
 *           shared tables:
 *             0x55cc.. local_id=1 remote_id=1 flags=0x0 remote_data=0x400000
 *                 last_acked=0 last_pushed=0 last_get=0 teaching_origin=0 update=0
 *                 table:0x55cc.. id=warmlane_hints update=0 localupdate=0 ...
 *     0x55cc..: id=haproxy1(local,inactive) addr=10.0.0.1:10000 ... last_status=NONE ...
 *
 * A section's line starts at the first column, a peer's is indented and
 * says (local|remote,active|inactive): active while a session exists,
 * which may still be connecting (last_status CONN) or be an old one
 * (ESTA from before, inactive). A remote peer is connected when it is
 * active and its last handshake succeeded (ESTA).
 */

void runtime_peers_init(struct runtime_peers *p)
{
	*p = (struct runtime_peers){ 0 };
}

/* The value of " key=" in line, up to the next space; false when absent. */
static bool field(const char *line, size_t len, const char *key, struct core_str *out)
{
	size_t k = strlen(key);
	for (size_t i = 0; i + k <= len; i++) {
		if (memcmp(line + i, key, k) != 0 || (i > 0 && line[i - 1] != ' '))
			continue;
		size_t s = i + k, e = s;
		while (e < len && line[e] != ' ')
			e++;
		*out = (struct core_str){ line + s, e - s };
		return true;
	}
	return false;
}

static bool starts(struct core_str v, const char *s)
{
	size_t n = strlen(s);
	return v.len >= n && memcmp(v.ptr, s, n) == 0;
}

/* The section read so far counts if it shares a table. */
static void section_end(struct runtime_peers *p)
{
	if (p->in_section && p->table) {
		p->sections++;
		p->remote += p->sec_remote;
		p->connected += p->sec_connected;
	}
	p->in_section = p->table = false;
	p->sec_remote = p->sec_connected = 0;
}

void runtime_peers_line(struct runtime_peers *p, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	size_t ind = 0;
	while (ind < len && line[ind] == ' ')
		ind++;
	struct core_str rest = { line + ind, len - ind }, id, status;
	if (starts(rest, "0x") && ind == 0) { /* a section */
		section_end(p);
		p->in_section = field(line, len, "id=", &id);
		return;
	}
	if (!p->in_section)
		return;
	if (starts(rest, "table:0x")) {
		p->table = true;
		return;
	}
	/* "0x..: id=NAME(remote,active) ..." */
	if (!starts(rest, "0x") || !field(line, len, "id=", &id))
		return;
	const char *open = memchr(id.ptr, '(', id.len);
	if (open == NULL)
		return;
	struct core_str kind = { open, id.len - (size_t)(open - id.ptr) };
	if (!starts(kind, "(remote,"))
		return;
	p->sec_remote++;
	if (starts(kind, "(remote,active)") && field(line, len, "last_status=", &status) &&
	    status.len == 4 && memcmp(status.ptr, "ESTA", 4) == 0)
		p->sec_connected++;
}

enum core_peers runtime_peers_end(struct runtime_peers *p)
{
	section_end(p);
	if (p->sections == 0 || p->lost)
		return CORE_PEERS_UNKNOWN;
	return p->connected == p->remote ? CORE_PEERS_CONNECTED : CORE_PEERS_APART;
}
