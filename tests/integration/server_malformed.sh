#!/usr/bin/env bash
# Malformed-input battery against /mcp and /v1: broken JSON, wrong types,
# huge bodies (413, with and without Content-Length), deep nesting, invalid
# UTF-8, batch arrays, unknown methods and endpoints, wrong content types,
# slowloris connections. After each group the server must still answer.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server SKILLD_MAX_BODY_BYTES=65536 SKILLD_CONNECTION_TIMEOUT_S=2
A=(-H "Authorization: Bearer $ADMIN")
SID=$(mcp_init "$ADMIN")
S=("${A[@]}" "${MCP_H[@]}" -H "Mcp-Session-Id: $SID")

alive() {
    req GET /healthz
    if [ "$STATUS" = 200 ]; then pass "server still serves after $1"; else fail "server still serves after $1" "status $STATUS"; fi
}

# --- /mcp ---
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"ping"'
expect_status "mcp: truncated JSON is 400" 400
expect_json "mcp: truncated JSON is -32700 with id null" 'j["error"]["code"]==-32700 and j["id"] is None'
req POST /mcp "${S[@]}" -d 'hello'
expect_json "mcp: garbage is -32700" 'j["error"]["code"]==-32700'
printf '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xc3\x28"}}' >"$TMP/badutf8"
req POST /mcp "${S[@]}" --data-binary @"$TMP/badutf8"
expect_json "mcp: invalid UTF-8 is -32700" 'j["error"]["code"]==-32700'
python3 -c 'print("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":" + "["*5000 + "]"*5000 + "}}")' >"$TMP/deep"
req POST /mcp "${S[@]}" --data-binary @"$TMP/deep"
expect_json "mcp: nesting 5000 deep is refused" 'j["error"]["code"]==-32700'
req POST /mcp "${S[@]}" -d '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]'
expect_status "mcp: batch array is 400" 400
expect_json "mcp: batch array is -32600" 'j["error"]["code"]==-32600'
req POST /mcp "${S[@]}" -d '[]'
expect_json "mcp: empty batch is -32600" 'j["error"]["code"]==-32600'
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":true,"method":"ping"}'
expect_json "mcp: boolean id is -32600" 'j["error"]["code"]==-32600'
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":["ping"]}'
expect_json "mcp: array method is -32600" 'j["error"]["code"]==-32600 and j["id"]==1'
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"debug_sleep","arguments":[]}}'
expect_json "mcp: array arguments is -32602" 'j["error"]["code"]==-32602'
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":"soon"}}}'
expect_json "mcp: wrong argument type is a tool error" 'j["result"]["isError"] is True and "invalid_input" in j["result"]["content"][0]["text"]'
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}'
expect_json "mcp: unknown method is -32601" 'j["error"]["code"]==-32601'
req POST /mcp "${A[@]}" -H "Mcp-Session-Id: $SID" -H 'Content-Type: text/plain' -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "mcp: text/plain body is 415" 415
req POST /mcp "${A[@]}" "${MCP_H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "mcp: no session header is 400" 400
req POST /mcp "${A[@]}" "${MCP_H[@]}" -H "Mcp-Session-Id: 00000000-0000-4000-8000-000000000000" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "mcp: unknown session is 404" 404
req POST /mcp "${S[@]}" -H "MCP-Protocol-Version: 1999-01-01" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "mcp: unsupported MCP-Protocol-Version is 400" 400
req POST /mcp "${S[@]}" -H "MCP-Protocol-Version: 2025-06-18" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "mcp: a supported MCP-Protocol-Version is fine" 200
req PUT /mcp "${S[@]}" -d '{}'
expect_status "mcp: PUT is 405" 405
header Allow | grep -q POST && pass "mcp: 405 lists the allowed methods" || fail "mcp: 405 lists the allowed methods" "$(header Allow)"
req GET /mcp "${A[@]}" -H "Mcp-Session-Id: $SID" -H 'Accept: application/json'
expect_status "mcp: GET without text/event-stream is 406" 406
alive "the /mcp battery"

# --- sizes ---
head -c 70000 /dev/zero | tr '\0' 'a' >"$TMP/big"
req POST /mcp "${S[@]}" --data-binary @"$TMP/big"
expect_status "mcp: body over the cap is 413" 413
expect_json "413 body is an error object" 'j["error"]["code"]=="too_large"'
req POST /v1/execute "${A[@]}" --data-binary @"$TMP/big"
expect_status "rest: body over the cap is 413" 413
req POST /v1/execute "${A[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/big"
expect_status "rest: chunked body over the cap is 413" 413
head -c 8000000 /dev/zero >"$TMP/huge"
req POST /mcp "${S[@]}" --data-binary @"$TMP/huge"
expect_status "mcp: 8 MB body is 413" 413
req POST /v1/execute "${A[@]}" -H 'Content-Length: 99999999999999999999' -d 'x'
[ "$STATUS" = 413 ] || [ "$STATUS" = 400 ] && pass "absurd Content-Length is refused" || fail "absurd Content-Length is refused" "status $STATUS"
alive "huge bodies"

