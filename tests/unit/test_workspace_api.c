/* Unit tests for the workspace layer itself: the lexical path check, the
 * directory name and mode, openat beneath the root, open_parent with
 * mkdirs, the usage walk and the lock; and the base64 helpers of the file
 * skills. */
#include "builtins/fileskill.h"
#include "skilld/util.h"
#include "skilld/workspace.h"
#include "tap.h"
#include "ws_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <sys/file.h>

TEST(check_path_accepts_and_refuses)
{
    skd_err e = {0};
    static const char *const ok[] = {"a",   "a/b", "./a",     "a/./b",   "a//b",     "...",
                                     "..a", "a..", "a/..b/c", ".hidden", "a b/ü.txt"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        if (skd_workspace_check_path(ok[i], 0, &e) != 0)
            printf("# refused %s: %s\n", ok[i], e.msg);
        CHECK_EQ_INT(skd_workspace_check_path(ok[i], 0, &e), 0);
    }
    static const char *const bad[] = {"",   ".", "./",     "..",    "../a",      "a/..", "a/../b",
                                      "/a", "/", "a/\x01", "a\x7f", "x/../../y", "./.."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        CHECK_EQ_INT(skd_workspace_check_path(bad[i], 0, &e), SKD_EPATH);
    CHECK_EQ_INT(skd_workspace_check_path("", 1, &e), 0);
    CHECK_EQ_INT(skd_workspace_check_path(".", 1, &e), 0);
    CHECK_EQ_INT(skd_workspace_check_path("..", 1, &e), SKD_EPATH);
    CHECK_EQ_INT(skd_workspace_check_path(NULL, 1, &e), SKD_EPATH);
    CHECK_EQ_INT(skd_workspace_check_pathn("a\0b", 3, 0, &e), SKD_EPATH);
    CHECK(strstr(e.msg, "NUL") != NULL);
    char longp[SKD_WS_PATH_MAX + 2];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    CHECK_EQ_INT(skd_workspace_check_path(longp, 0, &e), SKD_EPATH);
    longp[SKD_WS_PATH_MAX] = '\0';
    CHECK_EQ_INT(skd_workspace_check_path(longp, 0, &e), 0);
    CHECK(skd_workspace_path_is_root("./."));
    CHECK(skd_workspace_path_is_root(""));
    CHECK(!skd_workspace_path_is_root("./a"));
}

TEST(open_names_by_sha256_with_mode_0700)
{
    char dir[] = "/tmp/skilld-wsapi-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    skd_workspace *ws = NULL;
    skd_err e = {0};
    CHECK_EQ_INT(skd_workspace_open(dir, "alice", &ws, &e), 0);
    if (!ws)
        return;
    char want[PATH_MAX];
    snprintf(want, sizeof(want), "%s/workspaces/%s", dir,
             "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90");
    CHECK_STR(skd_workspace_path(ws), want);
    struct stat st;
    CHECK_EQ_INT(stat(want, &st), 0);
    CHECK_EQ_INT(st.st_mode & 07777, 0700);
    CHECK(skd_workspace_fd(ws) >= 0);
    skd_workspace *none = NULL;
    CHECK_EQ_INT(skd_workspace_open(dir, "", &none, &e), SKD_EUNAUTH);
    CHECK(none == NULL);
    skd_workspace_close(ws);
    skd_workspace_close(NULL);
    /* a loosened mode is tightened again on open */
    chmod(want, 0755);
    CHECK_EQ_INT(skd_workspace_open(dir, "alice", &ws, &e), 0);
    CHECK_EQ_INT(stat(want, &st), 0);
    CHECK_EQ_INT(st.st_mode & 07777, 0700);
    skd_workspace_close(ws);
    fx_rm_rf(dir);
}

/* The first DATA_DIR of the process stays open and a workspace is opened
 * from it with one openat2 that follows no symlink (this test runs first,
 * so its directory is the one kept): levels are created when missing, and
 * a workspace or workspaces/ replaced by a symlink is refused, as on the
 * level-by-level way. */
TEST(kept_data_dir_follows_no_symlink)
{
    char dir[] = "/tmp/skilld-wsfast-XXXXXX", out[] = "/tmp/skilld-wsout-XXXXXX";
    CHECK(mkdtemp(dir) != NULL && mkdtemp(out) != NULL);
    skd_workspace *ws = NULL;
    skd_err e = {0};
    char hex[SKD_SHA256_HEX_LEN + 1], p[PATH_MAX], q[PATH_MAX];
    CHECK_EQ_INT(skd_workspace_open(dir, "bob", &ws, &e), 0);
    skd_workspace_close(ws);
    /* a second key: its level is made on the fast way */
    CHECK_EQ_INT(skd_workspace_open(dir, "carol", &ws, &e), 0);
    skd_sha256_hex("carol", 5, hex);
    snprintf(p, sizeof(p), "%s/workspaces/%s", dir, hex);
    struct stat st;
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
    skd_workspace_close(ws);
    /* removed while the directory is kept open: made again */
    fx_rm_rf(p);
    CHECK_EQ_INT(skd_workspace_open(dir, "carol", &ws, &e), 0);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    skd_workspace_close(ws);
    /* a workspace that is a symlink to a directory outside: refused */
    skd_sha256_hex("mallory", 7, hex);
    snprintf(p, sizeof(p), "%s/workspaces/%s", dir, hex);
    CHECK_EQ_INT(symlink(out, p), 0);
    ws = NULL;
    CHECK(skd_workspace_open(dir, "mallory", &ws, &e) != 0);
    CHECK(ws == NULL);
    skd_workspace_close(ws);
    CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode)); /* nothing made through it */
    /* workspaces/ itself a symlink to a tree holding bob's workspace: refused */
    skd_sha256_hex("bob", 3, hex);
    snprintf(q, sizeof(q), "%s/workspaces", out);
    CHECK_EQ_INT(mkdir(q, 0700), 0);
    snprintf(q, sizeof(q), "%s/workspaces/%s", out, hex);
    CHECK_EQ_INT(mkdir(q, 0700), 0);
    snprintf(p, sizeof(p), "%s/workspaces", dir);
    fx_rm_rf(p);
    snprintf(q, sizeof(q), "%s/workspaces", out);
    CHECK_EQ_INT(symlink(q, p), 0);
    ws = NULL;
    CHECK(skd_workspace_open(dir, "bob", &ws, &e) != 0);
    CHECK(ws == NULL);
    skd_workspace_close(ws);
    fx_rm_rf(dir);
    fx_rm_rf(out);
}

