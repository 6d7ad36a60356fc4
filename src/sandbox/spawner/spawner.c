/*
 * The spawner: the one process that makes sandboxes (DESIGN.md, "Processes
 * and privileges"). It keeps the privileges skilld was started with (root,
 * or the user's in rootless mode) while the server that talks to clients
 * drops them. It has one thread, so the clone3 in the native provider never
 * meets a libc lock held by another thread (STYLE.md 14).
 *
 * Two processes run per server:
 *   the zygote   (zygote.c) forked by the server at start-up, before any
 *                thread and before the server drops root. It only forks
 *                spawners: the first at once, and a new one whenever the
 *                server asks (REQ_NEW_SPAWNER) because the last one died.
 *   the spawner  (this file) forked by the zygote. It serves prepare / spawn / kill /
 *                cleanup of every provider (native; docker and podman
 *                through their CLIs) over its SOCK_SEQPACKET socket, reaps
 *                its children, and when the server goes away (EOF) kills
 *                and cleans up every sandbox before it exits.
 * Both die with their parent (PR_SET_PDEATHSIG plus a check of the parent
 * pid); every native sandbox dies with the spawner (its own
 * parent-death signal; it is the init of its pid namespace, so the whole
 * namespace goes), and the next spawner removes the cgroups of a dead one.
 *
 * Trust: every message comes from the unprivileged server and may be
 * hostile. spawner_proto.c checks its form; this file checks its meaning:
 * the provider name, the run id, the image (resolved here against the
 * operator's allow-list and DATA_DIR, never a path from the server), the
 * working directory, argv and env, every limit against the operator's
 * ceilings, and the workspace and skill folder, which arrive as directory
 * descriptors and are used as such.
 */
#include "sandbox/container/container_live.h"
#include "sandbox/native/native.h"
#include "sandbox/native/native_snap.h"
#include "sandbox/spawner/spawner.h"
#include "sandbox/spawner/spawner_proto.h"
#include "sandbox/ws_quota.h"
#include "skilld/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* How long cleanup waits for a killed process that has not exited yet. */
#define CLEANUP_WAIT_MS 5000
#define MAX_RUNS 65536

struct srun {
    struct srun *next;
    uint64_t handle;
    const skd__provider *prov;
    void *pstate;
    skd__sandbox_req req;
    skd_sandbox_config cfg;
    char id[SKD_UUID_LEN + 1];
    char live[SKD_UUID_LEN + 1]; /* an exec into this live sandbox, or "" */
    char *image, *rootfs, *cwd, *ws_path, *skill_path, *ca_pem;
    char **argv, **envp;
    int ws_fd, skill_fd;
    int pidfd; /* our copy, watched for the exit */
    int spawned, reaped;
    siginfo_t si;
};

/* Runs whose teardown may wait for an idle moment (idle_step), and how
 * long the owed work waits for one before it is done between events. */
#define IDLE_BACKLOG 4
#define IDLE_MAX_MS 5

static struct {
    const skd__spawner_conf *conf;
    int sock, epfd;
    struct srun *runs;
    size_t nruns;
    uint64_t next_handle;
    int64_t owed_since; /* ms: deferred teardown, pre-made sandboxes owed (idle_step); 0: none */
} S;

/* ---- helpers ---- */

static void free_vec(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static char **copy_vec(char **src, size_t n)
{
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = strdup(src[i]))) {
            free_vec(v);
            return NULL;
        }
    return v;
}

static void srun_free(struct srun *r)
{
    if (!r)
        return;
    if (r->pidfd >= 0) {
        epoll_ctl(S.epfd, EPOLL_CTL_DEL, r->pidfd, NULL);
        close(r->pidfd);
    }
    if (r->ws_fd >= 0)
        close(r->ws_fd);
    if (r->skill_fd >= 0)
        close(r->skill_fd);
    free(r->image);
    free(r->rootfs);
    free(r->cwd);
    free(r->ca_pem);
    free(r->ws_path);
    free(r->skill_path);
    free_vec(r->argv);
    free_vec(r->envp);
    free(r);
}

