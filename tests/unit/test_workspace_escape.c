/* The path-escape battery of issue 2. Every case calls a file skill through
 * skd_engine_execute with a hostile path and asserts (1) refusal, (2) that
 * no secret from outside the caller's workspace appears in the result, and
 * (3) that nothing outside was written: a directory outside DATA_DIR,
 * another key's workspace and /etc/passwd are snapshotted before and after.
 *
 * Covered: ".." in every position, absolute paths, empty and root paths,
 * NUL bytes (JSON \u0000 built with json_stringn), very long paths and
 * names, symlinks to /etc/passwd, to an outside file and to another key's
 * workspace (relative and absolute), symlink chains, directory symlinks in
 * the middle of a path, magic links through /proc, hard links to an
 * outside file (refused: a file with several links may have a name outside
 * the workspace), FIFOs (no hang: alarm() guards every call), sockets and
 * device nodes. The race with a second thread and the quota cases are in
 * test_workspace_race.c. */
#include "tap.h"
#include "workspace/resolve.h"
#include "ws_fixture.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

static fx F;
static char OUT[64];  /* a directory outside DATA_DIR */
static char A[512];   /* alice's workspace (host path) */
static char B[512];   /* bob's workspace */
static char BHEX[65]; /* bob's workspace name */
static char snap_out[65], snap_bob[65];
static struct stat passwd_st;