TEST(openat_parent_usage_lock)
{
    char dir[] = "/tmp/skilld-wsapi-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    skd_workspace *ws = NULL;
    skd_err e = {0};
    char name[SKD_WS_NAME_MAX + 1];
    CHECK_EQ_INT(skd_workspace_open(dir, "k", &ws, &e), 0);
    if (!ws)
        return;
    int fd = skd_workspace_open_parent(ws, "a/b/c.txt", 0, name, &e);
    CHECK_EQ_INT(fd, SKD_ENOENT);
    fd = skd_workspace_open_parent(ws, "a/b/c.txt", 1, name, &e);
    CHECK(fd >= 0);
    CHECK_STR(name, "c.txt");
    int f = skd_workspace_openat_in(ws, fd, name, O_WRONLY | O_CREAT | O_EXCL, 0600, &e);
    CHECK(f >= 0);
    CHECK_EQ_INT(write(f, "12345", 5), 5);
    close(f);
    close(fd);
    fd = skd_workspace_open_parent(ws, "top/", 0, name, &e);
    CHECK(fd >= 0);
    CHECK_STR(name, "top");
    close(fd);
    CHECK_EQ_INT(skd_workspace_open_parent(ws, "a/.", 0, name, &e), SKD_EPATH);
    CHECK_EQ_INT(skd_workspace_open_parent(ws, ".", 0, name, &e), SKD_EPATH);
    /* a file in the way of mkdirs */
    CHECK_EQ_INT(skd_workspace_open_parent(ws, "a/b/c.txt/d", 1, name, &e), SKD_ENOENT);
    f = skd_workspace_openat(ws, "a/b/c.txt", O_RDONLY, 0, &e);
    CHECK(f >= 0);
    char buf[8] = {0};
    CHECK_EQ_INT(read(f, buf, sizeof(buf)), 5);
    CHECK((fcntl(f, F_GETFL) & O_NONBLOCK) == 0);
    close(f);
    CHECK_EQ_INT(skd_workspace_openat(ws, "a/nope", O_RDONLY, 0, &e), SKD_ENOENT);
    CHECK_EQ_INT(skd_workspace_openat(ws, "../x", O_RDONLY, 0, &e), SKD_EPATH);
    /* Entries: a, a/b, a/b/c.txt; the walk stops past the bound. */
    skd_ws_usage u = {0};
    CHECK_EQ_INT(skd_workspace_usage_limit(skd_workspace_fd(ws), UINT64_MAX - 1, &u, &e), 0);
    CHECK_EQ_INT(u.bytes, 5);
    CHECK_EQ_INT(skd_workspace_usage_limit(skd_workspace_fd(ws), 100, &u, &e), 0);
    CHECK_EQ_INT(u.entries, 3);
    CHECK_EQ_INT(u.bytes, 5);
    CHECK_EQ_INT(skd_workspace_usage_limit(skd_workspace_fd(ws), 1, &u, &e), 0);
    CHECK_EQ_INT(u.entries, 2);
    CHECK_EQ_INT(skd_workspace_lock(ws, &e), 0);
    CHECK_EQ_INT(skd_workspace_lock(ws, &e), 0); /* already held: no deadlock */
    /* another handle of the same workspace cannot take the lock meanwhile */
    int other = open(skd_workspace_path(ws), O_RDONLY | O_DIRECTORY);
    CHECK(other >= 0);
    CHECK(flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK);
    skd_workspace_unlock(ws);
    CHECK_EQ_INT(flock(other, LOCK_EX | LOCK_NB), 0);
    close(other);
    skd_workspace_close(ws);
    fx_rm_rf(dir);
}

