/* libFuzzer driver for the workspace path resolver: every input is a client
 * path (raw bytes, so NUL and control bytes too). It is checked with
 * skd_workspace_check_pathn, whose verdict is compared with an independent
 * statement of the rules; a path that passes is opened beneath a workspace
 * full of hostile symlinks (to "..", to /etc/passwd, chains, loops, a
 * directory symlink leaving mid-path) with skd_workspace_openat (O_RDONLY
 * and O_PATH) and skd_workspace_open_parent. Whatever opens must lie inside
 * the workspace, or the driver aborts. Odd-length inputs go through the
 * user-space resolver, even-length ones through openat2. */
#include "skilld/workspace.h"
#include "workspace/resolve.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static skd_workspace *ws;
static struct stat inside_files[2];
static struct stat root_st;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

static void cleanup(void)
{
    skd_workspace_close(ws);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void put(const char *path, const char *data)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        abort();
    fputs(data, fp);
    fclose(fp);
}

static void setup(void)
{
    char p[512], q[512];
    skd_err e = {0};
    snprintf(dir, sizeof(dir), "/tmp/skilld-fuzz-path-XXXXXX");
    if (!mkdtemp(dir) || skd_workspace_open(dir, "fuzz", &ws, &e))
        abort();
    const char *w = skd_workspace_path(ws);
    snprintf(p, sizeof(p), "%s/outside.txt", dir);
    put(p, "OUTSIDE");
    snprintf(p, sizeof(p), "%s/a.txt", w);
    put(p, "a");
    stat(p, &inside_files[0]);
    snprintf(p, sizeof(p), "%s/d", w);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/d/b.txt", w);
    put(p, "b");
    stat(p, &inside_files[1]);
    static const char *const links[][2] = {
        {"..", "up"},          {"/etc/passwd", "abs"}, {"../../..", "d/out"},
        {"loop", "loop"},      {"d", "in"},            {"../outside.txt", "rel"},
        {"in/out", "chain"},   {"/", "root"},          {"/proc/self/root", "magic"},
        {"../a.txt", "d/ok"}};
    for (size_t i = 0; i < sizeof(links) / sizeof(*links); i++) {
        snprintf(q, sizeof(q), "%s/%s", w, links[i][1]);
        if (symlink(links[i][0], q) != 0)
            abort();
    }
    stat(w, &root_st);
    atexit(cleanup);
}

/* The rules, stated again without sharing code with the library. */
static int expected_ok(const uint8_t *d, size_t n)
{
    if (n > SKD_WS_PATH_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (d[i] < 0x20 || d[i] == 0x7f)
            return 0;
    if (n && d[0] == '/')
        return 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && d[j] != '/')
            j++;
        if (j - i == 2 && d[i] == '.' && d[i + 1] == '.')
            return 0;
        i = j + 1;
    }
    return 1;
}

static int same(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Abort unless fd is the workspace, a directory beneath it or one of the
 * files created inside it. */
static void assert_inside(int fd)
{
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0)
        abort();
    if (S_ISDIR(st.st_mode)) {
        int cur = dup(fd);
        for (int i = 0; i < 64; i++) {
            struct stat cs;
            if (fstat(cur, &cs) != 0)
                abort();
            if (same(&cs, &root_st)) {
                close(cur);
                return;
            }
            int up = openat(cur, "..", O_PATH | O_DIRECTORY);
            close(cur);
            if (up < 0)
                abort();
            cur = up;
        }
        abort(); /* never met the workspace: outside */
    }
    if (S_ISLNK(st.st_mode))
        return; /* O_PATH of a symlink inside: not followed */
    if (!same(&st, &inside_files[0]) && !same(&st, &inside_files[1]))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[SKD_WS_PATH_MAX + 1];
    char name[SKD_WS_NAME_MAX + 1];
    skd_err e = {0};
    if (!ws)
        setup();
    if (size > 4 * SKD_WS_PATH_MAX)
        return 0;
    int ok = skd_workspace_check_pathn((const char *)data, size, 1, &e) == 0;
    if (ok != expected_ok(data, size))
        abort();
    if (!ok)
        return 0;
    memcpy(path, data, size);
    path[size] = '\0';
    skd__ws_force_userspace((int)(size & 1));
    int fd = skd_workspace_openat(ws, path, O_RDONLY, 0, &e);
    assert_inside(fd);
    if (fd >= 0)
        close(fd);
    fd = skd_workspace_openat(ws, path, O_PATH, 0, &e);
    assert_inside(fd);
    if (fd >= 0)
        close(fd);
    if (!skd_workspace_path_is_root(path)) {
        fd = skd_workspace_open_parent(ws, path, 0, name, &e);
        assert_inside(fd);
        if (fd >= 0) {
            int f2 = skd_workspace_openat_in(ws, fd, name, O_RDONLY, 0, &e);
            assert_inside(f2);
            if (f2 >= 0)
                close(f2);
            close(fd);
        }
    }
    skd__ws_force_userspace(0);
    return 0;
}
