/*
 * The store: API keys (only a SHA-256 of each secret), the execution audit,
 * and the state other parts keep (custom skills, search cache, A2A tasks).
 * Two backends behind one interface: SQLite in WAL mode at
 * $DATA_DIR/skilld.db (the embedded default) and PostgreSQL (SKILLD_STORE=
 * postgresql://...), with the same versioned migrations in both dialects.
 * Safe to use from many threads: a pool of connections, each with its own
 * prepared statements (docs/store.md).
 *
 * Every function that touches the database fails with SKD_ESTORE
 * (store_unavailable) when the database cannot answer: busy past the
 * timeout, unreachable, corrupt. A read never reports "not found" or
 * "no rows" for a database that failed.
 */
#ifndef SKILLD_STORE_H
#define SKILLD_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/error.h"

typedef struct skd_store skd_store;

typedef struct skd_store_opts {
    int pool_size;            /* connections at most (default 8) */
    int busy_timeout_ms;      /* SQLite busy wait; wait for a free connection (5000) */
    int connect_timeout_s;    /* PostgreSQL connect_timeout (2) */
    int statement_timeout_ms; /* PostgreSQL statement_timeout (5000) */
    /* Audit rows are queued and written by one thread, one transaction per
     * audit_flush_ms (20) after the first queued row; a crash loses at most
     * that window. audit_sync writes each row before skd_store_audit_add
     * returns. */
    int audit_flush_ms;
    int audit_sync;
    /* SQLite, a process per call (skilld exec): a closing connection leaves
     * a WAL of at most this many bytes, and its index, for the next opener
     * instead of checkpointing and deleting them; a larger WAL is
     * checkpointed and deleted as usual, so it never grows past this plus
     * one call's rows. 0: every close checkpoints (the default). */
    int64_t keep_wal_bytes;
} skd_store_opts;

/* Open the store at where: a file path (SQLite) or a postgresql:// or
 * postgres:// URL (PostgreSQL), and bring its schema up to date. opts may
 * be NULL (defaults); zero fields take their default. */
int skd_store_open_opts(const char *where, const skd_store_opts *opts, skd_store **out,
                        skd_err *err);
/* skd_store_open_opts(where, NULL, ...). */
int skd_store_open(const char *where, skd_store **out, skd_err *err);
void skd_store_close(skd_store *st); /* NULL ok */
/* 1 when where names a PostgreSQL database (postgresql:// or postgres://). */
int skd_store_is_url(const char *where);
/* "sqlite" or "postgresql". Static storage. */
const char *skd_store_backend(const skd_store *st);
/* Round trip to the database: 0 when it answers, SKD_ESTORE when not
 * (/healthz). */
int skd_store_ping(skd_store *st, skd_err *err);

typedef struct skd_key_info {
    char id[64];
    char name[128];
    unsigned scopes; /* SKD_SCOPE_* */
    int64_t created_ms;
    int revoked;
} skd_key_info;

/* Create a key. *secret receives the secret, shown once (caller frees). */
int skd_store_key_create(skd_store *st, const char *name, unsigned scopes, char **secret,
                         skd_key_info *info, skd_err *err);
/* Find the live key whose secret this is (constant-time hash comparison).
 * SKD_EUNAUTH when unknown or revoked. */
int skd_store_key_auth(skd_store *st, const char *secret, skd_key_info *info, skd_err *err);
int skd_store_key_get(skd_store *st, const char *id, skd_key_info *info, skd_err *err);
/* The key row id (an OAuth tenant's: no secret can match it), created with
 * name and scopes when absent; *info is the row as stored (an existing
 * row keeps its own name, scopes and revoked flag). */
int skd_store_key_ensure(skd_store *st, const char *id, const char *name, unsigned scopes,
                         skd_key_info *info, skd_err *err);
int skd_store_key_revoke(skd_store *st, const char *id, skd_err *err);
/* Array of key objects {id, name, scopes[], created, revoked}. New ref. */
json_t *skd_store_key_list(skd_store *st, skd_err *err);
/* Number of keys, revoked ones included. SKD_ESTORE when the database
 * cannot be read: never 0 for a read that failed. */
