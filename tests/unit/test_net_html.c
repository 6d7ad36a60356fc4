/* Unit tests for src/net/html*.c: the HTML to Markdown / text / links
 * converter behind web_fetch. Real-world-shaped pages in tests/data/html/
 * are converted and compared with their expected output byte for byte; the
 * other cases feed hostile or broken input (deep nesting, huge attributes,
 * invalid UTF-8, bad entities) and check metadata, links and limits. */
#include "net/html.h"
#include "skilld/skilld.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define DATA "tests/data/html/"

/* Whole file into a new string (caller frees), or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = malloc((size_t)n + 1)) != NULL) {
        *len = fread(p, 1, (size_t)n, f);
        p[*len] = '\0';
    }
    fclose(f);
    return p;
}

/* Print where got and want first differ: line number and both lines. */
static void diff_hint(const char *name, const char *got, const char *want)
{
    size_t line = 1;
    const char *g = got, *w = want;
    while (*g && *g == *w) {
        if (*g == '\n')
            line++;
        g++, w++;
    }
    while (g > got && g[-1] != '\n')
        g--, w--;
    printf("# %s differs at line %zu\n#   want: %.*s\n#   got:  %.*s\n", name, line,
           (int)strcspn(w, "\n"), w, (int)strcspn(g, "\n"), g);
}

static int convert(const char *html, const char *base, int format, skd_html_doc *d)
{
    skd_err e = {0};
    int rc = skd__html_convert(html, strlen(html), base, format, d, &e);
    if (rc)
        printf("# convert: %s\n", e.msg);
    return rc;
}

/* Convert DATA/page.html and compare with DATA/page.<ext>. */
static int fixture(const char *page, const char *ext, const char *base, int format)
{
    char path[256];
    size_t hl = 0, wl = 0;
    int ok = 0;
    skd_html_doc d;
    skd_err e = {0};
    snprintf(path, sizeof(path), DATA "%s.html", page);
    char *html = slurp(path, &hl);
    snprintf(path, sizeof(path), DATA "%s.%s", page, ext);
    char *want = slurp(path, &wl);
    if (!html || !want) {
        printf("# cannot read the fixture %s\n", path);
        goto out;
    }
    if (skd__html_convert(html, hl, base, format, &d, &e) != 0) {
        printf("# %s: %s\n", path, e.msg);
        goto out;
    }
    ok = d.content_len == strlen(d.content) && strcmp(d.content, want) == 0 && !d.truncated;
    if (!ok)
        diff_hint(path, d.content, want);
    skd__html_doc_free(&d);
out:
    free(html);
    free(want);
    return ok;
}

#define ARTICLE_URL "https://www.valleycourier.example/news/2024/03/millbrook-timber-bridge"
#define DOCS_URL "https://docs.pktq.example/en/2.4/usage/config.html"
#define APP_URL "https://wolkenlager.example/preise"
#define TRAIL_URL "https://club.example/news/2023/northern-loop.html"

TEST(fixture_article_markdown)
{
    CHECK(fixture("article", "md", ARTICLE_URL, SKD_HTML_MARKDOWN));
}

TEST(fixture_article_text)
{
    CHECK(fixture("article", "txt", ARTICLE_URL, SKD_HTML_TEXT));
}

TEST(fixture_docs_markdown)
{
    CHECK(fixture("docs", "md", DOCS_URL, SKD_HTML_MARKDOWN));
}

TEST(fixture_app_shell_markdown)
{
    CHECK(fixture("app_shell", "md", APP_URL, SKD_HTML_MARKDOWN));
}

TEST(fixture_lists_links_markdown)
{
    CHECK(fixture("lists_links", "md", TRAIL_URL, SKD_HTML_MARKDOWN));
}

TEST(fixture_lists_links_links)
{
    CHECK(fixture("lists_links", "links", TRAIL_URL, SKD_HTML_LINKS));
}

/* A fixture's doc, for the metadata and link cases. */
static int load(const char *page, const char *base, skd_html_doc *d)
{
    char path[256];
    size_t n = 0;
    skd_err e = {0};
    snprintf(path, sizeof(path), DATA "%s.html", page);
    char *html = slurp(path, &n);
    int rc = html ? skd__html_convert(html, n, base, SKD_HTML_MARKDOWN, d, &e) : -1;
    free(html);
    return rc;
}

