/*
 * Reading image archives: telling a `docker export` tarball from a
 * `docker save` archive and an OCI image layout, finding the layers in
 * order, and streaming each layer (a tar, possibly compressed, stored as a
 * member of the outer tar) into image_layer.c without a temporary copy.
 *
 * Trust: the archive is hostile. JSON members are read with a 1 MiB cap and
 * the strict parser; member names taken from them are only ever compared
 * with names in the archive, never used as filesystem paths. Blobs named
 * blobs/sha256/<hex> are checked against their digest while they stream;
 * a mismatch fails the import (the half-built rootfs is discarded by the
 * caller).
 */
#include "sandbox/image/image_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include <archive_entry.h>
#include <openssl/evp.h>

#include "skilld/buf.h"
#include "skilld/json.h"
#include "skilld/util.h"

#define META_MAX (1 << 20)
#define NEST_CHUNK 65536
#define INDEX_DEPTH 4

/* A reader for a tar that may be compressed with any of the common filters.
 * External decompressor programs are never needed on Debian's libarchive. */
static void support_tar(struct archive *a)
{
    archive_read_support_format_tar(a);
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_zstd(a);
}

static struct archive *open_outer(const char *path, skd_err *err)
{
    struct archive *a = archive_read_new();
    if (!a) {
        skd_err_set(err, SKD_ENOMEM, "out of memory");
        return NULL;
    }
    support_tar(a);
    if (archive_read_open_filename(a, path, NEST_CHUNK) != ARCHIVE_OK) {
        skd_err_set(err, errno == ENOENT ? SKD_ENOENT : SKD_EINVAL, "%s: %s", path,
                    archive_error_string(a) ? archive_error_string(a) : "cannot open");
        archive_read_free(a);
        return NULL;
    }
    return a;
}

/* Join a link target to the directory of member and resolve "." and ".."
 * lexically, never above the archive's root. Returns 0 or -1. */
static int link_target(const char *member, const char *target, int relative, char *out, size_t cap)
{
    char joined[PATH_MAX];
    const char *slash = relative ? strrchr(member, '/') : NULL;
    int dl = slash ? (int)(slash - member) : 0;
    if (snprintf(joined, sizeof(joined), "%.*s/%s", dl, member, target) >= (int)sizeof(joined))
        return -1;
    size_t o = 0;
    for (char *save = NULL, *c = strtok_r(joined, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            if (o == 0)
                return -1;
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            continue;
        }
        size_t n = strlen(c);
        if (o + 1 + n + 1 > cap)
            return -1;
        if (o)
            out[o++] = '/';
        memcpy(out + o, c, n);
        o += n;
    }
    out[o] = '\0';
    return o ? 0 : -1;
}

/* Open the archive at tar_path positioned at the data of member name.
 * Links are followed (legacy docker save stores a repeated layer once and
 * links the others to it), at most 8 of them, never outside the archive.
 * On success *out is the open reader (caller archive_read_free). Returns 0,
 * SKD_ENOENT when there is no such member, or SKD_EINVAL. */
static int open_member(const char *tar_path, const char *name, struct archive **out, skd_err *err)
{
    char want[PATH_MAX], norm[PATH_MAX];
    skd_strlcpy(want, name, sizeof(want));
    for (int hop = 0; hop < 8; hop++) {
        struct archive *a = open_outer(tar_path, err);
        if (!a)
            return err ? err->code : SKD_EINVAL;
        struct archive_entry *ae;
        for (;;) {
            int r = archive_read_next_header(a, &ae);
            if (r == ARCHIVE_EOF || r < ARCHIVE_WARN) {
                int rc = r == ARCHIVE_EOF
                             ? skd_err_set(err, SKD_ENOENT, "%s is not in the archive", want)
                             : skd_err_set(err, SKD_EINVAL, "the archive is not a valid tar: %s",
                                           archive_error_string(a) ? archive_error_string(a) : "?");
                archive_read_free(a);
                return rc;
            }
            if (!archive_entry_pathname(ae) ||
                skd__image_norm_path(archive_entry_pathname(ae), norm, sizeof(norm)) < 0 ||
                strcmp(norm, want) != 0)
                continue;
            const char *hl = archive_entry_hardlink(ae);
            mode_t type = archive_entry_filetype(ae);
            if (!hl && type == AE_IFREG) {
                *out = a;
                return 0;
            }
            const char *target = hl ? hl : type == AE_IFLNK ? archive_entry_symlink(ae) : NULL;
            int bad = !target ||
                      link_target(want, target, !hl && target[0] != '/', norm, sizeof(norm)) < 0;
            archive_read_free(a);
            if (bad)
                return skd_err_set(err, SKD_EINVAL, "%s is not a regular file in the archive",
                                   want);
            skd_strlcpy(want, norm, sizeof(want));
            break;
        }
    }
    return skd_err_set(err, SKD_EINVAL, "%s: too many links", name);
}

