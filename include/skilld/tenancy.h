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

/* Execution rows matching f (skd_store_audit_query), newest first: f->key_id
 * NULL is who's own, "*" every key's; another key's (or "*") needs
 * skills:admin. Needs skills:read. New reference or NULL. */
json_t *skd_engine_query_executions(skd_engine *e, const skd_actor *who, skd_audit_filter *f,
                                    skd_err *err);

/* One execution row of who's own (another key's id is not_found, as if it
 * did not exist; skills:admin reads any key's). New reference or NULL. */
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

/* Usage by key and skill, counted by skd_engine_execute (metering): the
 * key is a key id or "_other" (past SKILLD_METRICS_MAX_KEYS keys, or a
 * full table), the skill a name or "other". */
typedef struct skd_key_stat {
    char key[72];
    char skill[72];
    unsigned long ok, failed;
    uint64_t sandbox_runs, cpu_us, egress_bytes, workspace_bytes;
} skd_key_stat;
/* A copy of e's rows (caller frees with free()); *n rows, NULL with *n 0
 * when there are none. Every key's: the caller shows a key without
 * skills:admin its own rows only (skd_engine_key_label_visible). */
skd_key_stat *skd_engine_key_stats(skd_engine *e, size_t *n);
/* 1 when who may see the per-key metric rows of key ("_other" included):
 * skills:admin sees all, a key its own. */
int skd_engine_key_label_visible(const skd_actor *who, const char *key);

/* Usage per key over [since_ms, until_ms) from the audit (every replica's
 * calls): {since, until, usage: [...]} as skd_store_usage, plus series:
 * [...] as skd_store_usage_series when bucket_ms > 0. A key sees its own
 * row only; of_key names one key (another's: skills:admin only), NULL for
 * every key the actor may see. Needs skills:read. New ref or NULL. */
json_t *skd_engine_usage(skd_engine *e, const skd_actor *who, const char *of_key, int64_t since_ms,
                         int64_t until_ms, int64_t bucket_ms, skd_err *err);

/* Operator console sessions (src/engine/console.c). A session acts as the
 * admin key that signed in, for as long as that key is live and keeps
 * skills:admin, until it expires (SKILLD_UI_SESSION_SECONDS). */
#define SKD_UI_TOKEN_LEN 64 /* hex characters of a session or CSRF token */
/* Sign in with an API key's secret: it must be live and have skills:admin
 * (else SKD_EUNAUTH / SKD_EFORBIDDEN). Fills token (the cookie's value,
 * never stored), csrf, *info and *expires_ms. */
int skd_engine_ui_signin(skd_engine *e, const char *secret, char token[SKD_UI_TOKEN_LEN + 1],
                         char csrf[SKD_UI_TOKEN_LEN + 1], skd_key_info *info, int64_t *expires_ms,
                         skd_err *err);
/* The session of token: 0 with *info and csrf set; SKD_EUNAUTH when there
 * is none, it expired, or its key was revoked or lost skills:admin;
 * SKD_ESTORE when the store fails. */
int skd_engine_ui_session(skd_engine *e, const char *token, skd_key_info *info,
                          char csrf[SKD_UI_TOKEN_LEN + 1], skd_err *err);
/* End the session of token (0 when there was none). */
int skd_engine_ui_signout(skd_engine *e, const char *token, skd_err *err);

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
