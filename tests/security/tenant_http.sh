#!/usr/bin/env bash
# Hostile tenants against the real server (issue 12, parts 4 and 5): each
# case asserts the refusal or the bound, and that nothing else changed.
#   - unauthenticated 4 MB bodies are answered 401 before they are read:
#     RSS stays bounded and an authenticated client is served meanwhile;
#   - 1,000 idle keep-alive connections neither lock new clients out nor
#     cost much memory; past the cap the longest-idle connection goes;
#   - headers and bodies that trickle in are cut off by their timeouts;
#   - a key over its rate limit gets 429 with Retry-After (REST, MCP, A2A),
#     other keys are untouched;
#   - a client that hangs up kills its running sandbox (REST and MCP); an
#     idle SSE stream still gets its keep-alive;
#   - another key's private skill name is absent from /metrics and from the
#     executions a key can list; skilld exec leaves an audit row.
# The socket work is in tenant_http.py.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../integration/server_common.sh"
PY="$(dirname "$0")/tenant_http.py"
client() { python3 "$PY" "$@"; }
# fresh [ENV=VALUE...]: a server on a new DATA_DIR (so it prints an admin key).
fresh() { rm -rf "$TMP/data"; start_server "$@"; [ -n "$ADMIN" ] || fail "server starts" "$(tail -5 "$TMP/serve.err")"; }
j() { json_get "$1" "$2"; }
MIB=1024 # kB per MiB, RSS is read in kB

# --- auth before body; idle connections ------------------------------------
fresh SKILLD_HEADER_TIMEOUT_S=300 SKILLD_CONNECTION_TIMEOUT_S=300
read -r RID RSEC < <(new_key reader skills:read)

out=$(client unauth_flood "$PORT" "$SRV_PID" "$RSEC" 200 4000000)
echo "measured: unauthenticated flood: $out"
[ "$(j "$out" 'j["unauth"]["other"]')" = 0 ] && [ "$(j "$out" 'j["unauth"]["401"]')" -ge 1 ] &&
    pass "unauthenticated bodies get 401 (or a closed connection), never anything else" ||
    fail "unauthenticated bodies get 401 (or a closed connection), never anything else" "$out"
[ "$(j "$out" 'j["grow_kb"]')" -lt $((64 * MIB)) ] &&
    pass "200 unauthenticated 4 MB bodies grow RSS by less than 64 MiB" ||
    fail "200 unauthenticated 4 MB bodies grow RSS by less than 64 MiB" "$out"
[ "$(j "$out" 'j["authed"]["ok"]')" = 200 ] &&
    pass "an authenticated client's 200 calls all succeed during the flood" ||
    fail "an authenticated client's 200 calls all succeed during the flood" "$out"
req GET /metrics -H "Authorization: Bearer $ADMIN"
echo "$BODY" | grep -q '^skilld_http_requests_total{route="/v1/execute",status="401"} 200$' &&
    pass "each refused request is counted as a 401" || fail "each refused request is counted as a 401" "$(echo "$BODY" | grep execute)"

out=$(client idle_hold "$PORT" "$SRV_PID" "$RSEC" 1000 200)
echo "measured: 1000 idle connections: $out"
[ "$(j "$out" 'j["bad"]')" = 0 ] && python3 -c "import sys; sys.exit(0 if $(j "$out" 'j["p50_ms"]') < 10 else 1)" &&
    pass "with 1000 idle connections new clients are served at once (p50 < 10 ms)" ||
    fail "with 1000 idle connections new clients are served at once (p50 < 10 ms)" "$out"
[ "$(j "$out" 'j["rss_after_kb"] - j["rss0_kb"]')" -lt $((64 * MIB)) ] &&
    pass "1000 idle connections cost less than 64 MiB of RSS" ||
    fail "1000 idle connections cost less than 64 MiB of RSS" "$out"
[ "$(j "$out" 'j["alive"]')" = 1000 ] && pass "below the cap no idle connection is closed" ||
    fail "below the cap no idle connection is closed" "$out"
stop_server

# --- the cap closes the longest-idle connection; timeouts ------------------
fresh SKILLD_MAX_CONNECTIONS=20 SKILLD_HEADER_TIMEOUT_S=3 SKILLD_BODY_TIMEOUT_S=3 \
    SKILLD_CONNECTION_TIMEOUT_S=60
read -r RID RSEC < <(new_key reader skills:read)
out=$(client cap_evict "$PORT" "$RSEC" 20)
[ "$(j "$out" '[j["status"], j["oldest_open"], j["newest_open"], j["open"]]')" = '[200, false, true, 19]' ] &&
    pass "at the cap a new client is served and only the longest-idle connection is closed" ||
    fail "at the cap a new client is served and only the longest-idle connection is closed" "$out"
