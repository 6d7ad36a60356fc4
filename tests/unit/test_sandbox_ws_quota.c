/*
 * The workspace quota overlay (src/sandbox/ws_quota.c), driven directly as
 * root: writes through the merged directory land in the upper layer; a
 * commit applies new, changed and deleted files, replaced and opaque
 * directories and symlinks (never followed); a run over the quota, or a
 * killed one, changes nothing; temporary names, FIFOs and devices are
 * never committed; a live sandbox's commits apply only what changed since
 * the last kept one; leftovers of a dead process are swept; a pre-made
 * sandbox's staged tmpfs serves one run of its quota and no other.
 */
#include "tap.h"

/* Test paths are short; the compiler cannot know. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/container/container.h"
#include "sandbox/provider.h"
#include "sandbox/ws_quota.h"
#include "skilld/sandbox.h"
#include "skilld/workspace.h"

static char g_ws[PATH_MAX];

static int put(const char *dir, const char *name, size_t n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    static char block[65536];
    memset(block, 'x', sizeof(block));
    int rc = 0;
    while (n > 0) {
        size_t k = n < sizeof(block) ? n : sizeof(block);
        if (write(fd, block, k) != (ssize_t)k) {
            rc = -errno;
            break;
        }
        n -= k;
    }
    close(fd);
    return rc;
}

static long long size_of(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lstat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

static uint64_t usage(void)
{
    skd_ws_usage u = {0};
    int fd = open(g_ws, O_RDONLY | O_DIRECTORY);
    skd_workspace_usage_limit(fd, UINT64_MAX - 1, &u, NULL);
    close(fd);
    return u.bytes;
}

static void fresh_workspace(void)
{
    char cmd[PATH_MAX + 32];
    snprintf(g_ws, sizeof(g_ws), "/tmp/skd-wsq-test-%ld", (long)getpid());
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_ws);
    if (system(cmd) != 0 || mkdir(g_ws, 0700) != 0)
        printf("# cannot make %s\n", g_ws);
}

/* 1 when path is a mount point in this process's namespace. */
static int mounted(const char *path)
{
    FILE *f = fopen("/proc/self/mounts", "r");
    char line[4096], pat[PATH_MAX + 2];
    int yes = 0;
    snprintf(pat, sizeof(pat), " %s ", path);
    while (f && fgets(line, sizeof(line), f))
        yes |= strstr(line, pat) != NULL;
    if (f)
        fclose(f);
    return yes;
}

/* gone: as the native provider does once the sandbox's init has exited,
 * the overlay stays mounted through the commit (skd__wsq_sandbox_gone). */
