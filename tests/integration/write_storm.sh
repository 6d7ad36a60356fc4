#!/usr/bin/env bash
# kill -9 of the server during a storm of file_write calls, then a restart:
# no temporary file (.skd-tmp-*) is left in the workspace, and the quota
# agrees with the files there: a write of exactly what is left succeeds,
# one byte more is quota_exceeded (src/workspace/workspace.c, the sweep at
# start; file_write, the sweep under the workspace lock).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/server_common.sh"
Q=2000000
export SKILLS_WORKSPACE_QUOTA_BYTES=$Q SKILLS_MAX_FILE_BYTES=$Q
start_server
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -n 5 "$TMP/serve.err")"; finish; }
KEY=$ADMIN
# write NAME BYTES: file_write of BYTES 'x's through REST; the reply.
write() {
    { printf '{"skill":"file_write","input":{"path":"%s","content":"' "$1"; head -c "$2" /dev/zero | tr '\0' x; printf '"}}'; } >"$TMP/body.$1"
    curl -sS -m 30 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "@$TMP/body.$1" "$URL/v1/execute"
}
tmps() { find "$DATA/workspaces" -name '.skd-tmp-*' 2>/dev/null | wc -l; }
restart() {
    env SKILLD_TEST_SKILLS=true "$SKILLD_TEST_BIN" --data-dir "$DATA" serve --listen "127.0.0.1:$PORT" >>"$TMP/serve.out" 2>>"$TMP/serve.err" &
    SRV_PID=$!
    for _ in $(seq 1 200); do curl -fsS "$URL/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
}
out=$(write s0 1000)
if [ "$("$JGET" .success <<<"$out")" = true ]; then pass "file_write through REST"; else fail "file_write through REST" "${out:0:200}"; fi

# The storm: four writers overwriting 450 kB files, killed mid-way; again
# until a kill has left temporary files (so the restart has work to do).
left=0 rounds=0
while [ "$left" = 0 ] && [ $rounds -lt 20 ]; do
    rounds=$((rounds + 1))
    pids=()
    for i in 1 2 3 4; do
        (while :; do write "s$i" 450000 >/dev/null 2>&1; done) &
        pids+=($!)
    done
    sleep 1.5
    kill -9 "$SRV_PID"
    wait "$SRV_PID" 2>/dev/null
    kill "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
    left=$(tmps)
    [ "$left" = 0 ] && restart
done
echo "# $rounds round(s) of storm and kill -9; $left temporary file(s) left"
if [ "$left" -gt 0 ]; then pass "kill -9 mid-storm left temporary files ($left)"; else fail "kill -9 mid-storm left temporary files" "none in $rounds rounds"; fi
restart
if [ "$(tmps)" = 0 ]; then pass "the restart removed every temporary file"; else fail "the restart removed every temporary file" "$(tmps) left"; fi
grep -q 'temporary file(s) of interrupted writes' "$TMP/serve.err" && pass "the restart says what it removed" || fail "the restart says what it removed" "$(tail -n 3 "$TMP/serve.err")"

used=$(find "$DATA/workspaces" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
out=$(write fill $((Q - used)))
if [ "$("$JGET" .success <<<"$out")" = true ]; then pass "a write of exactly what the files leave of the quota succeeds ($((Q - used)) bytes)"; else fail "a write of exactly what the quota leaves succeeds" "used $used; ${out:0:300}"; fi
out=$(write one 1)
if [ "$("$JGET" .error.code <<<"$out")" = quota_exceeded ]; then pass "one byte more is quota_exceeded"; else fail "one byte more is quota_exceeded" "${out:0:300}"; fi
stop_server
finish