/* Expand @O (outside dir), @B (bob's workspace) and @H (bob's hex). */
static void expand(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < cap; p++) {
        const char *sub = NULL;
        if (p[0] == '@' && p[1] == 'O')
            sub = OUT;
        else if (p[0] == '@' && p[1] == 'B')
            sub = B;
        else if (p[0] == '@' && p[1] == 'H')
            sub = BHEX;
        if (sub) {
            size_t k = strlen(sub);
            if (o + k + 1 >= cap)
                break;
            memcpy(out + o, sub, k);
            o += k;
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static void in_ws(const char *rel, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", A, rel);
}

static int mk_link(const char *target, const char *rel)
{
    char t[PATH_MAX], p[PATH_MAX];
    expand(target, t, sizeof(t));
    in_ws(rel, p, sizeof(p));
    return symlink(t, p);
}

static int setup(void)
{
    char p[PATH_MAX], q[PATH_MAX];
    int rc = 0;
    snprintf(OUT, sizeof(OUT), "/tmp/skilld-out-XXXXXX");
    if (!mkdtemp(OUT) || fx_open(&F, 0, 0) != 0)
        return -1;
    if (!fx_ws(&F, "alice", NULL, A, sizeof(A)) || !fx_ws(&F, "bob", NULL, B, sizeof(B)))
        return -1;
    snprintf(BHEX, sizeof(BHEX), "%s", strrchr(B, '/') + 1);
    snprintf(p, sizeof(p), "%s/secret.txt", OUT);
    rc |= fx_put(p, "OUTSIDE-SECRET");
    snprintf(p, sizeof(p), "%s/hard.txt", OUT);
    rc |= fx_put(p, "OUTSIDE-HARD");
    snprintf(p, sizeof(p), "%s/secret.txt", B);
    rc |= fx_put(p, "BOB-SECRET");
    in_ws("ok.txt", p, sizeof(p));
    rc |= fx_put(p, "alice's own");
    in_ws("a", p, sizeof(p));
    rc |= mkdir(p, 0700);
    rc |= mk_link("/etc/passwd", "lpasswd");
    rc |= mk_link("@O/secret.txt", "lout");
    rc |= mk_link("../@H/secret.txt", "lbob_rel");
    rc |= mk_link("@B/secret.txt", "lbob_abs");
    rc |= mk_link("../@H", "dbob");
    rc |= mk_link("@B", "dbob_abs");
    rc |= mk_link("/etc", "detc");
    rc |= mk_link("/", "droot");
    rc |= mk_link("..", "dup");
    rc |= mk_link("@O", "dout");
    rc |= mk_link("chain2", "chain1");
    rc |= mk_link("chain3", "chain2");
    rc |= mk_link("/etc/passwd", "chain3");
    rc |= mk_link("dchain2", "dchain1");
    rc |= mk_link("@O", "dchain2");
    rc |= mk_link("../../..", "a/evil");
    rc |= mk_link("/proc/self/root/etc/passwd", "lproc");
    rc |= mk_link("../../../../../../../../../../proc/self/root/etc/passwd", "lproc_rel");
    rc |= mk_link("/proc/self/cwd", "dproc");
    snprintf(q, sizeof(q), "%s/hard.txt", OUT);
    in_ws("hl", p, sizeof(p));
    rc |= link(q, p);
    in_ws("fifo", p, sizeof(p));
    rc |= mkfifo(p, 0600);
    in_ws("zero", p, sizeof(p));
    rc |= mknod(p, S_IFCHR | 0600, makedev(1, 5));
    in_ws("null", p, sizeof(p));
    rc |= mknod(p, S_IFCHR | 0600, makedev(1, 3));
    in_ws("blk", p, sizeof(p));
    rc |= mknod(p, S_IFBLK | 0600, makedev(7, 0));
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    in_ws("sock", p, sizeof(p));
    if (strlen(p) >= sizeof(sa.sun_path))
        return -1;
    memcpy(sa.sun_path, p, strlen(p) + 1);
    rc |= s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 1) != 0;
    /* the socket stays open and listening for the whole run */
    fx_snapshot(OUT, NULL, snap_out);
    fx_snapshot(B, NULL, snap_bob);
    rc |= stat("/etc/passwd", &passwd_st);
    return rc ? -1 : 0;
}

/* Nothing outside alice's workspace changed. */
static int outside_intact(void)
{
    char now[65];
    struct stat st;
    fx_snapshot(OUT, NULL, now);
    if (strcmp(now, snap_out) != 0)
        return 0;
    fx_snapshot(B, NULL, now);
    if (strcmp(now, snap_bob) != 0)
        return 0;
    if (stat("/etc/passwd", &st) != 0)
        return 0;
    return st.st_ino == passwd_st.st_ino && st.st_size == passwd_st.st_size &&
           st.st_mtim.tv_sec == passwd_st.st_mtim.tv_sec &&
           st.st_mtim.tv_nsec == passwd_st.st_mtim.tv_nsec;
}

/* No secret from outside appears anywhere in the result. */
static int leaks(const json_t *r)
{
    char *dump = json_dumps(r, 0);
    int bad = !dump || strstr(dump, "OUTSIDE-") || strstr(dump, "BOB-SECRET") ||
              strstr(dump, "root:x:0:0") || strstr(dump, "\"content\"");
    free(dump);
    return bad;
}

struct esc {
    const char *name;
    const char *skill;
    const char *path; /* with @O/@B/@H; NULL: use raw/rawlen */
    const char *raw;  /* path bytes that may hold NUL */
    size_t rawlen;
    const char *extra; /* more input members as JSON text, or NULL */
};

#define W "{\"content\":\"PWNED\"}"
#define WM "{\"content\":\"PWNED\",\"mkdirs\":true}"
#define AP "{\"content\":\"PWNED\",\"mode\":\"append\"}"
#define CR "{\"content\":\"PWNED\",\"mode\":\"create\"}"
#define R "file_read"
#define WR "file_write"
#define LS "file_list"
#define RM "file_delete"

static const struct esc cases[] = {
    /* ".." in every position */
    {"dotdot_alone_read", R, "..", NULL, 0, NULL},
    {"dotdot_first_read", R, "../x", NULL, 0, NULL},
    {"dotdot_etc_passwd_read", R, "../../../../../../etc/passwd", NULL, 0, NULL},
    {"dotdot_middle_read", R, "a/../../@H/secret.txt", NULL, 0, NULL},
    {"dotdot_after_dot_read", R, "./../@H/secret.txt", NULL, 0, NULL},
    {"dotdot_last_read", R, "a/..", NULL, 0, NULL},
    {"dotdot_alone_write", WR, "..", NULL, 0, W},
    {"dotdot_first_write", WR, "../escape.txt", NULL, 0, W},
    {"dotdot_middle_write_mkdirs", WR, "a/../../escape/x.txt", NULL, 0, WM},
    {"dotdot_inside_still_refused", WR, "a/../y.txt", NULL, 0, W},
    {"dotdot_other_key_append", WR, "../@H/secret.txt", NULL, 0, AP},
    {"dotdot_other_key_create", WR, "../@H/new.txt", NULL, 0, CR},
    {"dotdot_list", LS, "..", NULL, 0, NULL},
    {"dotdot_list_deep", LS, "x/y/../../..", NULL, 0, NULL},
    {"dotdot_delete_other_key", RM, "../@H/secret.txt", NULL, 0, NULL},
    {"dotdot_delete_trailing", RM, "a/..", NULL, 0, NULL},
    {"dotdot_slashes", RM, "..//..//", NULL, 0, NULL},
    /* absolute */
    {"abs_etc_passwd_read", R, "/etc/passwd", NULL, 0, NULL},
    {"abs_outside_read", R, "@O/secret.txt", NULL, 0, NULL},
    {"abs_double_slash_read", R, "//etc/passwd", NULL, 0, NULL},
    {"abs_outside_write", WR, "@O/new.txt", NULL, 0, W},
    {"abs_other_key_append", WR, "@B/secret.txt", NULL, 0, AP},
    {"abs_list_root", LS, "/", NULL, 0, NULL},
    {"abs_delete_outside", RM, "@O/secret.txt", NULL, 0, NULL},
    /* empty and the root itself */
    {"empty_read", R, "", NULL, 0, NULL},
    {"empty_write", WR, "", NULL, 0, W},
    {"dot_write", WR, ".", NULL, 0, W},
    {"dot_slash_append", WR, "./", NULL, 0, AP},
    {"empty_delete", RM, "", NULL, 0, NULL},
    {"dot_delete", RM, "./.", NULL, 0, NULL},
    /* NUL bytes (JSON \u0000) */
    {"nul_then_dotdot_read", R, NULL, "ok.txt\0../../@O", 15, NULL},
    {"nul_only_write", WR, NULL, "\0", 1, W},
    {"nul_trailing_write", WR, NULL, "ok.txt\0", 7, W},
    {"nul_list", LS, NULL, "\0..", 3, NULL},
    {"nul_delete_keeps_file", RM, NULL, "ok.txt\0x", 8, NULL},
    /* very long paths and names */
    {"long_path_read", R, NULL, NULL, 5000, NULL},
    {"long_path_write", WR, NULL, NULL, SKD_WS_PATH_MAX + 1, W},
    {"long_name_write", WR, NULL, NULL, 300, W},
    {"long_dotdot_chain_read", R, NULL, NULL, 1, NULL},
    /* control characters */
    {"newline_in_name_write", WR, "a\nb", NULL, 0, W},
    /* symlinks to /etc/passwd, outside, another key */
    {"symlink_passwd_read", R, "lpasswd", NULL, 0, NULL},
    {"symlink_outside_read", R, "lout", NULL, 0, NULL},
    {"symlink_outside_append", WR, "lout", NULL, 0, AP},
    {"symlink_outside_overwrite", WR, "lout", NULL, 0, W},
    {"symlink_outside_create", WR, "lout", NULL, 0, CR},
    {"symlink_other_key_rel_read", R, "lbob_rel", NULL, 0, NULL},
    {"symlink_other_key_abs_read", R, "lbob_abs", NULL, 0, NULL},
    {"symlink_other_key_append", WR, "lbob_rel", NULL, 0, AP},
    /* directory symlinks in the middle of a path */
    {"dirlink_other_key_read", R, "dbob/secret.txt", NULL, 0, NULL},
    {"dirlink_other_key_write", WR, "dbob/new.txt", NULL, 0, W},
    {"dirlink_other_key_abs_mkdirs", WR, "dbob_abs/sub/new.txt", NULL, 0, WM},
    {"dirlink_other_key_delete", RM, "dbob/secret.txt", NULL, 0, NULL},
    {"dirlink_etc_read", R, "detc/passwd", NULL, 0, NULL},
    {"dirlink_root_list", LS, "droot", NULL, 0, NULL},
    {"dirlink_root_list_slash", LS, "droot/etc", NULL, 0, NULL},
    {"dirlink_up_read", R, "dup/@H/secret.txt", NULL, 0, NULL},
    {"dirlink_outside_list", LS, "dout", NULL, 0, NULL},
    {"dirlink_outside_write", WR, "dout/new.txt", NULL, 0, W},
    {"dirlink_mid_path_read", R, "a/evil/workspaces/@H/secret.txt", NULL, 0, NULL},
    {"dirlink_mid_path_write", WR, "a/evil/workspaces/@H/pwn.txt", NULL, 0, W},
    {"dirlink_mid_path_list", LS, "a/evil", NULL, 0, NULL},
    /* chains */
    {"chain_to_passwd_read", R, "chain1", NULL, 0, NULL},
    {"dir_chain_outside_read", R, "dchain1/secret.txt", NULL, 0, NULL},
    {"dir_chain_outside_write", WR, "dchain1/x.txt", NULL, 0, W},
    /* magic links */
    {"magic_proc_root_read", R, "lproc", NULL, 0, NULL},
    {"magic_proc_relative_read", R, "lproc_rel", NULL, 0, NULL},
    {"magic_proc_cwd_list", LS, "dproc", NULL, 0, NULL},
    /* hard links to an outside file */
    {"hardlink_read", R, "hl", NULL, 0, NULL},
    {"hardlink_append", WR, "hl", NULL, 0, AP},
    {"hardlink_overwrite", WR, "hl", NULL, 0, W},
    /* special files: refused without blocking */
    {"fifo_read", R, "fifo", NULL, 0, NULL},
    {"fifo_append", WR, "fifo", NULL, 0, AP},
    {"fifo_overwrite", WR, "fifo", NULL, 0, W},
    {"fifo_list", LS, "fifo", NULL, 0, NULL},
    {"socket_read", R, "sock", NULL, 0, NULL},
    {"socket_append", WR, "sock", NULL, 0, AP},
    {"chardev_zero_read", R, "zero", NULL, 0, NULL},
    {"chardev_null_append", WR, "null", NULL, 0, AP},
    {"blockdev_read", R, "blk", NULL, 0, NULL},
};

/* Build the hostile path of case c into a new JSON string. */
static json_t *case_path(const struct esc *c)
{
    static char buf[8192];
    if (c->path) {
        expand(c->path, buf, sizeof(buf));
        return json_string(buf);
    }
    if (c->raw)
        return json_stringn(c->raw, c->rawlen);
    if (strcmp(c->name, "long_dotdot_chain_read") == 0) {
        size_t o = 0;
        for (int i = 0; i < 400; i++)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "../");
        snprintf(buf + o, sizeof(buf) - o, "etc/passwd");
        return json_string(buf);
    }
    if (strcmp(c->name, "long_path_read") == 0) {
        for (size_t i = 0; i < c->rawlen; i++)
            buf[i] = (i % 2) ? '/' : 'a';
        return json_stringn(buf, c->rawlen);
    }
    memset(buf, 'n', c->rawlen);
    return json_stringn(buf, c->rawlen);
}