int skd_store_key_count(skd_store *st, int64_t *count, skd_err *err);

/* Scope names <-> bits ("skills:read,skills:execute"). */
int skd_scopes_parse(const char *csv, unsigned *scopes, skd_err *err);
json_t *skd_scopes_to_json(unsigned scopes);

typedef struct skd_audit {
    const char *id; /* execution UUID */
    const char *key_id;
    const char *skill;
    const char *version;
    const char *status;        /* "success" or "error" */
    const char *error_code;    /* NULL on success */
    const char *error_message; /* NULL on success; stored cut to 300 bytes */
    int64_t duration_ms;
    int64_t created_ms;
    const char *input_digest; /* hex SHA-256 of the compact input JSON */
    const char *egress;       /* networkEnabled runs: the egress record (JSON text), else NULL */
    /* What the call used (skd_usage, include/skilld/registry.h). */
    int64_t sandbox_runs, cpu_us, mem_peak_bytes, egress_bytes, workspace_bytes;
} skd_audit;

/* Queue a (copied) for the audit writer; with opts.audit_sync, or when the
 * queue stays full, write it at once (then SKD_ESTORE when the store
 * fails). Rows queued are written in order; a batch the store refuses stays
 * queued and is tried again; a row dropped (queue full and the store down,
 * or refused on its own) is logged, never silently lost. */
int skd_store_audit_add(skd_store *st, const skd_audit *a, skd_err *err);
/* Write every queued row now (readers of the audit call it first). */
int skd_store_audit_flush(skd_store *st, skd_err *err);
/* The key's executions, newest first, at most limit. New ref (array). */
json_t *skd_store_audit_list(skd_store *st, const char *key_id, int limit, skd_err *err);
/* Executions matching every field set in f, newest first. */
typedef struct skd_audit_filter {
    const char *key_id; /* NULL: every key's */
    const char *skill;  /* NULL: any */
    const char *status; /* "success", "error" or NULL */
    int64_t since_ms;   /* created at or after */
    int64_t until_ms;   /* and before (0: no end) */
    int limit;          /* 1..1000; else 100 */
} skd_audit_filter;
json_t *skd_store_audit_query(skd_store *st, const skd_audit_filter *f, skd_err *err);
/* One execution of the key (key_id NULL: of any key); NULL with SKD_ENOENT
 * when absent or another key's. New ref. */
json_t *skd_store_audit_get(skd_store *st, const char *key_id, const char *id, skd_err *err);

/* Usage summed per key over the audit rows created in [since_ms, until_ms)
 * (src/store/usage.c): [{keyId, keyName, executions, sandboxRuns,
 * sandboxCpuMs, sandboxCpuUs, sandboxMemoryPeakBytes (the largest of one
 * call), egressBytes, workspaceBytes}] ordered by key id; key_id NULL: every
 * key, else that key's row only (none when it made no call). New ref. */
json_t *skd_store_usage(skd_store *st, const char *key_id, int64_t since_ms, int64_t until_ms,
                        skd_err *err);
/* The same per key and per time bucket of bucket_ms (>= 1):
 * [{keyId, t (the bucket's start, ms), executions, sandboxCpuMs}] ordered by
 * t then key id. New ref. */
json_t *skd_store_usage_series(skd_store *st, const char *key_id, int64_t since_ms,
                               int64_t until_ms, int64_t bucket_ms, skd_err *err);
/* The sandbox CPU time (us) of key_id's calls created at or after since_ms
 * into *cpu_us (the CPU budget, src/engine/usage.c). */
int skd_store_usage_cpu(skd_store *st, const char *key_id, int64_t since_ms, int64_t *cpu_us,
                        skd_err *err);

/* Operator console sessions (src/store/ui_sessions.c), by the SHA-256 (hex)
 * of the cookie's token. put stores one (and drops expired ones); get
 * gives the live session's key id (cap 64) and CSRF token (cap 65), or
 * SKD_ENOENT when absent or expired at now_ms; del removes it (0 even when
 * absent). */
int skd_store_ui_session_put(skd_store *st, const char *id_sha256, const char *key_id,
                             const char *csrf, int64_t now_ms, int64_t expires_ms, skd_err *err);
