/* test_sdnotify.c - systemd notifications to a fake NOTIFY_SOCKET: READY, WATCHDOG keep-alives, STATUS, STOPPING. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "sdnotify.h"
#include "stats.h"

static int sock = -1;
static char dir[256], path[300];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/warmlane-sd.XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	sock = socket(AF_UNIX, SOCK_DGRAM, 0);
	ck_assert_int_ge(sock, 0);
	ck_assert_int_eq(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void teardown(void)
{
	close(sock);
	unlink(path);
	rmdir(dir);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

static void on_timer(uv_timer_t *t)
{
	(void)t; /* one-shot: the loop has nothing referenced left after it */
}

/* Datagrams received so far, concatenated with '|'. */
static void drain(char *out, size_t cap)
{
	char buf[1024];
	ssize_t n;
	while ((n = recv(sock, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		buf[n] = '\0';
		strncat(out, buf, cap - strlen(out) - 2);
		strcat(out, "|");
	}
}

START_TEST(notifies)
{
	uv_loop_t loop;
	struct sdnotify n;
	struct stats st;
	char got[8192] = "", pid[32];
	memset(&st, 0, sizeof(st));
	setenv("NOTIFY_SOCKET", path, 1);
	setenv("WATCHDOG_USEC", "40000", 1); /* keep-alives every 20 ms */
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(sdnotify_init(&n, &loop, &st), 0);
	ck_assert(n.enabled);
	ck_assert_uint_eq(n.watchdog_usec, 40000);

	/* A referenced timer runs the loop for 110 ms. */
	uv_timer_t t;
	uv_timer_init(&loop, &t);
	uv_timer_start(&t, on_timer, 110, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	sdnotify_stopping(&n);
	sdnotify_reloading(&n);
	sdnotify_finish(&n);
	sdnotify_finish(&n);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);

	drain(got, sizeof(got));
	ck_assert_msg(strstr(got, "READY=1") != NULL, "%s", got);
	ck_assert_msg(strstr(got, "STOPPING=1") != NULL, "%s", got);
	ck_assert_msg(strstr(got, "RELOADING=1\nMONOTONIC_USEC=") != NULL, "%s", got);
	unsigned wd = 0;
	for (const char *p = got; (p = strstr(p, "WATCHDOG=1")) != NULL; p++)
		wd++;
	ck_assert_msg(wd >= 4, "%u keep-alives: %s", wd, got);
}
END_TEST

/* Without NOTIFY_SOCKET nothing is started or sent. */
START_TEST(disabled)
{
	uv_loop_t loop;
	struct sdnotify n;
	struct stats st;
	char got[1024] = "";
	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(sdnotify_init(&n, &loop, &st), 0);
	ck_assert(!n.enabled);
	sdnotify_stopping(&n);
	sdnotify_finish(&n);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	drain(got, sizeof(got));
	ck_assert_str_eq(got, "");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sdnotify");
	TCase *tc = tcase_create("sdnotify");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, notifies);
	tcase_add_test(tc, disabled);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
