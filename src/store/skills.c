/*
 * Custom skills in the store: one row per owner and name@version holding
 * the manifest as JSON text (checked again by skd_manifest_check when it is
 * loaded, so a row edited behind our back cannot widen a skill), the
 * Agent Skills folder it runs from (or NULL) and whether it is enabled.
 * The empty string stands for "global" in the owner column so that the
 * primary key works (NULL is never equal to NULL in SQL).
 */
#include "skilld/json.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

int skd_store_skill_put(skd_store *st, const char *owner, const json_t *m, const char *skill_dir,
                        int enabled, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    char *text = skd_json_dump(m);
    int rc = 0;
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "INSERT OR REPLACE INTO skills(name,version,owner,manifest,skill_dir,"
                           "enabled,created_ms) VALUES(?,?,?,?,?,?,?)",
                           -1, &q, NULL) != SQLITE_OK) {
        free(text);
        return skd__store_fail(st, err, "save skill");
    }
    sqlite3_bind_text(q, 1, skd_json_str(m, "name", ""), -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, skd_json_str(m, "version", ""), -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, owner ? owner : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, text, -1, SQLITE_STATIC);
    if (skill_dir)
        sqlite3_bind_text(q, 5, skill_dir, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q, 5);
    sqlite3_bind_int(q, 6, enabled ? 1 : 0);
    sqlite3_bind_int64(q, 7, skd_wall_ms());
    if (sqlite3_step(q) != SQLITE_DONE)
        rc = skd__store_fail(st, err, "save skill");
    sqlite3_finalize(q);
    free(text);
    return rc;
}

/* Run "<verb> ... WHERE name=? AND owner=? [AND version=?]" with an
 * optional leading integer parameter. */
static int where_update(skd_store *st, const char *sql_all, const char *sql_one, int has_int,
                        int ival, const char *name, const char *version, const char *owner,
                        const char *what, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc = 0, i = 1;
    if (sqlite3_prepare_v2(skd__store_db(st), version ? sql_one : sql_all, -1, &q, NULL) !=
        SQLITE_OK)
        return skd__store_fail(st, err, what);
    if (has_int)
        sqlite3_bind_int(q, i++, ival);
    sqlite3_bind_text(q, i++, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, i++, owner ? owner : "", -1, SQLITE_STATIC);
    if (version)
        sqlite3_bind_text(q, i, version, -1, SQLITE_STATIC);
    int64_t changed = 0;
    if ((rc = skd__store_step_write(st, q, what, &changed, err)) == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no stored skill %s%s%s", name, version ? "@" : "",
                         version ? version : "");
    sqlite3_finalize(q);
    return rc;
}

int skd_store_skill_delete(skd_store *st, const char *name, const char *version, const char *owner,
                           skd_err *err)
{
    return where_update(st, "DELETE FROM skills WHERE name=? AND owner=?",
                        "DELETE FROM skills WHERE name=? AND owner=? AND version=?", 0, 0, name,
                        version, owner, "delete skill", err);
}

int skd_store_skill_set_enabled(skd_store *st, const char *name, const char *version,
                                const char *owner, int enabled, skd_err *err)
{
    return where_update(st, "UPDATE skills SET enabled=? WHERE name=? AND owner=?",
                        "UPDATE skills SET enabled=? WHERE name=? AND owner=? AND version=?", 1,
                        enabled ? 1 : 0, name, version, owner, "update skill", err);
}

json_t *skd_store_skill_list(skd_store *st, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    json_t *arr = json_array();
    if (!arr || sqlite3_prepare_v2(skd__store_db(st),
                                   "SELECT owner,manifest,skill_dir,enabled FROM skills "
                                   "ORDER BY created_ms, rowid",
                                   -1, &q, NULL) != SQLITE_OK) {
        skd__store_fail(st, err, "list skills");
        json_decref(arr);
        return NULL;
    }
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *owner = (const char *)sqlite3_column_text(q, 0);
        const char *text = (const char *)sqlite3_column_text(q, 1);
        const char *dir = (const char *)sqlite3_column_text(q, 2);
        skd_err perr = {0};
        json_t *m = text ? skd_json_parse(text, strlen(text), &perr) : NULL;
        json_t *row = json_pack(
            "{s:o, s:o, s:o, s:b}", "owner", owner && *owner ? json_string(owner) : json_null(),
            "manifest", m ? m : json_null(), "skillDir", dir ? json_string(dir) : json_null(),
            "enabled", sqlite3_column_int(q, 3));
        if (row)
            json_array_append_new(arr, row);
    }
    sqlite3_finalize(q);
    return arr;
}
