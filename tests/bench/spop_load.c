/* spop_load.c - bench-spop-load: an agent-alone SPOP load generator speaking HAProxy's side (HELLO, pipelined route and feedback NOTIFYs). */
#define _GNU_SOURCE /* ppoll */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "load_frames.h"
#include "spop.h"

/* Usage: bench-spop-load [options] SOCKET_PATH
 *
 *   -c C     connections (default 4)
 *   -w W     frames in flight per connection (default 16, at most 256)
 *   -k K     distinct keys (sessions; default 1000)
 *   -f F     fill phase: F decisions, keys 0..F-1 in order, unmeasured
 *            (default K: every key once, so the map holds them all)
 *   -n N     measured decisions (default 200000); keys drawn uniformly
 *   -r R     paced: R decisions/s in all (default 0: saturating)
 *   -p PID   the agent's pid: its CPU (all threads) over the measured phase
 *   -B CMD   run CMD (sh -c) after the fill phase, before measuring
 *   -A CMD   run CMD after the measured phase (both: callgrind_control)
 *
 * A decision is what HAProxy sends for one request: a `route` NOTIFY with
 * the 14 arguments of haproxy/warmlane.spoe.conf, in its order and with
 * values of the types HAProxy sends (session header, xxh64 prefixes as
 * sint, caller hash, IPv4 src, model, stream, unique-id, empty hints as
 * NULL), and once its ACK is in, a `feedback` NOTIFY with the 10 arguments
 * of the file, carrying the ACK's backend/server, key and akey. W bounds
 * route and feedback frames together, as HAProxy's pipelining does.
 * Latency is per frame, from its write (paced: from its scheduled time for
 * a route, so a late generator is not hidden) to its ACK. Prints one line
 * of key=value figures (writes, reads and polls: the syscalls of the
 * measured phase). Exit status 1 on any protocol error.
 *
 * It must cost less per decision than the agents it drives, or it is
 * what a saturating run measures: its frames are laid from constant
 * pieces with only the varying bytes written (load_frames.c; suite proto
 * checks them against the generic codec's bytes) and a route ACK's
 * set-vars are matched by their bytes, with spop_action_next for any
 * other shape. 1,328 instructions per decision (callgrind, 4 x 16, 10^6
 * keys, against bench-const-agent; 17,588 through spop_put_kv and
 * snprintf). Its syscalls are one send and one read per window written
 * and answered whole, and a ppoll per round: about 0.33 per decision at
 * 4 x 16, and they are now most of its CPU (docs/operations.md). */

#define LG_MAX_FRAME 16380u
#define LG_SLOTS 256u      /* in-flight frames per connection (power of 2) */
#define LG_WBUF (LG_SLOTS * 512u)
#define LG_RBUF (64u * 1024u)

struct lg_conn {
	int fd;
	bool ready;
	unsigned inflight;
	uint64_t seq;              /* next stream id; slot = seq % LG_SLOTS */
	uint64_t acked;            /* next stream id expected back */
	uint64_t sent_ns[LG_SLOTS];
	uint32_t slot_key[LG_SLOTS];
	bool slot_route[LG_SLOTS];
	/* Feedbacks waiting to be sent, a ring of fb_mask + 1 entries: the
	 * window rounded up to a power of 2 (routes in flight and feedbacks
	 * waiting are never more than a window), so that the ring cycles
	 * through a few KiB, not the 66 KiB of LG_SLOTS entries. */
	struct lframe_fb fbq[LG_SLOTS];
	unsigned fb_head, fb_n, fb_mask;
	size_t rlen, wlen, woff;
	uint8_t rbuf[LG_RBUF];
	uint8_t wbuf[LG_WBUF];
};

static struct {
	unsigned conns, window;
	uint32_t keys, fill;
	uint64_t n;
	double rate;
	long pid;
	const char *before, *after;
} opt = { .conns = 4, .window = 16, .keys = 1000, .fill = UINT32_MAX,
	  .n = 200000 };

static struct {
	bool measuring;
	uint64_t routes_sent;    /* in this phase */
	uint64_t routes_target;
	uint64_t decisions;      /* feedback ACKs in this phase */
	uint64_t t0;
	uint32_t fill_next;
	uint64_t rng;
	uint32_t *lat;           /* frame latencies (ns, saturated at 4 s) */
	uint64_t n_lat, cap_lat;
	uint64_t frames_out, bytes_out, writes, reads, polls;
} st = { .rng = 0x9e3779b97f4a7c15ull };

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-spop-load: %s\n", what);
	exit(1);
}

static uint64_t rng_next(void)
{
	uint64_t x = st.rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return st.rng = x;
}

