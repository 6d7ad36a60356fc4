/*
 * Secrets of a key (DESIGN.md, "Secrets at egress"): validation, sealing
 * and the listing for /v1/secrets, and the source the runner asks for a
 * run's secrets (skd_runner_set_secrets).
 *
 * A value is sealed with AES-256-GCM under the operator's key
 * (SKILLD_SECRETS_KEY_FILE, else $DATA_DIR/secrets.key made on first use,
 * mode 0600, by the process that uses it: the unprivileged server) with a
 * fresh 96-bit nonce and the key id and name as associated data, so a
 * sealed value moved to another row does not open. The store sees only the
 * nonce and the sealed bytes. A value is opened only to hand it to the
 * runner for a run's egress proxy; it is never logged, audited or listed.
 * The fingerprint shown is an HMAC of the value under the same key: it
 * tells two values apart without being a hash someone could guess against.
 *
 * What it trusts: the configuration. A caller's input is validated here;
 * the key file is checked for its size and its mode.
 */
#include "engine/engine_int.h"
#include "skilld/json.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VALUE_MAX 16384
#define NAME_MAX_LEN 128
#define HOSTS_MAX 16
#define HEADERS_MAX 16
#define NONCE_LEN 12
#define TAG_LEN 16

static void hex(const unsigned char *p, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[p[i] >> 4];
        out[2 * i + 1] = d[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int unhex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode hex s (lower case, even length) into out (cap bytes): the length, or -1. */
static long unhex(const char *s, unsigned char *out, size_t cap)
{
    size_t n = strlen(s);
    if (n % 2 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int a = unhex_digit(s[2 * i]), b = unhex_digit(s[2 * i + 1]);
        if (a < 0 || b < 0)
            return -1;
        out[i] = (unsigned char)(a << 4 | b);
    }
    return (long)(n / 2);
}

/* ---- the sealing key ------------------------------------------------------ */

/* Read the key at fd: 32 raw bytes, or 64 hex digits and optional white
 * space. */
static int read_key(int fd, const char *path, unsigned char key[32], skd_err *err)
{
    char buf[130];
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        return skd_err_set(err, SKD_ECONFIG, "secrets key %s is not a regular file", path);
    if (sb.st_mode & 077)
        return skd_err_set(err, SKD_ECONFIG,
                           "secrets key %s may be read by others: make it mode 0600", path);
    ssize_t n = read(fd, buf, sizeof(buf));
    int rc = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
        n--;
    if (n == 32) {
        memcpy(key, buf, 32);
    } else if (n == 64) {
        buf[64] = '\0';
        for (int i = 0; i < 64; i++)
            buf[i] = (char)(buf[i] >= 'A' && buf[i] <= 'F' ? buf[i] + 32 : buf[i]);
        if (unhex(buf, key, 32) != 32)
            rc = skd_err_set(err, SKD_ECONFIG, "secrets key %s: not 64 hex digits", path);
    } else {
        rc = skd_err_set(err, SKD_ECONFIG, "secrets key %s must hold 32 bytes (or 64 hex digits)",
                         path);
    }
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

/* Make the default key file at path (mode 0600, this process's user). 0,
 * 1 when another process made it first, or an error. */
static int make_key(const char *path, skd_err *err)
{
    unsigned char k[32];
    char text[66];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return 1;
    if (fd < 0)
        return skd_err_set(err, SKD_EIO, "cannot create %s: %s", path, strerror(errno));
    int rc = skd_random(k, sizeof(k));
    if (rc == 0) {
        hex(k, sizeof(k), text);
        text[64] = '\n';
        if (write(fd, text, 65) != 65 || fsync(fd) != 0)
            rc = skd_err_set(err, SKD_EIO, "cannot write %s: %s", path, strerror(errno));
    } else {
        skd_err_set(err, rc, "no randomness for the secrets key");
    }
    explicit_bzero(k, sizeof(k));
    explicit_bzero(text, sizeof(text));
    close(fd);
    if (rc)
        unlink(path);
    return rc;
}

/* The sealing key, read once (thread-safe). */
static int sealing_key(skd_engine *e, const unsigned char **key, skd_err *err)
{
    int rc = 0;
    pthread_mutex_lock(&e->secrets_mu);
    if (!e->secrets_key_ok) {
        const char *conf = skd_config_str(e->cfg, "SKILLD_SECRETS_KEY_FILE");
        char path[PATH_MAX];
        if (*conf)
            skd_strlcpy(path, conf, sizeof(path));
        else if (snprintf(path, sizeof(path), "%s/secrets.key",
                          skd_config_str(e->cfg, "DATA_DIR")) >= (int)sizeof(path))
            rc = skd_err_set(err, SKD_ECONFIG, "DATA_DIR is too long");
        int fd = -1;
        for (int tries = 0; rc == 0 && fd < 0 && tries < 2; tries++) {
            fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                break;
            if (errno != ENOENT || *conf) {
                rc = skd_err_set(err, SKD_ECONFIG, "cannot open the secrets key %s: %s", path,
                                 strerror(errno));
                break;
            }
            int m = make_key(path, err);
            if (m < 0)
                rc = m;
        }
        if (rc == 0 && fd < 0)
            rc = skd_err_set(err, SKD_ECONFIG, "cannot open the secrets key %s", path);
        if (rc == 0)
            rc = read_key(fd, path, e->secrets_key, err);
        if (fd >= 0)
            close(fd);
        e->secrets_key_ok = rc == 0;
    }
    pthread_mutex_unlock(&e->secrets_mu);
    *key = e->secrets_key;
    return rc;
}

/* ---- sealing ------------------------------------------------------------- */

static void aad_of(const char *key_id, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "skilld-secret\n%s\n%s", key_id, name);
}

/* Seal value into row->nonce and row->sealed (new strings). */
static int seal(const unsigned char *key, const char *key_id, const char *name, const char *value,
                skd_secret_row *row, skd_err *err)
{
    unsigned char nonce[NONCE_LEN], tag[TAG_LEN];
    size_t vl = strlen(value);
    unsigned char *ct = malloc(vl + TAG_LEN + 1);
    char aad[300];
    int len = 0, fin = 0, rc = 0;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    aad_of(key_id, name, aad, sizeof(aad));
    if (!ct || !x || skd_random(nonce, sizeof(nonce)) ||
        EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_EncryptInit_ex(x, NULL, NULL, key, nonce) != 1 ||
        EVP_EncryptUpdate(x, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) != 1 ||
        EVP_EncryptUpdate(x, ct, &len, (const unsigned char *)value, (int)vl) != 1 ||
        EVP_EncryptFinal_ex(x, ct + len, &fin) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1) {
        rc = skd_err_set(err, SKD_EINTERNAL, "cannot seal the secret");
        goto out;
    }
    memcpy(ct + len + fin, tag, TAG_LEN);
    size_t total = (size_t)(len + fin) + TAG_LEN;
    row->nonce = malloc(2 * NONCE_LEN + 1);
    row->sealed = malloc(2 * total + 1);
    if (!row->nonce || !row->sealed) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    hex(nonce, NONCE_LEN, row->nonce);
    hex(ct, total, row->sealed);
out:
    EVP_CIPHER_CTX_free(x);
    free(ct);
    return rc;
}

/* Open row's value into a new string (caller wipes and frees). */
static int unseal(const unsigned char *key, const char *key_id, const skd_secret_row *row,
                  char **out, skd_err *err)
{
    unsigned char nonce[NONCE_LEN];
    size_t sl = strlen(row->sealed) / 2;
    unsigned char *ct = malloc(sl + 1);
    char *pt = malloc(sl + 1);
    char aad[300];
    int len = 0, fin = 0, rc = 0;
    long cl;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    *out = NULL;
    aad_of(key_id, row->name, aad, sizeof(aad));
    if (!ct || !pt || !x || unhex(row->nonce, nonce, NONCE_LEN) != NONCE_LEN ||
        (cl = unhex(row->sealed, ct, sl)) < TAG_LEN ||
        EVP_DecryptInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_DecryptInit_ex(x, NULL, NULL, key, nonce) != 1 ||
        EVP_DecryptUpdate(x, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) != 1 ||
        EVP_DecryptUpdate(x, (unsigned char *)pt, &len, ct, (int)(cl - TAG_LEN)) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, ct + cl - TAG_LEN) != 1 ||
        EVP_DecryptFinal_ex(x, (unsigned char *)pt + len, &fin) != 1) {
        rc = skd_err_set(err, SKD_EINTERNAL,
                         "secret %s does not open with the secrets key (was the key file "
                         "replaced?)",
                         row->name);
        if (pt)
            explicit_bzero(pt, sl + 1);
        free(pt);
        pt = NULL;
    } else {
        pt[len + fin] = '\0';
    }
    EVP_CIPHER_CTX_free(x);
    free(ct);
    *out = pt;
    return rc;
}

static void fingerprint(const unsigned char *key, const char *value, char out[64])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    HMAC(EVP_sha256(), key, 32, (const unsigned char *)value, strlen(value), md, &ml);
    memcpy(out, "hmac-sha256:", 12);
    hex(md, 8, out + 12);
}

