/*
 * Applying one layer tarball to an image's root filesystem directory.
 *
 * The archive is hostile until proven otherwise. Every entry is placed
 * relative to the rootfs directory fd, walking one component at a time with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV), so no entry can land outside the rootfs: absolute names
 * and ".." components are refused, a path through a symlink (even one that
 * points back inside) is refused, and the final component is always created
 * fresh (old entry unlinked first, O_EXCL | O_NOFOLLOW), never written
 * through. Hard links must name a regular file already inside the image.
 * Device nodes, fifos and sockets are skipped and counted. Set-uid, set-gid
 * and sticky bits are stripped from files; directories keep their sticky bit
 * and always get u+rwx so later entries and `image rm` can work in them.
 * Ownership is not restored: files belong to the importing user, and the
 * sandbox reads them through their "other" permission bits.
 *
 * Whiteouts (OCI/docker layers): ".wh.NAME" deletes NAME from the lower
 * layers; ".wh..wh..opq" empties its directory of everything lower layers put
 * there, keeping what this layer wrote (tracked in a path set).
 */
#include "sandbox/image/image_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive_entry.h>

#include "skilld/util.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define RM_MAX_DEPTH 2048
#define COPY_CHUNK 65536

/* ---- path set --------------------------------------------------------- */

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void set_clear(skd__pathset *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slot[i]);
    free(s->slot);
    s->slot = NULL;
    s->cap = s->n = 0;
}

static int set_has(const skd__pathset *s, const char *p)
{
    if (!s->cap)
        return 0;
    for (size_t i = hash_str(p) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->slot[i])
            return 0;
        if (strcmp(s->slot[i], p) == 0)
            return 1;
    }
}

static int set_grow(skd__pathset *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 1024;
    char **nslot = calloc(ncap, sizeof(*nslot));
    if (!nslot)
        return SKD_ENOMEM;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->slot[i])
            continue;
        size_t j = hash_str(s->slot[i]) & (ncap - 1);
        while (nslot[j])
            j = (j + 1) & (ncap - 1);
        nslot[j] = s->slot[i];
    }
    free(s->slot);
    s->slot = nslot;
    s->cap = ncap;
    return 0;
}

static int set_add(skd__pathset *s, const char *p)
{
    if (set_has(s, p))
        return 0;
    if ((s->n + 1) * 2 > s->cap && set_grow(s))
        return SKD_ENOMEM;
    size_t i = hash_str(p) & (s->cap - 1);
    while (s->slot[i])
        i = (i + 1) & (s->cap - 1);
    if (!(s->slot[i] = strdup(p)))
        return SKD_ENOMEM;
    s->n++;
    return 0;
}

/* ---- names and fds ---------------------------------------------------- */

int skd__image_norm_path(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    if (!in || in[0] == '/')
        return -1;
    const char *p = in;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        if (n && !(n == 1 && p[0] == '.')) {
            if (o + (o ? 1 : 0) + n + 1 > cap)
                return -1;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    out[o] = '\0';
    return 0;
}

/* Open one path component (never containing '/', never "..": the callers
 * pass validated single names or ".") beneath at. openat2 refuses symlinks,
 * magic links and mount crossings; where openat2 is missing (old kernels,
 * valgrind) openat with O_NOFOLLOW gives the same guarantee for a single
 * component, less the mount-crossing check, which does not matter inside a
 * directory tree this import created. */
static int openat2_beneath(int at, const char *name, int flags)
{
    static int no_openat2;
    if (!no_openat2) {
        int fd = skd_openat2(at, name, flags, 0,
                             RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                 RESOLVE_NO_XDEV);
        if (fd >= 0 || errno != ENOSYS)
            return fd;
        no_openat2 = 1;
    }
    if (strchr(name, '/') || strcmp(name, "..") == 0) {
        errno = EXDEV;
        return -1;
    }
    return openat(at, name, flags | O_CLOEXEC | O_NOFOLLOW);
}

/* Open directory dir (normalised, relative to the rootfs) as a new O_PATH
 * fd, creating missing components (0755) when create. Returns the fd or a
 * negative SKD_E* with err naming the entry. */
static int walk_dir(skd__layer_ctx *c, const char *dir, int create, const char *entry, skd_err *err)
{
    int cur = openat2_beneath(c->rootfd, ".", O_PATH | O_DIRECTORY);
    if (cur < 0)
        return skd_err_set(err, SKD_EIO, "cannot open the rootfs: %s", strerror(errno));
    const char *p = dir;
    while (*p) {
        char comp[NAME_MAX + 1];
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > NAME_MAX) {
            close(cur);
            return skd_err_set(err, SKD_EPATH, "entry %s: a name is too long", entry);
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        int fd = openat2_beneath(cur, comp, O_PATH | O_DIRECTORY);
        if (fd < 0 && errno == ENOENT && create) {
            if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
                int e2 = errno;
                close(cur);
                return skd_err_set(err, SKD_EIO, "entry %s: mkdir %s: %s", entry, comp,
                                   strerror(e2));
            }
            fd = openat2_beneath(cur, comp, O_PATH | O_DIRECTORY);
        }
        if (fd < 0) {
            int e2 = errno;
            close(cur);
            if (e2 == ENOENT)
                return SKD_ENOENT; /* only without create: the caller decides */
            if (e2 == ELOOP || e2 == ENOTDIR || e2 == EXDEV)
                return skd_err_set(err, SKD_EPATH,
                                   "entry %s: component %s is a symlink or not a directory; "
                                   "writing through it is refused",
                                   entry, comp);
            return skd_err_set(err, SKD_EIO, "entry %s: %s: %s", entry, comp, strerror(e2));
        }
        close(cur);
        cur = fd;
        p += n;
        if (*p == '/')
            p++;
    }
    return cur;
}

