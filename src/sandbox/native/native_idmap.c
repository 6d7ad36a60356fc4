/*
 * The native provider's identities: the id maps of a sandbox's user
 * namespace, and the user namespace whose only mapping is the workspaces'
 * on-disk owner -> the sandbox user, which the idmapped workspace mount
 * uses (native.h has the identity scheme). Rootless, a probe that an
 * unprivileged user namespace may be made at all.
 */
#include "sandbox/native/native_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

int skd__native_write_map(pid_t pid, const char *file, const char *map)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
    return skd_write_small(AT_FDCWD, p, 0, map) ? -1 : 0;
}

/* The child of skd__native_make_idmap_userns: it shares our memory (CLONE_VM), so only
 * raw system calls (STYLE.md 14): wait for the pipe to close, and exit. */
struct idmap_child {
    int rd, wr;
};

static int idmap_child_main(void *arg)
{
    const struct idmap_child *c = arg;
    char b;
    syscall(SYS_close, c->wr);
    syscall(SYS_read, c->rd, &b, 1);
    syscall(SYS_exit, 0);
    return 0;
}

/* 1 under valgrind (its documented client request, where its header was
 * there at build time; the test ring installs it). */
static int under_valgrind(void)
{
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
    return RUNNING_ON_VALGRIND != 0;
#endif
#endif
    return 0;
}

/* A user namespace whose only mapping is the workspaces' on-disk owner (the
 * server's user) -> the sandbox user's host id, for the idmapped workspace
 * mount. Made once by a short-lived child that waits on a pipe while its
 * namespace is opened. The child shares our memory (CLONE_VM) instead of
 * copying it: a copy of the address space (the whole CLI's, for skilld
 * exec) and its teardown at the child's exit were most of what this took. */
int skd__native_make_idmap_userns(void)
{
    static char stack[16384] __attribute__((aligned(16)));
    int p[2], fd = -1;
    char map[64];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    struct idmap_child c = {p[0], p[1]};
    /* Born with every signal blocked (as posix_spawn does): a handler of
     * ours run by the child would run on memory we share. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid;
    if (under_valgrind()) {
        /* valgrind ends the whole process at a clone with CLONE_VM that
         * is neither a thread nor a vfork: a copy, as before. */
        pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
            idmap_child_main(&c);
    } else {
        pid =
            clone(idmap_child_main, stack + sizeof(stack), CLONE_VM | CLONE_NEWUSER | SIGCHLD, &c);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    char gmap[64];
    snprintf(map, sizeof(map), "%u %u 1\n", skd__nat.owner_uid,
             SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID);
    snprintf(gmap, sizeof(gmap), "%u %u 1\n", skd__nat.owner_gid,
             SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID);
    if (skd__native_write_map(pid, "uid_map", map) == 0 &&
        skd__native_write_map(pid, "gid_map", gmap) == 0) {
        char ns[64];
        snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)pid);
        fd = open(ns, O_RDONLY | O_CLOEXEC);
    }
    int saved = errno;
    close(p[1]);
    /* Reaped before we return: the child runs on the static stack. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    errno = saved;
    return fd;
}

/* Rootless: a user namespace may be made at all (probed with a child that
 * exits at once). */
int skd__native_probe_userns(void)
{
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return -1;
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}
