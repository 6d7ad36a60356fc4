/*
 * The docker and podman providers: one implementation driving the engine's
 * command-line client, parameterised by the engine's name. OmniRoute's
 * container flags, plus what it lacks (workspace mount, unprivileged
 * --user, --memory-swap = --memory, ulimits, --init, --pull never, labels,
 * and a kill that is verified).
 *
 * Life of one run (this file; the `create` command line with every limit
 * is docker_args.c's):
 *   prepare  `create -i` the container skilld-<id> with every limit. The
 *            engine validates the limits here, so a limit it cannot apply
 *            fails the run before anything ran (SKD_ESANDBOX with the
 *            engine's message). The workspace is handed to the sandbox uid.
 *   spawn    fork `start -a -i skilld-<id>`: its stdin/stdout/stderr are
 *            the container's; its exit code is the command's.
 *   kill     a forked helper runs `kill --signal KILL skilld-<id>` and, if
 *            the client has not exited after a grace period, SIGKILLs the
 *            client too. Nothing blocks the supervisor.
 *   cleanup  `inspect` for the exit code, OOMKilled and whether the
 *            container ever started, then `rm -f`, then a check that the
 *            container is gone. (Three short engine calls.)
 * The container is created without --rm so that its state can be read
 * before it is removed; cleanup always removes it, and containers of a
 * skilld that died are removed by skd__containers_reap_leftovers.
 *
 * The sandbox user is SKD__CTR_UID:SKD__CTR_UID (65534, nobody). The
 * workspace directory is created root-owned 0700 by the workspace layer,
 * which the sandbox user could not enter; prepare therefore lends the
 * workspace tree to the sandbox uid (chown, walking it by directory
 * descriptors with O_NOFOLLOW, never following a symlink) and cleanup of
 * the last run using it hands it back to its owner (see ws_acquire). The
 * parent directories stay root 0700, so no other host user reaches it.
 * (Docker 20.10 has no idmapped mounts, which native uses instead.)
 *
 * Trust: the engine and its client are trusted (root-equivalent); the
 * command and its output are not. Environment values are passed with -e
 * and are therefore visible in the host's process list for the lifetime of
 * the `create` call.
 */
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/container/docker_int.h"
#include "sandbox/env.h"
#include "sandbox/spawner/egress_place.h"
#include "skilld/image.h"
#include "skilld/log.h"
#include "skilld/util.h"

/* Podman's conmon (4.3 / 2.1) writes its OOM marker as a file "oom" in
 * its working directory, which it inherits from the start client. Each
 * podman run gets a private one, SKD__CTR_RUNDIR/<id>: the marker is then
 * evidence of an OOM kill and is removed with the directory. */

int skd__ctr_rundir_make(ctr_state *s, skd_err *err)
{
    snprintf(s->rundir, sizeof(s->rundir), "%s/%s", SKD__CTR_RUNDIR, s->id);
    if ((mkdir(SKD__CTR_RUNDIR, 0700) != 0 && errno != EEXIST) ||
        (mkdir(s->rundir, 0700) != 0 && errno != EEXIST)) {
        int e = errno;
        s->rundir[0] = '\0';
        return skd_err_set(err, SKD_ESANDBOX, "%s: cannot make %s/%s: %s", s->eng.name,
                           SKD__CTR_RUNDIR, s->id, strerror(e));
    }
    return 0;
}

/* Write text as the file name of the run's directory, mode 0644 (the
 * container's user reads it through a read-only bind). */
static int rundir_put(ctr_state *s, const char *name, const char *text, skd_err *err)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", s->rundir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t len = strlen(text), off = 0;
    while (fd >= 0 && off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    int ok = fd >= 0 && off == len && fchmod(fd, 0644) == 0;
    int e = errno;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    if (!ok)
        return skd_err_set(err, SKD_ESANDBOX, "%s: cannot write %s: %s", s->eng.name, path,
                           strerror(e));
    return 0;
}

/* networkEnabled: the files skilld puts in the sandbox's root natively
 * (the node preload, and with secrets the trust bundle), written to the
 * run's directory for the create command to bind read-only. */
