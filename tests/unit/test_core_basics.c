/* Unit tests for src/core: error table, capped buffers, JSON helpers,
 * configuration precedence, versions and names, cancellation tokens. */
#include "skilld/skilld.h"
#include "tap.h"

#include <stdlib.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

TEST(error_table_round_trips)
{
    CHECK_STR(skd_errcode(SKD_EINVAL), "invalid_input");
    CHECK_STR(skd_errcode(SKD_EQUOTA), "quota_exceeded");
    CHECK_STR(skd_errcode(SKD_EBLOCKED), "blocked_address");
    CHECK_STR(skd_errcode(12345), "internal_error");
    CHECK_EQ_INT(skd_errcode_parse("sandbox_unavailable"), SKD_ESANDBOX);
    CHECK_EQ_INT(skd_errcode_parse("nope"), SKD_EINTERNAL);
    CHECK(SKD_EINVAL < 0 && SKD_EUNSUPPORTED_MEDIA < 0);
    skd_err e = {0};
    CHECK_EQ_INT(skd_err_set(&e, SKD_ENOENT, "no %s", "file"), SKD_ENOENT);
    CHECK_STR(skd_err_msg(&e), "no file");
    skd_err_clear(&e);
    CHECK_EQ_INT(e.code, 0);
}

TEST(buffer_is_capped)
{
    skd_buf b;
    skd_buf_init(&b, 10);
    CHECK_EQ_INT(skd_buf_puts(&b, "hello"), 0);
    CHECK_EQ_INT(skd_buf_puts(&b, "world"), 0);
    CHECK_EQ_INT(skd_buf_puts(&b, "!"), SKD_ETOOBIG);
    CHECK_EQ_INT(b.len, 10);
    CHECK_STR(b.data, "helloworld");
    size_t n;
    char *s = skd_buf_steal(&b, &n);
    CHECK_EQ_INT(n, 10);
    CHECK_STR(s, "helloworld");
    free(s);
    CHECK_EQ_INT(skd_buf_printf(&b, "%d-%s", 42, "x"), 0);
    CHECK_STR(b.data, "42-x");
    skd_buf_free(&b);
    skd_buf_free(NULL);
}

TEST(json_parse_is_strict)
{
    skd_err e = {0};
    json_t *v = skd_json_parse("{\"a\":1}", 7, &e);
    CHECK(v && skd_json_int(v, "a", 0) == 1);
    json_decref(v);
    CHECK(!skd_json_parse("{\"a\":1,\"a\":2}", 13, &e));
    CHECK_EQ_INT(e.code, SKD_EINVAL);
    CHECK(!skd_json_parse("{\"a\":\"\xff\"}", 9, &e));
    CHECK(!skd_json_parse("{", 1, &e));
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    CHECK(!skd_json_parse(deep, 400, &e));
    CHECK(strstr(e.msg, "deeper") != NULL);
    json_t *r = skd_result_error(SKD_ETOOBIG, "file is %d bytes", 5);
    CHECK(!skd_result_success(r));
    CHECK_STR(skd_result_code(r), "too_large");
    json_decref(r);
    r = skd_result_ok();
    CHECK(skd_result_success(r));
    json_decref(r);
}

TEST(config_precedence_file_env_flag)
{
    char path[] = "/tmp/skilld-cfg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text = "# comment\nSKILLS_MAX_FILE_BYTES=100\nSKILLS_SANDBOX_TIMEOUT_MS=2000\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    skd_config *c = skd_config_new();
    skd_err e = {0};
    CHECK_EQ_INT(skd_config_int(c, "SKILLS_MAX_FILE_BYTES"), 1048576);
    CHECK_EQ_INT(skd_config_load_file(c, path, &e), 0);
    CHECK_EQ_INT(skd_config_int(c, "SKILLS_MAX_FILE_BYTES"), 100);
    setenv("SKILLS_MAX_FILE_BYTES", "200", 1);
    CHECK_EQ_INT(skd_config_load_env(c, &e), 0);
    unsetenv("SKILLS_MAX_FILE_BYTES");
    CHECK_EQ_INT(skd_config_int(c, "SKILLS_MAX_FILE_BYTES"), 200);
    CHECK_EQ_INT(skd_config_int(c, "SKILLS_SANDBOX_TIMEOUT_MS"), 2000);
    CHECK_EQ_INT(skd_config_set(c, "SKILLS_MAX_FILE_BYTES", "300", &e), 0);
    CHECK_EQ_INT(skd_config_int(c, "SKILLS_MAX_FILE_BYTES"), 300);
    CHECK_EQ_INT(skd_config_set(c, "SKILLS_MAX_FILE_BYTES", "12x", &e), SKD_ECONFIG);
    CHECK_EQ_INT(skd_config_set(c, "SKILLS_SANDBOX_TIMEOUT_MS", "3600001", &e), SKD_ECONFIG);
    CHECK_EQ_INT(skd_config_set(c, "NO_SUCH_SETTING", "1", &e), SKD_ECONFIG);
    CHECK_EQ_INT(skd_config_set(c, "SKILLS_SANDBOX_NETWORK_ENABLED", "yes", &e), 0);
    CHECK_EQ_INT(skd_config_bool(c, "SKILLS_SANDBOX_NETWORK_ENABLED"), 1);
    skd_config_free(c);
    /* a bad line names its line number */
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, "DATA_DIR=/x\nbogus line\n", 23) == 23);
    close(fd);
    c = skd_config_new();
    CHECK_EQ_INT(skd_config_load_file(c, path, &e), SKD_ECONFIG);
    CHECK(strstr(e.msg, ":2:") != NULL);
    skd_config_free(c);
    unlink(path);
}

