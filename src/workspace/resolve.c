/*
 * Path resolution beneath a workspace directory (see resolve.h).
 *
 * Preferred: openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), where the
 * kernel guarantees, even against concurrent renames, that the lookup never
 * leaves the directory.
 *
 * Fallback when openat2 is missing (ENOSYS): a walk of one component at a
 * time. Every component is opened with O_PATH | O_NOFOLLOW relative to the
 * fd of its parent, which this code opened itself; a symlink is read with
 * readlinkat and its target spliced into the rest of the path (absolute
 * targets refused, at most MAX_LINKS of them); ".." pops the stack of
 * directory fds and may never pop the root. Afterwards the directory the
 * result was opened from is checked to still lie beneath root by walking
 * its physical ".." chain. What the fallback cannot promise is the
 * kernel's atomicity: a host process (not sandboxed code, which only sees
 * the workspace as a mount point it cannot rename out of) that moves a
 * directory out of the workspace and back during one lookup could make it
 * open a file outside. That is why openat2 is used whenever it exists and
 * the fallback logs a warning once.
 */
#include "workspace/resolve.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40  /* as the kernel's MAXSYMLINKS */
#define MAX_STACK 256 /* directory nesting followed */
#define BUF_CAP 8192  /* path plus spliced symlink targets */
#define MAX_UP 4096   /* ".." steps when checking containment */

static atomic_int no_openat2; /* 1 once openat2 answered ENOSYS */
static atomic_int force_user; /* tests */

int skd__ws_force_userspace(int on)
{
    atomic_store(&force_user, on);
    return atomic_load(&no_openat2);
}