int skd__ctr_rundir_egress_files(ctr_state *s, const skd__sandbox_req *req, skd_err *err)
{
    int rc = rundir_put(s, SKD__CTR_NODE_PRELOAD, skd__sandbox_node_preload, err);
    if (rc == 0 && req->ca_pem) {
        char *text = skd__sandbox_trust_text(req->ca_pem);
        rc = text ? rundir_put(s, SKD__CTR_TRUST_BUNDLE, text, err)
                  : skd_err_set(err, SKD_ENOMEM, "out of memory");
        free(text);
        s->trust = rc == 0;
    }
    return rc;
}

static int rundir_has_oom(const ctr_state *s)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/oom", s->rundir);
    return s->rundir[0] && access(path, F_OK) == 0;
}

static void rundir_remove(ctr_state *s)
{
    if (s->rundir[0])
        skd__ctr_rundir_remove(s->id);
    s->rundir[0] = '\0';
}

/* ---- detect -------------------------------------------------------------- */

/* 1 when word appears in list as a whole word (separated by blanks or
 * brackets). */
static int has_word(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = strstr(list, word); p; p = strstr(p + 1, word)) {
        int before = p == list || strchr(" [", p[-1]);
        int after = p[wl] == '\0' || strchr(" ]\n", p[wl]);
        if (before && after)
            return 1;
    }
    return 0;
}

/* Podman as root drives the kernel's cgroups itself (cgroupfs), so the
 * kernel says what it can limit; `podman info` would take over a second.
 * v1: the cpu, pids and memory hierarchies with swap accounting; v2: the
 * controllers at the root. */
static int podman_cgroups(skd_err *err)
{
    static const char *const v1[] = {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                                     "/sys/fs/cgroup/pids/cgroup.procs",
                                     "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                     "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"};
    if (access(v1[2], F_OK) == 0) {
        for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++)
            if (access(v1[i], F_OK) != 0)
                return skd_err_set(err, SKD_ESANDBOX,
                                   "podman cannot apply every limit here: no %s%s", v1[i],
                                   i == 3 ? " (boot with swapaccount=1)" : "");
        return 0;
    }
    char buf[256];
    (void)skd_read_small(AT_FDCWD, "/sys/fs/cgroup/cgroup.controllers", 0, buf, sizeof(buf), NULL);
    static const char *const need[] = {"cpu", "memory", "pids"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (!has_word(buf, need[i]))
            return skd_err_set(err, SKD_ESANDBOX,
                               "podman cannot apply the %s limit here (cgroup controllers: %.80s)",
                               need[i], buf);
    return 0;
}

/* Can the engine apply memory (with swap), pids and CPU limits? Docker is
 * asked (`docker info`, which also proves the daemon answers). */
static int engine_detect(const char *engine, skd_err *err)
{
    skd__engine e;
    int rc;
    if ((rc = skd__engine_resolve(engine, &e, err)) != 0)
        return rc;
    if (strcmp(engine, "podman") == 0)
        return podman_cgroups(err);
    skd__ctr_cmd *r = calloc(1, sizeof(*r));
    if (!r)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    const char *args[] = {"info", "--format",
                          "{{.MemoryLimit}} {{.SwapLimit}} {{.PidsLimit}} {{.CPUCfsQuota}}", NULL};
    if ((rc = skd__ctr_run(&e, args, SHORT_TIMEOUT_MS, r, err)) != 0)
        goto out;
    char mem[8] = "", swap[8] = "", pids[8] = "", cpu[8] = "";
    if (r->status != 0)
        rc =
            skd_err_set(err, SKD_ESANDBOX, "docker is not usable: %s", skd__ctr_errline(r->errout));
    else if (sscanf(r->out, "%7s %7s %7s %7s", mem, swap, pids, cpu) != 4 || strcmp(mem, "true") ||
             strcmp(swap, "true") || strcmp(pids, "true") || strcmp(cpu, "true"))
        rc = skd_err_set(err, SKD_ESANDBOX,
                         "docker cannot apply every limit here (memory swap pids cpu: %.60s)",
                         r->out);
out:
    free(r);
    return rc;
}

static int docker_detect(skd_err *err)
{
    return engine_detect("docker", err);
}
static int podman_detect(skd_err *err)
{
    return engine_detect("podman", err);
}

/* engine_detect, remembered for DETECT_TTL_MS after a success, so that
 * every prepare checks the engine can apply the limits without paying an
 * `info` call per run. */
#define DETECT_TTL_MS 60000
int skd__ctr_detect_cached(const char *engine, skd_err *err)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int64_t ok_at[2] = {-DETECT_TTL_MS - 1, -DETECT_TTL_MS - 1};
    int i = strcmp(engine, "docker") == 0 ? 0 : 1;
    int64_t now = skd_mono_ms();
    pthread_mutex_lock(&mu);
    int fresh = now - ok_at[i] <= DETECT_TTL_MS;
    pthread_mutex_unlock(&mu);
    if (fresh)
        return 0;
    int rc = engine_detect(engine, err);
    if (rc == 0) {
        pthread_mutex_lock(&mu);
        ok_at[i] = now;
        pthread_mutex_unlock(&mu);
    }
    return rc;
}

