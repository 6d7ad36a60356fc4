/*
 * The workspace quota inside the sandbox (see ws_quota.h).
 *
 * Layout of one run: SKD__WSQ_DIR/<owner>/<run id>/ (a pre-made sandbox's
 * run: <owner>/warm-N/, made while it waited, skd__wsq_stage) is a tmpfs of
 * quota + WSQ_SLACK bytes and at most WSQ_INODES inodes, holding upper/,
 * work/ and merged/; merged/ is an overlay (lowerdir = the workspace,
 * upperdir = upper/, redirect_dir, metacopy and index off, so that the
 * upper layer holds only whole files, directories, whiteouts and opaque
 * markers). Writes of the sandbox land in upper/ and can never take more
 * than the tmpfs holds; the tmpfs pages are charged to the writer's memory
 * cgroup, so they also count against memoryLimit while the run lasts.
 *
 * Commit, after the sandbox is gone (a live sandbox's: while it lives,
 * skd__wsq_commit_live): one walk of upper/ computes what the workspace
 * would hold (its usage now, minus what upper/ replaces or deletes, plus
 * upper/'s files); above the quota, or with less than the reserve left on
 * DATA_DIR's filesystem, nothing is applied. Otherwise a second walk
 * applies it under the workspace lock: files copied to a .skd-tmp-* name
 * and renamed over their target, whiteouts remove, opaque directories
 * replace. A killed run is never committed, so it changes nothing.
 *
 * Trust: upper/ was written by sandboxed code. Every name is taken from
 * readdir, every entry opened relative to its parent's descriptor with
 * O_NOFOLLOW, symlinks are recreated as links and never followed, other
 * special files (FIFOs, sockets, devices but the whiteout) are dropped, mode
 * bits are masked to 0777, and owners become the workspace's owner.
 */
#include "sandbox/ws_quota.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sandbox/container/container.h"
#include "sandbox/image/image_internal.h"
#include "skilld/image.h"
#include "sandbox/provider.h"
#include "skilld/log.h"
#include "skilld/util.h"
#include "skilld/workspace.h"

#define WSQ_SLACK (8LL << 20) /* directories and inodes beside the data */
#define WSQ_INODES 65536
#define WSQ_MAX_DEPTH 128
#define TMP_PREFIX SKD_WORKSPACE_TMP_PREFIX

/* SKILLS_WORKSPACE_MAX_ENTRIES, the operator's (skd__wsq_set_max_entries). */
static long long max_entries = 100000;

void skd__wsq_set_max_entries(long long n)
{
    if (n > 0)
        max_entries = n;
}

struct skd__wsq {
    char dir[256];    /* the run's tmpfs: SKD__WSQ_DIR/<owner>/<run id or warm-N> */
    char merged[300]; /* dir/merged, the overlay */
    char workspace[PATH_MAX];
    int ws_fd; /* our copy of the workspace's directory descriptor */
    int64_t quota;
    int tmpfs_mounted, lower_mounted, overlay_mounted;
    int sandbox_gone;    /* skd__wsq_sandbox_gone: the commit needs no unmount first */
    int live;            /* skd__wsq_commit_live: the upper layer stays in use */
    skd__wsq_seen *seen; /* live: what its commits applied */
    uint64_t written;    /* the last commit: bytes of the files it applied */
};

const char *skd__wsq_merged(const skd__wsq *q)
{
    return q->merged;
}

static int mkdir_ok(const char *path, mode_t mode)
{
    return mkdir(path, mode) == 0 || errno == EEXIST ? 0 : -1;
}

/* Append path to buf with overlayfs' escapes for ',' ':' and '\'. */
static int escape_path(char *buf, size_t cap, const char *path)
{
    size_t o = strlen(buf);
    for (const char *p = path; *p; p++) {
        if (strchr(",:\\", *p)) {
            if (o + 1 >= cap)
                return -1;
            buf[o++] = '\\';
        }
        if (o + 1 >= cap)
            return -1;
        buf[o++] = *p;
    }
    buf[o] = '\0';
    return 0;
}

