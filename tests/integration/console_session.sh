#!/usr/bin/env bash
# The operator console's HTTP side through the real server (docs/console.md),
# without a browser: its embedded files and their headers, sign-in and the
# cookie's attributes (Secure behind an https public URL), what the cookie
# may and may not do (REST yes, MCP no; a state change only from the
# console's origin with the CSRF token), sign-out, and a revoked key's
# session. The browser tests are tests/node/console.test.mjs.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server SKILLD_PUBLIC_URL=https://skilld.example
read -r TID TSEC <<<"$(new_key tenant skills:read,skills:execute)"
A=(-H "Authorization: Bearer $ADMIN")

req GET /ui
expect_status "the console page is served without a key" 200
csp=$(header Content-Security-Policy)
case $csp in
*"default-src 'self'"*"frame-ancestors 'none'"*) pass "the page has a strict Content-Security-Policy" ;;
*) fail "the page has a strict Content-Security-Policy" "$csp" ;;
esac
[ "$(header X-Frame-Options)" = DENY ] && [ "$(header X-Content-Type-Options)" = nosniff ] &&
    pass "the page may not be framed or sniffed" || fail "the page may not be framed or sniffed" "$(cat "$TMP/hdrs")"
req GET /ui/app.js
[ "$STATUS" = 200 ] && [[ $(header Content-Type) == text/javascript* ]] && [ -n "$(header Content-Security-Policy)" ] &&
    pass "the script is served with its type and the policy" || fail "the script is served with its type and the policy" "$STATUS $(header Content-Type)"
req GET /ui/nothing.js
expect_status "a file the console does not have is 404" 404
req GET /ui/..%2fskilld.db
expect_status "a path outside the console's files is 404" 404

# Sign-in.
req POST /ui/session -d '{"key":"skd_nope_nope"}'
expect_status "a wrong key does not sign in" 401
req POST /ui/session -d "{\"key\":\"$TSEC\"}"
expect_status "a key without skills:admin does not sign in" 403
req POST /ui/session -H 'Origin: https://evil.example' -d "{\"key\":\"$ADMIN\"}"
expect_status "a sign-in from another origin is refused" 403
req POST /ui/session -d "{\"key\":\"$ADMIN\"}"
expect_status "the admin key signs in" 200
CSRF=$(json_get "$BODY" 'j["csrf"]')
cookie=$(header Set-Cookie)
TOKEN=$(sed -n 's/^skd_session=\([0-9a-f]*\);.*/\1/p' <<<"$cookie")
case $cookie in
*"; Path=/; Max-Age=28800; HttpOnly; SameSite=Strict; Secure") pass "the cookie is HttpOnly, SameSite=Strict, expiring, and Secure behind https" ;;
*) fail "the cookie is HttpOnly, SameSite=Strict, expiring, and Secure behind https" "$cookie" ;;
esac
[ ${#TOKEN} = 64 ] && [ ${#CSRF} = 64 ] && pass "the session and CSRF tokens are 256-bit" || fail "the session and CSRF tokens are 256-bit" "${#TOKEN} ${#CSRF}"
# Stop before the store is read by another client: its digest, never the token.
stop_server
stored=$(store_sql "SELECT id_sha256 || ' ' || key_id || ' ' || csrf FROM ui_sessions")
if [ "$stored" = "$(printf '%s' "$TOKEN" | sha256sum | cut -c1-64) $(cut -d_ -f2 <<<"$ADMIN") $CSRF" ]; then
    pass "the store keeps the token's digest, never the token"
else
    fail "the store keeps the token's digest, never the token" "$stored"
fi
start_server SKILLD_PUBLIC_URL=https://skilld.example
C=(-H "Cookie: skd_session=$TOKEN")
O=(-H "Origin: http://127.0.0.1:$PORT")

req GET /ui/session "${C[@]}"
expect_json "the session survives a restart (it is in the store) and says who it is" "j['keyName']=='admin' and j['csrf']=='$CSRF'"
req GET /v1/keys "${C[@]}"
expect_status "the cookie reads the REST API" 200
req POST /mcp "${C[@]}" "${MCP_H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_status "the cookie is no credential for MCP" 401
req POST /v1/keys "${C[@]}" "${O[@]}" -d '{"name":"no-token"}'
expect_status "a state change without the CSRF token is refused" 403
if [ "${CSRF: -1}" = 0 ]; then BAD=${CSRF%?}1; else BAD=${CSRF%?}0; fi # one character off
req POST /v1/keys "${C[@]}" "${O[@]}" -H "X-CSRF-Token: $BAD" -d '{"name":"bad-token"}'
expect_status "a state change with a wrong CSRF token is refused" 403
req POST /v1/keys "${C[@]}" -H "X-CSRF-Token: $CSRF" -d '{"name":"no-origin"}'
expect_status "a state change without an Origin is refused" 403
req POST /v1/keys "${C[@]}" -H "Origin: http://localhost:$PORT" -H "X-CSRF-Token: $CSRF" -d '{"name":"other-origin"}'
expect_status "a state change from another origin of the same host is refused" 403
req POST /v1/keys "${C[@]}" "${O[@]}" -H "X-CSRF-Token: $CSRF" -d '{"name":"made-by-cookie"}'
expect_status "a state change from the console's origin with its token is done" 201
req GET /v1/keys "${A[@]}"
expect_json "only that one made a key" "sorted(k['name'] for k in j['keys'] if k['name'] not in ('admin','tenant'))==['made-by-cookie']"
req GET /v1/keys -H "Cookie: skd_session=${TOKEN%?}x"
expect_status "a cookie that is not a token is refused" 401

# Sign-out, and a revoked key's session.
req DELETE /ui/session "${C[@]}" "${O[@]}" -H "X-CSRF-Token: $CSRF"
expect_status "sign-out" 204
[[ $(header Set-Cookie) == "skd_session=; Path=/; Max-Age=0;"* ]] && pass "sign-out clears the cookie" || fail "sign-out clears the cookie" "$(header Set-Cookie)"
req GET /v1/keys "${C[@]}"
expect_status "the cookie is dead after sign-out" 401
read -r SID SSEC <<<"$(new_key second skills:read,skills:admin)"
req POST /ui/session -d "{\"key\":\"$SSEC\"}"
TOKEN2=$(sed -n 's/^skd_session=\([0-9a-f]*\);.*/\1/p' <<<"$(header Set-Cookie)")
req GET /v1/keys -H "Cookie: skd_session=$TOKEN2"
expect_status "a second admin's session works" 200
req DELETE "/v1/keys/$SID" "${A[@]}"
req GET /v1/keys -H "Cookie: skd_session=$TOKEN2"
expect_status "revoking its key ends the session at once" 401
if stop_server; then pass "the server stops cleanly"; else fail "the server stops cleanly" "$(tail -5 "$TMP/serve.err")"; fi
finish
