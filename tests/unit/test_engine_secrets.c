/*
 * Secrets in the engine and the store (src/engine/secrets.c,
 * src/store/secrets.c) and the header substitution of the egress proxy
 * (src/net/egress_secret.c): the sealing key is made once, mode 0600; a
 * value is sealed (not in the database file in clear, not in a listing),
 * opens only for its own key and name, does not open once its row is
 * tampered with or under another key file; the cap per key; and the
 * substitution puts a value only in the headers of a bound host.
 */
#include "engine/engine_int.h"
#include "net/egress.h"
#include "skilld/json.h"
#include "skilld/skilld.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"
#include "tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];
static char datadir[128];

static skd_engine *open_engine(skd_config **cfg_out, const char *max)
{
    skd_err err = {0};
    skd_config *cfg = skd_config_new();
    skd_config_set(cfg, "DATA_DIR", datadir, &err);
    if (max)
        skd_config_set(cfg, "SKILLS_SECRETS_MAX_PER_KEY", max, &err);
    skd_engine *e = NULL;
    if (skd_engine_open_flags(cfg, SKD_ENGINE_NO_SKILLS, &e, &err)) {
        printf("# engine: %s\n", skd_err_msg(&err));
        skd_config_free(cfg);
        return NULL;
    }
    *cfg_out = cfg;
    return e;
}

static json_t *set(skd_engine *e, const char *key, const char *name, const char *value,
                   skd_err *err)
{
    skd_actor who = {.key_id = key, .scopes = SKD_SCOPE_READ | SKD_SCOPE_EXECUTE};
    json_t *b =
        json_pack("{s:s, s:s, s:[s]}", "name", name, "value", value, "hosts", "api.example.org");
    json_t *r = skd_engine_secret_set(e, &who, b, err);
    json_decref(b);
    return r;
}

/* 1 when the file holds needle. */
static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

TEST(seal_and_open)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg, NULL);
    CHECK(e != NULL);
    if (!e)
        return;
    skd_err err = {0};
    json_t *r = set(e, "k1", "TOKEN", "s3cr3t-value-for-the-test", &err);
    CHECK(r != NULL);
    CHECK_STR(skd_json_str(r, "name", ""), "TOKEN");
    CHECK(strncmp(skd_json_str(r, "fingerprint", ""), "hmac-sha256:", 12) == 0);
    CHECK(json_object_get(r, "value") == NULL);
    json_decref(r);
    char kp[256], db[256];
    snprintf(kp, sizeof(kp), "%s/secrets.key", datadir);
    snprintf(db, sizeof(db), "%s/skilld.db", datadir);
    struct stat st;
    CHECK(stat(kp, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* Opened for the runner: the value, the placeholder, the hosts. */
    skd_secret *v = NULL;
    size_t n = 0;
    CHECK_EQ_INT(skd__engine_secrets_open(e, "k1", &v, &n, &err), 0);
    CHECK_EQ_INT((int)n, 1);
    if (n == 1) {
        CHECK_STR(v[0].value, "s3cr3t-value-for-the-test");
        CHECK(strncmp(v[0].placeholder, "skd_secret_", 11) == 0 && strlen(v[0].placeholder) == 43);
        CHECK_STR(v[0].hosts, "api.example.org");
    }
    skd_secrets_free(v, n);
    /* Another key has none. */
    CHECK_EQ_INT(skd__engine_secrets_open(e, "k2", &v, &n, &err), 0);
    CHECK_EQ_INT((int)n, 0);
    skd_engine_close(e);
    skd_config_free(cfg);
    CHECK(!file_has(db, "s3cr3t-value-for-the-test"));
    char wal[260];
    snprintf(wal, sizeof(wal), "%s-wal", db);
    CHECK(!file_has(wal, "s3cr3t-value-for-the-test"));
}

TEST(tampered_row_does_not_open)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg, NULL);
    CHECK(e != NULL);
    if (!e)
        return;
    skd_err err = {0};
    json_t *r = set(e, "k3", "T", "value-three", &err);
    CHECK(r != NULL);
    json_decref(r);
    /* The sealed row moved to another key does not open there (the key id
     * is associated data). */
    skd_secret_row *rows = NULL;
    size_t n = 0;
    CHECK_EQ_INT(skd_store_secret_rows(skd_engine_store(e), "k3", &rows, &n, &err), 0);
    CHECK_EQ_INT((int)n, 1);
    if (n == 1) {
        CHECK_EQ_INT(skd_store_secret_put(skd_engine_store(e), "k4", &rows[0], 32, &err), 0);
        skd_secret *v = NULL;
        size_t nv = 0;
        CHECK_EQ_INT(skd__engine_secrets_open(e, "k4", &v, &nv, &err), SKD_EINTERNAL);
        CHECK(v == NULL);
        /* One flipped bit of the sealed bytes: no longer opens. */
        rows[0].sealed[0] = rows[0].sealed[0] == '0' ? '1' : '0';
        CHECK_EQ_INT(skd_store_secret_put(skd_engine_store(e), "k3", &rows[0], 32, &err), 0);
        CHECK_EQ_INT(skd__engine_secrets_open(e, "k3", &v, &nv, &err), SKD_EINTERNAL);
    }
    skd_store_secret_rows_free(rows, n);
    skd_engine_close(e);
    skd_config_free(cfg);
}

