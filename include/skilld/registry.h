/*
 * The skill registry and the request context a handler receives.
 *
 * A skill is name@version (x.y.z) with a description, an input JSON Schema, an
 * optional output schema, a mode (direct: runs in the server; sandbox: runs a
 * command through the sandbox runner) and a handler. A skill is global
 * (owner NULL) or belongs to one API key; a key's own skill shadows a global
 * one of the same name@version. The registry is safe to use from many
 * threads; skills are reference-counted so a lookup stays valid while the
 * skill is removed.
 */
#ifndef SKILLD_REGISTRY_H
#define SKILLD_REGISTRY_H

#include <jansson.h>

#include "skilld/config.h"
#include "skilld/error.h"

typedef struct skd_registry skd_registry;
typedef struct skd_skill skd_skill;
typedef struct skd_engine skd_engine;
typedef struct skd_workspace skd_workspace;
typedef struct skd_cancel skd_cancel;
typedef struct skd_store skd_store;
typedef struct skd_skills skd_skills;
typedef struct skd_runner skd_runner;

enum skd_mode { SKD_MODE_DIRECT, SKD_MODE_SANDBOX };

/* API key scopes. */
#define SKD_SCOPE_READ 1u    /* skills:read */
#define SKD_SCOPE_EXECUTE 2u /* skills:execute */
#define SKD_SCOPE_ADMIN 4u   /* skills:admin */
#define SKD_SCOPE_ALL 7u

/* Progress report from a running handler: progress of total (total may be 0
 * when unknown), with an optional message. Called on the handler's thread. */
typedef void (*skd_progress_fn)(void *arg, double progress, double total, const char *message);
/* A chunk of a running command's output (stream: "stdout" or "stderr"). */
typedef void (*skd_output_fn)(void *arg, const char *stream, const char *data, size_t len);

/* What a handler knows about the call. Everything is borrowed for the
 * duration of the call. A handler reaches the engine only through this
 * object (its fields and runner()), never by calling skd_engine_*: the
 * engine calls the built-ins, not the other way round
 * (scripts/check-layers.sh). */
/* What one call used, metered where it happened (DESIGN.md, "Metering"):
 * filled by the handlers that run sandboxes or write the workspace, and
 * written by the engine with the call's audit row. */
typedef struct skd_usage {
    int64_t sandbox_runs;
    int64_t cpu_us;          /* CPU time of its sandboxes, microseconds */
    int64_t mem_peak_bytes;  /* the largest memory high-water mark of its sandboxes */
    int64_t egress_bytes;    /* bytes through the egress proxy, both ways */
    int64_t workspace_bytes; /* bytes of files it wrote into the workspace */
} skd_usage;

typedef struct skd_ctx {
    const char *key_id;    /* the caller's API key id; never NULL */
    unsigned scopes;       /* SKD_SCOPE_* bits */
    const skd_config *cfg; /* the operator's settings */
    skd_store *store;      /* the engine's store */
    skd_skills *skills;    /* custom skills and bundles (include/skilld/custom.h) */
    /* The engine's sandbox runner, started on first use: borrowed, or NULL
     * with err set when it cannot start. */
    skd_runner *(*runner)(const struct skd_ctx *ctx, skd_err *err);
    skd_engine *engine;       /* opaque: for runner() */
    skd_workspace *ws;        /* the caller's workspace, opened for this call */
    skd_cancel *cancel;       /* may be NULL: the call cannot be cancelled */
    skd_progress_fn progress; /* may be NULL */
    void *progress_arg;
    const char *execution_id; /* UUID of this execution (audit row id) */
    skd_usage *usage;         /* may be NULL: what the call used goes here */
    /* May be NULL: output of a running command as it arrives (stream
     * "stdout" or "stderr"), for transports that stream it (SSE, MCP
     * progress). Called on the calling thread; may block briefly. */
    skd_output_fn output;
    void *output_arg;
} skd_ctx;

/* A handler gets the validated input (borrowed) and returns a new reference
 * to a result object that has "success". Returning NULL is an internal
 * error. udata is the pointer given at registration. */
typedef json_t *(*skd_handler_fn)(const skd_ctx *ctx, const json_t *input, void *udata);

typedef struct skd_skill_def {
    const char *name;    /* [a-z][a-z0-9_-]{0,63} */
    const char *version; /* x.y.z */
    const char *description;
    json_t *input_schema;  /* borrowed; the registry keeps its own reference */
    json_t *output_schema; /* optional, borrowed */
    json_t *tags;          /* optional array of strings, borrowed */
    json_t *manifest;      /* optional: the manifest a custom skill came from */
    enum skd_mode mode;
    /* 1: the handler reads at most one file of the caller's workspace,
     * takes no lock and starts no process, so a transport may run it on
     * its event thread (skd_engine_skill_is_quick). */
    int quick;
    /* 1: an input "sandboxId" names the live sandbox the call acts in; with
     * replicas the engine runs the call on the replica that holds it
     * (src/engine/replica.c). */
    int live_bound;
    skd_handler_fn handler;
    void *udata;
    void (*udata_free)(void *udata); /* called when the skill is freed; may be NULL */
    const char *owner;               /* key id, or NULL for a global skill */
} skd_skill_def;

