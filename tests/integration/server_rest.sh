#!/usr/bin/env bash
# REST flows against the real server: skills, execute, executions, keys,
# metrics, and a graceful stop that cancels a running call.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server
A=(-H "Authorization: Bearer $ADMIN")

req GET /v1/skills "${A[@]}"
expect_status "list skills" 200
expect_json "debug_sleep is listed with its schema" 'any(s["name"]=="debug_sleep" and s["inputSchema"]["type"]=="object" for s in j["skills"])'
req GET /v1/skills/debug_sleep "${A[@]}"
expect_json "one skill by name" 'j["name"]=="debug_sleep" and j["version"]=="1.0.0" and j["enabled"] is True'
req GET /v1/skills/debug_sleep@1.0.0 "${A[@]}"
expect_status "one skill by name@version" 200
req GET /v1/skills/debug_sleep@2.0.0 "${A[@]}"
expect_status "missing version is 404" 404
req GET /v1/skills/ghost "${A[@]}"
expect_status "missing skill is 404" 404
expect_json "404 body is an error object" 'j["error"]["code"]=="not_found"'

req POST /v1/execute "${A[@]}" -H 'Content-Type: application/json' -d '{"skill":"debug_sleep","input":{"ms":5}}'
expect_status "execute" 200
expect_json "execute returns the result and an execution id" 'j["success"] is True and j["slept"]==5 and len(j["executionId"])==36'
EXEC=$(json_get "$BODY" 'j["executionId"]')
req POST /v1/execute "${A[@]}" -d '{"skill":"debug_sleep","version":"1.0.0","input":{"ms":1}}'
expect_status "execute with a version" 200
req POST /v1/execute "${A[@]}" -d '{"skill":"debug_sleep","input":{"fail":true}}'
expect_status "a failing skill maps its code to a status (io_error: 500)" 500
expect_json "a failing skill returns success false with error code and message" 'j["success"] is False and j["error"]["code"]=="io_error" and j["error"]["message"]'
req POST /v1/execute "${A[@]}" -d '{"skill":"debug_sleep"}'
expect_status "input defaults to {}" 200

req GET "/v1/executions/$EXEC" "${A[@]}"
expect_json "the execution row" "j['id']=='$EXEC' and j['skill']=='debug_sleep' and j['status']=='success'"
req GET "/v1/executions?limit=2" "${A[@]}"
expect_json "executions are newest first and limited" 'len(j["executions"])==2 and j["executions"][0]["createdAt"]>=j["executions"][1]["createdAt"]'

req POST /v1/keys "${A[@]}" -d '{"name":"ci","scopes":["skills:read","skills:execute"]}'
expect_status "create a key" 201
expect_json "new key has a secret and scopes" 'j["secret"].startswith("skd_") and sorted(j["scopes"])==["skills:execute","skills:read"]'
NID=$(json_get "$BODY" 'j["id"]'); NSEC=$(json_get "$BODY" 'j["secret"]')
req GET /v1/skills -H "Authorization: Bearer $NSEC"
expect_status "the new key works" 200
req GET /v1/keys "${A[@]}"
expect_json "keys list has the key and no secrets" "any(k['id']=='$NID' for k in j['keys']) and 'secret' not in json.dumps(j)"
req POST /v1/keys "${A[@]}" -d '{"name":"csv","scopes":"skills:read"}'
expect_status "scopes may be a comma-separated string" 201
req DELETE "/v1/keys/$NID" "${A[@]}"
expect_status "revoke the key" 204
req GET /v1/skills -H "Authorization: Bearer $NSEC"
expect_status "the revoked key no longer works" 401

req GET /metrics "${A[@]}"
expect_status "metrics" 200
header Content-Type | grep -q '^text/plain; version=0.0.4' && pass "metrics content type" || fail "metrics content type" "$(header Content-Type)"
echo "$BODY" | grep -q '^skilld_executions_total{skill="debug_sleep",status="success"} 3$' && pass "metrics count executions by skill and status" || fail "metrics count executions by skill and status" "$BODY"
echo "$BODY" | grep -q '^skilld_executions_total{skill="debug_sleep",status="error"} 1$' && pass "metrics count failures" || fail "metrics count failures" "$BODY"
echo "$BODY" | grep -q '^skilld_http_requests_total{route="/v1/skills/{}",status="404"} 2$' && pass "metrics count requests by route and status" || fail "metrics count requests by route and status" "$BODY"
echo "$BODY" | grep -q '^skilld_execution_duration_seconds_count{skill="debug_sleep"} 4$' && pass "metrics have duration counts" || fail "metrics have duration counts" "$BODY"
echo "$BODY" | grep -q '^skilld_sandboxes_running [0-9]' && echo "$BODY" | grep -q '^skilld_outbound_rejected_total [0-9]' &&
    pass "metrics have sandbox and outbound gauges" || fail "metrics have sandbox and outbound gauges" "$BODY"
req GET /metrics
expect_status "metrics need a key" 401

# A long call does not block others, and a stop cancels it.
curl -sS -o "$TMP/long.out" -w '%{http_code}' "${A[@]}" -d '{"skill":"debug_sleep","input":{"ms":60000}}' "$URL/v1/execute" >"$TMP/long.code" &
LONG=$!
wait_in_flight "$ADMIN" 1 && pass "metrics show the call in flight" || fail "metrics show the call in flight" "never 1"
req GET /healthz
expect_status "other requests are served while a long call runs" 200
kill -0 "$LONG" 2>/dev/null && pass "the long call is still running" || fail "the long call is still running" "it ended"
stop_server; rc=$?
wait "$LONG"
[ "$rc" = 0 ] && pass "SIGTERM stops the server with status 0" || fail "SIGTERM stops the server with status 0" "exit $rc"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["error"]["code"]=="cancelled" else 1)' "$TMP/long.out" &&
    pass "the running call was cancelled and answered" || fail "the running call was cancelled and answered" "$(cat "$TMP/long.code") $(cat "$TMP/long.out")"
finish