TEST(metadata_of_article)
{
    skd_html_doc d;
    CHECK_EQ_INT(load("article", ARTICLE_URL, &d), 0);
    CHECK_STR(d.title, "Why the river town rebuilt its bridge in timber | The Valley Courier");
    CHECK_STR(d.meta.description, "After the 2023 floods, Millbrook chose glulam timber over "
                                  "steel for its new footbridge. Engineers explain why.");
    CHECK_STR(d.meta.language, "en-GB");
    CHECK_STR(d.meta.published, "2024-03-18T07:30:00+00:00");
    CHECK_STR(d.meta.author, "Hannah Okafor");
    CHECK_STR(d.meta.canonical,
              "https://www.valleycourier.example/news/2024/03/millbrook-timber-bridge");
    CHECK_STR(d.meta.site_name, "The Valley Courier");
    skd__html_doc_free(&d);
}

TEST(metadata_fallbacks)
{
    skd_html_doc d;
    /* plain description wins over og:, <time> gives the date */
    CHECK_EQ_INT(load("app_shell", APP_URL, &d), 0);
    CHECK_STR(d.meta.description,
              "Transparent prices for object storage: pay per GB, no egress fees within the EU.");
    CHECK_STR(d.meta.published, "2024-05-01");
    CHECK_STR(d.meta.language, "de");
    CHECK(d.meta.author == NULL && d.meta.canonical == NULL && d.meta.site_name == NULL);
    skd__html_doc_free(&d);
    /* itemprop datePublished, entity in an attribute */
    CHECK_EQ_INT(load("lists_links", TRAIL_URL, &d), 0);
    CHECK_STR(d.meta.published, "2023-09-02");
    CHECK_STR(d.meta.author, "Outdoor Club & Friends");
    CHECK(d.meta.language == NULL && d.meta.description == NULL);
    skd__html_doc_free(&d);
    /* og:title without <title>; then the first <h1> */
    CHECK_EQ_INT(convert("<head><meta property='og:title' content=' OG  title '></head>"
                         "<h1>Heading</h1>",
                         NULL, SKD_HTML_MARKDOWN, &d),
                 0);
    CHECK_STR(d.title, "OG title");
    skd__html_doc_free(&d);
    CHECK_EQ_INT(convert("<body><nav><h1>Site</h1></nav><main><h1> The\n<em>real</em> one</h1>"
                         "</main></body>",
                         NULL, SKD_HTML_MARKDOWN, &d),
                 0);
    CHECK_STR(d.title, "The real one");
    skd__html_doc_free(&d);
    CHECK_EQ_INT(convert("<title>\n  Spaced \t out\n</title><p>x</p>", NULL, SKD_HTML_TEXT, &d), 0);
    CHECK_STR(d.title, "Spaced out");
    skd__html_doc_free(&d);
    /* the date of the content, not of a sidebar; the author from rel=author */
    CHECK_EQ_INT(convert("<body><aside><time datetime='2001-01-01'>old</time></aside>"
                         "<main><p>By <a rel='author' href='/u'> Ann\n Lee</a>, "
                         "<time datetime=' 2024-02-29 '>today</time></p></main></body>",
                         NULL, SKD_HTML_MARKDOWN, &d),
                 0);
    CHECK_STR(d.meta.published, "2024-02-29");
    CHECK_STR(d.meta.author, "Ann Lee");
    skd__html_doc_free(&d);
}

TEST(long_title_is_capped)
{
    size_t n = 20000;
    char *html = malloc(n + 32);
    skd_html_doc d;
    memcpy(html, "<title>", 7);
    memset(html + 7, 'T', n);
    memcpy(html + 7 + n, "</title>", 9);
    CHECK_EQ_INT(convert(html, NULL, SKD_HTML_MARKDOWN, &d), 0);
    CHECK(d.title && strlen(d.title) == SKD_HTML_MAX_FIELD);
    skd__html_doc_free(&d);
    free(html);
}

static const skd_html_link *find_link(const skd_html_doc *d, const char *url)
{
    for (size_t i = 0; i < d->nlinks; i++)
        if (strcmp(d->links[i].url, url) == 0)
            return &d->links[i];
    return NULL;
}

