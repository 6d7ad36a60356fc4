/*
 * libskilld: the engine that ties configuration, the store, the registry,
 * workspaces and the sandbox runner together, and the one entry point every
 * transport uses to execute a skill.
 */
#ifndef SKILLD_SKILLD_H
#define SKILLD_SKILLD_H

#include <jansson.h>

#include "skilld/buf.h"
#include "skilld/config.h"
#include "skilld/error.h"
#include "skilld/json.h"
#include "skilld/log.h"
#include "skilld/registry.h"
#include "skilld/util.h"

#define SKD_VERSION "0.1.0"

typedef struct skd_store skd_store;

/* Open an engine over cfg (borrowed; must outlive the engine): creates
 * DATA_DIR, opens the store, registers the built-in skills. The sandbox
 * runner starts on first use. Caller closes with skd_engine_close. */
int skd_engine_open(const skd_config *cfg, skd_engine **out, skd_err *err);
/* Flags of skd_engine_open_flags. SKD_ENGINE_SANDBOX_ONLY: no store, no
 * skills, only DATA_DIR and the runner (skilld exec); skd_engine_store() is
 * NULL, the registry empty, and skd_engine_execute refuses. */
#define SKD_ENGINE_SANDBOX_ONLY 1u
/* SKD_ENGINE_NO_SKILLS: the store and the runner, no skills: a one-call
 * engine (skilld exec registers the one skill it runs and calls it through
 * skd_engine_execute). Its sandbox runs write no run row, and its runner
 * stops as soon as a run is over. */
#define SKD_ENGINE_NO_SKILLS 2u
/* skd_engine_open with flags (0: the same as skd_engine_open). */
int skd_engine_open_flags(const skd_config *cfg, unsigned flags, skd_engine **out, skd_err *err);
/* Give e a runner started earlier (steals r), e.g. before the process
 * dropped privileges: the runner's spawner keeps them. */
struct skd_runner;
void skd_engine_adopt_runner(skd_engine *e, struct skd_runner *r);
void skd_engine_close(skd_engine *e); /* NULL ok */

const skd_config *skd_engine_config(skd_engine *e);
skd_registry *skd_engine_registry(skd_engine *e);
skd_store *skd_engine_store(skd_engine *e);
/* The engine's custom skills and bundles (include/skilld/custom.h,
 * bundle.h); NULL for an engine opened with SKD_ENGINE_SANDBOX_ONLY or
 * SKD_ENGINE_NO_SKILLS. Borrowed. */
skd_skills *skd_engine_skills(skd_engine *e);

/* Execution request from a transport. */
typedef struct skd_call {
    const char *key_id;       /* required */
    unsigned scopes;          /* SKD_SCOPE_* of the key */
    const char *skill;        /* "name" or "name@version" */
    const char *version;      /* optional; overrides a version in skill */
    const json_t *input;      /* borrowed; NULL means {} */
    skd_cancel *cancel;       /* optional */
    skd_progress_fn progress; /* optional */
    void *progress_arg;
    skd_output_fn output; /* optional: a sandboxed command's output as it arrives */
    void *output_arg;
    /* optional, with cancel: the transport's own id for this call (an A2A
     * task). The engine records it in the run table (kind "task") while
     * the call runs, so that a cancel through another replica reaches it
     * (it fires cancel). */
    const char *task_id;
    /* 1: another replica forwarded this call here (src/server/replica_http.c)
     * because this one holds its live sandbox: it runs here, whatever the
     * store says, and is never forwarded again. */
    int forwarded;
} skd_call;

/* Execute a skill: look it up as the caller sees it, check it is enabled and
 * the key has skills:execute, validate the input against its schema, open
 * the caller's workspace, run the handler (a sandbox skill, and a call with
 * task_id, as a row of the run table), count it in skd_engine_exec_stats,
 * write the audit row. Every transport calls this and nothing else. Always
 * returns a new reference to a result object with "success" (NULL only when
 * out of memory). exec_id, when not NULL, receives the execution id. */
json_t *skd_engine_execute(skd_engine *e, const skd_call *call, char exec_id[37]);

/* 1 when skill (a name or name@version as key_id sees it) is a direct
 * skill defined as quick (skd_skill_def.quick; the built-in file_read): it
 * takes no lock and starts no process, so a transport may run it on its
 * event thread. 0 for anything else, unknown skills included. */
int skd_engine_skill_is_quick(skd_engine *e, const char *skill, const char *key_id);

/* Register the built-in skills (file_*, http_request, web_*, sandbox
 * skills) into reg. Called by skd_engine_open. */
int skd__builtins_register(skd_registry *reg, skd_err *err);

#endif