/* A create that succeeded with a warning that a limit was dropped (docker
 * does this, e.g. "Your kernel does not support swap limit capabilities
 * ... Limitation discarded.") must not run. */
static int limit_discarded(const char *errout)
{
    return strstr(errout, "discarded") || strstr(errout, "does not support") ||
           strstr(errout, "not supported");
}

/* ---- prepare ------------------------------------------------------------- */

/* chown every entry under dirfd (not following symlinks) to the sandbox
 * user. Entries are opened one name at a time relative to their parent's
 * descriptor, so a concurrent rename or symlink swap cannot lead outside. */
static int chown_tree(int dirfd, uid_t uid, int depth)
{
    if (depth > MAX_WALK_DEPTH)
        return -1;
    int rc = 0, dup_fd = dup(dirfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fchownat(dirfd, de->d_name, uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) != 0 &&
            errno != ENOENT)
            rc = -1;
        if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                if (chown_tree(sub, uid, depth + 1) != 0)
                    rc = -1;
                close(sub);
            }
        }
    }
    closedir(d);
    return rc;
}

/* chown the workspace and everything in it to uid:uid. When old is not
 * NULL it receives the directory's owner before the change. */
static int own_workspace(const char *ws, uid_t uid, uid_t *old, skd_err *err)
{
    int fd = open(ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return skd_err_set(err, SKD_ESANDBOX, "cannot open the workspace: %s", strerror(errno));
    int rc = 0;
    struct stat st;
    if (old)
        *old = fstat(fd, &st) == 0 && st.st_uid != SKD__CTR_UID ? st.st_uid : 0;
    if (fchown(fd, uid, (gid_t)uid) != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "cannot hand the workspace to uid %u: %s",
                         (unsigned)uid, strerror(errno));
    else if (chown_tree(fd, uid, 0) != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "cannot hand every workspace file to uid %u",
                         (unsigned)uid);
    close(fd);
    return rc;
}

/* Workspaces lent to the sandbox uid, counted per path: the first run
 * that uses a workspace hands it to SKD__CTR_UID, the last one to end
 * hands it back to root, so that between container runs the workspace is
 * root-owned as the workspace layer and the native provider (whose
 * idmapped mount shows host root as the sandbox user) expect. */
typedef struct ws_lend {
    struct ws_lend *next;
    int refs;
    uid_t owner; /* to hand it back to */
    char path[];
} ws_lend;

static pthread_mutex_t ws_mu = PTHREAD_MUTEX_INITIALIZER;
static ws_lend *ws_lent;

int skd__ctr_ws_acquire(const char *ws, skd_err *err)
{
    int rc = 0;
    pthread_mutex_lock(&ws_mu);
    ws_lend *l;
    for (l = ws_lent; l && strcmp(l->path, ws) != 0; l = l->next)
        ;
    if (l) {
        l->refs++;
        goto out;
    }
    if (!(l = calloc(1, sizeof(*l) + strlen(ws) + 1))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(l->path, ws, strlen(ws) + 1);
    if ((rc = own_workspace(ws, SKD__CTR_UID, &l->owner, err)) != 0) {
        own_workspace(ws, l->owner, NULL, NULL);
        free(l);
        goto out;
    }
    l->refs = 1;
    l->next = ws_lent;
    ws_lent = l;
out:
    pthread_mutex_unlock(&ws_mu);
    return rc;
}

void skd__ctr_ws_release(const char *ws)
{
    pthread_mutex_lock(&ws_mu);
    for (ws_lend **pp = &ws_lent; *pp; pp = &(*pp)->next) {
        ws_lend *l = *pp;
        if (strcmp(l->path, ws) != 0)
            continue;
        if (--l->refs == 0) {
            *pp = l->next;
            if (own_workspace(ws, l->owner, NULL, NULL) != 0)
                skd_log(SKD_LOG_WARN, "could not hand workspace %s back to its owner", ws);
            free(l);
        }
        break;
    }
    pthread_mutex_unlock(&ws_mu);
}

static void state_free(ctr_state *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->start_argv[i]; i++)
        free(s->start_argv[i]);
    for (size_t i = 0; s->kill_argv[i]; i++)
        free(s->kill_argv[i]);
    if (s->client_pidfd >= 0)
        close(s->client_pidfd);
    skd__wsq_free(s->wsq); /* before the workspace is handed back */
    if (s->ws) {
        skd__ctr_ws_release(s->ws);
        free(s->ws);
    }
    if (s->cg_parent)
        skd__ctr_cg_remove(s->id);
    rundir_remove(s);
    free(s);
}

static int fill_argvs(ctr_state *s)
{
    const char *st[] = {s->eng.bin, "start", "-a", "-i", s->name};
    const char *kl[] = {s->eng.bin, "kill", "--signal", "KILL", s->name};
    for (size_t i = 0; i < 5; i++) {
        if (!(s->start_argv[i] = strdup(st[i])) || !(s->kill_argv[i] = strdup(kl[i])))
            return -1;
    }
    return 0;
}

/* What the engines cannot take: the host image, odd image names, and
 * workspace paths the -v syntax cannot carry. */
int skd__ctr_check_req(const char *engine, const skd__sandbox_req *req, skd_err *err)
{
    if (req->workspace && strpbrk(req->workspace, ":,"))
        return skd_err_set(err, SKD_ESANDBOX, "%s cannot mount a workspace path with ':' or ','",
                           engine);
    if (!req->image || !*req->image || strcmp(req->image, "host") == 0)
        return skd_err_set(err, SKD_ESANDBOX,
                           "the %s runtime needs an image (the host image is native only)", engine);
    skd_image_ref ref; /* the engines' grammar; nothing option-like reaches them */
    if (skd_image_parse_ref(req->image, &ref, err) != 0)
        return SKD_EINVAL;
    return 0;
}

/* Run the create command a; r receives its output. */
int skd__ctr_run_create(ctr_state *s, const skd__ctr_argv *a, skd__ctr_cmd *r, skd_err *err)
{
    int rc = skd__ctr_run(&s->eng, (const char *const *)a->v, CREATE_TIMEOUT_MS, r, err);
    if (rc != 0)
        return rc == SKD_ETIMEOUT ? SKD_ESANDBOX : rc;
    if (r->status != 0)
        return skd_err_set(err, SKD_ESANDBOX, "%s refused the sandbox: %s", s->eng.name,
                           skd__ctr_errline(r->errout));
    if (limit_discarded(r->errout))
        return skd_err_set(err, SKD_ESANDBOX, "%s cannot apply every limit: %s", s->eng.name,
                           skd__ctr_errline(r->errout));
    return 0;
}

static int engine_prepare(const char *engine, const skd__sandbox_req *req, void **state,
                          skd_err *err)
{
    ctr_state *s = calloc(1, sizeof(*s));
    skd__ctr_argv a = {0};
    skd__ctr_cmd *r = NULL;
    int rc;
    if (!s)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    s->client = s->killer = -1;
    s->client_pidfd = -1;
    s->network = req->cfg->network_enabled;
    if ((rc = skd__engine_resolve(engine, &s->eng, err)) != 0 ||
        (rc = skd__ctr_detect_cached(engine, err)) != 0)
        goto out;
    if ((rc = skd__ctr_check_req(engine, req, err)) != 0)
        goto out;
    skd__containers_reap_once(engine);
    snprintf(s->name, sizeof(s->name), "skilld-%s", req->id);
    s->reserve = req->cfg->data_reserve;
    skd_strlcpy(s->id, req->id, sizeof(s->id));
    s->cg_parent = strcmp(engine, "podman") == 0 && skd__ctr_cg_v1();
    if ((strcmp(engine, "podman") == 0 || s->network) && (rc = skd__ctr_rundir_make(s, err)) != 0)
        goto out;
    if (s->network && (rc = skd__ctr_rundir_egress_files(s, req, err)) != 0)
        goto out;
    if (fill_argvs(s) != 0) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if (req->workspace) {
        if (!(s->ws = strdup(req->workspace))) {
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = skd__ctr_ws_acquire(s->ws, err)) != 0) {
            free(s->ws);
            s->ws = NULL;
            goto out;
        }
        /* Over the lent workspace, so that the overlay shows the sandbox
         * uid's files; writes go to a tmpfs capped near the quota. */
        if (req->cfg->workspace_quota > 0 && !req->cfg->workspace_read_only &&
            (rc = skd__wsq_prepare(s->ws, req->workspace_fd, req->id, req->cfg->workspace_quota,
                                   &s->wsq, err)) != 0)
            goto out;
    }
    if ((rc = skd__ctr_create_argv(s, req, &a, err)) != 0)
        goto out;
    if (!(r = calloc(1, sizeof(*r)))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    rc = skd__ctr_run_create(s, &a, r, err);
out:
    if (rc != 0 && s && s->name[0] && r) {
        /* A create that timed out may still have made the container. */
        const char *rm[] = {"rm", "-f", s->name, NULL};
        skd__ctr_run(&s->eng, rm, SHORT_TIMEOUT_MS, r, NULL);
    }
    free(r);
    skd__ctr_argv_free(&a);
    if (rc != 0)
        state_free(s);
    else
        *state = s;
    return rc;
}

static int docker_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    return engine_prepare("docker", req, state, err);
}

