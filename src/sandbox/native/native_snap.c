/*
 * Saved files of paused live sandboxes (DESIGN.md, "Live sandboxes"): the
 * spawner's half of pause, resume and fork. A snapshot is a directory
 * <instance>/<name>/ under DATA_DIR/snapshots/ holding layer/ (the upper
 * directories of the sandbox's writable root layer, overlay whiteouts and
 * opaque marks included) and tmp/ (its /tmp). Files keep the owner, mode
 * and times they had in the sandbox: the sandbox user's files stay owned
 * by its mapped uid on the host, and the rest by root.
 *
 * Trust: every tree copied or removed here was written by a sandbox. It is
 * walked with directory descriptors only (openat, O_NOFOLLOW, AT_SYMLINK_
 * NOFOLLOW): a symbolic link is copied as a link and never followed, so a
 * sandbox that swaps a directory for a link while a fork copies it gains
 * nothing. Nothing is parsed: names and bytes are copied as they are.
 * Only regular files, directories, symbolic links, FIFOs and overlay
 * whiteouts (0:0 character devices) are copied; anything else is left out.
 * A copy runs in a child process of the spawner, so that a fault in it
 * does not take the spawner (and every sandbox) along; the spawner waits.
 * Bytes, entries and depth are capped; past the byte cap the copy fails
 * with SKD_EQUOTA and its partial result is removed.
 *
 * Instances: each server's zygote makes its own directory, <random>/, and
 * holds an flock on <random>.lock for its life, for the snapshots it makes
 * and uses at once (a fork's copy, a pause's copy before it is complete).
 * When a zygote starts, the directories whose lock nobody holds belong to
 * a server that is gone (killed or stopped) and are removed.
 *
 * A pause's snapshot is then published: renamed into paused/<id>, which
 * no instance owns. It outlives the server that paused the sandbox, so
 * that the server after a restart, or any replica sharing DATA_DIR, can
 * resume or fork it (the store's row says who may: src/store/live_rows.c).
 * It is removed by the resume, or by the sandbox's delete, or once its
 * row has ended by the server's sweep (src/engine/live_tick.c), which
 * lists paused/ here (skd__snap_list_paused).
 */
#include "sandbox/native/native_snap.h"
#include "sandbox/native/native_int.h"
#include "sandbox/spawner/spawner.h"
#include "sandbox/spawner/spawner_proto.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <dirent.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define COPY_DEPTH_MAX 128
#define COPY_ENTRIES_MAX 1000000
#define COPY_BUF (128u * 1024u)
#define OPAQUE_XATTR "trusted.overlay.opaque"
#define SNAP_PAUSED "paused" /* beside the instances: never a UUID */

static char snap_dir[PATH_MAX]; /* this instance's directory, or "" */

static int open_top(const char *dir, const char **name);
static void remove_dead_instances(int dfd, const char *own);
static int instance_make(skd_err *err);

void skd__snap_set_dir(const char *dir)
{
    snap_dir[0] = '\0';
    if (!dir || strlen(dir) >= sizeof(snap_dir))
        return;
    memcpy(snap_dir, dir, strlen(dir) + 1);
    /* What servers that are gone left (a kill -9 skips their clean-up);
     * nothing is made here. */
    const char *name;
    int top = open_top(snap_dir, &name);
    if (top >= 0) {
        remove_dead_instances(top, name);
        close(top);
    }
}

int skd__snap_enabled(void)
{
    return snap_dir[0] != '\0';
}

