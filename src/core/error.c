/*
 * The error table: one X-macro (include/skilld/error.h) expanded into the
 * wire codes and default messages. Nothing here allocates.
 */
#include "skilld/error.h"
#include "skilld/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct errinfo {
    int value;
    const char *code;
    const char *msg;
};

static const struct errinfo table[] = {
#define SKD__ERR_ROW(name, code, msg) {SKD_E##name, code, msg},
    SKD_ERRNO_MAP(SKD__ERR_ROW)
#undef SKD__ERR_ROW
};

static const struct errinfo *find(int err)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].value == err)
            return &table[i];
    return NULL;
}

const char *skd_errcode(int err)
{
    const struct errinfo *e = find(err);
    return e ? e->code : "internal_error";
}

const char *skd_strerror(int err)
{
    if (err == 0)
        return "success";
    const struct errinfo *e = find(err);
    return e ? e->msg : "an internal error occurred";
}

int skd_errcode_parse(const char *code)
{
    for (size_t i = 0; code && i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(table[i].code, code) == 0)
            return table[i].value;
    return SKD_EINTERNAL;
}

int skd_err_set(skd_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        skd_vformat(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

void skd_err_clear(skd_err *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}

const char *skd_err_msg(const skd_err *err)
{
    if (!err)
        return "unknown error";
    return err->msg[0] ? err->msg : skd_strerror(err->code);
}
