/*
 * bench/runner_loop: the cost a server pays per sandbox run, without process
 * start-up. Starts one runner (native provider, host image) in this process
 * and times N sequential skd_sandbox_run of `true` with a workspace, then
 * prints the median, minimum and maximum in milliseconds (one line, or JSON
 * with --json). Used by bench/sandbox-start for the row
 * "native (runner, in-process)". Must run as root, like the native provider.
 *
 * usage: build/bench/runner_loop [-n N] [--warmup W] [--json] DATA_DIR
 * Trusts its arguments (a developer tool); DATA_DIR is created if missing.
 */
#include "skilld/skilld.h"
#include "skilld/sandbox.h"
#include "skilld/workspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_N 10000

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int one(skd_runner *r, const char *ws, double *ms)
{
    static const char *const argv[] = {"true", NULL};
    skd_sandbox_spec spec = {.runtime = "native", .argv = argv, .workspace = ws, .key_id = "bench"};
    skd_sandbox_result res;
    skd_err err = {0};
    double t0 = now_ms();
    int rc = skd_sandbox_run(r, &spec, &res, &err);
    *ms = now_ms() - t0;
    if (rc) {
        fprintf(stderr, "runner_loop: %s\n", skd_err_msg(&err));
        return -1;
    }
    int ok = !res.error && res.exited && res.exit_code == 0;
    if (!ok)
        fprintf(stderr, "runner_loop: run failed: %s\n", res.error ? res.message : "exit != 0");
    skd_sandbox_result_free(&res);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int64_t n = 50, warm = 3;
    int json = 0, rc = 1;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            skd_parse_i64(argv[++i], 1, MAX_N, &n);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            skd_parse_i64(argv[++i], 0, MAX_N, &warm);
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: runner_loop [-n N] [--warmup W] [--json] DATA_DIR\n");
        return 2;
    }
    skd_config *cfg = skd_config_new();
    skd_runner *r = NULL;
    skd_workspace *ws = NULL;
    skd_err err = {0};
    static double t[MAX_N];
    if (!cfg || skd_config_set(cfg, "DATA_DIR", dir, &err) || skd_runner_new(cfg, NULL, &r, &err) ||
        skd_workspace_open(dir, "bench", &ws, &err)) {
        fprintf(stderr, "runner_loop: %s\n", skd_err_msg(&err));
        goto out;
    }
    for (int64_t i = 0; i < warm + n; i++) {
        double ms;
        if (one(r, skd_workspace_path(ws), &ms))
            goto out;
        if (i >= warm)
            t[i - warm] = ms;
    }
    if (json) { /* every time, in run order */
        printf("{\"n\": %lld, \"times_ms\": [", (long long)n);
        for (int64_t i = 0; i < n; i++)
            printf("%s%.3f", i ? ", " : "", t[i]);
        printf("]}\n");
        rc = 0;
        goto out;
    }
    qsort(t, (size_t)n, sizeof(t[0]), cmp_double);
    double med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    printf("runs %lld  median %.2f ms  min %.2f ms  max %.2f ms\n", (long long)n, med, t[0],
           t[n - 1]);
    rc = 0;
out:
    skd_workspace_close(ws);
    skd_runner_free(r);
    skd_config_free(cfg);
    return rc;
}