static void run_case(const struct esc *c, const char *tap_case)
{
    json_error_t je;
    json_t *in = c->extra ? json_loads(c->extra, 0, &je) : json_object();
    json_object_set_new(in, "path", case_path(c));
    alarm(120); /* a FIFO that blocked would end the program here */
    json_t *r = fx_call(&F, "alice", c->skill, in);
    alarm(0);
    if (getenv("ESC_DEBUG") || skd_result_success(r) || leaks(r)) {
        char *d = json_dumps(r, JSON_COMPACT);
        printf("# %s: %s\n", c->name, d ? d : "(null)");
        free(d);
    }
    CHECK(r != NULL && !skd_result_success(r));
    CHECK(skd_result_code(r) != NULL);
    CHECK(!leaks(r));
    CHECK(outside_intact());
    json_decref(r);
}

TEST(escape_battery)
{
    size_t n = sizeof(cases) / sizeof(cases[0]);
    CHECK(n >= 40);
    for (size_t i = 0; i < n; i++) {
        int before = tap_case_failed;
        tap_case_failed = 0;
        run_case(&cases[i], cases[i].name);
        if (tap_case_failed)
            tap_failed_total++;
        else
            printf("PASS %s: escape %s%s\n", tap_prog, cases[i].name,
                   strcmp(tap_case, "escape_battery") ? " (user space)" : "");
        tap_case_failed = before;
    }
}