static struct srun *find(uint64_t h)
{
    for (struct srun *r = S.runs; r; r = r->next)
        if (r->handle == h)
            return r;
    return NULL;
}

static void unlink_run(struct srun *run)
{
    for (struct srun **pp = &S.runs; *pp; pp = &(*pp)->next)
        if (*pp == run) {
            *pp = run->next;
            S.nruns--;
            return;
        }
}

static int reply_error(uint64_t h, int code, const char *msg)
{
    skd__spawn_out o;
    skd_err e = {0};
    skd__spawn_out_init(&o, SKD__REP_ERROR, h);
    skd__spawn_out_i32(&o, SKD__T_CODE, code < 0 ? code : SKD_ESANDBOX);
    skd__spawn_out_str(&o, SKD__T_MESSAGE, msg && *msg ? msg : "sandbox spawner error");
    int rc = skd__spawn_send(S.sock, &o, &e);
    skd__spawn_out_free(&o);
    return rc;
}

static int reply_ok(uint64_t h, const char *provider)
{
    skd__spawn_out o;
    skd_err e = {0};
    skd__spawn_out_init(&o, SKD__REP_OK, h);
    if (provider)
        skd__spawn_out_str(&o, SKD__T_PROVIDER, provider);
    int rc = skd__spawn_send(S.sock, &o, &e);
    skd__spawn_out_free(&o);
    return rc;
}

/* ---- validation of a prepare request ---- */

/* Every limit within its range and under the operator's ceilings: the
 * spawner is the last line, whatever the server checked before. The rows
 * and the ceilings are include/skilld/limits.h's, the ceilings those the
 * spawner was told at its start (S.conf), never a request's. */
static int check_limits(const skd_sandbox_config *c, skd_err *err)
{
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        int64_t v = skd_limit_get(c, i), hi = S.conf->ceil.max[i];
        if (l->kind == SKD_LIMIT_BOOL && l->ceil_env && v > hi)
            return skd_err_set(err, SKD_EFORBIDDEN,
                               "sandbox spawner: %s is not allowed by the operator (%s)", l->key,
                               l->ceil_env);
        if (v < l->min || v > hi)
            return skd_err_set(err, SKD_EFORBIDDEN,
                               "sandbox spawner: %s %lld is outside the operator's limits "
                               "[%lld, %lld]",
                               l->key, (long long)v, (long long)l->min, (long long)hi);
    }
    return 0;
}

static int is_container(const char *name)
{
    return strcmp(name, "docker") == 0 || strcmp(name, "podman") == 0;
}

static int check_request(skd__spawn_msg *m, skd_err *err)
{
    if (!skd__spawner_valid_uuid(m->id))
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: bad run id");
    if (m->cwd[0] != '/' || strlen(m->cwd) >= PATH_MAX)
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: working directory must be absolute");
    if (!m->argv[0][0])
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: no command to run");
    for (size_t i = 0; i < m->envc; i++) {
        const char *eq = strchr(m->envp[i], '=');
        if (!eq || eq == m->envp[i])
            return skd_err_set(err, SKD_EINVAL,
                               "sandbox spawner: environment entry is not "
                               "NAME=value");
    }
    if (m->ca_pem && !skd__spawner_valid_pem(m->ca_pem))
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: the CA is not one PEM certificate");
    if (S.nruns >= MAX_RUNS)
        return skd_err_set(err, SKD_EBUSY, "sandbox spawner: too many runs");
    if (m->live && (!skd__spawner_valid_uuid(m->live) ||
                    (strcmp(m->provider, "native") != 0 && !is_container(m->provider))))
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: bad live sandbox");
    return check_limits(&m->cfg, err);
}