/* ---- validation ---------------------------------------------------------- */

static int valid_env_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

/* A host name, or one with a "*." prefix; never an IP literal or "*". The
 * pattern lower-cased into out (254 bytes). */
static int valid_host_pattern(const char *s, char *out, skd_err *err)
{
    const char *h = strncmp(s, "*.", 2) == 0 ? s + 2 : s;
    size_t n = strlen(h);
    if (n && h[n - 1] == '.')
        n--;
    if (n == 0 || n > 253 || strlen(s) > 253)
        goto bad;
    unsigned char bin[16];
    if (strchr(h, ':') || inet_pton(AF_INET, h, bin) == 1)
        return skd_err_set(err, SKD_EINVAL,
                           "hosts: '%.80s' is an IP address; a secret is bound to host names", s);
    size_t label = 0, last_start = 0;
    int last_digits = 1;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c == '.') {
            if (label == 0)
                goto bad;
            label = 0;
            last_start = i + 1;
            last_digits = 1;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            goto bad;
        if (!(c >= '0' && c <= '9'))
            last_digits = 0;
        if (++label > 63)
            goto bad;
    }
    if (label == 0 || last_digits) /* "10.1" and the like name an address */
        goto bad;
    (void)last_start;
    size_t pre = (size_t)(h - s), k = 0;
    for (size_t i = 0; i < pre + n; i++)
        out[k++] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    out[k] = '\0';
    return 0;
