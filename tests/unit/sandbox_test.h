/*
 * Shared helpers of the sandbox unit tests (header-only, static): a runner
 * per program, a one-call run, and the valgrind re-execution.
 *
 * Valgrind 3.19 (Debian 12) does not implement clone3, pidfd_open,
 * pidfd_send_signal, open_tree, mount_setattr, move_mount or seccomp, so
 * under SKILLD_UNDER_VALGRIND these programs re-execute themselves (valgrind
 * runs with --trace-children=no, so the new image runs natively) with
 * fewer iterations; every case still asserts the same things.
 */
#ifndef SKILLD_TESTS_SANDBOX_TEST_H
#define SKILLD_TESTS_SANDBOX_TEST_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "skilld/sandbox.h"
#include "tap.h"

static int sbt_light;

/* A result string or "" (results are NULL when a run was refused). */
#define S(x) ((x) ? (x) : "") /* fewer iterations (valgrind ring) */

static void sbt_maybe_reexec(int argc, char **argv)
{
    (void)argc;
    if (getenv("SKILLD_UNDER_VALGRIND") && !getenv("SKILLD_SANDBOX_TEST_NATIVE")) {
        setenv("SKILLD_SANDBOX_TEST_NATIVE", "1", 1);
        execv(argv[0], argv);
    }
    sbt_light = getenv("SKILLD_SANDBOX_TEST_NATIVE") != NULL;
}

/* Run argv (NULL-terminated) with cfg (NULL: defaults) and optional stdin;
 * returns the skd_sandbox_run code; res must be freed by the caller. */
__attribute__((unused)) static int sbt_run(skd_runner *r, const char *const *argv, const skd_sandbox_config *cfg,
                   const char *in, const char *ws, skd_sandbox_result *res)
{
    skd_sandbox_spec spec = {0};
    skd_err err = {0};
    spec.argv = argv;
    spec.config = cfg;
    spec.stdin_data = in;
    spec.stdin_len = in ? strlen(in) : 0;
    spec.workspace = ws;
    spec.key_id = "test-key";
    int rc = skd_sandbox_run(r, &spec, res, &err);
    if (rc)
        printf("# run failed: %s\n", skd_err_msg(&err));
    else if (res->error)
        printf("# sandbox error: %s\n", res->message);
    return rc;
}

__attribute__((unused)) static skd_sandbox_config sbt_cfg(void)
{
    skd_sandbox_config c;
    skd_sandbox_config_defaults(&c, NULL);
    c.timeout_ms = 10000;
    return c;
}

#endif