static int is_dot(const char *n)
{
    return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

/* ---- removing a tree ---- */

static void remove_in(int dfd, int depth)
{
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (is_dot(e->d_name))
            continue;
        if (unlinkat(dfd, e->d_name, 0) == 0 || (errno != EISDIR && errno != EPERM))
            continue;
        int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0 && depth < COPY_DEPTH_MAX + 4)
            remove_in(sub, depth + 1);
        if (sub >= 0)
            close(sub);
        unlinkat(dfd, e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Remove dfd/name and everything under it, following no link. */
static int remove_tree_at(int dfd, const char *name)
{
    if (unlinkat(dfd, name, 0) == 0)
        return 0;
    int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return errno == ENOENT ? SKD_ENOENT : 0;
    remove_in(sub, 0);
    close(sub);
    unlinkat(dfd, name, AT_REMOVEDIR);
    return 0;
}

/* ---- copying a tree ---- */

struct copy {
    int64_t max, bytes;
    long entries;
    const char *prefix; /* at the top: only names that start with it */
    int sync;           /* each file and directory on disk before the copy ends */
    char *buf;
    skd_err *err;
};

static void keep_meta(int fd, const struct stat *st)
{
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchown(fd, st->st_uid, st->st_gid) != 0 || fchmod(fd, st->st_mode & 07777) != 0)
        skd_debug("snapshot: owner or mode: %s", strerror(errno));
    futimens(fd, ts);
}

static int copy_file(struct copy *c, int sfd, int dfd, const char *name)
{
    int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int out = -1, rc = 0;
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0 || !S_ISREG(st.st_mode))
        goto out; /* gone or swapped meanwhile: left out */
    out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        rc = skd_err_set(c->err, SKD_EIO, "snapshot: create %s: %s", name, strerror(errno));
        goto out;
    }
    for (;;) {
        ssize_t n = read(in, c->buf, COPY_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = skd_err_set(c->err, SKD_EIO, "snapshot: read %s: %s", name, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        if ((c->bytes += n) > c->max) {
            rc = skd_err_set(c->err, SKD_EQUOTA, "the sandbox's files are over %lld bytes",
                             (long long)c->max);
            goto out;
        }
        for (ssize_t w = 0; w < n;) {
            ssize_t k = write(out, c->buf + w, (size_t)(n - w));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                rc = skd_err_set(c->err, SKD_EIO, "snapshot: write %s: %s", name,
                                 k < 0 ? strerror(errno) : "short write");
                goto out;
            }
            w += k;
        }
    }
    keep_meta(out, &st);
    if (c->sync && fsync(out) != 0)
        rc = skd_err_set(c->err, SKD_EIO, "snapshot: sync %s: %s", name, strerror(errno));
out:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}

static int copy_dir(struct copy *c, int sfd, int dfd, int depth);

