/*
 * Per-key workspaces (see include/skilld/workspace.h).
 *
 * The workspace of key K is $DATA_DIR/workspaces/<hex SHA-256 of K>/. It is
 * held open as an O_RDONLY directory fd, and every path a client gives is
 * resolved from that fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS):
 * the kernel, not string handling, guarantees that no "..", absolute path or
 * symlink (however it changes between calls) leaves the directory. Paths are
 * also checked lexically first so that clear mistakes get clear errors.
 * Where openat2 is missing, resolve.c applies the same rules in user space.
 *
 * Policy beyond the kernel's: the last component is never followed (a
 * symlink there is refused, so is a FIFO, socket or device, before it is
 * opened for I/O); a regular file with several hard links is refused, since
 * another of its names may lie outside; directories on the way may be
 * symlinks as long as they resolve inside the workspace.
 *
 * Trusted: DATA_DIR (from the operator) and the key id (from the store or
 * the transport's authentication). Not trusted: every client path and every
 * name inside the workspace, which sandboxed code can change at any moment.
 */
#include "skilld/workspace.h"
#include "skilld/util.h"
#include "workspace/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct skd_workspace {
    int dirfd;  /* O_RDONLY | O_DIRECTORY on the workspace */
    int locked; /* flock held by this handle */
    char path[PATH_MAX];
};

/* Deepest directory nesting the usage walk descends into. */
#define WALK_MAX_DEPTH 128
/* Resolve path strictly beneath dirfd. */
static int beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    return skd__ws_open_beneath(dirfd, path, flags | O_NOFOLLOW, mode);
}

/* Open a directory beneath dirfd, following symlinks that stay beneath it
 * (also in the last component): how intermediate directories of a client
 * path are resolved. */
static int beneath_dir(int dirfd, const char *path)
{
    return skd__ws_open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
}

/* Map an errno from a lookup of path to an SKD_E* code with a message. */
static int map_errno(int e, const char *path, skd_err *err)
{
    switch (e) {
    case ENOENT:
        return skd_err_set(err, SKD_ENOENT, "%s: no such file or directory", path);
    case ENOTDIR:
        return skd_err_set(err, SKD_ENOENT, "%s: a path component is not a directory", path);
    case EXDEV:
        return skd_err_set(err, SKD_EPATH, "%s: the path leaves the workspace", path);
    case ELOOP:
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "%s: symbolic links are not followed here (or form a loop)", path);
    case EISDIR:
        return skd_err_set(err, SKD_EISDIR, "%s: is a directory", path);
    case EEXIST:
        return skd_err_set(err, SKD_EEXISTS, "%s: already exists", path);
    case ENAMETOOLONG:
        return skd_err_set(err, SKD_EPATH, "%s: a name is too long", path);
    case EACCES:
    case EPERM:
    case ENXIO:
    case ENODEV:
    case ETXTBSY:
        return skd_err_set(err, SKD_EFORBIDDEN, "%s: %s", path, strerror(e));
    case ENOTEMPTY:
        return skd_err_set(err, SKD_ENOTEMPTY, "%s: the directory is not empty", path);
    case ENOSPC:
    case EDQUOT:
        return skd_err_set(err, SKD_EQUOTA, "%s: no space left: %s", path, strerror(e));
    case ENOMEM:
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    case ENOSYS:
        return skd_err_set(err, SKD_EUNSUPPORTED,
                           "openat2 is not available (Linux 5.6 or later is required)");
    default:
        return skd_err_set(err, SKD_EIO, "%s: %s", path, strerror(e));
    }
}

/* Create dir (one level) under parent fd; EEXIST is fine. */
static int ensure_dir(int parent, const char *name, const char *what, skd_err *err)
{
    if (mkdirat(parent, name, 0700) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_EIO, "cannot create %s: %s", what, strerror(errno));
    return 0;
}

/* The first DATA_DIR a process opens a workspace in stays open (a server
 * has one), so a call opens its workspace with one openat2 from it. Set
 * once under data_mu, then only read; never closed. */
static pthread_mutex_t data_mu = PTHREAD_MUTEX_INITIALIZER;
static char data_path[PATH_MAX];
static int data_fd = -1;

static int cached_data_fd(const char *data_dir)
{
    pthread_mutex_lock(&data_mu);
    int fd = data_fd >= 0 && strcmp(data_path, data_dir) == 0 ? data_fd : -1;
    pthread_mutex_unlock(&data_mu);
    return fd;
}

