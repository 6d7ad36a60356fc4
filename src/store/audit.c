/*
 * The execution audit: one row per skill call with a digest of the input,
 * never the input itself. Reads are always scoped to one key.
 */
#include "store/store_internal.h"

#include <string.h>

int skd_store_audit_add(skd_store *st, const skd_audit *a, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "INSERT INTO executions(id,key_id,skill,version,status,error_code,"
                           "duration_ms,created_ms,input_sha256,egress) "
                           "VALUES(?,?,?,?,?,?,?,?,?,?)",
                           -1, &q, NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "write audit row");
    sqlite3_bind_text(q, 1, a->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, a->key_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, a->skill ? a->skill : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, a->version ? a->version : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 5, a->status, -1, SQLITE_STATIC);
    if (a->error_code)
        sqlite3_bind_text(q, 6, a->error_code, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q, 6);
    sqlite3_bind_int64(q, 7, a->duration_ms);
    sqlite3_bind_int64(q, 8, a->created_ms);
    sqlite3_bind_text(q, 9, a->input_digest ? a->input_digest : "", -1, SQLITE_STATIC);
    if (a->egress)
        sqlite3_bind_text(q, 10, a->egress, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q, 10);
    if (sqlite3_step(q) != SQLITE_DONE)
        rc = skd__store_fail(st, err, "write audit row");
    sqlite3_finalize(q);
    return rc;
}

static json_t *row_json(sqlite3_stmt *q)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "id", (const char *)sqlite3_column_text(q, 0),
        "keyId", (const char *)sqlite3_column_text(q, 1), "skill",
        (const char *)sqlite3_column_text(q, 2), "version", (const char *)sqlite3_column_text(q, 3),
        "status", (const char *)sqlite3_column_text(q, 4), "durationMs",
        (json_int_t)sqlite3_column_int64(q, 6), "createdAt", (json_int_t)sqlite3_column_int64(q, 7),
        "inputSha256", (const char *)sqlite3_column_text(q, 8));
    if (o) {
        const unsigned char *code = sqlite3_column_text(q, 5);
        json_object_set_new(o, "errorCode", code ? json_string((const char *)code) : json_null());
        /* The egress record as it was written (by the engine, from the
         * run's result); a row without one has no "egress". */
        const char *eg = (const char *)sqlite3_column_text(q, 9);
        json_t *ej = eg ? json_loads(eg, 0, NULL) : NULL;
        if (json_is_array(ej))
            json_object_set_new(o, "egress", ej);
        else
            json_decref(ej);
    }
    return o;
}

#define AUDIT_COLS                                                                                 \
    "id,key_id,skill,version,status,error_code,duration_ms,created_ms,input_sha256,egress"

json_t *skd_store_audit_list(skd_store *st, const char *key_id, int limit, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    json_t *arr = json_array();
    if (limit <= 0 || limit > 1000)
        limit = 100;
    if (!arr || sqlite3_prepare_v2(skd__store_db(st),
                                   "SELECT " AUDIT_COLS " FROM executions WHERE key_id=? "
                                   "ORDER BY created_ms DESC, rowid DESC LIMIT ?",
                                   -1, &q, NULL) != SQLITE_OK) {
        skd__store_fail(st, err, "list executions");
        json_decref(arr);
        return NULL;
    }
    sqlite3_bind_text(q, 1, key_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 2, limit);
    while (sqlite3_step(q) == SQLITE_ROW)
        json_array_append_new(arr, row_json(q));
    sqlite3_finalize(q);
    return arr;
}

json_t *skd_store_audit_get(skd_store *st, const char *key_id, const char *id, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    json_t *o = NULL;
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "SELECT " AUDIT_COLS " FROM executions WHERE key_id=? AND id=?", -1, &q,
                           NULL) != SQLITE_OK) {
        skd__store_fail(st, err, "read execution");
        return NULL;
    }
    sqlite3_bind_text(q, 1, key_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW)
        o = row_json(q);
    else
        skd_err_set(err, SKD_ENOENT, "no execution %s for this key", id);
    sqlite3_finalize(q);
    return o;
}
