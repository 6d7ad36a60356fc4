/*
 * Custom skills at runtime (see include/skilld/custom.h): register, remove,
 * enable and disable command skills for an actor, keeping the registry and
 * the store in step, and load the stored ones (plus DATA_DIR/skills) when
 * the engine opens.
 *
 * Who may do what: a key with skills:execute registers private skills; a
 * key with skills:admin registers global ones; the operator (command line,
 * key_id NULL) registers global ones or, with owner_key, one key's. A key
 * removes or toggles its own skills, and an admin also the global ones.
 * Built-in and C skills (no manifest) are never replaced or removed here.
 */
#include "skilld/bundle.h"
#include "skilld/custom.h"
#include "skilld/image.h"
#include "skilld/skilld.h"
#include "skilld/store.h"
#include "skills/skills_int.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_operator(const skd_actor *who)
{
    return !who->key_id;
}

static int is_admin(const skd_actor *who)
{
    return is_operator(who) || (who->scopes & SKD_SCOPE_ADMIN);
}

/* The owner a new skill gets. */
static const char *new_owner(const skd_actor *who)
{
    if (is_operator(who))
        return who->owner_key;
    return (who->scopes & SKD_SCOPE_ADMIN) ? NULL : who->key_id;
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Count owner's skills named name (and version when not NULL); *builtin
 * is set when one of them has no manifest. */
static size_t find_owned(skd_registry *reg, const char *name, const char *version,
                         const char *owner, int *builtin)
{
    size_t n = 0, hits = 0;
    skd_skill **list = skd_registry_list(reg, owner, 0, 1, &n);
    *builtin = 0;
    for (size_t i = 0; i < n; i++) {
        skd_skill *s = list[i];
        if (strcmp(skd_skill_name(s), name) != 0 || !same(skd_skill_owner(s), owner) ||
            (version && strcmp(skd_skill_version(s), version) != 0))
            continue;
        hits++;
        if (!skd_skill_manifest(s))
            *builtin = 1;
    }
    skd_skill_list_free(list, n);
    return hits;
}

static int register_common(skd_skills *sk, const skd_actor *who, const json_t *m,
                           const char *skill_dir, int persist, int replace, skd_skill **out,
                           skd_err *err)
{
    skd_registry *reg = sk->reg;
    skd_skill_def def;
    int builtin = 0, rc;
    if (out)
        *out = NULL;
    if (!is_operator(who) && !(who->scopes & (SKD_SCOPE_EXECUTE | SKD_SCOPE_ADMIN)))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "registering a skill needs the skills:execute or skills:admin scope");
    if ((rc = skd_manifest_check(m, sk->cfg, err)) != 0 ||
        (rc = skd_manifest_check_ceilings(m, sk->cfg, err)) != 0)
        return rc;
    char *rootfs = NULL; /* the image must be imported before a skill uses it */
    const char *image = skd_json_str(json_object_get(m, "run"), "image", SKD_IMAGE_HOST);
    skd_err ierr = {0};
    rc = skd_image_resolve(sk->cfg, image, &rootfs, &ierr);
    if (rc == SKD_ENOENT) {
        /* docker and podman run images from their own store: not imported
         * under DATA_DIR is fine for them (for auto: the one it picks). */
        const char *rt =
            skd_sandbox_runtime_pick(skd_config_str(sk->cfg, "SKILLS_SANDBOX_RUNTIME"), NULL);
        if (rt && strcmp(rt, "native") != 0)
            rc = 0;
    }
    if (rc)
        return skd_err_set(err, ierr.code, "manifest.run.image: %s", skd_err_msg(&ierr));
    free(rootfs);
    const char *owner = new_owner(who);
    const char *name = skd_json_str(m, "name", ""), *version = skd_json_str(m, "version", "");
    if (find_owned(reg, name, version, owner, &builtin)) {
        if (builtin)
            return skd_err_set(err, SKD_EEXISTS, "%s@%s is a built-in skill", name, version);
        if (!replace)
            return skd_err_set(err, SKD_EEXISTS, "skill %s@%s is already registered", name,
                               version);
    }
    if ((rc = skd__command_skill_def(m, skill_dir, owner, &def, err)) != 0)
        return rc;
    /* The registry decides under its own lock: two clients registering the
     * same name@version at once cannot both succeed without replace. */
    if ((rc = skd_registry_add(reg, &def, replace, err)) != 0) {
        def.udata_free(def.udata);
        return rc;
    }
    if (persist && (rc = skd_store_skill_put(sk->store, owner, m, skill_dir, 1, err))) {
        skd_registry_remove(reg, name, version, owner, NULL);
        return rc;
    }
    if (out) {
        char ref[128];
        snprintf(ref, sizeof(ref), "%s@%s", name, version);
        *out = skd_registry_lookup(reg, ref, owner, NULL);
    }
    return 0;
}

