/*
 * The SKILL.md front-matter reader (src/skills/frontmatter.c): each value as
 * a YAML 1.2 core-schema parser reads it, and everything outside the subset
 * refused with the line. tests/node/frontmatter.test.mjs checks the same
 * readings against the official MCP client's parser; this file runs under
 * ASan and valgrind too.
 */
#include "skills/frontmatter.h"
#include "tap.h"

#include <string.h>

/* Parse "---\n" fm "---\n" and compare with the JSON text want. */
static int reads_as(const char *fm, const char *want)
{
    char md[4096];
    snprintf(md, sizeof(md), "---\n%s---\nbody\n", fm);
    json_t *got = NULL, *exp = json_loads(want, 0, NULL);
    skd_err err = {0};
    int rc = skd__frontmatter_parse(md, strlen(md), &got, &err);
    int ok = rc == 0 && exp && json_equal(got, exp);
    if (!ok) {
        char *g = got ? json_dumps(got, JSON_COMPACT) : NULL;
        printf("# %s -> %s (%s), want %s\n", fm, g ? g : "error", err.msg, want);
        free(g);
    }
    json_decref(got);
    json_decref(exp);
    return ok;
}

/* Refused with SKD_EINVAL and a message holding "line N". */
static int refused(const char *fm, int line)
{
    char md[4096], want[32];
    snprintf(md, sizeof(md), "---\n%s---\n", fm);
    snprintf(want, sizeof(want), "line %d:", line);
    json_t *got = NULL;
    skd_err err = {0};
    int rc = skd__frontmatter_parse(md, strlen(md), &got, &err);
    int ok = rc == SKD_EINVAL && !got && strstr(err.msg, want);
    if (!ok)
        printf("# %s -> rc %d: %s (want %s)\n", fm, rc, err.msg, want);
    json_decref(got);
    return ok;
}

TEST(scalars_have_core_schema_types)
{
    CHECK(reads_as("a: 007\nb: 0x1F\nc: 0o17\nd: -12\ne: +7\n",
                   "{\"a\":7,\"b\":31,\"c\":15,\"d\":-12,\"e\":7}"));
    CHECK(reads_as("a: 1.5e3\nb: .5\nc: 1.\nd: 1.2.3\n",
                   "{\"a\":1500.0,\"b\":0.5,\"c\":1.0,\"d\":\"1.2.3\"}"));
    CHECK(reads_as("a: true\nb: False\nc: NULL\nd: ~\ne:\nf: yes\n",
                   "{\"a\":true,\"b\":false,\"c\":null,\"d\":null,\"e\":null,\"f\":\"yes\"}"));
    CHECK(reads_as("url: http://x.org:80/a#b\nt: 12:30\n",
                   "{\"url\":\"http://x.org:80/a#b\",\"t\":\"12:30\"}"));
}

TEST(quoted_scalars)
{
    CHECK(reads_as("a: 'it''s'\nb: \"q\\\"\\\\\\t\\u00e9\\x41\"\n",
                   "{\"a\":\"it's\",\"b\":\"q\\\"\\\\\\t\\u00e9A\"}"));
    CHECK(reads_as("\"k: x\": 1\n", "{\"k: x\":1}"));
    CHECK(reads_as("a: \"x\" # comment\n", "{\"a\":\"x\"}"));
}

TEST(block_and_plain_scalars)
{
    CHECK(reads_as("a: |\n  one\n  two\n\n", "{\"a\":\"one\\ntwo\\n\"}"));
    CHECK(reads_as("a: |-\n  one\n", "{\"a\":\"one\"}"));
    CHECK(reads_as("a: |+\n  one\n\n", "{\"a\":\"one\\n\\n\"}"));
    CHECK(reads_as("a: >\n  one\n  two\n\n  three\n    deep\n  four\n",
                   "{\"a\":\"one two\\nthree\\n  deep\\nfour\\n\"}"));
    CHECK(reads_as("a: first\n  second\n\n  third\n", "{\"a\":\"first second\\nthird\"}"));
}

TEST(collections)
{
    CHECK(reads_as("m:\n  a: 1\n  b:\n    c: x\n", "{\"m\":{\"a\":1,\"b\":{\"c\":\"x\"}}}"));
    CHECK(reads_as("s: [a, 'b', 2, ]\nt: []\n", "{\"s\":[\"a\",\"b\",2],\"t\":[]}"));
    CHECK(reads_as("s:\n  - a\n  - 2\nt:\n- x\n", "{\"s\":[\"a\",2],\"t\":[\"x\"]}"));
    CHECK(reads_as("# only comments\n", "{}"));
}

TEST(outside_the_subset_is_refused_with_the_line)
{
    CHECK(refused("a: &x 1\n", 2));
    CHECK(refused("a: !!str 1\n", 2));
    CHECK(refused("a: 1\nb: {c: 1}\n", 3));
    CHECK(refused("m:\n\tk: v\n", 3));
    CHECK(refused("a: \"open\n  close\"\n", 2));
    CHECK(refused("a: .inf\n", 2));
    CHECK(refused("a: 123456789012345678901\n", 2));
    CHECK(refused("a: 1\na: 2\n", 3));
    CHECK(refused("a:\n  - b: 1\n", 3));
    CHECK(refused("a: \"\\0\"\n", 2));
    CHECK(refused("a: b: c\n", 2));
    CHECK(refused("- a\n", 2));
    CHECK(refused("__proto__: 1\n", 2));
    CHECK(refused("a: |2\n  x\n", 2));
}

TEST(document_framing)
{
    json_t *fm = NULL;
    skd_err err = {0};
    const char crlf[] = "---\r\nname: x\r\ndescription: |\r\n  a\r\n---\r\n";
    CHECK_EQ_INT(skd__frontmatter_parse(crlf, strlen(crlf), &fm, &err), 0);
    CHECK_STR(json_string_value(json_object_get(fm, "description")), "a\n");
    json_decref(fm);
    fm = NULL;
    const char bom[] = "\xef\xbb\xbf---\nname: x\n---\n";
    CHECK_EQ_INT(skd__frontmatter_parse(bom, strlen(bom), &fm, &err), 0);
    json_decref(fm);
    fm = NULL;
    CHECK_EQ_INT(skd__frontmatter_parse("---\nname: x\n", 12, &fm, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "closing") != NULL);
    CHECK_EQ_INT(skd__frontmatter_parse("name: x\n", 8, &fm, &err), SKD_EINVAL);
    const char nul[] = "---\na: b\0c\n---\n";
    CHECK_EQ_INT(skd__frontmatter_parse(nul, sizeof(nul) - 1, &fm, &err), SKD_EINVAL);
    CHECK(fm == NULL);
}

int main(void)
{
    TAP_BEGIN("test_skills_frontmatter");
    RUN(scalars_have_core_schema_types);
    RUN(quoted_scalars);
    RUN(block_and_plain_scalars);
    RUN(collections);
    RUN(outside_the_subset_is_refused_with_the_line);
    RUN(document_framing);
    return TAP_END();
}