static void on_prepare(skd__spawn_msg *m)
{
    skd_err err = {0};
    int rc;
    struct srun *r = calloc(1, sizeof(*r));
    if (!r) {
        reply_error(0, SKD_ENOMEM, "out of memory");
        return;
    }
    r->ws_fd = skd__spawn_take_fd(m, SKD__FD_WORKSPACE);
    r->skill_fd = skd__spawn_take_fd(m, SKD__FD_SKILL);
    r->pidfd = -1;
    if ((rc = check_request(m, &err)) != 0)
        goto fail;
    if (m->live && !(r->prov = skd__ctr_live_provider(m->live)))
        r->prov = &skd__provider_native_live;
    else if (!m->live)
        r->prov = skd__provider_find(m->provider, &err);
    if (m->live)
        memcpy(r->live, m->live, sizeof(r->live));
    if (!r->prov) {
        rc = SKD_ESANDBOX;
        goto fail;
    }
    r->cfg = m->cfg;
    /* The operator's, never the request's. */
    r->cfg.workspace_quota = S.conf->workspace_quota;
    r->cfg.data_reserve = S.conf->data_reserve;
    memcpy(r->id, m->id, sizeof(r->id));
    r->image = strdup(m->image);
    r->cwd = strdup(m->cwd);
    r->argv = copy_vec(m->argv, m->argc);
    r->envp = copy_vec(m->envp, m->envc);
    r->ca_pem = m->ca_pem ? strdup(m->ca_pem) : NULL;
    if (!r->image || !r->cwd || !r->argv || !r->envp || (m->ca_pem && !r->ca_pem)) {
        rc = skd_err_set(&err, SKD_ENOMEM, "out of memory");
        goto fail;
    }
    /* The image is resolved here, against the operator's list. */
    rc = skd_sandbox_image_rootfs(S.conf->data_dir, S.conf->allowed_images, r->image, &r->rootfs,
                                  &err);
    if (rc == SKD_ENOENT && is_container(r->prov->name)) {
        skd_err_clear(&err);
        rc = 0;
    }
    if (rc)
        goto fail;
    if ((r->ws_fd >= 0 && (rc = skd__spawner_fd_dir_path(r->ws_fd, &r->ws_path, &err)) != 0) ||
        (r->skill_fd >= 0 &&
         (rc = skd__spawner_fd_dir_path(r->skill_fd, &r->skill_path, &err)) != 0))
        goto fail;
    r->req = (skd__sandbox_req){
        .id = r->id,
        .image = r->image,
        .rootfs = r->rootfs,
        .argv = r->argv,
        .envp = r->envp,
        .workspace = r->ws_path,
        .cwd = r->cwd,
        .cfg = &r->cfg,
        .data_dir = S.conf->data_dir,
        .skill_dir = r->skill_path,
        .workspace_fd = r->ws_fd,
        .skill_fd = r->skill_fd,
        .ca_pem = r->ca_pem,
        .live = r->live[0] ? r->live : NULL,
    };
    if ((rc = r->prov->prepare(&r->req, &r->pstate, &err)) != 0)
        goto fail;
    r->handle = ++S.next_handle;
    r->next = S.runs;
    S.runs = r;
    S.nruns++;
    reply_ok(r->handle, r->prov->name);
    return;
fail:
    srun_free(r);
    reply_error(0, rc, skd_err_msg(&err));
}

/* The answer to a live create: OK, with the egress proxy's socket placed
 * on the sandbox's loopback when it has networkEnabled (the server serves
 * it for the sandbox's life). A sandbox whose answer cannot be sent is
 * ended: the server does not know it. */
static void reply_live_made(uint64_t h, const char *id)
{
    skd__spawn_out o;
    skd_err e = {0};
    const skd__provider *cp = skd__ctr_live_provider(id);
    int fd = cp ? skd__ctr_live_take_egress(id) : skd__native_live_take_egress(id);
    skd__spawn_out_init(&o, SKD__REP_OK, h);
    skd__spawn_out_str(&o, SKD__T_PROVIDER, cp ? cp->name : "native");
    if (fd >= 0)
        skd__spawn_out_fd(&o, fd, SKD__FD_EGRESS);
    if (skd__spawn_send(S.sock, &o, &e) != 0 && skd__ctr_live_delete(id) != 0)
        skd__native_live_delete(id);
    skd__spawn_out_free(&o);
    if (fd >= 0)
        close(fd); /* the server holds its copy now */
}

