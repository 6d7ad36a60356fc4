/* Unit tests for the JSON-Schema subset (src/core/schema.c): every keyword
 * accepting and refusing, error messages naming the JSON path, and
 * skd_schema_check on malformed schemas. */
#include "skilld/skilld.h"
#include "tap.h"

/* Validate instance (JSON text) against schema (JSON text): 0 or the code;
 * the message goes to msg. */
static char msg[SKD_ERR_MSG_MAX];

static int v(const char *schema, const char *instance)
{
    json_error_t je;
    json_t *s = json_loads(schema, JSON_DECODE_ANY, &je);
    json_t *i = json_loads(instance, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    skd_err e = {0};
    int rc = (!s || !i) ? -1 : skd_schema_validate(s, i, &e);
    snprintf(msg, sizeof(msg), "%s", e.msg);
    json_decref(s);
    json_decref(i);
    return rc;
}

static int chk(const char *schema)
{
    json_error_t je;
    json_t *s = json_loads(schema, JSON_DECODE_ANY, &je);
    skd_err e = {0};
    int rc = s ? skd_schema_check(s, &e) : -1;
    snprintf(msg, sizeof(msg), "%s", e.msg);
    json_decref(s);
    return rc;
}

#define OK(s, i) CHECK_EQ_INT(v(s, i), 0)
#define NO(s, i) CHECK_EQ_INT(v(s, i), SKD_EINVAL)

TEST(type)
{
    OK("{\"type\":\"string\"}", "\"x\"");
    NO("{\"type\":\"string\"}", "1");
    CHECK(strstr(msg, "expected string, got integer") != NULL);
    OK("{\"type\":\"integer\"}", "3");
    OK("{\"type\":\"integer\"}", "3.0");
    NO("{\"type\":\"integer\"}", "3.5");
    OK("{\"type\":\"number\"}", "3");
    OK("{\"type\":\"number\"}", "3.5");
    OK("{\"type\":\"boolean\"}", "false");
    NO("{\"type\":\"boolean\"}", "0");
    OK("{\"type\":\"null\"}", "null");
    OK("{\"type\":\"object\"}", "{}");
    NO("{\"type\":\"object\"}", "[]");
    OK("{\"type\":\"array\"}", "[]");
    OK("{\"type\":[\"string\",\"null\"]}", "null");
    NO("{\"type\":[\"string\",\"null\"]}", "{}");
    OK("true", "1");
    NO("false", "1");
    OK("{}", "[1,{}]");
}

TEST(properties_required_additional)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
                    "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\"],"
                    "\"additionalProperties\":false}";
    OK(s, "{\"a\":\"x\"}");
    OK(s, "{\"a\":\"x\",\"b\":2}");
    NO(s, "{\"b\":2}");
    CHECK(strstr(msg, "missing required property \"a\"") != NULL);
    NO(s, "{\"a\":\"x\",\"c\":1}");
    CHECK(strstr(msg, "unknown property \"c\"") != NULL);
    NO(s, "{\"a\":1}");
    CHECK(strstr(msg, "input.a") != NULL);
    OK("{\"required\":[\"a\"]}", "{\"a\":null}");
    /* additionalProperties as a schema, and absent (anything goes) */
    const char *t = "{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"boolean\"}}";
    OK(t, "{\"a\":1,\"x\":true}");
    NO(t, "{\"a\":1,\"x\":1}");
    CHECK(strstr(msg, "input.x") != NULL);
    OK("{\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"z\":1}");
    /* properties only apply to objects */
    OK("{\"properties\":{\"a\":{\"type\":\"string\"}}}", "[1]");
}

