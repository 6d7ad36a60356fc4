/*
 * In-flight skill calls and worker threads of one server (HTTP or stdio),
 * so that a graceful stop can cancel every running call (their sandboxes are
 * killed through the cancel hooks) and wait for the threads to end.
 */
#ifndef SKILLD_SERVER_CALLS_H
#define SKILLD_SERVER_CALLS_H

#include "skilld/skilld.h"

typedef struct skd_calls skd_calls;

/* Jobs an HTTP server runs at once on its workers (handlers and streams). */
#define SKD__CALLS_MAX_JOBS 1024

skd_calls *skd__calls_new(void);
/* Frees the tracker; callers first stop it (skd__calls_stop). NULL ok. */
void skd__calls_free(skd_calls *c);

/* Register a running call's token (borrowed until skd__calls_end). Returns
 * SKD_EBUSY once the tracker is stopping (the token is then fired). */
int skd__calls_begin(skd_calls *c, skd_cancel *cancel);
void skd__calls_end(skd_calls *c, skd_cancel *cancel);

/* Run fn(arg) on a worker thread of the tracker's pool (an idle one, or a
 * new one; idle workers end after 10 s). Returns 0, or SKD_EBUSY when max
 * jobs are already queued or running (or while stopping), SKD_EINTERNAL.
 * fn owns arg. */
int skd__calls_spawn(skd_calls *c, size_t max, void (*fn)(void *), void *arg);

/* Number of calls registered now. */
size_t skd__calls_count(skd_calls *c);

/* 1 once skd__calls_stop ran. */
int skd__calls_stopping(skd_calls *c);

/* Refuse new calls, fire every registered token, wait up to grace_ms for the
 * calls and the threads to end. Returns 0 or SKD_ETIMEOUT. */
int skd__calls_stop(skd_calls *c, int grace_ms);

/* Wait (without cancelling) up to wait_ms for every spawned job to end. */
int skd__calls_drain(skd_calls *c, int wait_ms);

#endif
