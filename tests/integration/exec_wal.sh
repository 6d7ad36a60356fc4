#!/usr/bin/env bash
# skilld exec's SQLite WAL across processes (issue 13, goal 3). Each exec
# commits its audit row and closes; a small WAL is left for the next
# process instead of being checkpointed and deleted each time, and one past
# the bound (256 KiB) is checkpointed and deleted, so it never grows past
# the bound plus one call's rows. SQLite's own (the PostgreSQL ring has no
# WAL), so scripts/test.sh leaves it out of that ring.
#   - 60 execs: the WAL was left at least once and restarted at least once,
#     never past the bound plus one call, and every row is in the database,
#     which another process (sqlite3) reads intact;
#   - SKILLD_AUDIT_SYNC=1 (durable rows): every exec checkpoints; no WAL is
#     left.
source "$(dirname "$0")/../lib.sh"
export DATA_DIR="$TMP/data"
WAL="$DATA_DIR/skilld.db-wal"
BOUND=$((256 * 1024 + 64 * 1024))

KID=$("$SKILLD" keys create wal-exec --json 2>/dev/null | "$JGET" .id 2>/dev/null)
left=0 restarted=0 max=0 prev=0 bad=""
for i in $(seq 1 60); do
    "$SKILLD" exec --key "$KID" -- true >/dev/null 2>"$TMP/err" || bad="exec $i failed: $(head -c 200 "$TMP/err")"
    size=$(stat -c %s "$WAL" 2>/dev/null || echo 0)
    [ "$size" -gt 0 ] && left=$((left + 1))
    [ "$size" -lt "$prev" ] && restarted=$((restarted + 1))
    [ "$size" -gt "$max" ] && max=$size
    prev=$size
done
if [ -z "$bad" ] && [ "$left" -gt 0 ] && [ "$restarted" -gt 0 ] && [ "$max" -le "$BOUND" ]; then
    pass "exec leaves a bounded WAL"; else
    fail "exec leaves a bounded WAL" "$bad left=$left restarted=$restarted max=$max bound=$BOUND"; fi

rows=$(sqlite3 "$DATA_DIR/skilld.db" "SELECT count(*) FROM executions WHERE key_id='$KID' AND skill='exec'" 2>&1)
ok=$(sqlite3 "$DATA_DIR/skilld.db" "PRAGMA integrity_check" 2>&1)
if [ "$rows" = 60 ] && [ "$ok" = ok ]; then pass "every exec row is in the database"; else
    fail "every exec row is in the database" "rows=$rows integrity=$ok"; fi

# The sqlite3 above was the last to close: it checkpointed and deleted the WAL.
SKILLD_AUDIT_SYNC=1 "$SKILLD" exec --key "$KID" -- true >/dev/null 2>"$TMP/err"
rc=$?
rows=$(sqlite3 "$DATA_DIR/skilld.db" "SELECT count(*) FROM executions WHERE key_id='$KID' AND skill='exec'" 2>&1)
if [ "$rc" = 0 ] && [ ! -e "$WAL" ] && [ "$rows" = 61 ]; then pass "durable rows: no WAL left"; else
    fail "durable rows: no WAL left" "rc=$rc wal=$(stat -c %s "$WAL" 2>&1) rows=$rows"; fi
SKILLD_AUDIT_SYNC=1 "$SKILLD" exec --key "$KID" -- true >/dev/null 2>&1
if [ ! -e "$WAL" ]; then pass "durable rows: no WAL after a second exec"; else
    fail "durable rows: no WAL after a second exec" "wal=$(stat -c %s "$WAL" 2>&1)"; fi
finish
