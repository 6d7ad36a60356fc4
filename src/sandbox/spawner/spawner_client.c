/*
 * The server's half of the spawner (spawner.c): it forks the zygote when a
 * runner starts, and implements the provider interface (provider.h) as
 * request/reply messages to the spawner, so the runner and its supervisor
 * keep working as they did with in-process providers.
 *
 * One request is in flight at a time per spawner (the client's mutex): the
 * spawner is single-threaded anyway, and every operation on its side is
 * short by the provider contract. When the spawner dies, the call that
 * notices fails with sandbox_unavailable, a new spawner is asked from the
 * zygote, and runs of the dead one report that their sandbox was lost.
 *
 * Trust: replies come from a more privileged process; they are still
 * decoded with the bounded decoder, and only descriptors of the expected
 * roles are kept.
 */
#include "sandbox/spawner/spawner.h"
#include "sandbox/spawner/spawner_proto.h"
#include "sandbox/spawner/spawner_client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct skd__spawner_client {
    pthread_mutex_t mu;
    int ctrl;         /* to the zygote */
    int sock;         /* to the current spawner, -1 when it died */
    unsigned gen;     /* bumped with every new spawner */
    pid_t zygote;     /* reaped at the end: the zygote, or the lone spawner (one run) */
    long spawner_pid; /* the current spawner (told by the zygote) */
};

struct rstate {
    skd__spawner_client *c;
    unsigned gen;
    uint64_t handle;
    int spawned;
    char name[16];
};

/* Ask the zygote for a new spawner; caller holds c->mu. */
static int respawn_locked(skd__spawner_client *c, skd_err *err)
{
    skd__spawn_out o;
    skd__spawn_msg m;
    int rc;
    if (c->ctrl < 0)
        return skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner is gone");
    skd__spawn_out_init(&o, SKD__REQ_NEW_SPAWNER, 0);
    rc = skd__spawn_send(c->ctrl, &o, err);
    skd__spawn_out_free(&o);
    if (rc == 0)
        rc = skd__spawn_recv(c->ctrl, &m, err);
    if (rc != 0) {
        close(c->ctrl);
        c->ctrl = -1;
        return skd_err_set(err, SKD_ESANDBOX,
                           "the sandbox spawner's parent process is gone; restart skilld");
    }
    int fd = skd__spawn_take_fd(&m, SKD__FD_SOCKET);
    if (m.type != SKD__REP_OK || fd < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "%s",
                         m.message ? m.message : "the sandbox spawner could not be started");
        skd__spawn_msg_free(&m);
        if (fd >= 0)
            close(fd);
        return rc;
    }
    c->spawner_pid = (long)m.handle;
    skd__spawn_msg_free(&m);
    c->sock = fd;
    c->gen++;
    return 0;
}

/* One request, one reply. A dead spawner is replaced before the next call;
 * this call fails. */
