/*
 * The store: SQLite in WAL mode at $DATA_DIR/skilld.db holding API keys
 * (only a SHA-256 of each secret), the execution audit, and the state other
 * parts keep (custom skills, search cache, A2A tasks). Migrations are
 * versioned (PRAGMA user_version). Safe to use from many threads.
 */
#ifndef SKILLD_STORE_H
#define SKILLD_STORE_H

#include <jansson.h>
#include <stdint.h>

#include "skilld/error.h"

typedef struct skd_store skd_store;

int skd_store_open(const char *path, skd_store **out, skd_err *err);
void skd_store_close(skd_store *st); /* NULL ok */

typedef struct skd_key_info {
    char id[64];
    char name[128];
    unsigned scopes; /* SKD_SCOPE_* */
    int64_t created_ms;
    int revoked;
} skd_key_info;

/* Create a key. *secret receives the secret, shown once (caller frees). */
int skd_store_key_create(skd_store *st, const char *name, unsigned scopes, char **secret,
                         skd_key_info *info, skd_err *err);
/* Find the live key whose secret this is (constant-time hash comparison).
 * SKD_EUNAUTH when unknown or revoked. */
int skd_store_key_auth(skd_store *st, const char *secret, skd_key_info *info, skd_err *err);
int skd_store_key_get(skd_store *st, const char *id, skd_key_info *info, skd_err *err);
int skd_store_key_revoke(skd_store *st, const char *id, skd_err *err);
/* Array of key objects {id, name, scopes[], created, revoked}. New ref. */
json_t *skd_store_key_list(skd_store *st, skd_err *err);
int skd_store_key_count(skd_store *st, int64_t *count, skd_err *err);

/* Scope names <-> bits ("skills:read,skills:execute"). */
int skd_scopes_parse(const char *csv, unsigned *scopes, skd_err *err);
json_t *skd_scopes_to_json(unsigned scopes);

typedef struct skd_audit {
    const char *id; /* execution UUID */
    const char *key_id;
    const char *skill;
    const char *version;
    const char *status;     /* "success" or "error" */
    const char *error_code; /* NULL on success */
    int64_t duration_ms;
    int64_t created_ms;
    const char *input_digest; /* hex SHA-256 of the compact input JSON */
    const char *egress;       /* networkEnabled runs: the egress record (JSON text), else NULL */
} skd_audit;

int skd_store_audit_add(skd_store *st, const skd_audit *a, skd_err *err);
/* The key's executions, newest first, at most limit. New ref (array). */
json_t *skd_store_audit_list(skd_store *st, const char *key_id, int limit, skd_err *err);
/* One execution of the key; NULL with SKD_ENOENT when absent or another
 * key's. New ref. */
json_t *skd_store_audit_get(skd_store *st, const char *key_id, const char *id, skd_err *err);

/*
 * A small key/value cache with expiry (src/store/cache.c), used for
 * web_search results. Keys and values are text chosen by the caller.
 */
/* The live value of key at time now_ms (wall clock). *value is a new string
 * (caller frees); SKD_ENOENT when absent or expired. */
int skd_store_cache_get(skd_store *st, const char *key, int64_t now_ms, char **value, skd_err *err);
/* Store value under key until now_ms + ttl_ms, replacing an older entry;
 * expired entries are purged on the way. */
int skd_store_cache_put(skd_store *st, const char *key, const char *value, int64_t now_ms,
                        int64_t ttl_ms, skd_err *err);

/* Custom skills (src/store/skills.c). owner NULL is a global skill. */
/* Insert or replace owner's name@version (taken from manifest, borrowed). */
int skd_store_skill_put(skd_store *st, const char *owner, const json_t *manifest,
                        const char *skill_dir, int enabled, skd_err *err);
/* Delete name@version (version NULL: every version) of owner; SKD_ENOENT
 * when nothing matched. */
int skd_store_skill_delete(skd_store *st, const char *name, const char *version, const char *owner,
                           skd_err *err);
int skd_store_skill_set_enabled(skd_store *st, const char *name, const char *version,
                                const char *owner, int enabled, skd_err *err);
/* Every stored skill: [{owner (null: global), manifest, skillDir (or
 * null), enabled}], oldest first. New ref. */
json_t *skd_store_skill_list(skd_store *st, skd_err *err);

/* A2A tasks (src/store/tasks.c), always read through their key. */
/* Insert or update task (borrowed, the internal task object). */
int skd_store_task_put(skd_store *st, const char *id, const char *key_id, const char *context_id,
                       const char *state, const json_t *task, skd_err *err);
/* The key's task id; NULL with SKD_ENOENT when absent or another key's. */
json_t *skd_store_task_get(skd_store *st, const char *key_id, const char *id, skd_err *err);
/* The key's tasks, newest update first, filtered by context_id and state
 * when not NULL; offset/limit page them; *total receives the filtered
 * count. New ref (array of task objects). */
json_t *skd_store_task_list(skd_store *st, const char *key_id, const char *context_id,
                            const char *state, int offset, int limit, int64_t *total, skd_err *err);
/* Delete tasks last updated before before_ms; *removed may be NULL. */
int skd_store_task_prune(skd_store *st, int64_t before_ms, int64_t *removed, skd_err *err);

#endif
