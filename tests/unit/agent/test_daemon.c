/* test_daemon.c - agent: the warmlane binary itself: command line, a real
 * socket, SIGTERM ending in AGENT-DISCONNECT and exit 0, SIGHUP reloading
 * the file (applied or refused: the metrics server kept; two in a row; a
 * file gone; during the stop; before the snapshot load). Its path is
 * argv[1]. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

static const char *warmlane;

/* Bounded waits on a condition, 10 ms a step: 20 s, for a sanitized build
 * on a loaded machine (each ends as soon as its condition holds). */
#define WAIT_STEPS 2000
static char dir[64], sock[96], logpath[96], addr[128], basecfg[96];

static void setup(void)
{
	make_temp_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/spoa.sock", dir);
	snprintf(logpath, sizeof(logpath), "%s/stderr.log", dir);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	/* No metrics port: the default 127.0.0.1:9901 would make parallel
	 * runs collide (agent-promtool covers the binary's metrics). */
	snprintf(basecfg, sizeof(basecfg), "%s/base.yaml", dir);
	FILE *f = fopen(basecfg, "w");
	ck_assert_ptr_nonnull(f);
	fputs("metrics: { listen: \"\" }\n", f);
	fclose(f);
}

static void teardown(void)
{
	unlink(sock);
	unlink(logpath);
	unlink(basecfg);
	rmdir(dir);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* Starts warmlane with argv (NULL-terminated, without argv[0]) after
 * --config basecfg (a later --config wins); stdout and stderr go to
 * logpath. */
static pid_t spawn(const char *const *args)
{
	const char *argv[16] = { warmlane, "--config", basecfg };
	size_t n = 3;
	for (; args[n - 3] != NULL; n++)
		argv[n] = args[n - 3];
	argv[n] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, logpath,
					 O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int r = posix_spawn(&pid, warmlane, &fa, NULL, (char *const *)argv,
			    environ);
	posix_spawn_file_actions_destroy(&fa);
	ck_assert_msg(r == 0, "spawn %s: %s", warmlane, strerror(r));
	return pid;
}

/* Waits up to ms for pid; returns its exit status, -1 on timeout, -2 when
 * it died of a signal. */
static int wait_exit(pid_t pid, long ms)
{
	for (long t = 0; t <= ms; t += 10) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
		sleep_ms(10);
	}
	return -1;
}

