/*
 * Live sandboxes of the native provider (DESIGN.md, "Live sandboxes"): a
 * one-shot sandbox whose init does not end after a first command. Its
 * init (native_child.c, live_init) holds the user, mount, pid, net, ipc,
 * uts and cgroup namespaces; its cgroup holds the limits for its whole
 * life; its /tmp lives in its mount namespace. An exec enters it from the
 * spawner the way `runc exec` does (skd__native_enter_main): setns into
 * its namespaces, its cgroup, then the same capability drop, no_new_privs,
 * seccomp filter and uid as a one-shot run, then execve. Nothing inside
 * the sandbox is asked anything: output, exit status and OOM are read
 * from outside.
 *
 * Everything here runs in the spawner's one thread. The server owns the
 * resource (id, owner key, expiry: src/sandbox/live.c); this file owns the
 * processes, and ends them all when the spawner ends (its parent-death
 * signal ends every init, and with it every process of its pid namespace).
 *
 * Trust: the id and the limits were checked by the spawner (spawner.c)
 * against the operator's ceilings; an exec names its live sandbox by id,
 * and an unknown id is SKD_ENOENT.
 */
#include "sandbox/native/native_int.h"
#include "sandbox/native/native_snap.h"
#include "skilld/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Directories of /usr/local made the sandbox user's in the root layer, at
 * most, and how deep. */
#define LOCAL_DIRS_MAX 256
#define LOCAL_DEPTH 3

/* How long a new live sandbox's init may take to report ready. */
#define READY_WAIT_MS 10000