/* Keep fd as the cached DATA_DIR when there is none yet: 1 when kept. */
static int keep_data_fd(const char *data_dir, int fd)
{
    int kept = 0;
    pthread_mutex_lock(&data_mu);
    if (data_fd < 0 && strlen(data_dir) < sizeof(data_path)) {
        memcpy(data_path, data_dir, strlen(data_dir) + 1);
        data_fd = fd;
        kept = 1;
    }
    pthread_mutex_unlock(&data_mu);
    return kept;
}

/* workspaces/<hex> beneath datafd in one openat2 that follows no symlink at
 * all (what the level-by-level O_NOFOLLOW opens below refuse too), creating
 * the levels only when one is missing. -1 with errno when that fails (the
 * caller then takes the level-by-level way, which also names the error). */
static int open_fast(int datafd, const char *hex)
{
    char rel[16 + SKD_SHA256_HEX_LEN];
    const uint64_t how = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    snprintf(rel, sizeof(rel), "workspaces/%s", hex);
    int fd = skd_openat2(datafd, rel, O_RDONLY | O_DIRECTORY, 0, how);
    if (fd < 0 && errno == ENOENT) {
        if (mkdirat(datafd, "workspaces", 0700) != 0 && errno != EEXIST)
            return -1;
        int root = openat(datafd, "workspaces", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
            return -1;
        int made = mkdirat(root, hex, 0700) == 0 || errno == EEXIST;
        close(root);
        if (!made)
            return -1;
        fd = skd_openat2(datafd, rel, O_RDONLY | O_DIRECTORY, 0, how);
    }
    return fd;
}

/* hex SHA-256 of key_id, remembered per thread for the last key (a worker
 * serves the same few keys over and over). */
static void workspace_name(const char *key_id, char hex[SKD_SHA256_HEX_LEN + 1])
{
    static __thread char last_key[64], last_hex[SKD_SHA256_HEX_LEN + 1];
    size_t n = strlen(key_id);
    if (n < sizeof(last_key) && last_hex[0] && memcmp(last_key, key_id, n + 1) == 0) {
        memcpy(hex, last_hex, sizeof(last_hex));
        return;
    }
    skd_sha256_hex(key_id, n, hex);
    if (n < sizeof(last_key)) {
        memcpy(last_key, key_id, n + 1);
        memcpy(last_hex, hex, sizeof(last_hex));
    }
}

int skd_workspace_open(const char *data_dir, const char *key_id, skd_workspace **out, skd_err *err)
{
    char hex[SKD_SHA256_HEX_LEN + 1];
    int datafd = -1, wsroot = -1, rc = 0, cached;
    skd_workspace *ws = NULL;
    struct stat st;

    *out = NULL;
    if (!data_dir || !*data_dir)
        return skd_err_set(err, SKD_ECONFIG, "DATA_DIR is empty");
    if (!key_id || !*key_id)
        return skd_err_set(err, SKD_EUNAUTH, "no API key id for the workspace");
    workspace_name(key_id, hex);
    if (!(ws = calloc(1, sizeof(*ws))))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    ws->dirfd = -1;
    if (snprintf(ws->path, sizeof(ws->path), "%s/workspaces/%s", data_dir, hex) >=
        (int)sizeof(ws->path)) {
        rc = skd_err_set(err, SKD_ECONFIG, "DATA_DIR is too long");
        goto out;
    }
    if ((cached = cached_data_fd(data_dir)) >= 0 && (ws->dirfd = open_fast(cached, hex)) >= 0)
        goto opened;
    if (mkdir(data_dir, 0700) != 0 && errno != EEXIST) {
        rc = skd_err_set(err, SKD_EIO, "cannot create %s: %s", data_dir, strerror(errno));
        goto out;
    }
    datafd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (datafd < 0) {
        rc = skd_err_set(err, SKD_EIO, "cannot open %s: %s", data_dir, strerror(errno));
        goto out;
    }
    /* The operator's DATA_DIR may be a symlink; below it nothing is followed. */
    if ((rc = ensure_dir(datafd, "workspaces", "the workspaces directory", err)) != 0)
        goto out;
    wsroot = openat(datafd, "workspaces", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wsroot < 0) {
        rc = skd_err_set(err, SKD_EIO, "cannot open %s/workspaces: %s", data_dir, strerror(errno));
        goto out;
    }
    if ((rc = ensure_dir(wsroot, hex, ws->path, err)) != 0)
        goto out;
    ws->dirfd = openat(wsroot, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ws->dirfd < 0) {
        rc = skd_err_set(err, SKD_EIO, "cannot open %s: %s", ws->path, strerror(errno));
        goto out;
    }
    if (cached < 0 && keep_data_fd(data_dir, datafd))
        datafd = -1;
opened:
    if (fstat(ws->dirfd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = skd_err_set(err, SKD_EIO, "%s is not a directory", ws->path);
        goto out;
    }
    if ((st.st_mode & 07777) != 0700 && fchmod(ws->dirfd, 0700) != 0) {
        rc = skd_err_set(err, SKD_EIO, "cannot set mode 0700 on %s: %s", ws->path, strerror(errno));
        goto out;
    }
    *out = ws;
    ws = NULL;
out:
    if (datafd >= 0)
        close(datafd);
    if (wsroot >= 0)
        close(wsroot);
    skd_workspace_close(ws);
    return rc;
}

void skd_workspace_close(skd_workspace *ws)
{
    if (!ws)
        return;
    if (ws->dirfd >= 0)
        close(ws->dirfd); /* also drops a flock still held */
    free(ws);
}

int skd_workspace_fd(const skd_workspace *ws)
{
    return ws->dirfd;
}

const char *skd_workspace_path(const skd_workspace *ws)
{
    return ws->path;
}

int skd_workspace_path_is_root(const char *path)
{
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        if (p[0] == '.' && (p[1] == '/' || p[1] == '\0')) {
            p++;
            continue;
        }
        return 0;
    }
    return 1;
}

int skd_workspace_check_pathn(const char *path, size_t len, int allow_root, skd_err *err)
{
    if (!path)
        return skd_err_set(err, SKD_EPATH, "no path given");
    if (len > SKD_WS_PATH_MAX)
        return skd_err_set(err, SKD_EPATH, "the path is longer than %d bytes", SKD_WS_PATH_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == 0)
            return skd_err_set(err, SKD_EPATH, "the path contains a NUL byte");
        if (c < 0x20 || c == 0x7f)
            return skd_err_set(err, SKD_EPATH, "the path contains a control character");
    }
    if (len > 0 && path[0] == '/')
        return skd_err_set(err, SKD_EPATH, "the path must be relative to the workspace");
    /* Reject ".." as a whole component anywhere: "..", "../x", "x/..", "x/../y". */
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && path[j] != '/')
            j++;
        if (j - i == 2 && path[i] == '.' && path[i + 1] == '.')
            return skd_err_set(err, SKD_EPATH, "the path may not contain \"..\"");
        i = j + 1;
    }
    if (!allow_root && skd_workspace_path_is_root(path))
        return skd_err_set(err, SKD_EPATH,
                           len ? "the path names the workspace itself" : "the path is empty");
    return 0;
}

