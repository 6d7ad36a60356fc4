/*
 * Live sandboxes on the docker and podman runtimes (docs/containers.md,
 * "Live sandboxes"): a container that stays up, and an `exec` into it for
 * every command. Spawner-only, one thread, as native_live.c.
 *
 *   create  `create --rm` with every limit of the sandbox (docker_args.c,
 *           the same flags as a one-shot run: --memory, --pids-limit,
 *           --cpus, --network none, ...), then `start`, then with
 *           networkEnabled the egress proxy's socket placed in its network
 *           namespace exactly as for a one-shot run. Its command, under the
 *           engine's --init, is `sh -c 'read _ </.skilld-hold'`: it reads a
 *           FIFO whose only writer is this process. When the spawner closes
 *           it (delete, shutdown) or dies (kill -9 of the server: the
 *           spawner dies with it), the read ends, the container stops and
 *           --rm removes it. The owner label lets a later skilld reap one
 *           that an engine failed to remove.
 *   exec    a run of skd__provider_ctr_live: `exec -i --user 65534:65534
 *           --workdir cwd --env SKILLD_EXEC=<run id> ... skilld-<id> sh -c
 *           '"$@"; exit $?' sh argv...`. The engine makes the exec's first
 *           process (the sh, which stays) the leader of a new session.
 *   kill    from the host, never through the engine: the run id is first
 *           appended to the sandbox's list of ended execs (an exec that
 *           the engine has not started yet reads it and exits at once);
 *           then every process in the container's pid namespace whose
 *           initial environment holds the run's SKILLD_EXEC marker, or
 *           whose session is one such process's, gets SIGKILL by pidfd;
 *           then the client. A `docker
 *           exec` client that is killed leaves its process running, and a
 *           second exec to kill it would block the supervisor for an engine
 *           call; /proc is read at once. A process that both leaves the
 *           session (setsid) and drops the marker (env -i) escapes a kill
 *           of its exec and lives until its sandbox ends.
 *   delete  the FIFO closed and `rm -f`: no container is left.
 *
 * Trust: as docker.c (the engine is trusted, the sandbox is not). The
 * marker and the sessions are read from /proc of the host; a sandbox can
 * only hide its own processes from its own exec's kill.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/container/container_live.h"
#include "sandbox/container/docker_int.h"
#include "sandbox/native/native_snap.h"
#include "skilld/log.h"
#include "skilld/util.h"

struct clive {
    struct clive *next;
    char id[SKD_UUID_LEN + 1];
    ctr_state *s;   /* engine, name, run directory, workspace lent */
    int hold_fd;    /* the FIFO's write end: the container lives while it is open */
    int egress_fd;  /* networkEnabled: its proxy socket until the spawner takes it */
    ino_t pidns;    /* the container's pid namespace, for kills of its execs */
    int init_pidfd; /* its first process: once that has exited, the sandbox has ended */
    long long pid;  /* that process's pid (host's), for its /tmp (container_snap.c) */
    int root_ro;    /* its root filesystem is read-only (--read-only): /tmp is all it writes */
    char *ws;       /* the workspace lent to the sandbox uid, or NULL */
};

static struct clive *lives;
static size_t nlives;

