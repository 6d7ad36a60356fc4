/*
 * Logging to stderr, as text or as JSON lines (--log-format json). Safe to
 * call from any thread; one line is written with one write(2).
 */
#ifndef SKILLD_LOG_H
#define SKILLD_LOG_H

enum skd_log_level { SKD_LOG_DEBUG, SKD_LOG_INFO, SKD_LOG_WARN, SKD_LOG_ERROR, SKD_LOG_OFF };

void skd_log_set_level(int level);
int skd_log_get_level(void);
/* json: 1 for JSON lines, 0 for text. */
void skd_log_set_json(int json);
/* Parse "debug|info|warn|error|off"; returns the level or -1. */
int skd_log_level_parse(const char *s);

void skd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define skd_debug(...) skd_log(SKD_LOG_DEBUG, __VA_ARGS__)
#define skd_info(...) skd_log(SKD_LOG_INFO, __VA_ARGS__)
#define skd_warn(...) skd_log(SKD_LOG_WARN, __VA_ARGS__)
#define skd_error(...) skd_log(SKD_LOG_ERROR, __VA_ARGS__)

#endif
