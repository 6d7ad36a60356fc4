/*
 * skilld error vocabulary.
 *
 * Every library function returns 0 on success or a negative SKD_E* code from
 * the single table below. The table also yields the stable string code that
 * goes on the wire ("invalid_input", "not_found", ...) and a default message.
 * Detail for a person goes into a caller-owned skd_err, never a global.
 */
#ifndef SKILLD_ERROR_H
#define SKILLD_ERROR_H

#include <stddef.h>

/* X(NAME, wire code, default message). Order is ABI: append only. */
#define SKD_ERRNO_MAP(X)                                                                           \
    X(INVAL, "invalid_input", "the input is not valid")                                            \
    X(PATH, "invalid_path", "the path is not valid")                                               \
    X(NOENT, "not_found", "not found")                                                             \
    X(ISDIR, "is_directory", "the path is a directory")                                            \
    X(TOOBIG, "too_large", "the data is larger than the limit")                                    \
    X(QUOTA, "quota_exceeded", "the workspace quota is exceeded")                                  \
    X(FORBIDDEN, "forbidden", "the operation is not allowed")                                      \
    X(TIMEOUT, "timeout", "the operation timed out")                                               \
    X(BLOCKED, "blocked_address", "the address may not be reached")                                \
    X(SANDBOX, "sandbox_unavailable", "the sandbox cannot run this")                               \
    X(NOMEM, "out_of_memory", "out of memory")                                                     \
    X(IO, "io_error", "an input/output error occurred")                                            \
    X(INTERNAL, "internal_error", "an internal error occurred")                                    \
    X(UNAUTH, "unauthorized", "authentication is required")                                        \
    X(EXISTS, "already_exists", "it already exists")                                               \
    X(DISABLED, "skill_disabled", "the skill is disabled")                                         \
    X(UNSUPPORTED, "unsupported", "the operation is not supported")                                \
    X(UPSTREAM, "upstream_error", "the remote service answered with an error")                     \
    X(CANCELLED, "cancelled", "the operation was cancelled")                                       \
    X(BUSY, "busy", "too many operations are running")                                             \
    X(NOTDIR, "not_a_directory", "a path component is not a directory")                            \
    X(NOTEMPTY, "not_empty", "the directory is not empty")                                         \
    X(SPECIAL, "special_file", "the path is not a regular file or directory")                      \
    X(CONFIG, "invalid_config", "the configuration is not valid")                                  \
    X(NETWORK, "network_error", "the network request failed")                                      \
    X(UNSUPPORTED_MEDIA, "unsupported_content", "the content type is not supported")               \
    X(COMMAND, "command_failed", "the command exited with an error")                               \
    X(STORE, "store_unavailable", "the store cannot be reached or failed")                         \
    X(PAUSED, "sandbox_paused", "the sandbox is paused; resume it first")                          \
    X(LOST, "sandbox_lost", "the replica that held the sandbox stopped; the sandbox is gone")      \
    X(REPLICA, "replica_unavailable", "the replica that holds the sandbox cannot be reached")

enum skd_errno {
    SKD_OK = 0,
#define SKD__ERR_ENUM(name, code, msg) SKD_E##name,
    SKD__ERR_FIRST = -100,
    SKD_ERRNO_MAP(SKD__ERR_ENUM)
#undef SKD__ERR_ENUM
        SKD__ERR_LAST
};
/* The enum counts up from -99; every SKD_E* value is negative. */

#define SKD_ERR_MSG_MAX 512

/* Caller-owned error detail. code is 0 or an SKD_E* value. */
typedef struct skd_err {
    int code;
    char msg[SKD_ERR_MSG_MAX];
} skd_err;

/* Stable wire code for an SKD_E* value ("invalid_input"); "internal_error"
 * for anything unknown. Never NULL; static storage. */
const char *skd_errcode(int err);

/* Default human message for an SKD_E* value. Never NULL; static storage. */
const char *skd_strerror(int err);

/* Map a wire code back to its SKD_E* value; SKD_EINTERNAL if unknown. */
int skd_errcode_parse(const char *code);

/* Record code and a printf-style message in err (which may be NULL).
 * Returns code, so callers can write `return skd_err_set(err, ...)`. */
int skd_err_set(skd_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Clear err (may be NULL). */
void skd_err_clear(skd_err *err);

/* The message in err, or the default message for its code when empty. */
const char *skd_err_msg(const skd_err *err);

#endif
