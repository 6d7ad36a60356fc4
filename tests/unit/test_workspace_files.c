/* Unit tests for the four file skills through skd_engine_execute: result
 * shapes, encodings, offset/length and truncation, write modes, mkdirs,
 * listing, deletion, limits, quota, schema strictness and key isolation. */
#include "tap.h"
#include "ws_fixture.h"

static fx F;

#define CALL(key, skill, json) fx_callj(&F, key, skill, json)
#define CODE(key, skill, json) fx_code(CALL(key, skill, json))

TEST(write_then_read_round_trip)
{
    json_t *r = CALL("alice", "file_write",
                     "{\"path\":\"notes/a.txt\",\"content\":\"hi\",\"mkdirs\":true}");
    CHECK(skd_result_success(r));
    CHECK_STR(skd_json_str(r, "path", NULL), "notes/a.txt");
    CHECK_EQ_INT(skd_json_int(r, "bytes", -1), 2);
    json_decref(r);
    r = CALL("alice", "file_read", "{\"path\":\"notes/a.txt\"}");
    CHECK(skd_result_success(r));
    CHECK_STR(skd_json_str(r, "content", NULL), "hi");
    CHECK_STR(skd_json_str(r, "encoding", NULL), "utf8");
    CHECK_EQ_INT(skd_json_int(r, "size", -1), 2);
    CHECK(json_is_false(json_object_get(r, "truncated")));
    json_decref(r);
    char p[PATH_MAX], buf[16];
    CHECK(fx_ws(&F, "alice", "notes/a.txt", p, sizeof(p)) != NULL);
    CHECK_EQ_INT(fx_get(p, buf, sizeof(buf)), 2);
    CHECK_STR(buf, "hi");
    struct stat st;
    CHECK_EQ_INT(stat(p, &st), 0);
    CHECK_EQ_INT(st.st_mode & 0777, 0600);
    /* another key does not see it */
    CHECK_STR(CODE("bob", "file_read", "{\"path\":\"notes/a.txt\"}"), "not_found");
    /* without mkdirs a missing parent is not_found */
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"x/y/z.txt\",\"content\":\"1\"}"),
              "not_found");
}

TEST(utf8_and_base64_encodings)
{
    /* bytes that are not UTF-8, written as base64 */
    CHECK_STR(CODE("alice", "file_write",
                   "{\"path\":\"bin\",\"content\":\"/wAB/g==\",\"encoding\":\"base64\"}"),
              "");
    json_t *r = CALL("alice", "file_read", "{\"path\":\"bin\"}");
    CHECK_STR(skd_result_code(r), "invalid_input");
    CHECK(strstr(skd_json_str(json_object_get(r, "error"), "message", ""), "base64") != NULL);
    json_decref(r);
    r = CALL("alice", "file_read", "{\"path\":\"bin\",\"encoding\":\"base64\"}");
    CHECK_STR(skd_json_str(r, "content", NULL), "/wAB/g==");
    CHECK_EQ_INT(skd_json_int(r, "size", -1), 4);
    json_decref(r);
    CHECK_STR(CODE("alice", "file_write",
                   "{\"path\":\"bad\",\"content\":\"!!!!\",\"encoding\":\"base64\"}"),
              "invalid_input");
    /* text with a NUL (\u0000) and non-ASCII round-trips as utf8 */
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"t\",\"content\":\"a\\u0000b\\u00e9\"}"), "");
    r = CALL("alice", "file_read", "{\"path\":\"t\"}");
    json_t *c = json_object_get(r, "content");
    CHECK(json_string_length(c) == 5 && memcmp(json_string_value(c), "a\0b\xc3\xa9", 5) == 0);
    json_decref(r);
}

TEST(offset_length_truncation)
{
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"n\",\"content\":\"0123456789\"}"), "");
    json_t *r = CALL("alice", "file_read", "{\"path\":\"n\",\"offset\":3,\"length\":4}");
    CHECK_STR(skd_json_str(r, "content", NULL), "3456");
    CHECK_EQ_INT(skd_json_int(r, "size", -1), 10);
    CHECK(json_is_false(json_object_get(r, "truncated")));
    json_decref(r);
    r = CALL("alice", "file_read", "{\"path\":\"n\",\"offset\":8,\"length\":100}");
    CHECK_STR(skd_json_str(r, "content", NULL), "89");
    json_decref(r);
    r = CALL("alice", "file_read", "{\"path\":\"n\",\"offset\":50}");
    CHECK_STR(skd_json_str(r, "content", NULL), "");
    json_decref(r);
    CHECK_STR(CODE("alice", "file_read", "{\"path\":\"n\",\"offset\":-1}"), "invalid_input");
    CHECK_STR(CODE("alice", "file_read", "{\"path\":\"n\",\"length\":\"4\"}"), "invalid_input");
}

