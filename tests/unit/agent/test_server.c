/* test_server.c - agent: listeners on real sockets, stale and live socket
 * files, socket mode, TCP, the stop that removes the socket, and the two
 * phases of a reload's new addresses, the connection cap and the listen
 * backlog. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "harness.h"
#include "log.h"

static char dir[64], sock[96], err[512];

static void setup(void)
{
	make_temp_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/spoa.sock", dir);
}

static void teardown(void)
{
	unlink(sock);
	rmdir(dir);
}

static int unix_listen_fd(const char *path, bool do_listen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (do_listen)
		ck_assert_int_eq(listen(fd, 1), 0);
	return fd;
}

/* A client of the real listener, wrapped as a harness client. */
static struct client *connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct client *c = calloc(1, sizeof(*c));
	c->fd = fd;
	return c;
}

static void config_listen(struct harness *h, const char *addr)
{
	const char *a[] = { addr };
	char why[256];
	ck_assert_int_eq(config_set_listen(&h->cfg, a, 1, why, sizeof(why)), 0);
}

static void hello_roundtrip(struct harness *h, struct client *c)
{
	static uint8_t buf[4096];
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	const char *const kv[] = { "model", "m", NULL };
	fb_route(f, 1, 1, kv);
	client_send(h, c, f->b, f->len);
	free(f);
	ptrdiff_t n = client_frame(h, c, buf, sizeof(buf), 2000);
	ck_assert_int_gt(n, 0);
	n = client_frame(h, c, buf, sizeof(buf), 2000);
	ck_assert_int_gt(n, 0);
	struct ack_vars v;
	answer_ack(buf, (size_t)n, 1, 1, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "none");
}

START_TEST(unix_listen_and_mode)
{
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s,mode=0640", sock);
	config_listen(&h, addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), 0);
	struct stat st;
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0640);

	struct client *c = connect_unix(sock);
	hello_roundtrip(&h, c);
	client_free(c);
	harness_finish(&h);
	/* Stopping removes the socket file. */
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

START_TEST(unix_default_mode)
{
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	mode_t old = umask(0);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), 0);
	umask(old);
	struct stat st;
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0660);
	harness_finish(&h);
}
END_TEST

START_TEST(unix_stale_replaced)
{
	/* A socket file nobody listens on, as a crashed agent leaves. */
	int fd = unix_listen_fd(sock, false);
	close(fd);
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	ck_assert_msg(server_listen(&h.srv, err, sizeof(err)) == 0, "%s", err);
	struct client *c = connect_unix(sock);
	hello_roundtrip(&h, c);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(unix_live_refused)
{
	int fd = unix_listen_fd(sock, true);
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), -EADDRINUSE);
	ck_assert(strstr(err, "another process is listening") != NULL);
	harness_finish(&h);
	/* The other process keeps its socket. */
	ck_assert_int_eq(access(sock, F_OK), 0);
	close(fd);
}
END_TEST

START_TEST(unix_not_a_socket)
{
	FILE *f = fopen(sock, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), -EEXIST);
	ck_assert(strstr(err, "not a socket") != NULL);
	harness_finish(&h);
	ck_assert_int_eq(access(sock, F_OK), 0);
}
END_TEST

START_TEST(unix_missing_directory)
{
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s/nodir/spoa.sock", dir);
	config_listen(&h, addr);
	ck_assert_int_lt(server_listen(&h.srv, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "directory") != NULL, "%s", err);
	harness_finish(&h);
}
END_TEST

START_TEST(tcp_listen)
{
	/* A port the kernel just handed out, most likely still free. */
	int probe = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(probe, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	ck_assert_int_eq(getsockname(probe, (struct sockaddr *)&sa, &sl), 0);
	unsigned port = ntohs(sa.sin_port);
	close(probe);

	struct harness h;
	char addr[64];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "tcp:127.0.0.1:%u", port);
	config_listen(&h, addr);
	ck_assert_msg(server_listen(&h.srv, err, sizeof(err)) == 0, "%s", err);

	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct client *c = calloc(1, sizeof(*c));
	c->fd = fd;
	hello_roundtrip(&h, c);
	client_free(c);
	harness_finish(&h);
}
END_TEST

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static size_t count_lines(FILE *f, const char *needle)
{
	char line[2048];
	size_t n = 0;
	fflush(f);
	rewind(f);
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, needle) != NULL;
	return n;
}

/* spop.max_connections: the connections over it are accepted and closed
 * at once, one log line says so (not one per refusal), and a connection
 * that closes makes room again. */
