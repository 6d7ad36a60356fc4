/*
 * libFuzzer driver for the HTML converter (src/net/html*.c): every input is
 * converted to Markdown, text and links against a fixed base URL, and the
 * result's invariants are checked (content present, NUL-terminated at
 * content_len, valid UTF-8, within the output cap; every link absolute
 * http(s) or mailto and free of spaces and parentheses). A violation aborts,
 * which libFuzzer and tests/fuzz/replay.sh report as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/html.h"
#include "skilld/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_doc(const skd_html_doc *d)
{
    if (!d->content || strlen(d->content) != d->content_len ||
        d->content_len > SKD_HTML_MAX_OUTPUT || !skd_utf8_valid(d->content, d->content_len))
        abort();
    if (d->nlinks > SKD_HTML_MAX_LINKS || (d->nlinks && !d->links))
        abort();
    for (size_t i = 0; i < d->nlinks; i++) {
        const char *u = d->links[i].url;
        if (!u || !d->links[i].text)
            abort();
        if (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0 &&
            strncmp(u, "mailto:", 7) != 0)
            abort();
        if (strpbrk(u, " ()<>\n") != NULL)
            abort();
    }
    const char *fields[] = {d->title,          d->meta.description, d->meta.language,
                            d->meta.published, d->meta.author,      d->meta.site_name};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (fields[i] && (strlen(fields[i]) > SKD_HTML_MAX_FIELD ||
                          !skd_utf8_valid(fields[i], strlen(fields[i]))))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int formats[] = {SKD_HTML_MARKDOWN, SKD_HTML_TEXT, SKD_HTML_LINKS};
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        skd_html_doc d;
        skd_err err;
        int rc = skd__html_convert((const char *)data, size, "https://fuzz.example/a/b.html",
                                   formats[i], &d, &err);
        if (rc == 0)
            check_doc(&d);
        else if (rc != SKD_ETOOBIG || size <= SKD_HTML_MAX_INPUT)
            abort();
        skd__html_doc_free(&d);
    }
    return 0;
}
