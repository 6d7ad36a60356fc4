/*
 * What execute_command and eval_code share: running one command in the
 * caller's sandbox (workspace at /workspace, the engine's runner, the
 * call's cancellation and progress) and shaping the skill result with
 * OmniRoute's fields.
 */
#ifndef SKILLD_BUILTINS_SANDBOX_SKILL_H
#define SKILLD_BUILTINS_SANDBOX_SKILL_H

#include "skilld/skilld.h"

typedef struct skd__sbx_call {
    const char *const *argv; /* NULL-terminated */
    const json_t *env;       /* object of strings or NULL; added to the defaults */
    const char *image;       /* NULL: host */
    const char *stdin_data;  /* may be NULL */
    size_t stdin_len;
    long long
        timeout_ms; /* 0: SKILLS_SANDBOX_TIMEOUT_MS; above SKILLS_SANDBOX_MAX_TIMEOUT_MS: refused */
    int network_enabled;   /* -1: not asked (false); 1 needs SKILLS_SANDBOX_NETWORK_ENABLED */
    const char *skill_dir; /* host folder mounted read-only at /skill, or NULL */
    const char *live_id;   /* run in the caller's live sandbox of this id, or NULL */
    const char *cwd;       /* working directory inside, or NULL: the default */
} skd__sbx_call;

/* The input schema of a sandbox skill: text (its own properties) with
 * timeoutMs and networkEnabled as the limits table says. New reference;
 * NULL when text does not parse. */
json_t *skd__sandbox_skill_schema(const char *text);

/* Run and return the skill result (new reference). A timeout above the
 * operator's ceiling is invalid_input naming it; networkEnabled true without
 * SKILLS_SANDBOX_NETWORK_ENABLED is forbidden. Success when the command
 * exited 0; exitCode, stdout, stderr, output, truncated, durationMs,
 * killed, timedOut, oomKilled, signal, sandboxId, runtime; an error object
 * when it timed out, was cancelled, or could not run. */
json_t *skd__sandbox_skill_run(const skd_ctx *ctx, const skd__sbx_call *call);

/* The command's environment: the defaults, then extra's (an object of
 * strings or NULL), each a NAME. NULL with *out set (free it with
 * skd__sandbox_skill_env_free), or an error result (new reference). */
json_t *skd__sandbox_skill_env(const json_t *extra, char ***out);
void skd__sandbox_skill_env_free(char **env);

#endif
