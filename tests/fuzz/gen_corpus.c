/* gen_corpus.c - writes the seed corpora of the fuzz harnesses from the
 * golden frames of docs/spop.md and the codec's own encoder.
 * Usage: gen_corpus DIR (DIR/frame, DIR/hello, DIR/notify must exist). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "spop.h"

static const char *outdir;
static int failed;

static void put(const char *harness, const char *name, const void *p,
		size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, harness, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		failed = 1;
	}
}

/* A HAPROXY-HELLO payload from up to four KV pairs (NULL key: none). */
static void hello(const char *name, const char *k1, struct spop_data v1,
		  const char *k2, struct spop_data v2, const char *k3,
		  struct spop_data v3, const char *k4, struct spop_data v4)
{
	uint8_t buf[512];
	struct spop_writer w;

	spop_writer_init(&w, buf, sizeof(buf));
	if (k1)
		spop_put_kv(&w, k1, &v1);
	if (k2)
		spop_put_kv(&w, k2, &v2);
	if (k3)
		spop_put_kv(&w, k3, &v3);
	if (k4)
		spop_put_kv(&w, k4, &v4);
	put("hello", name, buf, w.len);
}

#define S(s) spop_data_string(s, strlen(s))
#define U(v) spop_data_uint32(v)

static void hello_seeds(void)
{
	const struct spop_data n = spop_data_null();
	const char *vk = "supported-versions", *mk = "max-frame-size",
		   *ck = "capabilities";

	put("hello", "golden-hello-26", golden_hello_26.bytes + 11,
	    golden_hello_26.len - 11);
	put("hello", "golden-hello-hc", golden_hello_hc.bytes + 11,
	    golden_hello_hc.len - 11);
	hello("versions-list", vk, S("2.0, 1.5"), mk, U(16380), ck,
	      S(" pipelining , async,fragmentation"), NULL, n);
	hello("versions-old", vk, S("1.0"), mk, U(16380), ck, S(""), NULL, n);
	hello("versions-2.00", vk, S("2.00"), mk, U(16380), ck, S(""), NULL, n);
	hello("mfs-255", vk, S("2.0"), mk, U(255), ck, S("pipelining"), NULL,
	      n);
	hello("mfs-int64", vk, S("2.0"), mk, spop_data_int64(65535), ck,
	      S("async"), NULL, n);
	hello("mfs-string", vk, S("2.0"), mk, S("16380"), ck, S(""), NULL, n);
	hello("no-versions", mk, U(16380), ck, S(""), NULL, n, NULL, n);
	hello("no-mfs", vk, S("2.0"), ck, S(""), NULL, n, NULL, n);
	hello("key-max", vk, S("2.0"), "max", U(16380), ck, S(""), NULL, n);
	hello("no-caps", vk, S("2.0"), mk, U(16380), NULL, n, NULL, n);
	hello("caps-prefix", vk, S("2.0"), mk, U(16380), ck,
	      S("pipeliningX,asyncY"), "engine-id", S("e"));
	hello("duplicate", vk, S("1.0"), vk, S("2.0"), mk, U(300), ck, S(""));
	hello("healthcheck-false", vk, S("2.0"), mk, U(16380), ck, S(""),
	      "healthcheck", spop_data_bool(false));
}

