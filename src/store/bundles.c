/*
 * SKILL.md bundles in the store (see include/skilld/bundle.h): one row per
 * owner and name with the folder it is served from, whether an admin made
 * it public, and the record computed at registration (the front matter and
 * every file's path, size, SHA-256 and stat signature) as JSON text. The
 * empty string stands for the operator in the owner column, as in skills.c.
 * Every statement is plain SQL that both SQLite and PostgreSQL run (the
 * upsert is ON CONFLICT ... DO UPDATE in both).
 */
#include "skilld/bundle.h"
#include "skilld/json.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

static skd__sql q_put = SKD__SQL(
    "INSERT INTO skill_bundles(name,owner,dir,public,record,created_ms,updated_ms) "
    "VALUES(?1,?2,?3,?4,?5,?6,?6) ON CONFLICT (name, owner) DO UPDATE SET dir=excluded.dir, "
    "public=excluded.public, record=excluded.record, updated_ms=excluded.updated_ms");
static skd__sql q_del = SKD__SQL("DELETE FROM skill_bundles WHERE name=?1 AND owner=?2");
static skd__sql q_pub = SKD__SQL("UPDATE skill_bundles SET public=?3 WHERE name=?1 AND owner=?2");
/* The caller's own rows first, so that one shadows a public row of the
 * same name. */
static skd__sql q_list_key =
    SKD__SQL("SELECT name,owner,dir,public,record,updated_ms FROM skill_bundles "
             "WHERE (?1 = '' OR name=?1) AND (owner=?2 OR owner='' OR public=1) "
             "ORDER BY name, CASE WHEN owner=?2 THEN 0 ELSE 1 END, owner");
static skd__sql q_list_all = SKD__SQL("SELECT name,owner,dir,public,record,updated_ms FROM "
                                      "skill_bundles WHERE (?1 = '' OR name=?1) "
                                      "ORDER BY name, owner");

int skd_store_bundle_put(skd_store *st, const char *owner, const char *name, const char *dir,
                         int public_, const json_t *record, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    char *text = skd_json_dump(record);
    int rc;
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_put, &q, err)))
        goto out;
    skd__q_text(&q, 1, name);
    skd__q_text(&q, 2, owner ? owner : "");
    skd__q_text(&q, 3, dir);
    skd__q_int(&q, 4, public_ ? 1 : 0);
    skd__q_text(&q, 5, text);
    skd__q_int(&q, 6, skd_wall_ms());
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    free(text);
    return rc;
}

/* Run q_del or q_pub (with ival as ?3); SKD_ENOENT when no row changed. */
static int change(skd_store *st, skd__sql *sql, const char *owner, const char *name,
                  const int64_t *ival, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t changed = 0;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, sql, &q, err)))
        goto out;
    skd__q_text(&q, 1, name);
    skd__q_text(&q, 2, owner ? owner : "");
    if (ival)
        skd__q_int(&q, 3, *ival);
    if ((rc = skd__q_run(&q, &changed, err)) == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no bundle %s", name);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

int skd_store_bundle_delete(skd_store *st, const char *owner, const char *name, skd_err *err)
{
    return change(st, &q_del, owner, name, NULL, err);
}

int skd_store_bundle_set_public(skd_store *st, const char *owner, const char *name, int public_,
                                skd_err *err)
{
    int64_t v = public_ ? 1 : 0;
    return change(st, &q_pub, owner, name, &v, err);
}

json_t *skd_store_bundle_list(skd_store *st, const char *key_id, const char *name, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if ((rc = skd__list_start(st, key_id ? &q_list_key : &q_list_all, &c, &q, &arr, err)))
        goto out;
    skd__q_text(&q, 1, name ? name : "");
    if (key_id)
        skd__q_text(&q, 2, key_id);
    while ((rc = skd__q_step(&q, err)) == 1) {
        const char *owner = skd__q_col(&q, 1);
        const char *text = skd__q_col(&q, 4);
        skd_err perr = {0};
        json_t *rec = text ? skd_json_parse(text, strlen(text), &perr) : NULL;
        if (!rec)
            continue; /* a row edited behind our back is not served */
        json_t *row = json_pack("{s:s, s:o, s:s, s:b, s:o, s:I}", "name", skd__q_col(&q, 0),
                                "owner", owner && *owner ? json_string(owner) : json_null(), "dir",
                                skd__q_col(&q, 2), "public", (int)skd__q_col_int(&q, 3), "record",
                                rec, "updatedMs", (json_int_t)skd__q_col_int(&q, 5));
        if (row)
            json_array_append_new(arr, row);
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}
