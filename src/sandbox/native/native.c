/*
 * The native provider: a sandbox made of Linux namespaces, cgroups,
 * seccomp and rlimits, with no daemon (DESIGN.md, "Sandbox providers").
 * This file is the parent side's core: detect, prepare, spawn (pipes,
 * clone3, id maps, cgroup, release the child), kill, cleanup and the
 * deferred teardown. The new root's layout is native_root.c, the identity
 * maps native_idmap.c, pre-made sandboxes native_warm.c (native_int.h
 * holds what they share); the child side is native_child.c.
 *
 * Trust: the request was validated by the runner; image roots come from
 * skd_sandbox_image_rootfs. Fail closed: every step that cannot be done
 * refuses the run with SKD_ESANDBOX naming the step.
 */
#include "sandbox/native/native_int.h"
#include "sandbox/spawner/egress_place.h"
#include "skilld/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define NS_FLAGS                                                                                   \
    (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)
#define WARM_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWPID)

static const char *const stage_candidates[] = {"/run/skilld-sandbox-root",
                                               "/tmp/.skilld-sandbox-root"};

struct skd__native_globals skd__nat = {.idmap_fd = -1};
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The spawner's deferred teardown, done after the outcome was sent
 * (skd__native_flush): quota overlays already committed, whose unmounting
 * and removal (each rmdir of a mount point waits for an RCU grace period)
 * is all that is left of them, the quota tmpfs made ahead for a pre-made
 * sandbox whose run did not use it, the mount namespaces of reaped runs
 * (hold_mntns), and the cgroups of reaped runs (their OOM state read;
 * removing them may wait for dying tasks). */
static int defer_on;
static struct {
    skd__wsq *wsq, *stage;
    skd__cgroup *cg;
    int mntns;
} deferred[64];
static size_t ndeferred;

void skd__native_defer_teardown(int on)
{
    defer_on = on;
}

size_t skd__native_deferred(void)
{
    return ndeferred;
}

/* Oldest first: what waits longest goes first. */
int skd__native_flush_one(void)
{
    if (ndeferred == 0)
        return 0;
    __typeof__(deferred[0]) d = deferred[0];
    ndeferred--;
    memmove(&deferred[0], &deferred[1], ndeferred * sizeof(deferred[0]));
    /* First: its tmpfs pages are charged to the cgroup below. (No sandbox
     * is cloned while runs are owed, see native_spawn and warm_fill, so
     * this is the last reference.) */
    if (d.mntns >= 0)
        close(d.mntns);
    skd__cgroup_destroy(d.cg);
    skd__wsq_free(d.wsq);
    skd__wsq_free(d.stage);
    return 1;
}

void skd__native_flush(void)
{
    while (skd__native_flush_one())
        ;
}

void skd__native_set_owner(unsigned uid, unsigned gid)
{
    skd__nat.owner_uid = uid;
    skd__nat.owner_gid = gid;
}

void skd__native_forget(void)
{
    /* Descriptors made by the process that forked the spawner are closed
     * in it: start over. */
    memset(&skd__nat, 0, sizeof(skd__nat));
    skd__nat.idmap_fd = -1;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
    skd__native_warm_forget(); /* the parent's (if any) are not ours to use */
    ndeferred = 0;
    defer_on = 0;
    skd__cgroup_forget();
}

int skd__native_rootless(void)
{
    return geteuid() != 0;
}

static void init_once(void)
{
    uid_t me = geteuid();
    if (stat("/proc/self/ns/mnt", &skd__nat.own_mntns) != 0)
        memset(&skd__nat.own_mntns, 0, sizeof(skd__nat.own_mntns));
    skd__nat.rootless = me != 0;
    char own[64];
    snprintf(own, sizeof(own), "/tmp/.skilld-sandbox-root-%u", (unsigned)me);
    const char *cands[3] = {stage_candidates[0], stage_candidates[1], own};
    for (size_t i = skd__nat.rootless ? 2 : 0; i < 3; i++) {
        struct stat st;
        if ((mkdir(cands[i], 0755) == 0 || errno == EEXIST) && lstat(cands[i], &st) == 0 &&
            S_ISDIR(st.st_mode) && st.st_uid == me) {
            skd_strlcpy(skd__nat.stage, cands[i], sizeof(skd__nat.stage));
            break;
        }
    }
    if (!skd__nat.stage[0]) {
        snprintf(skd__nat.why, sizeof(skd__nat.why), "no staging directory (%s): %s",
                 cands[skd__nat.rootless ? 2 : 0], strerror(errno));
        return;
    }
    if (skd__nat.rootless) {
        if (skd__native_probe_userns() != 0)
            snprintf(skd__nat.why, sizeof(skd__nat.why),
                     "rootless: unprivileged user namespaces are not available: %s (set "
                     "kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0, or "
                     "start skilld as root)",
                     strerror(errno));
        else
            skd__nat.idmap_fd = -2; /* usable; no idmapped mounts in this mode */
        return;
    }
    skd__nat.idmap_fd = skd__native_make_idmap_userns();
    if (skd__nat.idmap_fd < 0)
        snprintf(skd__nat.why, sizeof(skd__nat.why),
                 "user namespaces: %s (is kernel.unprivileged_userns_clone "
                 "or user.max_user_namespaces 0?)",
                 strerror(errno));
}

