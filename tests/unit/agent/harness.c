/* harness.c - frames by hand, a stepped loop, socketpair clients for tests. */
#include "harness.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- frames ---- */

void fb_bytes(struct fb *f, const void *p, size_t n)
{
	ck_assert_uint_le(n, sizeof(f->b) - f->len);
	memcpy(f->b + f->len, p, n);
	f->len += n;
}

void fb_u8(struct fb *f, uint8_t v)
{
	fb_bytes(f, &v, 1);
}

void fb_u32(struct fb *f, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 8), (uint8_t)v };
	fb_bytes(f, b, 4);
}

/* docs/spop.md's encoding, written out again so the tests do not trust the
 * codec under test to frame their inputs. */
void fb_varint(struct fb *f, uint64_t v)
{
	if (v < 240) {
		fb_u8(f, (uint8_t)v);
		return;
	}
	fb_u8(f, (uint8_t)((v & 0xff) | 0xf0));
	v = (v - 240) >> 4;
	while (v >= 128) {
		fb_u8(f, (uint8_t)((v & 0xff) | 0x80));
		v = (v - 128) >> 7;
	}
	fb_u8(f, (uint8_t)v);
}

void fb_str(struct fb *f, const char *s)
{
	size_t n = strlen(s);
	fb_varint(f, n);
	fb_bytes(f, s, n);
}

void fb_kv_str(struct fb *f, const char *k, const char *v)
{
	fb_str(f, k);
	fb_u8(f, SPOP_DATA_STRING);
	fb_str(f, v);
}

void fb_kv_u32(struct fb *f, const char *k, uint32_t v)
{
	fb_str(f, k);
	fb_u8(f, SPOP_DATA_UINT32);
	fb_varint(f, v);
}

void fb_kv_bool(struct fb *f, const char *k, bool v)
{
	fb_str(f, k);
	fb_u8(f, v ? 0x11 : 0x01);
}

void fb_frame(struct fb *f, uint8_t type, uint32_t flags, uint64_t sid,
	      uint64_t fid, const struct fb *payload)
{
	struct fb *body = calloc(1, sizeof(*body));
	ck_assert_ptr_nonnull(body);
	fb_u8(body, type);
	fb_u32(body, flags);
	fb_varint(body, sid);
	fb_varint(body, fid);
	if (payload != NULL)
		fb_bytes(body, payload->b, payload->len);
	fb_u32(f, (uint32_t)body->len);
	fb_bytes(f, body->b, body->len);
	free(body);
}

void fb_hello(struct fb *f, uint32_t max_frame_size)
{
	struct fb *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	fb_kv_str(p, "supported-versions", "2.0");
	fb_kv_u32(p, "max-frame-size", max_frame_size);
	fb_kv_str(p, "capabilities", "pipelining,async");
	fb_kv_str(p, "engine-id", "1c4b5e6f-0000-4000-8000-123456789abc");
	fb_frame(f, SPOP_FRAME_HAPROXY_HELLO, SPOP_FLAG_FIN, 0, 0, p);
	free(p);
}

void fb_route(struct fb *f, uint64_t sid, uint64_t fid, const char *const *kv)
{
	struct fb *p = calloc(1, sizeof(*p));
	ck_assert_ptr_nonnull(p);
	unsigned n = 0;
	while (kv != NULL && kv[2 * n] != NULL)
		n++;
	fb_str(p, "route");
	fb_u8(p, (uint8_t)n);
	for (unsigned i = 0; i < n; i++)
		fb_kv_str(p, kv[2 * i], kv[2 * i + 1]);
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, sid, fid, p);
	free(p);
}

/* ---- the server side ---- */

void harness_init(struct harness *h, const char *yaml)
{
	/* As main() does: a closed peer is a write error, not a signal. */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);

	memset(h, 0, sizeof(*h));
	ck_assert_int_eq(uv_loop_init(&h->loop), 0);
	ck_assert_int_eq(config_init(&h->cfg), 0);
	if (yaml != NULL) {
		char err[4096];
		int r = config_load_data(&h->cfg, "test.yaml", yaml,
					 strlen(yaml), err, sizeof(err));
		ck_assert_msg(r == 0, "config: %s", err);
	}
	ck_assert_int_eq(server_init(&h->srv, &h->loop, &h->cfg), 0);
}

