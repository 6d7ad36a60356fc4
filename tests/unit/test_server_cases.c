/* Replays the MCP protocol cases in tests/data/mcp (one .json file per case) through the
 * dispatcher: each file names a session (key, scopes, protocol version) and
 * a list of steps; a step sends a message ("send": JSON, or "send_raw":
 * text for malformed input) and states the expected reply ("expect": a
 * pattern, or null for no reply) and, optionally, the notifications sent
 * meanwhile ("notifications": patterns, in order). Patterns match when
 * every member they name matches; arrays match element by element; "$any"
 * matches any value and "$absent" requires the member to be missing. One
 * PASS/FAIL line per file. */
#include "server_fixture.h"
#include "skilld/store.h"
#include "tap.h"

#include <dirent.h>

static struct fixture F;

/* 1 when actual matches pattern; on mismatch writes the JSON path to why. */
static int match(const json_t *pat, const json_t *act, char *why, size_t cap, const char *path)
{
    char sub[512];
    if (json_is_string(pat) && strcmp(json_string_value(pat), "$any") == 0) {
        if (act)
            return 1;
        snprintf(why, cap, "%s: missing", path);
        return 0;
    }
    if (json_is_object(pat)) {
        if (!json_is_object(act)) {
            snprintf(why, cap, "%s: not an object", path);
            return 0;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)pat, k, v) {
            json_t *a = json_object_get(act, k);
            snprintf(sub, sizeof(sub), "%s.%s", path, k);
            if (json_is_string(v) && strcmp(json_string_value(v), "$absent") == 0) {
                if (a) {
                    snprintf(why, cap, "%s: should be absent", sub);
                    return 0;
                }
                continue;
            }
            if (!match(v, a, why, cap, sub))
                return 0;
        }
        return 1;
    }
    if (json_is_array(pat)) {
        if (!json_is_array(act) || json_array_size(act) != json_array_size(pat)) {
            snprintf(why, cap, "%s: array length differs", path);
            return 0;
        }
        for (size_t i = 0; i < json_array_size(pat); i++) {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            if (!match(json_array_get(pat, i), json_array_get(act, i), why, cap, sub))
                return 0;
        }
        return 1;
    }
    if (!act || !json_equal((json_t *)pat, (json_t *)act)) {
        char *a = act ? json_dumps(act, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        snprintf(why, cap, "%s: got %.200s", path, a ? a : "(missing)");
        free(a);
        return 0;
    }
    return 1;
}

static int run_step(skd_mcp_session *s, const json_t *step, size_t n, char *why, size_t cap)
{
    struct sink sk;
    sink_init(&sk);
    skd_mcp_io io = {sink_send, &sk, 0};
    json_t *reply;
    const char *raw = skd_json_str(step, "send_raw", NULL);
    if (raw) {
        reply = skd__mcp_handle_raw(s, raw, strlen(raw), &io);
    } else {
        reply = skd__mcp_handle(s, json_object_get(step, "send"), &io);
    }
    int ok = 1;
    char path[32];
    snprintf(path, sizeof(path), "step%zu", n);
    const json_t *expect = json_object_get(step, "expect");
    if (json_is_null(expect) || !expect) {
        if (reply) {
            snprintf(why, cap, "%s: expected no reply", path);
            ok = 0;
        }
    } else {
        ok = match(expect, reply, why, cap, path);
    }
    const json_t *notes = json_object_get(step, "notifications");
    if (ok && notes)
        ok = match(notes, sk.msgs, why, cap, path);
    json_decref(reply);
    sink_free(&sk);
    return ok;
}

static int run_case(const char *file, char *why, size_t cap)
{
    json_error_t je;
    json_t *c = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
    if (!c) {
        snprintf(why, cap, "cannot parse: %s line %d", je.text, je.line);
        return 0;
    }
    skd_err err = {0};
    unsigned scopes = SKD_SCOPE_ALL;
    const char *sc = skd_json_str(c, "scopes", NULL);
    if (sc && skd_scopes_parse(sc, &scopes, &err) != 0) {
        snprintf(why, cap, "bad scopes");
        json_decref(c);
        return 0;
    }
    const char *key = skd_json_str(c, "key", "k1");
    const char *version = skd_json_str(c, "version", NULL);
    skd_mcp_session *s = version ? fixture_session(&F, key, scopes, version)
                                 : skd__mcp_session_new(F.m, key, scopes);
    int ok = 1;
    size_t i;
    json_t *step;
    json_array_foreach(json_object_get(c, "steps"), i, step) {
        if (!(ok = run_step(s, step, i, why, cap)))
            break;
    }
    if (ok && json_array_size(json_object_get(c, "steps")) == 0) {
        snprintf(why, cap, "no steps");
        ok = 0;
    }
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
    json_decref(c);
    return ok;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    TAP_BEGIN("test_server_cases");
    (void)tap_case_failed;
    const char *root = getenv("SKILLD_ROOT");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/data/mcp", root ? root : ".");
    if (fixture_open(&F, "2") != 0) {
        printf("FAIL test_server_cases: fixture: could not open an engine\n");
        return 1;
    }
    DIR *d = opendir(dir);
    char *names[256];
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) && n < 256)
        if (strstr(de->d_name, ".json"))
            names[n++] = strdup(de->d_name);
    if (d)
        closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_names);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char file[1024], why[1024] = "";
        snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
        if (run_case(file, why, sizeof(why))) {
            printf("PASS test_server_cases: %s\n", names[i]);
        } else {
            printf("FAIL test_server_cases: %s: %s\n", names[i], why);
            failed = 1;
        }
        free(names[i]);
    }
    if (n == 0) {
        printf("FAIL test_server_cases: no cases found in %s\n", dir);
        failed = 1;
    }
    fixture_close(&F);
    return failed | TAP_END();
}