int skd__native_detect(skd_err *err)
{
    const struct sock_fprog *prog;
    pthread_once(&once, init_once);
    if (skd__nat.idmap_fd == -1)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: %s", skd__nat.why);
    int rc = skd__cgroup_detect(err);
    if (rc)
        return rc;
    return skd__seccomp_program(&prog, err);
}

struct nstate *skd__native_state_new(const skd__sandbox_req *req)
{
    struct nstate *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->req = req;
    s->pidfd = s->ctl = s->mntns = -1;
    s->child.ws_fd = s->child.img_fd = s->child.skill_fd = s->child.ctl_fd = -1;
    s->ends = (skd__spawned){-1, -1, -1, -1, -1, -1};
    return s;
}

static int native_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    *state = NULL;
    int rc = skd__native_detect(err);
    if (rc)
        return rc;
    /* Fail closed: the quota overlay needs mounts only root can make. */
    if (skd__nat.rootless && req->workspace && req->cfg->workspace_quota > 0 &&
        !req->cfg->workspace_read_only)
        return skd_err_set(err, SKD_ESANDBOX,
                           "native sandbox: the workspace quota cannot be held inside a rootless "
                           "sandbox (SKILLS_SANDBOX_WORKSPACE_QUOTA=overlay needs root); run "
                           "with workspaceReadOnly or set SKILLS_SANDBOX_WORKSPACE_QUOTA=off");
    /* An image without a root filesystem here was not imported ("auto"
     * may have sent one meant for an engine's store): never the host's. */
    if (!req->rootfs && req->image && *req->image && strcmp(req->image, "host") != 0)
        return skd_err_set(err, SKD_ENOENT,
                           "image %.200s is not imported for the native sandbox; run skilld "
                           "image import",
                           req->image);
    struct nstate *w =
        skd__native_warm_fits(req) ? skd__native_warm_take() : NULL; /* each is used once */
    if (w) {
        w->req = req;
        skd__native_set_opts(w);
        if ((rc = skd__native_open_mounts(w, err)) ||
            (rc = skd__cgroup_apply(w->cg, req->cfg, err))) {
            skd__native_cleanup(w, NULL);
            return rc;
        }
        *state = w;
        return 0;
    }
    struct nstate *s = skd__native_state_new(req);
    if (!s)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = skd__native_fill_child(s, err)) || (rc = skd__native_open_mounts(s, err)) ||
        (rc = skd__cgroup_create(req->id, req->cfg, &s->cg, err))) {
        skd__native_cleanup(s, NULL);
        return rc;
    }
    *state = s;
    return 0;
}

/* ---- spawn ---- */

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
    p[0] = p[1] = -1;
}

/* The parent's half of the start-up: the id maps, then "g" (the child
 * builds its root and goes on to exec). The cgroup needs no step here: on
 * v2 the child is born in it (CLONE_INTO_CGROUP); on v1 the child's first
 * act is to write itself into the "tasks" files opened for it
 * (skd__cgroup_join_fds), which does not wait for an RCU grace period as
 * moving another process does, and it dies if that fails. */
static int release_child(pid_t pid, int sync_fd, skd_err *err)
{
    char map[96], gmap[96];
    if (skd__nat.rootless) {
        /* One line, our own ids, and setgroups denied first: all an
         * unprivileged parent may write. */
        snprintf(map, sizeof(map), "%u %u 1\n", SKD_NATIVE_UID, (unsigned)geteuid());
        snprintf(gmap, sizeof(gmap), "%u %u 1\n", SKD_NATIVE_UID, (unsigned)getegid());
        if (skd__native_write_map(pid, "setgroups", "deny") != 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: deny setgroups: %s",
                               strerror(errno));
    } else {
        snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", SKD_NATIVE_HOST_BASE, SKD_NATIVE_UID,
                 SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID);
        memcpy(gmap, map, sizeof(map));
    }
    if (skd__native_write_map(pid, "uid_map", map) != 0 ||
        skd__native_write_map(pid, "gid_map", gmap) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: write the id maps: %s",
                           strerror(errno));
    if (write(sync_fd, "g", 1) != 1)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: release the child: %s",
                           strerror(errno));
    return 0;
}

static void close_join_fds(struct skd__native_child *c)
{
    while (c->ncg > 0)
        close(c->cg_fds[--c->ncg]);
}

