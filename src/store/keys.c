/*
 * API keys. A secret is "skd_<id>_<64 hex random>"; only its SHA-256 is
 * stored. Authentication finds the row by the id embedded in the secret and
 * compares the digests in constant time, so neither the lookup nor the
 * comparison tells an attacker how much of a guess was right.
 *
 * Authentication is served from a small cache in the process (the secret
 * itself, compared in constant time, and the row), which is only believed
 * while the keys' generation is the one it was filled at: a revocation
 * bumps that counter (row 'keys' of the changes table) in the same
 * transaction, and every authentication checks it first, so a key revoked
 * through any process or replica sharing the store is refused on the very
 * next call.
 *
 * On PostgreSQL the check reads the row (one row by primary key). On
 * SQLite, whose users all share one machine, it reads a counter in a small
 * file beside the database ("<db>-keysig", mapped shared by every process
 * that opens the store): a revocation adds one to it after its commit, and
 * the row is read again only when the counter moved. That is one load from
 * memory instead of a read transaction (its two lock calls on the -shm file
 * and a statement) on every call. A revoker that dies between its commit
 * and its signal is caught by the replica thread, which compares the row
 * with the cached generation every 200 ms (skd__keycache_poll). Where the
 * file cannot be used (sig_map), every check reads the row, as on
 * PostgreSQL, and a revocation from such a process says that the others
 * learn of it by their poll.
 */
#include "skilld/log.h"
#include "skilld/registry.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    unsigned bit;
} scope_names[] = {
    {"skills:read", SKD_SCOPE_READ},
    {"skills:execute", SKD_SCOPE_EXECUTE},
    {"skills:admin", SKD_SCOPE_ADMIN},
};

int skd_scopes_parse(const char *csv, unsigned *scopes, skd_err *err)
{
    *scopes = 0;
    const char *p = csv ? csv : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        size_t i;
        for (i = 0; i < 3; i++)
            if (strlen(scope_names[i].name) == n && strncmp(scope_names[i].name, p, n) == 0)
                break;
        if (i == 3)
            return skd_err_set(err, SKD_EINVAL,
                               "unknown scope \"%.*s\" (use skills:read, skills:execute, "
                               "skills:admin)",
                               (int)(n > 64 ? 64 : n), p);
        *scopes |= scope_names[i].bit;
        p += n;
        if (*p == ',')
            p++;
    }
    if (!*scopes)
        return skd_err_set(err, SKD_EINVAL, "no scope given");
    return 0;
}

json_t *skd_scopes_to_json(unsigned scopes)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < 3; i++)
        if (scopes & scope_names[i].bit)
            json_array_append_new(a, json_string(scope_names[i].name));
    return a;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static void row_to_info(skd__q *q, skd_key_info *info)
{
    memset(info, 0, sizeof(*info));
    const char *id = skd__q_col(q, 0), *name = skd__q_col(q, 1);
    skd_strlcpy(info->id, id ? id : "", sizeof(info->id));
    skd_strlcpy(info->name, name ? name : "", sizeof(info->name));
    info->scopes = (unsigned)skd__q_col_int(q, 2);
    info->created_ms = skd__q_col_int(q, 3);
    info->revoked = (int)skd__q_col_int(q, 4);
}

static skd__sql q_insert = SKD__SQL("INSERT INTO api_keys(id,name,secret_sha256,scopes,created_ms) "
                                    "VALUES(?1,?2,?3,?4,?5)");
/* secret_sha256 is NOT NULL UNIQUE: a tenant without a secret holds
 * "none:<id>", which is no SHA-256 in hex, so no secret ever matches it. */
static skd__sql q_ensure = SKD__SQL("INSERT INTO api_keys(id,name,secret_sha256,scopes,created_ms) "
                                    "VALUES(?1,?2,?5,?3,?4) ON CONFLICT(id) DO NOTHING");
static skd__sql q_get = SKD__SQL("SELECT id,name,scopes,created_ms,revoked,secret_sha256 FROM "
                                 "api_keys WHERE id=?1");