TEST(cap_per_key)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg, "2");
    CHECK(e != NULL);
    if (!e)
        return;
    skd_err err = {0};
    json_t *a = set(e, "k5", "A", "1", &err), *b = set(e, "k5", "B", "2", &err);
    CHECK(a && b);
    json_decref(a);
    json_decref(b);
    json_t *c = set(e, "k5", "C", "3", &err);
    CHECK(c == NULL && err.code == SKD_EQUOTA);
    json_decref(c);
    skd_err_clear(&err);
    json_t *again = set(e, "k5", "A", "replaced", &err); /* a name held is replaced */
    CHECK(again != NULL);
    json_decref(again);
    skd_actor who = {.key_id = "k5", .scopes = SKD_SCOPE_READ};
    json_t *l = skd_engine_secret_list(e, &who, NULL, &err);
    CHECK(l && json_array_size(l) == 2);
    char *text = l ? json_dumps(l, 0) : NULL;
    CHECK(text && strstr(text, "replaced") == NULL);
    free(text);
    json_decref(l);
    CHECK_EQ_INT(skd_engine_secret_delete(e, &who, "A", NULL, &err), 0);
    CHECK_EQ_INT(skd_engine_secret_delete(e, &who, "A", NULL, &err), SKD_ENOENT);
    skd_engine_close(e);
    skd_config_free(cfg);
}

TEST(another_key_file_does_not_open)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg, NULL);
    CHECK(e != NULL);
    if (!e)
        return;
    skd_err err = {0};
    json_t *r = set(e, "k6", "T", "value-six", &err);
    CHECK(r != NULL);
    json_decref(r);
    skd_engine_close(e);
    char kp[256];
    snprintf(kp, sizeof(kp), "%s/other.key", tmpdir);
    int fd = open(kp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
                           65) == 65);
    close(fd);
    skd_config_set(cfg, "SKILLD_SECRETS_KEY_FILE", kp, &err);
    CHECK_EQ_INT(skd_engine_open_flags(cfg, SKD_ENGINE_NO_SKILLS, &e, &err), 0);
    skd_secret *v = NULL;
    size_t n = 0;
    CHECK_EQ_INT(skd__engine_secrets_open(e, "k6", &v, &n, &err), SKD_EINTERNAL);
    skd_engine_close(e);
    /* A key file others may read is refused. */
    chmod(kp, 0644);
    CHECK_EQ_INT(skd_engine_open_flags(cfg, SKD_ENGINE_NO_SKILLS, &e, &err), 0);
    r = set(e, "k6", "U", "v", &err);
    CHECK(r == NULL && err.code == SKD_ECONFIG);
    json_decref(r);
    skd_engine_close(e);
    skd_config_free(cfg);
}

static skd_secret sec(char *name, char *ph, char *value, char *hosts, char *headers)
{
    return (skd_secret){
        .name = name, .placeholder = ph, .value = value, .hosts = hosts, .headers = headers};
}

static const char *subst(const skd_secret *s, size_t n, const char *host, const char *head,
                         uint64_t *used, uint64_t *elsewhere)
{
    static char out[SKD_EGRESS_SUBST_MAX + 1];
    size_t ol = 0;
    *used = *elsewhere = 0;
    if (skd__egress_subst_head(s, n, host, head, strlen(head), out, SKD_EGRESS_SUBST_MAX, &ol, used,
                               elsewhere))
        return NULL;
    out[ol] = '\0';
    return out;
}

