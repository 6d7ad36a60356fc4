/*
 * What one caller may see and manage outside a skill call: the skills it
 * can list, its executions, the metric labels it may read, the keys (admin
 * only), and the audit row of a sandbox run made from the command line.
 * The engine is the one place that applies scopes and tenancy (DESIGN.md,
 * "Tenants and ceilings"): transports call these and never the registry or
 * the store for them. who->key_id NULL is the local operator: it passes
 * every scope check, and in listings sees the global skills.
 */
#ifndef SKILLD_TENANCY_H
#define SKILLD_TENANCY_H

#include "skilld/custom.h"
#include "skilld/skilld.h"
#include "skilld/store.h"

/* The skills who sees (newest version of each, enabled ones), as an array
 * of skill objects. Needs skills:read. New reference, or NULL with err. */
json_t *skd_engine_list_skills(skd_engine *e, const skd_actor *who, skd_err *err);

/* The skill objects behind skd_engine_list_skills, for transports that
 * build their own listing (MCP tools, the A2A card): the newest enabled
 * version of each skill who sees, in a stable order. No scope check (a
 * listing of tools is not a read of skills). Free with
 * skd_skill_list_free. */
skd_skill **skd_engine_visible_skills(skd_engine *e, const skd_actor *who, size_t *count);

/* The skill ref names as who sees it (a new reference, or NULL with err
 * not_found: another key's private skill does not exist for who). */
skd_skill *skd_engine_find_skill(skd_engine *e, const skd_actor *who, const char *ref,
                                 skd_err *err);

/* One skill ("name" or "name@version") as who sees it: another key's
 * private skill is not_found. Needs skills:read. New reference or NULL. */
json_t *skd_engine_get_skill(skd_engine *e, const skd_actor *who, const char *ref, skd_err *err);

/* Execution rows, newest first, at most limit (1..500). A key sees its own
 * rows; of_key names another key's, which only skills:admin may read.
 * Needs skills:read. New reference or NULL with err. */
json_t *skd_engine_list_executions(skd_engine *e, const skd_actor *who, const char *of_key,
                                   int limit, skd_err *err);

/* One execution row of who's own (another key's id is not_found, as if it
 * did not exist). New reference or NULL with err. */
json_t *skd_engine_get_execution(skd_engine *e, const skd_actor *who, const char *id, skd_err *err);

/* 1 when who may see a metric label naming skill (a built-in, a global
 * skill, or one of its own); skills:admin sees every label. */
int skd_engine_metric_label_visible(skd_engine *e, const skd_actor *who, const char *skill);

/* Executions by skill, counted by skd_engine_execute for every call,
 * whatever its transport. */
typedef struct skd_exec_stat {
    char skill[72]; /* a skill name, or "other" */
    unsigned long ok, failed;
    double seconds_sum;
} skd_exec_stat;
/* A copy of e's counters in the order the names were first seen: *n rows
 * in a new array (caller frees with free()); NULL with *n 0 when there are
 * none or out of memory. Every row, whoever may see it: the caller filters
 * with skd_engine_metric_label_visible. */
skd_exec_stat *skd_engine_exec_stats(skd_engine *e, size_t *n);

/* The key a bearer secret belongs to (live keys only): 0 with *info set, or
 * SKD_EUNAUTH. With OAuth configured (SKILLD_OAUTH_ISSUER), a secret that
 * is not an API key is verified as a JWT access token (include/skilld/
 * oauth.h) and its (issuer, sub) is the tenant: a key row "oa_<32 hex>"
 * made on first use, which an admin may revoke like any key; info->scopes
 * are then the token's scopes within that row's. SKD_ENETWORK or
 * SKD_EUPSTREAM when the issuer's keys cannot be had. */
int skd_engine_authenticate(skd_engine *e, const char *secret, skd_key_info *info, skd_err *err);
/* The resource server (borrowed), or NULL when OAuth is off. */
struct skd_oauth *skd_engine_oauth(skd_engine *e);
/* 1 when the key is an OAuth tenant rather than an API key. */
int skd_key_is_oauth(const skd_key_info *info);
/* The key with this id (revoked ones too, info->revoked says). */
int skd_engine_key_get(skd_engine *e, const char *id, skd_key_info *info, skd_err *err);

/* Keys: listing, creating and revoking need skills:admin. */
json_t *skd_engine_list_keys(skd_engine *e, const skd_actor *who, skd_err *err);
int skd_engine_create_key(skd_engine *e, const skd_actor *who, const char *name, unsigned scopes,
                          char **secret, skd_key_info *info, skd_err *err);
int skd_engine_revoke_key(skd_engine *e, const skd_actor *who, const char *id, skd_err *err);

/*
 * Secrets (src/engine/secrets.c): a key's own; with skills:admin, key may
 * name another (NULL or "": the caller's). set takes {name, value, hosts,
 * headers?, key?} (borrowed) and returns {name, hosts, headers?,
 * fingerprint, createdAt} (new ref), or NULL with err (SKD_EINVAL naming the
 * field, SKD_EQUOTA past SKILLS_SECRETS_MAX_PER_KEY). list returns the same
 * objects, never a value. delete: SKD_ENOENT when there is no such name.
 */
json_t *skd_engine_secret_set(skd_engine *e, const skd_actor *who, const json_t *body,
                              skd_err *err);
json_t *skd_engine_secret_list(skd_engine *e, const skd_actor *who, const char *key, skd_err *err);
int skd_engine_secret_delete(skd_engine *e, const skd_actor *who, const char *name, const char *key,
                             skd_err *err);

/* Sandbox runs and A2A tasks in the store's run table, over every replica
 * (docs/store.md): the caller's own, or every key's with skills:admin;
 * state NULL for all. New ref. */
json_t *skd_engine_list_runs(skd_engine *e, const skd_actor *who, const char *state, skd_err *err);
/* Ask the replica that runs the caller's run id to cancel it (needs
 * skills:execute). SKD_ENOENT when the caller has no such running run. */
int skd_engine_cancel_run(skd_engine *e, const skd_actor *who, const char *id, skd_err *err);
/* 0 when the store answers and this replica is not draining; SKD_EBUSY
 * while draining, SKD_ESTORE when the store fails. *backend: "sqlite" or
 * "postgresql" (static). */
int skd_engine_health(skd_engine *e, const char **backend, skd_err *err);

#endif