static struct clive *find(const char *id)
{
    for (struct clive *l = lives; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

size_t skd__ctr_live_count(void)
{
    return nlives;
}

/* Remove the container (and wait for the engine to say so), close what it
 * held, free l. */
static void clive_free(struct clive *l)
{
    if (l->hold_fd >= 0)
        close(l->hold_fd);
    if (l->init_pidfd >= 0)
        close(l->init_pidfd);
    if (l->egress_fd >= 0)
        close(l->egress_fd);
    if (l->s && l->s->name[0]) {
        skd__ctr_cmd *r = calloc(1, sizeof(*r));
        const char *rm[] = {"rm", "-f", l->s->name, NULL};
        if (r && (skd__ctr_run(&l->s->eng, rm, SHORT_TIMEOUT_MS, r, NULL) != 0 || r->status != 0))
            skd_log(SKD_LOG_WARN, "%s rm -f %s failed: %s", l->s->eng.name, l->s->name,
                    skd__ctr_errline(r->errout));
        free(r);
    }
    if (l->ws) {
        skd__ctr_ws_release(l->ws);
        free(l->ws);
    }
    if (l->s) {
        if (l->s->rundir[0])
            skd__ctr_rundir_remove(l->s->id);
        free(l->s);
    }
    free(l);
}

/* The FIFO the container's init reads: mode 0644 so that the sandbox user
 * may open it for reading only; this process holds the one writer. */
static int hold_make(struct clive *l, skd_err *err)
{
    char path[160], ended[160];
    int fd = -1;
    snprintf(path, sizeof(path), "%s/%s", l->s->rundir, SKD__CTR_LIVE_HOLD);
    snprintf(ended, sizeof(ended), "%s/%s", l->s->rundir, SKD__CTR_LIVE_ENDED);
    unlink(path);
    if (mkfifo(path, 0600) != 0 || chmod(path, 0644) != 0 ||
        (l->hold_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0 ||
        (fd = open(ended, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0 ||
        fchmod(fd, 0644) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return skd_err_set(err, SKD_ESANDBOX, "%s live sandbox: cannot make %s: %s", l->s->eng.name,
                           l->hold_fd < 0 ? path : ended, strerror(e));
    }
    close(fd);
    return 0;
}

/* Start the created container and learn its pid namespace. */
static int start_it(struct clive *l, skd_err *err)
{
    skd__ctr_cmd *r = calloc(1, sizeof(*r));
    int rc;
    if (!r)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    const char *st[] = {"start", l->s->name, NULL};
    rc = skd__ctr_run(&l->s->eng, st, CREATE_TIMEOUT_MS, r, err);
    if (rc == 0 && r->status != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "%s could not start the live sandbox: %s",
                         l->s->eng.name, skd__ctr_errline(r->errout));
    free(r);
    if (rc)
        return rc == SKD_ETIMEOUT ? SKD_ESANDBOX : rc;
    long long pid = skd__ctr_container_pid(l->s);
    char path[64];
    struct stat st_ns;
    snprintf(path, sizeof(path), "/proc/%lld/ns/pid", pid);
    if (pid <= 0 || stat(path, &st_ns) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "%s live sandbox: the container has no process",
                           l->s->eng.name);
    l->pidns = st_ns.st_ino;
    l->pid = pid;
    if ((l->init_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0)) < 0)
        return skd_err_set(err, SKD_ESANDBOX, "%s live sandbox: pidfd_open: %s", l->s->eng.name,
                           strerror(errno));
    fcntl(l->init_pidfd, F_SETFD, FD_CLOEXEC);
    return 0;
}

/* Everything up to the create command: the engine, the request, the run
 * directory (egress files, the hold FIFO), the workspace. */
static int ready(struct clive *l, const char *engine, const skd__sandbox_req *req, skd_err *err)
{
    ctr_state *s = l->s;
    int rc;
    if ((rc = skd__engine_resolve(engine, &s->eng, err)) != 0 ||
        (rc = skd__ctr_detect_cached(engine, err)) != 0 ||
        (rc = skd__ctr_check_req(engine, req, err)) != 0)
        return rc;
    skd__containers_reap_once(engine);
    snprintf(s->name, sizeof(s->name), "skilld-%s", req->id);
    skd_strlcpy(s->id, req->id, sizeof(s->id));
    if ((rc = skd__ctr_rundir_make(s, err)) != 0 || (rc = hold_make(l, err)) != 0)
        return rc;
    if (s->network && (rc = skd__ctr_rundir_egress_files(s, req, err)) != 0)
        return rc;
    if (req->workspace) {
        if (!(l->ws = strdup(req->workspace)))
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        if ((rc = skd__ctr_ws_acquire(l->ws, err)) != 0) {
            free(l->ws);
            l->ws = NULL;
            return rc;
        }
    }
    return 0;
}

int skd__ctr_live_create(const char *engine, const skd__sandbox_req *req, const char *restore,
                         skd_err *err)
{
    struct clive *l = calloc(1, sizeof(*l));
    skd__ctr_argv a = {0};
    skd__ctr_cmd *r = NULL;
    int rc, snap = -1;
    if (!l || !(l->s = calloc(1, sizeof(*l->s)))) {
        free(l);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    l->hold_fd = l->egress_fd = l->init_pidfd = -1;
    l->s->client = l->s->killer = -1;
    l->s->client_pidfd = -1;
    l->s->live = 1;
    /* The memory limit on the container's own cgroup (never podman's v1
     * parent of one-shot runs): the sandbox sees it there. */
    l->s->network = req->cfg->network_enabled;
    l->root_ro = req->cfg->read_only;
    skd_strlcpy(l->id, req->id, sizeof(l->id));
    if (find(req->id)) {
        rc = skd_err_set(err, SKD_EINVAL, "sandbox spawner: live sandbox %s exists", req->id);
        goto out;
    }
    /* Resumed or forked: the saved /tmp goes into the started container. */
    if (restore && (snap = skd__snap_open(restore, 0, err)) < 0) {
        rc = snap == SKD_ENOENT ? SKD_ELOST : snap; /* its files are gone: so is it */
        snap = -1;
        goto out;
    }
    if ((rc = ready(l, engine, req, err)) != 0 ||
        (rc = skd__ctr_create_argv(l->s, req, &a, err)) != 0)
        goto out;
    if (!(r = calloc(1, sizeof(*r)))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = skd__ctr_run_create(l->s, &a, r, err)) != 0 || (rc = start_it(l, err)) != 0)
        goto out;
    if (l->s->network && (rc = skd__ctr_place_egress(l->s, &l->egress_fd, err)) != 0)
        goto out;
    if (snap >= 0 && (rc = skd__ctr_snap_restore_tmp(l->s, l->pid, l->init_pidfd, snap,
                                                     SKD__SNAP_INTO_TMPFS, err)))
        goto out;
out:
    free(r);
    skd__ctr_argv_free(&a);
    if (snap >= 0)
        close(snap);
    if (rc) {
        clive_free(l); /* rm -f: a create that failed half-way leaves nothing */
        return rc;
    }
    l->next = lives;
    lives = l;
    nlives++;
    return 0;
}

ctr_state *skd__ctr_live_state(const char *id, long long *pid, int *init_pidfd, int *root_ro)
{
    struct clive *l = find(id);
    struct pollfd p = {.fd = l ? l->init_pidfd : -1, .events = POLLIN};
    if (!l || poll(&p, 1, 0) > 0) /* it ended on its own */
        return NULL;
    *pid = l->pid;
    *init_pidfd = l->init_pidfd;
    *root_ro = l->root_ro;
    return l->s;
}

int skd__ctr_live_take_egress(const char *id)
{
    struct clive *l = find(id);
    int fd = l ? l->egress_fd : -1;
    if (l)
        l->egress_fd = -1;
    return fd;
}

int skd__ctr_live_delete(const char *id)
{
    for (struct clive **pp = &lives; *pp; pp = &(*pp)->next) {
        struct clive *l = *pp;
        if (strcmp(l->id, id) != 0)
            continue;
        *pp = l->next;
        nlives--;
        clive_free(l);
        return 0;
    }
    return -1;
}

void skd__ctr_live_drop_all(void)
{
    while (lives) {
        struct clive *l = lives;
        lives = l->next;
        nlives--;
        clive_free(l);
    }
}

/* ---- an exec: a run of skd__provider_ctr_live ---------------------------- */

typedef struct cexec {
    skd__ctr_argv argv; /* the engine's exec command */
    pid_t client;
    int client_pidfd;
    ino_t pidns;
    char marker[16 + SKD_UUID_LEN]; /* SKILLD_EXEC=<run id> */
    char ended[160];                /* the sandbox's list of ended execs */
    int killed;
} cexec;

static int cx_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    struct clive *l = req->live ? find(req->live) : NULL;
    struct pollfd p = {.fd = l ? l->init_pidfd : -1, .events = POLLIN};
    /* Its container ended on its own (its init was killed from inside):
     * --rm removed it, and the server ends the record on SKD_ENOENT. */
    if (!l || poll(&p, 1, 0) > 0)
        return skd_err_set(err, SKD_ENOENT, "no such live sandbox");
    cexec *x = calloc(1, sizeof(*x));
    if (!x)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    x->client = -1;
    x->client_pidfd = -1;
    x->pidns = l->pidns;
    snprintf(x->marker, sizeof(x->marker), "SKILLD_EXEC=%s", req->id);
    snprintf(x->ended, sizeof(x->ended), "%s/%s", l->s->rundir, SKD__CTR_LIVE_ENDED);
    skd__ctr_argv *a = &x->argv;
    skd__ctr_argv_add(a, l->s->eng.bin);
    skd__ctr_argv_add(a, "exec");
    skd__ctr_argv_add(a, "-i");
    skd__ctr_argv_addf(a, "--user=%d:%d", SKD__CTR_UID, SKD__CTR_UID);
    skd__ctr_argv_addf(a, "--workdir=%s", req->cwd ? req->cwd : "/tmp");
    skd__ctr_argv_addf(a, "--env=%s", x->marker);
    for (size_t i = 0; req->envp && req->envp[i]; i++)
        skd__ctr_argv_addf(a, "--env=%s", req->envp[i]);
    skd__ctr_argv_add(a, l->s->name);
    /* sh stays the session's leader (no exec of the last command), so the
     * marker stays in the leader's initial environment. Its $0 is the run
     * id, looked for in the list of ended execs before anything runs. */
    skd__ctr_argv_add(a, "sh");
    skd__ctr_argv_add(a, "-c");
    skd__ctr_argv_add(
        a, "while read -r k; do [ \"$k\" = \"$0\" ] && exit 137; done <" SKD__CTR_LIVE_ENDED_AT
           "; \"$@\"; exit $?");
    skd__ctr_argv_add(a, req->id);
    for (size_t i = 0; req->argv[i]; i++)
        skd__ctr_argv_add(a, req->argv[i]);
    if (a->oom) {
        skd__ctr_argv_free(a);
        free(x);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    *state = x;
    return 0;
}

static int cx_spawn(void *state, skd__spawned *out, skd_err *err)
{
    cexec *x = state;
    *out = (skd__spawned)SKD__SPAWNED_NONE;
    return skd__ctr_spawn_client(x->argv.v, NULL, &x->client, &x->client_pidfd, out, err);
}

/* 1 when /proc/<pid>/environ holds marker as one entry. */
static int has_marker(int procfd, const char *pid, const char *marker)
{
    char path[300], buf[16384];
    snprintf(path, sizeof(path), "%s/environ", pid);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    size_t ml = strlen(marker);
    for (ssize_t i = 0; n > 0 && i < n;) {
        size_t el = strnlen(buf + i, (size_t)(n - i));
        if (el == ml && memcmp(buf + i, marker, ml) == 0)
            return 1;
        i += (ssize_t)el + 1;
    }
    return 0;
}

/* The session id of pid (field 6 of stat), or -1. */
static long session_of(int procfd, const char *pid)
{
    char path[300], buf[1024];
    snprintf(path, sizeof(path), "%s/stat", pid);
    if (skd_read_small(procfd, path, 0, buf, sizeof(buf), NULL) != 0)
        return -1;
    const char *p = strrchr(buf, ')');
    long ppid, pgrp, sid;
    char st;
    if (!p || sscanf(p + 1, " %c %ld %ld %ld", &st, &ppid, &pgrp, &sid) != 4)
        return -1;
    return sid;
}

/* One pass over /proc for the processes of the container's pid namespace:
 * with sids NULL, collect the sessions of marked processes into sids;
 * else SIGKILL the marked ones and those of a session in sids. */
static void scan(cexec *x, int procfd, long *sids, size_t *nsids, size_t cap, int kill_them)
{
    int dfd = dup(procfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    struct dirent *de;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    rewinddir(d); /* the descriptor's offset is shared with the previous pass */
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        char path[300];
        struct stat ns;
        snprintf(path, sizeof(path), "%s/ns/pid", de->d_name);
        if (fstatat(procfd, path, &ns, 0) != 0 || ns.st_ino != x->pidns)
            continue;
        int marked = has_marker(procfd, de->d_name, x->marker);
        long sid = session_of(procfd, de->d_name);
        if (!kill_them) {
            if (marked && sid > 0 && *nsids < cap)
                sids[(*nsids)++] = sid;
            continue;
        }
        int hit = marked;
        for (size_t i = 0; !hit && i < *nsids; i++)
            hit = sids[i] == sid;
        if (!hit)
            continue;
        /* The /proc/<pid> directory is a pidfd for pidfd_send_signal (the
         * spawner may be in a pid namespace of its own, where the host's
         * pid numbers mean nothing to pidfd_open); once it is held, its
         * namespace is checked again, so a reused pid is never hit. */
        int pfd = openat(procfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd >= 0 && fstatat(pfd, "ns/pid", &ns, 0) == 0 && ns.st_ino == x->pidns)
            syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
        if (pfd >= 0)
            close(pfd);
    }
    closedir(d);
}

static void cx_kill(void *state)
{
    cexec *x = state;
    x->killed = 1;
    /* First the list, then /proc: an exec's sh that is not in /proc yet
     * will find its id there. One short O_APPEND write is atomic. */
    char line[SKD_UUID_LEN + 2];
    int n_line = snprintf(line, sizeof(line), "%s\n", x->marker + strlen("SKILLD_EXEC="));
    int efd = open(x->ended, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (efd < 0 || write(efd, line, (size_t)n_line) != n_line)
        skd_log(SKD_LOG_WARN, "live sandbox: cannot note ended exec in %s: %s", x->ended,
                strerror(errno));
    if (efd >= 0)
        close(efd);
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd >= 0) {
        long sids[64];
        size_t n = 0;
        scan(x, procfd, sids, &n, sizeof(sids) / sizeof(sids[0]), 0);
        scan(x, procfd, sids, &n, n, 1);
        close(procfd);
    }
    /* Its processes are gone; the client may still wait on the engine. */
    if (x->client_pidfd >= 0)
        syscall(SYS_pidfd_send_signal, x->client_pidfd, SIGKILL, NULL, 0);
}

static void cx_cleanup(void *state, skd__outcome *o)
{
    cexec *x = state;
    if (o->killed || x->killed) {
        o->exited = 0;
        o->exit_code = 0;
        o->signal = SIGKILL;
    } else if (o->exited && o->exit_code > 128 && o->exit_code < 160) {
        /* The engine and sh report a signal as 128+n. */
        o->exited = 0;
        o->signal = o->exit_code - 128;
        o->exit_code = 0;
    }
    if (x->client_pidfd >= 0)
        close(x->client_pidfd);
    skd__ctr_argv_free(&x->argv);
    free(x);
}

const skd__provider skd__provider_docker_live = {
    .name = "docker",
    .prepare = cx_prepare,
    .spawn = cx_spawn,
    .kill = cx_kill,
    .cleanup = cx_cleanup,
};

const skd__provider skd__provider_podman_live = {
    .name = "podman",
    .prepare = cx_prepare,
    .spawn = cx_spawn,
    .kill = cx_kill,
    .cleanup = cx_cleanup,
};

const skd__provider *skd__ctr_live_provider(const char *id)
{
    struct clive *l = find(id);
    if (!l)
        return NULL;
    return strcmp(l->s->eng.name, "podman") == 0 ? &skd__provider_podman_live
                                                 : &skd__provider_docker_live;
}
