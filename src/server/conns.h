/*
 * The connection table of the HTTP server: every connection libmicrohttpd
 * holds, what it is doing, and since when. It enforces what MHD's own
 * options do not:
 *   - a cap (SKILLD_MAX_CONNECTIONS): when a new connection would pass it,
 *     the connection that has been idle longest (waiting for a request's
 *     headers) is closed; with none idle, the newcomer is;
 *   - a header timeout (a request's headers must arrive within
 *     SKILLD_HEADER_TIMEOUT_S of the connection's start or of its previous
 *     reply, however slowly they trickle) and a body timeout
 *     (SKILLD_BODY_TIMEOUT_S once the headers are in);
 *   - hang-up detection for suspended connections, which MHD does not
 *     watch: a client that goes away while its call runs on a worker fires
 *     the request's cancel token (its sandbox is killed), and a suspended
 *     SSE stream ends.
 * One watcher thread does the timing and the hang-up polling (epoll with
 * EPOLLRDHUP on the sockets of suspended connections only). Connections
 * are closed by shutdown(2) on their socket, never close(2), so MHD stays
 * the owner of every descriptor and ends the connection itself.
 */
#ifndef SKILLD_SERVER_CONNS_H
#define SKILLD_SERVER_CONNS_H

#include <microhttpd.h>
#include <stdint.h>

#include "skilld/skilld.h"

typedef struct skd_conns skd_conns;
typedef struct skd_conn skd_conn;
struct skd_sse;

typedef struct skd_conns_opts {
    size_t cap;           /* connections held at once */
    int64_t header_ms;    /* headers must arrive within this */
    int64_t body_ms;      /* a body must arrive within this */
    int64_t keepalive_ms; /* a suspended SSE stream is woken this often */
} skd_conns_opts;

/* New table with its watcher thread. 0 or SKD_ENOMEM/SKD_EINTERNAL. */
int skd__conns_new(const skd_conns_opts *o, skd_conns **out, skd_err *err);
/* Stops the watcher and frees; MHD has stopped by then. NULL ok. */
void skd__conns_free(skd_conns *t);

/* MHD_OPTION_NOTIFY_CONNECTION callback (cls is the table). */
void skd__conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);

/* The entry of an MHD connection (NULL if the table does not know it). */
skd_conn *skd__conns_of(struct MHD_Connection *c);

/* A request's headers are in: the connection is no longer idle, and its
 * body timer starts. cancel (borrowed until skd__conn_request_end) is fired
 * if the client hangs up while the connection is suspended. */
void skd__conn_request_begin(skd_conns *t, skd_conn *c, skd_cancel *cancel);
/* The body is in (or there is none): no timer runs until the reply ends. */
void skd__conn_request_read(skd_conns *t, skd_conn *c);
/* The request's reply streams sse (a reference is taken): the watcher wakes
 * the stream while it is suspended (keep-alive, stop, hang-up). */
void skd__conn_request_stream(skd_conns *t, skd_conn *c, struct skd_sse *sse);
/* The request ended: the connection is idle again. Waits for a cancel
 * token being fired by the watcher, so the caller may free it after. */
void skd__conn_request_end(skd_conns *t, skd_conn *c);

/* Suspend the MHD connection (from its access handler or content reader)
 * and watch its socket for a hang-up. */
void skd__conn_suspend(skd_conns *t, skd_conn *c);
/* Stop watching and resume the MHD connection (any thread). */
void skd__conn_resume(skd_conns *t, skd_conn *c);

/* 1 once the client of c hung up while it was suspended. */
int skd__conn_hung_up(skd_conns *t, skd_conn *c);

/* The server is stopping: suspended streams are woken and end. Then wait
 * up to wait_ms until no connection is suspended (MHD must not be stopped
 * with one suspended). Returns the number still suspended. */
size_t skd__conns_quiesce(skd_conns *t, int wait_ms);

/* Connections held now. */
size_t skd__conns_count(skd_conns *t);

#endif