int skd_workspace_check_client_pathn(const char *path, size_t len, int allow_root, skd_err *err)
{
    int rc = skd_workspace_check_pathn(path, len, allow_root, err);
    size_t pl = strlen(SKD_WORKSPACE_TMP_PREFIX);
    for (size_t i = 0; rc == 0 && i < len;) {
        size_t j = i;
        while (j < len && path[j] != '/')
            j++;
        /* Temporary files never count against the quota: a client's own
         * name with their prefix would hide bytes from it. */
        if (j - i >= pl && memcmp(path + i, SKD_WORKSPACE_TMP_PREFIX, pl) == 0)
            rc = skd_err_set(err, SKD_EPATH, "names starting with %s are reserved",
                             SKD_WORKSPACE_TMP_PREFIX);
        i = j + 1;
    }
    return rc;
}

int skd_workspace_check_path(const char *path, int allow_root, skd_err *err)
{
    if (!path)
        return skd_err_set(err, SKD_EPATH, "no path given");
    return skd_workspace_check_pathn(path, strnlen(path, SKD_WS_PATH_MAX + 1), allow_root, err);
}

/* What may be opened: directories, and regular files with one link. */
static int check_kind(const struct stat *st, const char *path, skd_err *err)
{
    if (S_ISDIR(st->st_mode))
        return 0;
    if (S_ISLNK(st->st_mode))
        return skd_err_set(err, SKD_EFORBIDDEN, "%s: is a symbolic link", path);
    if (!S_ISREG(st->st_mode))
        return skd_err_set(err, SKD_EFORBIDDEN, "%s: is a %s, not a regular file or directory",
                           path,
                           S_ISFIFO(st->st_mode)   ? "FIFO"
                           : S_ISSOCK(st->st_mode) ? "socket"
                                                   : "device node");
    if (st->st_nlink > 1)
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "%s: has %lu hard links; files with several links are refused", path,
                           (unsigned long)st->st_nlink);
    return 0;
}

