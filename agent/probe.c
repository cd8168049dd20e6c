/* probe.c - upstream key probes: HTTP requests the agent shapes itself, through HAProxy, on libcurl's multi interface driven by libuv. */
#include "probe.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "route.h"

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* One probe out. The names are copies: the endpoint may leave the pool (a
 * reload, HAProxy's runtime API) while it is out, and the result is given
 * to whatever endpoint has these names then. */
struct probe_req {
	struct probe_req *next;
	struct probe *p;
	CURL *easy;
	struct curl_slist *headers;
	size_t body;                       /* bytes of answer read */
	uint64_t started_ms;
	/* A probe_fetch (cb != NULL): the body goes to buf. */
	probe_fetch_cb cb;
	void *arg;
	char *buf;
	size_t cap;
	bool cut;
	char backend[CONFIG_NAME_MAX + 1];
	char server[CONFIG_NAME_MAX + 1];
	char key[CONFIG_NAME_MAX + 1];
};

/* A socket libcurl asked to watch. Freed in its close callback. */
struct probe_sock {
	uv_poll_t poll;
	struct probe *p;
	curl_socket_t fd;
};

/* curl_global_init is process-wide; probers may come and go (tests). */
static unsigned probe_curl_users;

enum core_probe probe_classify(long status)
{
	if (status == 401 || status == 403)
		return CORE_PROBE_REFUSED;
	if (status >= 100 && status <= 499)
		return CORE_PROBE_ACCEPTED;
	return CORE_PROBE_INCONCLUSIVE;
}

/* ---- results -------------------------------------------------------------- */

static void probe_req_free(struct probe_req *q)
{
	struct probe *p = q->p;
	for (struct probe_req **pp = &p->reqs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	if (q->easy != NULL) {
		curl_multi_remove_handle(p->multi, q->easy);
		curl_easy_cleanup(q->easy);
	}
	curl_slist_free_all(q->headers);
	bool fetch = q->cb != NULL;
	free(q);
	if (!fetch && p->route->probe.active > 0)
		p->route->probe.active--;
}

/* Hands q's result to the core and frees q. */
static void probe_done(struct probe_req *q, CURLcode cc)
{
	struct probe *p = q->p;
	struct route *r = p->route;
	long status = 0;
	if (q->easy != NULL)
		curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &status);
	if (q->cb != NULL) {
		/* Freed first: the callback may start the next fetch. */
		probe_fetch_cb cb = q->cb;
		void *arg = q->arg;
		size_t len = q->body;
		bool cut = q->cut;
		probe_req_free(q);
		cb(arg, status, status == 0 ? curl_easy_strerror(cc) : "-", len,
		   cut);
		return;
	}
	/* The status line is what counts: an answer whose body was then cut
	 * (or that was too long to read) still said it. */
	enum core_probe res = probe_classify(status);
	if (status == 0)
		r->probe.transport_errors++;
	r->probe.results[res]++;
	uint64_t now = uv_now(p->loop);
	int idx = core_endpoint_find(r->core, core_str_c(q->backend),
				     core_str_c(q->server), core_str_c(q->key));
	struct core_endpoint_info before = { 0 };
	bool known = idx >= 0 && core_endpoint_info(r->core, idx, now, &before) == 0;
	if (known)
		core_key_probe_result(r->core, idx, res, now);
	const char *err = status == 0 ? curl_easy_strerror(cc) : "-";
	char q_err[200];
	log_quote(q_err, sizeof(q_err), err, strlen(err));
	if (res == CORE_PROBE_REFUSED && !before.key_dead)
		log_warn("upstream key refused by its probe: excluded",
			 "backend=%s server=%s key=%s status=%ld",
			 q->backend, q->server, q->key, status);
	else if (res == CORE_PROBE_ACCEPTED && before.key_dead)
		log_info("upstream key accepted by its probe: back in the pool",
			 "backend=%s server=%s key=%s status=%ld",
			 q->backend, q->server, q->key, status);
	else
		log_debug("key probe", "backend=%s server=%s key=%s status=%ld result=%s error=%s known=%s ms=%llu",
			  q->backend, q->server, q->key, status,
			  core_probe_name(res), q_err, known ? "true" : "false",
			  (unsigned long long)(now - q->started_ms));
	probe_req_free(q);
}

/* Collects the transfers libcurl has finished. */
static void probe_check_done(struct probe *p)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(p->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct probe_req *q = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&q);
		CURLcode cc = m->data.result;
		if (q != NULL)
			probe_done(q, cc); /* m is invalid from here on */
	}
}