static int podman_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    return engine_prepare("podman", req, state, err);
}

/* ---- spawn / kill -------------------------------------------------------- */

/* The pid of the container's first process from inspect, 0 while it has
 * none, -1 when inspect fails. */
long long skd__ctr_container_pid(ctr_state *s)
{
    skd__ctr_cmd r;
    skd_err e = {0};
    const char *args[] = {"inspect", "--type=container", "--format", "{{.State.Pid}}", s->name,
                          NULL};
    if (skd__ctr_run(&s->eng, args, 5000, &r, &e) != 0 || r.status != 0)
        return -1;
    r.out[strcspn(r.out, "\r\n")] = '\0';
    int64_t pid;
    return skd_parse_i64(r.out, 0, INT32_MAX, &pid) ? -1 : (long long)pid;
}

/* networkEnabled: wait (bounded) until the started container has a process,
 * then place the egress proxy's socket in its network namespace
 * (src/sandbox/spawner/egress_place.c). The command inside waits for it. */
#define PLACE_WAIT_MS 10000
int skd__ctr_place_egress(ctr_state *s, int *egress_fd, skd_err *err)
{
    int64_t deadline = skd_mono_ms() + PLACE_WAIT_MS;
    struct stat self;
    if (stat("/proc/self/ns/net", &self) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "%s sandbox: /proc/self/ns/net: %s", s->eng.name,
                           strerror(errno));
    for (int tries = 0;; tries++) {
        long long pid = skd__ctr_container_pid(s);
        char path[64];
        struct stat ns;
        snprintf(path, sizeof(path), "/proc/%lld/ns/net", pid);
        /* The engine may first report a process that is not in the
         * container's namespace yet, or is gone a moment later (the
         * runtime's own set-up): only a process in a namespace other than
         * ours, still the container's after its pidfd is held, will do. */
        if (pid > 0 && stat(path, &ns) == 0 && ns.st_ino != self.st_ino) {
            int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
            int rc = -1;
            if (pfd >= 0 && skd__ctr_container_pid(s) == pid)
                rc = skd__egress_place(pfd, egress_fd, err);
            if (pfd >= 0)
                close(pfd);
            if (rc == 0 || (rc < 0 && rc != -1 && tries >= 5))
                return rc;
            skd_err_clear(err);
        }
        struct pollfd p = {.fd = s->client_pidfd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0 || skd_mono_ms() > deadline)
            return skd_err_set(err, SKD_ESANDBOX,
                               "%s sandbox: the container did not start, so no egress proxy "
                               "could be placed",
                               s->eng.name);
        usleep(20000);
    }
}