static void commit_case(const char *tap_case, const char *id, int gone)
{
    fresh_workspace();
    char path[PATH_MAX];
    CHECK_EQ_INT(put(g_ws, "keep.txt", 100), 0);
    CHECK_EQ_INT(put(g_ws, "change.txt", 100), 0);
    CHECK_EQ_INT(put(g_ws, "gone.txt", 300), 0);
    snprintf(path, sizeof(path), "%s/dir", g_ws);
    mkdir(path, 0755);
    CHECK_EQ_INT(put(path, "old", 50), 0);
    snprintf(path, sizeof(path), "%s/opaque", g_ws);
    mkdir(path, 0755);
    CHECK_EQ_INT(put(path, "was-here", 70), 0);
    skd__wsq *q = NULL;
    skd_err err = {0};
    CHECK_EQ_INT(skd__wsq_prepare(g_ws, -1, id, 1 << 20, &q, &err), 0);
    if (!q) {
        printf("# %s\n", err.msg);
        return;
    }
    const char *m = skd__wsq_merged(q);
    CHECK_EQ_INT(size_of(m, "keep.txt"), 100); /* the workspace shows through */
    CHECK_EQ_INT(put(m, "change.txt", 1000), 0);
    CHECK_EQ_INT(put(m, "new.txt", 2000), 0);
    snprintf(path, sizeof(path), "%s/gone.txt", m);
    CHECK_EQ_INT(unlink(path), 0);
    snprintf(path, sizeof(path), "%s/dir", m);
    CHECK_EQ_INT(put(path, "added", 10), 0);
    snprintf(path, sizeof(path), "%s/opaque", m); /* rm -r then mkdir: an opaque directory */
    CHECK_EQ_INT(system("true"), 0);
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir '%s'", path, path);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_EQ_INT(put(path, "fresh", 5), 0);
    snprintf(path, sizeof(path), "%s/link", m);
    CHECK_EQ_INT(symlink("/etc/passwd", path), 0);
    snprintf(path, sizeof(path), "%s/fifo", m);
    CHECK_EQ_INT(mkfifo(path, 0644), 0);
    CHECK_EQ_INT(put(m, ".skd-tmp-0011223344556677", 5000), 0);
    /* Nothing reaches the workspace before the commit. */
    CHECK_EQ_INT(size_of(g_ws, "change.txt"), 100);
    CHECK(!exists(g_ws, "new.txt"));
    uint64_t bytes = 0;
    char merged[PATH_MAX];
    snprintf(merged, sizeof(merged), "%s", m);
    if (gone)
        skd__wsq_sandbox_gone(q);
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
    if (err.code)
        printf("# %s\n", err.msg);
    CHECK_EQ_INT(mounted(merged), gone); /* unmounted first only when not known to be gone */
    skd__wsq_free(q);
    CHECK(!mounted(merged));
    CHECK_EQ_INT(size_of(g_ws, "keep.txt"), 100);
    CHECK_EQ_INT(size_of(g_ws, "change.txt"), 1000);
    CHECK_EQ_INT(size_of(g_ws, "new.txt"), 2000);
    CHECK(!exists(g_ws, "gone.txt"));
    CHECK_EQ_INT(size_of(g_ws, "dir/old"), 50);
    CHECK_EQ_INT(size_of(g_ws, "dir/added"), 10);
    CHECK(!exists(g_ws, "opaque/was-here"));
    CHECK_EQ_INT(size_of(g_ws, "opaque/fresh"), 5);
    struct stat st;
    snprintf(path, sizeof(path), "%s/link", g_ws);
    CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode)); /* a link, not /etc/passwd's bytes */
    CHECK(!exists(g_ws, "fifo"));
    CHECK(!exists(g_ws, ".skd-tmp-0011223344556677"));
    CHECK_EQ_INT(bytes, usage());
    CHECK_EQ_INT(bytes, 100 + 1000 + 2000 + 50 + 10 + 5);
}

TEST(commit_applies_changes)
{
    commit_case(tap_case, "11111111-1111-1111-1111-111111111111", 0);
}

TEST(commit_with_the_overlay_still_mounted)
{
    commit_case(tap_case, "77777777-7777-7777-7777-777777777777", 1);
}

TEST(over_quota_changes_nothing)
{
    fresh_workspace();
    CHECK_EQ_INT(put(g_ws, "base.txt", 1 << 20), 0);
    skd__wsq *q = NULL;
    skd_err err = {0};
    int64_t quota = 10LL << 20;
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "22222222-2222-2222-2222-222222222222", quota, &q, &err), 0);
    if (!q)
        return;
    /* 50 MiB cannot even be written: the upper layer's tmpfs is full first. */
    int w = put(skd__wsq_merged(q), "big.bin", 50u << 20);
    CHECK_EQ_INT(w, -ENOSPC);
    uint64_t bytes = 1;
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), SKD_EQUOTA);
    CHECK(strstr(err.msg, "SKILLS_WORKSPACE_QUOTA_BYTES") != NULL);
    skd__wsq_free(q);
    CHECK(!exists(g_ws, "big.bin"));
    CHECK_EQ_INT(usage(), 1 << 20);
    /* Just within: kept. Replacing base.txt frees its 1 MiB. */
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "22222222-2222-2222-2222-222222222223", quota, &q, &err), 0);
    if (!q)
        return;
    CHECK_EQ_INT(put(skd__wsq_merged(q), "base.txt", 10), 0);
    CHECK_EQ_INT(put(skd__wsq_merged(q), "nine.bin", 9u << 20), 0);
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
    skd__wsq_free(q);
    CHECK_EQ_INT(usage(), (9u << 20) + 10);
}

