/* uvsock.h - a socket handle that is a unix pipe or a TCP stream, seen as any of libuv's views of it. */
#ifndef WARMLANE_UVSOCK_H
#define WARMLANE_UVSOCK_H

#include <uv.h>

/* Listeners, connections and refused connections embed one; pipe or tcp
 * is initialised, the others alias it (libuv's handle types begin with
 * the same fields). */
union uvsock {
	uv_handle_t handle;
	uv_stream_t stream;
	uv_pipe_t pipe;
	uv_tcp_t tcp;
};

#endif
