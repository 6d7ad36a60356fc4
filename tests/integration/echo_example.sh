#!/usr/bin/env bash
# examples/echo_server.c: a program that embeds libskilld and adds an `echo`
# skill written in C, served over MCP stdio and over HTTP (REST and A2A).
source "$(dirname "$0")/../lib.sh"
EX="$(dirname "$SKILLD")/examples/echo_server"
[ -x "$EX" ] && pass "the example is built" || fail "the example is built" "$EX missing"

OUT=$(printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello from C"}}}' \
    '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":7}}}' |
    timeout 30 "$EX" "$TMP/stdio-data" 2>"$TMP/stdio.err")
line() { echo "$OUT" | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("id")==int(sys.argv[1]): print(l.strip())' "$1"; }
BODY=$(line 2)
python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert any(t["name"]=="echo" for t in j["result"]["tools"])' "$BODY" 2>/dev/null &&
    pass "MCP stdio lists the C skill" || fail "MCP stdio lists the C skill" "$OUT $(cat "$TMP/stdio.err")"
BODY=$(line 3)
python3 -c 'import json,sys; r=json.loads(sys.argv[1])["result"]["structuredContent"]; assert r=={"success":True,"echo":"hello from C","caller":"echo-local"}, r' "$BODY" 2>/dev/null &&
    pass "MCP stdio calls the C handler" || fail "MCP stdio calls the C handler" "$BODY"
BODY=$(line 4)
python3 -c 'import json,sys; r=json.loads(sys.argv[1])["result"]; assert r["isError"] is True and "message" in r["content"][0]["text"]' "$BODY" 2>/dev/null &&
    pass "the schema is enforced before the handler" || fail "the schema is enforced before the handler" "$BODY"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$EX" "$TMP/http-data" "127.0.0.1:$PORT" >"$TMP/http.out" 2>"$TMP/http.err" &
PID=$!
for _ in $(seq 1 100); do grep -q '^secret: ' "$TMP/http.out" 2>/dev/null && break; sleep 0.05; done
SECRET=$(awk '/^secret: /{print $2}' "$TMP/http.out")
R=$(curl -sS -H "Authorization: Bearer $SECRET" -H 'Content-Type: application/json' \
    -d '{"skill":"echo","input":{"message":"over REST"}}' "http://127.0.0.1:$PORT/v1/execute")
python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert j["success"] and j["echo"]=="over REST"' "$R" 2>/dev/null &&
    pass "HTTP REST calls the C skill" || fail "HTTP REST calls the C skill" "$R $(cat "$TMP/http.err")"
R=$(curl -sS -H "Authorization: Bearer $SECRET" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"data":{"skill":"echo","input":{"message":"over A2A"}}}]}}}' \
    "http://127.0.0.1:$PORT/a2a")
python3 -c 'import json,sys; t=json.loads(sys.argv[1])["result"]["task"]; assert t["artifacts"][0]["parts"][0]["data"]["echo"]=="over A2A"' "$R" 2>/dev/null &&
    pass "HTTP A2A calls the C skill" || fail "HTTP A2A calls the C skill" "$R"
R=$(curl -sS "http://127.0.0.1:$PORT/.well-known/agent-card.json")
python3 -c 'import json,sys; assert any(s["id"]=="echo" for s in json.loads(sys.argv[1])["skills"])' "$R" 2>/dev/null &&
    pass "the agent card lists the C skill" || fail "the agent card lists the C skill" "$R"
kill -TERM "$PID"
wait "$PID" && pass "the example stops cleanly on SIGTERM" || fail "the example stops cleanly on SIGTERM" "exit $?"
finish