/* ---- libcurl on libuv ------------------------------------------------------ */

static void probe_on_poll(uv_poll_t *h, int status, int events)
{
	struct probe_sock *ps = container_of(h, struct probe_sock, poll);
	struct probe *p = ps->p;
	int flags = 0;
	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	int running;
	curl_multi_socket_action(p->multi, ps->fd, flags, &running);
	probe_check_done(p);
}

static void probe_sock_closed(uv_handle_t *h)
{
	free(container_of((uv_poll_t *)h, struct probe_sock, poll));
}

static int probe_on_socket(CURL *easy, curl_socket_t fd, int what, void *userp,
			   void *socketp)
{
	struct probe *p = userp;
	struct probe_sock *ps = socketp;
	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (ps != NULL) {
			curl_multi_assign(p->multi, fd, NULL);
			uv_poll_stop(&ps->poll);
			uv_close((uv_handle_t *)&ps->poll, probe_sock_closed);
		}
		return 0;
	}
	if (ps == NULL) {
		ps = calloc(1, sizeof(*ps));
		if (ps == NULL)
			return -1; /* libcurl fails that transfer */
		if (uv_poll_init_socket(p->loop, &ps->poll, fd) < 0) {
			free(ps);
			return -1;
		}
		ps->p = p;
		ps->fd = fd;
		curl_multi_assign(p->multi, fd, ps);
	}
	int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) |
		 ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
	return uv_poll_start(&ps->poll, ev, probe_on_poll) < 0 ? -1 : 0;
}

static void probe_on_curl_timer(uv_timer_t *t)
{
	struct probe *p = container_of(t, struct probe, curl_timer);
	int running;
	curl_multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	probe_check_done(p);
}

static int probe_on_timeout(CURLM *multi, long timeout_ms, void *userp)
{
	struct probe *p = userp;
	(void)multi;
	if (timeout_ms < 0)
		return uv_timer_stop(&p->curl_timer) < 0 ? -1 : 0;
	/* Not from inside this callback: libcurl forbids re-entering. */
	return uv_timer_start(&p->curl_timer, probe_on_curl_timer,
			      (uint64_t)timeout_ms, 0) < 0 ? -1 : 0;
}

static size_t probe_on_body(char *ptr, size_t size, size_t n, void *userp)
{
	struct probe_req *q = userp;
	size_t len = size * n;
	if (q->buf != NULL) {
		if (len > q->cap - q->body) {
			q->cut = true;
			return 0; /* libcurl stops the transfer */
		}
		memcpy(q->buf + q->body, ptr, len);
		q->body += len;
		return len;
	}
	if (len > PROBE_BODY_MAX - q->body)
		return 0; /* cut: the status is already known */
	q->body += len;
	return len;
}

/* ---- starting probes ------------------------------------------------------- */

/* Whether s may go into a header value as it is. */
static bool probe_token(const char *s)
{
	if (s == NULL || s[0] == '\0' || strlen(s) > CONFIG_NAME_MAX)
		return false;
	for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++)
		if (*c <= 0x20 || *c >= 0x7f)
			return false;
	return true;
}

static int probe_header(struct probe_req *q, const char *name,
			const char *value)
{
	char line[CONFIG_NAME_MAX + 64];
	snprintf(line, sizeof(line), "%s: %s", name, value);
	struct curl_slist *l = curl_slist_append(q->headers, line);
	if (l == NULL)
		return -ENOMEM;
	q->headers = l;
	return 0;
}

