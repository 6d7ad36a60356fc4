/* Crash test for the atomic overwrite of file_write: a child process
 * overwrites one file in a loop, alternating two contents of the same size,
 * and is killed with SIGKILL at a random moment, many times. After each
 * kill the file must hold exactly one of the two contents, never a mix, a
 * prefix or nothing. The temporary files the kills left are removed by
 * the next write (under the workspace lock) and by the sweep at start:
 * all of them where the lock is free, only old ones where it is held. */
#include "tap.h"
#include "ws_fixture.h"

#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

#define SIZE (256 * 1024)

static json_t *invoke(skd_engine *eng, skd_workspace *ws, const char *skill, json_t *in)
{
    skd_err e = {0};
    skd_skill *s = skd_registry_lookup(skd_engine_registry(eng), skill, "crash", &e);
    skd_ctx ctx = {
        .key_id = "crash", .scopes = SKD_SCOPE_ALL, .cfg = skd_engine_config(eng), .ws = ws};
    json_t *r = s ? skd_skill_invoke(s, &ctx, in) : NULL;
    skd_skill_unref(s);
    return r;
}

static json_t *content_of(char c)
{
    char *buf = malloc(SIZE);
    memset(buf, c, SIZE);
    json_t *in = json_pack("{s:s, s:s%}", "path", "c.bin", "content", buf, (size_t)SIZE);
    free(buf);
    return in;
}

/* The child: overwrite forever. Touches no SQLite (handlers only). */
static void writer(fx *f)
{
    skd_workspace *ws = NULL;
    skd_err e = {0};
    if (skd_workspace_open(f->dir, "crash", &ws, &e))
        _exit(2);
    json_t *a = content_of('A'), *b = content_of('B');
    for (unsigned i = 0;; i++) {
        json_t *r = invoke(f->eng, ws, "file_write", (i & 1) ? a : b);
        if (!skd_result_success(r))
            _exit(3);
        json_decref(r);
    }
}

/* 1 when path holds SIZE bytes all equal to 'A' or all to 'B'. */
static int whole(const char *path)
{
    static char buf[SIZE + 2];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(buf) && (r = read(fd, buf + got, sizeof(buf) - got)) > 0)
        got += (size_t)r;
    close(fd);
    if (got != SIZE || (buf[0] != 'A' && buf[0] != 'B'))
        return 0;
    for (size_t i = 1; i < got; i++)
        if (buf[i] != buf[0])
            return 0;
    return 1;
}

/* How many SKD_WORKSPACE_TMP_PREFIX files the directory at path holds. */
static int tmp_files(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)) != NULL)
        n += strncmp(de->d_name, SKD_WORKSPACE_TMP_PREFIX, strlen(SKD_WORKSPACE_TMP_PREFIX)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* A temporary file named name in the directory at dir, age_s seconds old. */
static void plant(const char *dir, const char *name, int age_s)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "we");
    if (f) {
        fputs("partial", f);
        fclose(f);
    }
    struct timespec t[2] = {{time(NULL) - age_s, 0}, {time(NULL) - age_s, 0}};
    utimensat(AT_FDCWD, p, t, 0);
}