static void unmount_all(skd__wsq *q)
{
    if (q->overlay_mounted && (q->sandbox_gone || umount2(q->merged, 0) != 0) &&
        umount2(q->merged, MNT_DETACH) != 0)
        skd_warn("workspace quota: cannot unmount %s: %s", q->merged, strerror(errno));
    q->overlay_mounted = 0;
    char lower[sizeof(q->dir) + 8];
    snprintf(lower, sizeof(lower), "%s/lower", q->dir);
    if (q->lower_mounted && umount2(lower, MNT_DETACH) != 0)
        skd_warn("workspace quota: cannot unmount %s: %s", lower, strerror(errno));
    q->lower_mounted = 0;
    if (q->tmpfs_mounted && umount2(q->dir, MNT_DETACH) != 0)
        skd_warn("workspace quota: cannot unmount %s: %s", q->dir, strerror(errno));
    q->tmpfs_mounted = 0;
}

void skd__wsq_free(skd__wsq *q)
{
    if (!q)
        return;
    unmount_all(q);
    if (q->ws_fd >= 0)
        close(q->ws_fd);
    skd__wsq_seen_free(q->seen);
    if (q->dir[0] && rmdir(q->dir) != 0 && errno != ENOENT)
        skd_warn("workspace quota: cannot remove %s: %s", q->dir, strerror(errno));
    char parent[PATH_MAX];
    skd_strlcpy(parent, q->dir, sizeof(parent));
    char *slash = strrchr(parent, '/');
    if (slash) {
        *slash = '\0';
        (void)rmdir(parent); /* the owner directory, when it was the last run */
    }
    free(q);
}

int skd__wsq_prepare(const char *workspace, int ws_fd, const char *id, int64_t quota,
                     skd__wsq **out, skd_err *err)
{
    return skd__wsq_prepare_idmapped(workspace, ws_fd, id, quota, -1, 0, 0, out, err);
}