/* Sets up and adds q's transfer. Returns 0 or -errno. */
static int probe_send(struct probe *p, struct probe_req *q)
{
	const struct config *cfg = p->cfg;
	char url[CONFIG_PROBE_PATH_MAX + 128];
	if (cfg->key_probe.kind == CONFIG_LISTEN_UNIX)
		snprintf(url, sizeof(url), "http://localhost%s", cfg->key_probe_path);
	else
		snprintf(url, sizeof(url), cfg->key_probe.ipv6 ? "http://[%s]:%u%s"
							       : "http://%s:%u%s",
			 cfg->key_probe.host, (unsigned)cfg->key_probe.port,
			 cfg->key_probe_path);
	if (probe_header(q, PROBE_HEADER_BACKEND, q->backend) < 0 ||
	    probe_header(q, PROBE_HEADER_SERVER, q->server) < 0 ||
	    probe_header(q, PROBE_HEADER_KEY, q->key) < 0 ||
	    /* libcurl's defaults: nothing but what the probe needs. */
	    probe_header(q, "Accept", "*/*") < 0 ||
	    probe_header(q, "User-Agent", "warmlane-key-probe") < 0)
		return -ENOMEM;
	q->easy = curl_easy_init();
	if (q->easy == NULL)
		return -ENOMEM;
	CURL *e = q->easy;
	CURLcode c = CURLE_OK;
#define SET(opt, v) do { if (c == CURLE_OK) c = curl_easy_setopt(e, opt, v); } while (0)
	SET(CURLOPT_URL, url);
	if (cfg->key_probe.kind == CONFIG_LISTEN_UNIX)
		SET(CURLOPT_UNIX_SOCKET_PATH, cfg->key_probe.path);
	/* Straight to HAProxy: no proxy from the environment. */
	SET(CURLOPT_PROXY, "");
	SET(CURLOPT_NOPROXY, "*");
	SET(CURLOPT_PROTOCOLS_STR, "http");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)cfg->key_probe_timeout_ms);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->key_probe_timeout_ms);
	if (strcmp(cfg->key_probe_method, "GET") != 0)
		SET(CURLOPT_CUSTOMREQUEST, cfg->key_probe_method);
	SET(CURLOPT_HTTPHEADER, q->headers);
	SET(CURLOPT_WRITEFUNCTION, probe_on_body);
	SET(CURLOPT_WRITEDATA, q);
	SET(CURLOPT_PRIVATE, (void *)q);
#undef SET
	if (c == CURLE_OK && curl_multi_add_handle(p->multi, e) == CURLM_OK)
		return 0;
	/* Not added: nothing for libcurl to remove. */
	curl_easy_cleanup(e);
	q->easy = NULL;
	return c != CURLE_OK ? -EINVAL : -ENOMEM;
}