TEST(write_modes)
{
    CHECK_STR(
        CODE("alice", "file_write", "{\"path\":\"m\",\"content\":\"one\",\"mode\":\"create\"}"),
        "");
    CHECK_STR(
        CODE("alice", "file_write", "{\"path\":\"m\",\"content\":\"two\",\"mode\":\"create\"}"),
        "already_exists");
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"m\",\"content\":\"+\",\"mode\":\"append\"}"),
              "");
    json_t *r = CALL("alice", "file_read", "{\"path\":\"m\"}");
    CHECK_STR(skd_json_str(r, "content", NULL), "one+");
    json_decref(r);
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"m\",\"content\":\"new\"}"), "");
    r = CALL("alice", "file_read", "{\"path\":\"m\"}");
    CHECK_STR(skd_json_str(r, "content", NULL), "new");
    json_decref(r);
    CHECK_STR(
        CODE("alice", "file_write", "{\"path\":\"fresh\",\"content\":\"a\",\"mode\":\"append\"}"),
        "");
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"m\",\"content\":\"x\",\"mode\":\"bogus\"}"),
              "invalid_input");
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"notes\",\"content\":\"x\"}"),
              "is_directory");
    CHECK_STR(
        CODE("alice", "file_write", "{\"path\":\"notes\",\"content\":\"x\",\"mode\":\"append\"}"),
        "is_directory");
    CHECK_STR(CODE("alice", "file_read", "{\"path\":\"notes\"}"), "is_directory");
    /* no temporary files are left behind */
    r = CALL("alice", "file_list", "{}");
    json_t *e;
    size_t i;
    json_array_foreach (json_object_get(r, "entries"), i, e)
        CHECK(strncmp(skd_json_str(e, "path", ""), ".skd-tmp", 8) != 0);
    json_decref(r);
}

static int has_entry(json_t *r, const char *path, const char *type, long long size)
{
    json_t *e;
    size_t i;
    json_array_foreach (json_object_get(r, "entries"), i, e) {
        if (strcmp(skd_json_str(e, "path", ""), path) == 0)
            return strcmp(skd_json_str(e, "type", ""), type) == 0 &&
                   (size < 0 || skd_json_int(e, "size", -1) == size);
    }
    return 0;
}

TEST(list_flat_and_recursive)
{
    CHECK_STR(
        CODE("carol", "file_write", "{\"path\":\"d/e/f.txt\",\"content\":\"abc\",\"mkdirs\":true}"),
        "");
    CHECK_STR(CODE("carol", "file_write", "{\"path\":\"top.txt\",\"content\":\"12345\"}"), "");
    char p[PATH_MAX], q[PATH_MAX];
    fx_ws(&F, "carol", "link", p, sizeof(p));
    CHECK_EQ_INT(symlink("/etc", p), 0);
    fx_ws(&F, "carol", "fifo", q, sizeof(q));
    CHECK_EQ_INT(mkfifo(q, 0600), 0);
    json_t *r = CALL("carol", "file_list", "{}");
    CHECK(skd_result_success(r));
    CHECK_STR(skd_json_str(r, "path", NULL), ".");
    CHECK_EQ_INT(json_array_size(json_object_get(r, "entries")), 4);
    CHECK(has_entry(r, "d", "directory", 0));
    CHECK(has_entry(r, "top.txt", "file", 5));
    CHECK(has_entry(r, "link", "symlink", 0));
    CHECK(has_entry(r, "fifo", "other", 0));
    CHECK(!has_entry(r, "d/e", "directory", -1));
    json_decref(r);
    r = CALL("carol", "file_list", "{\"recursive\":true}");
    CHECK_EQ_INT(json_array_size(json_object_get(r, "entries")), 6);
    CHECK(has_entry(r, "d/e/f.txt", "file", 3));
    /* sorted by path */
    CHECK_STR(skd_json_str(json_array_get(json_object_get(r, "entries"), 0), "path", NULL), "d");
    json_decref(r);
    r = CALL("carol", "file_list", "{\"path\":\"./d/\",\"recursive\":true}");
    CHECK_EQ_INT(json_array_size(json_object_get(r, "entries")), 2);
    CHECK(has_entry(r, "d/e/f.txt", "file", 3));
    json_decref(r);
    CHECK_STR(CODE("carol", "file_list", "{\"path\":\"top.txt\"}"), "not_a_directory");
    CHECK_STR(CODE("carol", "file_list", "{\"path\":\"nope\"}"), "not_found");
    CHECK_STR(CODE("carol", "file_list", "{\"path\":\"link\"}"), "forbidden");
    CHECK_STR(CODE("carol", "file_list", "{\"path\":\"link/\"}"), "invalid_path");
}

