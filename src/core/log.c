/*
 * Logging (see include/skilld/log.h). The level and format are set once at
 * start-up and read with relaxed atomics afterwards.
 */
#include "skilld/log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = SKD_LOG_INFO;
static atomic_int log_json = 0;
static const char *names[] = {"debug", "info", "warn", "error", "off"};

void skd_log_set_level(int level)
{
    if (level >= SKD_LOG_DEBUG && level <= SKD_LOG_OFF)
        atomic_store(&log_level, level);
}

int skd_log_get_level(void)
{
    return atomic_load(&log_level);
}

void skd_log_set_json(int json)
{
    atomic_store(&log_json, json ? 1 : 0);
}

int skd_log_level_parse(const char *s)
{
    for (int i = 0; s && i <= SKD_LOG_OFF; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

void skd_log(int level, const char *fmt, ...)
{
    if (level < atomic_load(&log_level) || level >= SKD_LOG_OFF)
        return;
    char msg[2048], line[4096], ts[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(now.tv_nsec / 1000000) % 1000);

    int n;
    if (atomic_load(&log_json)) {
        json_t *o = json_pack("{s:s, s:s, s:s}", "ts", ts, "level", names[level], "msg", msg);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        n = snprintf(line, sizeof(line), "%s\n", s ? s : "{}");
        free(s);
        json_decref(o);
    } else {
        n = snprintf(line, sizeof(line), "%s %-5s %s\n", ts, names[level], msg);
    }
    if (n > (int)sizeof(line) - 1)
        n = (int)sizeof(line) - 1;
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* Nothing sensible to do when stderr is gone. */
    }
}