TEST(links_are_resolved_filtered_and_unique)
{
    skd_html_doc d;
    CHECK_EQ_INT(load("lists_links", TRAIL_URL, &d), 0);
    CHECK_EQ_INT(d.nlinks, 10);
    const skd_html_link *l = find_link(&d, "https://club.example/guides/hiking/car-park.html");
    CHECK(l && strcmp(l->text, "north car park") == 0); /* <base href> honoured */
    CHECK(find_link(&d, "https://club.example/guides/maps/north.pdf#page=2") != NULL);
    CHECK(find_link(&d, "https://weather.example/forecast?loc=ridge") != NULL);
    CHECK(find_link(&d, "https://club.example/Events") != NULL); /* scheme and host lowered */
    l = find_link(&d, "https://club.example/guides/hiking/trail%20photos/ridge%20%28north%29.jpg");
    CHECK(l && strcmp(l->text, "Ridge") == 0); /* text from the image's alt */
    size_t joins = 0;
    for (size_t i = 0; i < d.nlinks; i++) {
        const char *u = d.links[i].url;
        CHECK(strncmp(u, "https://", 8) == 0 || strncmp(u, "mailto:", 7) == 0);
        CHECK(strchr(u, ' ') == NULL && strchr(u, '(') == NULL);
        joins += strcmp(u, "https://club.example/join") == 0;
    }
    CHECK_EQ_INT(joins, 1);
    skd__html_doc_free(&d);
}

TEST(link_resolution_cases)
{
    skd_html_doc d;
    const char *page =
        "<a href='../../up/a'>a</a><a href='/abs'>b</a><a href='//cdn.example/x'>c</a>"
        "<a href='JavaScript:alert(1)'>d</a><a href='java&#10;script:x()'>e</a>"
        "<a href='vbscript:x'>f</a><a href='file:///etc/passwd'>g</a>"
        "<a href='#top'>h</a><a href=''>i</a><a href='q?x=1#f'>j</a>"
        "<a href='http://user:pw@Host.Example:8080/P'>k</a>"
        "<a href='https:/no-host'>l</a><a href='http://'>m</a><a href='https:?q'>n</a>"
        "<a href='javascriptjavascriptjavascript:x'>o</a>";
    CHECK_EQ_INT(convert(page, "http://example.com/a/b/c.html", SKD_HTML_LINKS, &d), 0);
    CHECK(find_link(&d, "http://example.com/up/a") != NULL);
    CHECK(find_link(&d, "http://example.com/abs") != NULL);
    CHECK(find_link(&d, "http://cdn.example/x") != NULL);
    CHECK(find_link(&d, "http://example.com/a/b/q?x=1#f") != NULL);
    CHECK(find_link(&d, "http://user:pw@host.example:8080/P") != NULL);
    CHECK_EQ_INT(d.nlinks, 5);
    CHECK(strstr(d.content, "script") == NULL && strstr(d.content, "file:") == NULL);
    skd__html_doc_free(&d);
    /* no base: relative links stay relative; Markdown keeps the words */
    CHECK_EQ_INT(convert("<p><a href='rel/x.html'>x</a> <a href='javascript:y()'>y</a></p>", NULL,
                         SKD_HTML_MARKDOWN, &d),
                 0);
    CHECK_STR(d.content, "[x](rel/x.html) y\n");
    skd__html_doc_free(&d);
    /* a <base> with a scheme other than http(s) is ignored */
    CHECK_EQ_INT(convert("<base href='javascript:/'><a href='z'>z</a>", "https://h.example/d/",
                         SKD_HTML_MARKDOWN, &d),
                 0);
    CHECK_STR(d.content, "[z](https://h.example/d/z)\n");
    skd__html_doc_free(&d);
}

TEST(links_are_capped)
{
    skd_buf b;
    skd_html_doc d;
    skd_buf_init(&b, 1 << 20);
    for (int i = 0; i < SKD_HTML_MAX_LINKS + 500; i++)
        skd_buf_printf(&b, "<a href='/p%d'>p</a><a href='/p%d'>again</a>", i, i);
    CHECK_EQ_INT(convert(b.data, "http://e.example/", SKD_HTML_MARKDOWN, &d), 0);
    CHECK_EQ_INT(d.nlinks, SKD_HTML_MAX_LINKS);
    CHECK_STR(d.links[0].url, "http://e.example/p0");
    CHECK_STR(d.links[1].url, "http://e.example/p1");
    skd__html_doc_free(&d);
    skd_buf_free(&b);
}

