/*
 * Search providers for web_search (library-internal): DuckDuckGo's HTML
 * endpoint, SearXNG's JSON API and the Brave Search API. Each builds its
 * request from the configuration (base URL, key), fetches it through the
 * outbound guard and turns the answer into [{title, url, snippet}].
 */
#ifndef SKILLD_NET_SEARCH_H
#define SKILLD_NET_SEARCH_H

#include <jansson.h>

#include "skilld/config.h"
#include "skilld/error.h"

typedef struct skd_cancel skd_cancel;

/* Caps on what is kept of one result, in bytes. */
#define SKD_SEARCH_TITLE_MAX 512
#define SKD_SEARCH_SNIPPET_MAX 2048
/* Results read from one answer at most. */
#define SKD_SEARCH_MAX_RESULTS 100

typedef struct skd_search_query {
    const char *query;      /* the text sent to the engine */
    int limit;              /* 1..20 */
    int offset;             /* results to skip */
    const char *safe;       /* "off", "moderate" or "strict" */
    const char *time_range; /* NULL, "day", "week", "month" or "year" */
} skd_search_query;

/* 1 when name is a known provider. */
int skd__search_provider_valid(const char *name);

/* Ask provider. *results receives a new array of {title, url, snippet}
 * objects (caller json_decref), at most q->limit of them, starting at
 * q->offset as far as the engine pages allow. Errors: SKD_ECONFIG (provider
 * not configured), SKD_EUPSTREAM (the engine refused: bad key, quota,
 * unexpected answer; the message says which), and those of skd_http_fetch. */
int skd__search_run(const skd_config *cfg, const char *provider, const skd_search_query *q,
                    skd_cancel *cancel, json_t **results, skd_err *err);

/* Parse a DuckDuckGo HTML result page (exposed for the unit test and the
 * fuzz driver). New array of {title, url, snippet}; never NULL unless out
 * of memory. */
json_t *skd__search_parse_ddg(const char *html, size_t len, size_t max);

#endif