/* The same battery through the user-space resolver used where openat2 is
 * missing (under valgrind 3.19 it is the only one that runs). */
TEST(escape_battery_userspace_resolver)
{
    skd__ws_force_userspace(1);
    escape_battery(tap_case);
    skd__ws_force_userspace(0);
}

TEST(refusals_left_alice_intact)
{
    char p[PATH_MAX], buf[64];
    in_ws("ok.txt", p, sizeof(p));
    CHECK_EQ_INT(fx_get(p, buf, sizeof(buf)), 11);
    CHECK_STR(buf, "alice's own");
    struct stat st;
    in_ws("lout", p, sizeof(p));
    CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode));
    in_ws("hl", p, sizeof(p));
    CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 2);
}

TEST(list_reports_links_without_following)
{
    json_t *r = fx_callj(&F, "alice", "file_list", "{\"recursive\":true}");
    CHECK(skd_result_success(r));
    CHECK(!leaks(r));
    json_t *e;
    size_t i;
    int links = 0;
    json_array_foreach (json_object_get(r, "entries"), i, e) {
        const char *p = skd_json_str(e, "path", "");
        CHECK(strstr(p, "secret.txt") == NULL && strstr(p, "/passwd") == NULL);
        static const char *const links_out[] = {"dbob/", "dbob_abs/", "droot/",   "detc/", "dout/",
                                                "dup/",  "a/evil/",   "dchain1/", "dproc/"};
        for (size_t k = 0; k < sizeof(links_out) / sizeof(*links_out); k++)
            CHECK(strncmp(p, links_out[k], strlen(links_out[k])) != 0);
        if (strcmp(skd_json_str(e, "type", ""), "symlink") == 0)
            links++;
    }
    CHECK(links >= 15);
    json_decref(r);
    CHECK(outside_intact());
}