out=$(client slow_headers "$PORT" 0.5 12)
python3 -c "import json,sys; c=json.loads(sys.argv[1])['closed_after_s']; sys.exit(0 if c is not None and 2.5 <= c <= 8 else 1)" "$out" &&
    pass "headers trickling in are cut off by the header timeout (3 s)" ||
    fail "headers trickling in are cut off by the header timeout (3 s)" "$out"
out=$(client slow_body "$PORT" "$RSEC" 0.5 12)
python3 -c "import json,sys; c=json.loads(sys.argv[1])['closed_after_s']; sys.exit(0 if c is not None and 2.5 <= c <= 8 else 1)" "$out" &&
    pass "a body trickling in is cut off by the body timeout (3 s)" ||
    fail "a body trickling in is cut off by the body timeout (3 s)" "$out"
req GET /healthz
expect_status "the server still answers after the timeouts" 200
stop_server

# --- rate limit -------------------------------------------------------------
# Rate 1/s, burst 3: burn KEY spends the burst in one curl (one connection,
# a few ms), so the next request comes long before a token is back (1 s).
fresh SKILLD_RATE_LIMIT_PER_KEY=1 SKILLD_RATE_LIMIT_BURST=3
burn() { curl -sS -o /dev/null -o /dev/null -o /dev/null -w '%{http_code} ' -H "Authorization: Bearer $1" "$URL/v1/skills" "$URL/v1/skills" "$URL/v1/skills"; }
read -r AID ASEC < <(new_key alice skills:read,skills:execute)
read -r BID BSEC < <(new_key bob skills:read,skills:execute)
read -r CID CSEC < <(new_key carol skills:read,skills:execute)
read -r DID DSEC < <(new_key dave skills:read,skills:execute)
codes=$(burn "$ASEC")
[ "$codes" = "200 200 200 " ] && pass "a key within its burst is served" || fail "a key within its burst is served" "$codes"
req GET /v1/skills -H "Authorization: Bearer $ASEC"
expect_status "past its burst a key gets 429 (REST)" 429
expect_json "REST 429 is the busy error with the setting named" 'j["error"]["code"]=="busy" and "SKILLD_RATE_LIMIT_PER_KEY" in j["error"]["message"]'
RA=$(header Retry-After)
[ -n "$RA" ] && [ "$RA" -ge 1 ] && pass "REST 429 carries Retry-After" || fail "REST 429 carries Retry-After" "'$RA'"
req GET /v1/skills -H "Authorization: Bearer $BSEC"
expect_status "another key is not limited by the first one's requests" 200
burn "$CSEC" >/dev/null
req POST /mcp -H "Authorization: Bearer $CSEC" "${MCP_H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "past its burst a key gets 429 over MCP" 429
expect_json "MCP 429 is a JSON-RPC error" 'j["jsonrpc"]=="2.0" and j["error"]["code"]==-32000 and j["error"]["data"]["code"]=="busy" and j["error"]["data"]["retryAfter"]>=1'
[ -n "$(header Retry-After)" ] && pass "MCP 429 carries Retry-After" || fail "MCP 429 carries Retry-After" ""
burn "$DSEC" >/dev/null
req POST /a2a -H "Authorization: Bearer $DSEC" -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}'
expect_status "past its burst a key gets 429 over A2A" 429
expect_json "A2A 429 is a JSON-RPC error" 'j["error"]["code"]==-32000 and j["error"]["data"]["code"]=="busy"'
[ -n "$(header Retry-After)" ] && pass "A2A 429 carries Retry-After" || fail "A2A 429 carries Retry-After" ""
sleep "${RA:-1}"
req GET /v1/skills -H "Authorization: Bearer $ASEC"
expect_status "after Retry-After seconds the key is served again" 200
stop_server

# --- hang-ups kill their sandbox ---------------------------------------------
fresh
M=30.$((1000 + RANDOM % 9000))1
out=$(client hangup_rest "$PORT" "$ADMIN" "$M")
python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r['started'] and r['gone_after_s'] is not None and r['gone_after_s'] < 2 else 1)" "$out" &&
    pass "a REST client that hangs up has its sleep 30 killed within 2 s" ||
    fail "a REST client that hangs up has its sleep 30 killed within 2 s" "$out"
echo "measured: REST hang-up: $out"
SID=$(mcp_init "$ADMIN")
M=30.$((1000 + RANDOM % 9000))2
out=$(client hangup_mcp "$PORT" "$ADMIN" "$SID" "$M")
python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r['started'] and r['gone_after_s'] is not None and r['gone_after_s'] < 2 else 1)" "$out" &&
    pass "an MCP client that hangs up has its sleep 30 killed within 2 s" ||
    fail "an MCP client that hangs up has its sleep 30 killed within 2 s" "$out"
