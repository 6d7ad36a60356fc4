/*
 * Configuration table and loaders (see include/skilld/config.h).
 *
 * To add a setting, add a row to `keys` below: everything else (environment,
 * config file, --set flags, validation, `skilld doctor`) follows from it.
 * The settings of the sandbox limits (a default and a ceiling per limit)
 * are not written here: they are generated from the rows of
 * include/skilld/limits.h.
 */
#include "skilld/config.h"
#include "skilld/limits.h"
#include "skilld/util.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum ktype { K_STR, K_INT, K_BOOL };

struct key {
    const char *name;
    enum ktype type;
    const char *def;
    int64_t min, max; /* for K_INT */
    int secret;
    const char *help;
};

#define I64MAX INT64_MAX

static const struct key keys[] = {
    /* core */
    {"DATA_DIR", K_STR, "./var", 0, 0, 0,
     "state directory: skilld.db, workspaces/, images/ (started as root: /var/lib/skilld)"},
    /* the store (src/store, docs/store.md) */
    {"SKILLD_STORE", K_STR, "", 0, 0, 1,
     "postgresql://... to keep the store in PostgreSQL (empty: SQLite $DATA_DIR/skilld.db)"},
    {"SKILLD_STORE_POOL", K_INT, "8", 1, 256, 0, "store connections at most"},
    {"SKILLD_STORE_TIMEOUT_MS", K_INT, "5000", 100, 600000, 0,
     "longest wait for the store (busy database, statement, free connection)"},
    {"SKILLD_AUDIT_FLUSH_MS", K_INT, "20", 1, 60000, 0,
     "audit rows are written in one transaction this long after the first of a batch; a crash "
     "loses at most this window (see SKILLD_AUDIT_SYNC)"},
    {"SKILLD_AUDIT_SYNC", K_BOOL, "false", 0, 0, 0,
     "write each call's audit row before the call is answered (per-call durability)"},
    {"SKILLD_REPLICA_ID", K_STR, "", 0, 0, 0,
     "this replica's name in the run table and the Skilld-Replica header (empty: host name)"},
    {"SKILLD_REPLICA_URL", K_STR, "", 0, 0, 0,
     "where the other replicas reach this one (http://host:port) to forward the calls of the "
     "live sandboxes it holds; empty: they answer 503 for them"},
    {"SKILLD_REPLICA_SECRET", K_STR, "", 0, 0, 1,
     "the secret the replicas share for forwarded calls (at least 32 characters; empty: this "
     "replica neither forwards nor takes forwarded calls)"},
    {"SKILLD_RUN_LEASE_MS", K_INT, "10000", 300, 600000, 0,
     "a run's lease; a replica renews it every third; an expired one is marked lost"},
    {"SKILLD_RUN_QUEUE_MS", K_INT, "30000", 0, 600000, 0,
     "how long a sandbox run waits for a place under the caps over every replica"},
    {"SKILLD_CLUSTER_MAX_RUNS", K_INT, "0", 0, 1000000, 0,
     "sandbox runs at once over every replica sharing the store (0: no cluster cap)"},
    {"SKILLD_DRAIN_MS", K_INT, "0", 0, 600000, 0,
     "on SIGTERM, /healthz says 503 for this long while calls go on; then calls in flight "
     "finish (up to SKILLD_SHUTDOWN_GRACE_MS) before the stop"},
    {"SKILLD_LISTEN", K_STR, "127.0.0.1:8080", 0, 0, 0, "address:port the server listens on"},
    {"SKILLD_LOG_FORMAT", K_STR, "text", 0, 0, 0, "log format: text or json"},
    {"SKILLD_LOG_LEVEL", K_STR, "info", 0, 0, 0, "log level: debug, info, warn, error, off"},
    {"SKILLD_USER", K_STR, "skilld", 0, 0, 0,
     "unprivileged user the server drops to when started as root"},
    /* workspace and file skills */
    {"SKILLS_MAX_FILE_BYTES", K_INT, "1048576", 1, I64MAX, 0, "bytes per file read or write"},
    /* metering (src/engine/usage.c, docs/usage.md) */
    {"SKILLS_KEY_CPU_SECONDS_PER_DAY", K_INT, "0", 0, I64MAX, 0,
     "sandbox CPU-seconds a key may use per UTC day; past it its sandboxed calls are refused "
     "with quota_exceeded (0: no budget)"},
    {"SKILLD_METRICS_MAX_KEYS", K_INT, "100", 1, 10000, 0,
     "keys with their own label in the per-key metrics; the rest are summed under "
     "key=\"_other\""},
    /* the operator console (src/server/console.c, docs/console.md) */
    {"SKILLD_UI_SESSION_SECONDS", K_INT, "28800", 60, 2592000, 0,
     "how long a console sign-in lasts"},
    {"SKILLS_WORKSPACE_QUOTA_BYTES", K_INT, "104857600", 1, I64MAX, 0,
     "bytes a workspace may hold (file skills and sandboxed code alike)"},
    {"SKILLS_WORKSPACE_MAX_ENTRIES", K_INT, "100000", 1, I64MAX, 0,
     "files, directories and links a workspace may hold (a directory's own blocks are not in "
     "the byte quota; this bounds them, and the walk that measures a workspace)"},
    {"SKILLS_SANDBOX_WORKSPACE_QUOTA", K_STR, "overlay", 0, 0, 0,
     "how sandboxes are held to the quota: overlay (tmpfs upper layer, committed when within "
     "quota; needs root) or off (not enforced inside sandboxes; doctor warns)"},
    {"SKILLS_DATA_RESERVE_BYTES", K_INT, "268435456", 0, I64MAX, 0,
     "bytes of DATA_DIR's filesystem tenant writes never take (kept for the store)"},
    /* outbound */
    {"SKILLS_MAX_HTTP_RESPONSE_BYTES", K_INT, "256000", 1, I64MAX, 0,
     "bytes of an HTTP response body kept (after decompression)"},
    {"SKILLS_HTTP_TIMEOUT_MS", K_INT, "30000", 100, 600000, 0, "default outbound deadline"},
    {"SKILLS_OUTBOUND_ALLOW_CIDRS", K_STR, "", 0, 0, 0,
     "comma-separated CIDRs that may be reached although private"},
    {"SKILLS_OUTBOUND_ALLOW_HOSTS", K_STR, "", 0, 0, 0,
     "comma-separated host names that may reach private addresses"},
    {"SKILLS_OUTBOUND_DENY_HOSTS", K_STR, "", 0, 0, 0, "comma-separated host names never reached"},
    {"SKILLS_OUTBOUND_RESOLVE", K_STR, "", 0, 0, 0,
     "comma-separated host:port:address pins, as curl --resolve (tests)"},
    {"SKILLS_HTTP_DROP_HEADERS", K_STR,
     "host,connection,content-length,cookie,set-cookie,authorization,proxy-authorization", 0, 0, 0,
     "request headers a caller may not set"},
    {"SKILLS_SEARCH_PROVIDER", K_STR, "duckduckgo", 0, 0, 0, "default web_search provider"},
    {"SKILLS_DUCKDUCKGO_URL", K_STR, "https://html.duckduckgo.com/html/", 0, 0, 0,
     "DuckDuckGo HTML endpoint"},
    {"SKILLS_SEARXNG_URL", K_STR, "", 0, 0, 0, "SearXNG base URL (JSON API)"},
    {"SKILLS_BRAVE_URL", K_STR, "https://api.search.brave.com/res/v1/web/search", 0, 0, 0,
     "Brave Search API endpoint"},
    {"SKILLS_BRAVE_API_KEY", K_STR, "", 0, 0, 1, "Brave Search API key"},
    {"SKILLS_SEARCH_CACHE_TTL_S", K_INT, "3600", 0, 604800, 0, "seconds a search result is cached"},
    /* sandbox: the limits' defaults and ceilings come after the table */
    {"SKILLS_SANDBOX_RUNTIME", K_STR, "native", 0, 0, 0, "native, docker, podman or auto"},
    {"SKILLS_ALLOWED_SANDBOX_IMAGES", K_STR, "", 0, 0, 0,
     "comma-separated images allowed besides host"},
    {"SKILLS_SANDBOX_MAX_CONCURRENT", K_INT, "0", 0, 4096, 0,
     "concurrent sandboxes (0: 4 x cores)"},
    {"SKILLS_SANDBOX_MAX_PER_KEY", K_INT, "0", 0, 4096, 0,
     "concurrent sandboxes per key (0: half the global cap)"},
    /* interpreter contexts of live sandboxes (src/sandbox/interp.c, docs/sandbox.md) */
    {"SKILLS_INTERP_MAX_CONTEXTS", K_INT, "8", 1, 256, 0,
     "interpreter contexts (eval_code with sandboxId) a live sandbox may hold"},
    {"SKILLS_INTERP_MAX_LINE_BYTES", K_INT, "4194304", 65536, 268435456, 0,
     "bytes of one request or answer line between skilld and an interpreter context"},
    /* live sandboxes (src/sandbox/live.c, docs/sandbox.md) */
    {"SKILLS_SANDBOX_MAX_LIVE_PER_KEY", K_INT, "4", 0, 4096, 0,
     "live sandboxes a key may hold at once (0: none)"},
    {"SKILLS_SANDBOX_MAX_LIVE", K_INT, "64", 0, 65536, 0, "live sandboxes at once, all keys"},
    {"SKILLS_SANDBOX_MAX_PAUSED_PER_KEY", K_INT, "4", 0, 4096, 0,
     "paused live sandboxes a key may hold (0: no pause)"},
    {"SKILLS_SANDBOX_PAUSED_MAX_BYTES", K_INT, "1073741824", 0, I64MAX, 0,
     "bytes the saved files of a key's paused live sandboxes may hold together"},
    {"SKILLS_SANDBOX_ROOT_LAYER_MAX_BYTES", K_INT, "268435456", 0, I64MAX, 0,
     "bytes a live sandbox may write to its root layer (0: its root stays read-only)"},
    {"SKILLS_SANDBOX_IDLE_TIMEOUT_MS", K_INT, "600000", 1000, 86400000, 0,
     "a live sandbox with no exec for this long ends (the default and the ceiling of "
     "idleTimeoutMs)"},
    {"SKILLS_SANDBOX_LIFETIME_MS", K_INT, "3600000", 1000, 604800000, 0,
     "a live sandbox ends this long after its creation (the default and the ceiling of "
     "lifetimeMs)"},
    {"SKILLS_IMAGE_MAX_BYTES", K_INT, "4294967296", 1, I64MAX, 0,
     "bytes of file data an imported image may hold"},
    {"SKILLS_IMAGE_MAX_ENTRIES", K_INT, "1000000", 1, I64MAX, 0,
     "archive entries an image import may read"},
    /* sandbox egress proxy (src/net/egress.c, docs/egress.md) */
    {"SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS", K_STR, "*", 0, 0, 0,
     "host patterns sandboxed code may reach through the proxy (*, *.pypi.org, host; "
     "empty: none)"},
    {"SKILLS_SANDBOX_EGRESS_DENY_HOSTS", K_STR, "", 0, 0, 0,
     "host patterns sandboxed code may never reach through the proxy"},
    {"SKILLS_SANDBOX_EGRESS_KEY_ALLOW_HOSTS", K_STR, "", 0, 0, 0,
     "per-key narrowing of the allow list: key=pattern,pattern;key2=pattern"},
    {"SKILLS_SANDBOX_EGRESS_MAX_CONNECTIONS", K_INT, "16", 1, 4096, 0,
     "proxy connections one run may hold at once"},
    {"SKILLS_SANDBOX_EGRESS_MAX_BYTES_UP", K_INT, "67108864", 0, I64MAX, 0,
     "bytes one run may send through the proxy"},
    {"SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN", K_INT, "1073741824", 0, I64MAX, 0,
     "bytes one run may receive through the proxy"},
    {"SKILLS_SANDBOX_EGRESS_IDLE_MS", K_INT, "30000", 100, 3600000, 0,
     "a proxy connection with no byte either way is closed after this"},
    {"SKILLS_SANDBOX_EGRESS_CONN_MS", K_INT, "600000", 100, 86400000, 0,
     "the longest a proxy connection may live"},
    {"SKILLS_EGRESS_UPSTREAM_CA_FILE", K_STR, "", 0, 0, 0,
     "PEM file of CAs the egress proxy trusts, besides the system's, for upstreams it speaks "
     "TLS to (the hosts a secret is bound to)"},
    {"SKILLS_EGRESS_SCRUB_MAX_BYTES", K_INT, "1048576", 4096, 67108864, 0,
     "the largest response the egress proxy reads whole on a connection that carries a "
     "secret, to replace an echoed value by its placeholder; a larger one is cut"},
    {"SKILLS_SECRETS_MAX_PER_KEY", K_INT, "32", 1, 64, 0,
     "secrets a key may hold (POST /v1/secrets); each is put into its sandboxes' requests by "
     "the egress proxy"},
    {"SKILLD_SECRETS_KEY_FILE", K_STR, "", 0, 0, 0,
     "file holding the 32-byte key (raw, or 64 hex digits) that seals secrets in the store "
     "(empty: $DATA_DIR/secrets.key, made on first use, mode 0600)"},
    /* server */
    {"SKILLD_ALLOWED_HOSTS", K_STR, "localhost,127.0.0.1,[::1]", 0, 0, 0,
     "Host header values accepted (port ignored)"},
    {"SKILLD_ALLOWED_ORIGINS", K_STR, "", 0, 0, 0,
     "Origin values accepted besides http(s)://localhost and 127.0.0.1"},
    {"SKILLD_MAX_BODY_BYTES", K_INT, "4194304", 1024, 1073741824, 0, "request body limit"},
    {"SKILLD_MCP_EXPOSE_SKILLS", K_BOOL, "true", 0, 0, 0,
     "list every enabled skill as its own MCP tool"},
    {"SKILLD_MCP_PAGE_SIZE", K_INT, "50", 1, 1000, 0, "tools per tools/list page"},
    {"SKILLD_MCP_MAX_SESSIONS", K_INT, "1024", 1, 1000000, 0, "MCP HTTP sessions kept at once"},
    {"SKILLD_MCP_SESSION_TTL_S", K_INT, "3600", 0, 604800, 0,
     "seconds an idle MCP session lives (0: forever)"},
    {"SKILLD_MCP_PROGRESS_INTERVAL_MS", K_INT, "1000", 50, 600000, 0,
     "progress heartbeat while a skill that reports none runs"},
    {"SKILLD_MCP_STDIO_MAX_CALLS", K_INT, "16", 1, 1024, 0,
     "tools/call requests run at once over stdio"},
    {"SKILLD_CONNECTION_TIMEOUT_S", K_INT, "30", 1, 3600, 0,
     "seconds an idle or slow HTTP connection is kept"},
    /* HTTP connections and per-key limits (src/server/http.c, conns.c, ratelimit.c) */
    {"SKILLD_MAX_CONNECTIONS", K_INT, "4096", 1, 65536, 0,
     "HTTP connections held at once; past it the longest-idle one is closed"},
    {"SKILLD_HTTP_THREADS", K_INT, "0", 0, 256, 0,
     "event threads serving HTTP connections (0: one per core, at least 2)"},
    {"SKILLD_HEADER_TIMEOUT_S", K_INT, "30", 1, 3600, 0,
     "seconds a connection may take to send a request's headers (also bounds keep-alive idling)"},
    {"SKILLD_BODY_TIMEOUT_S", K_INT, "60", 1, 3600, 0,
     "seconds a request body may take to arrive once its headers are in"},
    {"SKILLD_RATE_LIMIT_PER_KEY", K_INT, "0", 0, 1000000, 0,
     "requests per second one API key may make (0: no limit)"},
    {"SKILLD_RATE_LIMIT_BURST", K_INT, "0", 0, 1000000, 0,
     "requests one API key may make at once above the rate (0: the rate, at least 1)"},
    {"SKILLD_ANONYMOUS_KEY", K_STR, "", 0, 0, 0,
     "key id that requests without Authorization act as (empty: they get 401)"},
    {"SKILLD_TEST_THREAD_CHURN", K_INT, "0", 0, 10000, 0,
     "test only (with SKILLD_TEST_SKILLS): threads a second the server creates and destroys"},
    {"SKILLD_TEST_SKILLS", K_BOOL, "false", 0, 0, 0,
     "register test-only skills (debug_sleep) for transport tests"},
    {"SKILLD_MCP_TEST_FIXTURES", K_BOOL, "false", 0, 0, 0,
     "serve the MCP conformance suite's fixture tools and resources (tests only; loopback only)"},
    {"SKILLD_SHUTDOWN_GRACE_MS", K_INT, "10000", 0, 600000, 0,
     "how long a stop waits for cancelled calls to end"},
    {"SKILLD_PUBLIC_URL", K_STR, "", 0, 0, 0,
     "base URL clients use to reach this server (agent card; the OAuth resource is its /mcp); "
     "default from Host"},
    /* OAuth resource server (src/engine/oauth.c, docs/server.md) */
    {"SKILLD_OAUTH_ISSUER", K_STR, "", 0, 0, 0,
     "OAuth issuers whose JWT access tokens are accepted, comma-separated (empty: API keys "
     "only; needs SKILLD_PUBLIC_URL)"},
    {"SKILLD_OAUTH_SCOPES", K_STR, "skills:read skills:execute", 0, 0, 0,
     "the most an OAuth token may grant: its scope claim is intersected with these"},
    {"SKILLD_A2A_TASK_RETENTION_S", K_INT, "604800", 60, 31536000, 0,
     "seconds a finished A2A task is kept"},
/* The sandbox limits (include/skilld/limits.h): the setting of each
 * default and of each ceiling. A row without one has a NULL name and is
 * skipped. A setting's range is the field's, in the settings' unit, and
 * at least 1 (0 only where auto0 says what it stands for). */
#define SET_MIN(min, scale) ((min) / (scale) < 1 ? 1 : (min) / (scale))
#define HELP_DEF_INT(key, unit) "default " key " (" unit "), lowered to its ceiling"
#define HELP_DEF_BOOL(key, unit) "default " key
#define HELP_CEIL_INT(key, unit) "ceiling of " key " (" unit ") for every run"
#define HELP_CEIL_BOOL(key, unit)                                                                  \
    "operator's switch: " key ":true is refused (forbidden) unless this is true"
#define LIMIT_DEF(ID, field, kind, key, mkey, flag, def_env, def, ceil_env, ceil, auto0, min, max, \
                  scale, unit, tag, doc)                                                           \
    {def_env, K_##kind, #def, SET_MIN(min, scale), (max) / (scale), 0, HELP_DEF_##kind(key, unit)},
#define LIMIT_CEIL(ID, field, kind, key, mkey, flag, def_env, def, ceil_env, ceil, auto0, min,     \
                   max, scale, unit, tag, doc)                                                     \
    {ceil_env,                                                                                     \
     K_##kind,                                                                                     \
     #ceil,                                                                                        \
     sizeof(auto0) > 1 ? 0 : SET_MIN(min, scale),                                                  \
     (max) / (scale),                                                                              \
     0,                                                                                            \
     sizeof(auto0) > 1 ? HELP_CEIL_##kind(key, unit) "; 0: " auto0 : HELP_CEIL_##kind(key, unit)},
    SKD_SANDBOX_LIMITS(LIMIT_DEF) SKD_SANDBOX_LIMITS(LIMIT_CEIL)
#undef LIMIT_DEF
#undef LIMIT_CEIL
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

struct skd_config {
    char *str[NKEYS];
    int64_t num[NKEYS];
};

static int find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].name && strcmp(keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int set_index(skd_config *cfg, int i, const char *value, skd_err *err)
{
    const struct key *k = &keys[i];
    int64_t n = 0;
    if (k->type == K_INT) {
        if (skd_parse_i64(value, k->min, k->max, &n))
            return skd_err_set(err, SKD_ECONFIG, "%s=%s: expected an integer in [%lld, %lld]",
                               k->name, value, (long long)k->min, (long long)k->max);
    } else if (k->type == K_BOOL) {
        int b;
        if (skd_parse_bool(value, &b))
            return skd_err_set(err, SKD_ECONFIG, "%s=%s: expected true or false", k->name, value);
        n = b;
    }
    char *copy = strdup(value);
    if (!copy)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    free(cfg->str[i]);
    cfg->str[i] = copy;
    cfg->num[i] = n;
    return 0;
}

/* 1 when two rows of the table share a name: a merge mistake that would
 * make the second row dead. skd_config_new refuses such a table. */
static int table_has_duplicates(void)
{
    for (size_t i = 0; i < NKEYS; i++)
        for (size_t j = i + 1; j < NKEYS; j++)
            if (keys[i].name && keys[j].name && strcmp(keys[i].name, keys[j].name) == 0)
                return 1;
    return 0;
}

skd_config *skd_config_new(void)
{
    if (table_has_duplicates()) {
        assert(!"duplicate name in the configuration table");
        return NULL;
    }
    skd_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return NULL;
    for (size_t i = 0; i < NKEYS; i++) {
        if (keys[i].name && set_index(cfg, (int)i, keys[i].def, NULL)) {
            skd_config_free(cfg);
            return NULL;
        }
    }
    return cfg;
}

void skd_config_free(skd_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < NKEYS; i++)
        free(cfg->str[i]);
    free(cfg);
}

