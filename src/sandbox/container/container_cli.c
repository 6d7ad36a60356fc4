/*
 * Process plumbing for the container providers: find the engine's client
 * binary, run one short engine command with a deadline and captured
 * output, fork the long-lived client of a run, and fork the kill helper.
 *
 * Trust: the engine binary found on the server's PATH is trusted (it is
 * root-equivalent anyway). Its output is not: it is read into fixed
 * buffers, the rest dropped. Children are forked from a multi-threaded
 * process, so between fork and exec only async-signal-safe calls are made
 * (dup2, close_range, prctl, execve, waitpid, poll, raw syscalls, _exit);
 * every argv is built before fork.
 */
#include "sandbox/container/container.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "skilld/util.h"

extern char **environ;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static pthread_mutex_t bin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[16];
    char bin[SKD__CTR_BIN_MAX];
} bin_cache[4];

static int find_on_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && path[0] == '/') {
            int n = snprintf(out, cap, "%.*s/%s", (int)len, path, name);
            if (n > 0 && (size_t)n < cap && access(out, X_OK) == 0)
                return 0;
        }
        path += len;
        if (*path == ':')
            path++;
    }
    return -1;
}

int skd__engine_resolve(const char *name, skd__engine *e, skd_err *err)
{
    int rc = 0;
    e->name = name;
    e->bin[0] = '\0';
    pthread_mutex_lock(&bin_lock);
    size_t i;
    for (i = 0; i < sizeof(bin_cache) / sizeof(bin_cache[0]); i++) {
        if (strcmp(bin_cache[i].name, name) == 0) {
            skd_strlcpy(e->bin, bin_cache[i].bin, sizeof(e->bin));
            goto out;
        }
        if (!bin_cache[i].name[0])
            break;
    }
    if (find_on_path(name, e->bin, sizeof(e->bin)) != 0) {
        e->bin[0] = '\0';
        rc = skd_err_set(err, SKD_ESANDBOX, "%s is not installed (no '%s' on PATH)", name, name);
        goto out;
    }
    if (i < sizeof(bin_cache) / sizeof(bin_cache[0])) {
        skd_strlcpy(bin_cache[i].name, name, sizeof(bin_cache[i].name));
        skd_strlcpy(bin_cache[i].bin, e->bin, sizeof(bin_cache[i].bin));
    }
out:
    pthread_mutex_unlock(&bin_lock);
    return rc;
}

/* In the child: make in/out/err the standard descriptors, close the rest.
 * Async-signal-safe only. */
static void child_fds(int in_fd, int out_fd, int err_fd)
{
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(126);
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    }
}

pid_t skd__ctr_fork_exec(char *const *argv, int in_fd, int out_fd, int err_fd, const char *cwd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* Child. Die with the thread that forked us; if that already happened
     * before prctl, the parent pid changed: give up. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    child_fds(in_fd, out_fd, err_fd);
    if (chdir(cwd ? cwd : "/") != 0)
        _exit(126);
    execve(argv[0], argv, environ);
    _exit(127);
}

static void drain(int fd, char *buf, size_t cap, size_t *used, int *open_)
{
    char tmp[4096];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n > 0) {
            size_t room = cap - 1 - *used;
            size_t k = (size_t)n < room ? (size_t)n : room;
            memcpy(buf + *used, tmp, k);
            *used += k;
            buf[*used] = '\0';
            continue;
        }
        if (n == 0 || (errno != EINTR && errno != EAGAIN))
            *open_ = 0;
        if (n < 0 && errno == EINTR)
            continue;
        return;
    }
}

int skd__ctr_run(const skd__engine *e, const char *const *args, int64_t timeout_ms, skd__ctr_cmd *r,
                 skd_err *err)
{
    char *argv[64];
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, devnull = -1, rc = 0;
    pid_t pid = -1;
    size_t n = 0, out_used = 0, err_used = 0;

    r->status = -1;
    r->out[0] = r->errout[0] = '\0';
    argv[n++] = (char *)e->bin;
    for (; args[n - 1] && n < sizeof(argv) / sizeof(argv[0]) - 1; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    if (args[n - 1])
        return skd_err_set(err, SKD_EINTERNAL, "too many arguments for %s", e->name);

    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(po, O_CLOEXEC | O_NONBLOCK) != 0 ||
        pipe2(pe, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "cannot run %s: %s", e->name, strerror(errno));
        goto out;
    }
    pid = skd__ctr_fork_exec(argv, devnull, po[1], pe[1], NULL);
    if (pid < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "cannot fork %s: %s", e->name, strerror(errno));
        goto out;
    }
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;

    int64_t deadline = skd_mono_ms() + timeout_ms;
    int out_open = 1, err_open = 1;
    while (out_open || err_open) {
        int64_t left = deadline - skd_mono_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            rc = skd_err_set(err, SKD_ETIMEOUT, "%s %s did not answer within %lld ms", e->name,
                             args[0], (long long)timeout_ms);
            break;
        }
        struct pollfd pf[2] = {{out_open ? po[0] : -1, POLLIN, 0},
                               {err_open ? pe[0] : -1, POLLIN, 0}};
        int k = poll(pf, 2, (int)(left > 1000 ? 1000 : left));
        if (k < 0 && errno != EINTR)
            break;
        if (k <= 0)
            continue;
        if (pf[0].revents)
            drain(po[0], r->out, sizeof(r->out), &out_used, &out_open);
        if (pf[1].revents)
            drain(pe[0], r->errout, sizeof(r->errout), &err_used, &err_open);
    }
    /* Output closed: the client is exiting (or was killed above). One that
     * closed its output but lingers is killed at the deadline. */
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        if (w == 0 && skd_mono_ms() >= deadline && rc == 0) {
            kill(pid, SIGKILL);
            rc = skd_err_set(err, SKD_ETIMEOUT, "%s %s did not exit within %lld ms", e->name,
                             args[0], (long long)timeout_ms);
        }
        if (w == 0)
            usleep(2000);
    }
    if (rc == 0)
        r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc == 0 && r->status == 127 && !r->out[0] && !r->errout[0])
        rc = skd_err_set(err, SKD_ESANDBOX, "cannot execute %s", e->bin);
