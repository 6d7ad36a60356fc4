#!/usr/bin/env bash
# Authentication, scopes, identity and DNS-rebinding protection against the
# real server: no token, wrong token, revoked key, missing scope, one key
# reading another's executions and sessions, bad Host and bad Origin.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server
[ -n "$ADMIN" ] && pass "first start prints an admin key" || fail "first start prints an admin key" "$(cat "$TMP/serve.out")"
grep -q '"Authorization": "Bearer ' "$TMP/serve.out" && grep -q "claude mcp add --transport http skilld $URL/mcp" "$TMP/serve.out" &&
    pass "first start prints a ready MCP client config" || fail "first start prints a ready MCP client config" "$(cat "$TMP/serve.out")"

req GET /healthz
expect_status "healthz needs no key" 200

req GET /v1/skills
expect_status "no token is 401" 401
[ "$(header WWW-Authenticate)" = 'Bearer realm="skilld"' ] && pass "401 carries WWW-Authenticate: Bearer" || fail "401 carries WWW-Authenticate: Bearer" "$(cat "$TMP/hdrs")"
expect_json "401 body is an error object" 'j["error"]["code"]=="unauthorized"'

req GET /v1/skills -H "Authorization: Bearer skd_0000_wrong"
expect_status "wrong token is 401" 401
header WWW-Authenticate | grep -q 'invalid_token' && pass "wrong token says invalid_token" || fail "wrong token says invalid_token" "$(header WWW-Authenticate)"
req GET /v1/skills -H "Authorization: Basic YWRtaW46YWRtaW4="
expect_status "Basic auth is 401" 401
req GET /v1/skills -H "Authorization: Bearer ${ADMIN}x"
expect_status "secret with a suffix is 401" 401
req GET /v1/skills -H "Authorization: Bearer $ADMIN"
expect_status "admin key lists skills" 200

read -r RID RSEC < <(new_key reader skills:read)
read -r XID XSEC < <(new_key runner skills:execute)
read -r AID ASEC < <(new_key alice skills:read,skills:execute)
read -r BID BSEC < <(new_key bob skills:read,skills:execute)

req POST /v1/execute -H "Authorization: Bearer $RSEC" -d '{"skill":"debug_sleep","input":{"ms":1}}'
expect_status "read-only key cannot execute (403)" 403
expect_json "forbidden names the scope" 'j["error"]["code"]=="forbidden" and "skills:execute" in j["error"]["message"]'
req GET /v1/skills -H "Authorization: Bearer $XSEC"
expect_status "execute-only key cannot list (403)" 403
req GET /v1/keys -H "Authorization: Bearer $ASEC"
expect_status "non-admin cannot list keys (403)" 403
req POST /v1/keys -H "Authorization: Bearer $ASEC" -d '{"name":"mine","scopes":["skills:admin"]}'
expect_status "non-admin cannot create keys (403)" 403

# Executions are per key.
req POST /v1/execute -H "Authorization: Bearer $ASEC" -d '{"skill":"debug_sleep","input":{"ms":1}}'
expect_status "alice executes" 200
EXEC=$(json_get "$BODY" 'j["executionId"]')
req GET "/v1/executions/$EXEC" -H "Authorization: Bearer $ASEC"
expect_status "alice reads her execution" 200
expect_json "execution row is alice's" "j['id']=='$EXEC'"
req GET "/v1/executions/$EXEC" -H "Authorization: Bearer $BSEC"
expect_status "bob cannot read alice's execution (404)" 404
req GET /v1/executions -H "Authorization: Bearer $BSEC"
expect_json "bob's history does not contain alice's run" "all(e['id']!='$EXEC' for e in j['executions'])"
req GET /v1/executions -H "Authorization: Bearer $ASEC"
expect_json "alice's history contains her run" "any(e['id']=='$EXEC' for e in j['executions'])"