static int kernel_beneath(int root, const char *path, int flags, mode_t mode)
{
    return skd_openat2(root, path, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* 1 when directory fd dir is root or lies (physically) beneath it. */
static int still_beneath(int root, int dir)
{
    struct stat rs, cs, ps;
    if (fstat(root, &rs) != 0 || fstat(dir, &cs) != 0)
        return 0;
    int cur = dup(dir);
    int ok = 0;
    for (int i = 0; cur >= 0 && i < MAX_UP; i++) {
        if (same_file(&cs, &rs)) {
            ok = 1;
            break;
        }
        int parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        cur = parent;
        if (cur < 0 || fstat(cur, &ps) != 0 || same_file(&ps, &cs))
            break; /* the filesystem root: root was never met */
        cs = ps;
    }
    if (cur >= 0)
        close(cur);
    return ok;
}

struct walk {
    int stack[MAX_STACK];
    int depth;
    char buf[BUF_CAP];
    int links;
};

static void walk_free(struct walk *w)
{
    while (w->depth > 0)
        close(w->stack[--w->depth]);
}

/* Replace the path with target + "/" + rest. */
static int splice_link(struct walk *w, const char *target, size_t tlen, const char *rest)
{
    char tmp[BUF_CAP];
    size_t rlen = strlen(rest);
    if (tlen + 1 + rlen + 1 > sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, target, tlen);
    /* A link at the end of the path is replaced by its target alone: a
     * slash after it would ask for a directory. */
    size_t sep = rlen ? 1 : 0;
    tmp[tlen] = '/';
    memcpy(tmp + tlen + sep, rest, rlen + 1);
    memcpy(w->buf, tmp, tlen + sep + rlen + 1);
    return 0;
}

/* The component at w->buf + pos is a symlink opened as fd: splice it. */
static int follow(struct walk *w, int fd, const char *rest)
{
    char target[BUF_CAP];
    if (++w->links > MAX_LINKS) {
        errno = ELOOP;
        return -1;
    }
    ssize_t n = readlinkat(fd, "", target, sizeof(target));
    if (n < 0)
        return -1;
    if ((size_t)n >= sizeof(target)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (n == 0 || target[0] == '/') {
        errno = EXDEV; /* absolute: would leave root, as RESOLVE_BENEATH says */
        return -1;
    }
    return splice_link(w, target, (size_t)n, rest);
}

/* Open the last component (or "." for a path ending at a directory). */
static int open_last(struct walk *w, int root, const char *name, int flags, mode_t mode)
{
    int top = w->stack[w->depth - 1];
    int fd = openat(top, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    if (!still_beneath(root, top)) {
        close(fd);
        errno = EXDEV;
        return -1;
    }
    return fd;
}

enum { STEP_NEXT, STEP_DONE, STEP_FAIL };

/* Resolve one name of the walk (not "." or ".."), the part of the path
 * before *pos: descend into a directory, splice a symlink's target into the
 * path, or open the last component into *result. */
static int step(struct walk *w, int root, const char *name, int last, size_t *pos, int flags,
                mode_t mode, int *result)
{
    struct stat st;
    if (last && (flags & O_NOFOLLOW)) {
        *result = open_last(w, root, name, flags, mode);
        return STEP_DONE;
    }
    int fd = openat(w->stack[w->depth - 1], name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (!(last && errno == ENOENT && (flags & O_CREAT)))
            return STEP_FAIL;
        *result = open_last(w, root, name, flags, mode);
        return STEP_DONE;
    }
    if (fstat(fd, &st) != 0) {
        close(fd);
        return STEP_FAIL;
    }
    if (S_ISLNK(st.st_mode)) {
        int rc = follow(w, fd, w->buf + *pos);
        close(fd);
        *pos = 0;
        return rc ? STEP_FAIL : STEP_NEXT;
    }
    if (S_ISDIR(st.st_mode)) {
        if (w->depth == MAX_STACK) {
            close(fd);
            errno = ENAMETOOLONG;
            return STEP_FAIL;
        }
        w->stack[w->depth++] = fd;
        return STEP_NEXT;
    }
    close(fd);
    if (!last) {
        errno = ENOTDIR;
        return STEP_FAIL;
    }
    *result = open_last(w, root, name, flags, mode);
    return STEP_DONE;
}

static int user_beneath(int root, const char *path, int flags, mode_t mode)
{
    struct walk w = {.depth = 0};
    int result = -1, state = STEP_NEXT;
    size_t len = strlen(path), pos = 0;
    if (len >= sizeof(w.buf) || path[0] == '/') {
        errno = path[0] == '/' ? EXDEV : ENAMETOOLONG;
        return -1;
    }
    memcpy(w.buf, path, len + 1);
    if ((w.stack[0] = openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    w.depth = 1;
    while (state == STEP_NEXT) {
        char name[BUF_CAP];
        while (w.buf[pos] == '/')
            pos++;
        if (!w.buf[pos]) {
            result = open_last(&w, root, ".", flags & ~(O_CREAT | O_EXCL), mode);
            break;
        }
        size_t end = pos;
        while (w.buf[end] && w.buf[end] != '/')
            end++;
        int last = w.buf[end] == '\0';
        memcpy(name, w.buf + pos, end - pos);
        name[end - pos] = '\0';
        pos = end;
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            if (w.depth == 1) {
                errno = EXDEV; /* would climb above root */
                break;
            }
            close(w.stack[--w.depth]);
            continue;
        }
        state = step(&w, root, name, last, &pos, flags, mode, &result);
    }
    int saved = errno;
    walk_free(&w);
    errno = saved;
    return result;
}

int skd__ws_open_beneath(int root, const char *path, int flags, mode_t mode)
{
    flags |= O_CLOEXEC;
    if (!atomic_load(&force_user) && !atomic_load(&no_openat2)) {
        int fd = kernel_beneath(root, path, flags, mode);
        if (fd >= 0 || errno != ENOSYS)
            return fd;
        atomic_store(&no_openat2, 1);
        skd_warn("openat2 is not available: workspace paths are resolved in user space, "
                 "which does not resist a host process renaming directories concurrently");
    }
    return user_beneath(root, path, flags, mode);
}
