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

static skd__sql q_put = SKD__SQL2(
    "INSERT OR REPLACE INTO skills(name,version,owner,manifest,skill_dir,enabled,created_ms) "
    "VALUES(?1,?2,?3,?4,?5,?6,?7)",
    "INSERT INTO skills(name,version,owner,manifest,skill_dir,enabled,created_ms) "
    "VALUES($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (name,version,owner) DO UPDATE SET "
    "manifest=excluded.manifest, skill_dir=excluded.skill_dir, enabled=excluded.enabled, "
    "created_ms=excluded.created_ms, rowid=DEFAULT");
static skd__sql q_del_all = SKD__SQL("DELETE FROM skills WHERE name=?1 AND owner=?2");
static skd__sql q_del_one =
    SKD__SQL("DELETE FROM skills WHERE name=?1 AND owner=?2 AND version=?3");
static skd__sql q_en_all = SKD__SQL("UPDATE skills SET enabled=?3 WHERE name=?1 AND owner=?2");
static skd__sql q_en_one =
    SKD__SQL("UPDATE skills SET enabled=?3 WHERE name=?1 AND owner=?2 AND version=?4");
static skd__sql q_list =
    SKD__SQL("SELECT owner,manifest,skill_dir,enabled FROM skills ORDER BY created_ms, rowid");

int skd_store_skill_put(skd_store *st, const char *owner, const json_t *m, const char *skill_dir,
                        int enabled, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    char *text = skd_json_dump(m);
    int rc;
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_put, &q, err)))
        goto out;
    skd__q_text(&q, 1, skd_json_str(m, "name", ""));
    skd__q_text(&q, 2, skd_json_str(m, "version", ""));
    skd__q_text(&q, 3, owner ? owner : "");
    skd__q_text(&q, 4, text);
    skd__q_text(&q, 5, skill_dir);
    skd__q_int(&q, 6, enabled ? 1 : 0);
    skd__q_int(&q, 7, skd_wall_ms());
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    free(text);
    if (rc == 0) /* other replicas load it (runs.c) */
        skd__store_changed(st, "skills", NULL);
    return rc;
}

/* Run a statement "... WHERE name=?1 AND owner=?2" with an optional
 * integer ?3 and then "AND version=?3|?4"; SKD_ENOENT when it changed
 * nothing. */
static int where_update(skd_store *st, skd__sql *all, skd__sql *one, const int64_t *ival,
                        const char *name, const char *version, const char *owner, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t changed = 0;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, version ? one : all, &q, err)))
        goto out;
    skd__q_text(&q, 1, name);
    skd__q_text(&q, 2, owner ? owner : "");
    if (ival)
        skd__q_int(&q, 3, *ival);
    if (version)
        skd__q_text(&q, ival ? 4 : 3, version);
    if ((rc = skd__q_run(&q, &changed, err)) == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no stored skill %s%s%s", name, version ? "@" : "",
                         version ? version : "");
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    if (rc == 0)
        skd__store_changed(st, "skills", NULL);
    return rc;
}

int skd_store_skill_delete(skd_store *st, const char *name, const char *version, const char *owner,
                           skd_err *err)
{
    return where_update(st, &q_del_all, &q_del_one, NULL, name, version, owner, err);
}

int skd_store_skill_set_enabled(skd_store *st, const char *name, const char *version,
                                const char *owner, int enabled, skd_err *err)
{
    int64_t v = enabled ? 1 : 0;
    return where_update(st, &q_en_all, &q_en_one, &v, name, version, owner, err);
}

json_t *skd_store_skill_list(skd_store *st, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if ((rc = skd__list_start(st, &q_list, &c, &q, &arr, err)))
        goto out;
    while ((rc = skd__q_step(&q, err)) == 1) {
        const char *owner = skd__q_col(&q, 0);
        const char *text = skd__q_col(&q, 1);
        const char *dir = skd__q_col(&q, 2);
        skd_err perr = {0};
        json_t *m = text ? skd_json_parse(text, strlen(text), &perr) : NULL;
        json_t *row = json_pack(
            "{s:o, s:o, s:o, s:b}", "owner", owner && *owner ? json_string(owner) : json_null(),
            "manifest", m ? m : json_null(), "skillDir", dir ? json_string(dir) : json_null(),
            "enabled", (int)skd__q_col_int(&q, 3));
        if (row)
            json_array_append_new(arr, row);
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}
