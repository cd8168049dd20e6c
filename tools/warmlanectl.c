/* warmlanectl.c - sends one command to warmlane's command socket and prints the answer (docs/ctl.md). */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "warmlane_version.h"

#define CTL_DEFAULT_SOCKET "/var/lib/haproxy/warmlane/ctl.sock"
/* The agent answers at once; a stuck one must not hang a script. */
#define CTL_TIMEOUT_MS 10000

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: warmlanectl [-s SOCKET] COMMAND [ARG]...\n"
		"       warmlanectl [-s SOCKET] -       (commands from stdin, one per line)\n"
		"\n"
		"Sends a command to warmlane's command socket and prints the answer.\n"
		"`warmlanectl help` lists the commands; add -json for JSON.\n"
		"\n"
		"  -s, --socket PATH  the command socket (default %s,\n"
		"                     or $WARMLANE_CTL_SOCKET)\n"
		"  -t, --timeout MS   give up after MS without an answer (default %d)\n"
		"  -V, --version      print the version\n"
		"  -h, --help         print this help\n"
		"\n"
		"Exit status: 0, 1 when the answer is an error, 2 for usage, 3 when the\n"
		"socket cannot be reached or does not answer in time.\n",
		CTL_DEFAULT_SOCKET, CTL_TIMEOUT_MS);
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* EPIPE, not SIGPIPE */
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = getenv("WARMLANE_CTL_SOCKET");
	long timeout = CTL_TIMEOUT_MS;
	int o;
	if (path == NULL || path[0] == '\0')
		path = CTL_DEFAULT_SOCKET;
	/* "+": options stop at the command, whose words may start with '-'
	 * (-json). */
	while ((o = getopt_long(argc, argv, "+s:t:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			path = optarg;
			break;
		case 't':
			timeout = strtol(optarg, NULL, 10);
			if (timeout <= 0) {
				fprintf(stderr, "warmlanectl: --timeout must be a positive number of ms\n");
				return 2;
			}
			break;
		case 'V':
			printf("warmlanectl %s\n", WARMLANE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}

	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "warmlanectl: %s: path too long\n", path);
		return 3;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "warmlanectl: %s: %s\n", path, strerror(errno));
		return 3;
	}

	int r = 0;
	bool from_stdin = argc - optind == 1 && strcmp(argv[optind], "-") == 0;
	if (from_stdin) {
		char buf[8192];
		size_t n;
		while (r == 0 && (n = fread(buf, 1, sizeof(buf), stdin)) > 0)
			r = send_all(fd, buf, n);
	} else {
		for (int i = optind; r == 0 && i < argc; i++) {
			if (strchr(argv[i], '\n') != NULL) {
				fprintf(stderr, "warmlanectl: an argument holds a newline\n");
				return 2;
			}
			r = send_all(fd, argv[i], strlen(argv[i]));
			if (r == 0)
				r = send_all(fd, i + 1 < argc ? " " : "\n", 1);
		}
	}
	/* Closed while sending (a line too long, a quit): its answer says
	 * why, read it. */
	if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
		fprintf(stderr, "warmlanectl: %s: %s\n", path, strerror(-r));
		return 3;
	}
	/* EOF: the agent answers what it has read, then closes. */
	shutdown(fd, SHUT_WR);

	char buf[65536];
	bool first = true, error = false;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int pr = poll(&p, 1, (int)timeout);
		if (pr == 0) {
			fprintf(stderr, "warmlanectl: %s: no answer in %ld ms\n", path, timeout);
			return 3;
		}
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "warmlanectl: poll: %s\n", strerror(errno));
			return 3;
		}
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET)
			break; /* closed with our unread lines: the answer is in */
		if (n < 0) {
			fprintf(stderr, "warmlanectl: %s: %s\n", path, strerror(errno));
			return 3;
		}
		if (n == 0)
			break;
		if (first && ((n >= 7 && memcmp(buf, "error: ", 7) == 0) ||
			      (n >= 9 && memcmp(buf, "{\"error\":", 9) == 0)))
			error = true;
		first = false;
		fwrite(buf, 1, (size_t)n, stdout);
	}
	close(fd);
	return error ? 1 : 0;
}