int skd_store_ui_session_get(skd_store *st, const char *id_sha256, int64_t now_ms, char key_id[64],
                             char csrf[65], skd_err *err);
int skd_store_ui_session_del(skd_store *st, const char *id_sha256, skd_err *err);

/*
 * A small key/value cache with expiry (src/store/cache.c), used for
 * web_search results. Keys and values are text chosen by the caller.
 */
/* The live value of key at time now_ms (wall clock). *value is a new string
 * (caller frees); SKD_ENOENT when absent or expired. */
int skd_store_cache_get(skd_store *st, const char *key, int64_t now_ms, char **value, skd_err *err);
/* Store value under key until now_ms + ttl_ms, replacing an older entry;
 * expired entries are purged on the way. */
int skd_store_cache_put(skd_store *st, const char *key, const char *value, int64_t now_ms,
                        int64_t ttl_ms, skd_err *err);

/* Custom skills (src/store/skills.c). owner NULL is a global skill. */
/* Insert or replace owner's name@version (taken from manifest, borrowed). */
int skd_store_skill_put(skd_store *st, const char *owner, const json_t *manifest,
                        const char *skill_dir, int enabled, skd_err *err);
/* Delete name@version (version NULL: every version) of owner; SKD_ENOENT
 * when nothing matched. */
int skd_store_skill_delete(skd_store *st, const char *name, const char *version, const char *owner,
                           skd_err *err);
int skd_store_skill_set_enabled(skd_store *st, const char *name, const char *version,
                                const char *owner, int enabled, skd_err *err);
/* Every stored skill: [{owner (null: global), manifest, skillDir (or
 * null), enabled}], oldest first. New ref. */
json_t *skd_store_skill_list(skd_store *st, skd_err *err);

/* A2A tasks (src/store/tasks.c), always read through their key. */
/* Insert or update task (borrowed, the internal task object). */
int skd_store_task_put(skd_store *st, const char *id, const char *key_id, const char *context_id,
                       const char *state, const json_t *task, skd_err *err);
/* The key's task id; NULL with SKD_ENOENT when absent or another key's. */
json_t *skd_store_task_get(skd_store *st, const char *key_id, const char *id, skd_err *err);
/* The key's tasks, newest update first, filtered by context_id and state
 * when not NULL; offset/limit page them; *total receives the filtered
 * count. New ref (array of task objects). */
json_t *skd_store_task_list(skd_store *st, const char *key_id, const char *context_id,
                            const char *state, int offset, int limit, int64_t *total, skd_err *err);
/* Delete tasks last updated before before_ms; *removed may be NULL. */
int skd_store_task_prune(skd_store *st, int64_t before_ms, int64_t *removed, skd_err *err);

/*
 * MCP (2025 revisions) sessions (src/store/sessions.c): what a replica needs
 * to continue a session another one began. Read through the key only.
 */
typedef struct skd_session_row {
    char id[64];
    char key_id[64];
    unsigned scopes;
    char version[16];
    int initialized;
    int log_level;
} skd_session_row;
/* Insert or update row (borrowed); rows idle longer than idle_ms go. */
int skd_store_session_put(skd_store *st, const skd_session_row *row, int64_t idle_ms, skd_err *err);
/* The key's session id into *row; SKD_ENOENT when absent, another key's,
 * or idle longer than idle_ms. */
int skd_store_session_get(skd_store *st, const char *key_id, const char *id, int64_t idle_ms,
                          skd_session_row *row, skd_err *err);
int skd_store_session_delete(skd_store *st, const char *id, skd_err *err);

/* Take one request of key_id from its bucket shared by every replica
 * (src/store/ratelimit.c): per_second refill, at most burst (0: per_second).
 * 0 allowed; SKD_EBUSY with *retry_after_s >= 1 when over; SKD_ESTORE. */
int skd_store_rate_take(skd_store *st, const char *key_id, int64_t per_second, int64_t burst,
                        unsigned *retry_after_s, skd_err *err);