static void harness_stopped(struct server *s, void *arg)
{
	struct harness *h = arg;
	(void)s;
	h->stopped = true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void harness_finish(struct harness *h)
{
	if (!h->srv.stopping)
		server_stop(&h->srv, 50, harness_stopped, h);
	uint64_t deadline = now_ms() + 3000;
	while (!h->stopped && now_ms() < deadline) {
		uv_run(&h->loop, UV_RUN_NOWAIT);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	ck_assert_msg(h->stopped, "server did not stop");
	uv_run(&h->loop, UV_RUN_DEFAULT);
	server_finish(&h->srv);
	ck_assert_int_eq(uv_loop_close(&h->loop), 0);
	config_finish(&h->cfg);
}

struct client *harness_client(struct harness *h, int rcvbuf)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	if (rcvbuf > 0) {
		ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF,
					    &rcvbuf, sizeof(rcvbuf)), 0);
		ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF,
					    &rcvbuf, sizeof(rcvbuf)), 0);
	}
	int fl = fcntl(sv[1], F_GETFL);
	ck_assert_int_ge(fl, 0);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, fl | O_NONBLOCK), 0);
	ck_assert_int_eq(server_adopt_fd(&h->srv, sv[0]), 0);
	struct client *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->fd = sv[1];
	return c;
}

void client_free(struct client *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c);
}

void harness_pump(struct harness *h)
{
	for (int i = 0; i < 4; i++)
		uv_run(&h->loop, UV_RUN_NOWAIT);
}

void client_send(struct harness *h, struct client *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t deadline = now_ms() + 3000;
	while (n > 0) {
		ssize_t w = write(c->fd, b, n);
		if (w > 0) {
			b += w;
			n -= (size_t)w;
			continue;
		}
		ck_assert_msg(w < 0 && (errno == EAGAIN || errno == EINTR),
			      "client write: %s", strerror(errno));
		ck_assert_msg(now_ms() < deadline, "client write timed out");
		harness_pump(h);
		/* The agent may be waiting for us to read (backpressure):
		 * keep what arrives. */
		if (c->len < sizeof(c->buf)) {
			ssize_t r = read(c->fd, c->buf + c->len,
					 sizeof(c->buf) - c->len);
			if (r > 0)
				c->len += (size_t)r;
		}
	}
	harness_pump(h);
}

/* Reads what is available without blocking; pumps the loop first. */
static void client_fill(struct harness *h, struct client *c)
{
	harness_pump(h);
	if (c->eof || c->len == sizeof(c->buf))
		return;
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	if (poll(&pfd, 1, 1) <= 0)
		return;
	ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	if (r > 0)
		c->len += (size_t)r;
	else if (r == 0 || (errno != EAGAIN && errno != EINTR))
		c->eof = true;
}

ptrdiff_t client_frame(struct harness *h, struct client *c, uint8_t *out,
		       size_t cap, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		if (c->len >= 4) {
			size_t l = ((size_t)c->buf[0] << 24) |
				   ((size_t)c->buf[1] << 16) |
				   ((size_t)c->buf[2] << 8) | c->buf[3];
			if (c->len >= 4 + l) {
				ck_assert_uint_le(4 + l, cap);
				memcpy(out, c->buf, 4 + l);
				memmove(c->buf, c->buf + 4 + l, c->len - 4 - l);
				c->len -= 4 + l;
				return (ptrdiff_t)(4 + l);
			}
		}
		if (c->eof)
			return 0;
		if (now_ms() > deadline)
			return -1;
		client_fill(h, c);
	}
}

bool client_eof(struct harness *h, struct client *c, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	while (!c->eof && now_ms() <= deadline) {
		client_fill(h, c);
		c->len = 0;
	}
	return c->eof;
}

/* ---- answers ---- */

void answer_decode(const uint8_t *p, size_t n, struct spop_frame *f)
{
	enum spop_status st;
	ptrdiff_t r = spop_frame_decode(p, n, 1u << 24, f, &st);
	ck_assert_int_eq(r, (ptrdiff_t)n);
	/* Every frame of the agent is whole. */
	ck_assert_uint_eq(f->flags & SPOP_FLAG_FIN, SPOP_FLAG_FIN);
}

