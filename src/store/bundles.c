/*
 * SKILL.md bundles in the store (see include/skilld/bundle.h): one row per
 * owner and name with the folder it is served from, whether an admin made
 * it public, and the record computed at registration (the front matter and
 * every file's path, size, SHA-256 and stat signature) as JSON text. The
 * empty string stands for the operator in the owner column, as in skills.c.
 * The SQL is plain (ON CONFLICT ... DO UPDATE) so that it also runs on
 * PostgreSQL.
 */
#include "skilld/bundle.h"
#include "skilld/json.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

int skd_store_bundle_put(skd_store *st, const char *owner, const char *name, const char *dir,
                         int public_, const json_t *record, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    char *text = skd_json_dump(record);
    int rc;
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "INSERT INTO skill_bundles(name,owner,dir,public,record,created_ms,"
                           "updated_ms) VALUES(?,?,?,?,?,?,?) ON CONFLICT (name, owner) DO UPDATE "
                           "SET dir=excluded.dir, public=excluded.public, record=excluded.record,"
                           " updated_ms=excluded.updated_ms",
                           -1, &q, NULL) != SQLITE_OK) {
        free(text);
        return skd__store_fail(st, err, "save bundle");
    }
    int64_t now = skd_wall_ms();
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, owner ? owner : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, dir, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 4, public_ ? 1 : 0);
    sqlite3_bind_text(q, 5, text, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 6, now);
    sqlite3_bind_int64(q, 7, now);
    rc = skd__store_step_write(st, q, "save bundle", NULL, err);
    sqlite3_finalize(q);
    free(text);
    return rc;
}

int skd_store_bundle_delete(skd_store *st, const char *owner, const char *name, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(skd__store_db(st), "DELETE FROM skill_bundles WHERE name=? AND owner=?",
                           -1, &q, NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "delete bundle");
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, owner ? owner : "", -1, SQLITE_STATIC);
    int64_t changed = 0;
    int rc = skd__store_step_write(st, q, "delete bundle", &changed, err);
    if (rc == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no bundle %s", name);
    sqlite3_finalize(q);
    return rc;
}

int skd_store_bundle_set_public(skd_store *st, const char *owner, const char *name, int public_,
                                skd_err *err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "UPDATE skill_bundles SET public=? WHERE name=? AND owner=?", -1, &q,
                           NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "update bundle");
    sqlite3_bind_int(q, 1, public_ ? 1 : 0);
    sqlite3_bind_text(q, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, owner ? owner : "", -1, SQLITE_STATIC);
    int64_t changed = 0;
    int rc = skd__store_step_write(st, q, "update bundle", &changed, err);
    if (rc == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no bundle %s", name);
    sqlite3_finalize(q);
    return rc;
}

json_t *skd_store_bundle_list(skd_store *st, const char *key_id, const char *name, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    json_t *arr = json_array();
    /* The caller's own rows first, so that one shadows a public row of the
     * same name. key_id NULL (the operator) sees every row. */
    const char *sql = key_id ? "SELECT name,owner,dir,public,record,updated_ms FROM skill_bundles "
                               "WHERE (? IS NULL OR name=?) AND (owner=? OR owner='' OR public=1) "
                               "ORDER BY name, CASE WHEN owner=? THEN 0 ELSE 1 END, owner"
                             : "SELECT name,owner,dir,public,record,updated_ms FROM skill_bundles "
                               "WHERE (? IS NULL OR name=?) ORDER BY name, owner";
    if (!arr || sqlite3_prepare_v2(skd__store_db(st), sql, -1, &q, NULL) != SQLITE_OK) {
        skd__store_fail(st, err, "list bundles");
        json_decref(arr);
        return NULL;
    }
    for (int i = 1; i <= 2; i++) {
        if (name)
            sqlite3_bind_text(q, i, name, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(q, i);
    }
    if (key_id) {
        sqlite3_bind_text(q, 3, key_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 4, key_id, -1, SQLITE_STATIC);
    }
    int step;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        const char *owner = (const char *)sqlite3_column_text(q, 1);
        const char *text = (const char *)sqlite3_column_text(q, 4);
        skd_err perr = {0};
        json_t *rec = text ? skd_json_parse(text, strlen(text), &perr) : NULL;
        if (!rec)
            continue; /* a row edited behind our back is not served */
        json_t *row = json_pack(
            "{s:s, s:o, s:s, s:b, s:o, s:I}", "name", (const char *)sqlite3_column_text(q, 0),
            "owner", owner && *owner ? json_string(owner) : json_null(), "dir",
            (const char *)sqlite3_column_text(q, 2), "public", sqlite3_column_int(q, 3), "record",
            rec, "updatedMs", (json_int_t)sqlite3_column_int64(q, 5));
        if (row)
            json_array_append_new(arr, row);
    }
    if (step != SQLITE_DONE) {
        skd__store_fail(st, err, "list bundles");
        json_decref(arr);
        arr = NULL;
    }
    sqlite3_finalize(q);
    return arr;
}