/*
 * Runs and replicas (src/store/runs.c, docs/store.md). Every sandbox run is
 * a row with the replica that runs it and a lease that replica renews; a
 * run whose lease ended (its replica died) is marked "lost" by any replica.
 * Caps on concurrent runs are checked against the rows of every replica, so
 * they hold across replicas; a cancel request is a flag on the row that the
 * owning replica acts on (within 1 s: told at once on PostgreSQL by
 * LISTEN/NOTIFY, else by polling every 200 ms).
 */
typedef struct skd_cancel skd_cancel;

/* Start this process's replica duties under id (borrowed; "" for the host
 * name): runs already in the store as this replica's are marked lost (they
 * died with its previous life), then a thread renews leases every lease/3,
 * marks expired leases lost, acts on cancel requests and on change
 * notifications. Idempotent. */
int skd_store_replica_start(skd_store *st, const char *id, int lease_ms, skd_err *err);
/* This process's replica id ("" before skd_store_replica_start or the
 * first run). Static for the store's life. */
const char *skd_store_replica_id(skd_store *st);
/* Draining: /healthz answers 503 so a load balancer stops sending. */
void skd_store_set_draining(skd_store *st, int on);
int skd_store_draining(skd_store *st);

typedef struct skd_run_req {
    const char *id; /* execution id */
    const char *key_id;
    const char *skill;
    skd_cancel *cancel; /* borrowed until skd_store_run_end; fired on a cancel request */
    int per_key;        /* runs at once for this key over every replica (0: no cap) */
    int total;          /* runs at once over every replica (0: no cap) */
    int wait_ms;        /* how long to wait for a free place */
    const char *kind;   /* NULL or "sandbox": counted by the caps; "task": an A2A task,
                           recorded for its lease and cancel only */
} skd_run_req;
/* Record a run as started on this replica once the caps allow it, waiting
 * up to wait_ms (or until cancel fires) for a place. SKD_EBUSY when none
 * came, SKD_ECANCELLED when cancelled, SKD_ESTORE when the store failed. */
int skd_store_run_begin(skd_store *st, const skd_run_req *r, skd_err *err);
/* The run ended in state ("done", "error", "cancelled"). */
void skd_store_run_end(skd_store *st, const char *id, const char *state);
/* Ask the replica that runs the key's run id (key_id NULL: any key's run)
 * to cancel it. SKD_ENOENT when there is no such running run. */
int skd_store_run_cancel(skd_store *st, const char *key_id, const char *id, skd_err *err);
/* The state of the key's run id ("running", "done", "lost", ...) into
 * state (cap bytes). SKD_ENOENT when there is none. */
int skd_store_run_state(skd_store *st, const char *key_id, const char *id, char *state, size_t cap,
                        skd_err *err);
/* Runs of key_id (NULL: every key), newest first, at most limit; state NULL
 * for every state. [{id, keyId, skill, replica, state, startedAt, endedAt,
 * leaseUntil, cancelRequested}]. New ref. */
json_t *skd_store_run_list(skd_store *st, const char *key_id, const char *state, int limit,
                           skd_err *err);
/*
 * Live sandboxes (src/store/live_rows.c): each is a run row of kind "live"
 * for its life, begun with skd_store_run_begin (kind "live", per_key: the
 * key's live sandboxes over every replica) and ended with skd_store_run_end.
 * Its lease is renewed with the replica's runs, so the sandboxes of a
 * replica that died are marked "lost" within the lease. detail is JSON
 * text: the holder's internal URL and the sandbox object.
 */
/* Record the live sandbox object sandbox (borrowed: {id, state, ...}) as
 * held by this replica, reached at url (SKILLD_REPLICA_URL; "" for none):
 * its row is "paused" when its state is (paused rows are not counted by
 * the cap), else "running". Only while its row is held. */
int skd_store_live_set(skd_store *st, const char *url, const json_t *sandbox, skd_err *err);
typedef struct skd_live_row {
    char replica[160]; /* who holds it */
    char state[16];    /* "running" or "paused", "lost", "done", "error" */
    int leased;        /* its lease has not run out */
    json_t *detail;    /* new reference, or NULL (caller decrefs) */
} skd_live_row;
/* The row of key_id's live sandbox id; SKD_ENOENT when there is none (or it
 * is another key's). */
int skd_store_live_get(skd_store *st, const char *key_id, const char *id, skd_live_row *row,
                       skd_err *err);