out:
    if (devnull >= 0)
        close(devnull);
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    return rc;
}

const char *skd__ctr_errline(char *buf)
{
    size_t len = strlen(buf);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    static const char *const prefixes[] = {"Error: ", "Error response from daemon: ", "Error "};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t pl = strlen(prefixes[i]);
        if (strncmp(line, prefixes[i], pl) == 0)
            line += pl;
    }
    return line;
}

pid_t skd__ctr_kill_helper(char *const *argv, int watch_pidfd, int grace_ms)
{
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        return -1;
    pid_t pid = fork();
    if (pid != 0) {
        close(devnull);
        return pid;
    }
    /* Helper child: async-signal-safe calls only. Keep nothing of the
     * server but the watched pidfd (as fd 3): a copy of another run's
     * stdin pipe held here would delay that run's EOF. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
        _exit(1);
    if (watch_pidfd >= 0) {
        if (watch_pidfd != 3 && dup2(watch_pidfd, 3) < 0)
            _exit(1);
        watch_pidfd = 3;
    }
    if (syscall(SYS_close_range, watch_pidfd >= 0 ? 4U : 3U, ~0U, 0U) != 0)
        _exit(1);
    devnull = 0;
    pid_t k = fork();
    if (k == 0) {
        syscall(SYS_close_range, 3U, ~0U, 0U);
        execve(argv[0], argv, environ);
        _exit(127);
    }
    if (k > 0) {
        int st;
        while (waitpid(k, &st, 0) < 0 && errno == EINTR)
            ;
    }
    if (watch_pidfd >= 0) {
        struct pollfd pf = {watch_pidfd, POLLIN, 0};
        int n;
        while ((n = poll(&pf, 1, grace_ms)) < 0 && errno == EINTR)
            ;
        if (n == 0) /* the client is still there: cut it off */
            syscall(SYS_pidfd_send_signal, watch_pidfd, SIGKILL, NULL, 0);
    }
    _exit(0);
}

/* Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. */
static int proc_start_time(long pid, unsigned long long *out)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (skd_read_small(AT_FDCWD, path, 0, buf, sizeof(buf), NULL))
        return -1;
    char *p = strrchr(buf, ')'); /* comm (field 2) may hold spaces and parentheses */
    if (!p)
        return -1;
    p++; /* the blank before field 3 */
    /* Step to the blank before field 22. (Stepping one further read field
     * 23, vsize, which changes as the process allocates: a live skilld
     * then looked dead to another one, whose leftover sweep removed its
     * running container — the container exited 137, not timed out.) */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return -1;
    char *end;
    errno = 0;
    *out = strtoull(p + 1, &end, 10);
    return (errno || end == p + 1) ? -1 : 0;
}

/* The inode of this process's pid namespace (0 when unknown). */
static unsigned long long pid_ns_ino(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

const char *skd__ctr_owner(void)
{
    static char owner[96];
    pthread_mutex_lock(&bin_lock);
    if (!owner[0]) {
        unsigned long long st = 0;
        long pid = (long)getpid();
        proc_start_time(pid, &st);
        snprintf(owner, sizeof(owner), "%ld-%llu-%llu", pid, st, pid_ns_ino());
    }
    pthread_mutex_unlock(&bin_lock);
    return owner;
}

int skd__ctr_owner_alive(const char *owner)
{
    long long pid = 0;
    unsigned long long start = 0, ns = 0, st = 0;
    int used = 0;
    if (!owner)
        return 0;
    int n = sscanf(owner, "%lld-%llu%n-%llu%n", &pid, &start, &used, &ns, &used);
    if (n < 2 || owner[used] != '\0' || pid < 1 || pid > 4194304)
        return 0;
    /* Another pid namespace (a replica in its own container sharing the
     * engine): its pids mean nothing here, so it counts as alive. */
    if (n == 3 && ns != pid_ns_ino())
        return 1;
    return proc_start_time((long)pid, &st) == 0 && st == start;
}