# An idle SSE stream parks its connection; the watcher wakes it for the
# keep-alive comment (every 15 s), so proxies and clients keep it open.
out=$(client sse_keepalive "$PORT" "$ADMIN" "$SID" 17)
[ "$(j "$out" '[j["status"], j["keepalive"]]')" = '["HTTP/1.1 200 OK", true]' ] &&
    pass "an idle SSE stream gets its keep-alive comment" || fail "an idle SSE stream gets its keep-alive comment" "$out"
wait_in_flight "$ADMIN" 0 && pass "no call is left in flight after the hang-ups" || fail "no call is left in flight after the hang-ups" "calls still in flight"
req POST /v1/execute -H "Authorization: Bearer $ADMIN" -d '{"skill":"execute_command","input":{"command":"true"}}'
expect_status "the server runs sandboxes as before" 200

# --- no tenant learns about another -----------------------------------------
read -r AID ASEC < <(new_key alice skills:read,skills:execute)
read -r BID BSEC < <(new_key bob skills:read,skills:execute)
SECRET_NAME=bobsecret$((RANDOM % 100000))
req POST /v1/skills -H "Authorization: Bearer $BSEC" -d "{\"name\":\"$SECRET_NAME\",\"version\":\"1.0.0\",\"description\":\"private\",\"inputSchema\":{\"type\":\"object\"},\"run\":{\"command\":[\"/bin/echo\",\"{}\"]}}"
expect_status "bob registers a private skill" 201
req POST /v1/execute -H "Authorization: Bearer $BSEC" -d "{\"skill\":\"$SECRET_NAME\",\"input\":{}}"
expect_status "bob runs it" 200
BEXEC=$(j "$BODY" 'j["executionId"]')
req POST /v1/execute -H "Authorization: Bearer $ASEC" -d '{"skill":"execute_command","input":{"command":"true"}}'
AEXEC=$(j "$BODY" 'j["executionId"]')
req GET /metrics -H "Authorization: Bearer $ASEC"
expect_status "alice reads /metrics" 200
echo "$BODY" | grep -q "$SECRET_NAME" && fail "bob's private skill name is absent from alice's /metrics" "$(echo "$BODY" | grep "$SECRET_NAME")" ||
    pass "bob's private skill name is absent from alice's /metrics"
echo "$BODY" | grep -q '^skilld_executions_total{skill="execute_command",status="success"} [1-9]' &&
    pass "alice still sees the built-in skills' counters" || fail "alice still sees the built-in skills' counters" "$BODY"
req GET /metrics -H "Authorization: Bearer $BSEC"
echo "$BODY" | grep -q "^skilld_executions_total{skill=\"$SECRET_NAME\",status=\"success\"} 1$" &&
    pass "bob sees his own skill's counter" || fail "bob sees his own skill's counter" "$(echo "$BODY" | grep executions_total)"
req GET /metrics -H "Authorization: Bearer $ADMIN"
echo "$BODY" | grep -q "skill=\"$SECRET_NAME\"" && pass "skills:admin sees every label" || fail "skills:admin sees every label" ""
req GET /v1/executions -H "Authorization: Bearer $ASEC"
expect_json "alice's executions hold hers and none of bob's" "any(r['id']=='$AEXEC' for r in j['executions']) and not any(r['id']=='$BEXEC' or r['skill']=='$SECRET_NAME' for r in j['executions'])"
req GET "/v1/executions/$BEXEC" -H "Authorization: Bearer $ASEC"
expect_status "bob's execution id is not found for alice" 404
req GET "/v1/executions?key=$BID" -H "Authorization: Bearer $ASEC"
expect_status "alice may not list bob's executions" 403
req GET "/v1/executions?key=$BID" -H "Authorization: Bearer $ADMIN"
expect_json "skills:admin lists bob's executions by key" "any(r['id']=='$BEXEC' for r in j['executions'])"
SID=$(mcp_init "$ASEC")
req POST /mcp -H "Authorization: Bearer $ASEC" "${MCP_H[@]}" -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"skills_executions","arguments":{"limit":500}}}'
echo "$BODY" | grep -q "$SECRET_NAME\|$BEXEC" && fail "MCP skills_executions shows alice none of bob's" "${BODY:0:300}" ||
    pass "MCP skills_executions shows alice none of bob's"

"$SKILLD" --data-dir "$DATA" exec --key "$AID" -- /bin/true >/dev/null 2>"$TMP/exec.err" &&
    pass "skilld exec runs" || fail "skilld exec runs" "$(cat "$TMP/exec.err")"
req GET "/v1/executions?limit=5" -H "Authorization: Bearer $ASEC"
expect_json "skilld exec leaves an audit row for its key" 'j["executions"][0]["skill"]=="exec" and j["executions"][0]["status"]=="success"'
stop_server
finish