/* The spawner's own cap on a snapshot's bytes: a root layer and a /tmp
 * at their ceilings. */
static int64_t snap_cap(void)
{
    return (int64_t)S.conf->root_layer_max + S.conf->ceil.max[SKD_LIMIT_TMP] + (64 << 20);
}

/* A live sandbox (native_live.c, container_live.c): checked as a prepare
 * is, made at once; resumed or forked from a snapshot of the runtime it
 * was saved on only. Its workspace arrives as a directory descriptor,
 * used for the sandbox's life. */
static void on_live_create(skd__spawn_msg *m)
{
    skd_err err = {0};
    int rc = 0, ws_fd = skd__spawn_take_fd(m, SKD__FD_WORKSPACE);
    char *ws_path = NULL, *rootfs = NULL;
    skd_sandbox_config cfg = m->cfg;
    const char *rt = S.conf->runtime;
    if (!skd__spawner_valid_uuid(m->live))
        rc = skd_err_set(&err, SKD_EINVAL, "sandbox spawner: bad live sandbox id");
    else if (strcmp(rt, "native") != 0 && strcmp(rt, "auto") != 0 && !is_container(rt))
        rc = skd_err_set(&err, SKD_ESANDBOX, "live sandboxes are not supported on the %s runtime",
                         rt);
    else if (skd__native_live_count() + skd__ctr_live_count() >= MAX_RUNS)
        rc = skd_err_set(&err, SKD_EBUSY, "sandbox spawner: too many live sandboxes");
    if (rc == 0)
        rc = check_limits(&cfg, &err);
    if (rc == 0 && m->ca_pem && !skd__spawner_valid_pem(m->ca_pem))
        rc = skd_err_set(&err, SKD_EINVAL, "sandbox spawner: the CA is not one PEM certificate");
    cfg.workspace_quota = S.conf->workspace_quota;
    cfg.data_reserve = S.conf->data_reserve;
    if (rc == 0)
        rc = skd_sandbox_image_rootfs(S.conf->data_dir, S.conf->allowed_images, m->image, &rootfs,
                                      &err);
    if (rc == SKD_ENOENT && is_container(rt)) { /* the engine's store holds it */
        skd_err_clear(&err);
        rc = 0;
    }
    if (rc == 0 && ws_fd >= 0)
        rc = skd__spawner_fd_dir_path(ws_fd, &ws_path, &err);
    if (rc == 0) {
        skd__sandbox_req req = {
            .id = m->live,
            .image = m->image,
            .rootfs = rootfs,
            .workspace = ws_path,
            .cwd = "/",
            .cfg = &cfg,
            .data_dir = S.conf->data_dir,
            .workspace_fd = ws_fd,
            .skill_fd = -1,
            .ca_pem = m->ca_pem, /* networkEnabled with secrets: the trust bundle */
        };
        /* Resumed or forked: from the snapshot of its id, removed once
         * the sandbox holds its files again. */
        const char *restore = m->has_snap_args && (m->snap_flags & 1) ? m->live : NULL;
        if (restore)
            rc = skd__ctr_snap_origin_check(restore, rt, &err);
        if (rc == 0 && is_container(rt))
            rc = skd__ctr_live_create(rt, &req, restore, &err);
        else if (rc == 0)
            rc = skd__native_live_create(&req, S.conf->root_layer_max, restore, &err);
        if (rc == 0 && restore)
            skd__snap_drop(restore);
    }
    if (rc)
        reply_error(m->handle, rc, skd_err_msg(&err));
    else
        reply_live_made(m->handle, m->live);
    if (ws_fd >= 0)
        close(ws_fd);
    free(ws_path);
    free(rootfs);
}

