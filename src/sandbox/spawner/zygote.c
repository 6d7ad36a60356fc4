/*
 * The zygote (DESIGN.md, "Processes and privileges"): forked by the server
 * at start-up, before any thread and before the server drops root, it only
 * forks spawners (spawner.c): the first at once, and a new one whenever the
 * server asks (REQ_NEW_SPAWNER) because the last one died. It also holds
 * the directory of this server's paused sandboxes once a spawner made it,
 * and removes the containers a killed spawner left. Both it and its
 * spawners die with their parent (PR_SET_PDEATHSIG plus a check of the
 * parent pid).
 */
#include "sandbox/native/native_snap.h"
#include "sandbox/provider.h"
#include "sandbox/spawner/spawner.h"
#include "sandbox/spawner/spawner_proto.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Die with the parent, and make sure it has not died already. */
static void tie_to_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent)
        _exit(0);
}

static void keep_only_fd(int keep)
{
    if (dup2(keep, 3) != 3)
        _exit(127);
    syscall(SYS_close_range, 4U, ~0U, 0U);
}

static void default_signals(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN); /* a terminal's ^C is for the server */
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
}

static pid_t last_spawner;

/* Fork a helper process (the spawner or the zygote) that runs main_fn on
 * its end of a new SOCK_SEQPACKET pair, as fd 3, with nothing else open. */
static int fork_helper(const skd__spawner_conf *conf, const char *name,
                       void (*main_fn)(const skd__spawner_conf *, int), int *sock_out,
                       pid_t *pid_out)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    pid_t me = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        tie_to_parent(me);
        close(sv[0]);
        keep_only_fd(sv[1]);
        default_signals();
        prctl(PR_SET_NAME, name, 0, 0, 0);
        main_fn(conf, 3);
        _exit(127); /* main_fn does not return */
    }
    close(sv[1]);
    *sock_out = sv[0];
    *pid_out = pid;
    return 0;
}

/* In the zygote: a new spawner (its own ctrl socket is not inherited:
 * fork_helper keeps nothing but the new pair's end). */
static int fork_spawner(const skd__spawner_conf *conf)
{
    int fd;
    return fork_helper(conf, "skilld-spawner", skd__spawner_main, &fd, &last_spawner) == 0 ? fd
                                                                                           : -1;
}

__attribute__((noreturn)) static void zygote_main(const skd__spawner_conf *conf0, int ctrl)
{
    /* Its spawners save paused sandboxes in a directory of this server's
     * (native_snap.c): named here, made by a spawner at the first pause,
     * held by its lock from then on (by this process once that spawner is
     * gone) and removed when the server goes. */
    static skd__spawner_conf own;
    own = *conf0;
    own.snap_dir[0] = '\0';
    const skd__spawner_conf *conf = &own;
    if (strcmp(conf->runtime, "native") == 0 || strcmp(conf->runtime, "auto") == 0 ||
        strcmp(conf->runtime, "docker") == 0 || strcmp(conf->runtime, "podman") == 0)
        skd__snap_instance_name(own.data_dir, own.snap_dir, sizeof(own.snap_dir));
    int snap_lock = -1;
    for (;;) {
        struct pollfd p = {.fd = ctrl, .events = POLLIN};
        int n = poll(&p, 1, 1000);
        int st = 0;
        while (waitpid(-1, &st, WNOHANG) > 0) {
            if (snap_lock < 0)
                snap_lock = skd__snap_instance_hold(own.snap_dir);
            /* A spawner that was killed could not stop its containers
             * (native sandboxes die with it): remove what it left. */
            if (WIFSIGNALED(st)) {
                skd__containers_reap_leftovers("docker", 0);
                skd__containers_reap_leftovers("podman", 0);
            }
        }
        if (n <= 0)
            continue;
        skd__spawn_msg m;
        skd_err err = {0};
        int rc = skd__spawn_recv(ctrl, &m, &err);
        if (rc == SKD_ENOENT || rc == SKD_ESANDBOX) {
            /* The server is gone: its spawners see EOF too and clean up;
             * wait for them, so none is left for init to reap. */
            while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
            skd__snap_instance_end(own.snap_dir, snap_lock);
            _exit(0);
        }
        skd__spawn_out o;
        if (rc == 0 && m.type == SKD__REQ_NEW_SPAWNER) {
            int fd = fork_spawner(conf);
            if (fd >= 0) {
                skd__spawn_out_init(&o, SKD__REP_OK, (uint64_t)last_spawner);
                skd__spawn_out_fd(&o, fd, SKD__FD_SOCKET);
            } else {
                skd__spawn_out_init(&o, SKD__REP_ERROR, 0);
                skd__spawn_out_i32(&o, SKD__T_CODE, SKD_ESANDBOX);
                skd__spawn_out_str(&o, SKD__T_MESSAGE, "sandbox spawner: cannot fork");
            }
            skd__spawn_send(ctrl, &o, &err);
            skd__spawn_out_free(&o);
            if (fd >= 0)
                close(fd);
        } else {
            skd__spawn_out_init(&o, SKD__REP_ERROR, 0);
            skd__spawn_out_i32(&o, SKD__T_CODE, SKD_EINVAL);
            skd__spawn_out_str(&o, SKD__T_MESSAGE, "sandbox zygote: unexpected message");
            skd__spawn_send(ctrl, &o, &err);
            skd__spawn_out_free(&o);
        }
        if (rc == 0)
            skd__spawn_msg_free(&m);
    }
}

int skd__spawner_fork(const skd__spawner_conf *conf, int *sock_out, pid_t *pid_out)
{
    return fork_helper(conf, "skilld-spawner", skd__spawner_main, sock_out, pid_out);
}

int skd__zygote_fork(const skd__spawner_conf *conf, int *ctrl_out, pid_t *pid_out)
{
    return fork_helper(conf, "skilld-zygote", zygote_main, ctrl_out, pid_out);
}