skd_registry *skd_registry_new(void);
/* Frees the registry; skills still referenced elsewhere live on. NULL ok. */
void skd_registry_free(skd_registry *reg);

/* Add a skill. SKD_EINVAL for a bad name, version or schema (message says
 * which); SKD_EEXISTS when the same owner already has name@version unless
 * replace is non-zero. */
int skd_registry_add(skd_registry *reg, const skd_skill_def *def, int replace, skd_err *err);

/* Remove name@version (or every version when version is NULL) owned by
 * owner (NULL: global). SKD_ENOENT when nothing matched. */
int skd_registry_remove(skd_registry *reg, const char *name, const char *version, const char *owner,
                        skd_err *err);

/* Look up "name" (newest version) or "name@version" as seen by key_id: the
 * key's own skills first, then global ones. Disabled skills are returned too
 * (the caller checks skd_skill_enabled). Returns a new reference (release
 * with skd_skill_unref) or NULL with err set to SKD_ENOENT. */
skd_skill *skd_registry_lookup(skd_registry *reg, const char *ref, const char *key_id,
                               skd_err *err);

/* Enable or disable name[@version] (owner as in remove). */
int skd_registry_set_enabled(skd_registry *reg, const char *name, const char *version,
                             const char *owner, int enabled, skd_err *err);

/* Skills visible to key_id (NULL: global only), newest version per name
 * first when newest_only, sorted by name. Returns a new array of new
 * references; free with skd_skill_list_free. */
skd_skill **skd_registry_list(skd_registry *reg, const char *key_id, int newest_only,
                              int include_disabled, size_t *count);
void skd_skill_list_free(skd_skill **list, size_t count);

/* A counter that changes whenever the set of skills changes (for
 * notifications/tools/list_changed). */
unsigned long skd_registry_generation(skd_registry *reg);

/* Callback run (outside the registry lock) after every change. */
void skd_registry_on_change(skd_registry *reg, void (*fn)(void *arg), void *arg);

void skd_skill_ref(skd_skill *s);
void skd_skill_unref(skd_skill *s); /* NULL ok */

/* Accessors; strings and JSON are borrowed from the skill. */
const char *skd_skill_name(const skd_skill *s);
const char *skd_skill_version(const skd_skill *s);
const char *skd_skill_description(const skd_skill *s);
const char *skd_skill_owner(const skd_skill *s); /* NULL: global */
json_t *skd_skill_input_schema(const skd_skill *s);
json_t *skd_skill_output_schema(const skd_skill *s); /* may be NULL */
json_t *skd_skill_tags(const skd_skill *s);          /* array, may be empty */
json_t *skd_skill_manifest(const skd_skill *s);      /* may be NULL */
enum skd_mode skd_skill_mode(const skd_skill *s);
int skd_skill_quick(const skd_skill *s);      /* skd_skill_def.quick */
int skd_skill_live_bound(const skd_skill *s); /* skd_skill_def.live_bound */
int skd_skill_enabled(const skd_skill *s);
const char *skd_mode_name(enum skd_mode mode);

/* Run the skill's handler (no validation; see skd_engine_execute). */
json_t *skd_skill_invoke(const skd_skill *s, const skd_ctx *ctx, const json_t *input);

/* Description as JSON: {name, version, description, mode, enabled, owner,
 * inputSchema, outputSchema?, tags}. New reference. */
json_t *skd_skill_to_json(const skd_skill *s);

/* 1 when s is a valid x.y.z version (each part a decimal without leading
 * zeros, at most 9 digits). */
int skd_version_valid(const char *s);
/* Compare two valid versions: <0, 0, >0. */
int skd_version_cmp(const char *a, const char *b);
/* 1 when s is a valid skill name. */
int skd_skill_name_valid(const char *s);

/*
 * JSON Schema validation (src/core/schema.c): the subset agents use — type
 * (string or array), properties, required, additionalProperties (bool or
 * schema), enum, const, minimum/maximum, exclusiveMinimum/exclusiveMaximum,
 * minLength/maxLength (in code points), items, minItems/maxItems, pattern
 * (POSIX extended regex), description/title/default/$schema ignored.
 */

/* Validate instance against schema. 0, or SKD_EINVAL with a message naming
 * the JSON path ("input.path: expected string, got integer"). */
int skd_schema_validate(const json_t *schema, const json_t *instance, skd_err *err);

/* Check that schema itself is well-formed for the subset above (unknown
 * keywords are ignored; known keywords with the wrong type are errors). */
int skd_schema_check(const json_t *schema, skd_err *err);

/* Cancellation token (src/core/cancel.c): fired by a transport (MCP
 * notifications/cancelled, A2A CancelTask), observed by handlers. */
skd_cancel *skd_cancel_new(void);
void skd_cancel_free(skd_cancel *c); /* NULL ok */
/* Set the flag and run the hook, once. Thread-safe. */
void skd_cancel_fire(skd_cancel *c);
int skd_cancel_is_set(const skd_cancel *c); /* NULL: 0 */
/* Install the hook run by skd_cancel_fire. If the token already fired, the
 * hook runs now and 1 is returned. Passing fn NULL removes the hook; removal
 * waits for a hook that is running. */
int skd_cancel_set_hook(skd_cancel *c, void (*fn)(void *arg), void *arg);

#endif
