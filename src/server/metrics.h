/*
 * Server metrics in memory, rendered as Prometheus text for /metrics.
 * Counters only grow; label values come from a bounded set (route patterns,
 * status codes, skill names, key ids up to SKILLD_METRICS_MAX_KEYS) and the tables are capped, so a
 * client cannot make them grow without bound.
 */
#ifndef SKILLD_SERVER_METRICS_H
#define SKILLD_SERVER_METRICS_H

#include "skilld/buf.h"
#include "skilld/server.h"

/* Count one HTTP request answered on route (a pattern, borrowed static
 * string; "unmatched" for none) with status. */
void skd__metrics_request(const char *route, unsigned status);

/* Append the Prometheus text exposition to b: the requests counted here,
 * e's executions (skd_engine_exec_stats), in_flight (the number of skill
 * calls running in this server now) and the gauges. Rows labelled with a
 * skill name are rendered only when visible(arg, name) says 1 (NULL: every
 * row): the caller's view, decided by the engine. Per-key usage rows
 * (skd_engine_key_stats) are rendered only when key_visible(arg, key)
 * says 1 (NULL: every row) and their skill is visible. */
int skd__metrics_render(skd_buf *b, skd_engine *e, size_t in_flight,
                        int (*visible)(void *arg, const char *skill),
                        int (*key_visible)(void *arg, const char *key), void *arg);

/* Forget everything (tests). */
void skd__metrics_reset(void);

#endif