/* The agent's CPU time in ns, all its threads (schedstat when the kernel
 * has it: ns resolution; else utime + stime in clock ticks). */
static uint64_t agent_cpu_ns(long pid)
{
	char path[64];
	uint64_t total = 0;
	bool any = false;
	snprintf(path, sizeof(path), "/proc/%ld/task", pid);
	DIR *d = opendir(path);
	if (d != NULL) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char p[320];
			snprintf(p, sizeof(p), "/proc/%ld/task/%s/schedstat",
				 pid, e->d_name);
			FILE *f = fopen(p, "r");
			unsigned long long ns;
			if (f != NULL && fscanf(f, "%llu", &ns) == 1) {
				total += ns;
				any = true;
			}
			if (f != NULL)
				fclose(f);
		}
		closedir(d);
	}
	if (any)
		return total;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		die("cannot read the agent's /proc stat");
	char buf[1024];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, stt = 0;
	if (p == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &ut, &stt) != 2)
		die("cannot parse the agent's /proc stat");
	return (ut + stt) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static uint64_t self_cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		       1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		       1000ull;
}

static void conn_hello(struct lg_conn *c)
{
	struct spop_writer w;
	struct spop_data d;
	spop_writer_init(&w, c->wbuf, sizeof(c->wbuf));
	spop_frame_start(&w, SPOP_FRAME_HAPROXY_HELLO, SPOP_FLAG_FIN, 0, 0);
	d = spop_data_string("2.0", 3);
	spop_put_kv(&w, "supported-versions", &d);
	d = spop_data_uint32(LG_MAX_FRAME);
	spop_put_kv(&w, "max-frame-size", &d);
	d = spop_data_string("pipelining", 10);
	spop_put_kv(&w, "capabilities", &d);
	d = spop_data_string("bench-spop-load", 15);
	spop_put_kv(&w, "engine-id", &d);
	if (spop_frame_finish(&w) < 0)
		die("hello does not fit");
	c->wlen = w.len;
}

/* Writes frames into out[0..cap) while the window has room: feedbacks
 * first (a request's answer is due before new requests), then routes as
 * the phase allows. Returns their length. */
static size_t conn_fill(struct lg_conn *c, uint64_t now, uint8_t *out,
			size_t cap)
{
	if (!c->ready)
		return 0;
	size_t len = 0;
	while (c->inflight < opt.window && cap - len >= LFRAME_MAX) {
		unsigned slot = (unsigned)(c->seq % LG_SLOTS);
		uint64_t t = now;
		if (c->fb_n > 0) {
			const struct lframe_fb *fb = &c->fbq[c->fb_head];
			len += lframe_feedback(out + len, c->seq, fb);
			c->slot_key[slot] = fb->key;
			c->slot_route[slot] = false;
			c->fb_head = (c->fb_head + 1) & c->fb_mask;
			c->fb_n--;
		} else {
			if (st.routes_sent >= st.routes_target)
				break;
			if (opt.rate > 0 && st.measuring) {
				t = st.t0 + (uint64_t)((double)st.routes_sent *
						       1e9 / opt.rate);
				if (t > now)
					break;
			}
			uint32_t k;
			if (!st.measuring)
				k = st.fill_next++;
			else
				k = (uint32_t)(rng_next() % opt.keys);
			len += lframe_route(out + len, c->seq, k);
			c->slot_key[slot] = k;
			c->slot_route[slot] = true;
			st.routes_sent++;
		}
		c->sent_ns[slot] = t;
		c->seq++;
		c->inflight++;
		st.frames_out++;
	}
	return len;
}

static void on_ack(struct lg_conn *c, const struct spop_frame *f,
		   uint64_t now)
{
	if (f->stream_id != c->acked || c->inflight == 0)
		die("ACK out of order");
	unsigned slot = (unsigned)(f->stream_id % LG_SLOTS);
	c->acked++;
	c->inflight--;
	if (st.measuring && st.n_lat < st.cap_lat) {
		uint64_t l = now - c->sent_ns[slot];
		st.lat[st.n_lat++] = l > UINT32_MAX ? UINT32_MAX : (uint32_t)l;
	}
	if (!c->slot_route[slot]) {
		st.decisions++;
		return;
	}
	if (c->fb_n == c->fb_mask + 1)
		die("feedback queue full");
	struct lframe_fb *fb = &c->fbq[(c->fb_head + c->fb_n) & c->fb_mask];
	fb->key = c->slot_key[slot];
	if (lframe_ack(f->payload, f->payload_len, fb) < 0)
		die("malformed ACK, or a variable of another type or too long");
	c->fb_n++;
}

