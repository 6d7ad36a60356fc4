/*
 * Agent Skills folders: a directory holding SKILL.md (YAML front matter with
 * at least `name` and `description`, then free Markdown) and the scripts it
 * uses. We turn one into a command-skill manifest whose command runs the
 * folder's entry script, the folder being mounted read-only at /skill.
 *
 * The front matter is parsed by hand, not by a YAML library: we accept only
 * the small subset these files use — `key: value` lines, values optionally
 * in single or double quotes, inline lists `[a, b]`, block scalars `>` and
 * `|` and plain indented continuation lines, `#` comments. Anything else is
 * an error naming the line. The parser is bounded: SKILL.md at most
 * SKD_SKILL_MD_MAX_BYTES, each value at most VALUE_MAX bytes, and nothing
 * recurses. The folder itself is the operator's (the command line or
 * DATA_DIR/skills), but its content is still checked: the entry must be a
 * regular file beneath the folder.
 */
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
    char tags[1024];
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

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Strip matching quotes in place (no escape processing beyond '' in single
 * quotes, which we refuse rather than half-handle). */
static int unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
        if (memchr(v + 1, v[0], n - 2) || (v[0] == '"' && memchr(v + 1, '\\', n - 2)))
            return -1;
        memmove(v, v + 1, n - 2);
        v[n - 2] = '\0';
    } else if (n && (v[0] == '"' || v[0] == '\'')) {
        return -1;
    }
    return 0;
}

static char *field(struct front *f, const char *key, size_t *cap)
{
    static const struct {
        const char *key;
        size_t off, cap;
    } map[] = {
        {"name", offsetof(struct front, name), sizeof(((struct front *)0)->name)},
        {"description", offsetof(struct front, description),
         sizeof(((struct front *)0)->description)},
        {"version", offsetof(struct front, version), sizeof(((struct front *)0)->version)},
        {"entry", offsetof(struct front, entry), sizeof(((struct front *)0)->entry)},
        {"image", offsetof(struct front, image), sizeof(((struct front *)0)->image)},
        {"tags", offsetof(struct front, tags), sizeof(((struct front *)0)->tags)},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(key, map[i].key) == 0) {
            *cap = map[i].cap;
            return (char *)f + map[i].off;
        }
    return NULL; /* other keys (license, metadata, ...) are read and ignored */
}

static int append(char *dst, size_t cap, const char *sep, const char *s, skd_err *err, int line)
{
    size_t n = strlen(dst);
    int w = snprintf(dst + n, cap - n, "%s%s", n ? sep : "", s);
    if (w < 0 || (size_t)w >= cap - n)
        return skd_err_set(err, SKD_ETOOBIG, "SKILL.md line %d: value longer than %zu bytes", line,
                           cap - 1);
    return 0;
}

