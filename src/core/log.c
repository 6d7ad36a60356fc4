/*
 * Logging (see include/skilld/log.h). The level and format are set once at
 * start-up and read with relaxed atomics afterwards.
 */
#include "skilld/log.h"
#include "skilld/util.h"

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

/* Write all n bytes to stderr, one write() where it can: lines of several
 * threads do not interleave below PIPE_BUF. */
static void write_err(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w <= 0)
            return; /* nothing sensible to do when stderr is gone */
        p += w;
        n -= (size_t)w;
    }
}

void skd_log(int level, const char *fmt, ...)
{
    if (level < atomic_load(&log_level) || level >= SKD_LOG_OFF)
        return;
    char msg[2048], line[4096], ts[64];
    va_list ap;
    va_start(ap, fmt);
    /* Valid UTF-8 even when cut at the cap or quoting client bytes: a JSON
     * line would otherwise lose its message. */
    skd_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (long)(now.tv_nsec / 1000000) % 1000);

    if (atomic_load(&log_json)) {
        /* Escaping can make the line several times longer than msg: it
         * gets its own allocation, never a cut (a cut line is not JSON). */
        json_t *o = json_pack("{s:s, s:s, s:s}", "ts", ts, "level", names[level], "msg", msg);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        size_t n = s ? strlen(s) : 0;
        char *l = s ? realloc(s, n + 2) : NULL;
        if (l) {
            l[n] = '\n';
            write_err(l, n + 1);
            free(l);
        } else {
            free(s);
            write_err("{}\n", 3);
        }
        return;
    }
    int n = snprintf(line, sizeof(line), "%s %-5s %s\n", ts, names[level], msg);
    if (n > (int)sizeof(line) - 1)
        n = (int)sizeof(line) - 1;
    if (n > 0)
        write_err(line, (size_t)n);
}
