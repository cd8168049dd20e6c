/* server_int.h - inside the server module: what server.c and server_listen.c share. */
#ifndef WARMLANE_SERVER_INT_H
#define WARMLANE_SERVER_INT_H

#include <uv.h>

#include "server.h"

/* A listener's connection callback: accepts into a new connection, or
 * refuses one over the cap (server.c). */
void server_on_connection(uv_stream_t *ls, int status);

/* The timeout sweep's timer callback: expires what waited too long on
 * the hello and idle queues, then re-arms (server.c). */
void server_on_tq_timer(uv_timer_t *t);

/* Calls the stop callback once a stopping server has no handle left
 * (server.c). */
void server_check_stopped(struct server *s);

/* Closes l (its socket file removed when this process made it) and
 * unlinks it from its server (server_listen.c). */
void server_listener_close(struct server_listener *l);

#endif