static int copy_entry(struct copy *c, int sfd, int dfd, const char *name, int depth)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 0; /* gone meanwhile */
    if (++c->entries > COPY_ENTRIES_MAX)
        return skd_err_set(c->err, SKD_EQUOTA, "the sandbox holds more than %d files",
                           COPY_ENTRIES_MAX);
    c->bytes += 512; /* an entry costs something even when empty */
    if (S_ISREG(st.st_mode))
        return copy_file(c, sfd, dfd, name);
    if (S_ISDIR(st.st_mode)) {
        if (depth >= COPY_DEPTH_MAX)
            return skd_err_set(c->err, SKD_EQUOTA, "the sandbox's directories are deeper than %d",
                               COPY_DEPTH_MAX);
        if (mkdirat(dfd, name, 0700) != 0)
            return skd_err_set(c->err, SKD_EIO, "snapshot: mkdir %s: %s", name, strerror(errno));
        int s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int rc = 0;
        if (s >= 0 && d >= 0) {
            char v[8];
            ssize_t n = fgetxattr(s, OPAQUE_XATTR, v, sizeof(v));
            if (n > 0 && fsetxattr(d, OPAQUE_XATTR, v, (size_t)n, 0) != 0)
                rc = skd_err_set(c->err, SKD_EIO, "snapshot: opaque mark on %s: %s", name,
                                 strerror(errno));
            if (rc == 0)
                rc = copy_dir(c, s, d, depth + 1);
            if (rc == 0)
                keep_meta(d, &st);
            if (rc == 0 && c->sync && fsync(d) != 0) /* its entries */
                rc = skd_err_set(c->err, SKD_EIO, "snapshot: sync %s: %s", name, strerror(errno));
        }
        if (s >= 0)
            close(s);
        if (d >= 0)
            close(d);
        return rc;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
        if (n < 0)
            return 0;
        target[n] = '\0';
        c->bytes += n;
        if (symlinkat(target, dfd, name) != 0)
            return skd_err_set(c->err, SKD_EIO, "snapshot: symlink %s: %s", name, strerror(errno));
        fchownat(dfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
    }
    int whiteout = S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
    if (whiteout || S_ISFIFO(st.st_mode)) {
        mode_t m = whiteout ? S_IFCHR : S_IFIFO | (st.st_mode & 0777);
        if (mknodat(dfd, name, m, whiteout ? makedev(0, 0) : 0) != 0)
            return skd_err_set(c->err, SKD_EIO, "snapshot: mknod %s: %s", name, strerror(errno));
        fchownat(dfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
        return 0;
    }
    return 0; /* sockets and devices are not kept */
}

static int copy_dir(struct copy *c, int sfd, int dfd, int depth)
{
    int fd = fcntl(sfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return skd_err_set(c->err, SKD_EIO, "snapshot: opendir: %s", strerror(errno));
    }
    /* The duplicate shares sfd's offset, which an earlier copy from the
     * same descriptor (a fork, then a pause) left at the end. */
    rewinddir(d);
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (is_dot(e->d_name))
            continue;
        if (depth == 0 && c->prefix && strncmp(e->d_name, c->prefix, strlen(c->prefix)) != 0)
            continue;
        rc = copy_entry(c, sfd, dfd, e->d_name, depth);
    }
    closedir(d);
    return rc;
}

/* Create files as id (the file system ids only), keeping the capabilities
 * root has: a tmpfs mounted in a sandbox's user namespace takes new files
 * only from ids mapped there, and host root is not. */
static int become_fsid(unsigned id)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return -1;
    setfsgid(id);
    setfsuid(id);
    if ((unsigned)setfsuid((uid_t)-1) != id || (unsigned)setfsgid((gid_t)-1) != id)
        return -1;
    d[0].effective = d[0].permitted; /* setfsuid cleared the file ones */
    d[1].effective = d[1].permitted;
    return (int)syscall(SYS_capset, &h, d);
}

/* The result a copying child sends back. */
struct copy_reply {
    int rc;
    int64_t bytes;
    char msg[SKD_ERR_MSG_MAX];
};

static int copy_tree(int src, int dst, const char *prefix, int64_t max, unsigned fsid, int sync,
                     int64_t *bytes, skd_err *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "snapshot: pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return skd_err_set(err, SKD_ESANDBOX, "snapshot: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
            _exit(1);
        close(p[0]);
        struct copy_reply rep;
        memset(&rep, 0, sizeof(rep));
        skd_err e = {0};
        struct copy c = {
            .max = max, .prefix = prefix, .sync = sync, .buf = malloc(COPY_BUF), .err = &e};
        if (!c.buf)
            rep.rc = skd_err_set(&e, SKD_ENOMEM, "snapshot: out of memory");
        else if (fsid && become_fsid(fsid) != 0)
            rep.rc = skd_err_set(&e, SKD_ESANDBOX, "snapshot: file ids: %s", strerror(errno));
        else if ((rep.rc = copy_dir(&c, src, dst, 0)) == 0 && sync && fsync(dst) != 0)
            rep.rc = skd_err_set(&e, SKD_EIO, "snapshot: sync: %s", strerror(errno));
        rep.bytes = c.bytes;
        skd_strlcpy(rep.msg, skd_err_msg(&e), sizeof(rep.msg));
        ssize_t w = write(p[1], &rep, sizeof(rep));
        _exit(w == (ssize_t)sizeof(rep) ? 0 : 1);
    }
    close(p[1]);
    struct copy_reply rep;
    ssize_t n;
    do
        n = read(p[0], &rep, sizeof(rep));
    while (n < 0 && errno == EINTR);
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof(rep))
        return skd_err_set(err, SKD_ESANDBOX, "snapshot: the copying process failed");
    rep.msg[sizeof(rep.msg) - 1] = '\0';
    if (bytes)
        *bytes += rep.bytes;
    if (rep.rc > 0 || rep.rc < SKD__ERR_FIRST || (rep.rc == 0 && !WIFEXITED(st)))
        return skd_err_set(err, SKD_ESANDBOX, "snapshot: bad reply");
    return rep.rc ? skd_err_set(err, rep.rc, "%s", rep.msg) : 0;
}

