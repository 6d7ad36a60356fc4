/*
 * SKILL.md bundles: Agent Skills folders served to MCP hosts through the
 * Skills extension (io.modelcontextprotocol/skills).
 *
 * A bundle is a folder with a valid SKILL.md (front matter name and
 * description; optional license, allowed-tools, metadata, ...) and the
 * files beside it. Registering one walks the folder once and records the
 * front matter verbatim and every file's path, size and SHA-256; the
 * record is kept in the store. A bundle belongs to the key that registered
 * it (NULL: the operator's, which every key sees); another key sees it only
 * when an admin made it public. Every byte served is checked against the
 * record: a bundle whose content changed on disk is refused (left out of
 * listings, its reads refused) until it is registered again. Paths inside the folder follow the
 * workspace resolver's rules: no "..", no symlink out; names starting with "." are not part of a
 * bundle.
 *
 * Rows (skd_bundle_list) are JSON objects {name, owner (null: operator),
 * dir, public, record: {frontmatter, files: [{path, size, sha256, ...}]},
 * updatedMs}.
 */
#ifndef SKILLD_BUNDLE_H
#define SKILLD_BUNDLE_H

#include <jansson.h>
#include <stddef.h>

#include "skilld/custom.h"
#include "skilld/error.h"
#include "skilld/skilld.h"
#include "skilld/store.h"

/* Interoperability limits of the Skills extension: hosts accept at least
 * this much, so a bundle past them is refused. */
#define SKD_BUNDLE_MAX_FILES 512
#define SKD_BUNDLE_MAX_BYTES (16u * 1024u * 1024u)

/* Walk dir (absolute) and build its record (new reference in *record):
 * SKD_EINVAL for a SKILL.md that is not valid, SKD_ETOOBIG past the limits,
 * SKD_EPATH for a symlink out of the folder, SKD_ESPECIAL for a file that is
 * neither regular nor a directory. */
int skd_bundle_scan(const char *dir, json_t **record, skd_err *err);

/* Scan dir and store it as owner's bundle (replacing owner's bundle of the
 * same name). public_ makes it visible to every key. *row (may be NULL)
 * receives the stored row. */
int skd_bundle_register(skd_skills *sk, const char *owner, const char *dir, int public_,
                        json_t **row, skd_err *err);

/* The bundles key_id sees (NULL: the operator, every bundle), one per name
 * (the key's own before a public one), sorted by name; name (may be NULL)
 * selects one. With fresh set each is checked against the disk first and
 * one whose content changed is left out (and logged): for answers that
 * hand out digests. Without, the rows are as stored: for reads, which
 * check the bytes against the digests a host was given. New reference, or
 * NULL with err set. */
json_t *skd_bundle_list(skd_skills *sk, const char *key_id, const char *name, int fresh,
                        skd_err *err);

/* Read path (relative, as in the record) of the bundle in row (borrowed,
 * from skd_bundle_list) into *data (malloc'd, caller frees; NUL-terminated
 * past *len). The bytes must have the recorded size and digest; when they
 * do not, the read fails with SKD_EIO
 * ("changed on disk"; the bundle must be registered again). SKD_ENOENT
 * for a path not in the record. */
int skd_bundle_read(skd_skills *sk, const json_t *row, const char *path, char **data, size_t *len,
                    skd_err *err);

/* Import a bundle from a tar archive (len bytes, gzip allowed) for the
 * actor: extracted with the image importer's safe layer code into
 * DATA_DIR/bundles/<owner tag>/<name> (SKILL.md at the archive's root or in
 * its single top-level folder), then registered as skd__custom_register_bundle
 * does. An earlier import of that name is kept unless replace is set
 * (SKD_EEXISTS), and stays served when the new one does not register.
 * *skill (may be NULL) receives the command skill when the bundle has an
 * entry script; *name (may be NULL) a new string with the bundle's name. */
int skd_bundle_import_tar(skd_skills *sk, const skd_actor *who, const void *data, size_t len,
                          int replace, skd_skill **skill, json_t **name, skd_err *err);

/* Make owner's bundle name (owner NULL: the operator's) visible to every
 * key, or private again. Only the operator or a key with skills:admin may
 * (SKD_EFORBIDDEN); SKD_ENOENT for no such bundle. */
int skd_bundle_set_public(skd_skills *sk, const skd_actor *who, const char *name, const char *owner,
                          int public_, skd_err *err);

/* Remove owner's bundle name; an imported one's folder (under
 * DATA_DIR/bundles) is deleted with it. */
int skd_bundle_remove(skd_skills *sk, const char *owner, const char *name, skd_err *err);

/* Store rows (src/store/bundles.c); owner NULL is the operator. */
int skd_store_bundle_put(skd_store *st, const char *owner, const char *name, const char *dir,
                         int public_, const json_t *record, skd_err *err);
int skd_store_bundle_delete(skd_store *st, const char *owner, const char *name, skd_err *err);
int skd_store_bundle_set_public(skd_store *st, const char *owner, const char *name, int public_,
                                skd_err *err);
/* Rows visible to key_id (NULL: all), the key's own first within a name;
 * name (may be NULL) filters. New reference or NULL. */
json_t *skd_store_bundle_list(skd_store *st, const char *key_id, const char *name, skd_err *err);

#endif
