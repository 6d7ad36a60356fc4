/*
 * The skilld command line: shared state of one invocation and the
 * subcommand table. Each subcommand lives in src/cli/cmd_<name>.c and is a
 * thin client of libskilld.
 */
#ifndef SKILLD_CLI_H
#define SKILLD_CLI_H

#include "skilld/skilld.h"

#include <signal.h>

/* Exit statuses of every subcommand. */
#define CLI_OK 0
#define CLI_FAIL 1  /* the operation ran and failed (skill success false, ...) */
#define CLI_USAGE 2 /* bad command line */

typedef struct skd_cli {
    skd_config *cfg;    /* loaded: defaults < file < environment < global flags */
    skd_engine *engine; /* NULL until skd__cli_engine() */
    const char *prog;
    int one_run; /* the subcommand starts at most one sandbox (skilld exec) */
} skd_cli;

/* Open the engine on first use. Prints the error and returns NULL when it
 * cannot be opened. Borrowed; closed by main. */
skd_engine *skd__cli_engine(skd_cli *cli);
/* The same with skd_engine_open_flags flags; starts the sandbox spawner
 * and, as root, drops to SKILLD_USER first (src/cli/privsep.c). */
skd_engine *skd__cli_engine_flags(skd_cli *cli, unsigned flags);
/* Run fn(cli, arg, fd) in a child process that, when skilld was started as
 * root, holds SKILLD_USER's ids and no capability (DATA_DIR handed to that
 * user first), with no_new_privs either way; for work that parses hostile
 * bytes without an engine. fn writes its answer to fd and returns CLI_OK or
 * CLI_FAIL. On CLI_OK, *reply (malloc'd, *len bytes, at most cap) holds
 * the answer as opaque bytes; otherwise the child's status. */
int skd__cli_unprivileged(skd_cli *cli, int (*fn)(skd_cli *, void *, int), void *arg, char **reply,
                          size_t *len, size_t cap);

/* Print a usage error for subcommand cmd and return CLI_USAGE. */
/* Block SIGINT and SIGTERM in this thread (threads started afterwards
 * inherit the mask) and ignore SIGPIPE; *set receives the two stop signals
 * for sigwait or signalfd. */
void skd__cli_block_stop_signals(sigset_t *set);

/* DATA_DIR's default when skilld is started as root (FHS); ./var (the
 * table's default) otherwise. */
#define SKD_ROOT_DATA_DIR "/var/lib/skilld"
struct passwd;
/* Whether user pw (NULL: this process, rootless) can reach DATA_DIR dir
 * and write it, checked in a child with pw's ids before anything in dir is
 * touched; 0, or -1 with the reason and its fix in why. Call it while this
 * process has one thread (it forks). */
int skd__cli_data_dir_check(const char *dir, const struct passwd *pw, char *why, size_t cap);
int skd__cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Read an --input argument: inline JSON, @FILE or - (stdin), capped at
 * SKILLD_MAX_BODY_BYTES. Returns a new reference or NULL after printing why. */
json_t *skd__cli_read_json(skd_cli *cli, const char *arg);

/* Print a JSON value (pretty, with a newline) to stdout. */
void skd__cli_print_json(const json_t *v);

/* Subcommands: argv[0] is the subcommand name. */
typedef int (*skd_cli_fn)(skd_cli *cli, int argc, char **argv);
int skd__cli_run(skd_cli *cli, int argc, char **argv);
int skd__cli_skills(skd_cli *cli, int argc, char **argv);
int skd__cli_keys(skd_cli *cli, int argc, char **argv);
int skd__cli_secrets(skd_cli *cli, int argc, char **argv);
int skd__cli_exec(skd_cli *cli, int argc, char **argv);
int skd__cli_image(skd_cli *cli, int argc, char **argv);
int skd__cli_doctor(skd_cli *cli, int argc, char **argv);
int skd__cli_serve(skd_cli *cli, int argc, char **argv);
int skd__cli_mcp(skd_cli *cli, int argc, char **argv);

#endif
