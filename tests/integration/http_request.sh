#!/usr/bin/env bash
# http_request against the fixture server (in a private network namespace):
# byte caps counted after decompression (plain, chunked, gzip bomb), one
# deadline over a trickling server and a silent one, dropped request
# headers, header injection, methods and bodies, binary bodies as base64.
source "$(dirname "$0")/../fixtures/net/netenv.sh"
source "$(dirname "$0")/../lib.sh"
net_start || { fail setup "network namespace set-up failed"; finish; }

req() { run_skill http_request "$1"; }
jq_() { json_get "$1" "$2"; }

out=$(req "{\"url\":\"$APP_URL/text\"}")
check "plain GET" test "$(jq_ "$out" 'j["body"]')" = "hello from the fixture"
check "status text" test "$(jq_ "$out" 'j["statusText"]')" = OK
check "response headers" test "$(jq_ "$out" 'j["headers"]["content-type"]')" = text/plain
check "final url" test "$(jq_ "$out" 'j["url"]')" = "$APP_URL/text"
check "durationMs present" test "$(jq_ "$out" 'isinstance(j["durationMs"], int)')" = true

# --- byte caps ------------------------------------------------------------
out=$(SKILLS_MAX_HTTP_RESPONSE_BYTES=1000 req "{\"url\":\"$APP_URL/big?n=5000000\"}")
check "plain body capped at the limit" test "$(jq_ "$out" '[len(j["body"]), j["truncated"]]')" = "[1000, true]"
out=$(SKILLS_MAX_HTTP_RESPONSE_BYTES=1000 req "{\"url\":\"$APP_URL/big?n=1000\"}")
check "body exactly at the limit is whole" test "$(jq_ "$out" '[len(j["body"]), j["truncated"]]')" = "[1000, false]"
out=$(SKILLS_MAX_HTTP_RESPONSE_BYTES=5000 req "{\"url\":\"$APP_URL/chunked?n=10000000\"}")
check "chunked body capped" test "$(jq_ "$out" '[len(j["body"]), j["truncated"]]')" = "[5000, true]"
req "{\"url\":\"$APP_URL/gzipbomb\"}" >"$TMP/bomb.json"
check "gzip bomb stops at the default cap after decompression" test "$(python3 -c '
import base64, json, sys
j = json.load(open(sys.argv[1]))
b = base64.b64decode(j["body_base64"])
print(len(b), set(b) == {0}, j["truncated"])' "$TMP/bomb.json")" = "256000 True True"
out=$(req "{\"url\":\"$APP_URL/big?n=100000\",\"maxBytes\":10}")
check "maxBytes lowers the cap" test "$(jq_ "$out" '[j["body"], j["truncated"]]')" = '["aaaaaaaaaa", true]'
out=$(SKILLS_MAX_HTTP_RESPONSE_BYTES=100 req "{\"url\":\"$APP_URL/big?n=100000\",\"maxBytes\":100000}")
check "maxBytes cannot raise the administrator's cap" test "$(jq_ "$out" 'len(j["body"])')" = 100

# --- deadlines ------------------------------------------------------------
out=$(req "{\"url\":\"$APP_URL/trickle\",\"timeoutMs\":1500}")
check "trickling server past the deadline" test "$(code_of "$out")" = timeout
out=$(req "{\"url\":\"$APP_URL/silent\",\"timeoutMs\":1000}")
check "silent server" test "$(code_of "$out")" = timeout
out=$(SKILLS_HTTP_TIMEOUT_MS=800 req "{\"url\":\"$APP_URL/silent\",\"timeoutMs\":600000}")
check "timeoutMs cannot extend the administrator's deadline" test "$(jq_ "$out" '[j["error"]["code"], "800 ms" in j["error"]["message"]]')" = '["timeout", true]'
out=$(SKILLS_HTTP_TIMEOUT_MS=800 run_skill web_fetch "{\"url\":\"$APP_URL/silent\",\"timeoutMs\":600000}")
check "web_fetch deadline" test "$(jq_ "$out" '[j["error"]["code"], "800 ms" in j["error"]["message"]]')" = '["timeout", true]'

# --- request headers ---------------------------------------------------------
out=$(req "{\"url\":\"$APP_URL/echo\",\"headers\":{\"X-Test\":\"yes\",\"Cookie\":\"a=b\",\"Authorization\":\"Bearer s\",\"Host\":\"evil\",\"Proxy-Authorization\":\"x\",\"Connection\":\"close\",\"content-length\":\"5\",\"Set-Cookie\":\"c=d\"}}")
seen=$(jq_ "$out" 'json.loads(j["body"])["headers"]')
check "allowed header sent" test "$(json_get "$seen" 'j.get("x-test")')" = yes
for h in cookie authorization proxy-authorization set-cookie; do
    check "header $h dropped" test "$(json_get "$seen" "j.get('$h', 'absent')")" = absent
