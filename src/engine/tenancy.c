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
#include "skilld/util.h"

#include <stdio.h>

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
     * indistinguishable from one that does not exist. skills:admin reads
     * any key's (the operator console's detail view). */
    return skd_store_audit_get(e->store, has_scope(who, SKD_SCOPE_ADMIN) ? NULL : who->key_id, id,
                               err);
}

json_t *skd_engine_query_executions(skd_engine *e, const skd_actor *who, skd_audit_filter *f,
                                    skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    if (f->limit < 1 || f->limit > 500) {
        skd_err_set(err, SKD_EINVAL, "limit must be an integer from 1 to 500");
        return NULL;
    }
    if (f->status && strcmp(f->status, "success") != 0 && strcmp(f->status, "error") != 0) {
        skd_err_set(err, SKD_EINVAL, "status must be success or error");
        return NULL;
    }
    if (!f->key_id) /* one's own */
        f->key_id = who->key_id;
    else if (strcmp(f->key_id, "*") == 0) /* every key's */
        f->key_id = NULL;
    if ((!f->key_id || !who->key_id || strcmp(f->key_id, who->key_id) != 0) &&
        need_scope(who, SKD_SCOPE_ADMIN, err))
        return NULL; /* another key's rows are the admin's to read */
    return skd_store_audit_query(e->store, f, err);
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
    /* skills:admin cancels any key's run (the operator console's kill). */
    return skd_store_run_cancel(e->store, has_scope(who, SKD_SCOPE_ADMIN) ? NULL : who->key_id, id,
                                err);
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

struct skd_oauth *skd_engine_oauth(skd_engine *e)
{
    return e->oauth;
}

int skd_key_is_oauth(const skd_key_info *info)
{
    return strncmp(info->id, "oa_", 3) == 0;
}

/* The tenant of a verified token: its key row, made on first use. The id
 * is a digest of (issuer, sub), so every replica names it alike. */
static int oauth_tenant(skd_engine *e, const skd_oauth_identity *id, skd_key_info *info,
                        skd_err *err)
{
    char digest[SKD_SHA256_HEX_LEN + 1], kid[40], name[128], both[800];
    int n = snprintf(both, sizeof(both), "%s\n%s", id->issuer, id->sub);
    if (n < 0 || (size_t)n >= sizeof(both))
        return skd_err_set(err, SKD_EUNAUTH, "invalid token: issuer and sub are too long");
    skd_sha256_hex(both, (size_t)n, digest);
    snprintf(kid, sizeof(kid), "oa_%.32s", digest);
    /* The name is for people reading GET /v1/keys: cut where it must be. */
    if (snprintf(name, sizeof(name), "oauth %.100s @ %.200s", id->sub, id->issuer) < 0)
        name[0] = '\0';
    name[skd_utf8_cut(name, strlen(name))] = '\0';
    int rc =
        skd_store_key_ensure(e->store, kid, name, skd_oauth_allowed_scopes(e->oauth), info, err);
    if (rc)
        return rc;
    if (info->revoked)
        return skd_err_set(err, SKD_EUNAUTH, "this OAuth tenant has been disabled by an admin");
    info->scopes &= id->scopes;
    return 0;
}

int skd_engine_authenticate(skd_engine *e, const char *secret, skd_key_info *info, skd_err *err)
{
    int rc = need_store(e, err);
    if (rc)
        return rc;
    if (e->oauth && strncmp(secret, "skd_", 4) != 0) {
        skd_oauth_identity id;
        if ((rc = skd_oauth_verify(e->oauth, secret, &id, err)) != 0)
            return rc;
        return oauth_tenant(e, &id, info, err);
    }
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
    /* A revoked key keeps nothing running: its live sandboxes here end
     * (those of other replicas end at their next tick, live_tick.c). */
    pthread_mutex_lock(&e->runner_mu);
    if (e->runner)
        skd__engine_live_end_key(e->runner, id);
    pthread_mutex_unlock(&e->runner_mu);
    /* And its paused ones that no replica holds (their server stopped). */
    int n = skd__engine_live_drop_unheld(e, id);
    if (n > 0)
        skd_info("key %s revoked: %d paused sandbox(es) of stopped servers removed", id, n);
    return 0;
}