bad:
    return skd_err_set(err, SKD_EINVAL, "hosts: '%.80s' is not a host name or a '*.'-prefixed one",
                       s);
}

static int valid_header_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c && strchr("!#$%&'*+-.^_`|~", c))))
            return 0;
    }
    return 1;
}

/* Join the strings of array a (each checked by the caller) with commas,
 * lower case, into a new string. */
static char *join_lower(const char *const *v, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i]) + 1;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        for (const char *q = v[i]; *q; q++)
            *p++ = (char)(*q >= 'A' && *q <= 'Z' ? *q + 32 : *q);
    }
    *p = '\0';
    return s;
}

static json_t *split_json(const char *csv)
{
    json_t *a = json_array();
    const char *s = csv;
    while (a && s && *s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        json_array_append_new(a, json_stringn(s, n));
        s = e ? e + 1 : NULL;
    }
    return a;
}

static json_t *row_json(const skd_secret_row *r)
{
    json_t *o = json_pack("{s:s, s:o, s:s, s:I}", "name", r->name, "hosts", split_json(r->hosts),
                          "fingerprint", r->fingerprint, "createdAt", (json_int_t)r->created_ms);
    if (o && r->headers && *r->headers)
        json_object_set_new(o, "headers", split_json(r->headers));
    return o;
}

