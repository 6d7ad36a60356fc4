/*
 * Executions by skill, and usage by key and skill, counted by
 * skd_engine_execute for every call whatever its transport (the server
 * renders them at /metrics). Fixed tables under one mutex: a full skill
 * table folds new names into its last row, "other"; past
 * SKILLD_METRICS_MAX_KEYS keys, a new key's calls are summed under the key
 * "_other", and a full key table under ("_other", "other"), so a client
 * cannot make them grow without bound.
 */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 512
#define MAX_KEY_ROWS 4096

struct skd__exec_stats {
    pthread_mutex_t mu;
    size_t n;
    skd_exec_stat rows[MAX_ROWS];
    size_t max_keys; /* distinct keys with a label of their own */
    size_t nkeys;    /* distinct keys seen so far (up to max_keys) */
    size_t nk;
    skd_key_stat krows[MAX_KEY_ROWS];
};

skd__exec_stats *skd__exec_stats_new(size_t max_keys)
{
    skd__exec_stats *st = calloc(1, sizeof(*st));
    if (st) {
        pthread_mutex_init(&st->mu, NULL);
        st->max_keys = max_keys ? max_keys : 1;
    }
    return st;
}

void skd__exec_stats_free(skd__exec_stats *st)
{
    if (!st)
        return;
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* skill's label: "name@x.y.z" counts under name; a name the registry would
 * refuse (a typo in a call) under "other". */
static void skill_label(const char *skill, char *name, size_t cap)
{
    const char *at = skill ? strchr(skill, '@') : NULL;
    size_t n = skill ? (at ? (size_t)(at - skill) : strlen(skill)) : 0;
    if (n > 0 && n < cap) {
        memcpy(name, skill, n);
        name[n] = '\0';
    }
    if (n == 0 || n >= cap || !skd_skill_name_valid(name))
        skd_strlcpy(name, "other", cap);
}

/* The row of (key, skill), made when new; caller holds st->mu. */
static skd_key_stat *key_row(skd__exec_stats *st, const char *key, const char *skill)
{
    int key_known = 0;
    for (size_t i = 0; i < st->nk; i++) {
        if (strcmp(st->krows[i].key, key) != 0)
            continue;
        key_known = 1;
        if (strcmp(st->krows[i].skill, skill) == 0)
            return &st->krows[i];
    }
    if (!key_known && strcmp(key, "_other") != 0) {
        if (st->nkeys >= st->max_keys)
            return key_row(st, "_other", skill);
        st->nkeys++;
    }
    if (st->nk == MAX_KEY_ROWS - 1 && !(strcmp(key, "_other") == 0 && strcmp(skill, "other") == 0))
        return key_row(st, "_other", "other"); /* the last row is kept for the overflow */
    if (st->nk == MAX_KEY_ROWS)
        return &st->krows[MAX_KEY_ROWS - 1];
    skd_key_stat *r = &st->krows[st->nk++];
    memset(r, 0, sizeof(*r));
    skd_strlcpy(r->key, key, sizeof(r->key));
    skd_strlcpy(r->skill, skill, sizeof(r->skill));
    return r;
}

void skd__exec_stats_add_usage(skd__exec_stats *st, const char *key_id, const char *skill,
                               int success, const skd_usage *u)
{
    char name[sizeof(st->krows[0].skill)], key[sizeof(st->krows[0].key)];
    skill_label(skill, name, sizeof(name));
    /* Key ids are made by skilld ([A-Za-z0-9_-]); anything else is not a label. */
    size_t kl = key_id ? strlen(key_id) : 0;
    if (kl == 0 || kl >= sizeof(key) ||
        strspn(key_id, "abcdefghijklmnopqrstuvwxyz"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:") != kl)
        key_id = "_other";
    skd_strlcpy(key, key_id, sizeof(key));
    pthread_mutex_lock(&st->mu);
    skd_key_stat *r = key_row(st, key, name);
    if (success)
        r->ok++;
    else
        r->failed++;
    if (u) {
        r->sandbox_runs += (uint64_t)(u->sandbox_runs > 0 ? u->sandbox_runs : 0);
        r->cpu_us += (uint64_t)(u->cpu_us > 0 ? u->cpu_us : 0);
        r->egress_bytes += (uint64_t)(u->egress_bytes > 0 ? u->egress_bytes : 0);
        r->workspace_bytes += (uint64_t)(u->workspace_bytes > 0 ? u->workspace_bytes : 0);
    }
    pthread_mutex_unlock(&st->mu);
}

skd_key_stat *skd_engine_key_stats(skd_engine *e, size_t *n)
{
    skd__exec_stats *st = e->stats;
    *n = 0;
    if (!st)
        return NULL;
    pthread_mutex_lock(&st->mu);
    skd_key_stat *copy = st->nk ? malloc(st->nk * sizeof(*copy)) : NULL;
    if (copy) {
        memcpy(copy, st->krows, st->nk * sizeof(*copy));
        *n = st->nk;
    }
    pthread_mutex_unlock(&st->mu);
    return copy;
}

void skd__exec_stats_add(skd__exec_stats *st, const char *skill, int success, int64_t duration_ms)
{
    char name[sizeof(st->rows[0].skill)];
    skill_label(skill, name, sizeof(name));
    pthread_mutex_lock(&st->mu);
    size_t i;
    for (i = 0; i < st->n; i++)
        if (strcmp(st->rows[i].skill, name) == 0)
            break;
    if (i == st->n) {
        if (st->n == MAX_ROWS)
            i = MAX_ROWS - 1; /* the last row doubles as "other" */
        else
            st->n++;
        if (st->rows[i].skill[0] == '\0')
            skd_strlcpy(st->rows[i].skill, i == MAX_ROWS - 1 ? "other" : name,
                        sizeof(st->rows[i].skill));
    }
    if (success)
        st->rows[i].ok++;
    else
        st->rows[i].failed++;
    st->rows[i].seconds_sum += (double)duration_ms / 1000.0;
    pthread_mutex_unlock(&st->mu);
}

skd_exec_stat *skd_engine_exec_stats(skd_engine *e, size_t *n)
{
    skd__exec_stats *st = e->stats;
    *n = 0;
    if (!st)
        return NULL;
    pthread_mutex_lock(&st->mu);
    skd_exec_stat *copy = st->n ? malloc(st->n * sizeof(*copy)) : NULL;
    if (copy) {
        memcpy(copy, st->rows, st->n * sizeof(*copy));
        *n = st->n;
    }
    pthread_mutex_unlock(&st->mu);
    return copy;
}