/* The child's end of a pre-made sandbox's control socket. */
static void close_ctl_child(struct nstate *s)
{
    if (s->warm && s->child.ctl_fd >= 0)
        close(s->child.ctl_fd);
    s->child.ctl_fd = -1;
}

void skd__native_close_ends(skd__spawned *sp)
{
    int *fds[] = {&sp->pidfd,     &sp->stdin_fd,  &sp->stdout_fd,
                  &sp->stderr_fd, &sp->status_fd, &sp->egress_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

/* Pipes, clone3, id maps, release: a started child (cold: its run's;
 * warm: one that builds the root and waits on its control socket). */
#ifndef PIDFD_GET_MNT_NAMESPACE
#define PIDFD_GET_MNT_NAMESPACE _IO(0xFF, 3) /* linux/pidfd.h, 6.11 */
#endif

/* Hold the sandbox's mount namespace from outside, so that its teardown
 * (every mount of its tree undone, the overlay and tmpfs superblocks
 * released: about half a millisecond) is not done by its init's exit, which
 * comes before that exit is seen, but by skd__native_flush after the
 * outcome was sent, or by cleanup. Its tasks are gone all the same (the
 * pid namespace ends with its init); what is held is mounts no task can
 * reach. Best effort: without it the kernel tears down as before. A
 * namespace that is still this process's (a pre-made sandbox that has not
 * made its own yet) is not held. */
void skd__native_hold_mntns(struct nstate *s)
{
    int fd = -1;
    if (!skd__nat.no_ns_ioctl) {
        fd = ioctl(s->pidfd, PIDFD_GET_MNT_NAMESPACE, 0);
        if (fd < 0 && (errno == ENOTTY || errno == EINVAL))
            skd__nat.no_ns_ioctl = 1;
    }
    if (fd < 0 && skd__nat.no_ns_ioctl && s->pid > 0) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)s->pid);
        fd = open(p, O_RDONLY | O_CLOEXEC);
    }
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || (st.st_ino == skd__nat.own_mntns.st_ino &&
                                            st.st_dev == skd__nat.own_mntns.st_dev))) {
        close(fd);
        fd = -1;
    }
    s->mntns = fd;
}

int skd__native_start_child(struct nstate *s, skd__spawned *out, skd_err *err)
{
    int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1}, st[2] = {-1, -1}, sy[2] = {-1, -1};
    int pidfd = -1, rc = 0, egress_fd = -1;
    if (pipe2(in, O_CLOEXEC) || pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC) ||
        pipe2(st, O_CLOEXEC) || pipe2(sy, O_CLOEXEC)) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: pipes: %s", strerror(errno));
        goto fail;
    }
    s->child.in_fd = in[0];
    s->child.out_fd = o[1];
    s->child.err_fd = e[1];
    s->child.status_fd = st[1];
    s->child.sync_fd = sy[0];
    int ncg = skd__cgroup_join_fds(
        s->cg, s->child.cg_fds, (int)(sizeof(s->child.cg_fds) / sizeof(s->child.cg_fds[0])), err);
    if (ncg < 0) {
        rc = ncg;
        goto fail;
    }
    s->child.ncg = ncg;
    if (s->warm) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
            rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: socketpair: %s", strerror(errno));
            goto fail;
        }
        s->ctl = sv[0];
        s->child.ctl_fd = sv[1];
    }
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    /* A pre-made sandbox makes its other namespaces itself (the network
     * namespace above all is slow to create), so the spawner's clone3 is
     * short; owned by its new user namespace all the same. */
    ca.flags = (s->warm ? WARM_CLONE_FLAGS : NS_FLAGS) | CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)&pidfd;
    ca.exit_signal = SIGCHLD;
    if (skd__cgroup_clone_fd(s->cg) >= 0) {
        /* cgroup v2: born in its cgroup, no migration (and no RCU sync). */
        ca.flags |= CLONE_INTO_CGROUP;
        ca.cgroup = (uint64_t)skd__cgroup_clone_fd(s->cg);
    }
    pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid == 0)
        skd__native_child_main(&s->child);
    if (pid < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: clone3: %s", strerror(errno));
        goto fail;
    }
    close(in[0]), close(o[1]), close(e[1]), close(st[1]), close(sy[0]);
    in[0] = o[1] = e[1] = st[1] = sy[0] = -1;
    close_join_fds(&s->child);
    close_ctl_child(s);
    /* networkEnabled: the egress proxy's socket goes on the sandbox's
     * loopback before the child is released, so it is there when the
     * command starts (src/sandbox/spawner/egress_place.c). */
    if ((s->req->cfg->network_enabled && (rc = skd__egress_place(pidfd, &egress_fd, err)) != 0) ||
        (rc = release_child(pid, sy[1], err)) != 0) {
        if (egress_fd >= 0)
            close(egress_fd);
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED);
        close(pidfd);
        goto fail;
    }
    close_pair(sy);
    s->pidfd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
    s->pid = pid;
    if (!s->warm) /* its namespaces are its own from clone3 */
        skd__native_hold_mntns(s);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(o[0], F_SETFL, O_NONBLOCK);
    fcntl(e[0], F_SETFL, O_NONBLOCK);
    fcntl(st[0], F_SETFL, O_NONBLOCK);
    *out = (skd__spawned){.pidfd = pidfd,
                          .stdin_fd = in[1],
                          .stdout_fd = o[0],
                          .stderr_fd = e[0],
                          .status_fd = st[0],
                          .egress_fd = egress_fd};
    return 0;