TEST(markdown_constructs)
{
    static const struct {
        const char *html, *md;
    } cases[] = {
        {"<h3></h3><h2> A <b>b</b> </h2>", "## A **b**\n"},
        {"<p>x<b> </b>y <em><em>z</em></em> <b><i>w</i></b></p>", "x y *z* ***w***\n"},
        {"<p><a href='http://a.example/'><img src='' alt=''></a>t</p>", "t\n"},
        {"<p><code>a`b</code> <code>`x</code></p>", "``a`b`` `` `x ``\n"},
        {"<pre>has ``` inside\n</pre>", "````\nhas ``` inside\n````\n"},
        {"<table><tr><td>only one column</td></tr></table>", "only one column\n"},
        {"<table><tr><td>a|b</td><td></td></tr><tr><td>c</td></tr></table>",
         "| a\\|b |  |\n| --- | --- |\n| c |  |\n"},
        {"<ul><li>a<blockquote><p>q1</p><p>q2</p></blockquote></li></ul>",
         "- a\n\n  > q1\n  >\n  > q2\n"},
        {"<p>1. x</p><p>+ y</p><p>a_b _c_ 5*3 &lt;b&gt; [x] \\ `t` &amp;copy;</p>",
         "1\\. x\n\n\\+ y\n\na_b \\_c\\_ 5\\*3 \\<b> \\[x\\] \\\\ \\`t\\` \\&copy;\n"},
        {"<div hidden>h</div><p aria-hidden='true'>a</p><p style='DISPLAY : none'>s</p>"
         "<p style='display:block'>shown</p>",
         "shown\n"},
        {"<body><header>banner</header><article><header>byline</header><p>text</p>"
         "<footer>tags</footer></article></body>",
         "byline\n\ntext\n\ntags\n"},
        {"<body><p>outside</p><main><p>inside</p></main></body>", "inside\n"},
        {"<body><article>one</article><article>two</article></body>", "one\n\ntwo\n"},
        {"<p>a<br>b<br><br></p><p>c</p>", "a  \nb\n\nc\n"},
        {"<h2>T<a class='headerlink' href='#t'>\xc2\xb6</a></h2><p><a href='#x'>see x</a></p>",
         "## T\n\nsee x\n"},
        {"<ol start='0'><li>a</li></ol><ol start='12'><li>b</li></ol>", "1. a\n\n12. b\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        skd_html_doc d;
        CHECK_EQ_INT(convert(cases[i].html, NULL, SKD_HTML_MARKDOWN, &d), 0);
        if (d.content && strcmp(d.content, cases[i].md) != 0)
            diff_hint(cases[i].html, d.content, cases[i].md);
        CHECK_STR(d.content, cases[i].md);
        skd__html_doc_free(&d);
    }
}

TEST(text_format_has_no_markup)
{
    skd_html_doc d;
    CHECK_EQ_INT(convert("<h1>Title</h1><p>Some <b>bold</b> [x] <a href='http://a.example/'>"
                         "link</a> <img src='i.png' alt='pic'><br>next</p>"
                         "<pre><code class='language-c'>int x;</code></pre>",
                         "http://a.example/", SKD_HTML_TEXT, &d),
                 0);
    CHECK_STR(d.content, "Title\n\nSome bold [x] link\nnext\n\nint x;\n");
    CHECK_EQ_INT(d.nlinks, 1);
    skd__html_doc_free(&d);
}

TEST(malformed_html)
{
    skd_html_doc d;
    CHECK_EQ_INT(convert("<p>one<p>two</b></i><div><span>three</div></span>"
                         "<b><i>four</b></i><table><td>five<tr><p>six</table>"
                         "<a href=/x>seven</a> <ul><li>eight<li>nine</ul></ul></ul>"
                         "<p>ten <a href=\"/y>an unclosed quote runs to the end</a> <b>x",
                         "http://m.example/", SKD_HTML_MARKDOWN, &d),
                 0);
    const char *words[] = {"one", "two",   "three", "four", "five",
                           "six", "seven", "eight", "nine", "ten"};
    const char *at = d.content;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        const char *p = at ? strstr(at, words[i]) : NULL;
        CHECK(p != NULL);
        at = p ? p : at;
    }
    CHECK(skd_utf8_valid(d.content, d.content_len));
    skd__html_doc_free(&d);
    /* stray bytes and half tags only */
    CHECK_EQ_INT(convert("</p></div><<<>>><a<b", NULL, SKD_HTML_MARKDOWN, &d), 0);
    CHECK(d.content != NULL && skd_utf8_valid(d.content, d.content_len));
    skd__html_doc_free(&d);
}

