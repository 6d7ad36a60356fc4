#!/usr/bin/env bash
# MCP Streamable HTTP at /mcp against the real server, with curl: session
# life cycle, 202 for notifications, paging, JSON and SSE answers,
# progress, cancellation that stops the run, concurrency, GET stream,
# DELETE.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server SKILLD_MCP_PAGE_SIZE=2
A=(-H "Authorization: Bearer $ADMIN")

req POST /mcp "${A[@]}" "${MCP_H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
expect_status "initialize" 200
expect_json "initialize negotiates 2025-06-18" 'j["result"]["protocolVersion"]=="2025-06-18"'
SID=$(header Mcp-Session-Id)
[[ "$SID" =~ ^[0-9a-f-]{36}$ ]] && pass "initialize issues Mcp-Session-Id" || fail "initialize issues Mcp-Session-Id" "'$SID'"
header Content-Type | grep -q '^application/json' && pass "initialize answers JSON" || fail "initialize answers JSON" "$(header Content-Type)"
S=("${A[@]}" "${MCP_H[@]}" -H "Mcp-Session-Id: $SID" -H "MCP-Protocol-Version: 2025-06-18")

req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
expect_status "notification is 202" 202
[ -z "$BODY" ] && pass "202 has no body" || fail "202 has no body" "$BODY"
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":99,"result":{}}'
expect_status "a response message is 202" 202

req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
expect_json "first page has 2 tools and a cursor" 'len(j["result"]["tools"])==2 and "nextCursor" in j["result"]'
names=""
cursor=""
for _ in $(seq 1 64); do
    if [ -n "$cursor" ]; then p="{\"cursor\":\"$cursor\"}"; else p='{}'; fi
    req POST /mcp "${S[@]}" -d "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":$p}"
    names="$names $(json_get "$BODY" '" ".join(t["name"] for t in j["result"]["tools"])')"
    cursor=$(json_get "$BODY" 'j["result"].get("nextCursor","")')
    [ -z "$cursor" ] && break
done
req GET /v1/skills "${A[@]}"
want="skills_list skills_execute skills_executions $(json_get "$BODY" '" ".join(sorted(s["name"] for s in j["skills"]))')"
[ "$(echo $names)" = "$want" ] && pass "paging walks every tool once" || fail "paging walks every tool once" "$names != $want"
case " $names " in *" debug_sleep "*" file_read "*) pass "skills are tools of their own" ;; *) fail "skills are tools of their own" "$names" ;; esac

req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":5}}}'
header Content-Type | grep -q '^application/json' && pass "a call without progress answers JSON" || fail "a call without progress answers JSON" "$(header Content-Type)"
expect_json "tools/call result has content and structuredContent" 'j["id"]==4 and j["result"]["isError"] is False and j["result"]["structuredContent"]=={"success":True,"slept":5} and j["result"]["content"][0]["type"]=="text"'

req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"skills_execute","arguments":{"skill":"debug_sleep","input":{"ms":1}}}}'
expect_json "skills_execute over HTTP" 'j["result"]["structuredContent"]["slept"]==1'
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":"x"}}}'
expect_json "invalid input is isError with a clear message" 'j["result"]["isError"] is True and j["result"]["content"][0]["text"].startswith("invalid_input: ")'