/* key_id's live sandboxes over every replica, oldest first: the running
 * ones whose holder renews them, and every paused one, held or not:
 * [{id, replica, detail, held}]. New reference; NULL on error. */
json_t *skd_store_live_list(skd_store *st, const char *key_id, skd_err *err);
/* Take key_id's paused sandbox id for this replica: its row names this
 * replica, reached at url, with sandbox (its object) as its record, and
 * is renewed with its runs from now. Only a row that is
 * paused and that no replica holds (its holder stopped renewing, or it
 * let it go) or that names this replica already. 0, or SKD_EBUSY (held
 * elsewhere, not paused, or gone). */
int skd_store_live_claim(skd_store *st, const char *key_id, const char *id, const char *url,
                         const json_t *sandbox, skd_err *err);
/* Before key_id's paused sandbox id resumes: its row counts as running
 * again, unless the key runs per_key live sandboxes over every replica
 * already (SKD_EBUSY); one transaction under the cap lock, as
 * skd_store_run_begin. A resume that then fails sets the row paused again
 * (skd_store_live_set). */
int skd_store_live_resume_place(skd_store *st, const char *key_id, const char *id, int per_key,
                                skd_err *err);
/* Let paused sandbox id go (this replica stops): no longer renewed, its
 * row is claimable at once. */
void skd_store_live_release(skd_store *st, const char *id);
/* key_id's paused sandboxes that this replica does not hold, and the bytes
 * their saved files hold (as their rows say). */
int skd_store_live_paused_elsewhere(skd_store *st, const char *key_id, int *n, int64_t *bytes,
                                    skd_err *err);
/* The keys, revoked, of the live sandboxes this replica holds (running,
 * or paused with its lease: as its renewals name them), in one query:
 * ["key id", ...], each once. New reference; NULL on error (err says why). */
json_t *skd_store_live_revoked_here(skd_store *st, skd_err *err);
/* The keys, revoked, of paused sandboxes that no replica holds (lease
 * out: released by a stopped or dying holder), over every replica, in one
 * query: ["key id", ...], each once. New reference; NULL on error. */
json_t *skd_store_live_revoked_unheld(skd_store *st, skd_err *err);
/* The state of live sandbox id's row, whoever's key (cap bytes, e.g. 16):
 * "running", "paused", "done", "lost", ...; SKD_ENOENT when there is no
 * such row (it never was, or it ended more than a day ago and was pruned). */
int skd_store_live_state(skd_store *st, const char *id, char *state, size_t cap, skd_err *err);
/*
 * Secrets of a key (src/store/secrets.c). The store holds the value only
 * sealed (the engine seals and opens it, src/engine/secrets.c); a row names
 * where the egress proxy may put it and the placeholder that stands for it.
 */
typedef struct skd_secret_row {
    char name[129];
    char placeholder[64];
    char fingerprint[64];
    char *hosts;   /* host patterns, comma-separated, lower case */
    char *headers; /* header names, comma-separated, lower case; "" for any */
    char *nonce;   /* hex */
    char *sealed;  /* hex: ciphertext and tag */
    int64_t created_ms;
} skd_secret_row;
/* Insert or replace key_id's row->name (borrowed). A new name is refused
 * with SKD_EQUOTA when the key holds max_per_key secrets already. */
int skd_store_secret_put(skd_store *st, const char *key_id, const skd_secret_row *row,
                         int max_per_key, skd_err *err);
/* key_id's secrets by name: *rows is a new array of *n rows (caller frees
 * with skd_store_secret_rows_free). */
int skd_store_secret_rows(skd_store *st, const char *key_id, skd_secret_row **rows, size_t *n,
                          skd_err *err);
void skd_store_secret_rows_free(skd_secret_row *rows, size_t n); /* NULL ok */
/* SKD_ENOENT when key_id has no secret name. */
int skd_store_secret_delete(skd_store *st, const char *key_id, const char *name, skd_err *err);

/* fn(arg) is called from the replica thread when another process changed
 * the stored custom skills. One watcher. */
void skd_store_watch_skills(skd_store *st, void (*fn)(void *arg), void *arg);
#endif