TEST(enum_and_const)
{
    OK("{\"enum\":[\"utf8\",\"base64\"]}", "\"utf8\"");
    NO("{\"enum\":[\"utf8\",\"base64\"]}", "\"latin1\"");
    CHECK(strstr(msg, "must be one of") != NULL);
    OK("{\"enum\":[1,null,{\"a\":[1]}]}", "{\"a\":[1]}");
    OK("{\"enum\":[1]}", "1.0"); /* numbers compare by value */
    NO("{\"enum\":[1]}", "\"1\"");
    OK("{\"const\":{\"k\":[1,2]}}", "{\"k\":[1,2.0]}");
    NO("{\"const\":{\"k\":[1,2]}}", "{\"k\":[2,1]}");
    OK("{\"const\":null}", "null");
    NO("{\"const\":null}", "false");
    OK("{\"const\":9007199254740993}", "9007199254740993");
    NO("{\"const\":9007199254740993}", "9007199254740992");
}

TEST(minimum_maximum)
{
    const char *s = "{\"minimum\":1,\"maximum\":10}";
    OK(s, "1");
    OK(s, "10");
    OK(s, "5.5");
    NO(s, "0");
    CHECK(strstr(msg, "must be >= 1") != NULL);
    NO(s, "10.01");
    CHECK(strstr(msg, "must be <= 10") != NULL);
    OK(s, "\"not a number\""); /* only numbers are bounded */
    OK("{\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", "0.5");
    NO("{\"exclusiveMinimum\":0}", "0");
    NO("{\"exclusiveMaximum\":1}", "1");
    /* integers compare exactly beyond 2^53 */
    NO("{\"maximum\":9007199254740992}", "9007199254740993");
    OK("{\"minimum\":-9223372036854775807}", "-9223372036854775807");
}

TEST(min_max_length)
{
    const char *s = "{\"minLength\":2,\"maxLength\":3}";
    OK(s, "\"ab\"");
    OK(s, "\"abc\"");
    NO(s, "\"a\"");
    CHECK(strstr(msg, "at least 2 characters") != NULL);
    NO(s, "\"abcd\"");
    /* code points, not bytes */
    OK("{\"maxLength\":2}", "\"\\u00e9\\u00e9\"");
    OK("{\"maxLength\":1}", "\"\\ud83d\\ude00\"");
    NO("{\"minLength\":2}", "\"\\ud83d\\ude00\"");
    OK(s, "7");
}

TEST(items_min_max_items)
{
    const char *s = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,"
                    "\"maxItems\":2}";
    OK(s, "[1]");
    OK(s, "[1,2]");
    NO(s, "[]");
    CHECK(strstr(msg, "at least 1 items") != NULL);
    NO(s, "[1,2,3]");
    NO(s, "[1,\"x\"]");
    CHECK(strstr(msg, "input[1]") != NULL);
    OK("{\"items\":false}", "[]");
    NO("{\"items\":false}", "[1]");
    OK("{\"items\":true}", "[1,\"a\"]");
    /* nested paths */
    NO("{\"properties\":{\"a\":{\"items\":{\"properties\":{\"b\":{\"type\":\"string\"}}}}}}",
       "{\"a\":[{\"b\":\"x\"},{\"b\":2}]}");
    CHECK(strstr(msg, "input.a[1].b") != NULL);
}

TEST(pattern)
{
    const char *s = "{\"pattern\":\"^[a-z]+[0-9]?$\"}";
    OK(s, "\"abc\"");
    OK(s, "\"abc1\"");
    NO(s, "\"ABC\"");
    CHECK(strstr(msg, "does not match the pattern") != NULL);
    OK("{\"pattern\":\"b\"}", "\"abc\""); /* unanchored: a match anywhere */
    NO("{\"pattern\":\"^a$\"}", "\"a\\u0000b\""); /* a NUL never matches */
    NO("{\"pattern\":\"((\"}", "\"x\"");
    CHECK(strstr(msg, "does not compile") != NULL);
    NO("{\"pattern\":\"(a*)*\\\\1\"}", "\"aaaa\""); /* back-references refused */
    OK(s, "5");
}