TEST(versions_and_names)
{
    CHECK(skd_version_valid("1.0.0"));
    CHECK(skd_version_valid("10.20.300"));
    CHECK(!skd_version_valid("1.0"));
    CHECK(!skd_version_valid("01.0.0"));
    CHECK(!skd_version_valid("1.0.0-beta"));
    CHECK(!skd_version_valid("1..0"));
    CHECK(!skd_version_valid(""));
    CHECK(skd_version_cmp("1.10.0", "1.9.9") > 0);
    CHECK(skd_version_cmp("2.0.0", "2.0.0") == 0);
    CHECK(skd_skill_name_valid("file_read"));
    CHECK(skd_skill_name_valid("a-b-1"));
    CHECK(!skd_skill_name_valid("File"));
    CHECK(!skd_skill_name_valid("1abc"));
    CHECK(!skd_skill_name_valid("a b"));
    CHECK(!skd_skill_name_valid(""));
}

static int hook_calls;
static void hook(void *arg)
{
    (void)arg;
    hook_calls++;
}

TEST(cancel_runs_hook_once)
{
    skd_cancel *c = skd_cancel_new();
    hook_calls = 0;
    CHECK_EQ_INT(skd_cancel_set_hook(c, hook, NULL), 0);
    CHECK(!skd_cancel_is_set(c));
    skd_cancel_fire(c);
    skd_cancel_fire(c);
    CHECK(skd_cancel_is_set(c));
    CHECK_EQ_INT(hook_calls, 1);
    /* a hook installed after firing runs at once */
    CHECK_EQ_INT(skd_cancel_set_hook(c, hook, NULL), 1);
    CHECK_EQ_INT(hook_calls, 2);
    skd_cancel_free(c);
    CHECK(!skd_cancel_is_set(NULL));
}

