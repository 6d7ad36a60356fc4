/*
 * Agent Skills folders: a directory holding SKILL.md (YAML front matter with
 * at least `name` and `description`, then free Markdown) and the files it
 * uses. Every valid folder is a bundle served over MCP (src/skills/bundle.c);
 * one that has an entry script is also a command skill whose command runs
 * that script, the folder being mounted read-only at /skill.
 *
 * The front matter is read by src/skills/frontmatter.c, exactly as a YAML
 * core-schema parser reads it, because MCP hosts compare it with their own
 * reading. This file derives the command-skill fields from it (name,
 * description, version, entry, image, tags) and checks the Agent Skills
 * rules. The folder itself is the operator's (the command line,
 * DATA_DIR/skills, or an import that extracted it), but its content is
 * still checked: the entry must be a regular file beneath the folder.
 */
#include "skills/frontmatter.h"
#include "skilld/custom.h"
#include "skilld/json.h"
#include "skilld/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VALUE_MAX 4096
#define KEY_MAX 32

struct front {
    char name[KEY_MAX * 3], description[VALUE_MAX], version[32], entry[512], image[256];
    const json_t *tags; /* borrowed from the front matter; may be NULL */
};

/* Read a regular file beneath dirfd (no symlink as the last component) into
 * a NUL-terminated malloc'd buffer of at most max bytes. */
