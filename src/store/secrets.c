/*
 * Secrets in the store (see include/skilld/store.h): one row per key and
 * name. The value is never here in clear: the engine seals it
 * (src/engine/secrets.c, AES-256-GCM) and the row holds the nonce and the
 * sealed bytes in hex, with what the egress proxy needs to use it (hosts,
 * headers, placeholder) and what a listing shows (fingerprint, created).
 */
#include "skilld/util.h"
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

static skd__sql q_update =
    SKD__SQL("UPDATE secrets SET hosts=?3, headers=?4, placeholder=?5, fingerprint=?6, nonce=?7, "
             "sealed=?8, created_ms=?9 WHERE key_id=?1 AND name=?2");
/* Inserted only while the key holds fewer than ?10 secrets: the cap holds
 * in one statement, whichever replica answers. */
static skd__sql q_insert = SKD__SQL2(
    "INSERT INTO secrets(key_id,name,hosts,headers,placeholder,fingerprint,nonce,sealed,"
    "created_ms) SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9 WHERE (SELECT COUNT(*) FROM secrets WHERE "
    "key_id=?1) < ?10",
    "INSERT INTO secrets(key_id,name,hosts,headers,placeholder,fingerprint,nonce,sealed,"
    "created_ms) SELECT $1::text,$2::text,$3::text,$4::text,$5::text,$6::text,$7::text,"
    "$8::text,$9::bigint WHERE (SELECT COUNT(*) FROM secrets WHERE key_id=$1::text) < "
    "$10::bigint");
static skd__sql q_rows =
    SKD__SQL("SELECT name,hosts,headers,placeholder,fingerprint,nonce,sealed,created_ms FROM "
             "secrets WHERE key_id=?1 ORDER BY name");
static skd__sql q_del = SKD__SQL("DELETE FROM secrets WHERE key_id=?1 AND name=?2");

static void bind_row(skd__q *q, const char *key_id, const skd_secret_row *row)
{
    skd__q_text(q, 1, key_id);
    skd__q_text(q, 2, row->name);
    skd__q_text(q, 3, row->hosts);
    skd__q_text(q, 4, row->headers ? row->headers : "");
    skd__q_text(q, 5, row->placeholder);
    skd__q_text(q, 6, row->fingerprint);
    skd__q_text(q, 7, row->nonce);
    skd__q_text(q, 8, row->sealed);
    skd__q_int(q, 9, row->created_ms);
}

int skd_store_secret_put(skd_store *st, const char *key_id, const skd_secret_row *row,
                         int max_per_key, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t changed = 0;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_update, &q, err)))
        goto out;
    bind_row(&q, key_id, row);
    if ((rc = skd__q_run(&q, &changed, err)) || changed)
        goto out;
    skd__q_end(&q);
    if ((rc = skd__q_start(c, &q_insert, &q, err)))
        goto out;
    bind_row(&q, key_id, row);
    skd__q_int(&q, 10, max_per_key);
    if ((rc = skd__q_run(&q, &changed, err)) == 0 && !changed)
        rc = skd_err_set(err, SKD_EQUOTA,
                         "this key holds %d secrets already (SKILLS_SECRETS_MAX_PER_KEY)",
                         max_per_key);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

static char *dup_col(skd__q *q, int col, int *bad)
{
    const char *v = skd__q_col(q, col);
    char *s = strdup(v ? v : "");
    if (!s)
        *bad = 1;
    return s;
}

int skd_store_secret_rows(skd_store *st, const char *key_id, skd_secret_row **rows, size_t *n,
                          skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    skd_secret_row *v = NULL;
    size_t len = 0, cap = 0;
    int rc, bad = 0;
    *rows = NULL;
    *n = 0;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_rows, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    while ((rc = skd__q_step(&q, err)) == 1) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 8;
            skd_secret_row *nv = realloc(v, nc * sizeof(*v));
            if (!nv) {
                bad = 1;
                break;
            }
            v = nv;
            cap = nc;
        }
        skd_secret_row *r = &v[len++];
        memset(r, 0, sizeof(*r));
        const char *s;
        skd_strlcpy(r->name, (s = skd__q_col(&q, 0)) ? s : "", sizeof(r->name));
        r->hosts = dup_col(&q, 1, &bad);
        r->headers = dup_col(&q, 2, &bad);
        skd_strlcpy(r->placeholder, (s = skd__q_col(&q, 3)) ? s : "", sizeof(r->placeholder));
        skd_strlcpy(r->fingerprint, (s = skd__q_col(&q, 4)) ? s : "", sizeof(r->fingerprint));
        r->nonce = dup_col(&q, 5, &bad);
        r->sealed = dup_col(&q, 6, &bad);
        r->created_ms = skd__q_col_int(&q, 7);
    }
    if (rc == 0 && bad)
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    if (rc < 0) {
        skd_store_secret_rows_free(v, len);
        return rc;
    }
    *rows = v;
    *n = len;
    return 0;
}

void skd_store_secret_rows_free(skd_secret_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].hosts);
        free(rows[i].headers);
        free(rows[i].nonce);
        free(rows[i].sealed);
    }
    free(rows);
}

int skd_store_secret_delete(skd_store *st, const char *key_id, const char *name, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t changed = 0;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_del, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_text(&q, 2, name);
    if ((rc = skd__q_run(&q, &changed, err)) == 0 && !changed)
        rc = skd_err_set(err, SKD_ENOENT, "no secret named %s", name);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
