#!/usr/bin/env bash
# The PostgreSQL store through the real server (issue 11 part 1): a
# PostgreSQL 15 of its own in a temporary directory; skilld serve with
# SKILLD_STORE=postgresql://...
#   - keys, calls and the audit work; /healthz names the backend;
#   - PostgreSQL stopped: calls and /healthz get 503 store_unavailable
#     within 2 s, never a hang; restarted: the same server process serves
#     again within 5 s;
#   - connections killed by the database (pg_terminate_backend) are
#     replaced without a failed call;
#   - a database that cannot be reached at start: serve exits promptly.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/server_common.sh"
. "$(dirname "$0")/pg_lib.sh"
trap 'pg_stop; [ -n "${SRV_PID:-}" ] && kill -9 "$SRV_PID" 2>/dev/null; rm -rf "$TMP"' EXIT

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

pg_start || { fail "pg_start" "cannot start PostgreSQL"; finish; }
export SKILLD_STORE="$PG_URL"
start_server
if [ -n "$ADMIN" ]; then pass "first_start_on_postgresql_prints_admin_key"; else fail "first_start_on_postgresql_prints_admin_key" "$(cat "$TMP/serve.err")"; fi
req GET /healthz
expect_status "healthz_ok" 200
expect_json "healthz_names_postgresql" 'j["store"] == "postgresql"'
read -r KID KSECRET < <(new_key writer skills:read,skills:execute)
AUTH=(-H "Authorization: Bearer $KSECRET" -H 'Content-Type: application/json')
call() { req POST /v1/execute "${AUTH[@]}" -d "{\"skill\":\"file_write\",\"input\":{\"path\":\"a.txt\",\"content\":\"$1\"}}"; }
call one
expect_status "call_through_postgresql" 200
# the row is written within the audit window (SKILLD_AUDIT_FLUSH_MS, 20 ms)
for _ in $(seq 1 50); do
    rows=$(psql -X -tA "$PG_URL" -c "SELECT count(*) FROM executions WHERE key_id='$KID'")
    [ "$rows" = "1" ] && break
    sleep 0.1
done
if [ "$rows" = "1" ]; then pass "audit_row_in_postgresql"; else fail "audit_row_in_postgresql" "rows=$rows"; fi
keys=$(psql -X -tA "$PG_URL" -c "SELECT count(*) FROM api_keys")
if [ "$keys" = "2" ]; then pass "cli_and_server_share_the_database"; else fail "cli_and_server_share_the_database" "keys=$keys"; fi

# --- outage ---
pg_halt
worst=0; codes=""
for i in 1 2 3 4 5; do
    t0=$(now_ms); call "down$i"; dt=$(( $(now_ms) - t0 ))
    [ "$dt" -gt "$worst" ] && worst=$dt
    codes="$codes $STATUS:$(json_get "$BODY" 'j["error"]["code"]' 2>/dev/null)"
done
if [ "$(echo "$codes" | tr ' ' '\n' | grep -c '^503:store_unavailable$')" = 5 ]; then pass "outage_calls_are_503_store_unavailable"; else fail "outage_calls_are_503_store_unavailable" "$codes"; fi
if [ "$worst" -lt 2000 ]; then pass "outage_answers_within_2s"; else fail "outage_answers_within_2s" "worst ${worst} ms"; fi
t0=$(now_ms); req GET /healthz; dt=$(( $(now_ms) - t0 ))
expect_status "healthz_503_during_outage" 503
if [ "$dt" -lt 2000 ]; then pass "healthz_answers_within_2s"; else fail "healthz_answers_within_2s" "${dt} ms"; fi
echo "# outage: worst call ${worst} ms, healthz ${dt} ms"

pg_resume || fail "pg_resume" "cannot restart PostgreSQL"
t0=$(now_ms); ok=0
while [ $(( $(now_ms) - t0 )) -lt 5000 ]; do
    call back; [ "$STATUS" = 200 ] && { ok=1; break; }; sleep 0.1
done
if [ "$ok" = 1 ]; then pass "serves_again_within_5s_after_restart"; else fail "serves_again_within_5s_after_restart" "status $STATUS"; fi
echo "# recovery after restart: $(( $(now_ms) - t0 )) ms"
if kill -0 "$SRV_PID" 2>/dev/null; then pass "no_restart_of_skilld"; else fail "no_restart_of_skilld" "server exited"; fi
fails=0
for i in $(seq 1 20); do call "after$i"; [ "$STATUS" = 200 ] || fails=$((fails + 1)); done
if [ "$fails" = 0 ]; then pass "every_call_after_recovery_succeeds"; else fail "every_call_after_recovery_succeeds" "$fails failed"; fi

# --- the database drops our connections ---
psql -X -q "$PG_URL" -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name='skilld'" >/dev/null
sleep 0.2
fails=0
for i in $(seq 1 10); do call "term$i"; [ "$STATUS" = 200 ] || fails=$((fails + 1)); done
if [ "$fails" = 0 ]; then pass "terminated_connections_are_replaced"; else fail "terminated_connections_are_replaced" "$fails failed"; fi
req GET /v1/executions "${AUTH[@]}"
n=$(json_get "$BODY" 'len(j["executions"])' 2>/dev/null)
# one + back + 20 after + 10 term (the outage calls were refused before running)
if [ "$n" = "32" ]; then pass "audit_one_row_per_successful_call"; else fail "audit_one_row_per_successful_call" "rows=$n"; fi
stop_server

# --- unreachable at start ---
port=$(pg_free_port)
t0=$(now_ms)
rc=0
SKILLD_STORE="postgresql://skilld@127.0.0.1:$port/skilld" timeout 20 "$SKILLD" --data-dir "$TMP/d2" serve --listen 127.0.0.1:0 >"$TMP/u.out" 2>"$TMP/u.err" || rc=$?
dt=$(( $(now_ms) - t0 ))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$dt" -lt 10000 ]; then pass "unreachable_store_at_start_exits"; else fail "unreachable_store_at_start_exits" "rc=$rc after ${dt} ms"; fi
if grep -q "PostgreSQL" "$TMP/u.err"; then pass "unreachable_store_says_why"; else fail "unreachable_store_says_why" "$(cat "$TMP/u.err")"; fi
finish