TEST(substitution_in_headers)
{
    skd_secret s[2] = {sec("A", "skd_secret_aaaa", "VALUE-A", "api.test,*.api.test", ""),
                       sec("B", "skd_secret_bbbb", "VALUE-B", "b.test", "x-key")};
    uint64_t used, els;
    const char *head = "GET /skd_secret_aaaa HTTP/1.1\r\nHost: api.test\r\n"
                       "Authorization: Bearer skd_secret_aaaa\r\nX-Two: skd_secret_aaaa,"
                       "skd_secret_aaaa\r\n\r\n";
    CHECK_STR(subst(s, 2, "api.test", head, &used, &els),
              "GET /skd_secret_aaaa HTTP/1.1\r\nHost: api.test\r\n"
              "Authorization: Bearer VALUE-A\r\nX-Two: VALUE-A,VALUE-A\r\n\r\n");
    CHECK(used == 1 && els == 0);
    CHECK_STR(subst(s, 2, "x.api.test", head, &used, &els),
              "GET /skd_secret_aaaa HTTP/1.1\r\nHost: api.test\r\n"
              "Authorization: Bearer VALUE-A\r\nX-Two: VALUE-A,VALUE-A\r\n\r\n");
    /* Another host: as it was, noted as elsewhere. */
    CHECK_STR(subst(s, 2, "evil.test", head, &used, &els), head);
    CHECK(used == 0 && els == 1);
    /* B only in X-Key, on b.test; A's placeholder is not B's. */
    const char *h2 = "GET / HTTP/1.1\r\nAuthorization: skd_secret_bbbb\r\nX-KEY: skd_secret_bbbb "
                     "skd_secret_aaaa\r\n\r\n";
    CHECK_STR(subst(s, 2, "b.test", h2, &used, &els),
              "GET / HTTP/1.1\r\nAuthorization: skd_secret_bbbb\r\nX-KEY: VALUE-B "
              "skd_secret_aaaa\r\n\r\n");
    CHECK(used == 2 && els == 3);
    /* A placeholder as a header name stays; the one in the value goes. */
    CHECK_STR(subst(s, 2, "api.test", "GET / HTTP/1.1\r\nskd_secret_aaaa: skd_secret_aaaa\r\n\r\n",
                    &used, &els),
              "GET / HTTP/1.1\r\nskd_secret_aaaa: VALUE-A\r\n\r\n");
    /* Past the output's cap: refused, never cut. */
    static char big[SKD_EGRESS_SUBST_MAX];
    char *bigv = malloc(16385);
    memset(bigv, 'v', 16384);
    bigv[16384] = '\0';
    skd_secret w = sec("W", "skd_secret_wwww", bigv, "w.test", "");
    size_t o = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 4; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "X-%d: skd_secret_wwww\r\n", i);
    snprintf(big + o, sizeof(big) - o, "\r\n");
    CHECK(subst(&w, 1, "w.test", big, &used, &els) == NULL);
    free(bigv);
}

TEST(scrub_responses)
{
    skd_secret s[1] = {sec("A", "skd_secret_aaaa", "VALUE-A", "api.test", "")};
    char *o = NULL;
    size_t ol = 0;
    const char *plain = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    CHECK_EQ_INT(skd__egress_scrub(s, 1, plain, strlen(plain), 0, &o, &ol), 0);
    const char *echo =
        "HTTP/1.1 200 OK\r\nX-Echo: VALUE-A\r\nContent-Length: 13\r\n\r\nsent: VALUE-A";
    CHECK_EQ_INT(skd__egress_scrub(s, 1, echo, strlen(echo), 0, &o, &ol), 1);
    if (o) {
        char *t = strndup(o, ol);
        CHECK_STR(t, "HTTP/1.1 200 OK\r\nX-Echo: skd_secret_aaaa\r\nContent-Length: 21\r\n\r\n"
                     "sent: skd_secret_aaaa");
        free(t);
    }
    free(o);
    o = NULL;
    /* A value split across two chunks is found; the answer is reframed. */
    const char *ch =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nVALU\r\n3\r\nE-A\r\n0\r\n\r\n";
    CHECK_EQ_INT(skd__egress_resp_complete(ch, strlen(ch), 0), (long)strlen(ch));
    CHECK_EQ_INT(skd__egress_resp_complete(ch, strlen(ch) - 2, 0), 0);
    CHECK_EQ_INT(skd__egress_scrub(s, 1, ch, strlen(ch), 0, &o, &ol), 1);
    if (o) {
        char *t = strndup(o, ol);
        CHECK_STR(t, "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nskd_secret_aaaa");
        free(t);
    }
    free(o);
    /* Framing: a length, none (to the end), an interim answer. */
    CHECK_EQ_INT(skd__egress_resp_complete(echo, strlen(echo), 0), (long)strlen(echo));
    CHECK_EQ_INT(skd__egress_resp_complete(echo, strlen(echo) - 1, 0), 0);
    CHECK_EQ_INT(skd__egress_resp_complete("HTTP/1.1 200 OK\r\n\r\nab", 21, 0), -1);
    CHECK_EQ_INT(skd__egress_resp_complete("HTTP/1.1 100 Continue\r\n\r\n", 25, 0), 25);
    CHECK_EQ_INT(skd__egress_resp_complete(echo, strlen(echo) - 13, 1), (long)strlen(echo) - 13);
}

int main(void)
{
    TAP_BEGIN("test_engine_secrets");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/skd-secrets.XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
    RUN(seal_and_open);
    RUN(tampered_row_does_not_open);
    RUN(cap_per_key);
    RUN(another_key_file_does_not_open);
    RUN(substitution_in_headers);
    RUN(scrub_responses);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", tmpdir, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return TAP_END();
}