int skd_custom_register(skd_skills *sk, const skd_actor *who, const json_t *m, int replace,
                        skd_skill **out, skd_err *err)
{
    return register_common(sk, who, m, NULL, 1, replace, out, err);
}

int skd_custom_register_folder(skd_skills *sk, const skd_actor *who, const char *dir, int persist,
                               int replace, skd_skill **out, skd_err *err)
{
    if (!is_operator(who))
        return skd_err_set(err, SKD_EFORBIDDEN, "only the operator registers skill folders");
    return skd__custom_register_bundle(sk, who, dir, persist, replace, out, err);
}

int skd__custom_register_bundle(skd_skills *sk, const skd_actor *who, const char *dir, int persist,
                                int replace, skd_skill **out, skd_err *err)
{
    json_t *m = NULL, *fm = NULL;
    if (out)
        *out = NULL;
    if (dir[0] != '/')
        return skd_err_set(err, SKD_EINVAL, "the skill folder path must be absolute");
    if (!is_operator(who) && !(who->scopes & (SKD_SCOPE_EXECUTE | SKD_SCOPE_ADMIN)))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "registering a skill needs the skills:execute or skills:admin scope");
    int rc = skd__skill_folder_load(dir, &fm, &m, err);
    /* The command skill first: its name@version rules decide conflicts.
     * A folder without an entry script is a bundle only. */
    if (rc == 0 && m)
        rc = register_common(sk, who, m, dir, persist, replace, out, err);
    if (rc == 0) {
        const char *owner = new_owner(who);
        rc = skd_bundle_register(sk, owner, dir, owner == NULL, NULL, err);
        if (rc && m)
            skd_registry_remove(sk->reg, skd_json_str(m, "name", ""),
                                skd_json_str(m, "version", ""), owner, NULL);
    }
    json_decref(m);
    json_decref(fm);
    return rc;
}

/* Split "name[@version]" into name (buf) and version (NULL or into buf). */
static int split(const char *ref, char *buf, size_t cap, const char **version, skd_err *err)
{
    if (skd_strlcpy(buf, ref ? ref : "", cap))
        return skd_err_set(err, SKD_EINVAL, "\"%.64s...\" is not a skill name", ref);
    char *at = strchr(buf, '@');
    *version = NULL;
    if (at) {
        *at = '\0';
        *version = at + 1;
    }
    if (!skd_skill_name_valid(buf) || (*version && !skd_version_valid(*version)))
        return skd_err_set(err, SKD_EINVAL, "\"%s\" is not a skill name or name@x.y.z", ref);
    return 0;
}

/* Find the owner a remove/toggle applies to: the actor's own skill first,
 * then (admin) the global one. Returns the number of matching skills. */
static size_t pick_owner(skd_skills *sk, const skd_actor *who, const char *name,
                         const char *version, const char **owner, int *builtin)
{
    skd_registry *reg = sk->reg;
    const char *own = is_operator(who) ? who->owner_key : who->key_id;
    size_t n;
    *owner = own;
    if (own && (n = find_owned(reg, name, version, own, builtin)) != 0)
        return n;
    *owner = NULL;
    if (is_admin(who) && (n = find_owned(reg, name, version, NULL, builtin)) != 0)
        return n;
    return 0;
}

/* Parse ref into name (buf) and version, and find the owner the change
 * applies to (see pick_owner). verb names the change in the not_found
 * message. */
static int find_target(skd_skills *sk, const skd_actor *who, const char *ref, const char *verb,
                       char *name, size_t cap, const char **version, const char **owner,
                       int *builtin, skd_err *err)
{
    int rc = split(ref, name, cap, version, err);
    if (rc)
        return rc;
    *builtin = 0;
    if (!pick_owner(sk, who, name, *version, owner, builtin))
        return skd_err_set(err, SKD_ENOENT, "no skill %s that this key may %s", ref, verb);
    return 0;
}

/* Remove the bundle named ref (no version) the actor owns, or (admin) the
 * operator's. Returns 0 when one went. */
static int remove_bundle(skd_skills *sk, const skd_actor *who, const char *ref)
{
    const char *own = is_operator(who) ? who->owner_key : who->key_id;
    skd_err err = {0};
    if (strchr(ref, '@'))
        return SKD_ENOENT;
    if (own && skd_bundle_remove(sk, own, ref, &err) == 0)
        return 0;
    return is_admin(who) ? skd_bundle_remove(sk, NULL, ref, &err) : SKD_ENOENT;
}