/* Every connection reads into lg_in, and writes from lg_out, while it has
 * nothing left over: the few KiB the kernel copies into and out of stay
 * in the cache whatever the number of connections, where a buffer each
 * spread them over 8 x 8 KiB at 8 connections (with the smaller feedback
 * ring, D1 misses per decision at 8 x 16 from 4.3 read + 9.7 write to
 * 0.6 + 1.7 in callgrind's cache simulator, which sees only the
 * generator's own accesses). A partial frame read, or frames a send did
 * not take, go to the connection's own buffer. */
static uint8_t lg_in[LG_RBUF], lg_out[LG_WBUF];

static void conn_read(struct lg_conn *c)
{
	uint8_t *buf = c->rlen == 0 ? lg_in : c->rbuf;
	ssize_t n = read(c->fd, buf + c->rlen, LG_RBUF - c->rlen);
	if (n == 0)
		die("the agent closed a connection");
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		die(strerror(errno));
	}
	st.reads++;
	size_t len = c->rlen + (size_t)n;
	uint64_t now = now_ns();
	size_t off = 0;
	for (;;) {
		struct spop_frame f;
		enum spop_status s;
		ptrdiff_t k = spop_frame_decode(buf + off, len - off,
						LG_MAX_FRAME, &f, &s);
		if (k == SPOP_NEED_MORE)
			break;
		if (k < 0)
			die("malformed frame from the agent");
		off += (size_t)k;
		if (f.type == SPOP_FRAME_AGENT_HELLO && !c->ready)
			c->ready = true;
		else if (f.type == SPOP_FRAME_ACK && c->ready)
			on_ack(c, &f, now);
		else
			die("unexpected frame from the agent (a DISCONNECT?)");
	}
	if (off < len)
		memmove(c->rbuf, buf + off, len - off);
	c->rlen = len - off;
}

static void conn_write(struct lg_conn *c)
{
	while (c->woff < c->wlen) {
		ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff,
				 MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			die(strerror(errno));
		}
		st.writes++;
		st.bytes_out += (uint64_t)n;
		c->woff += (size_t)n;
	}
	c->woff = c->wlen = 0;
}

/* Sends out[0..len) (lg_out); what the socket does not take waits in
 * the connection's buffer for POLLOUT. */
static void conn_send(struct lg_conn *c, const uint8_t *out, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(c->fd, out + off, len - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			die(strerror(errno));
		}
		st.writes++;
		st.bytes_out += (uint64_t)n;
		off += (size_t)n;
	}
	memcpy(c->wbuf, out + off, len - off);
	c->woff = 0;
	c->wlen = len - off;
}

/* Runs until every route of the phase has its feedback acknowledged. */
static void run_phase(struct lg_conn *cs, struct pollfd *pfd, uint64_t goal)
{
	uint64_t start = st.decisions;
	while (st.decisions - start < goal) {
		uint64_t now = now_ns();
		for (unsigned i = 0; i < opt.conns; i++) {
			if (cs[i].woff == cs[i].wlen)
				conn_send(&cs[i], lg_out,
					  conn_fill(&cs[i], now, lg_out,
						    sizeof(lg_out)));
			else
				conn_write(&cs[i]);
			pfd[i].events = POLLIN | (cs[i].wlen > 0 ? POLLOUT : 0);
		}
		/* Paced: wake when the next route is due, if a window has room
		 * for it; with every window full only an ACK can let it go, and
		 * a zero timeout would spin until one comes. */
		bool room = false;
		for (unsigned i = 0; i < opt.conns && !room; i++)
			room = cs[i].ready && cs[i].inflight < opt.window;
		struct timespec ts, *tsp = NULL;
		if (opt.rate > 0 && st.measuring && room &&
		    st.routes_sent < st.routes_target) {
			uint64_t due = st.t0 + (uint64_t)((double)st.routes_sent *
							  1e9 / opt.rate);
			uint64_t wait = due > now ? due - now : 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
			tsp = &ts;
		}
		int r = ppoll(pfd, opt.conns, tsp, NULL);
		st.polls++;
		if (r < 0 && errno != EINTR)
			die(strerror(errno));
		for (unsigned i = 0; i < opt.conns && r > 0; i++) {
			if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL))
				die("a connection failed");
			if (pfd[i].revents & POLLIN)
				conn_read(&cs[i]);
			if (pfd[i].revents & POLLOUT)
				conn_write(&cs[i]);
		}
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static double pct_us(double p)
{
	if (st.n_lat == 0)
		return 0;
	uint64_t i = (uint64_t)(p * (double)(st.n_lat - 1) + 0.5);
	return st.lat[i] / 1000.0;
}

static void run_cmd(const char *cmd)
{
	if (cmd != NULL && system(cmd) != 0)
		fprintf(stderr, "bench-spop-load: `%s` failed\n", cmd);
}

