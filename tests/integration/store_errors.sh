#!/usr/bin/env bash
# The store's failures reach the caller as store_unavailable (issue 12
# part 6), through the real binary on a real SQLite file:
#   - serve on a database whose tables cannot be read refuses to start and
#     mints no admin key (a failed count is not "no keys");
#   - a write while another process holds SQLite's write lock gets a prompt
#     503 store_unavailable, and works again once the lock is gone;
#   - /healthz names the backend (its 503 during an outage is in
#     tests/store/pg_outage.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/server_common.sh"

# corrupt DB: keep page 1 (header + schema), overwrite the table pages.
corrupt() {
    python3 - "$1" <<'PY'
import os, sys
p = sys.argv[1]
size = os.path.getsize(p)
with open(p, "r+b") as f:
    for off in range(4096, size, 4096):
        f.seek(off); f.write(b"\xa5" * 4096)
PY
}

# 1. serve on an unreadable store
D="$TMP/bad"
"$SKILLD" --data-dir "$D" keys create first --scopes skills:read >/dev/null 2>&1
corrupt "$D/skilld.db"
rc=0
timeout 20 "$SKILLD" --data-dir "$D" serve --listen 127.0.0.1:0 >"$TMP/bad.out" 2>"$TMP/bad.err" || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then pass "serve_refuses_unreadable_store"; else fail "serve_refuses_unreadable_store" "exit $rc"; fi
if ! grep -q "admin key was created" "$TMP/bad.out"; then pass "no_second_admin_key"; else fail "no_second_admin_key" "$(head -3 "$TMP/bad.out")"; fi
if grep -qi "malformed\|store" "$TMP/bad.err"; then pass "serve_says_why"; else fail "serve_says_why" "$(cat "$TMP/bad.err")"; fi

# 2. a held write lock gives prompt 503s
start_server SKILLD_STORE_TIMEOUT_MS=300
req POST /v1/keys -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{"name":"before"}'
expect_status "key_create_before_lock" 201
python3 - "$DATA/skilld.db" "$TMP/locked" <<'PY' &
import sqlite3, sys, time, os
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE"); c.execute("DELETE FROM cache")
open(sys.argv[2], "w").close()
time.sleep(3)
c.execute("COMMIT")
PY
LOCKER=$!
for _ in $(seq 1 100); do [ -e "$TMP/locked" ] && break; sleep 0.05; done
t0=$(date +%s%N)
req POST /v1/keys -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{"name":"during"}'
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect_status "key_create_locked_is_503" 503
expect_json "locked_code_store_unavailable" 'j["error"]["code"] == "store_unavailable"'
# bounded by SKILLD_STORE_TIMEOUT_MS (300) plus a generous margin
if [ "$ms" -lt 2500 ]; then pass "locked_answer_is_prompt"; else fail "locked_answer_is_prompt" "${ms} ms"; fi
req GET /v1/keys -H "Authorization: Bearer $ADMIN"
expect_status "reads_go_on_during_the_lock" 200
wait "$LOCKER"
req POST /v1/keys -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d '{"name":"after"}'
expect_status "key_create_after_lock" 201
req GET /healthz
expect_status "healthz_ok" 200
expect_json "healthz_names_backend" 'j["store"] == "sqlite"'

stop_server
finish
