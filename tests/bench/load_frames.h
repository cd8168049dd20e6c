/* load_frames.h - bench-spop-load's frames: the route and feedback NOTIFYs it sends, and the reading of the route ACKs it gets. */
#ifndef WARMLANE_LOAD_FRAMES_H
#define WARMLANE_LOAD_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "spop.h"

#define LFRAME_NAME 64 /* bound of an ACK variable (NUL-less) + 1 */

/* The most bytes lframe_route or lframe_feedback writes (a feedback of
 * the longest names: 2 x 63 + 1 + 63 + 63 bytes of strings and 46 of
 * id, under 420 with its names and header). */
#define LFRAME_MAX 512u

/* A feedback to send: what the route ACK said. */
struct lframe_fb {
	uint32_t key;
	char server[2 * LFRAME_NAME + 2]; /* backend/server */
	char akey[LFRAME_NAME];
	char keyname[LFRAME_NAME];
	uint8_t server_len, akey_len, keyname_len;
};

/* The route NOTIFY for key k on stream sid (frame id 1, FIN) with the 14
 * arguments of haproxy/warmlane.spoe.conf, as HAProxy sends them: written
 * at out, which must have LFRAME_MAX bytes. Returns the frame's size. The
 * bytes are those of lframe_route_ref (tests/bench/test_load_frames.c
 * checks it), from constant pieces laid once and the varying values
 * patched in, without a spop_writer, snprintf or a size pass. */
size_t lframe_route(uint8_t *out, uint64_t sid, uint32_t k);

/* The feedback NOTIFY (10 arguments) of fb on stream sid, the same way;
 * the names of fb shorter than their arrays. */
size_t lframe_feedback(uint8_t *out, uint64_t sid, const struct lframe_fb *fb);

/* The reference builders: the same frames through the generic codec
 * (spop_writer, spop_put_kv) into out[0..cap). Return the frame's size,
 * or SPOP_NEED_MORE when it does not fit. */
ptrdiff_t lframe_route_ref(uint8_t *out, size_t cap, uint64_t sid,
			   uint32_t k);
ptrdiff_t lframe_feedback_ref(uint8_t *out, size_t cap, uint64_t sid,
			      const struct lframe_fb *fb);

/* Reads a route ACK's payload p[0..len) into fb's server (backend/server,
 * "llm/s1" when the ACK set no backend or no server: HAProxy's own pick),
 * akey and keyname; fb->key is left alone. The set-vars of a STRING
 * value with one-byte lengths, the shape warmlane and bench-const-agent
 * write, are matched by their bytes; at the first action of any other
 * shape the whole payload is read again by lframe_ack_ref. Returns 0, or
 * -1 for a malformed payload, or a backend, server, key or akey that is
 * not a STRING or has LFRAME_NAME bytes or more (fb then undefined). */
int lframe_ack(const uint8_t *p, size_t len, struct lframe_fb *fb);

/* The same through spop_action_next for every action. */
int lframe_ack_ref(const uint8_t *p, size_t len, struct lframe_fb *fb);

#endif