static skd__sql q_revoke = SKD__SQL("UPDATE api_keys SET revoked=1 WHERE id=?1");
/* No row (a store no key was ever revoked in) is generation 0. */
static skd__sql q_gen = SKD__SQL("SELECT seq FROM changes WHERE topic='keys'");
static skd__sql q_bump = SKD__SQL("INSERT INTO changes(topic,seq) VALUES('keys',1) "
                                  "ON CONFLICT(topic) DO UPDATE SET seq=changes.seq+1");
static skd__sql q_list = SKD__SQL("SELECT id,name,scopes,created_ms,revoked FROM api_keys "
                                  "ORDER BY created_ms, id");
static skd__sql q_count = SKD__SQL("SELECT count(*) FROM api_keys");

int skd_store_key_create(skd_store *st, const char *name, unsigned scopes, char **secret,
                         skd_key_info *info, skd_err *err)
{
    unsigned char idb[8], rnd[32];
    char id[17], rhex[65], digest[SKD_SHA256_HEX_LEN + 1];
    *secret = NULL;
    if (!name || !*name || strlen(name) >= sizeof(info->name))
        return skd_err_set(err, SKD_EINVAL, "a key name of 1 to %zu bytes is required",
                           sizeof(info->name) - 1);
    if (!scopes || (scopes & ~SKD_SCOPE_ALL))
        return skd_err_set(err, SKD_EINVAL, "invalid scopes");
    if (skd_random(idb, sizeof(idb)) || skd_random(rnd, sizeof(rnd)))
        return skd_err_set(err, SKD_EINTERNAL, "no randomness available");
    hex(idb, sizeof(idb), id);
    hex(rnd, sizeof(rnd), rhex);
    size_t slen = 4 + 16 + 1 + 64 + 1;
    char *s = malloc(slen);
    if (!s)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    snprintf(s, slen, "skd_%s_%s", id, rhex);
    skd_sha256_hex(s, strlen(s), digest);

    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    int64_t now = skd_wall_ms();
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_insert, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, name);
    skd__q_text(&q, 3, digest);
    skd__q_int(&q, 4, (int64_t)scopes);
    skd__q_int(&q, 5, now);
    if ((rc = skd__q_run(&q, NULL, err)))
        goto out;
    if (info) {
        memset(info, 0, sizeof(*info));
        skd_strlcpy(info->id, id, sizeof(info->id));
        skd_strlcpy(info->name, name, sizeof(info->name));
        info->scopes = scopes;
        info->created_ms = now;
    }
    *secret = s;
    s = NULL;
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    free(s);
    return rc;
}

/* The key row id into info (and its digest when digest is not NULL).
 * SKD_ENOENT when there is none; SKD_ESTORE when the read failed. */
static int get_row(skd_store *st, const char *id, skd_key_info *info, char *digest, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        row_to_info(&q, info);
        const char *d = skd__q_col(&q, 5);
        if (digest)
            skd_strlcpy(digest, d ? d : "", SKD_SHA256_HEX_LEN + 1);
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "no API key with id %s", id);
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

int skd_store_key_get(skd_store *st, const char *id, skd_key_info *info, skd_err *err)
{
    return get_row(st, id, info, NULL, err);
}

int skd_store_key_ensure(skd_store *st, const char *id, const char *name, unsigned scopes,
                         skd_key_info *info, skd_err *err)
{
    skd_err gerr = {0};
    int rc = get_row(st, id, info, NULL, &gerr);
    if (rc != SKD_ENOENT)
        return rc ? skd_err_set(err, rc, "%s", gerr.msg) : 0;
    if (!*id || strlen(id) >= sizeof(info->id) || !name || !*name ||
        strlen(name) >= sizeof(info->name) || !scopes || (scopes & ~SKD_SCOPE_ALL))
        return skd_err_set(err, SKD_EINVAL, "invalid key id, name or scopes");
    skd__conn *c = NULL;
    skd__q q = {0};
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_ensure, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, name);
    skd__q_int(&q, 3, (int64_t)scopes);
    skd__q_int(&q, 4, skd_wall_ms());
    char none[80];
    snprintf(none, sizeof(none), "none:%s", id);
    skd__q_text(&q, 5, none);
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    /* Another replica or thread may have made it meanwhile: read it back. */
    return rc ? rc : get_row(st, id, info, NULL, err);
}

