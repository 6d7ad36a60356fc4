/*
 * Policy over the engine's data (include/skilld/tenancy.h): which skills,
 * executions, runs, metric labels and keys an actor may see or change,
 * decided here once for every transport. The operator (no key id) may do
 * everything; a key is held to its scopes and, without skills:admin, to
 * its own rows.
 */
#include "engine/engine_int.h"
#include "skilld/log.h"
#include "skilld/sandbox.h"
#include "skilld/tenancy.h"

#include <string.h>

static int is_operator(const skd_actor *who)
{
    return !who->key_id;
}

static int has_scope(const skd_actor *who, unsigned scope)
{
    return is_operator(who) || (who->scopes & scope) == scope;
}

static int need_scope(const skd_actor *who, unsigned scope, skd_err *err)
{
    if (has_scope(who, scope))
        return 0;
    return skd_err_set(err, SKD_EFORBIDDEN, "this API key lacks the %s scope",
                       scope & SKD_SCOPE_ADMIN     ? "skills:admin"
                       : scope & SKD_SCOPE_EXECUTE ? "skills:execute"
                                                   : "skills:read");
}

static int need_store(skd_engine *e, skd_err *err)
{
    if (e->store)
        return 0;
    return skd_err_set(err, SKD_EINTERNAL, "this engine was opened for sandbox runs only");
}

skd_skill **skd_engine_visible_skills(skd_engine *e, const skd_actor *who, size_t *count)
{
    return skd_registry_list(e->reg, who->key_id, 1, 0, count);
}

skd_skill *skd_engine_find_skill(skd_engine *e, const skd_actor *who, const char *ref, skd_err *err)
{
    return skd_registry_lookup(e->reg, ref, who->key_id, err);
}

json_t *skd_engine_list_skills(skd_engine *e, const skd_actor *who, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err))
        return NULL;
    size_t n = 0;
    skd_skill **list = skd_engine_visible_skills(e, who, &n);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, skd_skill_to_json(list[i]));
    skd_skill_list_free(list, n);
    if (!arr)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return arr;
}

json_t *skd_engine_get_skill(skd_engine *e, const skd_actor *who, const char *ref, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err))
        return NULL;
    skd_skill *s = skd_engine_find_skill(e, who, ref, err);
    if (!s)
        return NULL;
    json_t *j = skd_skill_to_json(s);
    skd_skill_unref(s);
    if (!j)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return j;
}

json_t *skd_engine_list_executions(skd_engine *e, const skd_actor *who, const char *of_key,
                                   int limit, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    if (limit < 1 || limit > 500) {
        skd_err_set(err, SKD_EINVAL, "limit must be an integer from 1 to 500");
        return NULL;
    }
    const char *key = who->key_id;
    if (of_key && (!key || strcmp(of_key, key) != 0)) {
        if (need_scope(who, SKD_SCOPE_ADMIN, err))
            return NULL; /* another key's rows are the admin's to read */
        key = of_key;
    }
    if (!key) {
        skd_err_set(err, SKD_EINVAL, "name the key whose executions to list");
        return NULL;
    }
    return skd_store_audit_list(e->store, key, limit, err);
}

json_t *skd_engine_get_execution(skd_engine *e, const skd_actor *who, const char *id, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    if (!who->key_id) {
        skd_err_set(err, SKD_EINVAL, "name the key whose execution to read");
        return NULL;
    }
    /* The store looks the row up for this key only: another key's id is
     * indistinguishable from one that does not exist. */
    return skd_store_audit_get(e->store, who->key_id, id, err);
}

int skd_engine_metric_label_visible(skd_engine *e, const skd_actor *who, const char *skill)
{
    if (has_scope(who, SKD_SCOPE_ADMIN))
        return 1;
    if (!skill || !skd_skill_name_valid(skill))
        return 0;
    skd_skill *s = skd_registry_lookup(e->reg, skill, who->key_id, NULL);
    int ok = s != NULL;
    skd_skill_unref(s);
    return ok;
}

json_t *skd_engine_list_runs(skd_engine *e, const skd_actor *who, const char *state, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    return skd_store_run_list(e->store, has_scope(who, SKD_SCOPE_ADMIN) ? NULL : who->key_id, state,
                              500, err);
}

int skd_engine_cancel_run(skd_engine *e, const skd_actor *who, const char *id, skd_err *err)
{
    int rc = need_scope(who, SKD_SCOPE_EXECUTE, err);
    if (rc || (rc = need_store(e, err)))
        return rc;
    return skd_store_run_cancel(e->store, who->key_id, id, err);
}

int skd_engine_health(skd_engine *e, const char **backend, skd_err *err)
{
    int rc = need_store(e, err);
    *backend = skd_store_backend(e->store);
    if (rc)
        return rc;
    if (skd_store_draining(e->store))
        return skd_err_set(err, SKD_EBUSY, "this replica is stopping; calls in flight finish");
    return skd_store_ping(e->store, err);
}

int skd_engine_authenticate(skd_engine *e, const char *secret, skd_key_info *info, skd_err *err)
{
    int rc = need_store(e, err);
    if (rc)
        return rc;
    if (strlen(secret) > 256)
        return skd_err_set(err, SKD_EUNAUTH, "the API key is not valid");
    return skd_store_key_auth(e->store, secret, info, err);
}

int skd_engine_key_get(skd_engine *e, const char *id, skd_key_info *info, skd_err *err)
{
    int rc = need_store(e, err);
    if (rc)
        return rc;
    return skd_store_key_get(e->store, id, info, err);
}

json_t *skd_engine_list_keys(skd_engine *e, const skd_actor *who, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_ADMIN, err) || need_store(e, err))
        return NULL;
    return skd_store_key_list(e->store, err);
}

int skd_engine_create_key(skd_engine *e, const skd_actor *who, const char *name, unsigned scopes,
                          char **secret, skd_key_info *info, skd_err *err)
{
    int rc = need_scope(who, SKD_SCOPE_ADMIN, err);
    if (rc || (rc = need_store(e, err)) != 0)
        return rc;
    return skd_store_key_create(e->store, name, scopes, secret, info, err);
}

int skd_engine_revoke_key(skd_engine *e, const skd_actor *who, const char *id, skd_err *err)
{
    int rc = need_scope(who, SKD_SCOPE_ADMIN, err);
    if (rc || (rc = need_store(e, err)) != 0)
        return rc;
    if ((rc = skd_store_key_revoke(e->store, id, err)) != 0)
        return rc;
    /* A revoked key keeps nothing running: its live sandboxes end. */
    pthread_mutex_lock(&e->runner_mu);
    skd_runner *r = e->runner;
    if (r) {
        int n = skd_live_delete_key(r, id);
        if (n > 0)
            skd_info("key %s revoked: %d live sandbox(es) ended", id, n);
    }
    pthread_mutex_unlock(&e->runner_mu);
    return 0;
}
