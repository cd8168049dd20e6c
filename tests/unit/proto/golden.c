/* golden.c - SPOP test vectors (from docs/spop.md) and the guard-page helper. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "golden.h"

#define G(n, s) \
	const struct golden n = { #n, (const uint8_t *)(s), sizeof(s) - 1 }

/* Captured from HAProxy 2.6.12 (docs/spop.md); the uuid is any 36 bytes. */
G(golden_hello_26,
  "\x00\x00\x00\x81" "\x01" "\x00\x00\x00\x01" "\x00" "\x00"
  "\x12" "supported-versions" "\x08\x03" "2.0"
  "\x0e" "max-frame-size" "\x03\xfc\xf0\x06"
  "\x0c" "capabilities" "\x08\x10" "pipelining,async"
  "\x09" "engine-id" "\x08\x24" "3f2504e0-4f89-41d3-9a0c-0305e82c3301");

G(golden_hello_hc,
  "\x00\x00\x00\x4e" "\x01" "\x00\x00\x00\x01" "\x00" "\x00"
  "\x12" "supported-versions" "\x08\x03" "2.0"
  "\x0e" "max-frame-size" "\x03\xfc\xf0\x06"
  "\x0c" "capabilities" "\x08\x00"
  "\x0b" "healthcheck" "\x11");

G(golden_agent_hello,
  "\x00\x00\x00\x36" "\x65" "\x00\x00\x00\x01" "\x00" "\x00"
  "\x07" "version" "\x08\x03" "2.0"
  "\x0e" "max-frame-size" "\x03\xfc\xf0\x06"
  "\x0c" "capabilities" "\x08\x00");

G(golden_ack,
  "\x00\x00\x00\x15" "\x67" "\x00\x00\x00\x01" "\xf3\xbc\x78" "\x01"
  "\x01\x03\x02" "\x07" "allowed" "\x11");

G(golden_disconnect,
  "\x00\x00\x00\x31" "\x02" "\x00\x00\x00\x01" "\x00" "\x00"
  "\x0b" "status-code" "\x03\x02"
  "\x07" "message" "\x08\x12" "a timeout occurred");

/* route: session=STRING "abc", prefix1=INT64 -5, ""=NULL, src=IPV4
 * 10.0.0.1, caller=UINT64 2^64-1; feedback: ""=BOOL true, status=INT64 503;
 * empty: no argument. Length 0x68. */
G(golden_notify,
  "\x00\x00\x00\x68" "\x03" "\x00\x00\x00\x01" "\x00" "\x01"
  "\x05" "route" "\x05"
  "\x07" "session" "\x08\x03" "abc"
  "\x07" "prefix1" "\x04\xfb\xf0\xfe\xfe\xfe\xfe\xfe\xfe\xfe\x0e"
  "\x00" "\x00"
  "\x03" "src" "\x06\x0a\x00\x00\x01"
  "\x06" "caller" "\x05\xff\xf0\xfe\xfe\xfe\xfe\xfe\xfe\xfe\x0e"
  "\x08" "feedback" "\x02"
  "\x00" "\x11"
  "\x06" "status" "\x04\xf7\x10"
  "\x05" "empty" "\x00");

const struct golden *const golden_frames[] = {
	&golden_hello_26, &golden_hello_hc, &golden_agent_hello,
	&golden_ack, &golden_disconnect, &golden_notify,
};
const size_t golden_frames_count =
	sizeof(golden_frames) / sizeof(golden_frames[0]);

static uint8_t *region;
static size_t page;

static void guard_init(void)
{
	/* /dev/zero rather than MAP_ANONYMOUS, which POSIX 2008 lacks. */
	int fd = open("/dev/zero", O_RDWR);
	void *m;

	if (fd < 0)
		abort();
	page = (size_t)sysconf(_SC_PAGESIZE);
	m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		abort();
	region = m;
	if (mprotect(region + page, page, PROT_NONE) != 0)
		abort();
}

const uint8_t *guard_place(const void *p, size_t len)
{
	if (!region)
		guard_init();
	if (len > page)
		abort();
	if (len)
		memcpy(region + page - len, p, len);
	return region + page - len;
}

uint8_t *guard_buf(size_t len)
{
	if (!region)
		guard_init();
	if (len > page)
		abort();
	memset(region, 0xaa, page);
	return region + page - len;
}