/* Look at what path names (beneath base) without opening it for I/O
 * (O_PATH). Returns 0 with *st filled, 1 when it does not exist, or a
 * negative SKD_E*. */
static int peek(int base, const char *path, struct stat *st, skd_err *err)
{
    int fd = beneath(base, path, O_PATH, 0);
    if (fd < 0)
        return errno == ENOENT ? 1 : map_errno(errno, path, err);
    int rc = fstat(fd, st) == 0 ? 0 : map_errno(errno, path, err);
    close(fd);
    return rc;
}

/* skd_workspace_openat_in, with what the open descriptor's fstat saw in
 * *st (the peek's when O_PATH). */
static int open_checked(int base, const char *path, int flags, mode_t mode, struct stat *stp,
                        skd_err *err)
{
    struct stat st;
    int rc = skd_workspace_check_path(path, 1, err);
    if (rc)
        return rc;
    if (!*path)
        path = ".";
    /* First look with O_PATH so a FIFO or device is refused before it is
     * opened; O_CREAT|O_EXCL creates a new file and needs no look. */
    if ((flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL)) {
        rc = peek(base, path, &st, err);
        if (rc < 0)
            return rc;
        if (rc == 1 && !(flags & O_CREAT))
            return map_errno(ENOENT, path, err);
        if (rc == 0 && (rc = check_kind(&st, path, err)) != 0)
            return rc;
    }
    if (flags & O_PATH) {
        int fd = beneath(base, path, flags & (O_PATH | O_DIRECTORY), 0);
        if (fd < 0)
            return map_errno(errno, path, err);
        /* this open's, not the look's: checked again */
        if (stp && (fstat(fd, stp) != 0 ? (rc = map_errno(errno, path, err)) != 0
                                        : (rc = check_kind(stp, path, err)) != 0)) {
            close(fd);
            return rc;
        }
        return fd;
    }
    int fd = beneath(base, path, flags | O_NONBLOCK | O_NOCTTY, mode);
    if (fd < 0)
        return map_errno(errno, path, err);
    /* The name may have been swapped since the look: check the open file. */
    if (fstat(fd, &st) != 0) {
        rc = map_errno(errno, path, err);
        goto fail;
    }
    if ((rc = check_kind(&st, path, err)) != 0)
        goto fail;
    /* F_SETFL sets only the status flags (append, direct, noatime,
     * nonblock, async), each but async as open was given it (open ignores
     * O_ASYNC): flags says all of them, so no F_GETFL is needed. */
    if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags & ~O_ASYNC) != 0) {
        rc = map_errno(errno, path, err);
        goto fail;
    }
    if (stp)
        *stp = st;
    return fd;
fail:
    close(fd);
    return rc;
}

int skd_workspace_openat(skd_workspace *ws, const char *path, int flags, mode_t mode, skd_err *err)
{
    return open_checked(ws->dirfd, path, flags, mode, NULL, err);
}

int skd_workspace_openat_stat(skd_workspace *ws, const char *path, int flags, mode_t mode,
                              struct stat *st, skd_err *err)
{
    return open_checked(ws->dirfd, path, flags, mode, st, err);
}

int skd_workspace_openat_in(skd_workspace *ws, int base, const char *path, int flags, mode_t mode,
                            skd_err *err)
{
    (void)ws; /* base is one of ws's directories; ws names the workspace in the API */
    return open_checked(base, path, flags, mode, NULL, err);
}

/* Create one missing directory: the last component of dir (a writable copy
 * of a checked path), inside its parent opened beneath the workspace. */
