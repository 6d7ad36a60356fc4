/*
 * Custom skills: skills added while the server runs.
 *
 * A *command skill* is described by a manifest
 *   {name, version, description, inputSchema, outputSchema?, tags[],
 *    run: {image, command[], stdin: "input"|"none", timeoutMs?, memoryLimit?,
 *          cpuLimit?, pidsLimit?, outputLimit?, tmpSize?, networkEnabled?}}
 * and runs run.command in the sandbox: the validated input arrives as JSON
 * on stdin (stdin "input"), the caller's workspace is at /workspace; stdout
 * that is a JSON object is the result ("success": true added when absent),
 * other stdout is returned as {"success": true, "output": text}; a non-zero
 * exit is a failure with code "command_failed" carrying stderr.
 *
 * An *Agent Skills folder* (a directory with SKILL.md) becomes a command
 * skill whose entry script runs with the folder mounted read-only at
 * /skill (see skd_skill_folder_read for how the entry is chosen).
 *
 * Ownership: a skill registered by a key belongs to that key and only it
 * sees it; a key with skills:admin registers global skills. Registered
 * skills are kept in the store and come back at the next engine open.
 *
 * The functions below (and those of bundle.h) work on an engine's
 * skd_skills: skd_engine_skills(e) from outside, ctx->skills in a handler.
 * They never call the engine back (scripts/check-layers.sh).
 */
#ifndef SKILLD_CUSTOM_H
#define SKILLD_CUSTOM_H

#include <jansson.h>

#include "skilld/config.h"
#include "skilld/error.h"
#include "skilld/registry.h"
#include "skilld/sandbox.h"

/* Largest manifest accepted, serialised. */
#define SKD_MANIFEST_MAX_BYTES (256u * 1024u)
/* Largest SKILL.md read. */
#define SKD_SKILL_MD_MAX_BYTES (64u * 1024u)

/* Check a manifest (borrowed) against the format above. cfg (may be NULL)
 * gives SKILLS_ALLOWED_SANDBOX_IMAGES. Returns 0, or SKD_EINVAL with a
 * message that starts with the field path ("manifest.run.command[0]: ...");
 * SKD_EFORBIDDEN for an image that is not allowed. Unknown fields are
 * refused. */
int skd_manifest_check(const json_t *manifest, const skd_config *cfg, skd_err *err);

/* The operator's ceilings for a manifest (borrowed, already checked with
 * skd_manifest_check): 0, SKD_EINVAL when a run limit is above its
 * SKILLS_SANDBOX_MAX_* ("manifest.run: memoryLimit 2048 is above the
 * operator's ceiling SKILLS_SANDBOX_MAX_MEMORY_MB=1024"), SKD_EFORBIDDEN
 * for networkEnabled true without SKILLS_SANDBOX_NETWORK_ENABLED. Applied
 * when a client registers; a stored skill is loaded without it and runs
 * clamped (skd__manifest_limits). */
int skd_manifest_check_ceilings(const json_t *manifest, const skd_config *cfg, skd_err *err);

/* Library-internal: the sandbox limits of a manifest's run object
 * (borrowed): cfg's defaults, overridden by the run fields. Returns 0 or
 * SKD_EINVAL (a field out of its hard range). */
int skd__manifest_limits(const json_t *run, const skd_config *cfg, skd_sandbox_config *out,
                         skd_err *err);

/* Read an Agent Skills folder: DIR/SKILL.md's YAML front matter gives name,
 * description and optionally version (default 1.0.0), entry, tags
 * (comma-separated or [a, b]) and image. The entry script is front matter
 * `entry` (a relative path inside the folder), else the first of
 * scripts/run.py, scripts/run.sh, run.py, run.sh that exists. A .py entry
 * runs with python3, .sh with /bin/sh, anything else is executed directly.
 * The input schema is input_schema.json in the folder when present, else
 * {"type": "object"}. *manifest receives a new reference to the manifest
 * (its command names /skill/<entry>). */
int skd_skill_folder_read(const char *dir, json_t **manifest, skd_err *err);

/* Who asks: the key and its scopes. key_id NULL means the local operator
 * (the command line), who may do anything and registers global skills
 * unless owner_key is set. */