/* n copies of open, text, n copies of close, between "start" and "end". */
static char *nested(const char *open, const char *close, int n)
{
    skd_buf b;
    skd_buf_init(&b, 1 << 20);
    skd_buf_puts(&b, "<body><p>start</p>");
    for (int i = 0; i < n; i++)
        skd_buf_puts(&b, open);
    skd_buf_puts(&b, "deep");
    for (int i = 0; i < n; i++)
        skd_buf_puts(&b, close);
    skd_buf_puts(&b, "<p>end</p></body>");
    return skd_buf_steal(&b, NULL);
}

TEST(deep_nesting_10000)
{
    static const char *const kinds[][2] = {
        {"<div>", "</div>"},
        {"<ul><li>", "</li></ul>"},
        {"<blockquote>", "</blockquote>"},
        {"<b><i>", "</i></b>"},
        {"<table><tr><td>", "</td></tr></table>"},
        {"<span><a href='/x'>", "</a></span>"},
    };
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        char *html = nested(kinds[k][0], kinds[k][1], 10000);
        skd_html_doc d;
        CHECK_EQ_INT(convert(html, "http://d.example/", SKD_HTML_MARKDOWN, &d), 0);
        CHECK(d.content && strstr(d.content, "start") != NULL);
        CHECK(d.content && strstr(d.content, "deep") != NULL);
        CHECK(d.content && strstr(d.content, "end") != NULL);
        CHECK(d.content_len < 200000);
        skd__html_doc_free(&d);
        free(html);
    }
}

TEST(huge_attributes)
{
    size_t n = 1 << 20;
    skd_buf b;
    skd_html_doc d;
    char *big = malloc(n + 1);
    memset(big, 'a', n);
    big[n] = '\0';
    skd_buf_init(&b, 8 << 20);
    skd_buf_printf(&b,
                   "<p title='%s' style='%s' class='%s'>before <a href='/%s'>huge link</a> "
                   "<img src='/i.png' alt='%s'></p><pre class='language-%s'>code</pre>"
                   "<p>after</p>",
                   big, big, big, big, big, big);
    CHECK_EQ_INT(convert(b.data, "http://h.example/", SKD_HTML_MARKDOWN, &d), 0);
    CHECK(d.content && strstr(d.content, "before huge link") != NULL);
    CHECK(d.content && strstr(d.content, "after") != NULL);
    /* the language is cut at 32 characters */
    CHECK(d.content && strstr(d.content, "```aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\ncode") != NULL);
    CHECK_EQ_INT(d.nlinks, 0); /* an 1 MiB address is not a link */
    CHECK(d.content_len < 8192);
    skd__html_doc_free(&d);
    skd_buf_free(&b);
    free(big);
}

TEST(invalid_utf8_and_entities)
{
    skd_html_doc d;
    skd_err e = {0};
    static const char bad[] = "<title>t\xff</title><p>a\xff"
                              "b \xc0\xaf c \xed\xa0\x80 d \xe2\x82"
                              " e\0f &#0; &#xD800; &#x110000; &#65; &bogus; &amp;amp; "
                              "&eacute;&#x1F600;</p>";
    CHECK_EQ_INT(skd__html_convert(bad, sizeof(bad) - 1, NULL, SKD_HTML_MARKDOWN, &d, &e), 0);
    CHECK(d.content && skd_utf8_valid(d.content, d.content_len));
    CHECK(d.content && strstr(d.content, "a\xef\xbf\xbd"
                                         "b") != NULL);
    CHECK(d.content && strstr(d.content, " A \\&bogus; \\&amp; \xc3\xa9\xf0\x9f\x98\x80") != NULL);
    CHECK(d.title && skd_utf8_valid(d.title, strlen(d.title)));
    skd__html_doc_free(&d);
    /* a declared legacy charset is honoured */
    static const char latin1[] = "<meta charset='iso-8859-1'><p>caf\xe9 \xbd</p>";
    CHECK_EQ_INT(skd__html_convert(latin1, sizeof(latin1) - 1, NULL, SKD_HTML_TEXT, &d, &e), 0);
    CHECK_STR(d.content, "caf\xc3\xa9 \xc2\xbd\n");
    skd__html_doc_free(&d);
}