# SSE with progress.
curl -sS -N -D "$TMP/sse.h" "${S[@]}" -d '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":300,"steps":3},"_meta":{"progressToken":"pt"}}}' "$URL/mcp" >"$TMP/sse.out"
grep -qi '^content-type: text/event-stream' "$TMP/sse.h" && pass "a call with a progress token streams SSE" || fail "a call with a progress token streams SSE" "$(cat "$TMP/sse.h")"
python3 - "$TMP/sse.out" <<'PY' && pass "SSE carries increasing progress then the result" || fail "SSE carries increasing progress then the result" "$(cat "$TMP/sse.out")"
import json, sys
events = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: ")]
prog = [e["params"]["progress"] for e in events if e.get("method") == "notifications/progress"]
assert all(e["params"]["progressToken"] == "pt" for e in events if "method" in e)
assert prog == [1, 2, 3], prog
assert events[-1]["id"] == 7 and events[-1]["result"]["structuredContent"]["slept"] == 300
PY
# The client that accepts only JSON gets JSON even with a token.
req POST /mcp "${A[@]}" -H 'Content-Type: application/json' -H 'Accept: application/json' -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":1},"_meta":{"progressToken":1}}}'
header Content-Type | grep -q '^application/json' && pass "Accept: application/json only gets JSON" || fail "Accept: application/json only gets JSON" "$(header Content-Type)"

# A long call blocks nobody, and notifications/cancelled stops it.
curl -sS -N "${S[@]}" -d '{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":60000,"report":false},"_meta":{"progressToken":"lp"}}}' "$URL/mcp" >"$TMP/long.out" &
LONG=$!
wait_in_flight "$ADMIN" 1 && pass "the long call runs" || fail "the long call runs" "not in flight"
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":9,"method":"ping"}'
expect_json "ping is answered while the long call runs" 'j["id"]==9 and j["result"]=={}'
kill -0 "$LONG" 2>/dev/null && pass "the long call is still running after the ping" || fail "the long call is still running after the ping" "it ended"
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"user"}}'
expect_status "cancel notification is 202" 202
wait "$LONG"
wait_in_flight "$ADMIN" 0 && pass "cancellation stopped the run" || fail "cancellation stopped the run" "still in flight"
grep -q '"id":"long"' "$TMP/long.out" && fail "a cancelled request gets no result" "$(cat "$TMP/long.out")" || pass "a cancelled request gets no result"
req GET "/v1/executions?limit=1" "${A[@]}"
expect_json "the audit row says cancelled" 'j["executions"][0]["errorCode"]=="cancelled"'

# GET opens the session's notification stream.
curl -sS -N -m 1 -D "$TMP/get.h" "${A[@]}" -H 'Accept: text/event-stream' -H "Mcp-Session-Id: $SID" "$URL/mcp" >/dev/null 2>&1
grep -q '^HTTP/1.1 200' "$TMP/get.h" && grep -qi '^content-type: text/event-stream' "$TMP/get.h" &&
    pass "GET /mcp opens an SSE stream" || fail "GET /mcp opens an SSE stream" "$(cat "$TMP/get.h")"
req GET /mcp "${A[@]}" -H 'Accept: text/event-stream'
expect_status "GET /mcp without a session is 400" 400

# Two sessions are independent; DELETE ends one.
SID2=$(mcp_init "$ADMIN")
[ -n "$SID2" ] && [ "$SID2" != "$SID" ] && pass "a second session gets its own id" || fail "a second session gets its own id" "$SID2"
req DELETE /mcp "${A[@]}" -H "Mcp-Session-Id: $SID2" -H "MCP-Protocol-Version: 1999-01-01"
expect_status "DELETE with an unsupported MCP-Protocol-Version is 400" 400
req DELETE /mcp "${A[@]}" -H "Mcp-Session-Id: $SID2"
expect_status "DELETE ends the session" 204
req POST /mcp "${A[@]}" "${MCP_H[@]}" -H "Mcp-Session-Id: $SID2" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "a deleted session is 404" 404
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "the other session lives on" 200
req POST /mcp "${S[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'
expect_status "initialize on an existing session header makes a new session" 200

# Stop during a streamed call: the call is cancelled and the server exits.
curl -sS -N "${S[@]}" -d '{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":60000},"_meta":{"progressToken":"x"}}}' "$URL/mcp" >"$TMP/stop.out" 2>&1 &
STREAM=$!
wait_in_flight "$ADMIN" 1
stop_server && pass "SIGTERM during a streamed call exits 0" || fail "SIGTERM during a streamed call exits 0" "exit $?"
wait "$STREAM"
finish