fail:
    close_join_fds(&s->child);
    close_ctl_child(s);
    close_pair(in), close_pair(o), close_pair(e), close_pair(st), close_pair(sy);
    return rc;
}

static int native_spawn(void *state, skd__spawned *out, skd_err *err)
{
    struct nstate *s = state;
    if (s->warm)
        return skd__native_warm_spawn(s, out, err);
    /* A new mount namespace copies the spawner's, with the overlays of
     * runs still owed a teardown, and the child holds their namespaces
     * until it closes what it inherited: let them go first. */
    skd__native_flush();
    return skd__native_start_child(s, out, err);
}

static void native_kill(void *state)
{
    struct nstate *s = state;
    if (s->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
    skd__cgroup_kill(s->cg);
}

void skd__native_cleanup(void *state, skd__outcome *out)
{
    struct nstate *s = state;
    if (!s)
        return;
    if (s->warm && !s->handed && s->pidfd >= 0) {
        /* Made, never given a run (discarded, or its run ended before the
         * spawn): it waits on its socket; end it and reap it here, as no
         * one else will. */
        siginfo_t si;
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
        waitid((idtype_t)P_PIDFD, (id_t)s->pidfd, &si, WEXITED);
    }
    if (s->ctl >= 0)
        close(s->ctl);
    skd__native_close_ends(&s->ends);
    if (out && s->cg) {
        out->oom_killed = skd__cgroup_oom_killed(s->cg);
        skd__cgroup_usage(s->cg, &out->cpu_us, &out->mem_peak); /* before it goes */
        out->cpu_us = out->cpu_us > 0 ? out->cpu_us : 0;
        out->mem_peak = out->mem_peak > 0 ? out->mem_peak : 0;
    }
    /* Deferred only once the sandbox's init has exited (its pidfd is
     * readable): every task of its pid namespace is gone with it, so the
     * commit below cannot race a writer; otherwise destroy kills what is
     * left first, as before. */
    struct pollfd gone = {.fd = s->pidfd, .events = POLLIN};
    int exited = s->pidfd >= 0 && poll(&gone, 1, 0) == 1 && (gone.revents & POLLIN);
    int defer = defer_on && out && ndeferred < sizeof(deferred) / sizeof(deferred[0]) &&
                (s->pidfd < 0 || exited);
    if (defer) {
        deferred[ndeferred].mntns = s->mntns;
        deferred[ndeferred].cg = s->cg;
        deferred[ndeferred].stage = s->stage; /* a run that did not take it */
    } else {
        if (s->mntns >= 0) /* before the cgroup's tasks are killed and it goes */
            close(s->mntns);
        skd__cgroup_destroy(s->cg);
        skd__wsq_free(s->stage);
    }
    s->mntns = -1;
    s->stage = NULL;
    if (s->child.ws_fd >= 0) /* before the commit: it holds the overlay */
        close(s->child.ws_fd);
    if (exited)
        skd__wsq_sandbox_gone(s->wsq);
    if (s->wsq && out) /* the sandbox is gone; a killed run keeps nothing */
        skd__wsq_commit_outcome(s->wsq, s->pidfd >= 0 && !out->killed && !out->oom_killed,
                                s->req->cfg->data_reserve, out);
    if (defer)
        deferred[ndeferred++].wsq = s->wsq; /* committed: only its mounts are left */
    else
        skd__wsq_free(s->wsq);
    if (s->pidfd >= 0)
        close(s->pidfd);
    if (s->child.img_fd >= 0)
        close(s->child.img_fd);
    if (s->child.skill_fd >= 0)
        close(s->child.skill_fd);
    for (size_t i = 0; i < s->nents; i++) {
        free(s->ents[i].dst);
        free(s->ents[i].src);
    }
    for (size_t i = 0; i < sizeof(s->paths) / sizeof(s->paths[0]); i++)
        free(s->paths[i]);
    free(s);
}

const skd__provider skd__provider_native = {
    .name = "native",
    .detect = skd__native_detect,
    .prepare = native_prepare,
    .spawn = native_spawn,
    .kill = native_kill,
    .cleanup = skd__native_cleanup,
};