/* Read the current member (capped at META_MAX) into a new string. */
static int read_current(struct archive *a, const char *name, char **out, size_t *len, skd_err *err)
{
    skd_buf b;
    skd_buf_init(&b, META_MAX);
    char chunk[8192];
    la_ssize_t n;
    while ((n = archive_read_data(a, chunk, sizeof(chunk))) > 0) {
        if (skd_buf_append(&b, chunk, (size_t)n)) {
            skd_buf_free(&b);
            return skd_err_set(err, SKD_ETOOBIG, "%s is larger than %d bytes", name, META_MAX);
        }
    }
    if (n < 0) {
        skd_buf_free(&b);
        return skd_err_set(err, SKD_EINVAL, "%s: %s", name, archive_error_string(a));
    }
    *out = skd_buf_steal(&b, len);
    return *out ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
}

/* "sha256:<hex>" -> "blobs/sha256/<hex>" and the hex. */
static int blob_path(const char *digest, char *path, size_t cap, char hex[65], skd_err *err)
{
    const char *p = digest && strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : NULL;
    if (!p || strlen(p) != 64 || strspn(p, "0123456789abcdef") != 64)
        return skd_err_set(err, SKD_EINVAL, "unsupported or invalid digest %s",
                           digest ? digest : "(none)");
    memcpy(hex, p, 65);
    snprintf(path, cap, "blobs/sha256/%s", hex);
    return 0;
}

/* Read member name as JSON; when hex is given, check its SHA-256. */
static int read_json_member(const char *tar_path, const char *name, const char *hex, json_t **out,
                            skd_err *err)
{
    struct archive *a = NULL;
    char *data = NULL;
    size_t len = 0;
    int rc = open_member(tar_path, name, &a, err);
    if (rc == 0)
        rc = read_current(a, name, &data, &len, err);
    if (a)
        archive_read_free(a);
    if (rc)
        return rc;
    if (hex) {
        char got[SKD_SHA256_HEX_LEN + 1];
        skd_sha256_hex(data, len, got);
        if (strcmp(got, hex) != 0) {
            free(data);
            return skd_err_set(err, SKD_EINVAL, "%s does not match its digest", name);
        }
    }
    *out = skd_json_parse(data, len, err);
    free(data);
    return *out ? 0 : SKD_EINVAL;
}

int skd__image_scan(const char *tar_path, int64_t max_entries, skd__image_plan *plan, skd_err *err)
{
    struct archive *a = open_outer(tar_path, err);
    if (!a)
        return err ? err->code : SKD_EINVAL;
    int has_layout = 0, has_index = 0, has_manifest = 0, rc = 0;
    int64_t n = 0;
    struct archive_entry *ae;
    char norm[PATH_MAX];
    for (;;) {
        int r = archive_read_next_header(a, &ae);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            rc = skd_err_set(err, SKD_EINVAL, "%s is not a valid tar archive: %s", tar_path,
                             archive_error_string(a) ? archive_error_string(a) : "?");
            goto out;
        }
        if (++n > max_entries) {
            rc = skd_err_set(err, SKD_ETOOBIG, "the archive has more than %lld entries",
                             (long long)max_entries);
            goto out;
        }
        if (!archive_entry_pathname(ae) ||
            skd__image_norm_path(archive_entry_pathname(ae), norm, sizeof(norm)) < 0 ||
            archive_entry_filetype(ae) != AE_IFREG)
            continue;
        has_layout |= strcmp(norm, "oci-layout") == 0;
        has_index |= strcmp(norm, "index.json") == 0;
        has_manifest |= strcmp(norm, "manifest.json") == 0;
    }
    plan->format = has_layout && has_index ? SKD__IMG_OCI
                   : has_manifest          ? SKD__IMG_DOCKER_SAVE
                                           : SKD__IMG_EXPORT;
out:
    archive_read_free(a);
    return rc;
}

static const char *host_arch(void)
{
    struct utsname u;
    if (uname(&u) < 0)
        return "amd64";
    if (strcmp(u.machine, "x86_64") == 0)
        return "amd64";
    if (strcmp(u.machine, "aarch64") == 0)
        return "arm64";
    return "unknown";
}

