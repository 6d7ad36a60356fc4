/*
 * Custom skills registered through another replica (issue 11 part 2). The
 * store's replica thread calls skd__custom_sync when the stored skills
 * changed (told by PostgreSQL NOTIFY, or seen by polling the change
 * counter): every stored row is brought into this process's registry,
 * new or replaced by its manifest, and enabled or disabled as stored. Each
 * manifest is checked again, as at start (skd__custom_load). A stored
 * skill that was loaded here before and is no longer stored (deleted
 * through another replica) is removed from the registry; skills this
 * process registered without storing them (DATA_DIR/skills folders) are
 * never touched. Runs on the store's replica thread only.
 */
#include "skilld/custom.h"
#include "skills/skills_int.h"
#include "skilld/json.h"
#include "skilld/log.h"
#include "skilld/skilld.h"
#include "skilld/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 when the registry already holds exactly this manifest for owner. */
static int same_as_registered(skd_registry *reg, const char *owner, const json_t *m)
{
    char ref[160];
    snprintf(ref, sizeof(ref), "%s@%s", skd_json_str(m, "name", ""),
             skd_json_str(m, "version", ""));
    skd_skill *s = skd_registry_lookup(reg, ref, owner, NULL);
    if (!s)
        return 0;
    const char *have = skd_skill_owner(s);
    int same = ((!have && !owner) || (have && owner && strcmp(have, owner) == 0)) &&
               skd_skill_manifest(s) && json_equal(skd_skill_manifest(s), (json_t *)m);
    skd_skill_unref(s);
    return same;
}

static void sync_row(skd_skills *sk, const json_t *row)
{
    skd_err err = {0};
    skd_registry *reg = sk->reg;
    const json_t *m = json_object_get(row, "manifest");
    const char *owner = skd_json_str(row, "owner", NULL);
    const char *dir = skd_json_str(row, "skillDir", NULL);
    const char *name = skd_json_str(m, "name", "?"), *version = skd_json_str(m, "version", "?");
    if (!json_is_object(m))
        return;
    if (!same_as_registered(reg, owner, m)) {
        skd_skill_def def;
        if (skd_manifest_check(m, sk->cfg, &err) ||
            skd__command_skill_def(m, dir, owner, &def, &err)) {
            skd_warn("stored skill %s@%s not loaded: %s", name, version, skd_err_msg(&err));
            return;
        }
        if (skd_registry_add(reg, &def, 1, &err)) {
            def.udata_free(def.udata);
            skd_warn("stored skill %s@%s not loaded: %s", name, version, skd_err_msg(&err));
            return;
        }
    }
    skd_registry_set_enabled(reg, name, version, owner, skd_json_bool(row, "enabled", 1), NULL);
}

/* {"owner\tname\tversion": true} for the stored rows. New ref. */
static json_t *row_set(const json_t *rows)
{
    json_t *set = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        const json_t *m = json_object_get(row, "manifest");
        char k[400];
        snprintf(k, sizeof(k), "%s\t%s\t%s", skd_json_str(row, "owner", ""),
                 skd_json_str(m, "name", ""), skd_json_str(m, "version", ""));
        if (set)
            json_object_set_new(set, k, json_true());
    }
    return set;
}

void skd__custom_sync_init(skd_skills *sk)
{
    json_t *rows = skd_store_skill_list(sk->store, NULL);
    json_t **synced = &sk->synced;
    json_decref(*synced);
    *synced = rows ? row_set(rows) : NULL;
    json_decref(rows);
}

void skd__custom_sync(void *arg)
{
    skd_skills *sk = arg;
    skd_err err = {0};
    json_t *rows = skd_store_skill_list(sk->store, &err);
    if (!rows) {
        skd_warn("custom skills not synchronised: %s", skd_err_msg(&err));
        return;
    }
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        sync_row(sk, row);
    json_t *now = row_set(rows), **before = &sk->synced;
    const char *k;
    json_t *v;
    json_object_foreach (*before, k, v) {
        if (now && json_object_get(now, k))
            continue;
        char buf[400];
        snprintf(buf, sizeof(buf), "%s", k);
        char *name = strchr(buf, '\t'), *version = name ? strchr(name + 1, '\t') : NULL;
        if (!version)
            continue;
        *name++ = '\0';
        *version++ = '\0';
        skd_registry_remove(sk->reg, name, version, *buf ? buf : NULL, NULL);
    }
    json_decref(*before);
    *before = now;
    json_decref(rows);
}