static int make_one_dir(skd_workspace *ws, char *dir, skd_err *err)
{
    char *slash = strrchr(dir, '/');
    const char *leaf = dir;
    int pfd;
    if (slash) {
        *slash = '\0';
        pfd = beneath_dir(ws->dirfd, *dir ? dir : ".");
        *slash = '/';
        leaf = slash + 1;
    } else {
        pfd = beneath_dir(ws->dirfd, ".");
    }
    if (pfd < 0)
        return map_errno(errno, dir, err);
    /* mkdirat never follows its last component, and leaf is one name. */
    int rc = mkdirat(pfd, leaf, 0700);
    int e = errno;
    close(pfd);
    if (rc != 0 && e != EEXIST)
        return map_errno(e, dir, err);
    return 0;
}

/* mkdir -p of dir (a writable copy of a checked path), each prefix looked
 * up from the workspace root. */
static int make_dirs(skd_workspace *ws, char *dir, uint64_t *budget, skd_err *err)
{
    for (char *p = dir;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        int rc = 0;
        if (*dir && !skd_workspace_path_is_root(dir)) {
            int fd = beneath_dir(ws->dirfd, dir);
            if (fd >= 0)
                close(fd);
            else if (errno != ENOENT)
                rc = map_errno(errno, dir, err);
            else if (budget && *budget == 0)
                rc = skd_err_set(err, SKD_EQUOTA,
                                 "%s: creating it would bring the workspace past its bound of "
                                 "files, directories and links (SKILLS_WORKSPACE_MAX_ENTRIES)",
                                 dir);
            else if ((rc = make_one_dir(ws, dir, err)) == 0 && budget)
                (*budget)--;
        }
        *p = saved;
        if (rc)
            return rc;
        if (!saved)
            return 0;
    }
}

static int open_parent(skd_workspace *ws, const char *path, int mkdirs, uint64_t *budget,
                       char name[SKD_WS_NAME_MAX + 1], skd_err *err)
{
    char dir[SKD_WS_PATH_MAX + 1];
    int rc = skd_workspace_check_path(path, 0, err);
    if (rc)
        return rc;
    size_t len = strlen(path);
    while (len > 0 && path[len - 1] == '/')
        len--;
    memcpy(dir, path, len);
    dir[len] = '\0';
    char *slash = strrchr(dir, '/');
    const char *leaf = slash ? slash + 1 : dir;
    if (strcmp(leaf, ".") == 0)
        return skd_err_set(err, SKD_EPATH, "%s: the last component may not be \".\"", path);
    if (skd_strlcpy(name, leaf, SKD_WS_NAME_MAX + 1))
        return skd_err_set(err, SKD_EPATH, "%s: a name is longer than %d bytes", path,
                           SKD_WS_NAME_MAX);
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
    if (mkdirs && (rc = make_dirs(ws, dir, budget, err)) != 0)
        return rc;
    int fd = beneath_dir(ws->dirfd, *dir ? dir : ".");
    if (fd < 0)
        return map_errno(errno, *dir ? dir : ".", err);
    return fd;
}

int skd_workspace_open_parent(skd_workspace *ws, const char *path, int mkdirs,
                              char name[SKD_WS_NAME_MAX + 1], skd_err *err)
{
    return open_parent(ws, path, mkdirs, NULL, name, err);
}

int skd_workspace_open_parent_within(skd_workspace *ws, const char *path, uint64_t *budget,
                                     char name[SKD_WS_NAME_MAX + 1], skd_err *err)
{
    return open_parent(ws, path, 1, budget, name, err);
}

/* Sum regular file sizes below dirfd (which this function closes) and count
 * every entry, stopping once more than max entries were seen (u->entries is
 * then max + 1): a workspace of a million empty entries costs one bounded
 * walk, not a million stats per call. Temporary files never count; when
 * sweep, those modified at or before cutoff are removed (u->swept). */