static void cache_drop(skd__layer_ctx *c)
{
    if (c->cache_fd >= 0)
        close(c->cache_fd);
    c->cache_fd = -1;
    c->cache_path[0] = '\0';
}

/* Borrowed fd of directory dir (created when missing), cached while
 * consecutive entries share a parent. Any removal drops the cache. */
static int parent_fd(skd__layer_ctx *c, const char *dir, const char *entry, skd_err *err)
{
    if (c->cache_fd >= 0 && strcmp(c->cache_path, dir) == 0)
        return c->cache_fd;
    cache_drop(c);
    int fd = walk_dir(c, dir, 1, entry, err);
    if (fd < 0)
        return fd;
    c->cache_fd = fd;
    skd_strlcpy(c->cache_path, dir, sizeof(c->cache_path));
    return fd;
}

/* Split "a/b/c" into dir "a/b" and leaf "c" (in place). */
static void split_path(char *path, const char **dir, const char **leaf)
{
    char *slash = strrchr(path, '/');
    if (slash) {
        *slash = '\0';
        *dir = path;
        *leaf = slash + 1;
    } else {
        *dir = "";
        *leaf = path;
    }
}

/* ---- removal ---------------------------------------------------------- */

static int rm_tree(int at, const char *name, int depth)
{
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
    if (depth > RM_MAX_DEPTH)
        return -ELOOP;
    for (int round = 0; round < 4; round++) {
        int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
            int e = errno;
            close(fd);
            return -e;
        }
        int rc = 0;
        struct dirent *de;
        while (rc == 0 && (de = readdir(d))) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            rc = rm_tree(dirfd(d), de->d_name, depth + 1);
        }
        closedir(d);
        if (rc)
            return rc;
        if (unlinkat(at, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != ENOTEMPTY)
            return -errno;
    }
    return -ENOTEMPTY;
}

int skd__rm_tree_at(int at, const char *name)
{
    return rm_tree(at, name, 0);
}

void skd__rm_tree_path(const char *path)
{
    char copy[PATH_MAX];
    if (skd_strlcpy(copy, path, sizeof(copy)) != 0)
        return;
    char *slash = strrchr(copy, '/');
    if (!slash)
        return;
    *slash = '\0';
    int fd = open(copy, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)rm_tree(fd, slash + 1, 0);
    close(fd);
}

/* ---- entries ---------------------------------------------------------- */

/* Empty directory dir (relative path) of everything this layer did not
 * write: the opaque whiteout. */
static int apply_opaque(skd__layer_ctx *c, const char *dir, const char *entry, skd_err *err)
{
    int pfd = parent_fd(c, dir, entry, err);
    if (pfd < 0)
        return pfd;
    int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return skd_err_set(err, SKD_EIO, "entry %s: %s", entry, strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    int rc = 0;
    struct dirent *de;
    char child[PATH_MAX];
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (snprintf(child, sizeof(child), "%s%s%s", dir, *dir ? "/" : "", de->d_name) >=
            (int)sizeof(child))
            continue;
        if (set_has(&c->written, child))
            continue;
        int e = skd__rm_tree_at(dirfd(d), de->d_name);
        if (e)
            rc = skd_err_set(err, SKD_EIO, "entry %s: removing %s: %s", entry, child, strerror(-e));
    }
    closedir(d);
    return rc;
}

static int apply_whiteout(skd__layer_ctx *c, const char *dir, const char *leaf, const char *entry,
                          skd_err *err)
{
    if (strcmp(leaf, WH_OPAQUE) == 0)
        return apply_opaque(c, dir, entry, err);
    const char *victim = leaf + strlen(WH_PREFIX);
    if (!*victim || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0)
        return skd_err_set(err, SKD_EPATH, "entry %s: invalid whiteout", entry);
    cache_drop(c);
    int pfd = walk_dir(c, dir, 0, entry, err);
    if (pfd == SKD_ENOENT)
        return 0; /* nothing below to delete */
    if (pfd < 0)
        return pfd;
    int e = skd__rm_tree_at(pfd, victim);
    close(pfd);
    if (e)
        return skd_err_set(err, SKD_EIO, "entry %s: %s", entry, strerror(-e));
    return 0;
}

