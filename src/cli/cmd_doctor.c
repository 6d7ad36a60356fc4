/*
 * `skilld doctor [--json]`: report which isolation features and limits work
 * on this machine (skd_doctor_run in src/sandbox/doctor.c) as a table, with
 * what to change under each check that is not ok. Exit status 0 unless a
 * check failed.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "skilld/doctor.h"

static void print_table(const json_t *report)
{
    printf("kernel %s, uid %lld\n\n", skd_json_str(report, "kernel", "?"),
           skd_json_int(report, "uid", -1));
    printf("%-5s %-20s %s\n", "", "CHECK", "DETAIL");
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(report, "checks"), i, c) {
        const char *st = skd_json_str(c, "status", "?");
        printf("%-5s %-20s %s\n",
               strcmp(st, "ok") == 0     ? "ok"
               : strcmp(st, "warn") == 0 ? "WARN"
                                         : "FAIL",
               skd_json_str(c, "name", "?"), skd_json_str(c, "detail", ""));
        const char *fix = skd_json_str(c, "fix", NULL);
        if (fix)
            printf("%-5s %-20s   fix: %s\n", "", "", fix);
    }
    printf("\noverall: %s\n", skd_json_str(report, "status", "?"));
}

int skd__cli_doctor(skd_cli *cli, int argc, char **argv)
{
    int as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
    if (argc > 2 || (argc == 2 && !as_json))
        return skd__cli_usage("doctor", "usage: doctor [--json]");
    json_t *report = skd_doctor_run(cli->cfg);
    if (!report) {
        fprintf(stderr, "%s: doctor: out of memory\n", cli->prog);
        return CLI_FAIL;
    }
    if (as_json)
        skd__cli_print_json(report);
    else
        print_table(report);
    int failed = strcmp(skd_json_str(report, "status", "fail"), "fail") == 0;
    json_decref(report);
    return failed ? CLI_FAIL : CLI_OK;
}