/* A live sandbox's commits (skd__wsq_commit_live): the overlay stays
 * mounted and its upper layer is kept; each commit applies only what
 * changed since the last kept one, so a change made to the workspace in
 * between is not overwritten by an old copy, and a refused commit is
 * tried again whole. */
TEST(live_commits_apply_only_what_changed)
{
    fresh_workspace();
    skd__wsq *q = NULL;
    skd_err err = {0};
    skd__outcome o;
    CHECK_EQ_INT(skd__wsq_prepare(g_ws, -1, "33333333-3333-3333-3333-333333333333", 4LL << 20,
                                  &q, &err),
                 0);
    if (!q)
        return;
    const char *m = skd__wsq_merged(q);
    CHECK_EQ_INT(put(m, "a.txt", 10), 0);
    memset(&o, 0, sizeof(o));
    skd__wsq_commit_live(q, 0, &o);
    CHECK_EQ_INT(o.ws_error, 0);
    CHECK_EQ_INT(size_of(g_ws, "a.txt"), 10);
    CHECK_EQ_INT(put(g_ws, "a.txt", 3), 0); /* file_write, between two commits */
    CHECK_EQ_INT(put(m, "b.txt", 20), 0);
    memset(&o, 0, sizeof(o));
    skd__wsq_commit_live(q, 0, &o);
    CHECK_EQ_INT(o.ws_error, 0);
    CHECK_EQ_INT(size_of(g_ws, "a.txt"), 3);
    CHECK_EQ_INT(size_of(g_ws, "b.txt"), 20);
    /* Past the quota with what the workspace holds: nothing, then kept whole
     * once the sandbox made room. */
    CHECK_EQ_INT(put(g_ws, "outside.bin", 3u << 20), 0);
    CHECK_EQ_INT(put(m, "c.bin", 2u << 20), 0);
    CHECK_EQ_INT(put(m, "d.txt", 5), 0);
    memset(&o, 0, sizeof(o));
    skd__wsq_commit_live(q, 0, &o);
    CHECK_EQ_INT(o.ws_error, SKD_EQUOTA);
    CHECK(!exists(g_ws, "c.bin") && !exists(g_ws, "d.txt"));
    CHECK_EQ_INT(put(m, "c.bin", 1), 0);
    memset(&o, 0, sizeof(o));
    skd__wsq_commit_live(q, 0, &o);
    CHECK_EQ_INT(o.ws_error, 0);
    CHECK_EQ_INT(size_of(g_ws, "c.bin"), 1);
    CHECK_EQ_INT(size_of(g_ws, "d.txt"), 5);
    CHECK(mounted(m));
    skd__wsq_free(q);
}

/* SKILLS_WORKSPACE_MAX_ENTRIES: empty directories cost no byte of the
 * quota, so entries are bounded apart; a run over the bound keeps nothing,
 * and what it removes or replaces counts against what it adds. */
