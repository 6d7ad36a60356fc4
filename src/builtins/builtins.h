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
