#!/usr/bin/env bash
# Every transport takes the engine's one path (skd_engine_execute):
#   - a sandbox skill called over A2A is counted in /metrics and leaves a
#     run row exactly as the same call over REST does (the engine counts
#     and records, not the transport);
#   - a key without skills:execute gets the engine's refusal, the same
#     code and message, over REST, MCP (2025 sessions and the stateless
#     2026 revision), A2A and MCP over stdio;
#   - the product binary refuses test mode: the test fixtures are only in
#     the test build ($SKILLD_TEST_BIN).
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

D=$(mktemp -d "$TMP/prod.XXXXXX")
if SKILLD_TEST_SKILLS=true timeout 10 "$SKILLD" --data-dir "$D" serve --listen 127.0.0.1:0 \
    >/dev/null 2>"$TMP/prod.err"; then
    fail "the product refuses SKILLD_TEST_SKILLS" "it served"
elif grep -q "need the test build" "$TMP/prod.err"; then
    pass "the product refuses SKILLD_TEST_SKILLS"
else
    fail "the product refuses SKILLD_TEST_SKILLS" "$(head -c 300 "$TMP/prod.err")"
fi

start_server
read -r EID ESEC <<<"$(new_key runner skills:read,skills:execute)"
read -r RID RSEC <<<"$(new_key reader skills:read)"
E=(-H "Authorization: Bearer $ESEC" -H 'Content-Type: application/json')
R=(-H "Authorization: Bearer $RSEC" -H 'Content-Type: application/json')
ADM=(-H "Authorization: Bearer $ADMIN")

# ---- metrics and run rows: REST and A2A alike --------------------------
# execute_command's count (success) in the admin's /metrics.
count() {
    req GET /metrics "${ADM[@]}"
    printf '%s\n' "$BODY" | awk '/^skilld_executions_total\{skill="execute_command",status="success"\}/{print $2}'
}
# How many run rows key EID has for execute_command.
runs() {
    req GET /v1/runs "${E[@]}"
    json_get "$BODY" 'len([r for r in (j["runs"] if isinstance(j, dict) else j) if r["skill"]=="execute_command"])'
}
c0=$(count)
r0=$(runs)
req POST /v1/execute "${E[@]}" -d '{"skill":"execute_command","input":{"command":"true"}}'
expect_json "REST runs execute_command" 'j["success"] is True'
c1=$(count)
r1=$(runs)
req POST /a2a "${E[@]}" -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"data":{"skill":"execute_command","input":{"command":"true"}}}]}}}'
expect_json "A2A runs execute_command" "j['result']['task']['status']['state']=='TASK_STATE_COMPLETED'"
TASK=$(json_get "$BODY" 'j["result"]["task"]["id"]')
c2=$(count)
r2=$(runs)
if [ "$((${c1:-0} - ${c0:-0}))" = 1 ] && [ "$((${c2:-0} - ${c1:-0}))" = 1 ]; then
    pass "REST and A2A calls are each counted once in /metrics"
else
    fail "REST and A2A calls are each counted once in /metrics" "counts $c0 $c1 $c2"
fi
# REST: the sandbox run's row. A2A: the same row, and the task's own.
if [ "$((r1 - r0))" = 1 ] && [ "$((r2 - r1))" = 2 ]; then
    pass "REST and A2A calls leave the sandbox run's row (A2A its task's too)"
else
    fail "REST and A2A calls leave the sandbox run's row (A2A its task's too)" "runs $r0 $r1 $r2"
fi
req GET /v1/runs "${E[@]}"
expect_json "the A2A task's row is done" "any(r['id']=='$TASK' and r['state']=='done' for r in (j['runs'] if isinstance(j, dict) else j))"

# ---- a key without skills:execute, from every transport ----------------
WANT_CODE=forbidden
WANT_MSG="this API key lacks the skills:execute scope"
# An MCP tool error: isError, its text "code: message"; part 0 or 1 of it.
mcp_part() {
    json_get "$BODY" 'j["result"]["content"][0]["text"].split(": ", 1)['"$1"'] if j["result"]["isError"] else ""'
}
same_refusal() { # NAME CODE MESSAGE
    if [ "$2" = "$WANT_CODE" ] && [ "$3" = "$WANT_MSG" ]; then pass "$1"; else
        fail "$1" "code=$2 message=$3"; fi
}
req POST /v1/execute "${R[@]}" -d '{"skill":"debug_sleep","input":{"ms":1}}'
same_refusal "REST refuses it" "$(json_get "$BODY" 'j["error"]["code"]')" \
    "$(json_get "$BODY" 'j["error"]["message"]')"

SID=$(mcp_init "$RSEC")
req POST /mcp "${R[@]}" -H 'Accept: application/json, text/event-stream' -H "Mcp-Session-Id: $SID" \
    -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":1}}}'
same_refusal "MCP (2025 session) refuses it" \
    "$(mcp_part 0)" "$(mcp_part 1)"

req POST /mcp "${R[@]}" -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H 'Mcp-Method: tools/call' -H 'Mcp-Name: debug_sleep' \
    -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
same_refusal "MCP (2026 stateless) refuses it" \
    "$(mcp_part 0)" "$(mcp_part 1)"

req POST /a2a "${R[@]}" -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m2","parts":[{"data":{"skill":"debug_sleep","input":{"ms":1}}}]}}}'
same_refusal "A2A refuses it" \
    "$(json_get "$BODY" 'j["result"]["task"]["artifacts"][0]["parts"][0]["data"]["error"]["code"]')" \
    "$(json_get "$BODY" 'j["result"]["task"]["artifacts"][0]["parts"][0]["data"]["error"]["message"]')"

OUT=$(printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"debug_sleep","arguments":{"ms":1}}}' |
    SKILLD_TEST_SKILLS=true timeout 20 "$SKILLD_TEST_BIN" --data-dir "$DATA" mcp --key "$RID" 2>/dev/null |
    grep '"id":2' | head -1)
BODY=$OUT
same_refusal "MCP over stdio refuses it" \
    "$(mcp_part 0)" "$(mcp_part 1)"

stop_server
finish