/* The keys' generation: SKD_ESTORE when it cannot be read. */
static int read_gen(skd_store *st, int64_t *gen, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    *gen = 0;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_gen, &q, err)))
        goto out;
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        *gen = skd__q_col_int(&q, 0);
        rc = 0;
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

#define SECRET_LEN 85

struct skd__keycache {
    pthread_mutex_t mu;
    uint64_t *sig; /* SQLite: the shared change signal (a mapped page); NULL: none */
    int gen_ok;    /* gen was read when *sig was gen_sig (guarded by mu) */
    int64_t gen;
    uint64_t gen_sig;
    uint64_t epoch; /* moved by each correction of skd__keycache_poll */
    struct kc_entry {
        int used;
        int64_t gen;
        char secret[SECRET_LEN + 1];
        skd_key_info info;
    } e[64];
};

static struct kc_entry *kc_slot(struct skd__keycache *kc, const char *id)
{
    unsigned h = 2166136261u; /* FNV-1a of the id (random hex: any hash will do) */
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return &kc->e[h % (sizeof(kc->e) / sizeof(kc->e[0]))];
}

/* 1 and *info when secret is cached at generation gen. */
static int kc_get(skd_store *st, const char *id, const char *secret, int64_t gen,
                  skd_key_info *info)
{
    struct skd__keycache *kc = st->kc;
    int hit = 0;
    if (!kc)
        return 0;
    pthread_mutex_lock(&kc->mu);
    struct kc_entry *e = kc_slot(kc, id);
    if (e->used && e->gen == gen && strcmp(e->info.id, id) == 0 &&
        skd_ct_equal(e->secret, secret, SECRET_LEN)) {
        *info = e->info;
        hit = 1;
    }
    pthread_mutex_unlock(&kc->mu);
    return hit;
}

static void kc_put(skd_store *st, const char *secret, int64_t gen, const skd_key_info *info)
{
    struct skd__keycache *kc = st->kc;
    if (!kc)
        return;
    pthread_mutex_lock(&kc->mu);
    struct kc_entry *e = kc_slot(kc, info->id);
    e->used = 1;
    e->gen = gen;
    memcpy(e->secret, secret, SECRET_LEN);
    e->secret[SECRET_LEN] = '\0';
    e->info = *info;
    pthread_mutex_unlock(&kc->mu);
}

/* The generation to check the cache against: from the signal when it has
 * not moved since the row was last read, else from the row. The signal is
 * loaded before the row is read, so a pair (sig, gen) never holds a
 * generation older than the last revocation signalled before sig. */
static int current_gen(skd_store *st, int64_t *gen, skd_err *err)
{
    struct skd__keycache *kc = st->kc;
    uint64_t *sp = kc ? __atomic_load_n(&kc->sig, __ATOMIC_ACQUIRE) : NULL;
    if (!sp)
        return read_gen(st, gen, err);
    uint64_t sig = __atomic_load_n(sp, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&kc->mu);
    int ok = kc->gen_ok && kc->gen_sig == sig;
    uint64_t epoch = kc->epoch;
    *gen = kc->gen;
    pthread_mutex_unlock(&kc->mu);
    if (ok)
        return 0;
    int rc = read_gen(st, gen, err);
    if (rc)
        return rc;
    /* Not when the poll corrected the cache meanwhile: this read may be
     * from before the change it found. */
    pthread_mutex_lock(&kc->mu);
    if (kc->epoch == epoch) {
        kc->gen_ok = 1;
        kc->gen = *gen;
        kc->gen_sig = sig;
    }
    pthread_mutex_unlock(&kc->mu);
    return 0;
}

static uint64_t *sig_map(skd_store *st);

/* Tell every process on this file that the keys changed (after the commit,
 * whether or not it reported success: a needless signal costs one read).
 * A process that could not map the file tries again now; if it still
 * cannot, the others learn of the change from their poll. */
