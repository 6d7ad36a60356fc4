/*
 * `skilld doctor [--json]`: report which isolation features and limits work
 * on this machine (skd_doctor_run in src/sandbox/doctor.c) as a table, with
 * what to change under each check that is not ok, and the first failure
 * with its fix at the end. Exit status 0 unless a check failed.
 *
 * Its verdict is a real call's: before the probes it runs the preparation
 * every subcommand runs (privsep.c): started as root, the service user
 * exists and can reach and write DATA_DIR (checked as that user, nothing
 * changed); rootless, this user can. The probes then run a sandboxed
 * `true` through a real runner, which forks the spawner and prepares the
 * cgroup it will use, as a call does. With OAuth on, the last check reads
 * every issuer's metadata and key set, as a server's first token would.
 */
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "skilld/doctor.h"
#include "skilld/oauth.h"

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
    json_array_foreach (json_object_get(report, "checks"), i, c) {
        if (strcmp(skd_json_str(c, "status", ""), "fail") != 0)
            continue;
        printf("first failure: %s: %s\n", skd_json_str(c, "name", "?"),
               skd_json_str(c, "detail", ""));
        printf("  fix: %s\n", skd_json_str(c, "fix", "(none)"));
        break;
    }
}

/* The data_dir check, a new object (first in the report: a call checks it
 * first). Run before the probes, while this process has one thread. */
static json_t *check_data_dir(skd_cli *cli)
{
    char why[4600] = "";
    const char *dir = skd_config_str(cli->cfg, "DATA_DIR");
    const char *user = skd_config_str(cli->cfg, "SKILLD_USER");
    int root = geteuid() == 0, rc = 0;
    struct passwd *pw = root ? getpwnam(user) : NULL;
    if (root && (!pw || pw->pw_uid == 0)) {
        snprintf(why, sizeof(why),
                 "started as root, skilld drops to the system user '%s' (SKILLD_USER), which %s; "
                 "fix: useradd --system --no-create-home --shell /usr/sbin/nologin %s",
                 user, pw ? "is root" : "does not exist", user);
        rc = -1;
    } else {
        rc = skd__cli_data_dir_check(dir, pw, why, sizeof(why));
    }
    char *fix = rc ? strstr(why, "; fix: ") : NULL;
    if (fix)
        *fix = '\0';
    json_t *c = rc ? json_pack("{s:s, s:s, s:s, s:s}", "name", "data_dir", "status", "fail",
                               "detail", why, "fix", fix ? fix + 7 : "see the detail")
                   : json_pack("{s:s, s:s, s:s++}", "name", "data_dir", "status", "ok", "detail",
                               "DATA_DIR ", dir,
                               root ? " is reachable and writable by the service user"
                                    : " is reachable and writable");
    return c;
}

/* The oauth check (SKILLD_OAUTH_ISSUER set): the settings hold, and every
 * issuer's metadata and key set can be read from here. A new object, or
 * NULL when OAuth is off. */
static json_t *check_oauth(skd_cli *cli)
{
    skd_oauth *o = NULL;
    skd_err err = {0};
    if (!*skd_config_str(cli->cfg, "SKILLD_OAUTH_ISSUER"))
        return NULL;
    if (skd_oauth_new(cli->cfg, &o, &err) != 0)
        return json_pack("{s:s, s:s, s:s, s:s}", "name", "oauth", "status", "fail", "detail",
                         skd_err_msg(&err), "fix",
                         "correct SKILLD_PUBLIC_URL, SKILLD_OAUTH_ISSUER or SKILLD_OAUTH_SCOPES");
    json_t *issuers = skd_oauth_probe(o);
    skd_oauth_free(o);
    char detail[2048] = "";
    size_t n = 0, i;
    int ok = issuers != NULL;
    json_t *v;
    json_array_foreach (issuers, i, v) {
        ok &= json_is_true(json_object_get(v, "ok"));
        if (n < sizeof(detail))
            n += (size_t)snprintf(detail + n, sizeof(detail) - n, "%s%s: %s", i ? "; " : "",
                                  skd_json_str(v, "issuer", "?"), skd_json_str(v, "detail", ""));
    }
    json_decref(issuers);
    json_t *c = json_pack("{s:s, s:s, s:s}", "name", "oauth", "status", ok ? "ok" : "fail",
                          "detail", detail);
    if (c && !ok)
        json_object_set_new(c, "fix",
                            json_string("each issuer's /.well-known/oauth-authorization-server "
                                        "or /.well-known/openid-configuration, and its "
                                        "jwks_uri, must answer from this host; check "
                                        "SKILLD_OAUTH_ISSUER"));
    return c;
}

int skd__cli_doctor(skd_cli *cli, int argc, char **argv)
{
    int as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
    if (argc > 2 || (argc == 2 && !as_json))
        return skd__cli_usage("doctor", "usage: doctor [--json]");
    json_t *dd = check_data_dir(cli);
    json_t *report = skd_doctor_run(cli->cfg);
    if (!report || !dd) {
        json_decref(dd);
        json_decref(report);
        fprintf(stderr, "%s: doctor: out of memory\n", cli->prog);
        return CLI_FAIL;
    }
    if (strcmp(skd_json_str(dd, "status", ""), "fail") == 0)
        json_object_set_new(report, "status", json_string("fail"));
    json_array_insert_new(json_object_get(report, "checks"), 0, dd);
    json_t *oa = check_oauth(cli);
    if (oa) {
        if (strcmp(skd_json_str(oa, "status", ""), "fail") == 0)
            json_object_set_new(report, "status", json_string("fail"));
        json_array_append_new(json_object_get(report, "checks"), oa);
    }
    if (as_json)
        skd__cli_print_json(report);
    else
        print_table(report);
    int failed = strcmp(skd_json_str(report, "status", "fail"), "fail") == 0;
    json_decref(report);
    return failed ? CLI_FAIL : CLI_OK;
}
