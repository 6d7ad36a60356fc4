#!/usr/bin/env bash
# Batched audit rows and the key cache through the real server (issue 13).
# The database is read from outside the server (sqlite3 on the file, or
# psql in the PostgreSQL ring), so it shows what a crash would leave.
#   - with a window of a minute, a call's row is not in the database yet,
#     an audit query of the server returns it (the server flushes first),
#     and SIGTERM writes every row still queued;
#   - SKILLD_AUDIT_SYNC=1: the row is in the database when the call is
#     answered;
#   - a short window: rows appear on their own; kill -9 keeps every row of
#     a call answered longer than the window before it (the bound on what
#     a crash loses), and the database is intact;
#   - a key used (so cached) and then revoked by another process (the CLI)
#     is refused on the very next call.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"
trap '[ -n "${SRV_PID:-}" ] && kill -9 "$SRV_PID" 2>/dev/null; rm -rf "$TMP"' EXIT

# db_rows KEY_ID: the key's rows in the database, read by another process.
db_rows() {
    if [ -n "${SKILLD_TEST_PG_HOST:-}" ]; then # tests/store/skilld-pg's database of DATA_DIR
        local db
        db=skd_$(printf '%s' "$(realpath -m -- "$DATA")" | sha256sum | cut -c1-24)
        psql -X -tA -h "$SKILLD_TEST_PG_HOST" -p "$SKILLD_TEST_PG_PORT" -U skilld -d "$db" \
            -c "SELECT count(*) FROM executions WHERE key_id='$1'"
    else
        sqlite3 "$DATA/skilld.db" "SELECT count(*) FROM executions WHERE key_id='$1'"
    fi
}

# wait_rows KEY_ID N: up to 10 s for N rows in the database.
wait_rows() {
    local n=""
    for _ in $(seq 1 100); do
        n=$(db_rows "$1")
        [ "$n" = "$2" ] && return 0
        sleep 0.1
    done
    echo "# $n rows of $1, want $2"
    return 1
}

call() { req POST /v1/execute "${AUTH[@]}" -d "{\"skill\":\"file_write\",\"input\":{\"path\":\"a.txt\",\"content\":\"$1\"}}"; }

# ---- a minute's window: queued, flushed for readers and at SIGTERM ----
start_server SKILLD_AUDIT_FLUSH_MS=60000
[ -n "$ADMIN" ] || fail "server_starts" "$(tail -3 "$TMP/serve.err")"
read -r KID KSECRET < <(new_key writer skills:read,skills:execute)
read -r _ OSECRET < <(new_key other skills:read)
AUTH=(-H "Authorization: Bearer $KSECRET" -H 'Content-Type: application/json')
call one
expect_status "call_answered" 200
n=$(db_rows "$KID")
if [ "$n" = 0 ]; then pass "row_waits_for_its_window"; else fail "row_waits_for_its_window" "$n rows already"; fi
req GET "/v1/executions" "${AUTH[@]}"
expect_json "audit_query_sees_the_answered_call" 'len(j["executions"]) == 1 and j["executions"][0]["skill"] == "file_write"'
n=$(db_rows "$KID")
if [ "$n" = 1 ]; then pass "audit_query_wrote_the_queue"; else fail "audit_query_wrote_the_queue" "$n rows"; fi
for i in 1 2 3; do call "more$i"; done
n=$(db_rows "$KID")
if [ "$n" = 1 ]; then pass "later_rows_wait_too"; else fail "later_rows_wait_too" "$n rows"; fi
stop_server
rc=$?
[ "$rc" = 0 ] && pass "sigterm_clean_exit" || fail "sigterm_clean_exit" "status $rc"
n=$(db_rows "$KID")
if [ "$n" = 4 ]; then pass "sigterm_writes_every_queued_row"; else fail "sigterm_writes_every_queued_row" "$n rows, want 4"; fi

# ---- SKILLD_AUDIT_SYNC=1: in the database when answered ----
start_server SKILLD_AUDIT_SYNC=1 SKILLD_AUDIT_FLUSH_MS=60000
call sync1
expect_status "sync_call_answered" 200
n=$(db_rows "$KID")
if [ "$n" = 5 ]; then pass "sync_row_written_before_the_answer"; else fail "sync_row_written_before_the_answer" "$n rows, want 5"; fi
call sync2
n=$(db_rows "$KID")
if [ "$n" = 6 ]; then pass "sync_every_row"; else fail "sync_every_row" "$n rows, want 6"; fi
stop_server

# ---- a short window: rows appear on their own; kill -9 loses at most the window ----
start_server SKILLD_AUDIT_FLUSH_MS=100
for i in 1 2 3 4 5; do call "w$i"; done
expect_status "window_calls_answered" 200
if wait_rows "$KID" 11; then pass "rows_written_after_the_window"; else fail "rows_written_after_the_window" "not within 10 s"; fi
for i in 1 2 3; do call "k$i"; done
sleep 2.5 # far more than the 100 ms window: these rows are no longer in it
kill -9 "$SRV_PID"
wait "$SRV_PID" 2>/dev/null || true
SRV_PID=""
n=$(db_rows "$KID")
if [ "$n" = 14 ]; then pass "kill9_keeps_rows_older_than_the_window"; else fail "kill9_keeps_rows_older_than_the_window" "$n rows, want 14"; fi
if [ -z "${SKILLD_TEST_PG_HOST:-}" ]; then
    ic=$(sqlite3 "$DATA/skilld.db" "PRAGMA integrity_check")
    [ "$ic" = ok ] && pass "kill9_database_intact" || fail "kill9_database_intact" "$ic"
fi

# ---- the key cache: revoked by another process, refused at once ----
start_server
req GET /v1/skills "${AUTH[@]}"
expect_status "key_works_and_is_cached" 200
req GET /v1/skills "${AUTH[@]}"
expect_status "key_works_from_the_cache" 200
"$SKILLD" --data-dir "$DATA" keys revoke "$KID" >/dev/null
req GET /v1/skills "${AUTH[@]}"
expect_status "revoked_by_the_cli_refused_on_the_next_call" 401
req GET /v1/skills -H "Authorization: Bearer $OSECRET"
expect_status "other_keys_still_work" 200
stop_server
finish