int skd__snap_copy(int src, int dst, const char *prefix, int64_t max, unsigned fsid, int64_t *bytes,
                   skd_err *err)
{
    return copy_tree(src, dst, prefix, max, fsid, 0, bytes, err);
}

int skd__snap_copy_synced(int src, int dst, const char *prefix, int64_t max, int64_t *bytes,
                          skd_err *err)
{
    return copy_tree(src, dst, prefix, max, 0, 1, bytes, err);
}

/* ---- the snapshot store ---- */

/* DATA_DIR/snapshots/paused as a directory fd, made first with create;
 * -1 with errno when there is none. */
static int paused_open(int create)
{
    const char *name;
    int top = open_top(snap_dir, &name);
    if (top < 0)
        return -1;
    if (create && mkdirat(top, SNAP_PAUSED, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        close(top);
        errno = e;
        return -1;
    }
    int fd = openat(top, SNAP_PAUSED, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(top);
    errno = e;
    return fd;
}

int skd__snap_open(const char *name, int create, skd_err *err)
{
    if (!snap_dir[0])
        return skd_err_set(err, SKD_EUNSUPPORTED,
                           "pause, resume and fork need a server (no snapshot directory)");
    int rc = create ? instance_make(err) : 0;
    if (rc)
        return rc;
    if (!create) { /* a paused sandbox's, published */
        int pd = paused_open(0);
        int fd = pd >= 0 ? openat(pd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (pd >= 0)
            close(pd);
        if (fd >= 0)
            return fd;
    }
    int root = open(snap_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0 && errno == ENOENT)
        return skd_err_set(err, SKD_ENOENT, "snapshot %s: no saved files", name);
    if (root < 0)
        return skd_err_set(err, SKD_ESANDBOX, "snapshot directory %s: %s", snap_dir,
                           strerror(errno));
    if (create && mkdirat(root, name, 0700) != 0) {
        int e = errno;
        close(root);
        return skd_err_set(err, SKD_ESANDBOX, "snapshot %s: mkdir: %s", name, strerror(e));
    }
    int fd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(root);
    if (fd < 0)
        return skd_err_set(err, e == ENOENT ? SKD_ENOENT : SKD_ESANDBOX, "snapshot %s: %s", name,
                           e == ENOENT ? "no saved files" : strerror(e));
    return fd;
}

int skd__snap_drop(const char *name)
{
    if (!snap_dir[0])
        return SKD_ENOENT;
    int rc = SKD_ENOENT;
    int root = open(snap_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root >= 0) {
        rc = remove_tree_at(root, name);
        close(root);
    }
    int pd = paused_open(0);
    if (pd >= 0) {
        if (remove_tree_at(pd, name) == 0)
            rc = 0;
        close(pd);
    }
    return rc;
}

int skd__snap_list_paused(char *ids, size_t cap, int *n, int *others, char *other, size_t ocap,
                          skd_err *err)
{
    size_t len = 0;
    *n = *others = 0;
    if (cap)
        ids[0] = '\0';
    if (ocap)
        other[0] = '\0';
    if (!snap_dir[0])
        return skd_err_set(err, SKD_EUNSUPPORTED, "no snapshot directory");
    int pd = paused_open(0);
    if (pd < 0 && errno == ENOENT)
        return 0; /* nothing was ever paused */
    DIR *d = pd >= 0 ? fdopendir(pd) : NULL;
    if (!d) {
        int e = errno;
        if (pd >= 0)
            close(pd);
        return skd_err_set(err, SKD_ESANDBOX, "snapshots/%s: %s", SNAP_PAUSED, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (!skd__spawner_valid_uuid(de->d_name)) {
            if ((*others)++ == 0 && ocap)
                snprintf(other, ocap, "%s", de->d_name);
        } else if (len + SKD_UUID_LEN + 2 <= cap) {
            memcpy(ids + len, de->d_name, SKD_UUID_LEN);
            len += SKD_UUID_LEN;
            ids[len++] = '\n';
            ids[len] = '\0';
            (*n)++;
        }
    }
    closedir(d);
    return 0;
}

void skd__snap_list_message(skd__spawn_out *o, uint64_t handle)
{
    skd_err err = {0};
    char other[256];
    int n = 0, others = 0;
    char *ids = malloc(SKD__SPAWN_STR_MAX);
    int rc = ids ? skd__snap_list_paused(ids, SKD__SPAWN_STR_MAX, &n, &others, other, sizeof(other),
                                         &err)
                 : skd_err_set(&err, SKD_ENOMEM, "sandbox spawner: out of memory");
    skd__spawn_out_init(o, rc ? SKD__REP_ERROR : SKD__REP_OK, handle);
    if (rc) {
        skd__spawn_out_i32(o, SKD__T_CODE, rc);
        skd__spawn_out_str(o, SKD__T_MESSAGE, skd_err_msg(&err));
    } else {
        skd__spawn_out_str(o, SKD__T_SNAP, ids);
        skd__spawn_out_snap_args(o, 0, others);
        if (others)
            skd__spawn_out_str(o, SKD__T_MESSAGE, other);
    }
    free(ids);
}

int skd__snap_publish(const char *from, const char *to, skd_err *err)
{
    int root = open(snap_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int pd = root >= 0 ? paused_open(1) : -1;
    int rc = 0;
    if (root < 0 || pd < 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "snapshot directory: %s", strerror(errno));
    else {
        remove_tree_at(pd, to); /* a stale one */
        /* Its files were synced as they were copied (skd__snap_copy_synced,
         * while the sandbox still ran); the fsync of paused/ keeps the
         * rename before the caller marks the row paused. A failed fsync
         * after the rename is only logged: the files are there and whole,
         * and a rename a crash of the machine undid leaves a paused row
         * without files, which its resume reports as sandbox_lost. */
        if (renameat(root, from, pd, to) != 0)
            rc = skd_err_set(err, SKD_ESANDBOX, "snapshot: rename into %s/: %s", SNAP_PAUSED,
                             strerror(errno));
        else if (fsync(pd) != 0)
            skd_warn("snapshot %s: sync of %s/: %s", to, SNAP_PAUSED, strerror(errno));
    }
    if (root >= 0)
        close(root);
    if (pd >= 0)
        close(pd);
    return rc;
}

int skd__snap_rename(const char *from, const char *to, skd_err *err)
{
    int root = open(snap_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0)
        return skd_err_set(err, SKD_ESANDBOX, "snapshot directory: %s", strerror(errno));
    remove_tree_at(root, to); /* a stale one */
    int rc = renameat(root, from, root, to) == 0
                 ? 0
                 : skd_err_set(err, SKD_ESANDBOX, "snapshot: rename: %s", strerror(errno));
    close(root);
    return rc;
}

/* Remove the instances under dfd whose lock nobody holds, but own. */
static void remove_dead_instances(int dfd, const char *own)
{
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char inst[64];
        if (n <= 5 || n >= sizeof(inst) || strcmp(e->d_name + n - 5, ".lock") != 0)
            continue;
        memcpy(inst, e->d_name, n - 5);
        inst[n - 5] = '\0';
        if (strcmp(inst, own) == 0)
            continue;
        int lf = openat(dfd, e->d_name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (lf < 0 || flock(lf, LOCK_EX | LOCK_NB) != 0) {
            if (lf >= 0)
                close(lf);
            continue;
        }
        remove_tree_at(dfd, inst);
        skd_info("removed the saved files of a server that is gone (%s)", inst);
        unlinkat(dfd, e->d_name, 0);
        close(lf);
    }
    closedir(d);
}

/* The parent of snap_dir (DATA_DIR/snapshots) as a directory fd, and the
 * instance's name in it; -1 when there is none. */
static int open_top(const char *dir, const char **name)
{
    char top[PATH_MAX];
    const char *slash = strrchr(dir, '/');
    if (!dir[0] || !slash || (size_t)(slash - dir) >= sizeof(top))
        return -1;
    memcpy(top, dir, (size_t)(slash - dir));
    top[slash - dir] = '\0';
    *name = slash + 1;
    return open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int snap_lock = -1; /* the spawner's hold on its instance, once made */

/* Make this instance's directory and lock at the first use (DATA_DIR is
 * the server's by then: nothing is made in a DATA_DIR that was refused). */
static int instance_make(skd_err *err)
{
    const char *name;
    char lock[80];
    if (snap_lock >= 0)
        return 0;
    char top[PATH_MAX];
    const char *slash = strrchr(snap_dir, '/');
    if (!slash || (size_t)(slash - snap_dir) >= sizeof(top))
        return skd_err_set(err, SKD_ESANDBOX, "snapshot directory: bad path");
    memcpy(top, snap_dir, (size_t)(slash - snap_dir));
    top[slash - snap_dir] = '\0';
    if (mkdir(top, 0700) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_ESANDBOX, "snapshot directory %s: %s", top, strerror(errno));
    int dfd = open_top(snap_dir, &name);
    if (dfd < 0)
        return skd_err_set(err, SKD_ESANDBOX, "snapshot directory %s: %s", top, strerror(errno));
    snprintf(lock, sizeof(lock), "%s.lock", name);
    int lf = openat(dfd, lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = 0;
    if (lf < 0 || (flock(lf, LOCK_EX | LOCK_NB) != 0 && errno != EWOULDBLOCK) ||
        (mkdirat(dfd, name, 0700) != 0 && errno != EEXIST))
        rc = skd_err_set(err, SKD_ESANDBOX, "snapshot directory %s: %s", snap_dir, strerror(errno));
    /* EWOULDBLOCK: this server's zygote holds it (a spawner before this
     * one made it); the name is this server's alone. */
    close(dfd);
    if (rc) {
        if (lf >= 0)
            close(lf);
        return rc;
    }
    snap_lock = lf;
    return 0;
}

void skd__snap_instance_name(const char *data_dir, char *dir, size_t cap)
{
    char id[SKD_UUID_LEN + 1];
    dir[0] = '\0';
    if (skd_uuid(id) || snprintf(dir, cap, "%s/snapshots/%s", data_dir, id) >= (int)cap)
        dir[0] = '\0';
}

int skd__snap_instance_hold(const char *dir)
{
    const char *name;
    char lock[80];
    int dfd = open_top(dir, &name);
    if (dfd < 0)
        return -1;
    snprintf(lock, sizeof(lock), "%s.lock", name);
    int lf = openat(dfd, lock, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    close(dfd);
    if (lf >= 0 && flock(lf, LOCK_EX | LOCK_NB) != 0) {
        close(lf); /* its spawner still holds it */
        lf = -1;
    }
    return lf;
}

void skd__snap_instance_end(const char *dir, int lock_fd)
{
    const char *name;
    char lock[80];
    int dfd = open_top(dir, &name);
    if (dfd >= 0) {
        remove_tree_at(dfd, name);
        snprintf(lock, sizeof(lock), "%s.lock", name);
        unlinkat(dfd, lock, 0);
        close(dfd);
    }
    if (lock_fd >= 0)
        close(lock_fd);
}
