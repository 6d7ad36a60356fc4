/*
 * The DuckDuckGo result-page parser over the fixture page kept in
 * tests/fixtures/net/ddg.html (the HTML endpoint's shape: wrapped
 * //duckduckgo.com/l/?uddg= links, an ad block) and over hostile inputs.
 */
#include "net/search.h"
#include "skilld/skilld.h"
#include "tap.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

TEST(fixture_page)
{
    size_t len = 0;
    char *html = slurp("tests/fixtures/net/ddg.html", &len);
    CHECK(html != NULL);
    if (!html)
        return;
    json_t *r = skd__search_parse_ddg(html, len, 100);
    CHECK_EQ_INT(json_array_size(r), 12);
    CHECK_STR(skd_json_str(json_array_get(r, 0), "title", NULL), "Welcome to Python.org");
    CHECK_STR(skd_json_str(json_array_get(r, 0), "url", NULL), "https://www.python.org/");
    CHECK_STR(skd_json_str(json_array_get(r, 0), "snippet", NULL),
              "The official home of the Python Programming Language.");
    CHECK_STR(skd_json_str(json_array_get(r, 1), "url", NULL),
              "https://en.wikipedia.org/wiki/Python_(programming_language)");
    for (size_t i = 0; i < json_array_size(r); i++)
        CHECK(strstr(skd_json_str(json_array_get(r, i), "url", ""), "duckduckgo.com") == NULL);
    json_decref(r);
    r = skd__search_parse_ddg(html, len, 3);
    CHECK_EQ_INT(json_array_size(r), 3);
    json_decref(r);
    free(html);
}

TEST(hostile_inputs)
{
    static const char *const bad[] = {
        "",
        "<a class=\"result__a\" href=\"javascript:alert(1)\">x</a>",
        "<a class=\"result__a\" href=\"//duckduckgo.com/l/?rut=1\">no target</a>",
        "<a class=\"result__a\" href=\"//duckduckgo.com/l/?uddg=file%3A%2F%2F%2Fetc%2Fpasswd\">f</a>",
        "<a class=\"result__a\" href=\"//duckduckgo.com/l/?uddg=https%3A%2F%2Fa%00b\">nul</a>",
        "<a class=\"result__ab\" href=\"https://a.example/\">not the class</a>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *r = skd__search_parse_ddg(bad[i], strlen(bad[i]), 10);
        CHECK(r != NULL);
        CHECK_EQ_INT(json_array_size(r), 0);
        json_decref(r);
    }
    const char *ok = "<div class=\"result\"><a class=\"x result__a\" href=\"https://a.example/p?q=1\">"
                     "A &amp; <b>B</b></a><div class=\"result__snippet\">  one\n two </div></div>";
    json_t *r = skd__search_parse_ddg(ok, strlen(ok), 10);
    CHECK_EQ_INT(json_array_size(r), 1);
    CHECK_STR(skd_json_str(json_array_get(r, 0), "title", NULL), "A & B");
    CHECK_STR(skd_json_str(json_array_get(r, 0), "snippet", NULL), "one two");
    CHECK_STR(skd_json_str(json_array_get(r, 0), "url", NULL), "https://a.example/p?q=1");
    json_decref(r);
}

TEST(caps)
{
    size_t n = 200000;
    char *big = malloc(n + 200);
    int off = snprintf(big, 200, "<a class=\"result__a\" href=\"https://a.example/\">");
    memset(big + off, 'T', n);
    snprintf(big + off + n, 100, "</a>");
    json_t *r = skd__search_parse_ddg(big, strlen(big), 10);
    CHECK_EQ_INT(json_array_size(r), 1);
    CHECK_EQ_INT(strlen(skd_json_str(json_array_get(r, 0), "title", "")), SKD_SEARCH_TITLE_MAX);
    json_decref(r);
    free(big);
}

int main(void)
{
    TAP_BEGIN("test_net_search");
    RUN(fixture_page);
    RUN(hostile_inputs);
    RUN(caps);
    return TAP_END();
}
