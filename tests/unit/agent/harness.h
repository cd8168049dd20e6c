/* harness.h - drives agent connections from tests: frames by hand, a loop
 * run in small steps, a client on the other end of a socketpair. */
#ifndef WARMLANE_TEST_HARNESS_H
#define WARMLANE_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "config.h"
#include "server.h"
#include "spop.h"

/* ---- frames built by hand, independent of the codec's encoder ---- */

struct fb {
	uint8_t b[65536];
	size_t len;
};

void fb_bytes(struct fb *f, const void *p, size_t n);
void fb_u8(struct fb *f, uint8_t v);
void fb_u32(struct fb *f, uint32_t v);
void fb_varint(struct fb *f, uint64_t v);
void fb_str(struct fb *f, const char *s);                /* varint len + bytes */
void fb_kv_str(struct fb *f, const char *k, const char *v);  /* STRING value */
void fb_kv_u32(struct fb *f, const char *k, uint32_t v);     /* UINT32 value */
void fb_kv_bool(struct fb *f, const char *k, bool v);

/* Appends a whole frame: length, type, flags, ids, then payload. */
void fb_frame(struct fb *f, uint8_t type, uint32_t flags, uint64_t sid,
	      uint64_t fid, const struct fb *payload);

/* A HAPROXY-HELLO as HAProxy 2.6.12 sends it (max-frame-size given). */
void fb_hello(struct fb *f, uint32_t max_frame_size);

/* A NOTIFY with one `route` message: the given args are STRINGs, name then
 * value, a NULL name ends the list. */
void fb_route(struct fb *f, uint64_t sid, uint64_t fid, const char *const *kv);

/* ---- a server on a private loop, with clients on socketpairs ---- */

struct client {
	int fd;
	uint8_t buf[262144];
	size_t len;
	bool eof;
};

struct harness {
	uv_loop_t loop;
	struct config cfg;
	struct server srv;
	bool stopped;
};

/* Starts a server with the YAML config (NULL: defaults). */
void harness_init(struct harness *h, const char *yaml);

/* Stops the server, runs the loop until every handle is closed, checks
 * the loop closes cleanly. */
void harness_finish(struct harness *h);

/* Connects a new client through server_adopt_fd. rcvbuf > 0 shrinks the
 * client's receive buffer and the agent's send buffer (backpressure). */
struct client *harness_client(struct harness *h, int rcvbuf);
void client_free(struct client *c);

/* Runs the loop without blocking a few times. */
void harness_pump(struct harness *h);

/* Writes all bytes, pumping the loop while the socket is full. */
void client_send(struct harness *h, struct client *c, const void *p, size_t n);

/* Reads one whole frame (length included) into out; returns its size, 0
 * on EOF, -1 after timeout_ms without a frame. */
ptrdiff_t client_frame(struct harness *h, struct client *c, uint8_t *out,
		       size_t cap, int timeout_ms);

/* True when the agent closed the connection within timeout_ms (frames
 * still unread are dropped). */
bool client_eof(struct harness *h, struct client *c, int timeout_ms);

/* ---- reading answers ---- */

/* Decodes a frame read by client_frame with the codec; fails the test if
 * it does not decode. */
void answer_decode(const uint8_t *p, size_t n, struct spop_frame *f);

/* The status-code of an AGENT-DISCONNECT (fails the test otherwise). */
uint32_t answer_disconnect_status(const uint8_t *p, size_t n);

/* Reads the next frame and checks it is an AGENT-DISCONNECT with status,
 * followed by EOF. */
void expect_disconnect(struct harness *h, struct client *c, uint32_t status);

/* The variables an ACK sets (txn scope), by name. */
struct ack_vars {
	unsigned n;
	struct {
		char name[32];
		struct spop_data val;
		char str[256]; /* STRING values, NUL-terminated */
	} v[16];
};

void answer_ack(const uint8_t *p, size_t n, uint64_t sid, uint64_t fid,
		struct ack_vars *vars);

/* The STRING value of var, or NULL when it is not set. */
const char *ack_str(const struct ack_vars *vars, const char *name);
bool ack_has(const struct ack_vars *vars, const char *name);

/* ---- log lines ---- */

/* Lines of the log stream f (from tmpfile, given to log_set_stream) that
 * contain needle; the last of them is copied into last (cap bytes, may be
 * NULL). f is left at its end. */
unsigned log_lines_count(FILE *f, const char *needle, char *last, size_t cap);

/* Makes a fresh directory under TMPDIR (or /tmp) into dir. */
void make_temp_dir(char *dir, size_t cap);

#endif