int main(int argc, char **argv)
{
	int ch;
	while ((ch = getopt(argc, argv, "c:w:k:f:n:r:p:B:A:")) != -1) {
		switch (ch) {
		case 'c': opt.conns = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': opt.window = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'k': opt.keys = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': opt.fill = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'n': opt.n = strtoull(optarg, NULL, 10); break;
		case 'r': opt.rate = strtod(optarg, NULL); break;
		case 'p': opt.pid = strtol(optarg, NULL, 10); break;
		case 'B': opt.before = optarg; break;
		case 'A': opt.after = optarg; break;
		default: return 2;
		}
	}
	if (optind + 1 != argc || opt.conns == 0 || opt.window == 0 ||
	    opt.window > LG_SLOTS || opt.keys == 0) {
		fprintf(stderr, "usage: %s [-c C] [-w W<=%u] [-k K] [-f F] "
			"[-n N] [-r RATE] [-p PID] [-B CMD] [-A CMD] SOCKET\n",
			argv[0], LG_SLOTS);
		return 2;
	}
	if (opt.fill == UINT32_MAX)
		opt.fill = opt.keys;

	struct lg_conn *cs = calloc(opt.conns, sizeof(*cs));
	struct pollfd *pfd = calloc(opt.conns, sizeof(*pfd));
	st.cap_lat = 2 * opt.n + 16;
	st.lat = malloc(st.cap_lat * sizeof(*st.lat));
	if (cs == NULL || pfd == NULL || st.lat == NULL)
		die("out of memory");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(argv[optind]) >= sizeof(sa.sun_path))
		die("socket path too long");
	strcpy(sa.sun_path, argv[optind]);
	for (unsigned i = 0; i < opt.conns; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			die("cannot connect to the agent");
		cs[i].fd = fd;
		cs[i].fb_mask = 1;
		while (cs[i].fb_mask + 1 < opt.window)
			cs[i].fb_mask = 2 * cs[i].fb_mask + 1;
		pfd[i].fd = fd;
		conn_hello(&cs[i]);
	}
	/* HELLOs: wait for every AGENT-HELLO. */
	for (;;) {
		unsigned ready = 0;
		for (unsigned i = 0; i < opt.conns; i++) {
			conn_write(&cs[i]);
			ready += cs[i].ready;
			pfd[i].events = POLLIN;
		}
		if (ready == opt.conns)
			break;
		if (poll(pfd, opt.conns, 5000) <= 0)
			die("no AGENT-HELLO within 5 s");
		for (unsigned i = 0; i < opt.conns; i++)
			if (pfd[i].revents & POLLIN)
				conn_read(&cs[i]);
	}

	st.routes_target = opt.fill;
	run_phase(cs, pfd, opt.fill);
	run_cmd(opt.before);

	st.measuring = true;
	st.routes_sent = 0;
	st.routes_target = opt.n;
	st.frames_out = st.writes = st.reads = st.polls = st.bytes_out = 0;
	uint64_t a0 = opt.pid > 0 ? agent_cpu_ns(opt.pid) : 0;
	uint64_t g0 = self_cpu_ns();
	st.t0 = now_ns();
	run_phase(cs, pfd, opt.n);
	uint64_t wall = now_ns() - st.t0;
	uint64_t g1 = self_cpu_ns();
	uint64_t a1 = opt.pid > 0 ? agent_cpu_ns(opt.pid) : 0;
	run_cmd(opt.after);

	qsort(st.lat, st.n_lat, sizeof(*st.lat), cmp_u32);
	double secs = (double)wall / 1e9;
	double n = (double)opt.n;
	printf("decisions=%" PRIu64 " secs=%.3f decisions_per_s=%.0f",
	       opt.n, secs, n / secs);
	if (opt.pid > 0)
		printf(" agent_cpu_s=%.3f agent_us_per_decision=%.3f"
		       " agent_cpu_pct=%.1f", (double)(a1 - a0) / 1e9,
		       (double)(a1 - a0) / 1e3 / n,
		       100.0 * (double)(a1 - a0) / (double)wall);
	printf(" gen_cpu_pct=%.1f p50_us=%.1f p90_us=%.1f p99_us=%.1f"
	       " p999_us=%.1f frames=%" PRIu64 " writes=%" PRIu64
	       " reads=%" PRIu64 " polls=%" PRIu64 "\n",
	       100.0 * (double)(g1 - g0) / (double)wall, pct_us(0.50),
	       pct_us(0.90), pct_us(0.99), pct_us(0.999), st.frames_out,
	       st.writes, st.reads, st.polls);
	for (unsigned i = 0; i < opt.conns; i++)
		close(cs[i].fd);
	free(cs);
	free(pfd);
	free(st.lat);
	return 0;
}