/* The sandbox, its snapshot (paused), or both (a fork's source). */
static void on_live_delete(skd__spawn_msg *m)
{
    int live = skd__spawner_valid_uuid(m->live) &&
               (skd__ctr_live_delete(m->live) == 0 || skd__native_live_delete(m->live) == 0);
    int saved = skd__spawner_valid_uuid(m->live) && skd__snap_drop(m->live) == 0;
    if (!live && !saved)
        reply_error(m->handle, SKD_ENOENT, "no such live sandbox");
    else
        reply_ok(m->handle, NULL);
}

/* Keep what a live sandbox's processes wrote to its workspace so far (an
 * interpreter context's call, which no exec's end commits): the commit an
 * exec's end makes (native_live.c). A sandbox without a quota overlay
 * (rootless, or a container) answers with no workspace field. */
static void on_live_commit(skd__spawn_msg *m)
{
    skd__outcome oc;
    memset(&oc, 0, sizeof(oc));
    int known = skd__spawner_valid_uuid(m->live) &&
                (skd__native_live_commit_id(m->live, &oc) == 0 || skd__ctr_live_provider(m->live));
    if (!known) {
        reply_error(m->handle, SKD_ENOENT, "no such live sandbox");
        return;
    }
    skd_err err = {0};
    skd__spawn_out o;
    skd__spawn_out_init(&o, SKD__REP_OK, m->handle);
    if (oc.ws_checked) {
        int64_t usage[3] = {0, 0, (int64_t)(oc.ws_written & INT64_MAX)};
        skd__spawn_out_usage(&o, usage);
        skd__spawn_out_workspace(&o, oc.ws_error, oc.ws_bytes);
        if (oc.ws_message[0])
            skd__spawn_out_str(&o, SKD__T_WS_MESSAGE, oc.ws_message);
    }
    skd__spawn_send(S.sock, &o, &err);
    skd__spawn_out_free(&o);
}

/* Pause (SKD__SNAP_END) or the first half of a fork: save the files of a
 * live sandbox (a native one's, or a container's), or copy a saved one
 * (SKD__SNAP_FROM_SAVED), as snapshot m->snap. The cap is the server's
 * (its quota) within the spawner's own (snap_cap). */
static void on_live_save(skd__spawn_msg *m)
{
    skd_err err = {0};
    int64_t bytes = 0;
    int64_t cap = snap_cap();
    int64_t max = m->snap_bytes > 0 && m->snap_bytes < cap ? m->snap_bytes : cap;
    int rc = 0;
    if (!skd__spawner_valid_uuid(m->live) || !skd__spawner_valid_uuid(m->snap))
        rc = skd_err_set(&err, SKD_EINVAL, "sandbox spawner: bad live sandbox or snapshot id");
    else if (skd__ctr_live_provider(m->live) && !(m->snap_flags & SKD__SNAP_FROM_SAVED))
        rc = skd__ctr_live_save(m->live, m->snap, m->snap_flags, max, &bytes, &err);
    else
        rc = skd__native_live_save(m->live, m->snap, m->snap_flags, max, &bytes, &err);
    if (rc) {
        reply_error(m->handle, rc, skd_err_msg(&err));
        return;
    }
    skd__spawn_out o;
    skd__spawn_out_init(&o, SKD__REP_OK, m->handle);
    skd__spawn_out_snap_args(&o, 0, bytes);
    skd__spawn_send(S.sock, &o, &err);
    skd__spawn_out_free(&o);
}