done
check "host header not overridden" test "$(json_get "$seen" 'j.get("host")')" = "$APP:$APP_PORT"
check "dropped headers reported" test "$(jq_ "$out" 'len(j["droppedHeaders"])')" = 7
out=$(SKILLS_HTTP_DROP_HEADERS=x-secret req "{\"url\":\"$APP_URL/echo\",\"headers\":{\"X-Secret\":\"1\",\"Cookie\":\"a=b\"}}")
seen=$(jq_ "$out" 'json.loads(j["body"])["headers"]')
check "drop list is configurable" test "$(json_get "$seen" '[j.get("x-secret","absent"), j.get("cookie")]')" = '["absent", "a=b"]'
out=$(req "{\"url\":\"$APP_URL/echo\",\"headers\":{\"X-A\":\"1\\r\\nX-Injected: 1\"}}")
check "CRLF in a header value refused" test "$(code_of "$out")" = invalid_input
out=$(req "{\"url\":\"$APP_URL/echo\",\"headers\":{\"Bad Name\":\"1\"}}")
check "bad header name refused" test "$(code_of "$out")" = invalid_input

# headers set for one origin do not follow a redirect to another
export SKILLS_OUTBOUND_RESOLVE="other.test:$APP_PORT:$APP"
out=$(req "{\"url\":\"$APP_URL/redirect?to=/echo\",\"headers\":{\"X-Secret\":\"s1\",\"Accept\":\"text/x-a\"}}")
check "same-origin redirect keeps headers" test "$(jq_ "$out" '[json.loads(j["body"])["headers"].get(h) for h in ("x-secret","accept")]')" = '["s1", "text/x-a"]'
out=$(req "{\"url\":\"$APP_URL/redirect?to=http%3A%2F%2Fother.test%3A$APP_PORT%2Fecho\",\"headers\":{\"X-Secret\":\"s1\",\"Accept\":\"text/x-a\"}}")
check "cross-origin redirect drops secrets, keeps Accept" test "$(jq_ "$out" '[json.loads(j["body"])["headers"].get(h) for h in ("x-secret","accept","host")]')" = "[null, \"text/x-a\", \"other.test:$APP_PORT\"]"
unset SKILLS_OUTBOUND_RESOLVE

# --- methods and bodies --------------------------------------------------------
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"POST\",\"body\":\"hi there\"}")
check "POST body" test "$(jq_ "$out" 'json.loads(j["body"])["body"]')" = "hi there"
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"PUT\",\"body_base64\":\"AAECAw==\"}")
check "PUT body_base64" test "$(jq_ "$out" '[json.loads(j["body"])["method"], json.loads(j["body"])["body"]]')" = '["PUT", "\u0000\u0001\u0002\u0003"]'
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"PATCH\",\"body\":\"p\"}")
check "PATCH" test "$(jq_ "$out" 'json.loads(j["body"])["method"]')" = PATCH
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"DELETE\"}")
check "DELETE" test "$(jq_ "$out" 'json.loads(j["body"])["method"]')" = DELETE
out=$(req "{\"url\":\"$APP_URL/text\",\"method\":\"HEAD\"}")
check "HEAD has no body" test "$(jq_ "$out" '[j["status"], j["body"]]')" = '[200, ""]'
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"GET\",\"body\":\"x\"}")
check "GET with a body refused" test "$(code_of "$out")" = invalid_input
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"TRACE\"}")
check "TRACE refused" test "$(code_of "$out")" = invalid_input
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"POST\",\"body_base64\":\"***\"}")
check "bad base64 refused" test "$(code_of "$out")" = invalid_input
# '=' inside the text, not as padding: EVP_DecodeBlock took it for zero bits.
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"POST\",\"body_base64\":\"A=B=\"}")
check "'=' inside base64 refused" test "$(code_of "$out")" = invalid_input
out=$(req "{\"url\":\"$APP_URL/echo\",\"method\":\"POST\",\"body_base64\":\"====\"}")
check "base64 of padding only refused" test "$(code_of "$out")" = invalid_input
out=$(req "{\"url\":\"$APP_URL/redirect?code=303&to=/echo\",\"method\":\"POST\",\"body\":\"x\"}")
check "303 after POST continues as GET" test "$(jq_ "$out" 'json.loads(j["body"])["method"]')" = GET
out=$(req "{\"url\":\"$APP_URL/redirect?code=307&to=/echo\",\"method\":\"POST\",\"body\":\"keep\"}")
check "307 keeps method and body" test "$(jq_ "$out" '[json.loads(j["body"])["method"], json.loads(j["body"])["body"]]')" = '["POST", "keep"]'

# --- status and binary ----------------------------------------------------------
out=$(req "{\"url\":\"$APP_URL/status/404\"}")
check "404 is an answer, not an error" test "$(jq_ "$out" '[j["success"], j["status"], j["statusText"]]')" = '[true, 404, "Not Found"]'
out=$(req "{\"url\":\"$APP_URL/binary\"}")
check "binary body as base64" test "$(jq_ "$out" '["body" in j, __import__("base64").b64decode(j["body_base64"]) == bytes(range(256))*4]')" = '[false, true]'
out=$(req "{\"url\":\"http://$APP:1/\"}")
check "connection refused is a network error" test "$(code_of "$out")" = network_error
out=$(req '{"url":"http://unresolvable.invalid/"}')
check "unresolvable name is a network error" test "$(code_of "$out")" = network_error
finish