static int walk(int dirfd, int depth, skd_ws_usage *u, uint64_t max, int sweep, time_t cutoff,
                skd_err *err)
{
    DIR *d = fdopendir(dirfd);
    int rc = 0;
    if (!d) {
        close(dirfd);
        return skd_err_set(err, SKD_EIO, "cannot read a workspace directory: %s", strerror(errno));
    }
    while (u->entries <= max) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = skd_err_set(err, SKD_EIO, "cannot read a workspace directory: %s",
                                 strerror(errno));
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        int tmp =
            strncmp(de->d_name, SKD_WORKSPACE_TMP_PREFIX, strlen(SKD_WORKSPACE_TMP_PREFIX)) == 0;
        if (tmp && !sweep)
            continue; /* temporary files never count against the quota */
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        if (tmp) {
            if (S_ISREG(st.st_mode) && st.st_mtime <= cutoff && unlinkat(dirfd, de->d_name, 0) == 0)
                u->swept++;
            continue;
        }
        u->entries++;
        if (S_ISREG(st.st_mode)) {
            u->bytes += (uint64_t)st.st_size;
        } else if (S_ISDIR(st.st_mode)) {
            if (depth >= WALK_MAX_DEPTH) {
                rc = skd_err_set(err, SKD_EFORBIDDEN,
                                 "the workspace nests directories deeper than %d", WALK_MAX_DEPTH);
                break;
            }
            int sub = beneath(dirfd, de->d_name, O_RDONLY | O_DIRECTORY, 0);
            if (sub < 0)
                continue; /* replaced by a non-directory meanwhile */
            if ((rc = walk(sub, depth + 1, u, max, sweep, cutoff, err)) != 0)
                break;
        }
    }
    closedir(d);
    return rc;
}

static int measure(int dirfd, uint64_t max_entries, int sweep, time_t cutoff, skd_ws_usage *u,
                   skd_err *err)
{
    u->bytes = u->entries = u->swept = 0;
    int fd = beneath(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return map_errno(errno, ".", err);
    return walk(fd, 0, u, max_entries, sweep, cutoff, err);
}

int skd_workspace_usage_limit(int dirfd, uint64_t max_entries, skd_ws_usage *u, skd_err *err)
{
    return measure(dirfd, max_entries, 0, 0, u, err);
}

int skd_workspace_usage_sweep(int dirfd, uint64_t max_entries, skd_ws_usage *u, skd_err *err)
{
    return measure(dirfd, max_entries, 1, time(NULL), u, err);
}

int skd_workspace_reserve_check(skd_workspace *ws, uint64_t more, uint64_t reserve, skd_err *err)
{
    struct statvfs v;
    if (reserve == 0 || fstatvfs(ws->dirfd, &v) != 0)
        return 0;
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (avail < more || avail - more < reserve)
        return skd_err_set(err, SKD_EQUOTA,
                           "DATA_DIR's filesystem keeps %llu bytes free for the store "
                           "(SKILLS_DATA_RESERVE_BYTES); %llu are free",
                           (unsigned long long)reserve, (unsigned long long)avail);
    return 0;
}

int skd_workspace_sweep_tmp(const char *data_dir, skd_err *err)
{
    char path[PATH_MAX];
    if (!data_dir || snprintf(path, sizeof(path), "%s/workspaces", data_dir) >= (int)sizeof(path))
        return skd_err_set(err, SKD_ECONFIG, "DATA_DIR is too long");
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : skd_err_set(err, SKD_EIO, "%s: %s", path, strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return skd_err_set(err, SKD_EIO, "%s: %s", path, strerror(errno));
    }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        int ws = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws < 0)
            continue;
        /* The lock free: no write is under way, every temporary file is a
         * crashed writer's. Taken: only the old ones are sure to be. */
        int free_lock = flock(ws, LOCK_EX | LOCK_NB) == 0;
        skd_ws_usage u;
        time_t cutoff = time(NULL) - (free_lock ? 0 : SKD_WORKSPACE_TMP_MAX_AGE_S);
        int sub = dup(ws);
        if (sub >= 0) {
            memset(&u, 0, sizeof(u));
            walk(sub, 0, &u, UINT64_MAX, 1, cutoff, NULL);
            n += (int)u.swept;
        }
        close(ws); /* and its lock */
    }
    closedir(d);
    return n;
}

int skd_workspace_lock(skd_workspace *ws, skd_err *err)
{
    if (ws->locked)
        return 0;
    while (flock(ws->dirfd, LOCK_EX) != 0) {
        if (errno != EINTR)
            return skd_err_set(err, SKD_EIO, "cannot lock the workspace: %s", strerror(errno));
    }
    ws->locked = 1;
    return 0;
}

void skd_workspace_unlock(skd_workspace *ws)
{
    if (!ws || !ws->locked)
        return;
    flock(ws->dirfd, LOCK_UN);
    ws->locked = 0;
}