/* Pick the manifest descriptor for this machine from an index's list. */
static json_t *pick_manifest(json_t *manifests)
{
    size_t i;
    json_t *m;
    json_array_foreach (manifests, i, m) {
        json_t *pf = json_object_get(m, "platform");
        if (!pf)
            continue;
        const char *os = skd_json_str(pf, "os", ""), *arch = skd_json_str(pf, "architecture", "");
        if (strcmp(os, "linux") == 0 && strcmp(arch, host_arch()) == 0)
            return m;
    }
    json_array_foreach (manifests, i, m) {
        if (!json_object_get(m, "platform"))
            return m;
    }
    return json_array_size(manifests) == 1 ? json_array_get(manifests, 0) : NULL;
}

static int plan_add_layer(skd__image_plan *plan, const char *member, const char *hex, skd_err *err)
{
    if (plan->nlayers >= SKD__IMG_MAX_LAYERS)
        return skd_err_set(err, SKD_ETOOBIG, "more than %d layers", SKD__IMG_MAX_LAYERS);
    skd__image_layer *l = &plan->layers[plan->nlayers];
    if (skd__image_norm_path(member, l->member, sizeof(l->member)) < 0 || !*l->member)
        return skd_err_set(err, SKD_EINVAL, "invalid layer name %s", member);
    l->hex[0] = '\0';
    if (hex)
        skd_strlcpy(l->hex, hex, sizeof(l->hex));
    plan->nlayers++;
    return 0;
}

/* Keep the runtime part of an image config (Env, Cmd, WorkingDir, ...). */
static void plan_set_config(skd__image_plan *plan, json_t *config_doc)
{
    json_t *c = json_object_get(config_doc, "config");
    if (!json_is_object(c))
        return;
    static const char *const keep[] = {"Env", "Cmd", "Entrypoint", "WorkingDir", "User"};
    json_t *o = json_object();
    for (size_t i = 0; o && i < sizeof(keep) / sizeof(keep[0]); i++) {
        json_t *v = json_object_get(c, keep[i]);
        if (v && !json_is_null(v))
            json_object_set(o, keep[i], v);
    }
    json_decref(plan->config);
    plan->config = o;
}

static int plan_oci(const char *tar_path, skd__image_plan *plan, skd_err *err)
{
    json_t *doc = NULL, *next = NULL, *cfgdoc = NULL;
    int rc = read_json_member(tar_path, "index.json", NULL, &doc, err);
    char path[PATH_MAX], hex[65];
    for (int depth = 0; rc == 0; depth++) {
        json_t *layers = json_object_get(doc, "layers");
        if (json_is_array(layers))
            break; /* an image manifest */
        json_t *d = pick_manifest(json_object_get(doc, "manifests"));
        if (!d || depth >= INDEX_DEPTH) {
            rc = skd_err_set(err, SKD_EINVAL, "no image manifest for linux/%s in the index",
                             host_arch());
            break;
        }
        rc = blob_path(skd_json_str(d, "digest", NULL), path, sizeof(path), hex, err);
        if (rc == 0)
            rc = read_json_member(tar_path, path, hex, &next, err);
        json_decref(doc);
        doc = next;
        next = NULL;
    }
    if (rc)
        goto out;
    json_t *cfgd = json_object_get(doc, "config");
    if (cfgd && blob_path(skd_json_str(cfgd, "digest", NULL), path, sizeof(path), hex, NULL) == 0 &&
        read_json_member(tar_path, path, hex, &cfgdoc, NULL) == 0)
        plan_set_config(plan, cfgdoc);
    size_t i;
    json_t *l;
    json_array_foreach (json_object_get(doc, "layers"), i, l) {
        const char *mt = skd_json_str(l, "mediaType", "");
        if (*mt && !strstr(mt, "tar")) {
            rc = skd_err_set(err, SKD_EUNSUPPORTED, "unsupported layer media type %s", mt);
            goto out;
        }
        rc = blob_path(skd_json_str(l, "digest", NULL), path, sizeof(path), hex, err);
        if (rc == 0)
            rc = plan_add_layer(plan, path, hex, err);
        if (rc)
            goto out;
    }
out:
    json_decref(doc);
    json_decref(cfgdoc);
    return rc;
}

/* The hex digest when member is blobs/sha256/<hex> (newer docker save). */
static const char *member_hex(const char *member)
{
    const char *p = strncmp(member, "blobs/sha256/", 13) == 0 ? member + 13 : NULL;
    return p && strlen(p) == 64 && strspn(p, "0123456789abcdef") == 64 ? p : NULL;
}

