/*
 * Executions by skill, counted by skd_engine_execute for every call
 * whatever its transport (the server renders them at /metrics). A fixed
 * table under one mutex: a full table folds new names into its last row,
 * "other", so a client cannot make it grow without bound.
 */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 512

struct skd__exec_stats {
    pthread_mutex_t mu;
    size_t n;
    skd_exec_stat rows[MAX_ROWS];
};

skd__exec_stats *skd__exec_stats_new(void)
{
    skd__exec_stats *st = calloc(1, sizeof(*st));
    if (st)
        pthread_mutex_init(&st->mu, NULL);
    return st;
}

void skd__exec_stats_free(skd__exec_stats *st)
{
    if (!st)
        return;
    pthread_mutex_destroy(&st->mu);
    free(st);
}

void skd__exec_stats_add(skd__exec_stats *st, const char *skill, int success, int64_t duration_ms)
{
    char name[sizeof(st->rows[0].skill)];
    /* Only names the registry accepts become labels; anything else (a typo
     * in a call) is counted under "other". */
    const char *at = skill ? strchr(skill, '@') : NULL;
    size_t n = skill ? (at ? (size_t)(at - skill) : strlen(skill)) : 0;
    if (n > 0 && n < sizeof(name)) {
        memcpy(name, skill, n); /* "name@x.y.z" counts under name */
        name[n] = '\0';
    }
    if (n == 0 || n >= sizeof(name) || !skd_skill_name_valid(name))
        skd_strlcpy(name, "other", sizeof(name));
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
