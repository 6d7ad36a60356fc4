#!/usr/bin/env bash
# Cancelling a sandboxed call leaves no process behind: through MCP
# notifications/cancelled, through DELETE of the MCP session, over stdio,
# and through a graceful stop (SIGTERM) of the server. Uses the
# execute_command skill with a `sleep` whose argument marks the run.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

# gone MARK: wait up to 10 s for no process with MARK in its command line.
gone() {
    for _ in $(seq 1 200); do
        pgrep -f "sleep $1" >/dev/null || return 0
        sleep 0.05
    done
    return 1
}
started() {
    for _ in $(seq 1 200); do
        pgrep -f "sleep $1" >/dev/null && return 0
        sleep 0.05
    done
    return 1
}
call() { # call SID ID MARK: a streamed execute_command sleeping MARK seconds
    echo "{\"jsonrpc\":\"2.0\",\"id\":\"$2\",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_command\",\"arguments\":{\"command\":\"sleep\",\"args\":[\"$3\"],\"timeoutMs\":60000},\"_meta\":{\"progressToken\":1}}}" |
        curl -sS -N "${MCP_H[@]}" -H "Authorization: Bearer $ADMIN" -H "Mcp-Session-Id: $1" --data-binary @- "$URL/mcp"
}

start_server
SID=$(mcp_init "$ADMIN")
M1=$((40 + RANDOM % 1000)).101
call "$SID" c1 "$M1" >"$TMP/c1.out" &
C1=$!
if started "$M1"; then pass "the sandbox runs"; else fail "the sandbox runs" "$(cat "$TMP/c1.out") $(tail -3 "$TMP/serve.err")"; fi
req GET /metrics -H "Authorization: Bearer $ADMIN"
echo "$BODY" | grep -q '^skilld_sandboxes_running 1$' && pass "metrics count the running sandbox" || fail "metrics count the running sandbox" "$(echo "$BODY" | grep sandboxes)"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $ADMIN" -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"test"}}'
gone "$M1" && pass "notifications/cancelled kills the sandbox" || fail "notifications/cancelled kills the sandbox" "sleep $M1 still running"
wait "$C1"
grep -q '"id":"c1"' "$TMP/c1.out" && fail "no reply for the cancelled call" "$(cat "$TMP/c1.out")" || pass "no reply for the cancelled call"

M2=$((40 + RANDOM % 1000)).202
call "$SID" c2 "$M2" >/dev/null &
C2=$!
started "$M2" || fail "the second sandbox runs" "never started"
req DELETE /mcp -H "Authorization: Bearer $ADMIN" -H "Mcp-Session-Id: $SID"
expect_status "DELETE the session" 204
gone "$M2" && pass "ending the session kills its sandbox" || fail "ending the session kills its sandbox" "sleep $M2 still running"
wait "$C2"

SID=$(mcp_init "$ADMIN")
M3=$((40 + RANDOM % 1000)).303
call "$SID" c3 "$M3" >/dev/null &
C3=$!
started "$M3" || fail "the third sandbox runs" "never started"
stop_server && pass "SIGTERM with a sandbox running exits 0" || fail "SIGTERM with a sandbox running exits 0" "exit $?"
gone "$M3" && pass "a graceful stop kills the running sandbox" || fail "a graceful stop kills the running sandbox" "sleep $M3 still running"
wait "$C3"

# stdio: notifications/cancelled kills the sandbox too.
M4=$((40 + RANDOM % 1000)).404
python3 - "$SKILLD" "$DATA" "$M4" <<'PY' && pass "stdio: cancelled sandbox leaves no process" || fail "stdio: cancelled sandbox leaves no process" "see above"
import json, subprocess, sys, time
skilld, data, mark = sys.argv[1:4]
p = subprocess.Popen([skilld, "--data-dir", data, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def send(o):
    p.stdin.write((json.dumps(o) + "\n").encode()); p.stdin.flush()
def running():
    return subprocess.run(["pgrep", "-f", "sleep " + mark], capture_output=True).returncode == 0
send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "execute_command", "arguments": {"command": "sleep", "args": [mark]}}})
for _ in range(200):
    if running(): break
    time.sleep(0.05)
else:
    print("never started"); sys.exit(1)
send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
for _ in range(200):
    if not running(): break
    time.sleep(0.05)
else:
    print("still running"); sys.exit(1)
p.stdin.close()
sys.exit(0 if p.wait(10) == 0 else 1)
PY
finish
