/*
 * The result of one sandbox run and its JSON form (OmniRoute's names: id,
 * runtime, exitCode, signal, stdout, stderr, truncated, duration, killed,
 * timedOut, oomKilled). Output bytes come from untrusted programs: anything
 * that is not UTF-8 becomes U+FFFD so the JSON is always valid.
 */
#include "sandbox/runner_int.h"
#include "skilld/sandbox.h"
#include "skilld/json.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void skd_sandbox_result_free(skd_sandbox_result *r)
{
    if (!r)
        return;
    free(r->out);
    free(r->err);
    json_decref(r->egress);
    r->egress = NULL;
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
}

void skd_sandbox_usage_add(skd_usage *u, const skd_sandbox_result *r)
{
    if (!u || !r)
        return;
    u->sandbox_runs++;
    u->cpu_us += r->cpu_us > 0 ? r->cpu_us : 0;
    if (r->mem_peak_bytes > u->mem_peak_bytes)
        u->mem_peak_bytes = r->mem_peak_bytes;
    u->workspace_bytes += (int64_t)(r->ws_written & INT64_MAX);
    u->egress_bytes += skd_sandbox_egress_bytes(r->egress);
}

int64_t skd_sandbox_egress_bytes(const json_t *egress)
{
    int64_t n = 0;
    size_t i;
    const json_t *d;
    json_array_foreach (egress, i, d) { /* counted by the proxy (src/net/egress.c) */
        json_int_t up = json_integer_value(json_object_get(d, "bytesUp"));
        json_int_t down = json_integer_value(json_object_get(d, "bytesDown"));
        n += (up > 0 ? up : 0) + (down > 0 ? down : 0);
    }
    return n;
}

/* A JSON string of the n bytes at p with invalid UTF-8 replaced. */
json_t *skd__lossy_string(const char *p, size_t n)
{
    if (!p)
        return json_string("");
    if (skd_utf8_valid(p, n))
        return json_stringn(p, n);
    if (n > SIZE_MAX / 3)
        return NULL;
    char *o = malloc(n * 3 + 1);
    if (!o)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        size_t l = skd_utf8_seq_len((const unsigned char *)p + i, n - i);
        if (l) {
            memcpy(o + j, p + i, l);
            j += l;
            i += l;
        } else {
            memcpy(o + j, "\xef\xbf\xbd", 3);
            j += 3;
            i++;
        }
    }
    json_t *s = json_stringn(o, j);
    free(o);
    return s;
}

json_t *skd__ws_result_json(int ws_error, uint64_t ws_bytes, const char *ws_message)
{
    if (ws_error)
        return json_pack("{s:b, s:{s:s, s:s}}", "kept", 0, "error", "code", skd_errcode(ws_error),
                         "message", ws_message ? ws_message : "");
    if (ws_bytes == SKD_WS_BYTES_UNCHANGED)
        return json_pack("{s:b, s:b}", "kept", 1, "changed", 0);
    return json_pack("{s:b, s:b, s:I}", "kept", 1, "changed", 1, "bytes", (json_int_t)ws_bytes);
}

json_t *skd_sandbox_result_to_json(const skd_sandbox_result *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    const char *sig = r->signal > 0 ? sigabbrev_np(r->signal) : NULL;
    char signame[32];
    if (sig)
        snprintf(signame, sizeof(signame), "SIG%s", sig);
    int bad = 0;
    bad |= json_object_set_new(o, "id", json_string(r->id));
    bad |= json_object_set_new(o, "runtime", json_string(r->runtime));
    bad |= json_object_set_new(o, "exitCode",
                               r->exited && !r->error ? json_integer(r->exit_code) : json_null());
    bad |= json_object_set_new(o, "signal", sig ? json_string(signame) : json_null());
    bad |= json_object_set_new(o, "stdout", skd__lossy_string(r->out, r->out_len));
    bad |= json_object_set_new(o, "stderr", skd__lossy_string(r->err, r->err_len));
    bad |= json_object_set_new(o, "truncated", json_boolean(r->truncated));
    bad |= json_object_set_new(o, "duration", json_integer(r->duration_ms));
    bad |= json_object_set_new(o, "killed", json_boolean(r->killed));
    bad |= json_object_set_new(o, "timedOut", json_boolean(r->timed_out));
    bad |= json_object_set_new(o, "oomKilled", json_boolean(r->oom_killed));
    if (r->egress)
        bad |= json_object_set(o, "egress", r->egress);
    if (r->error)
        bad |= json_object_set_new(o, "error",
                                   json_pack("{s:s, s:s}", "code", skd_errcode(r->error), "message",
                                             r->message[0] ? r->message : skd_strerror(r->error)));
    if (r->ws_checked)
        bad |= json_object_set_new(o, "workspace",
                                   skd__ws_result_json(r->ws_error, r->ws_bytes, r->ws_message));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