TEST(over_max_entries_changes_nothing)
{
    fresh_workspace();
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/old", g_ws);
    mkdir(path, 0755);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%d", i);
        CHECK_EQ_INT(put(path, name, 1), 0); /* old/ and 5 files: 6 entries */
    }
    skd__wsq_set_max_entries(10);
    skd__wsq *q = NULL;
    skd_err err = {0};
    uint64_t bytes = 0;
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "88888888-8888-8888-8888-888888888888", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    for (int i = 0; i < 5; i++) { /* 6 + 5 = 11 entries, 0 bytes more */
        snprintf(path, sizeof(path), "%s/d%d", skd__wsq_merged(q), i);
        CHECK_EQ_INT(mkdir(path, 0755), 0);
    }
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), SKD_EQUOTA);
    CHECK(strstr(err.msg, "11 files, directories and links") != NULL);
    CHECK(strstr(err.msg, "SKILLS_WORKSPACE_MAX_ENTRIES=10") != NULL);
    skd__wsq_free(q);
    CHECK(!exists(g_ws, "d0"));
    /* Removing old/ (6 entries) makes room for the same 5 directories. */
    err = (skd_err){0};
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "88888888-8888-8888-8888-888888888889", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/old'", skd__wsq_merged(q));
    CHECK_EQ_INT(system(cmd), 0);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/d%d", skd__wsq_merged(q), i);
        CHECK_EQ_INT(mkdir(path, 0755), 0);
    }
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
    if (err.code)
        printf("# %s\n", err.msg);
    skd__wsq_free(q);
    CHECK(exists(g_ws, "d4"));
    CHECK(!exists(g_ws, "old"));
    CHECK_EQ_INT(bytes, 0);
    /* Over the bound now (5 entries, 3 allowed): a run that writes nothing
     * is not walked, refused or measured; one that writes is refused. */
    skd__wsq_set_max_entries(3);
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "88888888-8888-8888-8888-88888888888a", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
    CHECK(bytes == SKD_WS_BYTES_UNCHANGED);
    skd__wsq_free(q);
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "88888888-8888-8888-8888-88888888888b", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    CHECK_EQ_INT(put(skd__wsq_merged(q), "one", 1), 0);
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), SKD_EQUOTA);
    CHECK(strstr(err.msg, "more than 3 files") != NULL);
    skd__wsq_free(q);
    CHECK(!exists(g_ws, "one"));
    /* Still over it: a run that only removes is kept. */
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "88888888-8888-8888-8888-88888888888c", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    snprintf(path, sizeof(path), "%s/d4", skd__wsq_merged(q));
    CHECK_EQ_INT(rmdir(path), 0);
    err = (skd_err){0};
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
    if (err.code)
        printf("# %s\n", err.msg);
    skd__wsq_free(q);
    CHECK(!exists(g_ws, "d4"));
    CHECK(exists(g_ws, "d3"));
    skd__wsq_set_max_entries(100000);
}

TEST(killed_run_changes_nothing)
{
    fresh_workspace();
    CHECK_EQ_INT(put(g_ws, "a", 10), 0);
    skd__wsq *q = NULL;
    skd_err err = {0};
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "33333333-3333-3333-3333-333333333333", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/a", skd__wsq_merged(q));
    CHECK_EQ_INT(unlink(path), 0);
    CHECK_EQ_INT(put(skd__wsq_merged(q), "b", 10), 0);
    uint64_t bytes;
    CHECK_EQ_INT(skd__wsq_commit(q, 0, 0, &bytes, &err), SKD_ECANCELLED);
    skd__wsq_free(q);
    CHECK(exists(g_ws, "a"));
    CHECK(!exists(g_ws, "b"));
    /* The reserve: a filesystem that cannot keep it free takes nothing. */
    CHECK_EQ_INT(
        skd__wsq_prepare(g_ws, -1, "33333333-3333-3333-3333-333333333334", 1 << 20, &q, &err), 0);
    if (!q)
        return;
    CHECK_EQ_INT(put(skd__wsq_merged(q), "c", 10), 0);
    CHECK_EQ_INT(skd__wsq_commit(q, 1, INT64_MAX / 2, &bytes, &err), SKD_EQUOTA);
    CHECK(strstr(err.msg, "SKILLS_DATA_RESERVE_BYTES") != NULL);
    skd__wsq_free(q);
    CHECK(!exists(g_ws, "c"));
}

/* A user namespace fd with the identity map of uid/gid 0, for an idmapped
 * lower layer (what the spawner's idmap is for the native sandbox): a
 * child unshares it and waits while it is opened. */