static void close_spawned(skd__spawned *sp)
{
    int *fds[] = {&sp->pidfd,     &sp->stdin_fd,  &sp->stdout_fd,
                  &sp->stderr_fd, &sp->status_fd, &sp->egress_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

/* Keep pre-made native sandboxes waiting (native.c) when native runs
 * here: at start, and after outcomes were sent, when idle, until the pool
 * is full (idle_step; not after the spawn: its set-up would compete for
 * the CPU with the run). 1 when it made one. */
static int warm_fill(int at_start)
{
    const char *rt = S.conf->runtime;
    if (S.conf->warm > (at_start ? 0 : 1) && (strcmp(rt, "native") == 0 || strcmp(rt, "auto") == 0))
        return skd__native_warm_fill(S.conf->warm); /* one for skilld exec, two for a server */
    return 0;
}

static void on_spawn(skd__spawn_msg *m)
{
    struct srun *r = find(m->handle);
    skd_err err = {0};
    if (!r || r->spawned) {
        reply_error(m->handle, SKD_EINVAL, "sandbox spawner: no such run to spawn");
        return;
    }
    skd__spawned sp = SKD__SPAWNED_NONE;
    r->spawned = 1;
    if (r->prov->spawn(r->pstate, &sp, &err) != 0) {
        r->reaped = 1; /* nothing to wait for */
        reply_error(m->handle, err.code ? err.code : SKD_ESANDBOX, skd_err_msg(&err));
        return;
    }
    r->pidfd = fcntl(sp.pidfd, F_DUPFD_CLOEXEC, 3);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = r->handle};
    if (r->pidfd < 0 || epoll_ctl(S.epfd, EPOLL_CTL_ADD, r->pidfd, &ev) != 0) {
        r->prov->kill(r->pstate);
        close_spawned(&sp);
        reply_error(m->handle, SKD_ESANDBOX, "sandbox spawner: cannot watch the sandbox");
        return;
    }
    skd__spawn_out o;
    skd__spawn_out_init(&o, SKD__REP_SPAWNED, m->handle);
    skd__spawn_out_fd(&o, sp.pidfd, SKD__FD_PIDFD);
    skd__spawn_out_fd(&o, sp.stdout_fd, SKD__FD_STDOUT);
    skd__spawn_out_fd(&o, sp.stderr_fd, SKD__FD_STDERR);
    if (sp.stdin_fd >= 0)
        skd__spawn_out_fd(&o, sp.stdin_fd, SKD__FD_STDIN);
    if (sp.status_fd >= 0)
        skd__spawn_out_fd(&o, sp.status_fd, SKD__FD_STATUS);
    /* The egress socket is only placed here; the server serves it. */
    if (sp.egress_fd >= 0)
        skd__spawn_out_fd(&o, sp.egress_fd, SKD__FD_EGRESS);
    if (skd__spawn_send(S.sock, &o, &err) != 0)
        r->prov->kill(r->pstate); /* the server is gone or broken: the run is too */
    skd__spawn_out_free(&o);
    close_spawned(&sp); /* the server holds its copies now */
}

/* Reap r's process if it has exited (or wait up to ms for it). */
static void reap_run(struct srun *r, int ms)
{
    if (r->reaped || r->pidfd < 0)
        return;
    if (ms > 0) {
        struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
        poll(&p, 1, ms);
    }
    memset(&r->si, 0, sizeof(r->si));
    if (waitid((idtype_t)P_PIDFD, (id_t)r->pidfd, &r->si, WEXITED | WNOHANG) == 0 &&
        r->si.si_pid == 0)
        return; /* still running */
    r->reaped = 1;
    epoll_ctl(S.epfd, EPOLL_CTL_DEL, r->pidfd, NULL);
}

static void on_kill(skd__spawn_msg *m)
{
    struct srun *r = find(m->handle);
    if (r && r->spawned && !r->reaped)
        r->prov->kill(r->pstate);
    reply_ok(m->handle, NULL);
}

static void finish_run(struct srun *r, int killed, skd__outcome *oc)
{
    memset(oc, 0, sizeof(*oc));
    oc->killed = killed;
    if (r->spawned && !r->reaped) {
        reap_run(r, 0);
        if (!r->reaped) {
            r->prov->kill(r->pstate);
            reap_run(r, CLEANUP_WAIT_MS);
        }
    }
    if (r->reaped && r->si.si_pid != 0) {
        if (r->si.si_code == CLD_EXITED) {
            oc->exited = 1;
            oc->exit_code = r->si.si_status;
        } else {
            oc->signal = r->si.si_status;
        }
    } else if (r->spawned) {
        oc->signal = SIGKILL;
    }
    r->prov->cleanup(r->pstate, oc);
    r->pstate = NULL;
    unlink_run(r);
    srun_free(r);
}

static void on_cleanup(skd__spawn_msg *m)
{
    struct srun *r = find(m->handle);
    skd_err err = {0};
    if (!r) {
        reply_error(m->handle, SKD_EINVAL, "sandbox spawner: no such run to clean up");
        return;
    }
    skd__outcome oc;
    finish_run(r, m->killed, &oc);
    int v[5] = {oc.exited, oc.exit_code, oc.signal, oc.oom_killed, oc.killed};
    skd__spawn_out o;
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, m->handle);
    skd__spawn_out_outcome(&o, v);
    if (oc.setup_error[0])
        skd__spawn_out_str(&o, SKD__T_MESSAGE, oc.setup_error);
    int64_t usage[3] = {oc.cpu_us, oc.mem_peak, (int64_t)(oc.ws_written & INT64_MAX)};
    skd__spawn_out_usage(&o, usage);
    if (oc.ws_checked) {
        skd__spawn_out_workspace(&o, oc.ws_error, oc.ws_bytes);
        if (oc.ws_message[0])
            skd__spawn_out_str(&o, SKD__T_WS_MESSAGE, oc.ws_message);
    }
    skd__spawn_send(S.sock, &o, &err);
    skd__spawn_out_free(&o);
    /* The overlay's mounts and the next run's sandbox, now the outcome is
     * out: when nothing else waits (idle_step). What a run leaves (its /tmp
     * above all) is held for few runs and little time: past IDLE_BACKLOG
     * the oldest goes at once, and past IDLE_MAX_MS a step is done between
     * events. */
    if (!S.owed_since)
        S.owed_since = skd_mono_ms();
    while (skd__native_deferred() > IDLE_BACKLOG)
        skd__native_flush_one();
}

