/*
 * Metrics (see metrics.h and include/skilld/server.h). One mutex guards the
 * small fixed table of HTTP requests; a full table drops new rows so the
 * exposition stays bounded. Executions are counted by the engine for every
 * transport (skd_engine_exec_stats) and only rendered here; rows labelled
 * with a skill are shown to a caller only when the engine says the caller
 * may see that name. Gauges owned by other parts (running sandboxes,
 * rejected outbound connections) are read through getters those parts
 * install.
 */
#include "net/egress.h"
#include "server/metrics.h"
#include "skilld/oauth.h"
#include "skilld/tenancy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQ_ROWS 256

struct req_row {
    const char *route;
    unsigned status;
    unsigned long count;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct req_row reqs[MAX_REQ_ROWS];
static size_t nreqs;
static long (*running_fn)(void);
static unsigned long (*rejected_fn)(void);

void skd_metrics_set_running_sandboxes_fn(long (*fn)(void))
{
    pthread_mutex_lock(&mu);
    running_fn = fn;
    pthread_mutex_unlock(&mu);
}

void skd_metrics_set_outbound_rejected_fn(unsigned long (*fn)(void))
{
    pthread_mutex_lock(&mu);
    rejected_fn = fn;
    pthread_mutex_unlock(&mu);
}

void skd__metrics_request(const char *route, unsigned status)
{
    pthread_mutex_lock(&mu);
    size_t i;
    for (i = 0; i < nreqs; i++)
        if (reqs[i].status == status && strcmp(reqs[i].route, route) == 0)
            break;
    if (i == nreqs && nreqs < MAX_REQ_ROWS)
        reqs[nreqs++] = (struct req_row){route, status, 0};
    if (i < nreqs)
        reqs[i].count++;
    pthread_mutex_unlock(&mu);
}

void skd__metrics_reset(void)
{
    pthread_mutex_lock(&mu);
    nreqs = 0;
    pthread_mutex_unlock(&mu);
}

static int by_key_skill(const void *a, const void *b)
{
    const skd_key_stat *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->skill, y->skill);
}

/* Per-key usage (metering): a caller without skills:admin sees only its
 * own key's rows (key_visible), and their skill labels as visible says. */
static int render_keys(skd_buf *b, skd_engine *e, int (*visible)(void *arg, const char *skill),
                       int (*key_visible)(void *arg, const char *key), void *arg)
{
    size_t n = 0;
    int rc = 0;
    skd_key_stat *k = skd_engine_key_stats(e, &n);
    for (size_t i = 0; i < n; i++) {
        if (key_visible && !key_visible(arg, k[i].key))
            k[i].key[0] = '\0'; /* not this caller's to see */
        else if (visible && strcmp(k[i].skill, "other") != 0 && !visible(arg, k[i].skill))
            skd_strlcpy(k[i].skill, "other", sizeof(k[i].skill)); /* counted, not named */
    }
    if (n > 1) /* each key's rows together, and one skill's of a key next to each other */
        qsort(k, n, sizeof(*k), by_key_skill);
    rc |= skd_buf_puts(b, "# HELP skilld_key_executions_total Skill executions by key, skill "
                          "and result.\n"
                          "# TYPE skilld_key_executions_total counter\n");
    for (size_t i = 0; i < n;) {
        size_t j = i;
        unsigned long ok = 0, failed = 0;
        for (; j < n && strcmp(k[j].key, k[i].key) == 0 && strcmp(k[j].skill, k[i].skill) == 0; j++)
            ok += k[j].ok, failed += k[j].failed;
        if (k[i].key[0])
            rc |= skd_buf_printf(b,
                                 "skilld_key_executions_total{key=\"%s\",skill=\"%s\","
                                 "status=\"success\"} %lu\n"
                                 "skilld_key_executions_total{key=\"%s\",skill=\"%s\","
                                 "status=\"error\"} %lu\n",
                                 k[i].key, k[i].skill, ok, k[i].key, k[i].skill, failed);
        i = j;
    }
    /* The rest are per key: rows of one key summed over its skills. */
    static const char *const names[] = {
        "skilld_sandbox_runs_total", "skilld_sandbox_cpu_seconds_total",
        "skilld_egress_bytes_total", "skilld_workspace_bytes_written_total"};
    static const char *const help[] = {"Sandbox runs by key.",
                                       "Sandbox CPU time by key, from each run's cgroup.",
                                       "Bytes through the sandbox egress proxy by key, both ways.",
                                       "Bytes of files written into the workspace by key."};
    for (int m = 0; m < 4; m++) {
        rc |= skd_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", names[m], help[m], names[m]);
        for (size_t i = 0; i < n;) {
            size_t j = i;
            uint64_t sum = 0;
            for (; j < n && strcmp(k[j].key, k[i].key) == 0; j++)
                sum += m == 0   ? k[j].sandbox_runs
                       : m == 1 ? k[j].cpu_us
                       : m == 2 ? k[j].egress_bytes
                                : k[j].workspace_bytes;
            if (!k[i].key[0])
                ; /* not this caller's to see */
            else if (m == 1)
                rc |= skd_buf_printf(b, "%s{key=\"%s\"} %.6f\n", names[m], k[i].key,
                                     (double)sum / 1e6);
            else
                rc |= skd_buf_printf(b, "%s{key=\"%s\"} %llu\n", names[m], k[i].key,
                                     (unsigned long long)sum);
            i = j;
        }
    }
    free(k);
    return rc;
}

