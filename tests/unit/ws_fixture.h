/*
 * Fixture for the workspace tests: an engine over a temporary DATA_DIR,
 * calls through skd_engine_execute (or straight to a handler), host paths
 * of a key's workspace, and a snapshot of everything outside one workspace
 * so a test can assert that nothing outside was written.
 * Header-only (static inline) so each test program stays one file.
 */
#ifndef SKILLD_TESTS_WS_FIXTURE_H
#define SKILLD_TESTS_WS_FIXTURE_H

#include "skilld/skilld.h"
#include "skilld/workspace.h"

#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fx {
    char dir[64]; /* DATA_DIR */
    skd_config *cfg;
    skd_engine *eng;
} fx;

/* Open an engine over a fresh DATA_DIR. quota/max 0: defaults. */
static inline int fx_open(fx *f, long long quota, long long max)
{
    skd_err e = {0};
    char num[32];
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/skilld-ws-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    f->cfg = skd_config_new();
    if (skd_config_set(f->cfg, "DATA_DIR", f->dir, &e))
        return -1;
    if (quota) {
        snprintf(num, sizeof(num), "%lld", quota);
        if (skd_config_set(f->cfg, "SKILLS_WORKSPACE_QUOTA_BYTES", num, &e))
            return -1;
    }
    if (max) {
        snprintf(num, sizeof(num), "%lld", max);
        if (skd_config_set(f->cfg, "SKILLS_MAX_FILE_BYTES", num, &e))
            return -1;
    }
    if (skd_engine_open(f->cfg, &f->eng, &e)) {
        fprintf(stderr, "engine: %s\n", skd_err_msg(&e));
        return -1;
    }
    return 0;
}

static inline int fx_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

static inline void fx_rm_rf(const char *dir)
{
    nftw(dir, fx_rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

static inline void fx_close(fx *f)
{
    skd_engine_close(f->eng);
    skd_config_free(f->cfg);
    if (f->dir[0])
        fx_rm_rf(f->dir);
    memset(f, 0, sizeof(*f));
}

/* Execute skill as key with input (stolen). New reference. */
static inline json_t *fx_call(fx *f, const char *key, const char *skill, json_t *input)
{
    skd_call c = {.key_id = key, .scopes = SKD_SCOPE_ALL, .skill = skill, .input = input};
    json_t *r = skd_engine_execute(f->eng, &c, NULL);
    json_decref(input);
    return r;
}

/* The same with the input as JSON text. */
static inline json_t *fx_callj(fx *f, const char *key, const char *skill, const char *json)
{
    json_error_t je;
    json_t *in = json_loads(json, JSON_ALLOW_NUL, &je);
    if (!in) {
        fprintf(stderr, "bad test JSON: %s: %s\n", json, je.text);
        return NULL;
    }
    return fx_call(f, key, skill, in);
}

/* Error code of a result ("" on success); result is released. */
static inline const char *fx_code(json_t *r)
{
    static __thread char code[64];
    const char *c = skd_result_success(r) ? "" : skd_result_code(r);
    snprintf(code, sizeof(code), "%s", c ? c : "(none)");
    json_decref(r);
    return code;
}

/* Host path of key's workspace (created), or of rel inside it. */
static inline const char *fx_ws(fx *f, const char *key, const char *rel, char *out, size_t cap)
{
    skd_workspace *ws = NULL;
    skd_err e = {0};
    if (skd_workspace_open(f->dir, key, &ws, &e))
        return NULL;
    if (rel)
        snprintf(out, cap, "%s/%s", skd_workspace_path(ws), rel);
    else
        snprintf(out, cap, "%s", skd_workspace_path(ws));
    skd_workspace_close(ws);
    return out;
}

/* Write a host file (for fixtures). */
static inline int fx_put(const char *path, const char *data)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    fputs(data, fp);
    return fclose(fp);
}

/* Read a host file into buf (NUL-terminated); returns its length or -1. */
static inline long fx_get(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return (long)n;
}

/* Snapshot: a digest over (path, type, size, mtime, inode) of every entry
 * below root except the subtree skip (may be NULL). Two equal snapshots
 * mean nothing there was created, removed, renamed or written. */
static __thread const char *fx_snap_skip;
static __thread EVP_MD_CTX *fx_snap_md;

static inline int fx_snap_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag, (void)ftw;
    if (fx_snap_skip && strncmp(p, fx_snap_skip, strlen(fx_snap_skip)) == 0)
        return 0;
    char line[PATH_MAX + 128];
    int n = snprintf(line, sizeof(line), "%s|%o|%lld|%lld.%09ld|%llu\n", p, st->st_mode,
                     (long long)st->st_size, (long long)st->st_mtim.tv_sec,
                     st->st_mtim.tv_nsec, (unsigned long long)st->st_ino);
    EVP_DigestUpdate(fx_snap_md, line, (size_t)n);
    return 0;
}

static inline void fx_snapshot(const char *root, const char *skip, char out[65])
{
    unsigned char md[32];
    unsigned len = 0;
    fx_snap_skip = skip;
    fx_snap_md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(fx_snap_md, EVP_sha256(), NULL);
    nftw(root, fx_snap_one, 32, FTW_PHYS);
    EVP_DigestFinal_ex(fx_snap_md, md, &len);
    EVP_MD_CTX_free(fx_snap_md);
    fx_snap_md = NULL;
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

#endif