# --- /v1 ---
req POST /v1/execute "${A[@]}" -d '{"skill":'
expect_status "rest: broken JSON is 400" 400
expect_json "rest: broken JSON names the problem" 'j["error"]["code"]=="invalid_json"'
req POST /v1/execute "${A[@]}" -d '[1,2]'
expect_status "rest: array body is 400" 400
req POST /v1/execute "${A[@]}" -d '{"skill":42,"input":{}}'
expect_status "rest: numeric skill is 400" 400
req POST /v1/execute "${A[@]}" -d '{"skill":"debug_sleep","input":"now"}'
expect_status "rest: string input is 400" 400
req POST /v1/execute "${A[@]}" -d '{"skill":"debug_sleep","input":{"ms":-5}}'
expect_status "rest: input failing the schema is 400" 400
expect_json "rest: schema failure is invalid_input" 'j["error"]["code"]=="invalid_input" and j["success"] is False'
req POST /v1/execute "${A[@]}" -d '{"skill":"../../etc/passwd","input":{}}'
expect_status "rest: path-like skill name is 400" 400
req POST /v1/execute "${A[@]}" -d '{"skill":"ghost","input":{}}'
expect_status "rest: unknown skill is 404" 404
# A long name of two-byte characters: its error message is cut at a cap
# (once inside a character, and the reply could not be built: SIGSEGV).
python3 -c 'import json; print(json.dumps({"skill": "\u00e9"*300, "input": {}}))' >"$TMP/longname"
req POST /v1/execute "${A[@]}" --data-binary @"$TMP/longname"
expect_status "rest: long multibyte skill name is 400" 400
expect_json "rest: long multibyte skill name is invalid_input" 'j["error"]["code"]=="invalid_input"'
python3 -c 'import json; print(json.dumps({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"skills_execute","arguments":{"skill":"\u00e9"*300,"input":{}}}}))' >"$TMP/longname_mcp"
req POST /mcp "${S[@]}" --data-binary @"$TMP/longname_mcp"
expect_json "mcp: long multibyte skill name is a tool error" 'j["id"]==7 and j["result"]["isError"] is True'
alive "long multibyte skill names"
req POST /v1/execute "${A[@]}" --data-binary @"$TMP/badutf8"
expect_status "rest: invalid UTF-8 is 400" 400
req POST /v1/execute "${A[@]}" --data-binary @"$TMP/deep"
expect_status "rest: deep nesting is 400" 400
req GET /v1/executions?limit=abc "${A[@]}"
expect_status "rest: bad limit is 400" 400
req GET /v1/executions/..%2F..%2Fetc "${A[@]}"
expect_status "rest: odd execution id is 404" 404
req GET /v1/nothing "${A[@]}"
expect_status "unknown endpoint is 404" 404
req DELETE /v1/skills "${A[@]}"
expect_status "wrong method on /v1/skills is 405" 405
req POST /v1/keys "${A[@]}" -d '{"name":"x","scopes":["skills:root"]}'
expect_status "unknown scope is 400" 400
req POST /v1/keys "${A[@]}" -d '{"scopes":["skills:read"]}'
expect_status "key without a name is 400" 400
alive "the /v1 battery"

# --- slowloris: connections that send headers byte by byte, or nothing ---
python3 - "$PORT" >"$TMP/slow.out" 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
socks = []
for i in range(20):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    socks.append(s)
closed = 0
for s in socks:
    s.settimeout(8)
    try:
        for _ in range(6):
            s.sendall(b"X-a: b\r\n")
            time.sleep(0.4)
        data = s.recv(100)
        if data == b"" or data.startswith(b"HTTP/1.1 408"):
            closed += 1
    except OSError:
        closed += 1
print("closed", closed)
PY
SLOW=$!
sleep 1
req GET /healthz
expect_status "server answers while slowloris connections are open" 200
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "MCP answers while slowloris connections are open" 200
# An idle connection (no bytes at all) is dropped after the timeout.
python3 - "$PORT" <<'PY' && pass "idle connection is closed by the server" || fail "idle connection is closed by the server" "still open"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
try:
    sys.exit(0 if s.recv(1) == b"" else 1)
except OSError:
    sys.exit(0)
PY
wait "$SLOW"
grep -q "^closed 20$" "$TMP/slow.out" && pass "every slowloris connection was dropped by the server" ||
    fail "every slowloris connection was dropped by the server" "$(cat "$TMP/slow.out")"
alive "slowloris"
stop_server && pass "server exits cleanly after the battery" || fail "server exits cleanly after the battery" "exit $?"
finish