int skd__metrics_render(skd_buf *b, skd_engine *e, size_t in_flight,
                        int (*visible)(void *arg, const char *skill),
                        int (*key_visible)(void *arg, const char *key), void *arg)
{
    int rc = 0;
    /* A copy of the engine's rows: the visibility check (the engine, the
     * registry's lock) runs with no lock of theirs or ours held. */
    size_t nrows = 0;
    skd_exec_stat *rows = skd_engine_exec_stats(e, &nrows);
    pthread_mutex_lock(&mu);
    rc |= skd_buf_puts(b, "# HELP skilld_http_requests_total HTTP requests answered.\n"
                          "# TYPE skilld_http_requests_total counter\n");
    for (size_t i = 0; i < nreqs; i++)
        rc |= skd_buf_printf(b, "skilld_http_requests_total{route=\"%s\",status=\"%u\"} %lu\n",
                             reqs[i].route, reqs[i].status, reqs[i].count);
    long (*rf)(void) = running_fn;
    unsigned long (*jf)(void) = rejected_fn;
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < nrows; i++)
        if (visible && strcmp(rows[i].skill, "other") != 0 && !visible(arg, rows[i].skill))
            rows[i].skill[0] = '\0'; /* not this caller's to see */
    rc |= skd_buf_puts(b, "# HELP skilld_executions_total Skill executions by result.\n"
                          "# TYPE skilld_executions_total counter\n");
    for (size_t i = 0; i < nrows; i++) {
        if (!rows[i].skill[0])
            continue;
        rc |= skd_buf_printf(b, "skilld_executions_total{skill=\"%s\",status=\"success\"} %lu\n",
                             rows[i].skill, rows[i].ok);
        rc |= skd_buf_printf(b, "skilld_executions_total{skill=\"%s\",status=\"error\"} %lu\n",
                             rows[i].skill, rows[i].failed);
    }
    rc |= skd_buf_puts(b, "# HELP skilld_execution_duration_seconds Time spent in skills.\n"
                          "# TYPE skilld_execution_duration_seconds summary\n");
    for (size_t i = 0; i < nrows; i++) {
        if (!rows[i].skill[0])
            continue;
        rc |= skd_buf_printf(b, "skilld_execution_duration_seconds_sum{skill=\"%s\"} %.6f\n",
                             rows[i].skill, rows[i].seconds_sum);
        rc |= skd_buf_printf(b, "skilld_execution_duration_seconds_count{skill=\"%s\"} %lu\n",
                             rows[i].skill, rows[i].ok + rows[i].failed);
    }
    free(rows);
    rc |= render_keys(b, e, visible, key_visible, arg);
    /* Outside the lock: a getter may take its owner's locks. */
    long running = rf ? rf() : 0;
    unsigned long rejected = jf ? jf() : 0;
    rc |= skd_buf_printf(b,
                         "# HELP skilld_sandboxes_running Sandboxes running now.\n"
                         "# TYPE skilld_sandboxes_running gauge\n"
                         "skilld_sandboxes_running %ld\n"
                         "# HELP skilld_outbound_rejected_total Outbound connections refused "
                         "by the guard.\n"
                         "# TYPE skilld_outbound_rejected_total counter\n"
                         "skilld_outbound_rejected_total %lu\n"
                         "# HELP skilld_calls_in_flight Skill calls running now.\n"
                         "# TYPE skilld_calls_in_flight gauge\n"
                         "skilld_calls_in_flight %zu\n",
                         running, rejected, in_flight);
    /* The sandbox egress proxy (src/net/egress.h). */
    rc |= skd_buf_printf(b,
                         "# HELP skilld_egress_refused_total Sandbox egress requests refused by "
                         "the proxy.\n"
                         "# TYPE skilld_egress_refused_total counter\n"
                         "skilld_egress_refused_total %llu\n"
                         "# HELP skilld_egress_cut_total Sandbox egress connections cut at a "
                         "limit.\n"
                         "# TYPE skilld_egress_cut_total counter\n"
                         "skilld_egress_cut_total %llu\n",
                         (unsigned long long)skd_egress_refused_total(),
                         (unsigned long long)skd_egress_cut_total());
    /* The OAuth issuers' key sets (src/engine/oauth.c), when OAuth is on. */
    struct skd_oauth *o = skd_engine_oauth(e);
    if (o)
        rc |= skd_buf_printf(b,
                             "# HELP skilld_oauth_jwks_fetches_total Fetches of the OAuth "
                             "issuers' key sets.\n"
                             "# TYPE skilld_oauth_jwks_fetches_total counter\n"
                             "skilld_oauth_jwks_fetches_total %llu\n",
                             (unsigned long long)skd_oauth_jwks_fetches(o));
    return rc ? SKD_ETOOBIG : 0;
}