TEST(base64_round_trip_and_strictness)
{
    skd_err e = {0};
    unsigned char bytes[300];
    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (unsigned char)(i * 7);
    for (size_t n = 0; n <= 7; n++) {
        size_t elen = 0, dlen = 0;
        char *enc = skd__base64_encode(bytes, n, &elen);
        CHECK(enc != NULL);
        CHECK_EQ_INT(elen, 4 * ((n + 2) / 3));
        unsigned char *dec = NULL;
        CHECK_EQ_INT(skd__base64_decode(enc, elen, 1000, &dec, &dlen, &e), 0);
        CHECK_EQ_INT(dlen, n);
        CHECK(n == 0 || memcmp(dec, bytes, n) == 0);
        free(enc);
        free(dec);
    }
    size_t elen = 0, dlen = 0;
    char *enc = skd__base64_encode(bytes, sizeof(bytes), &elen);
    unsigned char *dec = NULL;
    CHECK_EQ_INT(skd__base64_decode(enc, elen, 1000, &dec, &dlen, &e), 0);
    CHECK(dlen == sizeof(bytes) && memcmp(dec, bytes, dlen) == 0);
    free(dec);
    CHECK_EQ_INT(skd__base64_decode(enc, elen, 299, &dec, &dlen, &e), SKD_ETOOBIG);
    free(enc);
    CHECK_STR((char *)(enc = skd__base64_encode((const unsigned char *)"hi", 2, &elen)), "aGk=");
    free(enc);
    CHECK_EQ_INT(skd__base64_decode("aGk", 3, 10, &dec, &dlen, &e), SKD_EINVAL);
    CHECK_EQ_INT(skd__base64_decode("aG k", 4, 10, &dec, &dlen, &e), SKD_EINVAL);
    CHECK_EQ_INT(skd__base64_decode("a=Gk", 4, 10, &dec, &dlen, &e), SKD_EINVAL);
    CHECK_EQ_INT(skd__base64_decode("a===", 4, 10, &dec, &dlen, &e), SKD_EINVAL);
    CHECK_EQ_INT(skd__base64_decode("aGk=aGk=", 8, 10, &dec, &dlen, &e), SKD_EINVAL);
    /* canonical only: bits past the data in the last group are refused */
    CHECK_EQ_INT(skd__base64_decode("YQ==", 4, 10, &dec, &dlen, &e), 0);
    CHECK(dlen == 1 && dec[0] == 'a');
    free(dec);
    CHECK_EQ_INT(skd__base64_decode("YWI=", 4, 10, &dec, &dlen, &e), 0);
    CHECK(dlen == 2 && memcmp(dec, "ab", 2) == 0);
    free(dec);
    dec = NULL;
    CHECK_EQ_INT(skd__base64_decode("YR==", 4, 10, &dec, &dlen, &e), SKD_EINVAL);
    CHECK(dec == NULL && strstr(skd_err_msg(&e), "canonical"));
    CHECK_EQ_INT(skd__base64_decode("YWJ=", 4, 10, &dec, &dlen, &e), SKD_EINVAL);
    /* a large buffer in one piece (the OpenSSL version went in chunks) */
    size_t big = 3 * 400000 + 2;
    unsigned char *raw = malloc(big);
    CHECK(raw != NULL);
    for (size_t i = 0; i < big; i++)
        raw[i] = (unsigned char)(i * 131 + (i >> 9));
    enc = skd__base64_encode(raw, big, &elen);
    CHECK(enc != NULL && elen == 4 * ((big + 2) / 3) && strlen(enc) == elen);
    CHECK_EQ_INT(skd__base64_decode(enc, elen, big, &dec, &dlen, &e), 0);
    CHECK(dlen == big && memcmp(dec, raw, big) == 0);
    free(dec);
    free(enc);
    free(raw);
}

int main(void)
{
    TAP_BEGIN("test_workspace_api");
    RUN(kept_data_dir_follows_no_symlink); /* first: its DATA_DIR is the one kept */
    RUN(check_path_accepts_and_refuses);
    RUN(open_names_by_sha256_with_mode_0700);
    RUN(openat_parent_usage_lock);
    RUN(base64_round_trip_and_strictness);
    return TAP_END();
}