static int rpc(skd__spawner_client *c, unsigned gen, skd__spawn_out *o, skd__spawn_msg *rep,
               skd_err *err)
{
    int rc;
    pthread_mutex_lock(&c->mu);
    if (gen && gen != c->gen) {
        pthread_mutex_unlock(&c->mu);
        return skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner died; this run was lost");
    }
    if (c->sock < 0 && (rc = respawn_locked(c, err)) != 0) {
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    rc = skd__spawn_send(c->sock, o, err);
    if (rc == 0)
        rc = skd__spawn_recv(c->sock, rep, err);
    if (rc == SKD_ESANDBOX || rc == SKD_ENOENT) {
        close(c->sock);
        c->sock = -1;
        skd_err e2 = {0};
        respawn_locked(c, &e2); /* for the next call */
        rc = skd_err_set(err, SKD_ESANDBOX,
                         "the sandbox spawner died; a new one was started (try again)");
    } else if (rc == 0 && rep->type == SKD__REP_ERROR) {
        rc = skd_err_set(err, rep->code, "%s", rep->message);
        skd__spawn_msg_free(rep);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int open_dir(const char *path, int *fd, skd_err *err)
{
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (*fd < 0)
        return skd_err_set(err, SKD_ESANDBOX, "cannot open %s for the sandbox: %s", path,
                           strerror(errno));
    return 0;
}

static int remote_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    skd__spawner_client *c = req->spawner;
    int ws = -1, sk = -1, rc;
    *state = NULL;
    if (!c)
        return skd_err_set(err, SKD_ESANDBOX, "no sandbox spawner");
    if ((req->workspace && (rc = open_dir(req->workspace, &ws, err)) != 0) ||
        (req->skill_dir && (rc = open_dir(req->skill_dir, &sk, err)) != 0)) {
        if (ws >= 0)
            close(ws);
        return rc;
    }
    skd__spawn_out o;
    skd__spawn_out_init(&o, SKD__REQ_PREPARE, 0);
    skd__spawn_out_str(&o, SKD__T_PROVIDER, req->provider);
    skd__spawn_out_str(&o, SKD__T_ID, req->id);
    skd__spawn_out_str(&o, SKD__T_IMAGE, req->image);
    skd__spawn_out_str(&o, SKD__T_CWD, req->cwd);
    if (req->ca_pem)
        skd__spawn_out_str(&o, SKD__T_CA_PEM, req->ca_pem);
    if (req->live)
        skd__spawn_out_str(&o, SKD__T_LIVE, req->live);
    for (char *const *a = req->argv; *a; a++)
        skd__spawn_out_str(&o, SKD__T_ARG, *a);
    for (char *const *e = req->envp; *e; e++)
        skd__spawn_out_str(&o, SKD__T_ENV, *e);
    skd__spawn_out_config(&o, req->cfg);
    if (ws >= 0)
        skd__spawn_out_fd(&o, ws, SKD__FD_WORKSPACE);
    if (sk >= 0)
        skd__spawn_out_fd(&o, sk, SKD__FD_SKILL);
    skd__spawn_msg rep;
    rc = rpc(c, 0, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (ws >= 0)
        close(ws);
    if (sk >= 0)
        close(sk);
    if (rc)
        return rc;
    struct rstate *s = calloc(1, sizeof(*s));
    if (!s || rep.type != SKD__REP_OK || !rep.handle) {
        free(s);
        skd__spawn_msg_free(&rep);
        return skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner answered out of turn");
    }
    s->c = c;
    pthread_mutex_lock(&c->mu);
    s->gen = c->gen;
    pthread_mutex_unlock(&c->mu);
    s->handle = rep.handle;
    skd_strlcpy(s->name, rep.provider ? rep.provider : req->provider, sizeof(s->name));
    skd__spawn_msg_free(&rep);
    *state = s;
    return 0;
}

static int remote_spawn(void *state, skd__spawned *out, skd_err *err)
{
    struct rstate *s = state;
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd__spawn_out_init(&o, SKD__REQ_SPAWN, s->handle);
    int rc = rpc(s->c, s->gen, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (rc)
        return rc;
    s->spawned = 1;
    out->pidfd = skd__spawn_take_fd(&rep, SKD__FD_PIDFD);
    out->stdin_fd = skd__spawn_take_fd(&rep, SKD__FD_STDIN);
    out->stdout_fd = skd__spawn_take_fd(&rep, SKD__FD_STDOUT);
    out->stderr_fd = skd__spawn_take_fd(&rep, SKD__FD_STDERR);
    out->status_fd = skd__spawn_take_fd(&rep, SKD__FD_STATUS);
    out->egress_fd = skd__spawn_take_fd(&rep, SKD__FD_EGRESS);
    skd__spawn_msg_free(&rep);
    if (rep.type != SKD__REP_SPAWNED || out->pidfd < 0 || out->stdout_fd < 0 ||
        out->stderr_fd < 0) {
        int *fds[] = {&out->pidfd,     &out->stdin_fd,  &out->stdout_fd,
                      &out->stderr_fd, &out->status_fd, &out->egress_fd};
        for (size_t i = 0; i < 6; i++)
            if (*fds[i] >= 0) {
                close(*fds[i]);
                *fds[i] = -1;
            }
        return skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner answered out of turn");
    }
    /* Non-blocking in this process too (the flags travel with the file). */
    int nb[] = {out->stdin_fd, out->stdout_fd, out->stderr_fd, out->status_fd};
    for (size_t i = 0; i < 4; i++)
        if (nb[i] >= 0)
            fcntl(nb[i], F_SETFL, O_NONBLOCK);
    return 0;
}

static void remote_kill(void *state)
{
    struct rstate *s = state;
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd_err err = {0};
    skd__spawn_out_init(&o, SKD__REQ_KILL, s->handle);
    if (rpc(s->c, s->gen, &o, &rep, &err) == 0)
        skd__spawn_msg_free(&rep);
    skd__spawn_out_free(&o);
}

static void remote_cleanup(void *state, skd__outcome *out)
{
    struct rstate *s = state;
    if (!s)
        return;
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd_err err = {0};
    skd__spawn_out_init(&o, SKD__REQ_CLEANUP, s->handle);
    skd__spawn_out_i32(&o, SKD__T_KILLED, out ? out->killed : 1);
    int rc = rpc(s->c, s->gen, &o, &rep, &err);
    skd__spawn_out_free(&o);
    if (out && rc == 0 && rep.type == SKD__REP_OUTCOME) {
        /* The spawner reaped the process: its status is the true one. */
        out->exited = rep.outcome[0] != 0;
        out->exit_code = rep.outcome[1];
        out->signal = rep.outcome[2];
        out->oom_killed = rep.outcome[3] != 0;
        if (rep.message)
            skd_strlcpy(out->setup_error, rep.message, sizeof(out->setup_error));
        out->ws_checked = rep.has_ws;
        out->ws_error = rep.ws_code;
        out->ws_bytes = rep.ws_bytes;
        if (rep.has_usage) { /* checked >= 0 by the decoder */
            out->cpu_us = rep.usage[0];
            out->mem_peak = rep.usage[1];
            out->ws_written = (uint64_t)rep.usage[2];
        }
        if (rep.ws_message)
            skd_strlcpy(out->ws_message, rep.ws_message, sizeof(out->ws_message));
    } else if (out && rc != 0 && s->spawned) {
        out->exited = 0;
        out->signal = SIGKILL;
        skd_strlcpy(out->setup_error, skd_err_msg(&err), sizeof(out->setup_error));
    }
    if (rc == 0)
        skd__spawn_msg_free(&rep);
    free(s);
}

static int live_create(skd__spawner_client *c, const char *id, const char *image,
                       const skd_sandbox_config *cfg, const char *workspace, const char *ca_pem,
                       int restore, unsigned *gen, int *egress_fd, skd_err *err)
{
    int ws = -1, rc;
    *egress_fd = -1;
    if (!c)
        return skd_err_set(err, SKD_ESANDBOX, "no sandbox spawner");
    if (workspace && (rc = open_dir(workspace, &ws, err)) != 0)
        return rc;
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd__spawn_out_init(&o, SKD__REQ_LIVE_CREATE, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, id);
    skd__spawn_out_str(&o, SKD__T_IMAGE, image);
    skd__spawn_out_config(&o, cfg);
    if (ca_pem)
        skd__spawn_out_str(&o, SKD__T_CA_PEM, ca_pem);
    if (restore)
        skd__spawn_out_snap_args(&o, 1, 0);
    if (ws >= 0)
        skd__spawn_out_fd(&o, ws, SKD__FD_WORKSPACE);
    pthread_mutex_lock(&c->mu);
    *gen = c->gen;
    pthread_mutex_unlock(&c->mu);
    rc = rpc(c, 0, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (ws >= 0)
        close(ws);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->mu);
    /* A spawner started by this call (the last one had died) made it. */
    *gen = c->gen;
    pthread_mutex_unlock(&c->mu);
    rc = rep.type == SKD__REP_OK
             ? 0
             : skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner answered out of turn");
    if (rc == 0)
        *egress_fd = skd__spawn_take_fd(&rep, SKD__FD_EGRESS);
    skd__spawn_msg_free(&rep); /* closes any descriptor not taken */
    return rc;
}

int skd__spawner_live_create(skd__spawner_client *c, const char *id, const char *image,
                             const skd_sandbox_config *cfg, const char *workspace,
                             const char *ca_pem, int restore, unsigned *gen, int *egress_fd,
                             skd_err *err)
{
    return live_create(c, id, image, cfg, workspace, ca_pem, restore, gen, egress_fd, err);
}

int skd__spawner_live_save(skd__spawner_client *c, const char *id, unsigned gen, const char *dst,
                           int flags, int64_t max, int64_t *bytes, skd_err *err)
{
    *bytes = 0;
    if (!c)
        return skd_err_set(err, SKD_ESANDBOX, "no sandbox spawner");
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd__spawn_out_init(&o, SKD__REQ_LIVE_SAVE, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, id);
    skd__spawn_out_str(&o, SKD__T_SNAP, dst);
    skd__spawn_out_snap_args(&o, flags, max);
    int rc = rpc(c, gen, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (rc)
        return rc;
    if (rep.type != SKD__REP_OK || !rep.has_snap_args)
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner answered out of turn");
    else
        *bytes = rep.snap_bytes;
    skd__spawn_msg_free(&rep);
    return rc;
}

int skd__spawner_live_commit(skd__spawner_client *c, const char *id, unsigned gen,
                             skd__outcome *out, skd_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!c)
        return skd_err_set(err, SKD_ESANDBOX, "no sandbox spawner");
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd__spawn_out_init(&o, SKD__REQ_LIVE_COMMIT, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, id);
    int rc = rpc(c, gen, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (rc)
        return rc;
    if (rep.type != SKD__REP_OK) {
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner answered out of turn");
    } else if (rep.has_ws) {
        out->ws_checked = 1;
        out->ws_error = rep.ws_code;
        out->ws_bytes = rep.ws_bytes;
        if (rep.has_usage)
            out->ws_written = (uint64_t)rep.usage[2];
        if (rep.ws_message)
            skd_strlcpy(out->ws_message, rep.ws_message, sizeof(out->ws_message));
    }
    skd__spawn_msg_free(&rep);
    return rc;
}

int skd__spawner_live_delete(skd__spawner_client *c, const char *id, unsigned gen, skd_err *err)
{
    if (!c)
        return skd_err_set(err, SKD_ESANDBOX, "no sandbox spawner");
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd__spawn_out_init(&o, SKD__REQ_LIVE_DELETE, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, id);
    int rc = rpc(c, gen, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (rc == 0)
        skd__spawn_msg_free(&rep);
    return rc;
}

int skd__spawner_snap_list(skd__spawner_client *c, char **ids, int *others, char *other, size_t cap,
                           skd_err *err)
{
    *ids = NULL;
    *others = 0;
    if (cap)
        other[0] = '\0';
    if (!c)
        return skd_err_set(err, SKD_ESANDBOX, "no sandbox spawner");
    skd__spawn_out o;
    skd__spawn_msg rep;
    skd__spawn_out_init(&o, SKD__REQ_SNAP_LIST, 0);
    int rc = rpc(c, 0, &o, &rep, err);
    skd__spawn_out_free(&o);
    if (rc)
        return rc;
    if (rep.type != SKD__REP_OK || !rep.snap || !rep.has_snap_args || rep.snap_bytes > INT_MAX)
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox spawner answered out of turn");
    else if (!(*ids = strdup(rep.snap)))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    else {
        *others = (int)rep.snap_bytes;
        if (cap)
            snprintf(other, cap, "%s", rep.message ? rep.message : "");
    }
    skd__spawn_msg_free(&rep);
    return rc;
}

unsigned skd__spawner_client_gen(skd__spawner_client *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    unsigned g = c->gen;
    pthread_mutex_unlock(&c->mu);
    return g;
}

static const char *remote_runtime(void *state)
{
    struct rstate *s = state;
    return s ? s->name : "native";
}

static int remote_detect(skd_err *err)
{
    (void)err;
    return 0;
}

const skd__provider skd__provider_remote = {
    .name = "remote",
    .detect = remote_detect,
    .prepare = remote_prepare,
    .spawn = remote_spawn,
    .kill = remote_kill,
    .cleanup = remote_cleanup,
    .runtime = remote_runtime,
};

/* ---- start and stop ---- */

int skd__spawner_client_new(const skd__spawner_conf *conf, skd__spawner_client **out, skd_err *err)
{
    *out = NULL;
    skd__spawner_client *c = calloc(1, sizeof(*c));
    if (!c)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->sock = c->ctrl = -1;
    if (conf->warm == 1 && strcmp(conf->runtime, "native") == 0) {
        /* One run (skilld exec): the spawner alone, reaped as the zygote
         * would be; no respawn (c->ctrl stays -1). */
        if (skd__spawner_fork(conf, &c->sock, &c->zygote) != 0) {
            int e = errno;
            pthread_mutex_destroy(&c->mu);
            free(c);
            return skd_err_set(err, SKD_ESANDBOX, "cannot start the sandbox spawner: %s",
                               strerror(e));
        }
        c->spawner_pid = (long)c->zygote;
        c->gen = 1;
        *out = c;
        return 0;
    }
    if (skd__zygote_fork(conf, &c->ctrl, &c->zygote) != 0) {
        int e = errno;
        pthread_mutex_destroy(&c->mu);
        free(c);
        return skd_err_set(err, SKD_ESANDBOX, "cannot start the sandbox spawner: %s", strerror(e));
    }
    pthread_mutex_lock(&c->mu);
    int rc = respawn_locked(c, err);
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        skd__spawner_client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

long skd__spawner_client_pid(skd__spawner_client *c, int zygote)
{
    if (!c)
        return -1;
    pthread_mutex_lock(&c->mu);
    long pid = zygote ? (long)c->zygote : c->sock >= 0 ? c->spawner_pid : -1;
    pthread_mutex_unlock(&c->mu);
    return pid;
}

void skd__spawner_client_close(skd__spawner_client *c)
{
    if (!c)
        return;
    /* Closing both sockets ends the spawner (it kills and cleans up its
     * runs first) and the zygote. */
    pthread_mutex_lock(&c->mu);
    if (c->sock >= 0)
        close(c->sock);
    if (c->ctrl >= 0)
        close(c->ctrl);
    c->sock = c->ctrl = -1;
    pthread_mutex_unlock(&c->mu);
}

void skd__spawner_client_reap(skd__spawner_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    pid_t z = c->zygote;
    c->zygote = 0;
    pthread_mutex_unlock(&c->mu);
    if (z <= 0)
        return;
    /* Bounded: the zygote waits for its spawner, which kills and cleans
     * up its runs; past 5 s it is killed (and the spawner with it). */
    int pfd = (int)syscall(SYS_pidfd_open, z, 0);
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    if (pfd < 0 || poll(&p, 1, 5000) != 1)
        kill(z, SIGKILL);
    if (pfd >= 0)
        close(pfd);
    waitpid(z, NULL, 0);
}

void skd__spawner_client_free(skd__spawner_client *c)
{
    if (!c)
        return;
    skd__spawner_client_close(c); /* then reap the zygote */
    skd__spawner_client_reap(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
