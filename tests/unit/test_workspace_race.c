/* Races and the quota.
 *
 * symlink_swap_race: a second thread swaps, with renameat2(RENAME_EXCHANGE),
 * a real directory for a symlink to a directory outside the workspace, and
 * a real file for a symlink to an outside file, as fast as it can, while
 * this thread runs file_read, file_write (overwrite) and file_write
 * (append) 1000 times each (3000 calls per resolver; a tenth under
 * valgrind) through the handlers. Every successful read must return the
 * inside content; the outside directory must be unchanged at the end.
 * Zero escapes. Runs with openat2 and with the user-space resolver.
 *
 * quota_*: many small appends stop at SKILLS_WORKSPACE_QUOTA_BYTES, also
 * when two threads append at once (each call opens its own workspace
 * handle, so the workspace lock is what serialises them).
 */
#include "tap.h"
#include "workspace/resolve.h"
#include "ws_fixture.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

static int iterations(int n)
{
    return getenv("SKILLD_UNDER_VALGRIND") ? n / 10 : n;
}

struct swapper {
    int dirfd; /* alice's workspace */
    atomic_int stop;
    long swaps;
};

static void *swap_loop(void *arg)
{
    struct swapper *s = arg;
    unsigned seed = 1;
    while (!atomic_load(&s->stop)) {
        /* Yield at pseudo-random points so that a scheduler that switches
         * threads only there (valgrind's) still shows both states. */
        if (renameat2(s->dirfd, "race", s->dirfd, "race_alt", RENAME_EXCHANGE) == 0)
            s->swaps++;
        if (rand_r(&seed) % 4 == 0)
            sched_yield();
        if (renameat2(s->dirfd, "in/f.txt", s->dirfd, "in/f_alt", RENAME_EXCHANGE) == 0)
            s->swaps++;
        if (rand_r(&seed) % 4 == 0)
            sched_yield();
    }
    return NULL;
}

/* Call a skill's handler directly (no audit row: thousands of calls). */
static json_t *invoke(skd_engine *eng, skd_workspace *ws, const char *skill, json_t *in)
{
    skd_err e = {0};
    skd_skill *s = skd_registry_lookup(skd_engine_registry(eng), skill, "alice", &e);
    skd_ctx ctx = {
        .key_id = "alice", .scopes = SKD_SCOPE_ALL, .cfg = skd_engine_config(eng), .ws = ws};
    json_t *r = s ? skd_skill_invoke(s, &ctx, in) : NULL;
    skd_skill_unref(s);
    json_decref(in);
    return r;
}

TEST(symlink_swap_race)
{
    fx f;
    char out[] = "/tmp/skilld-race-out-XXXXXX";
    char A[512], p[PATH_MAX], before[65], after[65];
    CHECK(mkdtemp(out) != NULL);
    CHECK_EQ_INT(fx_open(&f, 0, 0), 0);
    CHECK(fx_ws(&f, "alice", NULL, A, sizeof(A)) != NULL);
    snprintf(p, sizeof(p), "%s/f.txt", out);
    CHECK_EQ_INT(fx_put(p, "OUTSIDE"), 0);
    snprintf(p, sizeof(p), "%s/race", A);
    CHECK_EQ_INT(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/race/f.txt", A);
    CHECK_EQ_INT(fx_put(p, "INSIDE"), 0);
    snprintf(p, sizeof(p), "%s/race_alt", A);
    CHECK_EQ_INT(symlink(out, p), 0);
    snprintf(p, sizeof(p), "%s/in", A);
    CHECK_EQ_INT(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/in/f.txt", A);
    CHECK_EQ_INT(fx_put(p, "INSIDE"), 0);
    char target[PATH_MAX];
    snprintf(target, sizeof(target), "%s/f.txt", out);
    snprintf(p, sizeof(p), "%s/in/f_alt", A);
    CHECK_EQ_INT(symlink(target, p), 0);
    fx_snapshot(out, NULL, before);

    skd_workspace *ws = NULL;
    skd_err e = {0};
    CHECK_EQ_INT(skd_workspace_open(f.dir, "alice", &ws, &e), 0);
    struct swapper sw = {.dirfd = skd_workspace_fd(ws)};
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, swap_loop, &sw), 0);
    int n = iterations(1000), escapes = 0, ok = 0, refused = 0;
    static const char *const paths[] = {"race/f.txt", "in/f.txt"};
    for (int i = 0; i < n; i++) {
        const char *path = paths[i % 2];
        json_t *r = invoke(f.eng, ws, "file_read", json_pack("{s:s}", "path", path));
        if (skd_result_success(r)) {
            ok++;
            const char *c = skd_json_str(r, "content", "");
            if (strncmp(c, "INSIDE", 6) != 0)
                escapes++;
        } else {
            if (refused++ < 3 && getenv("RACE_DEBUG"))
                printf("# refused: %s\n", json_dumps(r, JSON_COMPACT));
        }
        json_decref(r);
        r = invoke(f.eng, ws, "file_write",
                   json_pack("{s:s, s:s}", "path", path, "content", "INSIDE"));
        json_decref(r);
        r = invoke(f.eng, ws, "file_write",
                   json_pack("{s:s, s:s, s:s}", "path", path, "content", "+", "mode", "append"));
        json_decref(r);
    }
    atomic_store(&sw.stop, 1);
    pthread_join(th, NULL);
    skd_workspace_close(ws);
    printf("# %d iterations, %ld swaps, reads ok=%d refused=%d\n", n, sw.swaps, ok, refused);
    CHECK_EQ_INT(escapes, 0);
    CHECK(ok + refused == n);
    fx_snapshot(out, NULL, after);
    CHECK_STR(after, before);
    CHECK_EQ_INT(fx_get(target, p, sizeof(p)), 7);
    CHECK_STR(p, "OUTSIDE");
    fx_close(&f);
    fx_rm_rf(out);
}