TEST(delete_files_and_dirs)
{
    CHECK_STR(
        CODE("dave", "file_write", "{\"path\":\"a/b.txt\",\"content\":\"x\",\"mkdirs\":true}"), "");
    CHECK_STR(CODE("dave", "file_delete", "{\"path\":\"a\"}"), "not_empty");
    json_t *r = CALL("dave", "file_delete", "{\"path\":\"a/b.txt\"}");
    CHECK(skd_result_success(r));
    CHECK_STR(skd_json_str(r, "path", NULL), "a/b.txt");
    json_decref(r);
    CHECK_STR(CODE("dave", "file_read", "{\"path\":\"a/b.txt\"}"), "not_found");
    CHECK_STR(CODE("dave", "file_delete", "{\"path\":\"a/b.txt\"}"), "not_found");
    CHECK_STR(CODE("dave", "file_delete", "{\"path\":\"a/\"}"), "");
    CHECK_STR(CODE("dave", "file_list", "{\"path\":\"a\"}"), "not_found");
    CHECK_STR(CODE("dave", "file_delete", "{\"path\":\".\"}"), "forbidden");
    CHECK_STR(CODE("dave", "file_delete", "{\"path\":\"\"}"), "forbidden");
    CHECK_STR(CODE("dave", "file_delete", "{\"path\":\"./\"}"), "forbidden");
    CHECK_STR(CODE("dave", "file_delete", "{}"), "invalid_input");
    char p[PATH_MAX];
    struct stat st;
    CHECK(fx_ws(&F, "dave", NULL, p, sizeof(p)) != NULL);
    CHECK_EQ_INT(stat(p, &st), 0);
}

TEST(limits_and_quota)
{
    fx g;
    CHECK_EQ_INT(fx_open(&g, 100, 40), 0);
    char big[64], in[256];
    memset(big, 'x', 41);
    big[41] = '\0';
    snprintf(in, sizeof(in), "{\"path\":\"big\",\"content\":\"%s\"}", big);
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write", in)), "too_large");
    /* base64 of 41 bytes is also too large */
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write",
                               "{\"path\":\"b\",\"encoding\":\"base64\",\"content\":"
                               "\"eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHg=\"}")),
              "too_large");
    big[40] = '\0';
    snprintf(in, sizeof(in), "{\"path\":\"f1\",\"content\":\"%s\"}", big);
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write", in)), "");
    snprintf(in, sizeof(in), "{\"path\":\"f2\",\"content\":\"%s\"}", big);
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write", in)), "");
    snprintf(in, sizeof(in), "{\"path\":\"f3\",\"content\":\"%s\"}", big);
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write", in)), "quota_exceeded");
    snprintf(in, sizeof(in), "{\"path\":\"f3\",\"content\":\"%s\",\"mode\":\"create\"}", big);
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write", in)), "quota_exceeded");
    /* overwriting a file counts its old size out */
    snprintf(in, sizeof(in), "{\"path\":\"f2\",\"content\":\"%s\"}", big);
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_write", in)), "");
    /* a read longer than the limit is refused, a larger file is truncated */
    CHECK_STR(fx_code(fx_callj(&g, "k", "file_read", "{\"path\":\"f1\",\"length\":41}")),
              "too_large");
    char p[PATH_MAX];
    fx_ws(&g, "k", "huge", p, sizeof(p));
    fx_put(p, "0123456789012345678901234567890123456789ABCDEFGHIJ");
    json_t *r = fx_callj(&g, "k", "file_read", "{\"path\":\"huge\"}");
    CHECK(json_is_true(json_object_get(r, "truncated")));
    CHECK_EQ_INT(json_string_length(json_object_get(r, "content")), 40);
    CHECK_EQ_INT(skd_json_int(r, "size", -1), 50);
    json_decref(r);
    /* a cut at the limit does not split a UTF-8 character */
    fx_put(p, "012345678901234567890123456789012345678\xc3\xa9");
    r = fx_callj(&g, "k", "file_read", "{\"path\":\"huge\"}");
    CHECK(skd_result_success(r));
    CHECK_EQ_INT(json_string_length(json_object_get(r, "content")), 39);
    CHECK(json_is_true(json_object_get(r, "truncated")));
    json_decref(r);
    fx_close(&g);
}

TEST(schemas_refuse_unknown_members)
{
    CHECK_STR(CODE("alice", "file_read", "{\"path\":\"n\",\"extra\":1}"), "invalid_input");
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"n\",\"content\":\"x\",\"x\":1}"),
              "invalid_input");
    CHECK_STR(CODE("alice", "file_list", "{\"recursive\":\"yes\"}"), "invalid_input");
    CHECK_STR(CODE("alice", "file_delete", "{\"path\":7}"), "invalid_input");
    CHECK_STR(CODE("alice", "file_write", "{\"path\":\"n\"}"), "invalid_input");
    CHECK_STR(CODE("alice", "file_read", "{\"path\":\"n\",\"encoding\":\"latin1\"}"),
              "invalid_input");
}

int main(void)
{
    TAP_BEGIN("test_workspace_files");
    if (fx_open(&F, 0, 0) != 0) {
        printf("FAIL test_workspace_files: fixture\n");
        return 1;
    }
    RUN(write_then_read_round_trip);
    RUN(utf8_and_base64_encodings);
    RUN(offset_length_truncation);
    RUN(write_modes);
    RUN(list_flat_and_recursive);
    RUN(delete_files_and_dirs);
    RUN(limits_and_quota);
    RUN(schemas_refuse_unknown_members);
    fx_close(&F);
    return TAP_END();
}