static int identity_userns(void)
{
    int p[2], fd = -1;
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(p[1]);
        if (unshare(CLONE_NEWUSER) != 0)
            _exit(1);
        if (read(p[0], &c, 1) < 0) /* EOF when the parent is done */
            _exit(1);
        _exit(0);
    }
    close(p[0]);
    char path[64];
    for (int i = 0; i < 200 && pid > 0 && fd < 0; i++) {
        struct stat a, b;
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        /* wait until the child is in its new namespace */
        if (stat("/proc/self/ns/user", &a) == 0 && stat(path, &b) == 0 && a.st_ino != b.st_ino) {
            int ok = 1;
            static const char *const maps[] = {"uid_map", "gid_map"};
            for (int m = 0; m < 2; m++) {
                snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, maps[m]);
                int mf = open(path, O_WRONLY);
                ok = ok && mf >= 0 && write(mf, "0 0 1\n", 6) == 6;
                if (mf >= 0)
                    close(mf);
            }
            snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
            fd = ok ? open(path, O_RDONLY | O_CLOEXEC) : -1;
            break;
        }
        usleep(5000);
    }
    close(p[1]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return fd;
}

static int mounted_under(const char *name)
{
    char dir[PATH_MAX], line[4096];
    snprintf(dir, sizeof(dir), "%s/%s/%s", SKD__WSQ_DIR, skd__ctr_owner(), name);
    FILE *f = fopen("/proc/self/mounts", "r");
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n += strstr(line, dir) != NULL;
    if (f)
        fclose(f);
    return n;
}

static int wsq_dir_exists(const char *name)
{
    char dir[PATH_MAX];
    struct stat st;
    snprintf(dir, sizeof(dir), "%s/%s/%s", SKD__WSQ_DIR, skd__ctr_owner(), name);
    return stat(dir, &st) == 0;
}

TEST(stage_serves_one_run)
{
    /* A pre-made sandbox's quota tmpfs (skd__wsq_stage): the run of the
     * same quota takes it, writes land and are committed, and it is gone
     * with the run. */
    fresh_workspace();
    int ns = identity_userns();
    CHECK(ns >= 0);
    if (ns < 0)
        return;
    skd__wsq *stage = NULL, *q = NULL;
    skd_err err = {0};
    int64_t quota = 4LL << 20;
    CHECK_EQ_INT(skd__wsq_stage("warm-test-1", quota, 0, 0, &stage, &err), 0);
    CHECK(wsq_dir_exists("warm-test-1"));
    CHECK_EQ_INT(mounted_under("warm-test-1"), 1); /* the tmpfs, no overlay yet */
    CHECK_EQ_INT(skd__wsq_prepare_staged(stage, g_ws, -1, "44444444-4444-4444-4444-444444444444",
                                         quota, ns, 0, 0, &q, &err),
                 0);
    CHECK(q == stage);
    if (!q) {
        close(ns);
        return;
    }
    CHECK(strstr(skd__wsq_merged(q), "/warm-test-1/merged") != NULL);
    CHECK_EQ_INT(mounted_under("warm-test-1"), 3); /* + idmapped lower, overlay */
    CHECK_EQ_INT(put(skd__wsq_merged(q), "staged.txt", 10), 0);
    uint64_t bytes = 0;
    skd__wsq_sandbox_gone(q); /* as the native provider does: the overlay stays mounted */
    CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
    CHECK_EQ_INT(mounted_under("warm-test-1"), 3);
    skd__wsq_free(q);
    CHECK_EQ_INT(size_of(g_ws, "staged.txt"), 10);
    CHECK(!wsq_dir_exists("warm-test-1"));
    CHECK_EQ_INT(mounted_under("warm-test-1"), 0);
    close(ns);
}