/* A run prepared and not yet spawned: its spawn is on its way. */
static int spawn_expected(void)
{
    for (struct srun *r = S.runs; r; r = r->next)
        if (!r->spawned)
            return 1;
    return 0;
}

/* The work runs leave after their outcome (the deferred teardown, oldest
 * first, then new pre-made sandboxes until the pool is full) is done one
 * piece at a time while no message and no exit waits, so that the next
 * run's prepare and spawn, or a sandbox's exit, are served first; on two
 * CPUs it then runs beside the next sandbox instead of before it. Returns
 * 1 while more is owed. */
static int idle_step(void)
{
    if (skd__native_flush_one())
        return 1;
    return warm_fill(0) == 1; /* made one: the pool may want another */
}

/* How long the loop may wait before a step of the owed work: not at all
 * when nothing is expected, up to 2 ms while a prepared run's spawn is (it
 * may wait in the server's queue for its slot), never past IDLE_MAX_MS
 * from when the work became owed. */
static int idle_wait_ms(void)
{
    if (!S.owed_since)
        return -1;
    int64_t left = S.owed_since + IDLE_MAX_MS - skd_mono_ms();
    if (left <= 0 || !spawn_expected())
        return 0;
    return left < 2 ? (int)left : 2;
}

/* The server is gone: nothing of its runs may outlive this process. */
static void shutdown_all(void)
{
    for (struct srun *r = S.runs; r; r = r->next)
        if (r->spawned && !r->reaped)
            r->prov->kill(r->pstate);
    skd__native_live_drop_all(); /* their execs end with them */
    skd__ctr_live_drop_all();    /* rm -f of each container */
    while (S.runs) {
        skd__outcome oc;
        finish_run(S.runs, 1, &oc);
    }
}

