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
#include "sandbox/native/native_live_int.h"
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

/* Directories of /usr/local made the sandbox user's in the root layer, at
 * most, and how deep. */
#define LOCAL_DIRS_MAX 256
#define LOCAL_DEPTH 3

/* How long a new live sandbox's init may take to report ready. */
#define READY_WAIT_MS 10000

/* The namespaces an exec enters (native_live_int.h), the user namespace first. */

static struct live *lives;
static size_t nlives;

size_t skd__native_live_count(void)
{
    return nlives;
}

struct live *skd__live_find(const char *id)
{
    for (struct live *l = lives; l; l = l->next)
        if (!l->gone && strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

void skd__native_live_commit(struct live *l, skd__outcome *out)
{
    skd__outcome o;
    if (!l->s || !l->s->wsq)
        return;
    if (!out) {
        memset(&o, 0, sizeof(o));
        out = &o;
    }
    skd__wsq_commit_live(l->s->wsq, l->cfg.data_reserve, out);
    if (out == &o && o.ws_error && o.ws_error != SKD_EIO) /* EIO: logged already */
        skd_warn("live sandbox %s: its workspace changes were not kept: %s", l->id, o.ws_message);
}

int skd__native_live_commit_id(const char *id, skd__outcome *out)
{
    struct live *l = skd__live_find(id);
    if (!l || !l->s)
        return -1;
    skd__native_live_commit(l, out);
    return 0;
}

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
    if (l->s) {
        if (l->s->pidfd >= 0) {
            siginfo_t si;
            syscall(SYS_pidfd_send_signal, l->s->pidfd, SIGKILL, NULL, 0);
            skd__cgroup_kill(l->s->cg);
            for (int i = 0; i < 1000; i++) {
                skd__live_reap_execs(l);
                struct pollfd p = {.fd = l->s->pidfd, .events = POLLIN};
                if (poll(&p, 1, 5) == 1)
                    break;
            }
            waitid((idtype_t)P_PIDFD, (id_t)l->s->pidfd, &si, WEXITED);
        }
        skd__native_live_commit(l, NULL); /* its end keeps its writes */
        skd__native_cleanup(l->s, NULL);  /* the cgroup too */
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
                           : skd__snap_copy(src, dst, "u-", SKD__SNAP_INTO_TMPFS, 0, NULL, err);
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

void skd__live_unref(struct live *l)
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
                     : skd__snap_copy(src, dst, NULL, SKD__SNAP_INTO_TMPFS,
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
    if (skd__live_find(req->id))
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
    l->egress_fd = -1;
    l->refs = 1;
    l->layer_fd = -1;
    memcpy(l->id, req->id, sizeof(l->id));
    l->cfg = *req->cfg;
    /* With the quota on, the workspace is its quota overlay, committed by
     * skd__native_live_commit; rootless, no overlay can be mounted, so it
     * is read-only (writes go to /tmp). */
    if (l->cfg.workspace_quota > 0 && skd__nat.rootless)
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
        skd__live_unref(l);
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
        skd__live_unref(l);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    l->s = s;
    skd__spawned sp = SKD__SPAWNED_NONE;
    if (restore && (snap = skd__snap_open(restore, 0, err)) < 0) {
        rc = snap == SKD_ENOENT ? SKD_ELOST : snap; /* its files are gone: so is it */
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
    skd__live_unref(l);
    if (snap >= 0)
        close(snap);
    return rc;
}

int skd__native_live_take_egress(const char *id)
{
    struct live *l = skd__live_find(id);
    if (!l)
        return -1;
    int fd = l->egress_fd;
    l->egress_fd = -1;
    return fd;
}

int skd__native_live_delete(const char *id)
{
    struct live *l = skd__live_find(id);
    if (!l)
        return SKD_ENOENT;
    l->gone = 1;
    live_end(l); /* now, even while an exec is still to be cleaned up */
    skd__live_unref(l);
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
        skd__live_unref(l);
    }
    for (struct live *l = lives; l; l = l->next)
        live_end(l); /* gone, waiting for an exec's cleanup */
}

/* ---- pause and fork: saving the files ---- */

/* skd__snap_copy, synced when sync (a pause's copy). */
static int copy_to(int sync, int src, int dst, const char *prefix, int64_t max, int64_t *bytes,
                   skd_err *err)
{
    return sync ? skd__snap_copy_synced(src, dst, prefix, max, bytes, err)
                : skd__snap_copy(src, dst, prefix, max, 0, bytes, err);
}

/* Copy l's root layer and /tmp into the new directory dst; with sync (a
 * pause) on disk, dst's entries too, before it returns. */
static int save_live(struct live *l, int dst, int sync, int64_t max, int64_t *bytes, skd_err *err)
{
    int rc = 0, tmp = -1;
    if (l->layer_fd >= 0) {
        if (mkdirat(dst, "layer", 0700) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "snapshot: mkdir: %s", strerror(errno));
        int d = openat(dst, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = d < 0 ? skd_err_set(err, SKD_ESANDBOX, "snapshot: open: %s", strerror(errno))
                   : copy_to(sync, l->layer_fd, d, "u-", max, bytes, err);
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
        rc = copy_to(sync, tmp, d, NULL, max - *bytes, bytes, err);
    if (d >= 0)
        close(d);
    close(tmp);
    if (rc == 0 && sync && fsync(dst) != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "snapshot: sync: %s", strerror(errno));
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
    } else if (!(l = skd__live_find(id)) || !l->s || l->s->pidfd < 0) {
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
        skd__native_live_commit(l, NULL); /* the workspace is not in the snapshot */
        rc = save_live(l, out, (flags & SKD__SNAP_END) != 0, max, bytes, err);
        /* Thawed first even when it ends: a task frozen by the v1 freezer
         * would not die of SIGKILL. */
        if (frozen)
            skd__cgroup_freeze(l->s->cg, 0);
        if (rc == 0 && (flags & SKD__SNAP_END)) {
            l->gone = 1;
            live_end(l);
            skd__live_unref(l);
        }
    }
    if (rc == 0) /* a pause's outlives this server; a fork's copy is used at once */
        rc = (flags & SKD__SNAP_END) ? skd__snap_publish(part, dst, err)
                                     : skd__snap_rename(part, dst, err);
out:
    if (src >= 0)
        close(src);
    if (out >= 0)
        close(out);
    if (rc)
        skd__snap_drop(part);
    return rc;
}