/* Parse the front matter lines of text (between the --- markers). */
static int parse_front(char *text, struct front *f, skd_err *err)
{
    char *cur = NULL, *save = text;
    size_t cap = 0;
    const char *sep = " ";
    int line = 1, ignoring = 0;
    for (char *p = text; p; p = save, line++) {
        char *nl = strchr(p, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        int indented = (*p == ' ' || *p == '\t');
        char *s = trim(p);
        if (!*s || *s == '#')
            continue;
        if (indented) { /* continuation of the previous key */
            if (!cur && !ignoring)
                return skd_err_set(err, SKD_EINVAL,
                                   "SKILL.md line %d: indented line without "
                                   "a key",
                                   line + 1);
            int rc = cur ? append(cur, cap, sep, s, err, line + 1) : 0;
            if (rc)
                return rc;
            continue;
        }
        char *colon = strchr(s, ':');
        if (!colon || colon == s || (size_t)(colon - s) >= KEY_MAX)
            return skd_err_set(err, SKD_EINVAL, "SKILL.md line %d: expected \"key: value\"",
                               line + 1);
        *colon = '\0';
        char *key = trim(s), *val = trim(colon + 1);
        cur = field(f, key, &cap);
        ignoring = !cur;
        sep = " ";
        if (!cur)
            continue;
        if (*cur)
            return skd_err_set(err, SKD_EINVAL, "SKILL.md line %d: duplicate key %s", line + 1,
                               key);
        if (strcmp(val, ">") == 0 || strcmp(val, "|") == 0 || strcmp(val, ">-") == 0 ||
            strcmp(val, "|-") == 0) {
            sep = val[0] == '|' ? "\n" : " ";
            continue;
        }
        if (unquote(val))
            return skd_err_set(err, SKD_EINVAL, "SKILL.md line %d: unsupported quoting", line + 1);
        int rc = append(cur, cap, sep, val, err, line + 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* tags: "a, b" or "[a, b]" into a JSON array. */
static json_t *tags_array(const char *s)
{
    json_t *a = json_array();
    char buf[1024];
    skd_strlcpy(buf, s, sizeof(buf));
    char *p = trim(buf);
    size_t n = strlen(p);
    if (n >= 2 && p[0] == '[' && p[n - 1] == ']') {
        p[n - 1] = '\0';
        p++;
    }
    while (a && p && *p) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        char *t = trim(p);
        if (*t && unquote(t) == 0 && *t && strlen(t) <= 64)
            json_array_append_new(a, json_string(t));
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

static int pick_entry(int dirfd, struct front *f, skd_err *err)
{
    static const char *const defaults[] = {"scripts/run.py", "scripts/run.sh", "run.py", "run.sh",
                                           NULL};
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

/* Split SKILL.md into its front matter (NUL-terminated in place). */
static int front_matter(char *md, char **fm, skd_err *err)
{
    if (strncmp(md, "---\n", 4) != 0 && strncmp(md, "---\r\n", 5) != 0)
        return skd_err_set(err, SKD_EINVAL, "SKILL.md: must start with a --- front matter line");
    char *start = strchr(md, '\n') + 1;
    for (char *p = start; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, "---", 3) == 0 && (p[3] == '\n' || p[3] == '\r' || p[3] == '\0')) {
            *p = '\0';
            *fm = start;
            return 0;
        }
    }
    return skd_err_set(err, SKD_EINVAL, "SKILL.md: the front matter has no closing --- line");
}

/* SKILL.md text (md NUL-terminated at len, modified in place) into f. */
static int parse_md(char *md, size_t len, struct front *f, skd_err *err)
{
    char *fm = NULL;
    int rc;
    if (strlen(md) != len)
        return skd_err_set(err, SKD_EINVAL, "SKILL.md contains NUL bytes");
    /* Its values go into JSON, which holds UTF-8 only. */
    if (!skd_utf8_valid(md, len))
        return skd_err_set(err, SKD_EINVAL, "SKILL.md is not valid UTF-8 (save it as UTF-8)");
    if ((rc = front_matter(md, &fm, err)) != 0 || (rc = parse_front(fm, f, err)) != 0)
        return rc;
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
    skd_err local = {0};
    *out = NULL;
    if (!err)
        err = &local;
    if (len > SKD_SKILL_MD_MAX_BYTES)
        return skd_err_set(err, SKD_ETOOBIG, "SKILL.md is larger than %u bytes",
                           SKD_SKILL_MD_MAX_BYTES);
    char *md = malloc(len + 1);
    if (!md)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    memcpy(md, text, len);
    md[len] = '\0';
    memset(&f, 0, sizeof(f));
    int rc = parse_md(md, len, &f, err);
    free(md);
    if (rc)
        return rc;
    *out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "name", f.name, "description", f.description,
                     "version", f.version, "entry", f.entry, "image", f.image, "tags",
                     tags_array(f.tags));
    return *out ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
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

int skd_skill_folder_read(const char *dir, json_t **manifest, skd_err *err)
{
    struct front f;
    char *md = NULL;
    size_t len = 0;
    int rc;
    skd_err local = {0};
    if (!err)
        err = &local;
    *manifest = NULL;
    memset(&f, 0, sizeof(f));
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return skd_err_set(err, errno == ENOENT ? SKD_ENOENT : SKD_EIO, "%s: %s", dir,
                           strerror(errno));
    if ((rc = read_file_at(dirfd, "SKILL.md", SKD_SKILL_MD_MAX_BYTES, &md, &len, err)) != 0)
        goto out;
    if ((rc = parse_md(md, len, &f, err)) != 0)
        goto out;
    if ((rc = pick_entry(dirfd, &f, err)) != 0)
        goto out;
    if (!(*manifest = build_manifest(dirfd, &f, err)))
        rc = err->code ? err->code : SKD_EINTERNAL;
out:
    free(md);
    close(dirfd);
    return rc;
}
