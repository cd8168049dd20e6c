/* test_config_parse.c - agent: the configuration's pure parsers (config_parse.c). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_parse.h"

START_TEST(durations)
{
	static const struct {
		const char *s;
		int r;
		uint64_t ms;
	} cases[] = {
		{ "200ms", 0, 200 },	     { "5s", 0, 5000 },
		{ "5m", 0, 300000 },	     { "1h", 0, 3600000 },
		{ "0s", 0, 0 },		     { "1.5s", 0, 1500 },
		{ "0.25m", 0, 15000 },	     { "300s", 0, 300000 },
		{ "007ms", 0, 7 },	     { "0.5ms", -ERANGE, 0 },
		{ "1.0001s", -ERANGE, 0 },   { "5", -EINVAL, 0 },
		{ "s", -EINVAL, 0 },	     { "", -EINVAL, 0 },
		{ "5 s", -EINVAL, 0 },	     { "-1s", -EINVAL, 0 },
		{ "1.s", -EINVAL, 0 },	     { ".5s", -EINVAL, 0 },
		{ "1d", -EINVAL, 0 },	     { "5S", -EINVAL, 0 },
		{ "5sec", -EINVAL, 0 },	     { "1e3ms", -EINVAL, 0 },
		{ "99999999999999999999h", -EINVAL, 0 },
		{ "18446744073709551615h", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t ms = 12345;
		int r = config_parse_duration(cases[i].s, &ms);
		ck_assert_msg(r == cases[i].r, "\"%s\": %d", cases[i].s, r);
		if (r == 0)
			ck_assert_uint_eq(ms, cases[i].ms);
		else
			ck_assert_uint_eq(ms, 12345);
	}
}
END_TEST

START_TEST(listen_addresses)
{
	struct config_listen l;
	char why[160];

	ck_assert_int_eq(config_parse_listen("unix:/run/a.sock", &l, why, sizeof(why)), 0);
	ck_assert_int_eq(l.kind, CONFIG_LISTEN_UNIX);
	ck_assert_str_eq(l.path, "/run/a.sock");
	ck_assert_uint_eq(l.mode, 0660);
	ck_assert_str_eq(l.text, "unix:/run/a.sock,mode=0660");
	ck_assert_int_eq(config_parse_listen("unix:rel.sock,mode=600", &l, why, sizeof(why)), 0);
	ck_assert_uint_eq(l.mode, 0600);
	ck_assert_int_eq(config_parse_listen("tcp:127.0.0.1:12345", &l, why, sizeof(why)), 0);
	ck_assert_int_eq(l.kind, CONFIG_LISTEN_TCP);
	ck_assert_str_eq(l.host, "127.0.0.1");
	ck_assert_uint_eq(l.port, 12345);
	ck_assert(!l.ipv6);
	ck_assert_int_eq(config_parse_listen("tcp:[::1]:80", &l, why, sizeof(why)), 0);
	ck_assert(l.ipv6);
	ck_assert_str_eq(l.host, "::1");
	ck_assert_str_eq(l.text, "tcp:[::1]:80");
	ck_assert_int_eq(config_parse_listen("tcp:localhost:1", &l, why, sizeof(why)), 0);
	ck_assert_str_eq(l.host, "127.0.0.1");
	ck_assert_int_eq(config_parse_listen("tcp:*:65535", &l, why, sizeof(why)), 0);
	ck_assert_str_eq(l.host, "0.0.0.0");
	ck_assert_uint_eq(l.port, 65535);

	char longpath[200] = "unix:/";
	memset(longpath + 6, 'a', 150);
	longpath[156] = '\0';
	const char *const bad[] = {
		"unix:", "unix:,mode=0660", "unix:/a,mode=0800", "unix:/a,mode=",
		"unix:/a,mode=01777", "unix:/a,owner=x", "tcp:1.2.3.4",
		"tcp:1.2.3.4:", "tcp:1.2.3.4:0", "tcp:1.2.3.4:65536",
		"tcp:1.2.3.4:80x", "tcp:::1:80", "tcp:[::1:80", "tcp:[::1]80",
		"tcp:example.com:80", "tcp::80", "udp:1.2.3.4:80", "/run/a.sock",
		"", longpath,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(config_parse_listen(bad[i], &l, why, sizeof(why)) == -EINVAL,
			      "\"%s\" accepted", bad[i]);
		ck_assert_uint_gt(strlen(why), 0);
	}

	struct config_hostport hp;
	ck_assert_int_eq(config_parse_hostport("127.0.0.1:9901", &hp, why, sizeof(why)), 0);
	ck_assert_uint_eq(hp.port, 9901);
	ck_assert_int_eq(config_parse_hostport("9901", &hp, why, sizeof(why)), -EINVAL);
}
END_TEST

START_TEST(socket_modes)
{
	static const char *const good[] = { "0660", "600", "7", "0777", "0000" };
	static const unsigned want[] = { 0660, 0600, 07, 0777, 0 };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		unsigned mode = 12345;
		ck_assert_int_eq(config_parse_mode(good[i], strlen(good[i]), &mode), 0);
		ck_assert_uint_eq(mode, want[i]);
	}
	/* Five digits are refused even when the value fits. */
	static const char *const bad[] = {
		"", "0800", "01777", "00777", "1000", "66a", "-660", " 660",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned mode = 12345;
		ck_assert_msg(config_parse_mode(bad[i], strlen(bad[i]), &mode) == -EINVAL,
			      "\"%s\" accepted", bad[i]);
		ck_assert_uint_eq(mode, 12345);
	}
	/* Only len bytes are read: "0660" out of "0660,owner=x". */
	unsigned mode = 0;
	ck_assert_int_eq(config_parse_mode("0660,owner=x", 4, &mode), 0);
	ck_assert_uint_eq(mode, 0660);
}
END_TEST

