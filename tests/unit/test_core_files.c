/* Unit tests for the small-file helpers and the openat2 wrapper of
 * src/core/util.c: whole reads, the size bound, missing files, short and
 * failed writes, and openat2's refusal to leave its directory. */
#include "skilld/util.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/skd-files-XXXXXX";
static int dfd = -1;

static void put(const char *name, const char *text)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        (void)!write(fd, text, strlen(text));
        close(fd);
    }
}

TEST(read_small_reads_whole_file)
{
    char buf[16];
    size_t len = 99;
    put("a", "hello\nworld\n");
    CHECK_EQ_INT(skd_read_small(dfd, "a", 0, buf, sizeof(buf), &len), 0);
    CHECK_STR(buf, "hello\nworld\n");
    CHECK_EQ_INT(len, 12);
    /* exactly cap - 1 bytes fit */
    put("b", "123456789012345");
    CHECK_EQ_INT(skd_read_small(dfd, "b", 0, buf, sizeof(buf), &len), 0);
    CHECK_EQ_INT(len, 15);
    /* an empty file, and a /proc file whose size says 0 */
    put("e", "");
    CHECK_EQ_INT(skd_read_small(dfd, "e", 0, buf, sizeof(buf), &len), 0);
    CHECK_EQ_INT(len, 0);
    CHECK_STR(buf, "");
    char stat[1024];
    CHECK_EQ_INT(skd_read_small(AT_FDCWD, "/proc/self/stat", 0, stat, sizeof(stat), NULL), 0);
    CHECK(strchr(stat, ')') != NULL);
}

TEST(read_small_refuses_errors)
{
    char buf[8];
    size_t len = 99;
    put("big", "0123456789");
    CHECK_EQ_INT(skd_read_small(dfd, "big", 0, buf, sizeof(buf), &len), SKD_ETOOBIG);
    CHECK_EQ_INT(errno, EFBIG);
    CHECK_STR(buf, "0123456"); /* the first cap - 1 bytes, terminated */
    CHECK_EQ_INT(len, 7);
    CHECK_EQ_INT(skd_read_small(dfd, "missing", 0, buf, sizeof(buf), &len), SKD_ENOENT);
    CHECK_EQ_INT(errno, ENOENT);
    CHECK_STR(buf, "");
    CHECK_EQ_INT(len, 0);
    /* a directory opens but does not read */
    mkdirat(dfd, "d", 0700);
    CHECK_EQ_INT(skd_read_small(dfd, "d", 0, buf, sizeof(buf), NULL), SKD_EIO);
    CHECK_EQ_INT(errno, EISDIR);
    /* O_NOFOLLOW passed through */
    symlinkat("a", dfd, "link");
    CHECK_EQ_INT(skd_read_small(dfd, "link", O_NOFOLLOW, buf, sizeof(buf), NULL), SKD_EIO);
    CHECK_EQ_INT(errno, ELOOP);
}

TEST(read_alloc_is_bounded)
{
    char *out = NULL;
    size_t len = 0;
    /* larger than the first guess of 4096 bytes: grown */
    char *text = malloc(10001);
    memset(text, 'x', 10000);
    text[10000] = '\0';
    put("l", text);
    CHECK_EQ_INT(skd_read_alloc(dfd, "l", 0, 10000, &out, &len), 0);
    CHECK_EQ_INT(len, 10000);
    CHECK(out && strcmp(out, text) == 0);
    free(out);
    CHECK_EQ_INT(skd_read_alloc(dfd, "l", 0, 9999, &out, &len), SKD_ETOOBIG);
    CHECK(out == NULL);
    CHECK_EQ_INT(skd_read_alloc(dfd, "l", 0, 100, &out, &len), SKD_ETOOBIG);
    free(text);
    /* /proc says size 0: read to the end anyway */
    CHECK_EQ_INT(skd_read_alloc(AT_FDCWD, "/proc/self/status", 0, 1 << 20, &out, &len), 0);
    CHECK(out && strstr(out, "Pid:") != NULL && strlen(out) == len);
    free(out);
    put("e", "");
    CHECK_EQ_INT(skd_read_alloc(dfd, "e", 0, 0, &out, &len), 0);
    CHECK(out && out[0] == '\0' && len == 0);
    free(out);
    CHECK_EQ_INT(skd_read_alloc(dfd, "missing", 0, 10, &out, &len), SKD_ENOENT);
    CHECK(out == NULL);
}