static void signal_keys(skd_store *st)
{
    struct skd__keycache *kc = st->kc;
    if (!kc || st->kind != SKD__STORE_SQLITE)
        return;
    pthread_mutex_lock(&kc->mu);
    if (!kc->sig) /* set once; checks load it without the lock */
        __atomic_store_n(&kc->sig, sig_map(st), __ATOMIC_RELEASE);
    uint64_t *sig = kc->sig;
    pthread_mutex_unlock(&kc->mu);
    if (sig)
        __atomic_add_fetch(sig, 1, __ATOMIC_RELEASE);
    else
        skd_warn("key revoked, but %s-keysig cannot be used: servers sharing this store "
                 "refuse the key within about half a second (their poll), not on their next "
                 "call",
                 st->where);
}

void skd__keycache_poll(skd_store *st, skd__conn *c)
{
    struct skd__keycache *kc = st->kc;
    skd__q q = {0};
    if (!kc || !__atomic_load_n(&kc->sig, __ATOMIC_ACQUIRE) || skd__q_start(c, &q_gen, &q, NULL))
        return;
    int64_t gen = 0;
    int rc = skd__q_step(&q, NULL);
    if (rc == 1)
        gen = skd__q_col_int(&q, 0);
    skd__q_end(&q);
    if (rc < 0)
        return;
    pthread_mutex_lock(&kc->mu);
    if (kc->gen_ok && kc->gen != gen) {
        kc->gen_ok = 0;
        kc->epoch++;
    }
    pthread_mutex_unlock(&kc->mu);
}

#define SIG_SIZE 4096

/* The signal file is usable when it is a regular file with one link (not
 * another name of some other file), owned by this process's user or the
 * database's owner, and writable by no one the database is not writable
 * by: its group may write it only when that group is the database's and
 * may write the database. */
static int sig_file_ok(const struct stat *sb, const struct stat *db)
{
    return S_ISREG(sb->st_mode) && sb->st_nlink == 1 &&
           (sb->st_uid == geteuid() || sb->st_uid == db->st_uid) &&
           (sb->st_mode & 0002 & ~db->st_mode) == 0 &&
           (!(sb->st_mode & 0020) || (sb->st_gid == db->st_gid && (db->st_mode & 0020)));
}

/* Give a file of ours the database's group and mode (the umask narrowed
 * the mode; a new file has our group): the group of a shared store writes
 * both. Without that group, no group write. Root also gives it the
 * database's owner. Refreshes *sb; 0 on success. */
static int sig_file_fit(int fd, struct stat *sb, const struct stat *db)
{
    if (!S_ISREG(sb->st_mode) || sb->st_nlink != 1)
        return 0; /* refused by sig_file_ok; nothing of it is changed */
    if (sb->st_uid == geteuid()) {
        mode_t want = db->st_mode & 0666;
        if (sb->st_gid != db->st_gid && fchown(fd, (uid_t)-1, db->st_gid) != 0)
            want &= (mode_t)~0020;
        if ((sb->st_mode & 0777) != want && fchmod(fd, want) != 0)
            return -1;
    }
    if (geteuid() == 0 && sb->st_uid != db->st_uid && fchown(fd, db->st_uid, db->st_gid) != 0)
        return -1;
    return fstat(fd, sb);
}

/* Map "<db>-keysig", made like SQLite's -wal and -shm: the database's mode
 * and, when made by root, its owner. NULL when the store is not a plain
 * SQLite file or the file cannot be used: the caller reads the row. Who
 * may write the file may truncate it, and a mapped process then dies on
 * its next check (SIGBUS): that is no one the database itself is not
 * writable by, who can break the store in other ways. */
static uint64_t *sig_map(skd_store *st)
{
    struct stat db, sb;
    char path[4096];
    if (st->kind != SKD__STORE_SQLITE || !*st->where || strcmp(st->where, ":memory:") == 0 ||
        strncmp(st->where, "file:", 5) == 0 || stat(st->where, &db) != 0 ||
        (size_t)snprintf(path, sizeof(path), "%s-keysig", st->where) >= sizeof(path))
        return NULL;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, db.st_mode & 0666);
    if (fd < 0)
        return NULL;
    void *m = MAP_FAILED;
    int ok = fstat(fd, &sb) == 0 && sig_file_fit(fd, &sb, &db) == 0 && sig_file_ok(&sb, &db);
    if (ok && (sb.st_size >= SIG_SIZE || ftruncate(fd, SIG_SIZE) == 0))
        m = mmap(NULL, SIG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}