START_TEST(duration_format)
{
	static const struct {
		uint64_t ms;
		const char *text;
	} cases[] = {
		{ 0, "0ms" },	      { 200, "200ms" },	 { 1500, "1500ms" },
		{ 5000, "5s" },	      { 90000, "90s" },	 { 300000, "5m" },
		{ 3600000, "1h" },    { 86400000, "24h" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];
		ck_assert_str_eq(config_fmt_duration(buf, sizeof(buf), cases[i].ms),
				 cases[i].text);
		/* What is written parses back to the same value. */
		uint64_t back = 1;
		ck_assert_int_eq(config_parse_duration(buf, &back), 0);
		ck_assert_uint_eq(back, cases[i].ms);
	}
}
END_TEST

START_TEST(names)
{
	ck_assert(config_name_is_haproxy("be-1_x.y:z"));
	ck_assert(!config_name_is_haproxy(""));
	ck_assert(!config_name_is_haproxy("a b"));
	ck_assert(!config_name_is_haproxy("a/b"));
	ck_assert(!config_name_is_haproxy("caf\xc3\xa9"));
	ck_assert(config_name_is_printable("key/1+x=="));
	ck_assert(!config_name_is_printable(""));
	ck_assert(!config_name_is_printable("a b"));
	ck_assert(!config_name_is_printable("a\x7f"));
	ck_assert(!config_name_is_printable("a\tb"));
}
END_TEST

static void expect_bad_url(const char *u, const char *why)
{
	char got[96] = "";
	ck_assert_msg(!config_url_is_http(u, got, sizeof(got)), "\"%s\" accepted",
		      u);
	ck_assert_str_eq(got, why);
}

START_TEST(http_urls)
{
	char why[96];
	ck_assert(config_url_is_http("http://10.0.0.1:8000/metrics", why, sizeof(why)));
	ck_assert(config_url_is_http("http://h", why, sizeof(why)));
	expect_bad_url("https://h/metrics", "not an http:// URL");
	expect_bad_url("http://", "not an http:// URL");
	expect_bad_url("HTTP://h/", "not an http:// URL");
	expect_bad_url("http:///metrics", "no host, or credentials in the URL");
	expect_bad_url("http://:80/", "no host, or credentials in the URL");
	expect_bad_url("http://u:p@h/", "no host, or credentials in the URL");
	expect_bad_url("http://h/a b", "byte 11 is a blank or not printable ASCII");
	char longu[CONFIG_URL_MAX + 2] = "http://h/";
	memset(longu + 9, 'a', CONFIG_URL_MAX - 8);
	longu[CONFIG_URL_MAX + 1] = '\0';
	expect_bad_url(longu, "longer than 1024 bytes");
	longu[CONFIG_URL_MAX] = '\0';
	ck_assert(config_url_is_http(longu, why, sizeof(why)));
}
END_TEST

START_TEST(set_err_bounded)
{
	char small[8] = "xxxxxxx";
	config_set_err(small, sizeof(small), "%s", "a longer message");
	ck_assert_str_eq(small, "a longe");
	config_set_err(small, 0, "%s", "nothing written");
	ck_assert_str_eq(small, "a longe");
}
END_TEST

static Suite *config_parse_suite(void)
{
	Suite *s = suite_create("agent-config-parse");
	TCase *tc = tcase_create("config_parse");
	tcase_add_test(tc, durations);
	tcase_add_test(tc, listen_addresses);
	tcase_add_test(tc, socket_modes);
	tcase_add_test(tc, duration_format);
	tcase_add_test(tc, names);
	tcase_add_test(tc, http_urls);
	tcase_add_test(tc, set_err_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_parse_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
