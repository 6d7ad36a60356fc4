/*
 * libFuzzer driver for the DuckDuckGo result-page parser
 * (skd__search_parse_ddg in src/net/search.c): every input is parsed and the
 * invariants of the result list are checked (at most the asked number of
 * results; each an object with title, url and snippet strings that are valid
 * UTF-8 and within their caps; every url http or https). A violation aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/search.h"
#include "skilld/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const json_t *o, const char *key, size_t max)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s || strlen(s) > max || !skd_utf8_valid(s, strlen(s)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *arr = skd__search_parse_ddg((const char *)data, size, 20);
    if (!arr || !json_is_array(arr) || json_array_size(arr) > 20)
        abort();
    size_t i;
    json_t *r;
    json_array_foreach(arr, i, r) {
        check_str(r, "title", SKD_SEARCH_TITLE_MAX);
        check_str(r, "snippet", SKD_SEARCH_SNIPPET_MAX);
        check_str(r, "url", 8192);
        const char *u = json_string_value(json_object_get(r, "url"));
        if (strncasecmp(u, "http://", 7) != 0 && strncasecmp(u, "https://", 8) != 0)
            abort();
    }
    json_decref(arr);
    return 0;
}