static int read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *len,
                        skd_err *err)
{
    *out = NULL;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return skd_err_set(err, errno == ENOENT ? SKD_ENOENT : SKD_EIO, "%s: %s", name,
                           strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = skd_err_set(err, SKD_ESPECIAL, "%s is not a regular file", name);
        goto out;
    }
    if ((size_t)st.st_size > max) {
        rc = skd_err_set(err, SKD_ETOOBIG, "%s is larger than %zu bytes", name, max);
        goto out;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    ssize_t n = 0, got;
    while (n < st.st_size && (got = read(fd, buf + n, (size_t)(st.st_size - n))) > 0)
        n += got;
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
out:
    close(fd);
    return rc;
}

/* tags: a sequence of strings, or one string "a, b". New reference. */
static json_t *tags_array(const json_t *v)
{
    json_t *a = json_array();
    if (json_is_array(v)) {
        size_t i;
        json_t *t;
        json_array_foreach (v, i, t)
            if (json_is_string(t) && json_string_length(t) > 0 && json_string_length(t) <= 64)
                json_array_append(a, t);
        return a;
    }
    char buf[1024];
    skd_strlcpy(buf, json_is_string(v) ? json_string_value(v) : "", sizeof(buf));
    for (char *p = buf; a && p && *p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strlen(p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            p[--n] = '\0';
        if (n && n <= 64)
            json_array_append_new(a, json_string(p));
        p = comma ? comma + 1 : NULL;
    }
    return a;
}

static int entry_ok(const char *e)
{
    if (!*e || e[0] == '/' || strlen(e) > 400)
        return 0;
    for (const char *p = e; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return 0;
    for (const char *p = e; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL)
        if (strncmp(p, "..", 2) == 0 && (p[2] == '/' || p[2] == '\0'))
            return 0;
    return 1;
}

static const char *const default_entries[] = {"scripts/run.py", "scripts/run.sh", "run.py",
                                              "run.sh", NULL};

static int has_default_entry(int dirfd)
{
    struct stat st;
    for (size_t i = 0; default_entries[i]; i++)
        if (fstatat(dirfd, default_entries[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            return 1;
    return 0;
}

static int pick_entry(int dirfd, struct front *f, skd_err *err)
{
    const char *const *defaults = default_entries;
    struct stat st;
    if (f->entry[0]) {
        if (!entry_ok(f->entry))
            return skd_err_set(err, SKD_EINVAL,
                               "SKILL.md: entry \"%s\" must be a relative path inside the "
                               "folder",
                               f->entry);
        if (fstatat(dirfd, f->entry, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            return skd_err_set(err, SKD_ENOENT, "SKILL.md: entry %s is not a regular file",
                               f->entry);
        return 0;
    }
    for (size_t i = 0; defaults[i]; i++)
        if (fstatat(dirfd, defaults[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            return skd_strlcpy(f->entry, defaults[i], sizeof(f->entry));
    return skd_err_set(err, SKD_ENOENT,
                       "no entry script: set `entry:` in SKILL.md or add scripts/run.py, "
                       "scripts/run.sh, run.py or run.sh");
}

static json_t *command_for(const char *entry)
{
    char path[600];
    size_t n = strlen(entry);
    snprintf(path, sizeof(path), "/skill/%s", entry);
    if (n > 3 && strcmp(entry + n - 3, ".py") == 0)
        return json_pack("[s, s]", "/usr/bin/python3", path);
    if (n > 3 && strcmp(entry + n - 3, ".sh") == 0)
        return json_pack("[s, s]", "/bin/sh", path);
    return json_pack("[s]", path);
}

/* Copy the string field key of fm (absent or null: empty) into dst. */
static int str_field(const json_t *fm, const char *key, char *dst, size_t cap, skd_err *err)
{
    const json_t *v = json_object_get(fm, key);
    dst[0] = '\0';
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return skd_err_set(err, SKD_EINVAL, "SKILL.md: %s must be a string (quote it)", key);
    if (skd_strlcpy(dst, json_string_value(v), cap))
        return skd_err_set(err, SKD_ETOOBIG, "SKILL.md: %s is longer than %zu bytes", key, cap - 1);
    return 0;
}

/* The command-skill view of the front matter (fm borrowed; f->tags points
 * into it). */
static int front_from_json(const json_t *fm, struct front *f, skd_err *err)
{
    int rc;
    memset(f, 0, sizeof(*f));
    if ((rc = str_field(fm, "name", f->name, sizeof(f->name), err)) != 0 ||
        (rc = str_field(fm, "description", f->description, sizeof(f->description), err)) != 0 ||
        (rc = str_field(fm, "version", f->version, sizeof(f->version), err)) != 0 ||
        (rc = str_field(fm, "entry", f->entry, sizeof(f->entry), err)) != 0 ||
        (rc = str_field(fm, "image", f->image, sizeof(f->image), err)) != 0)
        return rc;
    /* A block scalar keeps its final newline in the front matter; the
     * manifest's description is one line of text. */
    size_t n = strlen(f->description);
    while (n && (f->description[n - 1] == '\n' || f->description[n - 1] == ' '))
        f->description[--n] = '\0';
    f->tags = json_object_get(fm, "tags");
    if (!f->name[0] || !f->description[0])
        return skd_err_set(err, SKD_EINVAL, "SKILL.md: front matter needs name and description");
    if (!skd_skill_name_valid(f->name))
        return skd_err_set(err, SKD_EINVAL,
                           "SKILL.md: name \"%s\" must match [a-z][a-z0-9_-]{0,63}", f->name);
    return 0;
}

int skd__skill_md_parse(const char *text, size_t len, json_t **out, skd_err *err)
{
    struct front f;
    json_t *fm = NULL;
    skd_err local = {0};
    *out = NULL;
    if (!err)
        err = &local;
    int rc = skd__frontmatter_parse(text, len, &fm, err);
    if (rc == 0 && (rc = front_from_json(fm, &f, err)) == 0) {
        *out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "name", f.name, "description",
                         f.description, "version", f.version, "entry", f.entry, "image", f.image,
                         "tags", tags_array(f.tags));
        if (!*out)
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    json_decref(fm);
    return rc;
}

/* Agent Skills rules a host checks on every entry: name 1-64 of [a-z0-9]
 * in hyphen-separated runs, description 1-1024 characters, compatibility
 * 1-500 characters, metadata a map of strings. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

int skd__skill_bundle_check(const json_t *fm, skd_err *err)
{
    const char *name = json_string_value(json_object_get(fm, "name"));
    const char *desc = json_string_value(json_object_get(fm, "description"));
    if (!name || !desc)
        return skd_err_set(err, SKD_EINVAL,
                           "SKILL.md: front matter needs name and description (strings)");
    size_t n = strlen(name);
    int ok = n >= 1 && n <= 64 && name[0] != '-' && name[n - 1] != '-' && !strstr(name, "--");
    for (const char *p = name; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-';
    if (!ok)
        return skd_err_set(err, SKD_EINVAL,
                           "SKILL.md: name \"%.64s\" must be 1-64 lowercase letters and digits "
                           "in runs joined by single hyphens",
                           name);
    if (!*desc || utf8_chars(desc) > 1024)
        return skd_err_set(err, SKD_EINVAL, "SKILL.md: description must be 1-1024 characters");
    const json_t *c = json_object_get(fm, "compatibility");
    if (c &&
        (!json_is_string(c) || !json_string_length(c) || utf8_chars(json_string_value(c)) > 500))
        return skd_err_set(err, SKD_EINVAL, "SKILL.md: compatibility must be 1-500 characters");
    const json_t *md = json_object_get(fm, "metadata");
    if (md) {
        const char *k;
        const json_t *v;
        if (!json_is_object(md))
            return skd_err_set(err, SKD_EINVAL, "SKILL.md: metadata must map strings to strings");
        json_object_foreach ((json_t *)md, k, v)
            if (!json_is_string(v))
                return skd_err_set(err, SKD_EINVAL,
                                   "SKILL.md: metadata.%.64s must be a string (quote it)", k);
    }
    const json_t *lic = json_object_get(fm, "license");
    if (lic && !json_is_string(lic))
        return skd_err_set(err, SKD_EINVAL, "SKILL.md: license must be a string");
    return 0;
}

static json_t *build_manifest(int dirfd, const struct front *f, skd_err *err)
{
    json_t *schema = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = read_file_at(dirfd, "input_schema.json", 65536, &text, &len, err);
    if (rc == 0) {
        schema = skd_json_parse(text, len, err);
        free(text);
        if (!schema)
            return NULL;
    } else if (rc != SKD_ENOENT) {
        return NULL;
    } else {
        skd_err_clear(err);
        schema = json_pack("{s:s}", "type", "object");
    }
    json_t *m = json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:o, s:s}}", "name", f->name,
                          "version", f->version[0] ? f->version : "1.0.0", "description",
                          f->description, "inputSchema", schema, "tags", tags_array(f->tags), "run",
                          "image", f->image[0] ? f->image : "host", "command",
                          command_for(f->entry), "stdin", "input");
    if (!m)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return m;
}

/* Read dir's SKILL.md into *fm; dirfd receives the open folder. */
static int load_front(const char *dir, int *dirfd, json_t **fm, skd_err *err)
{
    char *md = NULL;
    size_t len = 0;
    *fm = NULL;
    *dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0)
        return skd_err_set(err, errno == ENOENT ? SKD_ENOENT : SKD_EIO, "%s: %s", dir,
                           strerror(errno));
    int rc = read_file_at(*dirfd, "SKILL.md", SKD_SKILL_MD_MAX_BYTES, &md, &len, err);
    if (rc == 0)
        rc = skd__frontmatter_parse(md, len, fm, err);
    free(md);
    if (rc) {
        close(*dirfd);
        *dirfd = -1;
    }
    return rc;
}

/* The manifest for a folder whose front matter is fm; SKD_ENOENT when it
 * names no entry and none of the default scripts exists. */
static int folder_manifest(int dirfd, const json_t *fm, json_t **manifest, skd_err *err)
{
    struct front f;
    int rc = front_from_json(fm, &f, err);
    if (rc == 0)
        rc = pick_entry(dirfd, &f, err);
    if (rc == 0 && !(*manifest = build_manifest(dirfd, &f, err)))
        rc = err->code ? err->code : SKD_EINTERNAL;
    return rc;
}

int skd_skill_folder_read(const char *dir, json_t **manifest, skd_err *err)
{
    json_t *fm = NULL;
    int dirfd = -1;
    skd_err local = {0};
    if (!err)
        err = &local;
    *manifest = NULL;
    int rc = load_front(dir, &dirfd, &fm, err);
    if (rc == 0) {
        rc = folder_manifest(dirfd, fm, manifest, err);
        close(dirfd);
    }
    json_decref(fm);
    return rc;
}

int skd__skill_folder_load(const char *dir, json_t **frontmatter, json_t **manifest, skd_err *err)
{
    json_t *fm = NULL;
    int dirfd = -1;
    *frontmatter = *manifest = NULL;
    int rc = load_front(dir, &dirfd, &fm, err);
    if (rc)
        return rc;
    if ((rc = skd__skill_bundle_check(fm, err)) == 0) {
        /* Without an entry script the bundle is served but not callable. */
        if (json_object_get(fm, "entry") || has_default_entry(dirfd))
            rc = folder_manifest(dirfd, fm, manifest, err);
    }
    close(dirfd);
    if (rc) {
        json_decref(fm);
        json_decref(*manifest);
        *manifest = NULL;
        return rc;
    }
    *frontmatter = fm;
    return 0;
}