int skd__ctr_spawn_client(char *const *argv, const char *cwd, pid_t *client, int *client_pidfd,
                          skd__spawned *out, skd_err *err)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, rc = 0;
    *client_pidfd = -1;
    if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "pipe: %s", strerror(errno));
        goto out;
    }
    *client = skd__ctr_fork_exec(argv, pin[0], pout[1], perr[1], cwd);
    if (*client < 0) {
        rc =
            skd_err_set(err, SKD_ESANDBOX, "cannot start the engine's client: %s", strerror(errno));
        goto out;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, *client, 0);
    *client_pidfd = pidfd >= 0 ? (int)syscall(SYS_pidfd_open, *client, 0) : -1;
    if (pidfd < 0 || *client_pidfd < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "pidfd_open: %s", strerror(errno));
        kill(*client, SIGKILL);
        while (waitpid(*client, NULL, 0) < 0 && errno == EINTR)
            ;
        *client = -1;
        if (pidfd >= 0)
            close(pidfd);
        if (*client_pidfd >= 0)
            close(*client_pidfd);
        *client_pidfd = -1;
        goto out;
    }
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    fcntl(*client_pidfd, F_SETFD, FD_CLOEXEC);
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
    fcntl(pout[0], F_SETFL, O_NONBLOCK);
    fcntl(perr[0], F_SETFL, O_NONBLOCK);
    out->pidfd = pidfd;
    out->stdin_fd = pin[1];
    out->stdout_fd = pout[0];
    out->stderr_fd = perr[0];
    pin[1] = pout[0] = perr[0] = -1;