static void notify_seeds(void)
{
	static const uint8_t route[] = "\x05" "route" "\x03"
		"\x00" "\x00"
		"\x02" "id" "\x09\x04" "\x01\x02\x03\x04"
		"\x03" "src" "\x07" "\x20\x01\x0d\xb8\x00\x00\x00\x00"
		"\x00\x00\x00\x00\x00\x00\x00\x01";
	static const uint8_t ints[] = "\x01" "m" "\x04"
		"\x01" "a" "\x02\xfb\xf0\xfe\xfe\xfe\xfe\xfe\xfe\xfe\x0e"
		"\x01" "b" "\x03\xff\xf0\xfe\xfe\x7e"
		"\x01" "c" "\x04\xf7\x10"
		"\x01" "d" "\x31";

	put("notify", "golden-notify", golden_notify.bytes + 11,
	    golden_notify.len - 11);
	put("notify", "golden-ack", golden_ack.bytes + 11, golden_ack.len - 11);
	put("notify", "golden-disconnect", golden_disconnect.bytes + 11,
	    golden_disconnect.len - 11);
	put("notify", "route-ipv6-binary", route, sizeof(route) - 1);
	put("notify", "integers", ints, sizeof(ints) - 1);
	put("notify", "missing-arg", "\x01m\x02\x01" "a\x00", 6);
	put("notify", "empty-message", "\x00\x00", 2);

	/* the size argument: a body's bytes, then the widest unsigned one */
	uint8_t buf[128];
	struct spop_writer w;
	struct spop_data sess = spop_data_string("s1", 2);
	struct spop_data big = { .type = SPOP_DATA_UINT64, .u.u64 = UINT64_MAX };
	struct spop_data size = spop_data_int64(81920);
	uint8_t two = 2;
	spop_writer_init(&w, buf, sizeof(buf));
	spop_put_str(&w, "route", 5);
	spop_put_bytes(&w, &two, 1);
	spop_put_kv(&w, "session", &sess);
	spop_put_kv(&w, "size", &size);
	spop_put_str(&w, "route", 5);
	spop_put_bytes(&w, &two, 1);
	spop_put_kv(&w, "size", &big);
	spop_put_kv(&w, "session", &sess);
	put("notify", "route-size", buf, w.len);
}

static void frame_seeds(void)
{
	uint8_t buf[1024];
	struct spop_writer w;
	struct spop_data t = spop_data_bool(true);
	struct spop_data s = spop_data_string("gpu-a", 5);
	size_t i, total = 0;
	ptrdiff_t n;

	for (i = 0; i < golden_frames_count; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s", golden_frames[i]->name);
		for (char *c = name; *c; c++)
			if (*c == '_')
				*c = '-';
		put("frame", name, golden_frames[i]->bytes,
		    golden_frames[i]->len);
		memcpy(buf + total, golden_frames[i]->bytes,
		       golden_frames[i]->len);
		total += golden_frames[i]->len;
	}
	put("frame", "golden-stream", buf, total);

	n = spop_disconnect_encode(buf, sizeof(buf), SPOP_ERR_TIMEOUT, NULL);
	put("frame", "agent-disconnect", buf, (size_t)n);
	spop_ack_begin(&w, buf, sizeof(buf), UINT64_MAX, 1);
	spop_ack_set_var(&w, SPOP_SCOPE_TXN, "backend", 7, &s);
	spop_ack_unset_var(&w, SPOP_SCOPE_TXN, "reason", 6);
	spop_ack_set_var(&w, SPOP_SCOPE_TXN, "ack", 3, &t);
	n = spop_ack_finish(&w);
	put("frame", "ack-actions", buf, (size_t)n);
	n = spop_agent_hello_encode(buf, sizeof(buf), 16380, true);
	put("frame", "agent-hello-pipelining", buf, (size_t)n);

	put("frame", "too-big-tls", "\x16\x03\x01\x06\x00\x01\xfc\x03\x03", 9);
	put("frame", "zero-length", "\x00\x00\x00\x00\x03", 5);
	put("frame", "fragment-fin-clear",
	    "\x00\x00\x00\x07\x03\x00\x00\x00\x00\x05\x01", 11);
	put("frame", "fragment-unset",
	    "\x00\x00\x00\x07\x00\x00\x00\x00\x01\x05\x01", 11);
	put("frame", "unknown-type",
	    "\x00\x00\x00\x07\x04\x00\x00\x00\x01\x00\x00", 11);
	put("frame", "short-header", "\x00\x00\x00\x06\x03\x00\x00\x00\x01\x00",
	    10);
	put("frame", "abort", "\x00\x00\x00\x07\x03\x00\x00\x00\x03\x05\x01",
	    11);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	frame_seeds();
	hello_seeds();
	notify_seeds();
	return failed;
}