TEST(schema_check)
{
    CHECK_EQ_INT(chk("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\","
                     "\"minLength\":1,\"pattern\":\"^a\"}},\"required\":[\"a\"],"
                     "\"additionalProperties\":false}"),
                 0);
    CHECK_EQ_INT(chk("true"), 0);
    CHECK_EQ_INT(chk("[]"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"type\":\"nope\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"type\":[\"string\",1]}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"type\":[\"string\",\"integer\"]}"), 0);
    CHECK_EQ_INT(chk("{\"minLength\":-1}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"maxItems\":1.5}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"minimum\":\"1\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"enum\":\"a\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"required\":[1]}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"required\":\"a\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"[\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"(a)\\\\1\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"a\\\\\\\\1\"}"), 0); /* an escaped backslash, then 1 */
    /* patterns that would make glibc's regex compile or match for too long */
    CHECK_EQ_INT(chk("{\"pattern\":\"a++\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"a{2}*\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"(a{9}){9}(b{9})\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"a{256}\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"a{1,255}b{3,}\"}"), 0);
    CHECK_EQ_INT(chk("{\"pattern\":\"a{x}\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"a+b+c+d+e+f+g+h+i+j+k+l+m+n+o+p+q+\"}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"pattern\":\"^[a-z+*?{]+[]x]*[[:alpha:]]?$\"}"), 0);
    CHECK_EQ_INT(chk("{\"pattern\":\"[abc\"}"), SKD_EINVAL);
    CHECK_EQ_INT(v("{\"pattern\":\"^[+*]+$\"}", "\"+*+\""), 0);
    CHECK_EQ_INT(v("{\"pattern\":\"x+++\"}", "\"x\""), SKD_EINVAL);
    CHECK(strstr(msg, "does not compile") != NULL);
    CHECK_EQ_INT(chk("{\"properties\":{\"a\":3}}"), SKD_EINVAL);
    CHECK(strstr(msg, "$.properties.a") != NULL);
    CHECK_EQ_INT(chk("{\"properties\":[]}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"additionalProperties\":{\"type\":7}}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"items\":{\"items\":{\"type\":\"x\"}}}"), SKD_EINVAL);
    CHECK_EQ_INT(chk("{\"x-unknown\":{\"type\":7},\"description\":\"ok\"}"), 0);
    /* nesting deeper than the limit is refused, not recursed into */
    char deep[4096] = "";
    size_t o = 0;
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(deep + o, sizeof(deep) - o, "{\"items\":");
    o += (size_t)snprintf(deep + o, sizeof(deep) - o, "{}");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(deep + o, sizeof(deep) - o, "}");
    CHECK_EQ_INT(chk(deep), SKD_EINVAL);
}

TEST(file_skill_schemas_are_well_formed)
{
    char dir[] = "/tmp/skilld-schema-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    skd_config *cfg = skd_config_new();
    skd_err e = {0};
    skd_engine *eng = NULL;
    CHECK_EQ_INT(skd_config_set(cfg, "DATA_DIR", dir, &e), 0);
    CHECK_EQ_INT(skd_engine_open(cfg, &eng, &e), 0);
    static const char *const names[] = {"file_read", "file_write", "file_list", "file_delete"};
    for (size_t i = 0; eng && i < 4; i++) {
        skd_skill *s = skd_registry_lookup(skd_engine_registry(eng), names[i], NULL, &e);
        CHECK(s != NULL);
        if (!s)
            continue;
        json_t *sch = skd_skill_input_schema(s);
        CHECK_EQ_INT(skd_schema_check(sch, &e), 0);
        CHECK(json_is_false(json_object_get(sch, "additionalProperties")));
        skd_skill_unref(s);
    }
    skd_engine_close(eng);
    skd_config_free(cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

int main(void)
{
    TAP_BEGIN("test_core_schema");
    RUN(type);
    RUN(properties_required_additional);
    RUN(enum_and_const);
    RUN(minimum_maximum);
    RUN(min_max_length);
    RUN(items_min_max_items);
    RUN(pattern);
    RUN(schema_check);
    RUN(file_skill_schemas_are_well_formed);
    return TAP_END();
}