int probe_fetch(struct probe *p, const char *url, uint64_t timeout_ms,
		char *buf, size_t cap, probe_fetch_cb cb, void *arg)
{
	if (!p->started || p->stopping)
		return -ESHUTDOWN;
	struct probe_req *q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	*q = (struct probe_req){ .p = p, .cb = cb, .arg = arg, .buf = buf,
				 .cap = cap, .started_ms = uv_now(p->loop) };
	q->easy = curl_easy_init();
	if (q->easy == NULL ||
	    probe_header(q, "Accept", "text/plain, application/json, */*") < 0 ||
	    probe_header(q, "User-Agent", "warmlane-engine") < 0) {
		if (q->easy != NULL)
			curl_easy_cleanup(q->easy);
		curl_slist_free_all(q->headers);
		free(q);
		return -ENOMEM;
	}
	CURL *e = q->easy;
	CURLcode c = CURLE_OK;
#define SET(opt, v) do { if (c == CURLE_OK) c = curl_easy_setopt(e, opt, v); } while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PROXY, "");
	SET(CURLOPT_NOPROXY, "*");
	SET(CURLOPT_PROTOCOLS_STR, "http");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	SET(CURLOPT_HTTPHEADER, q->headers);
	SET(CURLOPT_WRITEFUNCTION, probe_on_body);
	SET(CURLOPT_WRITEDATA, q);
	SET(CURLOPT_PRIVATE, (void *)q);
#undef SET
	if (c != CURLE_OK || curl_multi_add_handle(p->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		curl_slist_free_all(q->headers);
		free(q);
		return c != CURLE_OK ? -EINVAL : -ENOMEM;
	}
	q->next = p->reqs;
	p->reqs = q;
	return 0;
}

/* Starts a probe of endpoint idx (handed out by core_key_probe_next). A
 * probe that cannot start is told to the core as inconclusive at once, so
 * its key is not left marked as probing. */
static void probe_begin(struct probe *p, int idx, uint64_t now)
{
	struct route *r = p->route;
	struct core_endpoint_info info;
	if (core_endpoint_info(r->core, idx, now, &info) < 0)
		return;
	struct probe_req *q = calloc(1, sizeof(*q));
	int e = q != NULL ? 0 : -ENOMEM;
	if (e == 0 && (!probe_token(info.backend) || !probe_token(info.server) ||
		       !probe_token(info.key_id)))
		e = -EINVAL;
	if (e < 0) {
		free(q);
		r->probe.results[CORE_PROBE_INCONCLUSIVE]++;
		core_key_probe_result(r->core, idx, CORE_PROBE_INCONCLUSIVE, now);
		log_warn("key probe not sent", "backend=%s server=%s error=%s",
			 info.backend, info.server, strerror(-e));
		return;
	}
	q->p = p;
	q->started_ms = now;
	snprintf(q->backend, sizeof(q->backend), "%s", info.backend);
	snprintf(q->server, sizeof(q->server), "%s", info.server);
	snprintf(q->key, sizeof(q->key), "%s", info.key_id);
	q->next = p->reqs;
	p->reqs = q;
	r->probe.active++;
	e = probe_send(p, q);
	if (e < 0) {
		log_warn("key probe not sent", "backend=%s server=%s key=%s error=%s",
			 q->backend, q->server, q->key, strerror(-e));
		r->probe.results[CORE_PROBE_INCONCLUSIVE]++;
		core_key_probe_result(r->core, idx, CORE_PROBE_INCONCLUSIVE, now);
		probe_req_free(q);
	}
}

static void probe_on_tick(uv_timer_t *t)
{
	struct probe *p = container_of(t, struct probe, tick);
	uint64_t now = uv_now(p->loop);
	while (p->route->probe.active < PROBE_MAX_ACTIVE) {
		int idx = core_key_probe_next(p->route->core, now);
		if (idx < 0)
			break;
		probe_begin(p, idx, now);
	}
}

int probe_init(struct probe *p, uv_loop_t *loop, struct route *route,
	       const struct config *cfg)
{
	*p = (struct probe){ .loop = loop, .route = route, .cfg = cfg };
	if (probe_curl_users == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	probe_curl_users++;
	CURLM *m = curl_multi_init();
	if (m == NULL) {
		if (--probe_curl_users == 0)
			curl_global_cleanup();
		return -ENOMEM;
	}
	p->multi = m;
	curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, probe_on_socket);
	curl_multi_setopt(m, CURLMOPT_SOCKETDATA, p);
	curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, probe_on_timeout);
	curl_multi_setopt(m, CURLMOPT_TIMERDATA, p);
	int r = uv_timer_init(loop, &p->tick);
	if (r == 0)
		r = uv_timer_init(loop, &p->curl_timer);
	if (r < 0) {
		/* uv_timer_init cannot fail on Linux; kept for form. */
		curl_multi_cleanup(m);
		p->multi = NULL;
		if (--probe_curl_users == 0)
			curl_global_cleanup();
		return r;
	}
	p->started = true;
	return uv_timer_start(&p->tick, probe_on_tick, PROBE_TICK_MS, PROBE_TICK_MS);
}

void probe_finish(struct probe *p)
{
	if (!p->started || p->stopping)
		return;
	p->stopping = true;
	uv_timer_stop(&p->tick);
	while (p->reqs != NULL)
		probe_req_free(p->reqs); /* removing closes its sockets */
	curl_multi_cleanup(p->multi);
	p->multi = NULL;
	uv_close((uv_handle_t *)&p->tick, NULL);
	uv_close((uv_handle_t *)&p->curl_timer, NULL);
	if (--probe_curl_users == 0)
		curl_global_cleanup();
}