TEST(deleting_links_removes_only_the_link)
{
    char p[PATH_MAX];
    struct stat st;
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_delete", "{\"path\":\"lout\"}")), "");
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_delete", "{\"path\":\"dbob\"}")), "");
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_delete", "{\"path\":\"hl\"}")), "");
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_delete", "{\"path\":\"fifo\"}")), "");
    in_ws("lout", p, sizeof(p));
    CHECK(lstat(p, &st) != 0);
    snprintf(p, sizeof(p), "%s/secret.txt", OUT);
    CHECK(stat(p, &st) == 0 && st.st_size == 14);
    snprintf(p, sizeof(p), "%s/hard.txt", OUT);
    CHECK(stat(p, &st) == 0 && st.st_nlink == 1);
    snprintf(p, sizeof(p), "%s/secret.txt", B);
    CHECK(stat(p, &st) == 0);
}

TEST(links_that_stay_inside_are_followed_mid_path)
{
    char p[PATH_MAX], buf[32];
    CHECK_EQ_INT(mk_link("a", "inlink"), 0);
    CHECK_EQ_INT(mk_link("../a", "a/self"), 0);
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_write",
                               "{\"path\":\"inlink/self/w.txt\",\"content\":\"via\"}")),
              "");
    in_ws("a/w.txt", p, sizeof(p));
    CHECK_EQ_INT(fx_get(p, buf, sizeof(buf)), 3);
    json_t *r = fx_callj(&F, "alice", "file_read", "{\"path\":\"inlink/w.txt\"}");
    CHECK_STR(skd_json_str(r, "content", NULL), "via");
    json_decref(r);
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_write",
                               "{\"path\":\"inlink/n/m.txt\",\"content\":\"x\","
                               "\"mkdirs\":true}")),
              "");
    in_ws("a/n/m.txt", p, sizeof(p));
    CHECK_EQ_INT(fx_get(p, buf, sizeof(buf)), 1);
    /* the last component is never followed, even inside */
    CHECK_STR(fx_code(fx_callj(&F, "alice", "file_read", "{\"path\":\"inlink\"}")), "forbidden");
    CHECK(outside_intact());
}

TEST(links_that_stay_inside_are_followed_mid_path_userspace)
{
    char p[PATH_MAX];
    in_ws("inlink", p, sizeof(p));
    unlink(p);
    in_ws("a/self", p, sizeof(p));
    unlink(p);
    links_that_stay_inside_are_followed_mid_path(tap_case);
}

int main(void)
{
    TAP_BEGIN("test_workspace_escape");
    signal(SIGPIPE, SIG_IGN);
    if (setup() != 0) {
        printf("FAIL test_workspace_escape: setup: %s\n", strerror(errno));
        return 1;
    }
    RUN(escape_battery);
    RUN(escape_battery_userspace_resolver);
    RUN(refusals_left_alice_intact);
    RUN(list_reports_links_without_following);
    RUN(deleting_links_removes_only_the_link);
    RUN(links_that_stay_inside_are_followed_mid_path);
    skd__ws_force_userspace(1);
    RUN(links_that_stay_inside_are_followed_mid_path_userspace);
    skd__ws_force_userspace(0);
    fx_close(&F);
    fx_rm_rf(OUT);
    return TAP_END();
}
