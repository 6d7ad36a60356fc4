/*
 * The execution audit: one row per skill call with a digest of the input,
 * never the input itself. Reads are always scoped to one key.
 */
#include "store/store_internal.h"

#include <string.h>

#define AUDIT_COLS                                                                                 \
    "id,key_id,skill,version,status,error_code,duration_ms,created_ms,input_sha256,egress"

static skd__sql q_add =
    SKD__SQL("INSERT INTO executions(" AUDIT_COLS ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)");
static skd__sql q_list = SKD__SQL("SELECT " AUDIT_COLS " FROM executions WHERE key_id=?1 "
                                  "ORDER BY created_ms DESC, rowid DESC LIMIT ?2");
static skd__sql q_get = SKD__SQL("SELECT " AUDIT_COLS " FROM executions WHERE key_id=?1 AND id=?2");

int skd_store_audit_add(skd_store *st, const skd_audit *a, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_add, &q, err)))
        goto out;
    skd__q_text(&q, 1, a->id);
    skd__q_text(&q, 2, a->key_id);
    skd__q_text(&q, 3, a->skill ? a->skill : "");
    skd__q_text(&q, 4, a->version ? a->version : "");
    skd__q_text(&q, 5, a->status);
    skd__q_text(&q, 6, a->error_code);
    skd__q_int(&q, 7, a->duration_ms);
    skd__q_int(&q, 8, a->created_ms);
    skd__q_text(&q, 9, a->input_digest ? a->input_digest : "");
    skd__q_text(&q, 10, a->egress); /* NULL for a call without network */
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

static const char *col(skd__q *q, int i)
{
    const char *s = skd__q_col(q, i);
    return s ? s : "";
}

static json_t *row_json(skd__q *q)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "id", col(q, 0), "keyId",
                          col(q, 1), "skill", col(q, 2), "version", col(q, 3), "status", col(q, 4),
                          "durationMs", (json_int_t)skd__q_col_int(q, 6), "createdAt",
                          (json_int_t)skd__q_col_int(q, 7), "inputSha256", col(q, 8));
    if (o) {
        const char *code = skd__q_col(q, 5);
        json_object_set_new(o, "errorCode", code ? json_string(code) : json_null());
        /* The egress record as the engine wrote it from the run's result; a
         * row without one has no "egress". */
        const char *eg = skd__q_col(q, 9);
        json_t *ej = eg ? json_loads(eg, 0, NULL) : NULL;
        if (json_is_array(ej))
            json_object_set_new(o, "egress", ej);
        else
            json_decref(ej);
    }
    return o;
}

json_t *skd_store_audit_list(skd_store *st, const char *key_id, int limit, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = json_array();
    int rc;
    if (!arr) {
        skd_err_set(err, SKD_ENOMEM, "out of memory");
        return NULL;
    }
    if (limit <= 0 || limit > 1000)
        limit = 100;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_list, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_int(&q, 2, limit);
    while ((rc = skd__q_step(&q, err)) == 1)
        json_array_append_new(arr, row_json(&q));
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    if (rc) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

json_t *skd_store_audit_get(skd_store *st, const char *key_id, const char *id, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *o = NULL;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_text(&q, 2, id);
    rc = skd__q_step(&q, err);
    if (rc == 1)
        o = row_json(&q);
    else if (rc == 0)
        skd_err_set(err, SKD_ENOENT, "no execution %s for this key", id);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return o;
}
