/*
 * Library-internal declarations of the built-in skills. Each fills a
 * skd_skill_def whose input_schema (and output_schema) are new references
 * owned by the caller, which releases them after registering.
 */
#ifndef SKILLD_BUILTINS_H
#define SKILLD_BUILTINS_H

#include "skilld/skilld.h"

void skd__builtin_file_read_def(skd_skill_def *d);
void skd__builtin_file_write_def(skd_skill_def *d);
void skd__builtin_file_list_def(skd_skill_def *d);
void skd__builtin_file_delete_def(skd_skill_def *d);
void skd__builtin_http_request_def(skd_skill_def *d);
void skd__builtin_web_fetch_def(skd_skill_def *d);
void skd__builtin_web_search_def(skd_skill_def *d);
void skd__builtin_execute_command_def(skd_skill_def *d);
void skd__builtin_eval_code_def(skd_skill_def *d);
void skd__builtin_skills_register_def(skd_skill_def *d);
void skd__builtin_skill_run_def(skd_skill_def *d);
void skd__builtin_sandbox_create_def(skd_skill_def *d); /* sandbox_live.c */
void skd__builtin_sandbox_exec_def(skd_skill_def *d);
void skd__builtin_sandbox_list_def(skd_skill_def *d);
void skd__builtin_sandbox_delete_def(skd_skill_def *d);
void skd__builtin_sandbox_processes_def(skd_skill_def *d);
void skd__builtin_secrets_list_def(skd_skill_def *d);
/* For the live sandbox skills (sandbox_live.c, sandbox_snap.c): the input
 * schema {sandboxId}, and the runner of ctx, or NULL with *res the error
 * result. */
extern const char skd__builtin_sandbox_id_schema[];
skd_runner *skd__builtin_runner(const skd_ctx *ctx, json_t **res);
/* A live sandbox is a row of the store for its life (src/store/live_rows.c):
 * row_begin picks its id and records it as this replica's, once the key's
 * live sandboxes over every replica are under SKILLS_SANDBOX_MAX_LIVE_PER_KEY
 * (SKD_EBUSY past it); row_end ends that row when the sandbox could not be
 * made; row_set records its object sb (borrowed) and where this replica is
 * reached (SKILLD_REPLICA_URL), so that the others list it and forward its
 * calls here. A row the store did not take costs the sandbox its listing on
 * the other replicas, not the call. */
int skd__builtin_live_row_begin(const skd_ctx *ctx, char id[SKD_UUID_LEN + 1], skd_err *err);
void skd__builtin_live_row_end(const skd_ctx *ctx, const char *id);
void skd__builtin_live_row_set(const skd_ctx *ctx, const json_t *sb);
void skd__builtin_sandbox_pause_def(skd_skill_def *d); /* sandbox_snap.c */
void skd__builtin_sandbox_resume_def(skd_skill_def *d);
void skd__builtin_sandbox_fork_def(skd_skill_def *d);

/* skilld exec's skill, registered by the command line in its one-call
 * engine only (src/builtins/exec.c); not in the list below. */
void skd__builtin_exec_def(skd_skill_def *d);

/* Registration order; add new built-ins here, one per line. */
#define SKD__BUILTIN_LIST                                                                          \
    skd__builtin_file_read_def, skd__builtin_file_write_def, skd__builtin_file_list_def,           \
        skd__builtin_file_delete_def, skd__builtin_http_request_def, skd__builtin_web_fetch_def,   \
        skd__builtin_web_search_def, skd__builtin_execute_command_def, skd__builtin_eval_code_def, \
        skd__builtin_skills_register_def, skd__builtin_skill_run_def,                              \
        skd__builtin_sandbox_create_def, skd__builtin_sandbox_exec_def,                            \
        skd__builtin_sandbox_list_def, skd__builtin_sandbox_delete_def,                            \
        skd__builtin_sandbox_processes_def, skd__builtin_sandbox_pause_def,                        \
        skd__builtin_sandbox_resume_def, skd__builtin_sandbox_fork_def,                            \
        skd__builtin_secrets_list_def, /* end */

#endif