/* Make room for a new leaf: keep an existing directory when want_dir,
 * remove anything else. Returns 1 when a directory was kept. */
static int clear_leaf(int pfd, const char *leaf, int want_dir, const char *entry, skd_err *err)
{
    struct stat st;
    if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0;
        return skd_err_set(err, SKD_EIO, "entry %s: %s", entry, strerror(errno));
    }
    if (S_ISDIR(st.st_mode) && want_dir)
        return 1;
    int e = skd__rm_tree_at(pfd, leaf);
    if (e)
        return skd_err_set(err, SKD_EIO, "entry %s: replacing: %s", entry, strerror(-e));
    return 0;
}

static mode_t file_mode(mode_t m)
{
    return m & 0777; /* no set-uid, set-gid or sticky bit on files */
}

static mode_t dir_mode(mode_t m)
{
    return (m & 01777) | 0700;
}

static int make_dir(int pfd, const char *leaf, mode_t mode, const char *entry, skd_err *err)
{
    int kept = clear_leaf(pfd, leaf, 1, entry, err);
    if (kept < 0)
        return kept;
    if (!kept && mkdirat(pfd, leaf, 0700) < 0)
        return skd_err_set(err, SKD_EIO, "entry %s: mkdir: %s", entry, strerror(errno));
    int fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, dir_mode(mode)) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return skd_err_set(err, SKD_EIO, "entry %s: %s", entry, strerror(e));
    }
    close(fd);
    return 0;
}

static int copy_data(skd__layer_ctx *c, struct archive *a, int fd, const char *entry, skd_err *err)
{
    char *buf = malloc(COPY_CHUNK);
    if (!buf)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    int rc = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, COPY_CHUNK);
        if (n == 0)
            break;
        if (n < 0) {
            rc = skd_err_set(err, SKD_EINVAL, "entry %s: %s", entry, archive_error_string(a));
            break;
        }
        if (c->bytes + n > c->max_bytes) {
            rc = skd_err_set(err, SKD_ETOOBIG, "the image is larger than %lld bytes",
                             (long long)c->max_bytes);
            break;
        }
        c->bytes += n;
        for (la_ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = skd_err_set(err, SKD_EIO, "entry %s: write: %s", entry, strerror(errno));
                goto out;
            }
            off += w;
        }
    }
out:
    free(buf);
    return rc;
}

static int make_file(skd__layer_ctx *c, struct archive *a, struct archive_entry *ae, int pfd,
                     const char *leaf, const char *entry, skd_err *err)
{
    if (archive_entry_size_is_set(ae) && c->bytes + archive_entry_size(ae) > c->max_bytes)
        return skd_err_set(err, SKD_ETOOBIG, "the image is larger than %lld bytes",
                           (long long)c->max_bytes);
    int rc = clear_leaf(pfd, leaf, 0, entry, err);
    if (rc < 0)
        return rc;
    int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return skd_err_set(err, SKD_EIO, "entry %s: create: %s", entry, strerror(errno));
    rc = copy_data(c, a, fd, entry, err);
    if (rc == 0 && fchmod(fd, file_mode(archive_entry_mode(ae))) < 0)
        rc = skd_err_set(err, SKD_EIO, "entry %s: chmod: %s", entry, strerror(errno));
    if (rc == 0 && archive_entry_mtime_is_set(ae)) {
        struct timespec ts[2] = {{0, UTIME_OMIT},
                                 {archive_entry_mtime(ae), archive_entry_mtime_nsec(ae)}};
        (void)futimens(fd, ts); /* cosmetic; a failure is not worth an error */
    }
    close(fd);
    return rc;
}

static int make_symlink(struct archive_entry *ae, int pfd, const char *leaf, const char *entry,
                        skd_err *err)
{
    const char *target = archive_entry_symlink(ae);
    if (!target || !*target || strlen(target) >= PATH_MAX)
        return skd_err_set(err, SKD_EINVAL, "entry %s: invalid symlink target", entry);
    int rc = clear_leaf(pfd, leaf, 0, entry, err);
    if (rc < 0)
        return rc;
    /* The target is stored verbatim: nothing here ever follows it, and the
     * sandbox resolves it inside its own root. */
    if (symlinkat(target, pfd, leaf) < 0)
        return skd_err_set(err, SKD_EIO, "entry %s: symlink: %s", entry, strerror(errno));
    return 0;
}

