/*
 * MCP over stdio (see include/skilld/server.h): newline-delimited JSON-RPC
 * on a pair of file descriptors, on top of the dispatcher in mcp.c.
 *
 * The reading thread handles quick messages itself (initialize, ping,
 * tools/list, notifications such as notifications/cancelled) and hands each
 * tools/call to a worker thread (at most SKILLD_MCP_STDIO_MAX_CALLS at
 * once), so a long skill never delays a ping or a cancellation. Every write
 * to out_fd is one whole line under one mutex, so messages never interleave.
 * A line longer than SKILLD_MAX_BODY_BYTES is discarded and answered with
 * -32600. Nothing but protocol goes to out_fd; logs go to stderr.
 */
#include "server/mcp.h"
#include "server/test_skills.h"
#include "skilld/server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stdio_srv {
    skd_calls *calls;
    skd_mcp *mcp;
    skd_mcp_session *sess;
    int out_fd;
    pthread_mutex_t out_mu;
    int out_broken;
    size_t max_calls;
};

static void write_all(struct stdio_srv *st, const char *p, size_t n)
{
    if (!st->out_broken && skd_write_all(st->out_fd, p, n) != 0)
        st->out_broken = 1; /* the client is gone; keep draining input */
}

/* skd_mcp_send_fn: one message, one line. */
static void send_line(void *arg, const json_t *msg)
{
    struct stdio_srv *st = arg;
    char *s = json_dumps(msg, JSON_COMPACT);
    if (!s)
        return;
    pthread_mutex_lock(&st->out_mu);
    write_all(st, s, strlen(s));
    write_all(st, "\n", 1);
    pthread_mutex_unlock(&st->out_mu);
    free(s);
}

static void send_owned(struct stdio_srv *st, json_t *msg)
{
    if (msg)
        send_line(st, msg);
    json_decref(msg);
}

struct job {
    struct stdio_srv *st;
    json_t *msg;
};

static void job_run(void *arg)
{
    struct job *j = arg;
    skd_mcp_io io = {send_line, j->st, 0};
    json_t *reply = skd__mcp_handle(j->st->sess, j->msg, &io);
    if (!io.cancelled) /* a cancelled request gets no reply (MCP) */
        send_owned(j->st, reply);
    else
        json_decref(reply);
    json_decref(j->msg);
    free(j);
}

static void handle_line(struct stdio_srv *st, const char *line, size_t len)
{
    json_t *err = NULL;
    json_t *msg = skd__rpc_parse(line, len, &err);
    if (!msg) {
        send_owned(st, err);
        return;
    }
    if (skd__rpc_classify(msg, NULL) == SKD_RPC_REQUEST &&
        strcmp(skd_json_str(msg, "method", ""), "tools/call") == 0) {
        struct job *j = malloc(sizeof(*j));
        if (j) {
            *j = (struct job){st, msg};
            if (skd__calls_spawn(st->calls, st->max_calls, job_run, j) == 0)
                return;
            free(j);
        }
        send_owned(st, skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INTERNAL_ERROR,
                                      "too many calls in flight (SKILLD_MCP_STDIO_MAX_CALLS)"));
        json_decref(msg);
        return;
    }
    skd_mcp_io io = {send_line, st, 0};
    send_owned(st, skd__mcp_handle(st->sess, msg, &io));
    json_decref(msg);
}

/* Split chunk into lines; returns 1 when stop_fd fired, 0 at EOF. */
static int read_loop(struct stdio_srv *st, int in_fd, int stop_fd, size_t max)
{
    skd_buf line;
    char chunk[65536];
    int discarding = 0, stopped = 0;
    skd_buf_init(&line, max);
    for (;;) {
        struct pollfd p[2] = {{in_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        if (poll(p, stop_fd >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (stop_fd >= 0 && p[1].revents) {
            stopped = 1;
            break;
        }
        ssize_t n = read(in_fd, chunk, sizeof(chunk));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        const char *c = chunk, *end = chunk + n;
        while (c < end) {
            const char *nl = memchr(c, '\n', (size_t)(end - c));
            size_t take = (size_t)((nl ? nl : end) - c);
            if (!discarding && skd_buf_append(&line, c, take) != 0) {
                discarding = 1;
                send_owned(st, skd__rpc_error(NULL, SKD_RPC_INVALID_REQUEST,
                                              "message larger than %zu bytes", max));
            }
            c += take;
            if (!nl)
                break;
            c++;
            size_t len = line.len;
            while (len && (line.data[len - 1] == '\r' || line.data[len - 1] == ' '))
                len--;
            if (!discarding && len > 0)
                handle_line(st, line.data, len);
            line.len = 0;
            discarding = 0;
        }
    }
    if (!stopped && !discarding && line.len > 0)
        handle_line(st, line.data, line.len); /* a last line without newline */
    skd_buf_free(&line);
    return stopped;
}

int skd_mcp_stdio_run(skd_engine *e, const char *key_id, unsigned scopes, int in_fd, int out_fd,
                      int stop_fd, skd_err *err)
{
    const skd_config *cfg = skd_engine_config(e);
    struct stdio_srv st = {.out_fd = out_fd};
    int rc = 0;
    pthread_mutex_init(&st.out_mu, NULL);
    if ((rc = skd__test_skills_register(e, NULL, err)) != 0)
        goto out;
    st.max_calls = (size_t)skd_config_int(cfg, "SKILLD_MCP_STDIO_MAX_CALLS");
    st.calls = skd__calls_new();
    st.mcp = st.calls ? skd__mcp_new(e, st.calls) : NULL;
    st.sess = st.mcp ? skd__mcp_session_new(st.mcp, key_id, scopes) : NULL;
    if (!st.sess) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    skd__mcp_session_set_sink(st.sess, send_line, &st, NULL);
    int stopped =
        read_loop(&st, in_fd, stop_fd, (size_t)skd_config_int(cfg, "SKILLD_MAX_BODY_BYTES"));
    int grace = (int)skd_config_int(cfg, "SKILLD_SHUTDOWN_GRACE_MS");
    if (!stopped) {
        /* End of input: let running calls finish and answer. A stop signal
         * during that wait cancels them. */
        while (skd__calls_drain(st.calls, 200) != 0) {
            struct pollfd p = {stop_fd, POLLIN, 0};
            if (stop_fd >= 0 && poll(&p, 1, 0) > 0)
                break;
        }
    }
    if (skd__calls_stop(st.calls, grace) != 0) {
        skd_warn("mcp stdio: calls still running after %d ms; waiting for them", grace);
        while (skd__calls_drain(st.calls, 1000) != 0) {
            /* workers use st: it must outlive them */
        }
    }
    skd__mcp_session_close(st.sess);
out:
    skd__mcp_session_unref(st.sess);
    skd__mcp_free(st.mcp);
    skd__calls_free(st.calls);
    pthread_mutex_destroy(&st.out_mu);
    return rc;
}