int skd_config_set(skd_config *cfg, const char *name, const char *value, skd_err *err)
{
    int i = find(name);
    if (i < 0)
        return skd_err_set(err, SKD_ECONFIG, "unknown setting %s", name);
    return set_index(cfg, i, value, err);
}

int skd_config_load_env(skd_config *cfg, skd_err *err)
{
    for (size_t i = 0; i < NKEYS; i++) {
        const char *v = keys[i].name ? getenv(keys[i].name) : NULL;
        if (v) {
            int rc = set_index(cfg, (int)i, v, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int skd_config_load_file(skd_config *cfg, const char *path, skd_err *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return skd_err_set(err, SKD_ECONFIG, "cannot open config file %s", path);
    char line[4096];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        size_t n = strlen(line);
        if (n && line[n - 1] != '\n' && !feof(f)) {
            rc = skd_err_set(err, SKD_ECONFIG, "%s:%d: line too long", path, lineno);
            break;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#')
            continue;
        char *eq = strchr(p, '=');
        if (!eq) {
            rc = skd_err_set(err, SKD_ECONFIG, "%s:%d: expected NAME=value", path, lineno);
            break;
        }
        *eq = '\0';
        rc = skd_config_set(cfg, p, eq + 1, err);
        if (rc) {
            char msg[SKD_ERR_MSG_MAX];
            skd_strlcpy(msg, skd_err_msg(err), sizeof(msg));
            skd_err_set(err, SKD_ECONFIG, "%s:%d: %s", path, lineno, msg);
            break;
        }
    }
    fclose(f);
    return rc;
}

static int must_find(const char *name, enum ktype type)
{
    int i = find(name);
    assert(i >= 0 && "unknown configuration name");
    if (i < 0 || keys[i].type != type)
        abort();
    return i;
}

const char *skd_config_str(const skd_config *cfg, const char *name)
{
    int i = find(name);
    assert(i >= 0 && "unknown configuration name");
    if (i < 0)
        abort();
    return cfg->str[i];
}

int64_t skd_config_int(const skd_config *cfg, const char *name)
{
    return cfg->num[must_find(name, K_INT)];
}

int skd_config_bool(const skd_config *cfg, const char *name)
{
    return (int)cfg->num[must_find(name, K_BOOL)];
}

void skd_config_dump(const skd_config *cfg, FILE *out)
{
    for (size_t i = 0; i < NKEYS; i++) {
        const char *v = cfg->str[i];
        if (!keys[i].name)
            continue;
        if (keys[i].secret && *v)
            v = "********";
        fprintf(out, "%s=%s\t# %s\n", keys[i].name, v, keys[i].help);
    }
}
