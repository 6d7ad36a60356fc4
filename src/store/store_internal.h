/*
 * Library-internal view of the store for the files in src/store/ and for
 * other parts that keep a table here (they append a migration in store.c
 * and prepare their statements on skd__store_db()).
 */
#ifndef SKILLD_STORE_INTERNAL_H
#define SKILLD_STORE_INTERNAL_H

#include <sqlite3.h>
#include <stdint.h>

#include "skilld/store.h"

struct skd_store {
    sqlite3 *db; /* opened SQLITE_OPEN_FULLMUTEX: usable from any thread */
};

/* The database handle. Borrowed. */
sqlite3 *skd__store_db(skd_store *st);

/* Set err to SKD_EIO with SQLite's message for what failed. */
int skd__store_fail(skd_store *st, skd_err *err, const char *what);

/* Step q, a statement that writes, to its end; *changes (may be NULL)
 * receives the rows it changed, counted under the connection's mutex so a
 * concurrent statement of another thread cannot stand in for it. Returns 0
 * or SKD_EIO ("store: <what>: <SQLite's message>"). Does not finalize q. */
int skd__store_step_write(skd_store *st, sqlite3_stmt *q, const char *what, int64_t *changes,
                          skd_err *err);

#endif