/* The key the actor acts on: its own, or with skills:admin the one named. */
static int target_key(skd_engine *e, const skd_actor *who, const char *key, const char **out,
                      skd_err *err)
{
    *out = who->key_id;
    if (!e->store)
        return skd_err_set(err, SKD_EINTERNAL, "this engine was opened for sandbox runs only");
    if (!key || !*key || (who->key_id && strcmp(key, who->key_id) == 0))
        return who->key_id ? 0 : skd_err_set(err, SKD_EINVAL, "key: which key's secrets?");
    if (!(who->scopes & SKD_SCOPE_ADMIN))
        return skd_err_set(err, SKD_EFORBIDDEN, "only skills:admin may name another key");
    skd_key_info info;
    int rc = skd_store_key_get(e->store, key, &info, err);
    if (rc)
        return rc == SKD_ENOENT ? skd_err_set(err, SKD_EINVAL, "key: no key %.64s", key) : rc;
    *out = key;
    return 0;
}

/* Check body's fields into row (hosts, headers: new strings). */
static int check_input(const json_t *body, const char **name, const char **value,
                       skd_secret_row *row, skd_err *err)
{
    const json_t *jn = json_object_get(body, "name"), *jv = json_object_get(body, "value");
    const json_t *jh = json_object_get(body, "hosts"), *jhd = json_object_get(body, "headers");
    if (!json_is_string(jn) || !valid_env_name(json_string_value(jn)))
        return skd_err_set(err, SKD_EINVAL,
                           "name: must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, "
                           "at most %d bytes)",
                           NAME_MAX_LEN);
    *name = json_string_value(jn);
    if (skd_sandbox_env_reserved(*name))
        return skd_err_set(err, SKD_EINVAL,
                           "name: %s is set by the sandbox itself (PATH, HOME, proxy and CA "
                           "variables, SKILLD_* and SKILLS_* names are taken)",
                           *name);
    if (!json_is_string(jv))
        return skd_err_set(err, SKD_EINVAL, "value: a string is required");
    *value = json_string_value(jv);
    size_t vl = json_string_length(jv);
    if (vl == 0 || vl > VALUE_MAX)
        return skd_err_set(err, SKD_EINVAL, "value: must be 1 to %d bytes", VALUE_MAX);
    if (strlen(*value) != vl || strpbrk(*value, "\r\n"))
        return skd_err_set(err, SKD_EINVAL, "value: may not hold NUL, CR or LF");
    if (!json_is_array(jh) || json_array_size(jh) == 0 || json_array_size(jh) > HOSTS_MAX)
        return skd_err_set(err, SKD_EINVAL, "hosts: an array of 1 to %d host names", HOSTS_MAX);
    char pats[HOSTS_MAX][254];
    const char *pv[HOSTS_MAX];
    size_t i;
    const json_t *x;
    json_array_foreach (jh, i, x) {
        if (!json_is_string(x))
            return skd_err_set(err, SKD_EINVAL, "hosts: must be strings");
        int rc = valid_host_pattern(json_string_value(x), pats[i], err);
        if (rc)
            return rc;
        pv[i] = pats[i];
    }
    if (!(row->hosts = join_lower(pv, json_array_size(jh))))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    const char *hv[HEADERS_MAX];
    size_t nh = 0;
    if (jhd && !json_is_null(jhd)) {
        if (!json_is_array(jhd) || json_array_size(jhd) > HEADERS_MAX)
            return skd_err_set(err, SKD_EINVAL, "headers: an array of at most %d header names",
                               HEADERS_MAX);
        json_array_foreach (jhd, i, x) {
            if (!json_is_string(x) || !valid_header_name(json_string_value(x)))
                return skd_err_set(err, SKD_EINVAL, "headers: '%.64s' is not a header name",
                                   json_is_string(x) ? json_string_value(x) : "?");
            hv[nh++] = json_string_value(x);
        }
    }
    if (!(row->headers = join_lower(hv, nh)))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    return 0;
}

