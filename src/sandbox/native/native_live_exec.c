/*
 * An exec in a live sandbox of the native provider (DESIGN.md, "Live
 * sandboxes"): a provider whose sandbox already exists. Prepare finds it by
 * id (native_live.c), spawn enters it from the spawner the way `runc exec`
 * does (skd__native_enter_main: setns into its namespaces, its cgroup, the
 * same capability drop, no_new_privs, seccomp filter and uid as a one-shot
 * run, then execve), kill ends the command's own pid namespace, cleanup
 * reads the OOM count of the sandbox's cgroup. Runs in the spawner's one
 * thread.
 */
#include "sandbox/native/native_live_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reap the relays of l's execs that have exited (killed with the
 * sandbox). Their runs then report SIGKILL (spawner.c finds them reaped). */
void skd__live_reap_execs(struct live *l)
{
    for (struct lexec *x = l->execs; x; x = x->next)
        if (x->pidfd >= 0) {
            siginfo_t si;
            memset(&si, 0, sizeof(si));
            waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &si, WEXITED | WNOHANG);
        }
}

static void lexec_cleanup(void *state, skd__outcome *out);

static int lexec_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    *state = NULL;
    struct live *l = req->live ? skd__live_find(req->live) : NULL;
    if (!l)
        return skd_err_set(err, SKD_ENOENT, "no such live sandbox");
    struct lexec *x = calloc(1, sizeof(*x));
    if (!x)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    x->req = req;
    x->l = l;
    x->pidfd = -1;
    l->refs++;
    x->next = l->execs;
    l->execs = x;
    struct skd__native_child *c = &x->child;
    c->cwd = req->cwd;
    c->argv = req->argv;
    c->envp = req->envp;
    c->path = skd__native_env_path(req->envp);
    c->fsize = (unsigned long long)l->cfg.file_size_limit;
    c->rootless = skd__nat.rootless;
    c->ws_fd = c->img_fd = c->skill_fd = c->ctl_fd = -1;
    int rc = skd__seccomp_program(&c->seccomp, err);
    if (rc) {
        lexec_cleanup(x, NULL);
        return rc;
    }
    *state = x;
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static int lexec_spawn(void *state, skd__spawned *out, skd_err *err)
{
    struct lexec *x = state;
    struct live *l = x->l;
    struct skd__native_child *c = &x->child;
    int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1}, st[2] = {-1, -1}, pp[2] = {-1, -1};
    int rc = 0, c1fd = -1;
    if (l->gone || !l->s)
        return skd_err_set(err, SKD_ENOENT, "the live sandbox has ended");
    if (pipe2(in, O_CLOEXEC) || pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC) ||
        pipe2(st, O_CLOEXEC) || pipe2(pp, O_CLOEXEC)) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: pipes: %s", strerror(errno));
        goto out;
    }
    c->in_fd = in[0];
    c->out_fd = o[1];
    c->err_fd = e[1];
    c->status_fd = st[1];
    c->pid_pipe = pp[1];
    c->ns_pidfd = l->s->pidfd;
    int ncg = skd__cgroup_join_fds(l->s->cg, c->cg_fds,
                                   (int)(sizeof(c->cg_fds) / sizeof(c->cg_fds[0])), err);
    if (ncg < 0) {
        rc = ncg;
        goto out;
    }
    c->ncg = ncg;
    x->oom_before = skd__cgroup_oom_count(l->s->cg);
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)&c1fd;
    ca.exit_signal = SIGCHLD;
    if (skd__cgroup_clone_fd(l->s->cg) >= 0) {
        ca.flags |= CLONE_INTO_CGROUP;
        ca.cgroup = (uint64_t)skd__cgroup_clone_fd(l->s->cg);
    }
    pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid == 0)
        skd__native_enter_main(c);
    while (c->ncg > 0)
        close(c->cg_fds[--c->ncg]);
    if (pid < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: clone3: %s", strerror(errno));
        goto out;
    }
    close_fd(&in[0]), close_fd(&o[1]), close_fd(&e[1]), close_fd(&st[1]), close_fd(&pp[1]);
    /* The entering process reports the command's pid and exits at once. */
    int cpid = 0;
    ssize_t n;
    do
        n = read(pp[0], &cpid, sizeof(cpid));
    while (n < 0 && errno == EINTR);
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    waitid((idtype_t)P_PIDFD, (id_t)c1fd, &si, WEXITED);
    if (n != (ssize_t)sizeof(cpid) || cpid <= 0) {
        char msg[SKD_ERR_MSG_MAX];
        ssize_t m = read(st[0], msg, sizeof(msg) - 1);
        msg[m > 0 ? m : 0] = '\0';
        rc = skd_err_set(err, SKD_ESANDBOX, "%s",
                         m > 0 ? msg : "native sandbox: could not enter the live sandbox");
        goto out;
    }
    /* The relay's parent is this process (CLONE_PARENT): its pid cannot be
     * reused before we reap it. */
    x->pidfd = (int)syscall(SYS_pidfd_open, cpid, 0);
    if (x->pidfd < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: pidfd_open: %s", strerror(errno));
        kill(cpid, SIGKILL);
        waitpid(cpid, NULL, 0);
        goto out;
    }
    int pfd = fcntl(x->pidfd, F_DUPFD_CLOEXEC, 3);
    if (pfd < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: dup: %s", strerror(errno));
        syscall(SYS_pidfd_send_signal, x->pidfd, SIGKILL, NULL, 0);
        waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &si, WEXITED);
        goto out;
    }
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(o[0], F_SETFL, O_NONBLOCK);
    fcntl(e[0], F_SETFL, O_NONBLOCK);
    fcntl(st[0], F_SETFL, O_NONBLOCK);
    *out = (skd__spawned){.pidfd = pfd,
                          .stdin_fd = in[1],
                          .stdout_fd = o[0],
                          .stderr_fd = e[0],
                          .status_fd = st[0],
                          .egress_fd = -1};
    in[1] = o[0] = e[0] = st[0] = -1;
out:
    if (c1fd >= 0)
        close(c1fd);
    close_fd(&in[0]), close_fd(&in[1]), close_fd(&o[0]), close_fd(&o[1]);
    close_fd(&e[0]), close_fd(&e[1]), close_fd(&st[0]), close_fd(&st[1]);
    close_fd(&pp[0]), close_fd(&pp[1]);
    return rc;
}

static void lexec_kill(void *state)
{
    struct lexec *x = state;
    if (x->pidfd >= 0) /* the command's pid namespace goes with it */
        syscall(SYS_pidfd_send_signal, x->pidfd, SIGKILL, NULL, 0);
}

static void lexec_cleanup(void *state, skd__outcome *out)
{
    struct lexec *x = state;
    if (!x)
        return;
    if (out && x->l->s && skd__cgroup_oom_count(x->l->s->cg) > x->oom_before)
        out->oom_killed = 1;
    if (out && !x->l->gone) /* what it wrote is read by file_read right after */
        skd__native_live_commit(x->l, out);
    if (x->pidfd >= 0)
        close(x->pidfd);
    for (struct lexec **pp = &x->l->execs; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    skd__live_unref(x->l);
    free(x);
}

const skd__provider skd__provider_native_live = {
    .name = "native",
    .detect = skd__native_detect,
    .prepare = lexec_prepare,
    .spawn = lexec_spawn,
    .kill = lexec_kill,
    .cleanup = lexec_cleanup,
};