TEST(quota_many_small_appends)
{
    fx f;
    CHECK_EQ_INT(fx_open(&f, 1000, 0), 0);
    char chunk[65], in[160];
    memset(chunk, 'q', 64);
    chunk[64] = '\0';
    snprintf(in, sizeof(in), "{\"path\":\"log\",\"content\":\"%s\",\"mode\":\"append\"}", chunk);
    int ok = 0, over = 0;
    for (int i = 0; i < 40; i++) {
        const char *code = fx_code(fx_callj(&f, "k", "file_write", in));
        if (!*code)
            ok++;
        else if (strcmp(code, "quota_exceeded") == 0)
            over++;
    }
    CHECK_EQ_INT(ok, 1000 / 64);
    CHECK_EQ_INT(over, 40 - 1000 / 64);
    char p[PATH_MAX];
    struct stat st;
    CHECK(fx_ws(&f, "k", "log", p, sizeof(p)) != NULL);
    CHECK_EQ_INT(stat(p, &st), 0);
    CHECK_EQ_INT(st.st_size, (1000 / 64) * 64);
    /* other files count too: the quota is per workspace */
    CHECK_STR(
        fx_code(fx_callj(
            &f, "k", "file_write",
            "{\"path\":\"other\",\"content\":\"01234567890123456789012345678901234567890\"}")),
        "quota_exceeded");
    /* freeing space makes room again */
    CHECK_STR(fx_code(fx_callj(&f, "k", "file_delete", "{\"path\":\"log\"}")), "");
    CHECK_STR(fx_code(fx_callj(&f, "k", "file_write", in)), "");
    fx_close(&f);
}

struct appender {
    fx *f;
    int ok;
};

static void *append_loop(void *arg)
{
    struct appender *a = arg;
    char in[160];
    snprintf(in, sizeof(in),
             "{\"path\":\"shared\",\"content\":\"0123456789012345678901234567890\","
             "\"mode\":\"append\"}");
    for (int i = 0; i < 60; i++) {
        const char *code = fx_code(fx_callj(a->f, "k", "file_write", in));
        if (!*code)
            a->ok++;
    }
    return NULL;
}

TEST(quota_concurrent_appends)
{
    fx f;
    CHECK_EQ_INT(fx_open(&f, 2000, 0), 0);
    struct appender a1 = {.f = &f}, a2 = {.f = &f};
    pthread_t t1, t2;
    CHECK_EQ_INT(pthread_create(&t1, NULL, append_loop, &a1), 0);
    CHECK_EQ_INT(pthread_create(&t2, NULL, append_loop, &a2), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    char p[PATH_MAX];
    struct stat st;
    CHECK(fx_ws(&f, "k", "shared", p, sizeof(p)) != NULL);
    CHECK_EQ_INT(stat(p, &st), 0);
    CHECK(st.st_size <= 2000);
    CHECK_EQ_INT(a1.ok + a2.ok, 2000 / 31);
    CHECK_EQ_INT(st.st_size, (2000 / 31) * 31);
    fx_close(&f);
}

TEST(symlink_swap_race_userspace_resolver)
{
    skd__ws_force_userspace(1);
    symlink_swap_race(tap_case);
    skd__ws_force_userspace(0);
}

int main(void)
{
    TAP_BEGIN("test_workspace_race");
    RUN(symlink_swap_race);
    RUN(symlink_swap_race_userspace_resolver);
    RUN(quota_many_small_appends);
    RUN(quota_concurrent_appends);
    return TAP_END();
}