START_TEST(connection_cap)
{
	struct harness h;
	char addr[256];
	harness_init(&h, "spop: { max_connections: 3 }\n");
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), 0);
	ck_assert_uint_eq(h.srv.max_conns, 3);
	FILE *logs = tmpfile();
	ck_assert_ptr_nonnull(logs);
	log_set_stream(logs);

	struct client *c[6];
	for (int i = 0; i < 3; i++) {
		c[i] = connect_unix(sock);
		hello_roundtrip(&h, c[i]);
	}
	for (int i = 3; i < 6; i++) {
		c[i] = connect_unix(sock);
		ck_assert_msg(client_eof(&h, c[i], 2000),
			      "connection %d over the cap not closed", i);
	}
	ck_assert_uint_eq(h.srv.stats.conn_refused, 3);
	ck_assert_uint_eq(h.srv.stats.conn_active, 3);
	ck_assert_uint_eq(count_lines(logs, "connection limit reached"), 1);
	ck_assert_uint_eq(count_lines(logs, "limit=3 active=3"), 1);

	/* one closes: room for one more */
	client_free(c[0]);
	uint64_t end = mono_ms() + 2000;
	while (h.srv.stats.conn_active > 2 && mono_ms() < end)
		harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.conn_active, 2);
	c[0] = connect_unix(sock);
	hello_roundtrip(&h, c[0]);
	ck_assert_uint_eq(h.srv.stats.conn_refused, 3);
	log_set_stream(NULL);
	fclose(logs);
	for (int i = 0; i < 6; i++)
		client_free(c[i]);
	harness_finish(&h);
}
END_TEST

/* 1,000 connects at once, before the agent accepts any: the listen
 * backlog follows net.core.somaxconn, so none is refused (a unix socket
 * refuses a connect beyond the backlog with EAGAIN). */
START_TEST(thousand_connects)
{
	enum { N = 1000 };
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * N + 200 && rl.rlim_max >= 2 * N + 200) {
		rl.rlim_cur = 2 * N + 200;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	ck_assert_msg(rl.rlim_cur >= 2 * N + 200,
		      "RLIMIT_NOFILE %ju too low for this test",
		      (uintmax_t)rl.rlim_cur);

	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), 0);
	ck_assert_uint_ge(h.srv.max_conns, N);

	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	static int fds[N];
	unsigned failed = 0;
	for (int i = 0; i < N; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(fds[i], 0);
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) < 0)
			failed++;
	}
	fprintf(stderr, "# %d simultaneous connects: %u failed; "
		"net.core.somaxconn backlog %u\n", N, failed, h.srv.backlog);
	unsigned expect_ok = h.srv.backlog >= N ? N : h.srv.backlog + 1;
	ck_assert_uint_ge(N - failed, expect_ok);
	uint64_t end = mono_ms() + 20000;
	while (h.srv.stats.conn_accepted < (uint64_t)(N - failed) &&
	       mono_ms() < end)
		harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.conn_accepted, N - failed);
	ck_assert_uint_eq(h.srv.stats.conn_refused, 0);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	end = mono_ms() + 20000;
	while (h.srv.stats.conn_active > 0 && mono_ms() < end)
		harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.conn_active, 0);
	harness_finish(&h);
}
END_TEST

/* 700 connections that never send their HELLO (they stayed open for ever
 * before): all are closed after the default hello timeout, each reading
 * an AGENT-DISCONNECT then EOF. */
START_TEST(silent_connections_closed)
{
	enum { N = 700 };
	struct harness h;
	char addr[256];
	harness_init(&h, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	config_listen(&h, addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	static int fds[N];
	for (int i = 0; i < N; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&sa,
					 sizeof(sa)), 0);
	}
	uint64_t t0 = mono_ms(), end = t0 + 10000;
	while (h.srv.stats.conn_accepted < N && mono_ms() < end)
		harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.conn_active, N);
	while (h.srv.stats.conn_active > 0 && mono_ms() < end)
		harness_pump(&h);
	uint64_t took = mono_ms() - t0;
	fprintf(stderr, "# %d silent connections, hello_timeout %" PRIu64
		" ms: all closed %" PRIu64 " ms after connecting\n", N,
		h.cfg.hello_timeout_ms, took);
	ck_assert_uint_eq(h.srv.stats.conn_active, 0);
	ck_assert_uint_eq(h.srv.stats.timeouts_hello, N);
	unsigned eofs = 0;
	for (int i = 0; i < N; i++) {
		uint8_t b[256];
		ssize_t n = read(fds[i], b, sizeof(b));
		/* the DISCONNECT frame, then EOF */
		if (n > 9 && b[4] == SPOP_FRAME_AGENT_DISCONNECT &&
		    read(fds[i], b, sizeof(b)) == 0)
			eofs++;
		close(fds[i]);
	}
	ck_assert_uint_eq(eofs, N);
	harness_finish(&h);
}
END_TEST