/* Attach an idmapped clone of the directory behind fd at path. */
static int attach_idmapped(int fd, int idmap_fd, const char *path)
{
    struct mount_attr a;
    int t =
        (int)syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (t < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    a.userns_fd = (unsigned)idmap_fd;
    int rc = (int)syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof(a));
    if (rc == 0)
        rc = (int)syscall(SYS_move_mount, t, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(t);
    errno = e;
    return rc;
}

/* The run's directory SKD__WSQ_DIR/<owner>/<id>, its tmpfs of quota bytes
 * (plus WSQ_SLACK for metadata) and the overlay's directories in it, upper/
 * owned by uu:ug (its mode is the workspace root's, set by wsq_overlay). */
static int wsq_dirs(skd__wsq *q, const char *id, int64_t quota, int idmapped, uid_t uu, gid_t ug,
                    skd_err *err)
{
    static int swept;
    char opts[128], path[PATH_MAX];
    if (quota <= 0)
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: no quota to enforce");
    if (!__atomic_exchange_n(&swept, 1, __ATOMIC_SEQ_CST))
        skd__wsq_sweep();
    q->quota = quota;
    if (snprintf(q->dir, sizeof(q->dir), "%s/%s/%s", SKD__WSQ_DIR, skd__ctr_owner(), id) >=
            (int)sizeof(q->dir) ||
        snprintf(q->merged, sizeof(q->merged), "%s/merged", q->dir) >= (int)sizeof(q->merged))
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: path too long");
    snprintf(path, sizeof(path), "%s/%s", SKD__WSQ_DIR, skd__ctr_owner());
    if (mkdir_ok(SKD__WSQ_DIR, 0700) || mkdir_ok(path, 0700) || mkdir(q->dir, 0700) != 0) {
        int rc = skd_err_set(err, SKD_ESANDBOX, "workspace quota: mkdir %s: %s", q->dir,
                             strerror(errno));
        q->dir[0] = errno == EEXIST ? '\0' : q->dir[0];
        return rc;
    }
    snprintf(opts, sizeof(opts), "size=%lld,nr_inodes=%d,mode=0700", (long long)(quota + WSQ_SLACK),
             WSQ_INODES);
    if (mount("skilld-wsq", q->dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: tmpfs at %s: %s", q->dir,
                           strerror(errno));
    q->tmpfs_mounted = 1;
    /* lower/ only for an idmapped lower layer */
    static const char *const sub[] = {"upper", "work", "merged", "lower"};
    for (size_t i = 0; i < (idmapped ? 4u : 3u); i++) {
        snprintf(path, sizeof(path), "%s/%s", q->dir, sub[i]);
        if (mkdir(path, 0700) != 0 || (i == 0 && chown(path, uu, ug) != 0))
            return skd_err_set(err, SKD_ESANDBOX, "workspace quota: %s: %s", path, strerror(errno));
    }
    return 0;
}

/* q's copy of the workspace's directory descriptor (ws_fd borrowed, or the
 * path opened), checked to be a directory; *st is its stat. */
static int wsq_workspace(skd__wsq *q, const char *workspace, int ws_fd, struct stat *st,
                         skd_err *err)
{
    q->ws_fd = ws_fd >= 0 ? fcntl(ws_fd, F_DUPFD_CLOEXEC, 3)
                          : open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (q->ws_fd < 0 || fstat(q->ws_fd, st) != 0 || !S_ISDIR(st->st_mode))
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: %s: %s", workspace,
                           strerror(errno));
    skd_strlcpy(q->workspace, workspace, sizeof(q->workspace)); /* for messages */
    return 0;
}

/* The workspace (q->ws_fd, stat st) as the lower layer of the overlay on
 * q->merged, over q's directories (wsq_dirs). */
static int wsq_overlay(skd__wsq *q, const struct stat *st, int idmap_fd, skd_err *err)
{
    char opts[3 * PATH_MAX + 128], path[PATH_MAX];
    /* upper/ is the merged root: it gets the workspace root's mode, or the
     * sandbox user could not create files in /workspace. */
    snprintf(path, sizeof(path), "%s/upper", q->dir);
    if (chmod(path, st->st_mode & 07777) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: %s: %s", path, strerror(errno));
    if (idmap_fd >= 0) {
        /* The lower layer through the sandbox's idmap, at dir/lower. */
        snprintf(path, sizeof(path), "%s/lower", q->dir);
        if (attach_idmapped(q->ws_fd, idmap_fd, path) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "workspace quota: idmapped lower layer: %s",
                               strerror(errno));
        q->lower_mounted = 1;
    } else {
        /* The lower layer is the directory behind our descriptor (overlayfs
         * resolves the magic link once, at mount time). */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", q->ws_fd);
    }
    snprintf(opts, sizeof(opts), "lowerdir=");
    if (escape_path(opts, sizeof(opts), path) ||
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 ",upperdir=%s/upper,workdir=%s/work,redirect_dir=off,index=off,metacopy=off,"
                 "xino=off",
                 q->dir, q->dir) >= (int)(sizeof(opts) - strlen(opts)))
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: overlay options too long");
    if (mount("skilld-wsq", q->merged, "overlay", MS_NOSUID | MS_NODEV, opts) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: overlay on %s: %s", q->workspace,
                           strerror(errno));
    q->overlay_mounted = 1;
    return 0;
}

static skd__wsq *wsq_new(void)
{
    skd__wsq *q = calloc(1, sizeof(*q));
    if (q)
        q->ws_fd = -1;
    return q;
}

int skd__wsq_prepare_idmapped(const char *workspace, int ws_fd, const char *id, int64_t quota,
                              int idmap_fd, unsigned upper_uid, unsigned upper_gid, skd__wsq **out,
                              skd_err *err)
{
    *out = NULL;
    struct stat st;
    if (quota <= 0)
        return skd_err_set(err, SKD_ESANDBOX, "workspace quota: no quota to enforce");
    skd__wsq *q = wsq_new();
    if (!q)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    /* upper/'s owner: the sandbox user's host id through the idmap, else
     * the workspace's own */
    int rc = wsq_workspace(q, workspace, ws_fd, &st, err);
    if (rc == 0)
        rc = wsq_dirs(q, id, quota, idmap_fd >= 0, idmap_fd >= 0 ? (uid_t)upper_uid : st.st_uid,
                      idmap_fd >= 0 ? (gid_t)upper_gid : st.st_gid, err);
    if (rc == 0)
        rc = wsq_overlay(q, &st, idmap_fd, err);
    if (rc)
        skd__wsq_free(q);
    else
        *out = q;
    return rc;
}

int skd__wsq_stage(const char *name, int64_t quota, unsigned upper_uid, unsigned upper_gid,
                   skd__wsq **out, skd_err *err)
{
    *out = NULL;
    skd__wsq *q = wsq_new();
    if (!q)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    int rc = wsq_dirs(q, name, quota, 1, (uid_t)upper_uid, (gid_t)upper_gid, err);
    if (rc)
        skd__wsq_free(q);
    else
        *out = q;
    return rc;
}

int skd__wsq_prepare_staged(skd__wsq *stage, const char *workspace, int ws_fd, const char *id,
                            int64_t quota, int idmap_fd, unsigned upper_uid, unsigned upper_gid,
                            skd__wsq **out, skd_err *err)
{
    if (!stage || stage->quota != quota || idmap_fd < 0 || stage->overlay_mounted) {
        skd__wsq_free(stage);
        return skd__wsq_prepare_idmapped(workspace, ws_fd, id, quota, idmap_fd, upper_uid,
                                         upper_gid, out, err);
    }
    *out = NULL;
    struct stat st;
    int rc = wsq_workspace(stage, workspace, ws_fd, &st, err);
    if (rc == 0)
        rc = wsq_overlay(stage, &st, idmap_fd, err);
    if (rc)
        skd__wsq_free(stage);
    else
        *out = stage;
    return rc;
}

/* ---- commit ---------------------------------------------------------------- */

/* One pass over the upper layer: measure (apply 0) or apply (apply 1). */
struct pass {
    int apply;
    uint64_t added, removed;     /* bytes of regular files */
    uint64_t added_e, removed_e; /* entries (files, directories, links) */
    int shallow;                 /* removed trees count their top entry only */
    uid_t uid;                   /* the workspace's owner */
    gid_t gid;
    skd_err *err;
    int depth;
    skd__wsq_seen **seen; /* a live sandbox's: what earlier commits applied */
    uint64_t fresh;       /* entries to apply (new, changed, or a directory's mode) */
};

/* An entry a live sandbox's earlier commit applied, unchanged since. */
static int is_old(const struct pass *p, const struct stat *st)
{
    return p->seen && skd__wsq_seen_same(*p->seen, st->st_ino, &st->st_ctim);
}

static int is_whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static int is_opaque(int fd)
{
    char v[4];
    ssize_t n = fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v));
    return n == 1 && v[0] == 'y';
}

