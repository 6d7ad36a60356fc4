/*
 * Library-internal view of the store for the files in src/store/ and for
 * other parts that keep a table here (they append a migration in store.c
 * and prepare their statements on skd__store_db()).
 */
#ifndef SKILLD_STORE_INTERNAL_H
#define SKILLD_STORE_INTERNAL_H

#include <sqlite3.h>

#include "skilld/store.h"

struct skd_store {
    sqlite3 *db; /* opened SQLITE_OPEN_FULLMUTEX: usable from any thread */
};

/* The database handle. Borrowed. */
sqlite3 *skd__store_db(skd_store *st);

/* Set err to SKD_EIO with SQLite's message for what failed. */
int skd__store_fail(skd_store *st, skd_err *err, const char *what);

#endif