TEST(stage_of_another_quota_starts_afresh)
{
    fresh_workspace();
    int ns = identity_userns();
    CHECK(ns >= 0);
    if (ns < 0)
        return;
    skd__wsq *stage = NULL, *q = NULL;
    skd_err err = {0};
    CHECK_EQ_INT(skd__wsq_stage("warm-test-2", 4LL << 20, 0, 0, &stage, &err), 0);
    CHECK_EQ_INT(skd__wsq_prepare_staged(stage, g_ws, -1, "55555555-5555-5555-5555-555555555555",
                                         8LL << 20, ns, 0, 0, &q, &err),
                 0);
    /* the stage is gone; the run has a directory of its own */
    CHECK(!wsq_dir_exists("warm-test-2"));
    CHECK_EQ_INT(mounted_under("warm-test-2"), 0);
    CHECK(q && strstr(skd__wsq_merged(q), "/55555555-5555-5555-5555-555555555555/merged"));
    if (q) {
        /* 6 MiB fit the run's own quota of 8, not the stage's 4 */
        CHECK_EQ_INT(put(skd__wsq_merged(q), "six.bin", 6u << 20), 0);
        uint64_t bytes = 0;
        CHECK_EQ_INT(skd__wsq_commit(q, 1, 0, &bytes, &err), 0);
        skd__wsq_free(q);
        CHECK_EQ_INT(size_of(g_ws, "six.bin"), 6u << 20);
    }
    /* a workspace that cannot be opened: refused, the stage removed */
    stage = q = NULL;
    CHECK_EQ_INT(skd__wsq_stage("warm-test-3", 4LL << 20, 0, 0, &stage, &err), 0);
    CHECK_EQ_INT(skd__wsq_prepare_staged(stage, "/nonexistent/skd-wsq-test", -1,
                                         "66666666-6666-6666-6666-666666666666", 4LL << 20, ns, 0,
                                         0, &q, &err),
                 SKD_ESANDBOX);
    CHECK(q == NULL);
    CHECK(!wsq_dir_exists("warm-test-3"));
    CHECK_EQ_INT(mounted_under("warm-test-3"), 0);
    close(ns);
}

TEST(nothing_left_mounted)
{
    /* This process's own runs only: other skilld processes on the machine
     * may have runs of their own under SKD__WSQ_DIR/<their owner>. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s/", SKD__WSQ_DIR, skd__ctr_owner());
    FILE *f = fopen("/proc/self/mounts", "r");
    char line[4096];
    int left = 0;
    /* Only this test's run ids count: other users of the machine may have
     * overlays of their own mounted right now. */
    static const char *const ids[] = {"/11111111-", "/22222222-", "/33333333-", "/44444444-",
                                      "/55555555-", "/66666666-", "/77777777-", "/warm-test-"};
    while (f && fgets(line, sizeof(line), f))
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
            if (strstr(line, dir) && strstr(line, ids[i]))
                left++;
    if (f)
        fclose(f);
    CHECK_EQ_INT(left, 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    TAP_BEGIN("sandbox_ws_quota");
    if (geteuid() != 0) {
        /* The mechanism needs root (the spawner); the suite runs as root. */
        printf("FAIL sandbox_ws_quota: needs root\n");
        return 1;
    }
    if (!getenv("SKILLD_WSQ_NATIVE_PART")) {
        RUN(commit_applies_changes);
        RUN(commit_with_the_overlay_still_mounted);
        RUN(over_quota_changes_nothing);
        RUN(live_commits_apply_only_what_changed);
        RUN(over_max_entries_changes_nothing);
        RUN(killed_run_changes_nothing);
        /* Valgrind 3.19 implements neither open_tree nor mount_setattr,
         * which the idmapped lower layer of the staged cases needs: under
         * the valgrind ring the rest runs as this program again, natively
         * (valgrind runs with --trace-children=no), asserting the same. */
        if (getenv("SKILLD_UNDER_VALGRIND")) {
            fflush(stdout);
            setenv("SKILLD_WSQ_NATIVE_PART", "1", 1);
            execv(argv[0], argv);
            printf("FAIL sandbox_ws_quota: re-exec for the staged cases: %s\n", strerror(errno));
            return 1;
        }
    }
    RUN(stage_serves_one_run);
    RUN(stage_of_another_quota_starts_afresh);
    RUN(nothing_left_mounted);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_ws);
    if (system(cmd) != 0)
        printf("# cleanup failed\n");
    return TAP_END();
}