out:
    for (int i = 0; i < 2; i++) {
        if (pin[i] >= 0)
            close(pin[i]);
        if (pout[i] >= 0)
            close(pout[i]);
        if (perr[i] >= 0)
            close(perr[i]);
    }
    return rc;
}

static int ctr_spawn(void *state, skd__spawned *out, skd_err *err)
{
    ctr_state *s = state;
    *out = (skd__spawned)SKD__SPAWNED_NONE;
    int rc = skd__ctr_spawn_client(s->start_argv, s->rundir[0] ? s->rundir : NULL, &s->client,
                                   &s->client_pidfd, out, err);
    if (rc == 0 && s->network && (rc = skd__ctr_place_egress(s, &out->egress_fd, err)) != 0) {
        syscall(SYS_pidfd_send_signal, s->client_pidfd, SIGKILL, NULL, 0);
        while (waitpid(s->client, NULL, 0) < 0 && errno == EINTR)
            ;
        s->client = -1;
        close(out->pidfd);
        close(out->stdin_fd);
        close(out->stdout_fd);
        close(out->stderr_fd);
        *out = (skd__spawned)SKD__SPAWNED_NONE;
    }
    return rc;
}

static void ctr_kill(void *state)
{
    ctr_state *s = state;
    if (s->killer > 0) {
        /* Asked again: if the first helper is done, the client must go. */
        if (waitpid(s->killer, NULL, WNOHANG) == s->killer) {
            s->killer = -1;
            if (s->client_pidfd >= 0)
                syscall(SYS_pidfd_send_signal, s->client_pidfd, SIGKILL, NULL, 0);
        }
        return;
    }
    s->killer = skd__ctr_kill_helper(s->kill_argv, s->client_pidfd, KILL_GRACE_MS);
    if (s->killer < 0 && s->client_pidfd >= 0) /* no helper: at least stop the client */
        syscall(SYS_pidfd_send_signal, s->client_pidfd, SIGKILL, NULL, 0);
}

/* ---- cleanup ------------------------------------------------------------- */

/* Read status, exit code, OOMKilled of the container into o. When the
 * container exists but never started, o->setup_error says so. */