/* The namespaces an exec enters, the user namespace first. */
static const char *const ns_names[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
#define NNS (sizeof(ns_names) / sizeof(ns_names[0]))

struct lexec;

struct live {
    struct live *next;
    char id[SKD_UUID_LEN + 1];
    skd_sandbox_config cfg;
    skd__sandbox_req req; /* borrowed by s: its strings are below */
    char *image, *rootfs, *cwd;
    char *argv[2], *envp[1];
    struct nstate *s; /* the init's: cgroup, pidfd, mount namespace */
    int ns_fds[NNS];
    struct lexec *execs; /* prepared in it and not yet cleaned up */
    int egress_fd;       /* networkEnabled: its proxy socket until the spawner takes it */
    int layer_fd;        /* the root layer's tmpfs (detached), for a pause or fork; or -1 */
    int refs;            /* 1 while it lives, +1 per exec prepared in it */
    int gone;            /* deleted: no new exec; freed when the last exec is cleaned up */
};

static struct live *lives;
static size_t nlives;

size_t skd__native_live_count(void)
{
    return nlives;
}

static struct live *live_find(const char *id)
{
    for (struct live *l = lives; l; l = l->next)
        if (!l->gone && strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

static void reap_execs(struct live *l);

/* Kill every process of l (its init first: the pid namespace goes with
 * it), reap the init and remove the cgroup. The init's exit waits until
 * every task of its namespace is reaped, the execs' relays too, whose
 * parent is this process: they are reaped here while it waits. */
static void live_end(struct live *l)
{
    if (l->egress_fd >= 0) {
        close(l->egress_fd);
        l->egress_fd = -1;
    }
    if (l->layer_fd >= 0) {
        close(l->layer_fd);
        l->layer_fd = -1;
    }
    for (size_t i = 0; i < NNS; i++)
        if (l->ns_fds[i] >= 0) {
            close(l->ns_fds[i]);
            l->ns_fds[i] = -1;
        }
    if (l->s) {
        if (l->s->pidfd >= 0) {
            siginfo_t si;
            syscall(SYS_pidfd_send_signal, l->s->pidfd, SIGKILL, NULL, 0);
            skd__cgroup_kill(l->s->cg);
            for (int i = 0; i < 1000; i++) {
                reap_execs(l);
                struct pollfd p = {.fd = l->s->pidfd, .events = POLLIN};
                if (poll(&p, 1, 5) == 1)
                    break;
            }
            waitid((idtype_t)P_PIDFD, (id_t)l->s->pidfd, &si, WEXITED);
        }
        skd__native_cleanup(l->s, NULL); /* the cgroup too */
        l->s = NULL;
    }
}

/* ---- the writable root layer ----
 * Each top-level directory the new root binds from the host or the image
 * (usr, lib, ...) is bound from an overlay instead: the read-only original
 * below, an upper directory on one tmpfs of root_layer_max bytes above.
 * The overlays are mounted here, in the spawner's mount namespace, under a
 * directory of their own; the sandbox's mount namespace, a copy made by
 * clone3, binds them, and once the init is ready this process lets go of
 * its copies: what the sandbox wrote lives in its namespace only, and goes
 * with it. /usr/local's directories are the sandbox user's in the upper
 * layer, so that an install there works; everything else keeps its owner
 * (root, unmapped in the sandbox: read-only to it). */

struct layer {
    char dir[PATH_MAX];
    char merged[16][PATH_MAX];
    int nmerged;
    int tmpfs;
};

static int path_ok_for_overlay(const char *p)
{
    return !strpbrk(p, ",:\\=");
}

static int dir_as_sandbox_user(const char *path)
{
    return (mkdir(path, 0755) == 0 || errno == EEXIST) &&
           chown(path, SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID,
                 SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID) == 0;
}

/* The directories under lower (a /usr/local), depth at most LOCAL_DEPTH,
 * made in upper as the sandbox user's. */
static void own_local_dirs(const char *lower, const char *upper, int depth, int *budget)
{
    DIR *d = opendir(lower);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && *budget > 0) {
        char lp[PATH_MAX], up[PATH_MAX];
        struct stat st;
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        if (snprintf(lp, sizeof(lp), "%s/%s", lower, e->d_name) >= (int)sizeof(lp) ||
            snprintf(up, sizeof(up), "%s/%s", upper, e->d_name) >= (int)sizeof(up) ||
            lstat(lp, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        (*budget)--;
        if (dir_as_sandbox_user(up) && depth + 1 < LOCAL_DEPTH)
            own_local_dirs(lp, up, depth + 1, budget);
    }
    closedir(d);
}

/* Let go of this process's copies of the layer's mounts. */
static void layer_release(struct layer *ly)
{
    for (int i = 0; i < ly->nmerged; i++)
        umount2(ly->merged[i], MNT_DETACH);
    ly->nmerged = 0;
    if (ly->tmpfs)
        umount2(ly->dir, MNT_DETACH);
    ly->tmpfs = 0;
    if (ly->dir[0])
        rmdir(ly->dir);
    ly->dir[0] = '\0';
}

static int layer_make(struct live *l, struct nstate *s, int64_t max, int restore, struct layer *ly,
                      skd_err *err)
{
    char opts[64], p[PATH_MAX];
    snprintf(opts, sizeof(opts), "size=%lld,mode=0755", (long long)max);
    if (snprintf(ly->dir, sizeof(ly->dir), "%s-live-%s", skd__nat.stage, l->id) >=
            (int)sizeof(ly->dir) ||
        mkdir(ly->dir, 0700) != 0) {
        ly->dir[0] = '\0';
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: root layer: mkdir: %s",
                           strerror(errno));
    }
    if (mount("tmpfs", ly->dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: root layer: tmpfs: %s",
                           strerror(errno));
    ly->tmpfs = 1;
    /* Resumed or forked: the saved upper directories first, then the
     * overlays on them. */
    if (restore >= 0) {
        int dst = open(ly->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int src = openat(restore, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int rc = dst < 0   ? skd_err_set(err, SKD_ESANDBOX, "native sandbox: root layer: %s",
                                         strerror(errno))
                 : src < 0 ? 0 /* saved without a root layer */
                           : skd__snap_copy(src, dst, "u-", max, 0, NULL, err);
        if (dst >= 0)
            close(dst);
        if (src >= 0)
            close(src);
        if (rc)
            return rc;
    }
    size_t sl = strlen(skd__nat.stage);
    for (size_t i = 0; i < s->nents; i++) {
        struct mnt_entry *m = &s->ents[i];
        const char *name = m->dst + sl + 1;
        if (m->kind != MNT_BIND_DIR || m->devices || strncmp(m->dst, skd__nat.stage, sl) != 0 ||
            m->dst[sl] != '/' || strchr(name, '/') || !path_ok_for_overlay(m->src))
            continue;
        if (ly->nmerged >= (int)(sizeof(ly->merged) / sizeof(ly->merged[0])))
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: root layer: too many layers");
        char up[PATH_MAX], work[PATH_MAX], merged[PATH_MAX];
        char o[3 * PATH_MAX + 64];
        if (snprintf(up, sizeof(up), "%s/u-%s", ly->dir, name) >= (int)sizeof(up) ||
            snprintf(work, sizeof(work), "%s/w-%s", ly->dir, name) >= (int)sizeof(work) ||
            snprintf(merged, sizeof(merged), "%s/m-%s", ly->dir, name) >= (int)sizeof(merged) ||
            (mkdir(up, 0755) != 0 && (restore < 0 || errno != EEXIST)) || mkdir(work, 0700) != 0 ||
            mkdir(merged, 0755) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: root layer: mkdir: %s",
                               strerror(errno));
        if (strcmp(name, "usr") == 0) {
            int budget = LOCAL_DIRS_MAX;
            char ul[PATH_MAX];
            struct stat st;
            if (snprintf(p, sizeof(p), "%s/local", m->src) < (int)sizeof(p) &&
                snprintf(ul, sizeof(ul), "%s/local", up) < (int)sizeof(ul) && stat(p, &st) == 0 &&
                S_ISDIR(st.st_mode)) {
                if (dir_as_sandbox_user(ul))
                    own_local_dirs(p, ul, 0, &budget);
            }
        }
        if (snprintf(o, sizeof(o), "lowerdir=%s,upperdir=%s,workdir=%s", m->src, up, work) >=
                (int)sizeof(o) ||
            mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, o) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: root layer: overlay on %s: %s",
                               m->src, strerror(errno));
        memcpy(ly->merged[ly->nmerged++], merged, sizeof(merged));
        char *src = strdup(merged);
        if (!src)
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        free(m->src);
        m->src = src;
        m->writable = 1;
    }
    return 0;
}

static void live_unref(struct live *l)
{
    if (--l->refs > 0)
        return;
    live_end(l);
    for (struct live **pp = &lives; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    nlives--;
    free(l->image);
    free(l->rootfs);
    free(l->cwd);
    free(l);
}

/* Wait for the init's status pipe: EOF is ready, bytes are the failing
 * step. 0 or SKD_ESANDBOX. */
static int wait_ready(int fd, skd_err *err)
{
    char msg[SKD_ERR_MSG_MAX];
    size_t len = 0;
    int64_t end = skd_mono_ms() + READY_WAIT_MS;
    for (;;) {
        int64_t left = end - skd_mono_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) == 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: the live sandbox did not start");
        ssize_t n = read(fd, msg + len, sizeof(msg) - 1 - len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n > 0 && len + (size_t)n < sizeof(msg) - 1) {
            len += (size_t)n;
            continue;
        }
        if (n > 0)
            len += (size_t)n;
        if (len == 0 && n == 0)
            return 0;
        msg[len] = '\0';
        return skd_err_set(err, SKD_ESANDBOX, "%s", len ? msg : "native sandbox: init failed");
    }
}

/* /tmp of l's init, as a directory fd (caller closes), or -1. */
static int open_tmp(struct live *l)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/root", (int)l->s->pid);
    int root = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return -1;
    int fd = openat(root, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(root);
    return fd;
}

/* Copy the snapshot's tmp/ into l's /tmp. */
static int restore_tmp(struct live *l, int snap, skd_err *err)
{
    int src = openat(snap, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (src < 0)
        return 0;
    int dst = open_tmp(l);
    int rc = dst < 0 ? skd_err_set(err, SKD_ESANDBOX, "native sandbox: the new /tmp: %s",
                                   strerror(errno))
                     : skd__snap_copy(src, dst, NULL, l->cfg.tmp_size,
                                      skd__nat.rootless ? 0 : SKD_NATIVE_HOST_BASE, NULL, err);
    close(src);
    if (dst >= 0)
        close(dst);
    return rc;
}

int skd__native_live_create(const skd__sandbox_req *req, int64_t root_layer_max,
                            const char *restore, skd_err *err)
{
    int rc, snap = -1;
    struct layer ly;
    memset(&ly, 0, sizeof(ly));
    if (live_find(req->id))
        return skd_err_set(err, SKD_EEXISTS, "native sandbox: live sandbox %s exists", req->id);
    rc = skd__native_detect(err);
    if (rc)
        return rc;
    if (!req->rootfs && req->image && *req->image && strcmp(req->image, "host") != 0)
        return skd_err_set(err, SKD_ENOENT,
                           "image %.200s is not imported for the native sandbox; run skilld "
                           "image import",
                           req->image);
    struct live *l = calloc(1, sizeof(*l));
    if (!l)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    for (size_t i = 0; i < NNS; i++)
        l->ns_fds[i] = -1;
    l->egress_fd = -1;
    l->refs = 1;
    l->layer_fd = -1;
    memcpy(l->id, req->id, sizeof(l->id));
    l->cfg = *req->cfg;
    /* The workspace quota overlay commits a run's writes when it ends; a
     * live sandbox does not end with a call, so with the quota on its
     * workspace is read-only (writes go to /tmp and the root layer). */
    if (l->cfg.workspace_quota > 0)
        l->cfg.workspace_read_only = 1;
    l->image = strdup(req->image ? req->image : "host");
    l->rootfs = req->rootfs ? strdup(req->rootfs) : NULL;
    l->cwd = strdup("/");
    l->argv[0] = l->cwd; /* no command: the init waits */
    l->argv[1] = NULL;
    l->envp[0] = NULL;
    l->next = lives;
    lives = l;
    nlives++;
    if (!l->image || !l->cwd || (req->rootfs && !l->rootfs)) {
        live_unref(l);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    l->req = *req;
    l->req.id = l->id;
    l->req.image = l->image;
    l->req.rootfs = l->rootfs;
    l->req.argv = l->argv;
    l->req.envp = l->envp;
    l->req.cwd = l->cwd;
    l->req.cfg = &l->cfg;
    l->req.live = NULL;
    struct nstate *s = skd__native_state_new(&l->req);
    if (!s) {
        live_unref(l);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    l->s = s;
    skd__spawned sp = SKD__SPAWNED_NONE;
    if (restore && (snap = skd__snap_open(restore, 0, err)) < 0) {
        rc = snap;
        snap = -1;
        goto fail;
    }
    if ((rc = skd__native_fill_child(s, err)) || (rc = skd__native_open_mounts(s, err)) ||
        (rc = skd__cgroup_create(l->id, &l->cfg, &s->cg, err)))
        goto fail;
    /* Rootless, no overlay can be mounted here: the root stays read-only. */
    if (!skd__nat.rootless && root_layer_max > 0 &&
        (rc = layer_make(l, s, root_layer_max, snap, &ly, err)) != 0)
        goto fail;
    s->child.live = 1;
    /* A new mount namespace copies the spawner's: let the owed teardowns
     * go first (as native_spawn does). */
    skd__native_flush();
    /* The init is never the OOM killer's pick (it holds the sandbox): it
     * inherits the score this process has while it clones it. Best effort:
     * a process that may not lower it (rootless) leaves it as it is. */
    int adj_fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    char adj[16] = "0";
    ssize_t adj_len = adj_fd >= 0 ? pread(adj_fd, adj, sizeof(adj) - 1, 0) : -1;
    int lowered = adj_len > 0 && pwrite(adj_fd, "-1000", 5, 0) == 5;
    rc = skd__native_start_child(s, &sp, err);
    if (lowered && pwrite(adj_fd, adj, (size_t)adj_len, 0) != adj_len)
        skd_warn("sandbox spawner: could not restore its OOM score: %s", strerror(errno));
    if (adj_fd >= 0)
        close(adj_fd);
    if (rc != 0)
        goto fail;
    if ((rc = wait_ready(sp.status_fd, err)) != 0)
        goto fail;
    char p[64];
    for (size_t i = 0; i < NNS; i++) {
        snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)s->pid, ns_names[i]);
        if ((l->ns_fds[i] = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
            rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: open %s: %s", p, strerror(errno));
            goto fail;
        }
    }
    /* Still the init (not a recycled pid): its pidfd has not fired. */
    struct pollfd alive = {.fd = s->pidfd, .events = POLLIN};
    if (poll(&alive, 1, 0) != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: the live sandbox's init ended");
        goto fail;
    }
    /* networkEnabled: the proxy socket skd__native_start_child placed on
     * its loopback, kept for skd__native_live_take_egress. */
    l->egress_fd = sp.egress_fd;
    sp.egress_fd = -1;
    l->req.ca_pem = NULL; /* the trust bundle is in its root; the string was borrowed */
    if (snap >= 0 && (rc = restore_tmp(l, snap, err)) != 0)
        goto fail;
    skd__native_close_ends(&sp);
    /* The sandbox's namespace holds its own copies of the mounts; this
     * process keeps the layer's tmpfs by a descriptor only, detached from
     * every mount namespace, for a pause or a fork to read. */
    if (ly.tmpfs)
        l->layer_fd = open(ly.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    layer_release(&ly);
    if (snap >= 0)
        close(snap);
    return 0;
fail:
    skd__native_close_ends(&sp);
    layer_release(&ly);
    live_unref(l);
    if (snap >= 0)
        close(snap);
    return rc;
}

int skd__native_live_take_egress(const char *id)
{
    struct live *l = live_find(id);
    if (!l)
        return -1;
    int fd = l->egress_fd;
    l->egress_fd = -1;
    return fd;
}

int skd__native_live_delete(const char *id)
{
    struct live *l = live_find(id);
    if (!l)
        return SKD_ENOENT;
    l->gone = 1;
    live_end(l); /* now, even while an exec is still to be cleaned up */
    live_unref(l);
    return 0;
}

void skd__native_live_drop_all(void)
{
    while (lives) {
        struct live *l = lives;
        while (l && l->gone)
            l = l->next;
        if (!l)
            break;
        l->gone = 1;
        live_end(l);
        live_unref(l);
    }
    for (struct live *l = lives; l; l = l->next)
        live_end(l); /* gone, waiting for an exec's cleanup */
}

/* ---- pause and fork: saving the files ---- */

/* Copy l's root layer and /tmp into the new directory dst. */
static int save_live(struct live *l, int dst, int64_t max, int64_t *bytes, skd_err *err)
{
    int rc = 0, tmp = -1;
    if (l->layer_fd >= 0) {
        if (mkdirat(dst, "layer", 0700) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "snapshot: mkdir: %s", strerror(errno));
        int d = openat(dst, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = d < 0 ? skd_err_set(err, SKD_ESANDBOX, "snapshot: open: %s", strerror(errno))
                   : skd__snap_copy(l->layer_fd, d, "u-", max, 0, bytes, err);
        if (d >= 0)
            close(d);
        if (rc)
            return rc;
    }
    if ((tmp = open_tmp(l)) < 0)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: the sandbox's /tmp: %s",
                           strerror(errno));
    int d = -1;
    if (mkdirat(dst, "tmp", 0700) != 0 ||
        (d = openat(dst, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "snapshot: tmp: %s", strerror(errno));
    else
        rc = skd__snap_copy(tmp, d, NULL, max - *bytes, 0, bytes, err);
    if (d >= 0)
        close(d);
    close(tmp);
    return rc;
}

int skd__native_live_save(const char *id, const char *dst, int flags, int64_t max, int64_t *bytes,
                          skd_err *err)
{
    char part[SKD_UUID_LEN + 8];
    struct live *l = NULL;
    int src = -1, out = -1, rc;
    *bytes = 0;
    if (!skd__snap_enabled())
        return skd_err_set(err, SKD_EUNSUPPORTED,
                           "pause, resume and fork need a server (no snapshot directory)");
    if (flags & SKD__SNAP_FROM_SAVED) {
        if ((src = skd__snap_open(id, 0, err)) < 0)
            return src;
    } else if (!(l = live_find(id)) || !l->s || l->s->pidfd < 0) {
        return skd_err_set(err, SKD_ENOENT, "no such live sandbox");
    }
    snprintf(part, sizeof(part), "%s.part", dst);
    skd__snap_drop(part);
    if ((out = skd__snap_open(part, 1, err)) < 0) {
        rc = out;
        out = -1;
        goto out;
    }
    if (src >= 0) {
        rc = skd__snap_copy(src, out, NULL, max, 0, bytes, err);
    } else {
        /* Frozen while it is copied: one moment's files, not a mix. */
        int frozen = skd__cgroup_freeze(l->s->cg, 1) == 0;
        if (!frozen)
            skd_warn("live sandbox %s: could not freeze it for the copy", id);
        rc = save_live(l, out, max, bytes, err);
        /* Thawed first even when it ends: a task frozen by the v1 freezer
         * would not die of SIGKILL. */
        if (frozen)
            skd__cgroup_freeze(l->s->cg, 0);
        if (rc == 0 && (flags & SKD__SNAP_END)) {
            l->gone = 1;
            live_end(l);
            live_unref(l);
        }
    }
    if (rc == 0)
        rc = skd__snap_rename(part, dst, err);
out:
    if (src >= 0)
        close(src);
    if (out >= 0)
        close(out);
    if (rc)
        skd__snap_drop(part);
    return rc;
}

/* ---- an exec: a provider whose sandbox is a live one ---- */

struct lexec {
    struct lexec *next; /* in l->execs */
    const skd__sandbox_req *req;
    struct live *l;
    struct skd__native_child child;
    int pidfd;
    long long oom_before;
};

/* Reap the relays of l's execs that have exited (killed with the
 * sandbox). Their runs then report SIGKILL (spawner.c finds them reaped). */
static void reap_execs(struct live *l)
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
    struct live *l = req->live ? live_find(req->live) : NULL;
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
    c->nns = (int)NNS;
    for (size_t i = 0; i < NNS; i++)
        c->ns_fds[i] = l->ns_fds[i];
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
    if (x->pidfd >= 0)
        close(x->pidfd);
    for (struct lexec **pp = &x->l->execs; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    live_unref(x->l);
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