TEST(utilities)
{
    char id[37], h[65];
    CHECK_EQ_INT(skd_uuid(id), 0);
    CHECK_EQ_INT(strlen(id), 36);
    CHECK(id[14] == '4');
    /* version 7: its first 48 bits are the time in ms, so later ones sort after */
    char a7[37], b7[37];
    int64_t before = skd_wall_ms();
    CHECK_EQ_INT(skd_uuid7(a7), 0);
    CHECK_EQ_INT(strlen(a7), 36);
    CHECK(a7[8] == '-' && a7[13] == '-' && a7[18] == '-' && a7[23] == '-');
    CHECK(a7[14] == '7' && strchr("89ab", a7[19]) != NULL);
    char ts[13];
    memcpy(ts, a7, 8);
    memcpy(ts + 8, a7 + 9, 4);
    ts[12] = '\0';
    long long t7 = strtoll(ts, NULL, 16);
    CHECK(t7 >= before && t7 <= skd_wall_ms());
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
    CHECK_EQ_INT(skd_uuid7(b7), 0);
    CHECK(strcmp(a7, b7) < 0);
    CHECK(strcmp(a7 + 14, b7 + 14) != 0); /* random after the time */
    skd_sha256_hex("alice", 5, h);
    CHECK_STR(h, "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90");
    skd_sha256_hex("", 0, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* more than getrandom's 256-byte single-call guarantee, twice: filled, and different */
    unsigned char r1[4096], r2[4096];
    memset(r1, 0, sizeof(r1));
    memset(r2, 0, sizeof(r2));
    CHECK_EQ_INT(skd_random(r1, sizeof(r1)), 0);
    CHECK_EQ_INT(skd_random(r2, sizeof(r2)), 0);
    size_t zeros = 0;
    for (size_t i = 0; i < sizeof(r1); i++)
        zeros += r1[i] == 0;
    CHECK(zeros < 64 && memcmp(r1, r2, sizeof(r1)) != 0);
    CHECK(memcmp(r1 + 3072, (unsigned char[1024]){0}, 1024) != 0);
    CHECK(skd_ct_equal("abcdef", "abcdef", 6));
    CHECK(!skd_ct_equal("abcdef", "abcdeg", 6));
    CHECK(skd_ct_equal("x", "y", 0));
    int64_t v;
    CHECK_EQ_INT(skd_parse_i64("42", 0, 100, &v), 0);
    CHECK_EQ_INT(v, 42);
    CHECK_EQ_INT(skd_parse_i64(" 42", 0, 100, &v), SKD_EINVAL);
    CHECK_EQ_INT(skd_parse_i64("101", 0, 100, &v), SKD_EINVAL);
    CHECK_EQ_INT(skd_parse_i64("", 0, 100, &v), SKD_EINVAL);
    CHECK(skd_utf8_valid("h\xc3\xa9llo", 6));
    CHECK(!skd_utf8_valid("\xc0\xaf", 2));
    CHECK(!skd_utf8_valid("\xed\xa0\x80", 3));
    CHECK(!skd_utf8_valid("\xe2\x82", 2));
}

/* A cut at a byte cap keeps whole characters only. */
TEST(utf8_cut_drops_partial_character)
{
    const char *euro = "ab\xe2\x82\xac"; /* "ab" + U+20AC (3 bytes) */
    CHECK_EQ_INT(skd_utf8_cut(euro, 5), 5);
    CHECK_EQ_INT(skd_utf8_cut(euro, 4), 2);
    CHECK_EQ_INT(skd_utf8_cut(euro, 3), 2);
    CHECK_EQ_INT(skd_utf8_cut(euro, 2), 2);
    const char *emoji = "\xf0\x9f\x98\x80"; /* U+1F600 (4 bytes) */
    CHECK_EQ_INT(skd_utf8_cut(emoji, 4), 4);
    CHECK_EQ_INT(skd_utf8_cut(emoji, 3), 0);
    CHECK_EQ_INT(skd_utf8_cut(emoji, 1), 0);
    CHECK_EQ_INT(skd_utf8_cut("\xc3\xa9", 2), 2);
    CHECK_EQ_INT(skd_utf8_cut("\xc3\xa9", 1), 0);
    CHECK_EQ_INT(skd_utf8_cut("\x80\x80", 2), 2); /* not UTF-8: cut where asked */
    CHECK_EQ_INT(skd_utf8_cut("a\xff", 2), 2);
    CHECK_EQ_INT(skd_utf8_cut("", 0), 0);
}

/* Error text that quotes client bytes or is cut at its cap still makes a
 * result object (jansson refuses invalid UTF-8). */
TEST(error_messages_are_valid_utf8)
{
    char s[] = "ok \xc3\xa9 bad \xff \xc3( cut \xe2\x82";
    skd_utf8_scrub(s);
    CHECK_STR(s, "ok \xc3\xa9 bad ? ?( cut ??");
    char big[600];
    for (size_t i = 0; i + 1 < sizeof(big); i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[sizeof(big) - 1] = '\0';
    skd_err err = {0};
    skd_err_set(&err, SKD_EINVAL, "x%s", big); /* cut at 512 inside a character */
    CHECK(skd_utf8_valid(skd_err_msg(&err), strlen(skd_err_msg(&err))));
    json_t *r = skd_result_from_err(&err);
    CHECK_STR(skd_result_code(r), "invalid_input");
    json_decref(r);
    r = skd_result_error(SKD_ENOENT, "%s \xff", big);
    CHECK_STR(skd_result_code(r), "not_found");
    json_decref(r);
}

/* JSON log lines stay whole JSON objects: a message of escapes longer than
 * 4 KiB, and one quoting bytes that are not UTF-8. */
TEST(json_log_lines_are_whole)
{
    int p[2];
    CHECK(pipe(p) == 0);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    int saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    skd_log_set_json(1);
    char quotes[2000];
    memset(quotes, '"', sizeof(quotes) - 1); /* each one escapes to two bytes */
    quotes[sizeof(quotes) - 1] = '\0';
    char ctl[700];
    memset(ctl, '\x01', sizeof(ctl) - 1); /* each one escapes to \u0001 */
    ctl[sizeof(ctl) - 1] = '\0';
    skd_error("q:%s", quotes);
    skd_error("c:%s", ctl);
    skd_error("bad byte \xff here");
    skd_log_set_json(0);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    static char out[65536];
    ssize_t n = read(p[0], out, sizeof(out) - 1);
    close(p[0]);
    CHECK(n > 0);
    out[n > 0 ? n : 0] = '\0';
    int lines = 0;
    for (char *line = out, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        json_error_t je;
        json_t *v = json_loadb(line, (size_t)(nl - line), 0, &je);
        const char *msg = skd_json_str(v, "msg", "");
        CHECK(v != NULL);
        if (lines == 0)
            CHECK(strncmp(msg, "q:\"\"", 4) == 0 && strlen(msg) == 2 + 1999);
        if (lines == 1)
            CHECK(strncmp(msg, "c:\x01", 3) == 0 && strlen(msg) == 2 + 699);
        if (lines == 2)
            CHECK_STR(msg, "bad byte ? here");
        json_decref(v);
        lines++;
    }
    CHECK_EQ_INT(lines, 3);
}

int main(void)
{
    TAP_BEGIN("test_core_basics");
    RUN(error_table_round_trips);
    RUN(buffer_is_capped);
    RUN(json_parse_is_strict);
    RUN(config_precedence_file_env_flag);
    RUN(versions_and_names);
    RUN(cancel_runs_hook_once);
    RUN(utilities);
    RUN(utf8_cut_drops_partial_character);
    RUN(error_messages_are_valid_utf8);
    RUN(json_log_lines_are_whole);
    return TAP_END();
}