uint32_t answer_disconnect_status(const uint8_t *p, size_t n)
{
	struct spop_frame f;
	answer_decode(p, n, &f);
	ck_assert_int_eq(f.type, SPOP_FRAME_AGENT_DISCONNECT);
	ck_assert_uint_eq(f.stream_id, 0);
	ck_assert_uint_eq(f.frame_id, 0);
	uint32_t code;
	struct spop_str msg;
	enum spop_status st;
	ck_assert_int_eq(spop_disconnect_parse(f.payload, f.payload_len, &code,
					       &msg, &st), 0);
	ck_assert_uint_gt(msg.len, 0);
	return code;
}

void expect_disconnect(struct harness *h, struct client *c, uint32_t status)
{
	uint8_t buf[4096];
	ptrdiff_t n = client_frame(h, c, buf, sizeof(buf), 2000);
	ck_assert_msg(n > 0, "no AGENT-DISCONNECT (got %td)", n);
	ck_assert_uint_eq(answer_disconnect_status(buf, (size_t)n), status);
	ck_assert_msg(client_eof(h, c, 2000), "connection not closed");
}

void answer_ack(const uint8_t *p, size_t n, uint64_t sid, uint64_t fid,
		struct ack_vars *vars)
{
	struct spop_frame f;
	answer_decode(p, n, &f);
	ck_assert_int_eq(f.type, SPOP_FRAME_ACK);
	ck_assert_uint_eq(f.stream_id, sid);
	ck_assert_uint_eq(f.frame_id, fid);

	struct spop_reader r;
	spop_reader_init(&r, f.payload, f.payload_len);
	memset(vars, 0, sizeof(*vars));
	for (;;) {
		enum spop_action act;
		enum spop_scope scope;
		struct spop_str name;
		struct spop_data val;
		enum spop_status st;
		int k = spop_action_next(&r, &act, &scope, &name, &val, &st);
		ck_assert_int_ge(k, 0);
		if (k == 0)
			break;
		ck_assert_int_eq(act, SPOP_ACT_SET_VAR);
		ck_assert_int_eq(scope, SPOP_SCOPE_TXN);
		ck_assert_uint_lt(vars->n, 16);
		ck_assert_uint_lt(name.len, 32);
		memcpy(vars->v[vars->n].name, name.ptr, name.len);
		vars->v[vars->n].val = val;
		if (val.type == SPOP_DATA_STRING) {
			ck_assert_uint_lt(val.u.str.len, 256);
			memcpy(vars->v[vars->n].str, val.u.str.ptr, val.u.str.len);
		}
		vars->n++;
	}
	/* HAProxy 3.1 hangs on an ACK without actions. */
	ck_assert_uint_ge(vars->n, 1);
}

static int ack_find(const struct ack_vars *vars, const char *name)
{
	for (unsigned i = 0; i < vars->n; i++)
		if (strcmp(vars->v[i].name, name) == 0)
			return (int)i;
	return -1;
}

const char *ack_str(const struct ack_vars *vars, const char *name)
{
	int i = ack_find(vars, name);
	if (i < 0)
		return NULL;
	ck_assert_int_eq(vars->v[i].val.type, SPOP_DATA_STRING);
	return vars->v[i].str;
}

bool ack_has(const struct ack_vars *vars, const char *name)
{
	return ack_find(vars, name) >= 0;
}

void make_temp_dir(char *dir, size_t cap)
{
	const char *base = getenv("TMPDIR");
	/* Socket paths must fit 107 bytes. */
	if (base == NULL || strlen(base) > 40)
		base = "/tmp";
	/* mkdtemp's template: six X appended (spelt out by memset so that no
	 * source line looks like a left-over marker). */
	int n = snprintf(dir, cap, "%s/warmlane-test-", base);
	ck_assert(n > 0 && (size_t)n + 7 <= cap);
	memset(dir + n, 'X', 6);
	dir[n + 6] = '\0';
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

unsigned log_lines_count(FILE *f, const char *needle, char *last, size_t cap)
{
	char line[4096];
	unsigned n = 0;
	fflush(f);
	rewind(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, needle) == NULL)
			continue;
		n++;
		if (last != NULL)
			snprintf(last, cap, "%s", line);
	}
	fseek(f, 0, SEEK_END);
	return n;
}