# Files are per key: bob cannot read what alice wrote, by any path.
req POST /v1/execute -H "Authorization: Bearer $ASEC" -d '{"skill":"file_write","input":{"path":"secret.txt","content":"alice only"}}'
expect_status "alice writes a file" 200
req POST /v1/execute -H "Authorization: Bearer $ASEC" -d '{"skill":"file_read","input":{"path":"secret.txt"}}'
expect_json "alice reads her file" '"alice only" in json.dumps(j) and j["success"] is True'
req POST /v1/execute -H "Authorization: Bearer $BSEC" -d '{"skill":"file_read","input":{"path":"secret.txt"}}'
expect_status "bob cannot read alice's file (404 in his own workspace)" 404
for p in "../$(printf %s "$AID" | sha256sum | cut -c1-64)/secret.txt" "/etc/passwd" "../../skilld.db"; do
    req POST /v1/execute -H "Authorization: Bearer $BSEC" -d "{\"skill\":\"file_read\",\"input\":{\"path\":\"$p\"}}"
    if [ "$STATUS" -ge 400 ] && ! echo "$BODY" | grep -q "alice only"; then pass "bob cannot escape with $p"; else fail "bob cannot escape with $p" "$STATUS $BODY"; fi
done

# An MCP session belongs to the key that opened it.
SID=$(mcp_init "$ASEC")
[ -n "$SID" ] && pass "alice opens an MCP session" || fail "alice opens an MCP session" "no Mcp-Session-Id"
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $BSEC" -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
expect_status "bob cannot use alice's MCP session (404)" 404
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $ASEC" -H "Mcp-Session-Id: $SID" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"skills_executions","arguments":{}}}'
expect_json "skills_executions over MCP shows only alice's runs" "all(e['keyId']=='$AID' for e in j['result']['structuredContent']['executions'])"

# Revocation takes effect at once.
req DELETE "/v1/keys/$BID" -H "Authorization: Bearer $ADMIN"
expect_status "admin revokes bob (204)" 204
req GET /v1/skills -H "Authorization: Bearer $BSEC"
expect_status "revoked key is 401" 401
req DELETE "/v1/keys/nosuchkey" -H "Authorization: Bearer $ADMIN"
expect_status "revoking an unknown key is 404" 404
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $BSEC" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'
expect_status "revoked key cannot open an MCP session" 401

# DNS rebinding: bad Host and bad Origin are refused before auth.
req GET /v1/skills -H "Authorization: Bearer $ADMIN" -H "Host: evil.example:$PORT"
expect_status "bad Host is 403" 403
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $ADMIN" -H "Host: attacker.test" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "bad Host on /mcp is 403" 403
req POST /mcp "${MCP_H[@]}" -H "Authorization: Bearer $ADMIN" -H "Origin: http://evil.example" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}'
expect_status "bad Origin on /mcp is 403" 403
req GET /healthz -H "Origin: null"
expect_status "Origin null is 403" 403
req GET /v1/skills -H "Authorization: Bearer $ADMIN" -H "Host: localhost:$PORT" -H "Origin: http://localhost:3000"
expect_status "localhost Host and Origin are fine" 200
stop_server

# SKILLD_ANONYMOUS_KEY: requests without credentials act as that key; a
# wrong secret is still refused, and revoking the key ends it.
read -r NID NSEC < <(new_key anon skills:read)
start_server SKILLD_ANONYMOUS_KEY=$NID
req GET /v1/skills
expect_status "anonymous requests act as the configured key" 200
req POST /v1/execute -d '{"skill":"debug_sleep","input":{}}'
expect_status "the anonymous key keeps its scopes" 403
req GET /v1/skills -H "Authorization: Bearer skd_wrong"
expect_status "a wrong secret is still 401 with an anonymous key" 401
"$SKILLD" --data-dir "$DATA" keys revoke "$NID" >/dev/null
req GET /v1/skills
expect_status "revoking the anonymous key ends anonymous access" 401
stop_server

# Allow lists come from the configuration.
start_server SKILLD_ALLOWED_HOSTS=skills.example SKILLD_ALLOWED_ORIGINS=https://app.example
req GET /healthz -H "Host: skills.example"
expect_status "configured Host is allowed" 200
req GET /healthz
expect_status "127.0.0.1 is refused when not listed" 403
req GET /healthz -H "Host: skills.example" -H "Origin: https://app.example"
expect_status "configured Origin is allowed" 200
req GET /healthz -H "Host: skills.example" -H "Origin: https://app.example.evil"
expect_status "look-alike Origin is refused" 403
stop_server
finish
