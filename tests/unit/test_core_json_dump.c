/* skd_json_dump_fast writes the same bytes as json_dumps(JSON_COMPACT |
 * JSON_ENCODE_ANY) (jansson's own writer): every ASCII
 * byte alone and in runs, multi-byte UTF-8, keys that need escapes,
 * nesting, empty containers, integers at the limits, reals (left to
 * jansson), and a string that is not UTF-8 (refused, as by jansson). */
#include "skilld/json.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same(const json_t *v)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = 0;
    char *got = skd_json_dump_fast(v, &n);
    int ok = (!want && !got) || (want && got && strlen(want) == n && strcmp(want, got) == 0);
    if (!ok)
        printf("# want %s\n# got  %s\n", want ? want : "(null)", got ? got : "(null)");
    free(want);
    free(got);
    return ok;
}

TEST(every_ascii_byte_as_jansson_writes_it)
{
    for (int c = 0; c < 128; c++) {
        char s[8] = {'a', (char)c, 'b', (char)c, (char)c, 0};
        json_t *v = json_stringn(s, 5);
        CHECK(v != NULL && same(v));
        json_decref(v);
    }
}

TEST(utf8_keys_nesting_numbers)
{
    static const char *const docs[] = {
        "{}",
        "[]",
        "{\"a\":[],\"b\":{},\"c\":[{}],\"d\":null,\"e\":true,\"f\":false}",
        "{\"z\":1,\"a\":2,\"m\":3}",
        "{\"k\\\"ey\\n\":\"v\\\\al\\u0001ue\",\"\\u00e9t\\u00e9\":"
        "\"\\u65e5\\u672c\\ud83d\\ude00\"}",
        "[-9223372036854775808,9223372036854775807,0,-1,42]",
        "[[[[[[\"deep\"]]]]]]",
        "\"just a string \\u2028 \\u2029 / </script>\"",
        "{\"success\":true,\"path\":\"a/b.txt\",\"content\":\"line1\\nline2\\t\\u0000end\","
        "\"encoding\":\"utf8\",\"size\":1024,\"truncated\":false,\"executionId\":\"x\"}",
        "[1.5,{\"r\":0.1},-2e300]",
        "3",
        "null",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_error_t e;
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        CHECK(v != NULL);
        if (v)
            CHECK(same(v));
        json_decref(v);
    }
    /* a long plain string (the file_read reply's content) */
    char *big = malloc(70000);
    CHECK(big != NULL);
    if (big) {
        for (int i = 0; i < 69999; i++)
            big[i] = (char)('a' + i % 26);
        big[69999] = 0;
        json_t *v = json_pack("{s:b, s:s}", "success", 1, "content", big);
        CHECK(same(v));
        json_decref(v);
        free(big);
    }
}

TEST(invalid_utf8_is_refused_as_by_jansson)
{
    json_t *v = json_stringn_nocheck("a\xff"
                                     "b",
                                     3);
    json_t *o = json_pack("{s:o}", "k", v);
    size_t n = 1;
    char *got = skd_json_dump_fast(o, &n);
    CHECK(got == NULL); /* json_dumps refuses it too */
    CHECK(same(o));
    free(got);
    json_decref(o);
    CHECK(skd_json_dump_fast(NULL, &n) == NULL);
    CHECK_EQ_INT(n, 0);
}

int main(void)
{
    TAP_BEGIN("core_json_dump");
    RUN(every_ascii_byte_as_jansson_writes_it);
    RUN(utf8_keys_nesting_numbers);
    RUN(invalid_utf8_is_refused_as_by_jansson);
    return TAP_END();
}