json_t *skd_engine_secret_set(skd_engine *e, const skd_actor *who, const json_t *body, skd_err *err)
{
    skd_secret_row row;
    const char *key_id = NULL, *name = NULL, *value = NULL;
    const unsigned char *mk = NULL;
    unsigned char ph[16];
    json_t *out = NULL;
    memset(&row, 0, sizeof(row));
    const json_t *jk = json_object_get(body, "key");
    if (jk && !json_is_string(jk)) {
        skd_err_set(err, SKD_EINVAL, "key: a key id (string)");
        goto out;
    }
    if (target_key(e, who, json_string_value(jk), &key_id, err) ||
        check_input(body, &name, &value, &row, err) || sealing_key(e, &mk, err))
        goto out;
    if (skd_random(ph, sizeof(ph))) {
        skd_err_set(err, SKD_EINTERNAL, "no randomness for a placeholder");
        goto out;
    }
    skd_strlcpy(row.name, name, sizeof(row.name));
    memcpy(row.placeholder, "skd_secret_", 11);
    hex(ph, sizeof(ph), row.placeholder + 11);
    fingerprint(mk, value, row.fingerprint);
    row.created_ms = skd_wall_ms();
    if (seal(mk, key_id, name, value, &row, err) ||
        skd_store_secret_put(e->store, key_id, &row,
                             (int)skd_config_int(e->cfg, "SKILLS_SECRETS_MAX_PER_KEY"), err))
        goto out;
    if (!(out = row_json(&row)))
        skd_err_set(err, SKD_ENOMEM, "out of memory");
out:
    free(row.hosts);
    free(row.headers);
    free(row.nonce);
    free(row.sealed);
    return out;
}

json_t *skd_engine_secret_list(skd_engine *e, const skd_actor *who, const char *key, skd_err *err)
{
    const char *key_id;
    skd_secret_row *rows = NULL;
    size_t n = 0;
    if (target_key(e, who, key, &key_id, err) ||
        skd_store_secret_rows(e->store, key_id, &rows, &n, err))
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, row_json(&rows[i]))) {
            json_decref(a);
            a = NULL;
        }
    skd_store_secret_rows_free(rows, n);
    if (!a)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return a;
}

int skd_engine_secret_delete(skd_engine *e, const skd_actor *who, const char *name, const char *key,
                             skd_err *err)
{
    const char *key_id;
    int rc = target_key(e, who, key, &key_id, err);
    if (rc)
        return rc;
    return skd_store_secret_delete(e->store, key_id, name, err);
}

int skd__engine_secrets_open(void *arg, const char *key_id, skd_secret **out, size_t *n,
                             skd_err *err)
{
    skd_engine *e = arg;
    skd_secret_row *rows = NULL;
    size_t nrows = 0;
    const unsigned char *mk = NULL;
    *out = NULL;
    *n = 0;
    int rc = skd_store_secret_rows(e->store, key_id, &rows, &nrows, err);
    if (rc || !nrows)
        goto out;
    if ((rc = sealing_key(e, &mk, err)))
        goto out;
    skd_secret *v = calloc(nrows, sizeof(*v));
    if (!v) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nrows && rc == 0; i++) {
        if ((rc = unseal(mk, key_id, &rows[i], &v[i].value, err)))
            break;
        if (!(v[i].name = strdup(rows[i].name)) ||
            !(v[i].placeholder = strdup(rows[i].placeholder)) ||
            !(v[i].hosts = strdup(rows[i].hosts)) || !(v[i].headers = strdup(rows[i].headers)))
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    if (rc) {
        skd_secrets_free(v, nrows);
        goto out;
    }
    *out = v;
    *n = nrows;
out:
    skd_store_secret_rows_free(rows, nrows);
    return rc;
}

void skd__engine_secrets_attach(skd_engine *e, skd_runner *r)
{
    if (e->store && r)
        skd_runner_set_secrets(r, skd__engine_secrets_open, e);
}