static int make_hardlink(skd__layer_ctx *c, struct archive_entry *ae, int pfd,
                         const char *entry_path, const char *leaf, const char *entry, skd_err *err)
{
    char target[PATH_MAX];
    if (skd__image_norm_path(archive_entry_hardlink(ae), target, sizeof(target)) < 0 || !*target)
        return skd_err_set(err, SKD_EPATH, "entry %s: hard link target %s is outside the image",
                           entry, archive_entry_hardlink(ae));
    char tsplit[PATH_MAX];
    skd_strlcpy(tsplit, target, sizeof(tsplit));
    const char *tdir, *tleaf;
    split_path(tsplit, &tdir, &tleaf);
    int tfd = walk_dir(c, tdir, 0, entry, err);
    if (tfd == SKD_ENOENT)
        return skd_err_set(err, SKD_EPATH, "entry %s: hard link target is missing", entry);
    if (tfd < 0)
        return tfd;
    struct stat st;
    int rc = 0;
    if (fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
        rc = skd_err_set(err, SKD_EPATH,
                         "entry %s: hard link target is not a regular file in the image", entry);
        goto out;
    }
    if (strcmp(target, entry_path) == 0)
        goto out; /* a link to itself: already there */
    rc = clear_leaf(pfd, leaf, 0, entry, err);
    if (rc < 0)
        goto out;
    if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
        rc = skd_err_set(err, SKD_EIO, "entry %s: link: %s", entry, strerror(errno));
out:
    close(tfd);
    return rc;
}

/* One entry: path checks, whiteouts, then create by type. */
static int apply_entry(skd__layer_ctx *c, struct archive *a, struct archive_entry *ae, skd_err *err)
{
    const char *raw = archive_entry_pathname(ae);
    char path[PATH_MAX];
    if (!raw)
        return skd_err_set(err, SKD_EINVAL, "an entry has no usable name");
    if (skd__image_norm_path(raw, path, sizeof(path)) < 0)
        return skd_err_set(err, SKD_EPATH, "entry %s is outside the image (absolute or ..)", raw);
    mode_t type = archive_entry_filetype(ae);
    if (!*path) /* the root itself: keep the rootfs as created */
        return type == AE_IFDIR && !archive_entry_hardlink(ae)
                   ? 0
                   : skd_err_set(err, SKD_EPATH, "entry %s replaces the root", raw);
    int rc = set_add(&c->written, path);
    if (rc)
        return skd_err_set(err, rc, "out of memory");
    char split[PATH_MAX];
    skd_strlcpy(split, path, sizeof(split));
    const char *dir, *leaf;
    split_path(split, &dir, &leaf);
    if (c->whiteouts && strncmp(leaf, WH_PREFIX, strlen(WH_PREFIX)) == 0)
        return apply_whiteout(c, dir, leaf, raw, err);
    if (!archive_entry_hardlink(ae) && type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK) {
        c->skipped++; /* device node, fifo or socket: never created */
        return 0;
    }
    int pfd = parent_fd(c, dir, raw, err);
    if (pfd < 0)
        return pfd;
    if (type == AE_IFDIR && !archive_entry_hardlink(ae))
        return make_dir(pfd, leaf, archive_entry_mode(ae), raw, err);
    c->files++;
    if (archive_entry_hardlink(ae))
        return make_hardlink(c, ae, pfd, path, leaf, raw, err);
    if (type == AE_IFLNK)
        return make_symlink(ae, pfd, leaf, raw, err);
    return make_file(c, a, ae, pfd, leaf, raw, err);
}

void skd__layer_ctx_init(skd__layer_ctx *c, int rootfd, int64_t max_bytes, int64_t max_entries,
                         int whiteouts)
{
    memset(c, 0, sizeof(*c));
    c->rootfd = rootfd;
    c->max_bytes = max_bytes;
    c->max_entries = max_entries;
    c->whiteouts = whiteouts;
    c->cache_fd = -1;
}

void skd__layer_ctx_free(skd__layer_ctx *c)
{
    if (!c)
        return;
    cache_drop(c);
    set_clear(&c->written);
}

int skd__layer_apply(skd__layer_ctx *c, struct archive *a, skd_err *err)
{
    struct archive_entry *ae;
    int rc = 0;
    set_clear(&c->written);
    cache_drop(c);
    for (;;) {
        int r = archive_read_next_header(a, &ae);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            rc = skd_err_set(err, SKD_EINVAL, "the archive is not a valid tar: %s",
                             archive_error_string(a) ? archive_error_string(a) : "?");
            break;
        }
        if (++c->entries > c->max_entries) {
            rc = skd_err_set(err, SKD_ETOOBIG, "the image has more than %lld entries",
                             (long long)c->max_entries);
            break;
        }
        rc = apply_entry(c, a, ae, err);
        if (rc)
            break;
    }
    cache_drop(c);
    return rc;
}