int skd_custom_remove(skd_skills *sk, const skd_actor *who, const char *ref, skd_err *err)
{
    char name[128];
    const char *version, *owner;
    int builtin, rc;
    int bundle_gone = ref && remove_bundle(sk, who, ref) == 0;
    if ((rc = find_target(sk, who, ref, "remove", name, sizeof(name), &version, &owner, &builtin,
                          err)) != 0) {
        if (bundle_gone && rc == SKD_ENOENT) {
            skd_err_clear(err);
            return 0; /* a bundle without a command skill */
        }
        return rc;
    }
    if (builtin)
        return skd_err_set(err, SKD_EFORBIDDEN, "%s is a built-in skill and cannot be removed",
                           ref);
    rc = skd_store_skill_delete(sk->store, name, version, owner, err);
    if (rc && rc != SKD_ENOENT) /* ENOENT: a DATA_DIR/skills folder, never stored */
        return rc;
    int stored = rc == 0;
    skd_err_clear(err);
    rc = skd_registry_remove(sk->reg, name, version, owner, err);
    if (rc == SKD_ENOENT && stored) {
        /* The store's change notice can reach this process's replica sync
         * (custom_sync.c) before this line, and the sync removes a stored
         * skill whose row is gone: the skill is removed either way. */
        skd_err_clear(err);
        return 0;
    }
    return rc;
}

int skd_custom_set_enabled(skd_skills *sk, const skd_actor *who, const char *ref, int enabled,
                           skd_err *err)
{
    char name[128];
    const char *version, *owner;
    int builtin, rc;
    if ((rc = find_target(sk, who, ref, "change", name, sizeof(name), &version, &owner, &builtin,
                          err)) != 0)
        return rc;
    if (!builtin) {
        rc = skd_store_skill_set_enabled(sk->store, name, version, owner, enabled, err);
        if (rc && rc != SKD_ENOENT)
            return rc;
        skd_err_clear(err);
    }
    return skd_registry_set_enabled(sk->reg, name, version, owner, enabled, err);
}

static void load_row(skd_skills *sk, const json_t *row)
{
    skd_err err = {0};
    skd_skill_def def;
    const json_t *m = json_object_get(row, "manifest");
    const char *owner = skd_json_str(row, "owner", NULL);
    const char *dir = skd_json_str(row, "skillDir", NULL);
    const char *name = skd_json_str(m, "name", "?"), *version = skd_json_str(m, "version", "?");
    if (skd_manifest_check(m, sk->cfg, &err) || skd__command_skill_def(m, dir, owner, &def, &err)) {
        skd_warn("stored skill %s@%s skipped: %s", name, version, skd_err_msg(&err));
        return;
    }
    if (skd_registry_add(sk->reg, &def, 0, &err)) {
        def.udata_free(def.udata);
        skd_warn("stored skill %s@%s skipped: %s", name, version, skd_err_msg(&err));
        return;
    }
    if (!skd_json_bool(row, "enabled", 1))
        skd_registry_set_enabled(sk->reg, name, version, owner, 0, NULL);
    /* Registered under higher ceilings: it stays, and runs clamped. */
    if (skd_manifest_check_ceilings(m, sk->cfg, &err))
        skd_warn("stored skill %s@%s is above a ceiling (its runs are clamped, or refused for "
                 "network): %s",
                 name, version, skd_err_msg(&err));
}

/* Register every DATA_DIR/skills/<dir>/SKILL.md for this run only. */
static void scan_skills_dir(skd_skills *sk)
{
    char base[PATH_MAX], path[PATH_MAX];
    const char *data = skd_config_str(sk->cfg, "DATA_DIR");
    char *abs = realpath(data, NULL);
    if (!abs)
        return;
    int n = snprintf(base, sizeof(base), "%s/skills", abs);
    free(abs);
    DIR *d = n > 0 && (size_t)n < sizeof(base) ? opendir(base) : NULL;
    if (!d)
        return;
    struct dirent *de;
    skd_actor op = {0};
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        skd_err err = {0};
        if (de->d_name[0] == '.')
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", base, de->d_name) >= (int)sizeof(path) ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (skd_custom_register_folder(sk, &op, path, 0, 1, NULL, &err))
            skd_warn("skill folder %s skipped: %s", path, skd_err_msg(&err));
    }
    closedir(d);
}

skd_skills *skd__skills_new(const skd_config *cfg, skd_store *store, skd_registry *reg)
{
    skd_skills *sk = calloc(1, sizeof(*sk));
    if (sk)
        *sk = (skd_skills){.cfg = cfg, .store = store, .reg = reg};
    return sk;
}

void skd__skills_free(skd_skills *sk)
{
    if (!sk)
        return;
    json_decref(sk->synced);
    free(sk);
}

int skd__custom_load(skd_skills *sk, skd_err *err)
{
    (void)skd_sandbox_ceilings_warn(sk->cfg); /* defaults above a ceiling */
    json_t *rows = skd_store_skill_list(sk->store, err);
    if (!rows)
        return err && err->code ? err->code : SKD_EIO;
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        load_row(sk, row);
    json_decref(rows);
    scan_skills_dir(sk);
    return 0;
}