int skd__keycache_init(skd_store *st, skd_err *err)
{
    struct skd__keycache *kc = calloc(1, sizeof(*kc));
    if (!kc)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_init(&kc->mu, NULL);
    kc->sig = sig_map(st);
    st->kc = kc;
    return 0;
}

void skd__keycache_free(skd_store *st)
{
    if (!st->kc)
        return;
    if (st->kc->sig)
        munmap(st->kc->sig, SIG_SIZE);
    pthread_mutex_destroy(&st->kc->mu);
    explicit_bzero(st->kc, sizeof(*st->kc)); /* the secrets */
    free(st->kc);
    st->kc = NULL;
}

int skd_store_key_auth(skd_store *st, const char *secret, skd_key_info *info, skd_err *err)
{
    char id[17], stored[SKD_SHA256_HEX_LEN + 1] = "", given[SKD_SHA256_HEX_LEN + 1];
    size_t n = secret ? strlen(secret) : 0;
    /* Shape check first: "skd_" + 16 hex + "_" + 64 hex. */
    if (n != SECRET_LEN || strncmp(secret, "skd_", 4) != 0 || secret[20] != '_')
        return skd_err_set(err, SKD_EUNAUTH, "invalid API key");
    memcpy(id, secret + 4, 16);
    id[16] = '\0';
    skd_key_info tmp;
    skd_err rerr = {0};
    /* The generation first: a revocation committed after this read makes
     * the next call miss, whatever this one caches. */
    int64_t gen = 0;
    int rc = current_gen(st, &gen, &rerr);
    if (rc)
        return skd_err_set(err, rc, "%s", rerr.msg);
    if (kc_get(st, id, secret, gen, &tmp))
        goto found;
    skd_sha256_hex(secret, n, given);
    rc = get_row(st, id, &tmp, stored, &rerr);
    if (rc == SKD_ENOENT)
        return skd_err_set(err, SKD_EUNAUTH, "invalid API key");
    if (rc) /* the store failed: not the caller's fault, and not a "no" */
        return skd_err_set(err, rc, "%s", rerr.msg);
    if (!skd_ct_equal(stored, given, SKD_SHA256_HEX_LEN))
        return skd_err_set(err, SKD_EUNAUTH, "invalid API key");
    kc_put(st, secret, gen, &tmp);
found:
    if (tmp.revoked)
        return skd_err_set(err, SKD_EUNAUTH, "this API key has been revoked");
    if (info)
        *info = tmp;
    return 0;
}

/* The row and the generation change in one transaction: no replica can see
 * the one without the other. */
int skd_store_key_revoke(skd_store *st, const char *id, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t changed = 0;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__conn_begin(c, err)) ||
        (rc = skd__q_start(c, &q_revoke, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    if ((rc = skd__q_run(&q, &changed, err)) == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no API key with id %s", id);
    skd__q_end(&q);
    if (rc || (rc = skd__q_start(c, &q_bump, &q, err)) || (rc = skd__q_run(&q, NULL, err)))
        goto out;
    skd__q_end(&q);
    rc = skd__conn_commit(c, err);
    signal_keys(st);
out:
    skd__q_end(&q);
    if (rc && c && c->in_tx)
        skd__conn_rollback(c);
    skd__conn_put(st, c);
    return rc;
}

json_t *skd_store_key_list(skd_store *st, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if ((rc = skd__list_start(st, &q_list, &c, &q, &arr, err)))
        goto out;
    while ((rc = skd__q_step(&q, err)) == 1) {
        skd_key_info k;
        row_to_info(&q, &k);
        json_array_append_new(arr,
                              json_pack("{s:s, s:s, s:o, s:I, s:b}", "id", k.id, "name", k.name,
                                        "scopes", skd_scopes_to_json(k.scopes), "created",
                                        (json_int_t)k.created_ms, "revoked", k.revoked));
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

int skd_store_key_count(skd_store *st, int64_t *count, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    *count = 0;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_count, &q, err)))
        goto out;
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        *count = skd__q_col_int(&q, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ESTORE, "store: count keys: no answer");
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
