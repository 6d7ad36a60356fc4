/*
 * Interpreter contexts of live sandboxes (src/sandbox/interp.c;
 * docs/sandbox.md, "Interpreter contexts"): eval_code with a sandboxId runs
 * its code in a long-lived Python or JavaScript interpreter inside that
 * live sandbox, one per (sandbox, language, context name), so variables,
 * imports and functions persist from one call to the next.
 */
#ifndef SKILLD_INTERP_H
#define SKILLD_INTERP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/error.h"
#include "skilld/sandbox.h"

/* The longest context name; names are [A-Za-z0-9_-]. */
#define SKD_INTERP_NAME_MAX 64

typedef struct skd_live_eval_opts {
    const char *language; /* "python" or "javascript" */
    const char *context;  /* NULL: "default" */
    const char *code;     /* borrowed; code_len bytes, no NUL inside */
    size_t code_len;
    int64_t timeout_ms;      /* 0: the sandbox's timeout */
    skd_cancel *cancel;      /* may be NULL: firing it interrupts the code */
    struct skd_usage *usage; /* may be NULL: the call's metering (its workspace writes) */
} skd_live_eval_opts;

/* 1 when name is a valid context name (1..SKD_INTERP_NAME_MAX of
 * [A-Za-z0-9_-]), else 0. */
int skd_interp_name_ok(const char *name);

/*
 * Run o->code in the context named o->context of key's live sandbox id,
 * starting its interpreter when it has none (then *out says
 * contextRestarted: true if an earlier one of that context ended). Waits
 * for the answer. *out (new reference) is the skill result: {success,
 * sandboxId, context, language, stdout, stderr, truncated, result (the
 * repr or util.inspect of a final expression, or null), durationMs,
 * timedOut, contextRestarted}, workspace (as an exec's: what the call
 * wrote to /workspace is kept when it ends; a commit the quota refused
 * fails the call with error quota_exceeded) and, when the code failed,
 * error {code "command_failed", message, name, value, traceback}; a timeout, a cancel
 * or an interpreter that died give error timeout, cancelled or
 * command_failed. Returns 0 with *out set, or an SKD_E* code with err set:
 * SKD_ENOENT (no such sandbox of key), SKD_EINVAL (language, context name,
 * timeout), SKD_EBUSY (the sandbox's cap of contexts, or the context is
 * busy past the timeout), SKD_ETOOBIG (the code is longer than a line may
 * be), SKD_ESANDBOX (the interpreter could not start).
 */
int skd_live_eval(skd_runner *r, const char *key, const char *id, const skd_live_eval_opts *o,
                  json_t **out, skd_err *err);

#endif