typedef struct skd_actor {
    const char *key_id;
    unsigned scopes;
    const char *owner_key; /* operator only: register for this key instead */
} skd_actor;

/* Validate manifest (borrowed), store it and add it to the engine's
 * registry for the actor (global with skills:admin or for the operator,
 * else private to the key). An existing custom skill of the same owner and
 * name@version is replaced when replace is set (else SKD_EEXISTS); a
 * built-in or C skill is never replaced. *skill_out (may be NULL) receives
 * a new reference to the registered skill. */
int skd_custom_register(skd_skills *sk, const skd_actor *who, const json_t *manifest, int replace,
                        skd_skill **skill_out, skd_err *err);

/* The same for an Agent Skills folder (dir must be absolute); persist 0
 * registers it for this engine only (the DATA_DIR/skills scan). */
int skd_custom_register_folder(skd_skills *sk, const skd_actor *who, const char *dir, int persist,
                               int replace, skd_skill **skill_out, skd_err *err);

/* Remove "name" (every version) or "name@version": the actor's own skill
 * when it has one, else (admin or operator) the global one. Built-in skills
 * cannot be removed (SKD_EFORBIDDEN). */
int skd_custom_remove(skd_skills *sk, const skd_actor *who, const char *ref, skd_err *err);

/* Enable or disable, persisted; owner chosen as in skd_custom_remove.
 * Built-in skills may be disabled by an admin or the operator (that state
 * lasts until the engine closes). */
int skd_custom_set_enabled(skd_skills *sk, const skd_actor *who, const char *ref, int enabled,
                           skd_err *err);

/* Library-internal: the custom-skills part of an engine over cfg, store
 * and reg (all borrowed; they outlive it). Called by skd_engine_open; NULL
 * when out of memory. Free with skd__skills_free (NULL ok). */
skd_skills *skd__skills_new(const skd_config *cfg, skd_store *store, skd_registry *reg);
void skd__skills_free(skd_skills *sk);

/* Library-internal: called by skd_engine_open after the built-ins: load
 * the stored skills and scan DATA_DIR/skills. A broken stored skill is
 * logged and skipped, never fatal. */
int skd__custom_load(skd_skills *sk, skd_err *err);
/* Library-internal: bring the stored custom skills into the registry again
 * (another replica changed them; src/skills/custom_sync.c). arg is the
 * skd_skills. */
void skd__custom_sync(void *arg);
/* Library-internal: remember the stored skills just loaded (engine open),
 * so that a later sync also removes the ones deleted elsewhere. */
void skd__custom_sync_init(skd_skills *sk);

/* Library-internal: parse SKILL.md text (len bytes, need not be
 * NUL-terminated) into {name, description, version, entry, image, tags[]}
 * (empty strings for absent keys). New reference in *out. For the fuzzer
 * and for skd_skill_folder_read. */
int skd__skill_md_parse(const char *text, size_t len, json_t **out, skd_err *err);

/* Library-internal: read dir's SKILL.md as a bundle: *frontmatter (new
 * reference) is the front matter verbatim, checked against the Agent
 * Skills rules; *manifest (new reference, or NULL when the folder has no
 * entry script) is the command skill it also is. */
int skd__skill_folder_load(const char *dir, json_t **frontmatter, json_t **manifest, skd_err *err);

/* Library-internal: register the folder dir as a bundle of the actor (a
 * key with skills:execute, an admin, or the operator; no operator-only
 * check: imports extract into DATA_DIR first) and, when it has an entry
 * script, as a command skill. */
int skd__custom_register_bundle(skd_skills *sk, const skd_actor *who, const char *dir, int persist,
                                int replace, skd_skill **out, skd_err *err);

/* Library-internal: the Agent Skills rules on a front matter (borrowed). */
int skd__skill_bundle_check(const json_t *frontmatter, skd_err *err);

/* Library-internal: build the registry definition of a command skill
 * (handler and udata) for manifest (borrowed, already checked). skill_dir
 * is the folder mounted at /skill or NULL. On success the caller passes
 * def to skd_registry_add; def->udata is freed by def->udata_free. */
int skd__command_skill_def(const json_t *manifest, const char *skill_dir, const char *owner,
                           skd_skill_def *def, skd_err *err);

#endif