static size_t listener_count(const struct server *s)
{
	size_t n = 0;
	for (const struct server_listener *l = s->listeners; l != NULL; l = l->next)
		n++;
	return n;
}

/* SIGHUP's two phases: a prepare that fails on its second new address
 * closes the first (its socket file gone) and leaves the listeners as
 * they were; a good one binds the new address beside the old, and the
 * commit closes the old (its file gone) while a connection made on it is
 * served on, and gives a kept socket its new mode. */
START_TEST(relisten_two_phases)
{
	struct harness h;
	char a_addr[256], b[128], b_addr[256], bad[256];
	harness_init(&h, NULL);
	snprintf(a_addr, sizeof(a_addr), "unix:%s,mode=0660", sock);
	snprintf(b, sizeof(b), "%s/b.sock", dir);
	config_listen(&h, a_addr);
	ck_assert_int_eq(server_listen(&h.srv, err, sizeof(err)), 0);
	struct server_listener *a = h.srv.listeners;
	ck_assert_uint_eq(listener_count(&h.srv), 1);
	struct client *c = connect_unix(sock);

	struct config next;
	char why[256];
	ck_assert_int_eq(config_init(&next), 0);
	snprintf(b_addr, sizeof(b_addr), "unix:%s", b);
	snprintf(bad, sizeof(bad), "unix:%s/nodir/x.sock", dir);
	const char *const fail[] = { a_addr, b_addr, bad };
	ck_assert_int_eq(config_set_listen(&next, fail, 3, why, sizeof(why)), 0);
	struct server_listener *pending = (struct server_listener *)&h;
	ck_assert_int_lt(server_relisten_prepare(&h.srv, &next, &pending, err,
						 sizeof(err)), 0);
	ck_assert_ptr_null(pending);
	ck_assert_msg(strstr(err, "nodir") != NULL, "%s", err);
	ck_assert_int_eq(access(b, F_OK), -1); /* b was bound, then closed */
	uv_run(&h.loop, UV_RUN_NOWAIT);
	ck_assert_ptr_eq(h.srv.listeners, a);
	ck_assert_uint_eq(listener_count(&h.srv), 1);
	config_finish(&next);

	/* a kept with mode 0600, b added; then a dropped. */
	ck_assert_int_eq(config_init(&next), 0);
	snprintf(a_addr, sizeof(a_addr), "unix:%s,mode=0600", sock);
	const char *const good[] = { a_addr, b_addr, a_addr };
	ck_assert_int_eq(config_set_listen(&next, good, 3, why, sizeof(why)), 0);
	ck_assert_msg(server_relisten_prepare(&h.srv, &next, &pending, err,
					      sizeof(err)) == 0, "%s", err);
	ck_assert_ptr_nonnull(pending);
	ck_assert_ptr_null(pending->next); /* a listed twice, bound once */
	ck_assert_uint_eq(listener_count(&h.srv), 1); /* nothing visible yet */
	server_relisten_commit(&h.srv, &next, pending);
	ck_assert_uint_eq(listener_count(&h.srv), 2);
	struct stat st;
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	config_finish(&next);

	ck_assert_int_eq(config_init(&next), 0);
	const char *const only_b[] = { b_addr };
	ck_assert_int_eq(config_set_listen(&next, only_b, 1, why, sizeof(why)), 0);
	ck_assert_int_eq(server_relisten_prepare(&h.srv, &next, &pending, err,
						 sizeof(err)), 0);
	ck_assert_ptr_null(pending); /* b is bound already */
	server_relisten_commit(&h.srv, &next, pending);
	ck_assert_int_eq(access(sock, F_OK), -1);
	uv_run(&h.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(listener_count(&h.srv), 1);
	/* The connection made on a is served on. */
	hello_roundtrip(&h, c);
	client_free(c);
	struct client *cb = connect_unix(b);
	hello_roundtrip(&h, cb);
	client_free(cb);
	config_finish(&next);
	harness_finish(&h);
	ck_assert_int_eq(access(b, F_OK), -1);
}
END_TEST

static Suite *server_suite(void)
{
	Suite *s = suite_create("agent-server");
	TCase *tc = tcase_create("server");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, unix_listen_and_mode);
	tcase_add_test(tc, unix_default_mode);
	tcase_add_test(tc, unix_stale_replaced);
	tcase_add_test(tc, unix_live_refused);
	tcase_add_test(tc, unix_not_a_socket);
	tcase_add_test(tc, unix_missing_directory);
	tcase_add_test(tc, tcp_listen);
	tcase_add_test(tc, relisten_two_phases);
	tcase_add_test(tc, connection_cap);
	tcase_add_test(tc, thousand_connects);
	tcase_add_test(tc, silent_connections_closed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(server_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