static void on_message(void)
{
    skd__spawn_msg m;
    skd_err err = {0};
    int rc = skd__spawn_recv(S.sock, &m, &err);
    if (rc == SKD_ENOENT || rc == SKD_ESANDBOX) {
        shutdown_all();
        skd__native_flush();
        skd__native_warm_drop();
        skd__cgroup_release(); /* the cgroups this spawner made; _exit skips atexit */
        _exit(0);
    }
    if (rc != 0) {
        /* Malformed: refuse it and go on; the server learns why. */
        reply_error(0, SKD_EINVAL, skd_err_msg(&err));
        return;
    }
    switch (m.type) {
    case SKD__REQ_PREPARE:
        on_prepare(&m);
        break;
    case SKD__REQ_SPAWN:
        on_spawn(&m);
        break;
    case SKD__REQ_KILL:
        on_kill(&m);
        break;
    case SKD__REQ_CLEANUP:
        on_cleanup(&m);
        break;
    case SKD__REQ_LIVE_CREATE:
        on_live_create(&m);
        break;
    case SKD__REQ_LIVE_DELETE:
        on_live_delete(&m);
        break;
    case SKD__REQ_LIVE_SAVE:
        on_live_save(&m);
        break;
    case SKD__REQ_LIVE_COMMIT:
        on_live_commit(&m);
        break;
    case SKD__REQ_SNAP_LIST: { /* for the server's sweep of ended sandboxes' files */
        skd__spawn_out o;
        skd_err e = {0};
        skd__snap_list_message(&o, m.handle);
        skd__spawn_send(S.sock, &o, &e);
        skd__spawn_out_free(&o);
        break;
    }
    default:
        reply_error(m.handle, SKD_EINVAL, "sandbox spawner: unexpected message type");
        break;
    }
    skd__spawn_msg_free(&m);
}

/* Descriptors: a live sandbox holds a few in the spawner for its whole life
 * (its init's pidfd, its root layer, its cgroups), so the soft limit a
 * server is started with (often 1024) would refuse creates long before
 * SKILLS_SANDBOX_MAX_LIVE. Raise it to the
 * hard limit; a sandbox's own processes get 1024 again (native_child.c). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            skd_warn("spawner: could not raise its descriptor limit: %s", strerror(errno));
    }
}

void skd__spawner_main(const skd__spawner_conf *conf, int sock)
{
    skd_err err = {0};
    S.conf = conf;
    S.sock = sock;
    S.epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (S.epfd < 0 || epoll_ctl(S.epfd, EPOLL_CTL_ADD, sock, &ev) != 0)
        _exit(127);
    raise_fd_limit();
    skd__native_forget();
    skd__snap_set_dir(conf->snap_dir);
    skd__native_set_owner(conf->owner_uid, conf->owner_gid);
    skd__native_set_defaults(&conf->defaults);
    skd__native_defer_teardown(1);
    skd__wsq_set_max_entries(conf->workspace_max_entries);
    /* Detect now: it sets up the cgroup parent and removes the cgroups of a
     * spawner that died before us. */
    if (strcmp(conf->runtime, "native") == 0 || strcmp(conf->runtime, "auto") == 0)
        skd__provider_native.detect(&err);
    for (int i = 0; i < S.conf->warm; i++)
        warm_fill(1);
    if (is_container(conf->runtime))
        skd__containers_reap_once(conf->runtime);
    for (;;) {
        struct epoll_event evs[32];
        int n = epoll_wait(S.epfd, evs, 32, idle_wait_ms());
        if (n < 0 && errno != EINTR)
            _exit(127);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == 0) {
                on_message();
                continue;
            }
            struct srun *r = find(evs[i].data.u64);
            if (r)
                reap_run(r, 0); /* no zombie waits for the server's cleanup */
        }
        /* Idle, or owed for too long: one step (the events came first). */
        if (S.owed_since && (n == 0 || skd_mono_ms() - S.owed_since >= IDLE_MAX_MS) && !idle_step())
            S.owed_since = 0;
    }
}