static bool log_has(const char *needle)
{
	static char buf[65536];
	FILE *f = fopen(logpath, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

static int connect_when_ready(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (int i = 0; i < WAIT_STEPS; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		ck_assert_int_ge(fd, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			struct timeval tv = { 3, 0 };
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			return fd;
		}
		close(fd);
		sleep_ms(10);
	}
	ck_abort_msg("warmlane did not listen on %s", path);
	return -1;
}

/* Reads one frame, blocking (with the socket's timeout); 0 on EOF. */
static ptrdiff_t read_frame(int fd, uint8_t *buf, size_t cap)
{
	size_t have = 0, want = 4;
	while (have < want) {
		ssize_t r = read(fd, buf + have, want - have);
		if (r == 0)
			return 0;
		ck_assert_msg(r > 0, "read: %s", strerror(errno));
		have += (size_t)r;
		if (have == 4) {
			want = 4 + (((size_t)buf[0] << 24) | ((size_t)buf[1] << 16) |
				    ((size_t)buf[2] << 8) | buf[3]);
			ck_assert_uint_le(want, cap);
		}
	}
	return (ptrdiff_t)have;
}

START_TEST(serve_then_sigterm)
{
	const char *const args[] = { "--listen", addr, "--log-level", "debug", NULL };
	pid_t pid = spawn(args);
	int fd = connect_when_ready(sock);

	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	const char *const kv[] = { "session", "s", NULL };
	fb_route(f, 0, 1, kv);
	ck_assert_int_eq(write(fd, f->b, f->len), (ssize_t)f->len);
	free(f);

	static uint8_t buf[65536];
	ptrdiff_t n = read_frame(fd, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	struct spop_frame fr;
	answer_decode(buf, (size_t)n, &fr);
	ck_assert_int_eq(fr.type, SPOP_FRAME_AGENT_HELLO);
	n = read_frame(fd, buf, sizeof(buf));
	struct ack_vars v;
	answer_ack(buf, (size_t)n, 0, 1, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "none");

	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	n = read_frame(fd, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(answer_disconnect_status(buf, (size_t)n), 0);
	ck_assert_int_eq(read_frame(fd, buf, sizeof(buf)), 0);
	close(fd);
	ck_assert_int_eq(wait_exit(pid, 3000), 0);
	ck_assert_int_eq(access(sock, F_OK), -1);
	ck_assert(log_has("level=info msg=listening"));
	ck_assert(log_has("level=debug msg=route"));
	ck_assert(log_has("msg=stopped"));
}
END_TEST

/* SIGINT with no connection, and SIGPIPE ignored: a client that vanishes
 * with answers pending does not kill the agent. */
START_TEST(vanishing_client_then_sigint)
{
	const char *const args[] = { "--listen", addr, NULL };
	pid_t pid = spawn(args);
	int fd = connect_when_ready(sock);
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	for (int i = 0; i < 200; i++) {
		const char *const kv[] = { "model", "m", NULL };
		fb_route(f, (uint64_t)i, 1, kv);
	}
	ck_assert_int_eq(write(fd, f->b, f->len), (ssize_t)f->len);
	free(f);
	close(fd);
	sleep_ms(100);
	ck_assert_int_eq(wait_exit(pid, 0), -1); /* still running */
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	ck_assert_int_eq(wait_exit(pid, 3000), 0);
}
END_TEST

START_TEST(second_instance_refused)
{
	const char *const args[] = { "--listen", addr, NULL };
	pid_t first = spawn(args);
	int fd = connect_when_ready(sock);
	close(fd);
	pid_t second = spawn(args);
	ck_assert_int_eq(wait_exit(second, 3000), 1);
	ck_assert(log_has("another process is listening on this socket"));
	kill(first, SIGTERM);
	ck_assert_int_eq(wait_exit(first, 3000), 0);
}
END_TEST

START_TEST(check_config_reports_all)
{
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "%s/bad.yaml", dir);
	FILE *f = fopen(cfg, "w");
	fputs("policy:\n  ewma_alpha: 2\n  breaker_min_requests: five\n"
	      "  half_open_probes: 0\n  stick_tolerance: 2\n"
	      "endpoints:\n  - {backend: b, weight: heavy}\n", f);
	fclose(f);
	const char *const args[] = { "--check-config", cfg, NULL };
	pid_t pid = spawn(args);
	ck_assert_int_eq(wait_exit(pid, 3000), 1);
	/* Every problem, type errors and semantic ones, in file order. */
	char want[2048];
	snprintf(want, sizeof(want),
		 "%s:2:15: policy.ewma_alpha: must be in (0, 1], got 2\n"
		 "%s:3:25: policy.breaker_min_requests: \"five\" is not a number\n"
		 "%s:4:21: policy.half_open_probes: must be between 1 and 1000, got 0\n"
		 "%s:5:3: policy: unknown key \"stick_tolerance\" (did you mean \"sticky_tolerance\"?)\n"
		 "%s:7:5: endpoints[0].server: required\n"
		 "%s:7:26: endpoints[0].weight: \"heavy\" is not a number\n",
		 cfg, cfg, cfg, cfg, cfg, cfg);
	ck_assert_msg(log_has(want), "expected:\n%s", want);

	/* Starting on it fails the same way. */
	const char *const run[] = { "--config", cfg, "--listen", addr, NULL };
	pid = spawn(run);
	ck_assert_int_eq(wait_exit(pid, 3000), 1);

	f = fopen(cfg, "w");
	fputs("log_level: warn\n", f);
	fclose(f);
	pid = spawn(args);
	ck_assert_int_eq(wait_exit(pid, 3000), 0);
	ck_assert(log_has("bad.yaml: ok\n"));
	unlink(cfg);
}
END_TEST

START_TEST(command_line)
{
	const char *const version[] = { "--version", NULL };
	ck_assert_int_eq(wait_exit(spawn(version), 3000), 0);
	ck_assert(log_has("warmlane "));
	const char *const help[] = { "--help", NULL };
	ck_assert_int_eq(wait_exit(spawn(help), 3000), 0);
	ck_assert(log_has("--check-config FILE"));
	const char *const bad_level[] = { "--log-level", "loud", NULL };
	ck_assert_int_eq(wait_exit(spawn(bad_level), 3000), 2);
	const char *const bad_listen[] = { "--listen", "udp:1.2.3.4:5", NULL };
	ck_assert_int_eq(wait_exit(spawn(bad_listen), 3000), 2);
	const char *const extra[] = { "stray", NULL };
	ck_assert_int_eq(wait_exit(spawn(extra), 3000), 2);
}
END_TEST

static void write_file(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* Waits (WAIT_STEPS) for needle in the log. */
static void wait_log(const char *needle)
{
	for (int i = 0; i < WAIT_STEPS; i++) {
		if (log_has(needle))
			return;
		sleep_ms(10);
	}
	ck_abort_msg("no \"%s\" in the log", needle);
}

/* Counts needle in the log. */
static int log_count(const char *needle)
{
	static char buf[65536];
	FILE *f = fopen(logpath, "r");
	if (f == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	int k = 0;
	for (const char *p = buf; (p = strstr(p, needle)) != NULL; p++)
		k++;
	return k;
}

/* One route for model on fd (stream sid); returns the ACK's reason and
 * server ("-" when unset) in the buffers. */
static void route_model(int fd, uint64_t sid, const char *model, char *reason,
			char *server)
{
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", model, "session", "s1", NULL };
	fb_route(f, sid, 1, kv);
	ck_assert_int_eq(write(fd, f->b, f->len), (ssize_t)f->len);
	free(f);
	static uint8_t buf[65536];
	ptrdiff_t n = read_frame(fd, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	struct ack_vars v;
	answer_ack(buf, (size_t)n, sid, 1, &v);
	snprintf(reason, 32, "%s", ack_str(&v, "reason"));
	const char *sv = ack_has(&v, "server") ? ack_str(&v, "server") : "-";
	snprintf(server, 32, "%s", sv);
}

/* SIGHUP: a valid file is applied (new listen path bound, the old one
 * closed, an endpoint added, another's models changed) while a connection
 * made before stays open and served; an invalid one is refused with every
 * error logged, and the running configuration serves on. */
START_TEST(sighup_reload)
{
	char cfg[128], sock2[128], addr2[160], yaml[1024], state[128];
	char reason[32], server[32];
	snprintf(cfg, sizeof(cfg), "%s/reload.yaml", dir);
	snprintf(sock2, sizeof(sock2), "%s/spoa2.sock", dir);
	snprintf(addr2, sizeof(addr2), "unix:%s", sock2);
	snprintf(state, sizeof(state), "%s/state.msgpack", dir);
	snprintf(yaml, sizeof(yaml),
		 "listen: [\"%s\"]\n"
		 "metrics: { listen: \"\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n"
		 "endpoints:\n"
		 "  - { backend: llm, server: gpu1, models: [m1] }\n"
		 "  - { backend: llm, server: gpu2, models: [m1] }\n",
		 addr, state);
	write_file(cfg, yaml);
	const char *const args[] = { "--config", cfg, NULL };
	pid_t pid = spawn(args);
	int fd = connect_when_ready(sock);
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	ck_assert_int_eq(write(fd, f->b, f->len), (ssize_t)f->len);
	free(f);
	static uint8_t buf[65536];
	ck_assert_int_gt(read_frame(fd, buf, sizeof(buf)), 0); /* AGENT-HELLO */
	route_model(fd, 1, "m2", reason, server);
	ck_assert_str_eq(reason, "no_model");
	route_model(fd, 2, "m1", reason, server);
	ck_assert(strcmp(server, "gpu1") == 0 || strcmp(server, "gpu2") == 0);

	/* Valid: another socket; gpu3 added for m2; gpu1 serves m3 only (m1
	 * goes to gpu2 alone); a policy change; log level debug. */
	snprintf(yaml, sizeof(yaml),
		 "log_level: debug\n"
		 "listen: [\"%s\"]\n"
		 "metrics: { listen: \"\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n"
		 "policy: { load_factor: 2 }\n"
		 "endpoints:\n"
		 "  - { backend: llm, server: gpu1, models: [m3] }\n"
		 "  - { backend: llm, server: gpu2, models: [m1], weight: 3 }\n"
		 "  - { backend: llm, server: gpu3, models: [m2] }\n",
		 addr2, state);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	wait_log("msg=\"configuration reloaded\" endpoints_added=1 endpoints_updated=2 endpoints_removed=0");
	ck_assert(log_has("msg=listening listen=unix:"));
	ck_assert(log_has("msg=\"no longer listening\""));
	/* The old socket file is gone, the new one answers. */
	ck_assert_int_eq(access(sock, F_OK), -1);
	int fd2 = connect_when_ready(sock2);
	close(fd2);
	/* The connection made before the reload is still served, by the new
	 * configuration. */
	route_model(fd, 3, "m2", reason, server);
	ck_assert_str_eq(server, "gpu3");
	for (uint64_t i = 0; i < 8; i++) {
		route_model(fd, 10 + i, "m1", reason, server);
		ck_assert_str_eq(server, "gpu2");
	}
	ck_assert(log_has("level=debug")); /* the new log level */

	/* Invalid: refused, every error logged, nothing changes. */
	write_file(cfg, "listen: [\"unix:/nonexistent-dir/x.sock\"]\n"
			"policy:\n  ewma_alpha: 2\n  half_open_probes: 0\n");
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	wait_log("policy.half_open_probes: must be between 1");
	ck_assert(log_has("msg=\"reload refused: keeping the running configuration\""));
	ck_assert(log_has("policy.ewma_alpha: must be in (0, 1], got 2"));
	/* One that parses but cannot bind: refused as a whole. */
	snprintf(yaml, sizeof(yaml),
		 "listen: [\"unix:%s/no/such/dir.sock\"]\n"
		 "metrics: { listen: \"\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "endpoints:\n"
		 "  - { backend: llm, server: gpu9 }\n", dir);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	/* (not a wait on "does not exist": the command socket's default
	 * directory may be missing too, and says so at the start) */
	for (int i = 0; i < WAIT_STEPS && log_count("reload refused") < 2; i++)
		sleep_ms(10);
	ck_assert_int_eq(log_count("reload refused"), 2);
	ck_assert(log_has("no/such/dir.sock"));
	ck_assert_int_eq(log_count("configuration reloaded"), 1);
	route_model(fd, 30, "m2", reason, server);
	ck_assert_str_eq(server, "gpu3");
	fd2 = connect_when_ready(sock2);
	close(fd2);

	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ssize_t n = read_frame(fd, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(answer_disconnect_status(buf, (size_t)n), 0);
	close(fd);
	ck_assert_int_eq(wait_exit(pid, 3000), 0);
	ck_assert_int_eq(access(sock2, F_OK), -1);
	unlink(state);
	unlink(cfg);
}
END_TEST

/* A free loopback TCP port (bound and released: the agent binds it next). */
static unsigned free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Whether GET /healthz on 127.0.0.1:port answers 200. */
static bool http_ok(unsigned port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = { 3, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return false;
	}
	static const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
	ck_assert_int_eq(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
	char buf[64] = { 0 };
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 12 && strncmp(buf + 9, "200", 3) == 0;
}

/* A reload refused after the new metrics port was bound (here: a listen
 * address that cannot be bound) keeps the running metrics server: it
 * answers after, and the agent stops cleanly. Two reloads in a row (the
 * second moving the port back) and a SIGHUP during the stop, too. */
START_TEST(sighup_refused_keeps_metrics)
{
	char cfg[128], yaml[1024], state[128];
	unsigned p1 = free_port(), p2 = free_port();
	snprintf(cfg, sizeof(cfg), "%s/metrics.yaml", dir);
	snprintf(state, sizeof(state), "%s/state.msgpack", dir);
	snprintf(yaml, sizeof(yaml),
		 "listen: [\"%s\"]\n"
		 "metrics: { listen: \"127.0.0.1:%u\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n", addr, p1,
		 state);
	write_file(cfg, yaml);
	const char *const args[] = { "--config", cfg, NULL };
	pid_t pid = spawn(args);
	close(connect_when_ready(sock));
	wait_log("msg=started");
	ck_assert_msg(http_ok(p1), "metrics: %s", "at start");

	snprintf(yaml, sizeof(yaml),
		 "listen: [\"unix:%s/no/such/dir.sock\"]\n"
		 "metrics: { listen: \"127.0.0.1:%u\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n", dir, p2,
		 state);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	wait_log("reload refused");
	ck_assert_msg(http_ok(p1), "metrics: %s", "after the refused reload");
	ck_assert(!http_ok(p2));

	/* A metrics port taken: refused too, and the SPOP address the same
	 * file adds (bound first) is closed again. */
	struct sockaddr_in hsa = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t hl = sizeof(hsa);
	int holder = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(holder, 0);
	ck_assert_int_eq(bind(holder, (struct sockaddr *)&hsa, sizeof(hsa)), 0);
	ck_assert_int_eq(listen(holder, 1), 0);
	ck_assert_int_eq(getsockname(holder, (struct sockaddr *)&hsa, &hl), 0);
	char extra[128];
	snprintf(extra, sizeof(extra), "%s/extra.sock", dir);
	snprintf(yaml, sizeof(yaml),
		 "listen: [\"%s\", \"unix:%s\"]\n"
		 "metrics: { listen: \"127.0.0.1:%u\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n", addr, extra,
		 (unsigned)ntohs(hsa.sin_port), state);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	for (int i = 0; i < WAIT_STEPS && log_count("reload refused") < 2; i++)
		sleep_ms(10);
	ck_assert_int_eq(log_count("reload refused"), 2);
	ck_assert_int_eq(access(extra, F_OK), -1);
	ck_assert_msg(http_ok(p1), "metrics: %s", "after the port taken");
	close(holder);

	/* Two in a row: to p2, then back to p1. */
	snprintf(yaml, sizeof(yaml),
		 "listen: [\"%s\"]\n"
		 "metrics: { listen: \"127.0.0.1:%u\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n", addr, p2,
		 state);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	wait_log("configuration reloaded");
	ck_assert(http_ok(p2));
	snprintf(yaml, sizeof(yaml),
		 "listen: [\"%s\"]\n"
		 "metrics: { listen: \"127.0.0.1:%u\" }\n"
		 "runtime_api: { socket: \"\" }\n"
		 "state: { file: \"%s\", snapshot_interval: 1h }\n", addr, p1,
		 state);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	for (int i = 0; i < WAIT_STEPS && log_count("configuration reloaded") < 2; i++)
		sleep_ms(10);
	ck_assert_int_eq(log_count("configuration reloaded"), 2);
	ck_assert_msg(http_ok(p1), "metrics: %s", "after moving back");

	/* The file gone: refused with its name. */
	unlink(cfg);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	for (int i = 0; i < WAIT_STEPS && log_count("reload refused") < 3; i++)
		sleep_ms(10);
	ck_assert_int_eq(log_count("reload refused"), 3);
	ck_assert(log_has("metrics.yaml"));
	ck_assert_msg(http_ok(p1), "metrics: %s", "after the missing file");

	/* SIGHUP while stopping is ignored until the process has exited
	 * (libuv gives a signal its default action back when its handle
	 * closes: for SIGHUP, the end of the process before the final
	 * snapshot). */
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	int st = 0;
	pid_t w;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0)
		kill(pid, SIGHUP);
	ck_assert_int_eq(w, pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "exit status %d, signal %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		      WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	/* (the log may have outgrown log_has's window: no look for
	 * "stopped") */
	ck_assert_int_eq(access(state, F_OK), 0); /* the final snapshot */
	unlink(state);
}
END_TEST

/* SIGHUP before the first runtime-API poll is over (so before the
 * snapshot is loaded) with a new state.file: the load still reads the
 * file of the start (where the last run wrote), the writes go to the new
 * one. The test is HAProxy: it accepts the poll and answers only after
 * the reload, by closing. */
START_TEST(sighup_before_first_poll)
{
	char cfg[128], yaml[1024], rtsock[128], st_a[128], st_b[128];
	snprintf(cfg, sizeof(cfg), "%s/early.yaml", dir);
	snprintf(rtsock, sizeof(rtsock), "%s/rt.sock", dir);
	snprintf(st_a, sizeof(st_a), "%s/a.msgpack", dir);
	snprintf(st_b, sizeof(st_b), "%s/b.msgpack", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, rtsock, strlen(rtsock) + 1);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
#define EARLY_YAML "listen: [\"%s\"]\n" \
		   "metrics: { listen: \"\" }\n" \
		   "runtime_api: { socket: \"%s\" }\n" \
		   "state: { file: \"%s\", snapshot_interval: 1h }\n" \
		   "endpoints:\n" \
		   "  - { backend: llm, server: gpu1 }\n"
	snprintf(yaml, sizeof(yaml), EARLY_YAML, addr, rtsock, st_a);
	write_file(cfg, yaml);
	const char *const args[] = { "--config", cfg, NULL };
	pid_t pid = spawn(args);
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	int cfd = accept(lfd, NULL, NULL); /* the first poll, unanswered */
	ck_assert_int_ge(cfd, 0);

	snprintf(yaml, sizeof(yaml), EARLY_YAML, addr, rtsock, st_b);
	write_file(cfg, yaml);
	ck_assert_int_eq(kill(pid, SIGHUP), 0);
	wait_log("configuration reloaded");
	ck_assert(log_has("poller=same snapshot=changed"));
	ck_assert(!log_has("starting cold"));
	close(cfd); /* the poll fails: now the load */
	close(lfd);
	unlink(rtsock);
	wait_log("msg=\"no snapshot: starting cold\"");
	char want[200];
	snprintf(want, sizeof(want), "starting cold\" file=%s", st_a);
	ck_assert_msg(log_has(want), "not loaded from %s", st_a);

	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(wait_exit(pid, 5000), 0);
	ck_assert_int_eq(access(st_b, F_OK), 0); /* written to the new file */
	ck_assert_int_eq(access(st_a, F_OK), -1);
	unlink(st_b);
	unlink(cfg);
}
END_TEST

static Suite *daemon_suite(void)
{
	Suite *s = suite_create("agent-daemon");
	TCase *tc = tcase_create("daemon");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, serve_then_sigterm);
	tcase_add_test(tc, vanishing_client_then_sigint);
	tcase_add_test(tc, second_instance_refused);
	tcase_add_test(tc, check_config_reports_all);
	tcase_add_test(tc, command_line);
	tcase_add_test(tc, sighup_reload);
	tcase_add_test(tc, sighup_refused_keeps_metrics);
	tcase_add_test(tc, sighup_before_first_poll);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-WARMLANE\n", argv[0]);
		return EXIT_FAILURE;
	}
	warmlane = argv[1];
	SRunner *sr = srunner_create(daemon_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