TEST(empty_documents)
{
    static const char *const empties[] = {"",
                                          "   \n\t",
                                          "<html></html>",
                                          "<html><head><title></title></head><body></body></html>",
                                          "<script>only()</script>",
                                          "<!-- c -->"};
    for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
        skd_html_doc d;
        for (int f = SKD_HTML_MARKDOWN; f <= SKD_HTML_LINKS; f++) {
            CHECK_EQ_INT(convert(empties[i], "http://e.example/", f, &d), 0);
            CHECK_STR(d.content, "");
            CHECK_EQ_INT(d.content_len, 0);
            CHECK(d.title == NULL && d.nlinks == 0 && d.links == NULL && !d.truncated);
            skd__html_doc_free(&d);
        }
    }
    skd_html_doc d;
    skd_err e = {0};
    CHECK_EQ_INT(skd__html_convert(NULL, 0, NULL, SKD_HTML_TEXT, &d, &e), 0);
    CHECK_STR(d.content, "");
    skd__html_doc_free(&d);
    skd__html_doc_free(&d); /* twice is fine */
    skd__html_doc_free(NULL);
}

TEST(bad_requests_and_limits)
{
    skd_html_doc d;
    skd_err e = {0};
    CHECK_EQ_INT(skd__html_convert("<p>x</p>", 8, NULL, 7, &d, &e), SKD_EINVAL);
    CHECK(d.content == NULL);
    CHECK_EQ_INT(skd__html_convert(NULL, 5, NULL, SKD_HTML_TEXT, &d, &e), SKD_EINVAL);
    CHECK_EQ_INT(skd__html_convert("x", 1, NULL, SKD_HTML_TEXT, NULL, &e), SKD_EINVAL);
    char *big = calloc(1, SKD_HTML_MAX_INPUT + 1);
    CHECK_EQ_INT(skd__html_convert(big, SKD_HTML_MAX_INPUT + 1, NULL, SKD_HTML_TEXT, &d, &e),
                 SKD_ETOOBIG);
    CHECK_EQ_INT(e.code, SKD_ETOOBIG);
    free(big);
}

TEST(output_is_capped_on_a_character_boundary)
{
    /* 2.4 MB of two-byte characters: more than the output cap. */
    size_t words = 800000;
    skd_buf b;
    skd_html_doc d;
    skd_buf_init(&b, SKD_HTML_MAX_INPUT);
    skd_buf_puts(&b, "<p>");
    for (size_t i = 0; i < words; i++)
        skd_buf_append(&b, "\xc3\xa9\xc3\xa9 ", 5);
    CHECK_EQ_INT(convert(b.data, NULL, SKD_HTML_MARKDOWN, &d), 0);
    CHECK_EQ_INT(d.truncated, 1);
    CHECK(d.content_len <= SKD_HTML_MAX_OUTPUT && d.content_len > SKD_HTML_MAX_OUTPUT - 8);
    CHECK(skd_utf8_valid(d.content, d.content_len));
    skd__html_doc_free(&d);
    skd_buf_free(&b);
}

int main(void)
{
    TAP_BEGIN("test_net_html");
    RUN(fixture_article_markdown);
    RUN(fixture_article_text);
    RUN(fixture_docs_markdown);
    RUN(fixture_app_shell_markdown);
    RUN(fixture_lists_links_markdown);
    RUN(fixture_lists_links_links);
    RUN(metadata_of_article);
    RUN(metadata_fallbacks);
    RUN(long_title_is_capped);
    RUN(links_are_resolved_filtered_and_unique);
    RUN(link_resolution_cases);
    RUN(links_are_capped);
    RUN(markdown_constructs);
    RUN(text_format_has_no_markup);
    RUN(malformed_html);
    RUN(deep_nesting_10000);
    RUN(huge_attributes);
    RUN(invalid_utf8_and_entities);
    RUN(empty_documents);
    RUN(bad_requests_and_limits);
    RUN(output_is_capped_on_a_character_boundary);
    return TAP_END();
}