/* What the run takes away at name under dirfd (a file or a tree): its
 * bytes of regular files and its entries, the top one included, added to
 * p's removed counts; nothing when there is nothing. */
static void remove_usage(struct pass *p, int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    p->removed_e++;
    if (S_ISREG(st.st_mode))
        p->removed += (uint64_t)st.st_size;
    if (!S_ISDIR(st.st_mode) || p->shallow)
        return;
    skd_ws_usage u = {0};
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && skd_workspace_usage_limit(fd, max_entries, &u, NULL) == 0) {
        p->removed += u.bytes;
        p->removed_e += u.entries;
    }
    if (fd >= 0)
        close(fd);
}

/* Remove name under dirfd, file or tree. */
static int remove_any(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
    return skd_image_rm_tree_at(dirfd, name) == 0 ? 0 : -1;
}

static int fail_io(struct pass *p, const char *what, const char *name)
{
    return skd_err_set(p->err, SKD_EIO, "workspace commit: %s %.200s: %s", what, name,
                       strerror(errno));
}

/* Copy regular file name from udir to wdir: a temporary name, then rename
 * over the target (a directory there goes first). */
static int put_file(struct pass *p, int udir, int wdir, const char *name, const struct stat *st)
{
    char tmp[64];
    unsigned char rnd[8];
    int in = -1, out = -1, rc = 0;
    if (skd_random(rnd, sizeof(rnd)))
        return skd_err_set(p->err, SKD_EINTERNAL, "no randomness");
    snprintf(tmp, sizeof(tmp), TMP_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    in = openat(udir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    out = openat(wdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (in < 0 || out < 0) {
        rc = fail_io(p, "open", name);
        goto done;
    }
    for (;;) { /* tmpfs to DATA_DIR: copy_file_range would only say EXDEV */
        char buf[65536];
        ssize_t n = read(in, buf, sizeof(buf));
        if (n == 0)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || skd_write_all(out, buf, (size_t)n) != 0) {
            rc = errno == ENOSPC ? skd_err_set(p->err, SKD_EQUOTA, "workspace commit: disk full")
                                 : fail_io(p, "copy", name);
            goto done;
        }
    }
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchown(out, p->uid, p->gid) != 0 || fchmod(out, st->st_mode & 0777) != 0 ||
        futimens(out, ts) != 0 || fsync(out) != 0) {
        rc = fail_io(p, "finish", name);
        goto done;
    }
    struct stat old;
    if (fstatat(wdir, name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(old.st_mode) &&
        remove_any(wdir, name) != 0) {
        rc = fail_io(p, "replace", name);
        goto done;
    }
    if (renameat(wdir, tmp, wdir, name) != 0)
        rc = fail_io(p, "rename", name);
done:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (rc)
        (void)unlinkat(wdir, tmp, 0);
    return rc;
}

static int put_link(struct pass *p, int udir, int wdir, const char *name)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(udir, name, target, sizeof(target) - 1);
    if (n < 0)
        return fail_io(p, "readlink", name);
    target[n] = '\0';
    if (remove_any(wdir, name) != 0 || symlinkat(target, wdir, name) != 0)
        return fail_io(p, "symlink", name);
    if (fchownat(wdir, name, p->uid, p->gid, AT_SYMLINK_NOFOLLOW) != 0)
        return fail_io(p, "chown", name);
    return 0;
}

static int walk_upper(struct pass *p, int udir, int wdir);

/* A directory of the upper layer: the workspace's (made when missing;
 * emptied first when opaque or when a non-directory was there). */
static int put_dir(struct pass *p, int udir, int wdir, const char *name, const struct stat *st)
{
    int rc = 0, ufd = openat(udir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int wfd = -1;
    struct stat old;
    if (ufd < 0)
        return fail_io(p, "open", name);
    int exists = wdir >= 0 && fstatat(wdir, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
    int opaque = is_opaque(ufd);
    int replace = exists && (!S_ISDIR(old.st_mode) || opaque);
    if (replace)
        remove_usage(p, wdir, name);
    if (!exists || replace)
        p->added_e++;
    if (!exists || replace || ((old.st_mode ^ st->st_mode) & 0777))
        p->fresh++;
    if (p->apply) {
        if ((replace && remove_any(wdir, name) != 0) ||
            ((!exists || replace) && mkdirat(wdir, name, st->st_mode & 0777) != 0 &&
             errno != EEXIST) ||
            (wfd = openat(wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
            fchown(wfd, p->uid, p->gid) != 0 || fchmod(wfd, st->st_mode & 0777) != 0) {
            rc = fail_io(p, "directory", name);
            goto out;
        }
        if (opaque && p->seen) /* live: later commits merge into it */
            (void)fremovexattr(ufd, "trusted.overlay.opaque");
    } else if (exists && !replace) {
        wfd = openat(wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    /* A new or replaced directory: everything below it counts as added. */
    rc = walk_upper(p, ufd, wfd);
    ufd = -1; /* closed by walk_upper */
out:
    if (ufd >= 0)
        close(ufd);
    if (wfd >= 0)
        close(wfd);
    return rc;
}

/* One entry of the upper layer. wdir -1: the workspace has nothing here. */
static int one_entry(struct pass *p, int udir, int wdir, const char *name)
{
    struct stat st, old;
    if (strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0)
        return 0; /* the workspace layer's temporary names are never committed */
    if (fstatat(udir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return fail_io(p, "stat", name);
    int exists = wdir >= 0 && fstatat(wdir, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
    if (S_ISDIR(st.st_mode))
        return put_dir(p, udir, wdir, name, &st);
    if ((!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) && !is_whiteout(&st)) || is_old(p, &st))
        return 0; /* FIFOs, sockets, devices: not kept; old: committed */
    p->fresh++;
    if (exists)
        remove_usage(p, wdir, name);
    if (S_ISREG(st.st_mode))
        p->added += (uint64_t)st.st_size;
    if (!is_whiteout(&st))
        p->added_e++;
    if (!p->apply)
        return 0;
    int rc = is_whiteout(&st)
                 ? (exists && remove_any(wdir, name) != 0 ? fail_io(p, "remove", name) : 0)
             : S_ISLNK(st.st_mode) ? put_link(p, udir, wdir, name)
                                   : put_file(p, udir, wdir, name, &st);
    if (rc == 0 && p->seen)
        (void)skd__wsq_seen_put(p->seen, st.st_ino, &st.st_ctim);
    return rc;
}

/* Every entry of udir (closed here) against wdir (borrowed, or -1). */
static int walk_upper(struct pass *p, int udir, int wdir)
{
    if (++p->depth > WSQ_MAX_DEPTH) {
        close(udir);
        p->depth--;
        return skd_err_set(p->err, SKD_EQUOTA, "the run nested directories deeper than %d",
                           WSQ_MAX_DEPTH);
    }
    DIR *d = fdopendir(udir);
    int rc = 0;
    if (!d) {
        close(udir);
        p->depth--;
        return fail_io(p, "read", "upper layer");
    }
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        rc = one_entry(p, dirfd(d), wdir, de->d_name);
    }
    closedir(d);
    p->depth--;
    return rc;
}

/* 1 when the directory fd (borrowed) holds nothing the commit would take
 * (only . and .., or temporary names), 0 when it does, -1 on an error. */
static int upper_empty(int fd)
{
    int dup = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return -1;
    }
    int empty = 1;
    struct dirent *de;
    errno = 0;
    while (empty && (de = readdir(d)) != NULL)
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0;
    int rc = errno && empty ? -1 : empty;
    closedir(d);
    return rc;
}

static int upper_fd(const skd__wsq *q)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/upper", q->dir);
    return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void skd__wsq_sandbox_gone(skd__wsq *q)
{
    if (q)
        q->sandbox_gone = 1;
}

int skd__wsq_commit(skd__wsq *q, int keep, int64_t reserve, uint64_t *bytes, skd_err *err)
{
    struct pass p = {.err = err, .seen = q->live ? &q->seen : NULL};
    struct stat st;
    struct statvfs vfs;
    uint64_t now = 0;
    int ws = -1, up = -1, rc = 0;
    *bytes = 0;
    /* Not known to be gone: a mount still busy means something of it is
     * not, and what it may still write is not taken. */
    if (q->overlay_mounted && !q->sandbox_gone) {
        if (umount2(q->merged, 0) != 0) {
            unmount_all(q);
            return skd_err_set(err, SKD_EQUOTA,
                               "the workspace was still in use after the run; nothing was kept");
        }
        q->overlay_mounted = 0;
    }
    if (!keep)
        return skd_err_set(err, SKD_ECANCELLED,
                           "the run was killed; its workspace changes "
                           "were not kept");
    /* A new open file description: its flock excludes the file skills'. */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", q->ws_fd);
    ws = open(self, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ws < 0 || fstat(ws, &st) != 0 || flock(ws, LOCK_EX) != 0) {
        rc = skd_err_set(err, SKD_EIO, "workspace commit: %s: %s", q->workspace, strerror(errno));
        goto out;
    }
    p.uid = st.st_uid;
    p.gid = st.st_gid;
    if ((up = upper_fd(q)) < 0) {
        rc = skd_err_set(err, SKD_EIO, "workspace commit: upper layer: %s", strerror(errno));
        goto out;
    }
    /* The run wrote nothing: nothing to check or apply, and the workspace
     * is not walked (a stat per entry, in the spawner). */
    int empty = upper_empty(up);
    if (empty < 0) {
        rc = skd_err_set(err, SKD_EIO, "workspace commit: upper layer: %s", strerror(errno));
        goto out;
    }
    if (empty) {
        *bytes = SKD_WS_BYTES_UNCHANGED;
        goto out;
    }
    if (p.seen) {
        /* A live sandbox's upper layer keeps what earlier commits applied:
         * when all of it is, the run changed nothing (as an empty upper
         * layer), found without the walk of the whole workspace below. */
        struct pass pre = p;
        rc = walk_upper(&pre, up, ws);
        up = -1; /* closed by walk_upper */
        if (rc != 0)
            goto out;
        if (pre.fresh == 0) {
            *bytes = SKD_WS_BYTES_UNCHANGED;
            goto out;
        }
        if ((up = upper_fd(q)) < 0) {
            rc = skd_err_set(err, SKD_EIO, "workspace commit: upper layer: %s", strerror(errno));
            goto out;
        }
    }
    skd_ws_usage u;
    if ((rc = skd_workspace_usage_limit(ws, max_entries, &u, err)) != 0)
        goto out;
    now = u.bytes;
    /* Past the bound the walk stopped early (u.entries is max + 1, bytes a
     * partial sum): what the run removes is then not measured below the top
     * of each tree (a run of many whiteouts would cost a bounded walk each),
     * and only a run that adds neither entries nor bytes is kept. */
    int over = u.entries > (uint64_t)max_entries;
    p.shallow = over;
    rc = walk_upper(&p, up, ws);
    up = -1; /* closed by walk_upper; the apply pass opens it afresh (a dup shares the offset) */
    if (rc != 0)
        goto out;
    uint64_t after = now + p.added - (p.removed < now + p.added ? p.removed : now + p.added);
    uint64_t grown = u.entries + p.added_e;
    uint64_t after_e = grown - (p.removed_e < grown ? p.removed_e : grown);
    if (over ? p.added_e > 0 || p.added > 0 : after_e > (uint64_t)max_entries) {
        rc = skd_err_set(err, SKD_EQUOTA,
                         "the run left the workspace with %s%llu files, directories and links, "
                         "above SKILLS_WORKSPACE_MAX_ENTRIES=%lld; none of its changes were kept%s",
                         over ? "more than " : "",
                         (unsigned long long)(over ? (uint64_t)max_entries : after_e), max_entries,
                         over ? " (a run that only removes is)" : "");
        goto out;
    }
    if (!over && after > (uint64_t)q->quota) {
        rc = skd_err_set(err, SKD_EQUOTA,
                         "the run left the workspace at %llu bytes, above its quota of %lld "
                         "(SKILLS_WORKSPACE_QUOTA_BYTES); none of its changes were kept",
                         (unsigned long long)after, (long long)q->quota);
        goto out;
    }
    /* Bytes and a block per new entry (directories and links take disk). */
    uint64_t need = p.added + SKD_WS_ENTRY_BYTES * p.added_e;
    if (need > 0 && fstatvfs(ws, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < need + (uint64_t)(reserve > 0 ? reserve : 0)) {
        rc = skd_err_set(err, SKD_EQUOTA,
                         "DATA_DIR's filesystem keeps %lld bytes free for the store "
                         "(SKILLS_DATA_RESERVE_BYTES); none of the run's changes were kept",
                         (long long)reserve);
        goto out;
    }
    p.apply = 1;
    p.added = p.removed = p.added_e = p.removed_e = 0;
    if ((up = upper_fd(q)) < 0) {
        rc = skd_err_set(err, SKD_EIO, "workspace commit: upper layer: %s", strerror(errno));
        goto out;
    }
    rc = walk_upper(&p, up, ws);
    up = -1;
    if (rc != 0)
        goto out;
    *bytes = after;
    q->written = p.added;
out:
    if (up >= 0)
        close(up);
    if (ws >= 0)
        close(ws); /* drops the lock */
    return rc;
}

void skd__wsq_commit_outcome(skd__wsq *q, int keep, int64_t reserve, struct skd__outcome *o)
{
    skd_err err = {0};
    o->ws_checked = 1;
    q->written = 0;
    o->ws_error = skd__wsq_commit(q, keep, reserve, &o->ws_bytes, &err);
    o->ws_written = o->ws_error ? 0 : q->written;
    if (o->ws_error)
        skd_strlcpy(o->ws_message, skd_err_msg(&err), sizeof(o->ws_message));
    if (o->ws_error == SKD_EIO)
        skd_warn("workspace commit of %s: %s", q->workspace, skd_err_msg(&err));
}

void skd__wsq_commit_live(skd__wsq *q, int64_t reserve, struct skd__outcome *o)
{
    q->live = 1;
    q->sandbox_gone = 1; /* read with the overlay mounted: the sandbox uses it */
    skd__wsq_commit_outcome(q, 1, reserve, o);
}