TEST(write_small_writes_and_reports)
{
    char buf[32];
    put("w", "old contents here");
    /* flags pass through: O_TRUNC here */
    CHECK_EQ_INT(skd_write_small(dfd, "w", O_TRUNC, "new"), 0);
    CHECK_EQ_INT(skd_read_small(dfd, "w", 0, buf, sizeof(buf), NULL), 0);
    CHECK_STR(buf, "new");
    CHECK_EQ_INT(skd_write_small(dfd, "fresh", O_CREAT | O_EXCL, "x"), 0);
    struct stat st;
    CHECK(fstatat(dfd, "fresh", &st, 0) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_EQ_INT(skd_write_small(dfd, "fresh", O_CREAT | O_EXCL, "x"), SKD_EIO);
    CHECK_EQ_INT(errno, EEXIST);
    CHECK_EQ_INT(skd_write_small(dfd, "missing", 0, "1"), SKD_ENOENT);
    CHECK_EQ_INT(errno, ENOENT);
    /* a device that takes nothing */
    CHECK_EQ_INT(skd_write_small(AT_FDCWD, "/dev/full", 0, "1"), SKD_EIO);
    CHECK_EQ_INT(errno, ENOSPC);
}

/* A short write: the file size limit lets 4 of 11 bytes through, the next
 * write fails with EFBIG. In a child, which owns its rlimit. */
TEST(write_all_reports_short_write)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {4, 4};
        signal(SIGXFSZ, SIG_IGN);
        int fd = openat(dfd, "short", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(2);
        int rc = skd_write_all(fd, "hello world", 11);
        _exit(rc == SKD_EIO && errno == EFBIG ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char buf[32];
    CHECK_EQ_INT(skd_read_small(dfd, "short", 0, buf, sizeof(buf), NULL), 0);
    CHECK_STR(buf, "hell");
    /* a closed descriptor */
    CHECK_EQ_INT(skd_write_all(-1, "x", 1), SKD_EIO);
    CHECK_EQ_INT(errno, EBADF);
    CHECK_EQ_INT(skd_write_all(-1, "", 0), 0);
}

TEST(openat2_stays_beneath)
{
    mkdirat(dfd, "sub", 0700);
    put("sub/f", "inside");
    int fd = skd_openat2(dfd, "sub/f", O_RDONLY, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    if (fd < 0 && errno == ENOSYS) /* valgrind before 3.21 */
        return;
    CHECK(fd >= 0);
    CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
    if (fd >= 0)
        close(fd);
    CHECK_EQ_INT(skd_openat2(dfd, "../x", O_RDONLY, 0, RESOLVE_BENEATH), -1);
    CHECK_EQ_INT(errno, EXDEV);
    CHECK_EQ_INT(skd_openat2(dfd, "/etc/passwd", O_RDONLY, 0, RESOLVE_BENEATH), -1);
    CHECK_EQ_INT(errno, EXDEV);
    symlinkat("/etc/passwd", dfd, "out");
    CHECK_EQ_INT(skd_openat2(dfd, "out", O_RDONLY, 0, RESOLVE_BENEATH), -1);
    CHECK_EQ_INT(errno, EXDEV);
    CHECK_EQ_INT(skd_openat2(dfd, "link", O_RDONLY, 0, RESOLVE_NO_SYMLINKS), -1);
    CHECK_EQ_INT(errno, ELOOP);
    fd = skd_openat2(dfd, "made", O_WRONLY | O_CREAT | O_EXCL, 0640, RESOLVE_BENEATH);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 0777) == (0640 & ~022u));
    if (fd >= 0)
        close(fd);
}

int main(void)
{
    TAP_BEGIN("test_core_files");
    umask(022);
    if (!mkdtemp(dir) || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        printf("FAIL test_core_files: setup: %s\n", strerror(errno));
        return 1;
    }
    RUN(read_small_reads_whole_file);
    RUN(read_small_refuses_errors);
    RUN(read_alloc_is_bounded);
    RUN(write_small_writes_and_reports);
    RUN(write_all_reports_short_write);
    RUN(openat2_stays_beneath);
    int rc = TAP_END();
    /* remove the scratch directory */
    const char *names[] = {"a", "b",     "e",     "big",   "d",   "link", "l",
                           "w", "fresh", "short", "sub/f", "sub", "out",  "made"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (unlinkat(dfd, names[i], 0) != 0)
            unlinkat(dfd, names[i], AT_REMOVEDIR);
    close(dfd);
    rmdir(dir);
    return rc;
}