TEST(sigkill_mid_overwrite_leaves_old_or_new)
{
    fx f;
    CHECK_EQ_INT(fx_open(&f, 0, 0), 0);
    skd_workspace *ws = NULL;
    skd_err e = {0};
    CHECK_EQ_INT(skd_workspace_open(f.dir, "crash", &ws, &e), 0);
    json_t *first = content_of('A');
    json_t *r = invoke(f.eng, ws, "file_write", first);
    CHECK(skd_result_success(r));
    json_decref(r);
    json_decref(first);
    skd_workspace_close(ws);
    char path[PATH_MAX];
    CHECK(fx_ws(&f, "crash", "c.bin", path, sizeof(path)) != NULL);
    int rounds = getenv("SKILLD_UNDER_VALGRIND") ? 10 : 50, intact = 0, early = 0;
    unsigned seed = (unsigned)time(NULL);
    for (int i = 0; i < rounds; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            writer(&f);
        CHECK(pid > 0);
        if (pid < 0)
            break;
        struct timespec ts = {0, (long)(rand_r(&seed) % 20000) * 1000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
            early++; /* the writer stopped by itself: a write failed */
        if (whole(path))
            intact++;
    }
    CHECK_EQ_INT(early, 0);
    CHECK_EQ_INT(intact, rounds);
    /* the file is still readable through the skill */
    r = fx_callj(&f, "crash", "file_read", "{\"path\":\"c.bin\",\"length\":4}");
    CHECK(skd_result_success(r));
    const char *c = skd_json_str(r, "content", "");
    CHECK(strcmp(c, "AAAA") == 0 || strcmp(c, "BBBB") == 0);
    json_decref(r);
    /* What the kills left (and one planted, so the check cannot pass
     * empty) goes with the next write, and never counted. */
    char wsdir[PATH_MAX];
    CHECK(fx_ws(&f, "crash", NULL, wsdir, sizeof(wsdir)) != NULL);
    plant(wsdir, SKD_WORKSPACE_TMP_PREFIX "0123456789abcdef", 0);
    printf("# %d temporary file(s) before the next write\n", tmp_files(wsdir));
    CHECK(tmp_files(wsdir) >= 1);
    r = fx_callj(&f, "crash", "file_write", "{\"path\":\"d.txt\",\"content\":\"dd\"}");
    CHECK(skd_result_success(r));
    json_decref(r);
    CHECK_EQ_INT(tmp_files(wsdir), 0);
    skd_ws_usage u;
    int wfd = open(wsdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK_EQ_INT(skd_workspace_usage_limit(wfd, 1000, &u, NULL), 0);
    close(wfd);
    CHECK(u.bytes == SIZE + 2 && u.entries == 2);
    fx_close(&f);
}

/* At start: every temporary file of a workspace whose lock is free; only
 * the old ones of a workspace being written (its lock held). */
TEST(sweep_at_start)
{
    fx f;
    CHECK_EQ_INT(fx_open(&f, 0, 0), 0);
    json_t *r = fx_callj(&f, "a", "file_write", "{\"path\":\"x\",\"content\":\"x\"}");
    CHECK(skd_result_success(r));
    json_decref(r);
    r = fx_callj(&f, "b", "file_write", "{\"path\":\"x\",\"content\":\"x\"}");
    json_decref(r);
    char a[PATH_MAX], b[PATH_MAX], sub[PATH_MAX + 8];
    CHECK(fx_ws(&f, "a", NULL, a, sizeof(a)) != NULL);
    CHECK(fx_ws(&f, "b", NULL, b, sizeof(b)) != NULL);
    snprintf(sub, sizeof(sub), "%s/sub", a);
    CHECK(mkdir(sub, 0700) == 0);
    plant(a, SKD_WORKSPACE_TMP_PREFIX "01", 0);
    plant(sub, SKD_WORKSPACE_TMP_PREFIX "02", 0);
    plant(b, SKD_WORKSPACE_TMP_PREFIX "03", 0);
    plant(b, SKD_WORKSPACE_TMP_PREFIX "04", SKD_WORKSPACE_TMP_MAX_AGE_S + 5);
    int held = open(b, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(flock(held, LOCK_EX) == 0);
    skd_err e = {0};
    CHECK_EQ_INT(skd_workspace_sweep_tmp(f.dir, &e), 3);
    CHECK_EQ_INT(tmp_files(a) + tmp_files(sub), 0);
    CHECK_EQ_INT(tmp_files(b), 1); /* the young one of a workspace being written */
    close(held);
    CHECK_EQ_INT(skd_workspace_sweep_tmp(f.dir, &e), 1);
    CHECK_EQ_INT(tmp_files(b), 0);
    fx_close(&f);
}

int main(void)
{
    TAP_BEGIN("test_workspace_crash");
    RUN(sigkill_mid_overwrite_leaves_old_or_new);
    RUN(sweep_at_start);
    return TAP_END();
}