static int plan_docker_save(const char *tar_path, skd__image_plan *plan, skd_err *err)
{
    json_t *doc = NULL, *cfgdoc = NULL;
    int rc = read_json_member(tar_path, "manifest.json", NULL, &doc, err);
    if (rc)
        return rc;
    json_t *m = json_array_get(doc, 0);
    json_t *layers = json_object_get(m, "Layers");
    if (!json_is_array(layers)) {
        rc = skd_err_set(err, SKD_EINVAL, "manifest.json has no Layers list");
        goto out;
    }
    const char *cfgname = skd_json_str(m, "Config", NULL);
    char norm[PATH_MAX];
    if (cfgname && skd__image_norm_path(cfgname, norm, sizeof(norm)) == 0 &&
        read_json_member(tar_path, norm, member_hex(norm), &cfgdoc, NULL) == 0)
        plan_set_config(plan, cfgdoc);
    size_t i;
    json_t *l;
    json_array_foreach (layers, i, l) {
        if (!json_is_string(l)) {
            rc = skd_err_set(err, SKD_EINVAL, "manifest.json: a layer name is not a string");
            goto out;
        }
        rc = plan_add_layer(plan, json_string_value(l), NULL, err);
        if (rc)
            goto out;
        const char *hex = member_hex(plan->layers[plan->nlayers - 1].member);
        if (hex)
            skd_strlcpy(plan->layers[plan->nlayers - 1].hex, hex, 65);
    }
out:
    json_decref(doc);
    json_decref(cfgdoc);
    return rc;
}

int skd__image_plan_layers(const char *tar_path, skd__image_plan *plan, skd_err *err)
{
    plan->nlayers = 0;
    if (plan->format == SKD__IMG_OCI)
        return plan_oci(tar_path, plan, err);
    if (plan->format == SKD__IMG_DOCKER_SAVE)
        return plan_docker_save(tar_path, plan, err);
    return 0;
}

void skd__image_plan_free(skd__image_plan *plan)
{
    if (!plan)
        return;
    json_decref(plan->config);
    plan->config = NULL;
}

/* ---- streaming a member as a nested archive ---------------------------- */

struct nested {
    struct archive *outer;
    EVP_MD_CTX *md; /* NULL when no digest is checked */
    char buf[NEST_CHUNK];
};

static la_ssize_t nested_read(struct archive *inner, void *ud, const void **out)
{
    (void)inner;
    struct nested *n = ud;
    la_ssize_t r = archive_read_data(n->outer, n->buf, sizeof(n->buf));
    if (r > 0 && n->md)
        EVP_DigestUpdate(n->md, n->buf, (size_t)r);
    *out = n->buf;
    return r;
}

/* Read what the inner reader left of the member, finish the digest and
 * compare. */
static int finish_digest(struct nested *n, const char *member, const char *hex, skd_err *err)
{
    const void *p;
    while (nested_read(NULL, n, &p) > 0)
        ;
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    char got[65];
    EVP_DigestFinal_ex(n->md, d, &dl);
    for (unsigned i = 0; i < dl && i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", d[i]);
    got[64] = '\0';
    if (strcmp(got, hex) != 0)
        return skd_err_set(err, SKD_EINVAL, "layer %s does not match its digest", member);
    return 0;
}

int skd__image_apply_layer(skd__layer_ctx *c, const char *tar_path, const skd__image_layer *l,
                           skd_err *err)
{
    struct nested *n = calloc(1, sizeof(*n));
    struct archive *inner = NULL;
    int rc = 0;
    if (!n)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    rc = open_member(tar_path, l->member, &n->outer, err);
    if (rc == SKD_ENOENT)
        rc = skd_err_set(err, SKD_EINVAL, "layer %s named in the manifest is not in the archive",
                         l->member);
    if (rc)
        goto out;
    if (l->hex[0]) {
        n->md = EVP_MD_CTX_new();
        if (!n->md || !EVP_DigestInit_ex(n->md, EVP_sha256(), NULL)) {
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
            goto out;
        }
    }
    inner = archive_read_new();
    if (!inner) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    support_tar(inner);
    if (archive_read_open(inner, n, NULL, nested_read, NULL) != ARCHIVE_OK) {
        rc = skd_err_set(err, SKD_EINVAL, "layer %s: %s", l->member,
                         archive_error_string(inner) ? archive_error_string(inner) : "?");
        goto out;
    }
    rc = skd__layer_apply(c, inner, err);
    if (rc == 0 && n->md)
        rc = finish_digest(n, l->member, l->hex, err);
out:
    if (inner)
        archive_read_free(inner);
    if (n->outer)
        archive_read_free(n->outer);
    EVP_MD_CTX_free(n->md);
    free(n);
    return rc;
}

int skd__image_apply_export(skd__layer_ctx *c, const char *tar_path, skd_err *err)
{
    struct archive *a = open_outer(tar_path, err);
    if (!a)
        return err ? err->code : SKD_EINVAL;
    int rc = skd__layer_apply(c, a, err);
    archive_read_free(a);
    return rc;
}
