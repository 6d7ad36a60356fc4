/*
 * secrets_list: the calling key's secrets (docs/egress.md, Secrets) for
 * MCP clients and every other transport: name, hosts, headers, fingerprint
 * and creation time, the same as GET /v1/secrets, never a value (the
 * sealed bytes the store hands back are not put in the answer). There is no skill that sets a
 * secret: a value comes in over REST or the command line only, never from a model's tool call. It
 * reads the store through the context; the key is always the caller's own.
 */
#include "builtins/builtins.h"
#include "skilld/json.h"
#include "skilld/store.h"

#include <string.h>

/* A comma-separated list as a JSON array of strings; NULL when out of
 * memory. */
static json_t *split(const char *csv)
{
    json_t *a = json_array();
    for (const char *p = csv; a && p && *p;) {
        size_t n = strcspn(p, ",");
        if (n && json_array_append_new(a, json_stringn(p, n))) {
            json_decref(a);
            return NULL;
        }
        p += n + (p[n] == ',');
    }
    return a;
}

static json_t *row_json(const skd_secret_row *r)
{
    json_t *o = json_pack("{s:s, s:o*, s:s, s:I}", "name", r->name, "hosts", split(r->hosts),
                          "fingerprint", r->fingerprint, "createdAt", (json_int_t)r->created_ms);
    if (o && r->headers && *r->headers)
        json_object_set_new(o, "headers", split(r->headers));
    return o;
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)input;
    (void)udata;
    skd_err err = {0};
    skd_secret_row *rows = NULL;
    size_t n = 0;
    if (!ctx->store || !ctx->key_id || !*ctx->key_id)
        return skd_result_error(SKD_EINVAL, "secrets belong to an API key; this call has none");
    if (skd_store_secret_rows(ctx->store, ctx->key_id, &rows, &n, &err))
        return skd_result_from_err(&err);
    json_t *a = json_array(), *r = NULL;
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, row_json(&rows[i]))) {
            json_decref(a);
            a = NULL;
        }
    skd_store_secret_rows_free(rows, n);
    if (a && (r = skd_result_ok()) != NULL)
        json_object_set_new(r, "secrets", a);
    else
        json_decref(a);
    return r;
}

static const char schema[] =
    "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";

void skd__builtin_secrets_list_def(skd_skill_def *d)
{
    d->name = "secrets_list";
    d->version = "1.0.0";
    d->description = "List this key's secrets: names, the hosts each is bound to and a "
                     "fingerprint, never a value. A sandbox with network gets each as NAME set to "
                     "a placeholder, which the egress proxy replaces by the value in request "
                     "headers to those hosts only. Secrets are set over REST or the command line.";
    d->input_schema = json_loads(schema, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