static void read_state(ctr_state *s, skd__outcome *o, skd__ctr_cmd *r)
{
    const char *args[] = {"inspect",
                          "--type=container",
                          "--format",
                          "{{.State.Status}}|{{.State.ExitCode}}|{{.State.OOMKilled}}|"
                          "{{.State.Error}}",
                          s->name,
                          NULL};
    if (skd__ctr_run(&s->eng, args, SHORT_TIMEOUT_MS, r, NULL) != 0 || r->status != 0) {
        skd_log(SKD_LOG_WARN, "%s inspect %s failed: %s", s->eng.name, s->name,
                skd__ctr_errline(r->errout));
        return;
    }
    char status[32] = "", oom[8] = "";
    int code = 0, used = 0;
    if (sscanf(r->out, "%31[^|]|%d|%7[^|]|%n", status, &code, oom, &used) < 3)
        return;
    if (strcmp(status, "created") == 0) {
        const char *why = used > 0 ? r->out + used : "";
        size_t wl = strcspn(why, "\n");
        snprintf(o->setup_error, sizeof(o->setup_error), "%s could not start the sandbox%s%.*s",
                 s->eng.name, wl ? ": " : "", (int)(wl > 300 ? 300 : wl), why);
        return;
    }
    o->oom_killed = strcmp(oom, "true") == 0;
    /* Podman on cgroup v1: a SIGKILL (137) we did not send, in a container
     * whose memory reached its limit, is the OOM killer's. */
    if (!o->oom_killed && s->cg_parent && !o->killed && code == 137 && skd__ctr_cg_hit_limit(s->id))
        o->oom_killed = 1;
    if (!o->oom_killed && rundir_has_oom(s))
        o->oom_killed = 1;
    if (o->killed || o->oom_killed) {
        /* The engine reports 128+9; say what happened. */
        o->exited = 0;
        o->exit_code = 0;
        o->signal = SIGKILL;
    } else if (code >= 0 && code <= 255) {
        o->exited = 1;
        o->exit_code = code;
        o->signal = 0;
    }
}

static void remove_container(ctr_state *s, skd__ctr_cmd *r)
{
    const char *rm[] = {"rm", "-f", s->name, NULL};
    if (skd__ctr_run(&s->eng, rm, SHORT_TIMEOUT_MS, r, NULL) != 0 || r->status != 0)
        skd_log(SKD_LOG_WARN, "%s rm -f %s failed: %s", s->eng.name, s->name,
                skd__ctr_errline(r->errout));
    /* Verify: inspect must now fail. */
    const char *chk[] = {"inspect", "--type=container", "--format", "{{.Id}}", s->name, NULL};
    if (skd__ctr_run(&s->eng, chk, SHORT_TIMEOUT_MS, r, NULL) == 0 && r->status == 0)
        skd_log(SKD_LOG_ERROR, "%s container %s is still there after rm -f", s->eng.name, s->name);
}

static void ctr_cleanup(void *state, skd__outcome *o)
{
    ctr_state *s = state;
    skd__ctr_cmd *r = calloc(1, sizeof(*r));
    if (s->killer > 0) {
        /* The client has exited (cleanup follows its exit), so the helper
         * ends as soon as its kill command returns. */
        while (waitpid(s->killer, NULL, 0) < 0 && errno == EINTR)
            ;
        s->killer = -1;
    }
    if (r) {
        if (s->client > 0)
            read_state(s, o, r);
        remove_container(s, r);
    }
    free(r);
    if (s->cg_parent) /* podman on v1: the run's parent cgroup, until state_free */
        skd__ctr_cg_usage(s->id, &o->cpu_us, &o->mem_peak);
    if (s->wsq) /* the container is gone: commit its workspace changes, or not */
        skd__wsq_commit_outcome(s->wsq,
                                s->client > 0 && !o->killed && !o->oom_killed && !o->setup_error[0],
                                s->reserve, o);
    state_free(s);
}

const skd__provider skd__provider_docker = {
    .name = "docker",
    .detect = docker_detect,
    .prepare = docker_prepare,
    .spawn = ctr_spawn,
    .kill = ctr_kill,
    .cleanup = ctr_cleanup,
};

const skd__provider skd__provider_podman = {
    .name = "podman",
    .detect = podman_detect,
    .prepare = podman_prepare,
    .spawn = ctr_spawn,
    .kill = ctr_kill,
    .cleanup = ctr_cleanup,
};
