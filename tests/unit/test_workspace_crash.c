/* Crash test for the atomic overwrite of file_write: a child process
 * overwrites one file in a loop, alternating two contents of the same size,
 * and is killed with SIGKILL at a random moment, many times. After each
 * kill the file must hold exactly one of the two contents, never a mix, a
 * prefix or nothing. */
#include "tap.h"
#include "ws_fixture.h"

#include <signal.h>
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
    fx_close(&f);
}

int main(void)
{
    TAP_BEGIN("test_workspace_crash");
    RUN(sigkill_mid_overwrite_leaves_old_or_new);
    return TAP_END();
}
