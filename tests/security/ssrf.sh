#!/usr/bin/env bash
# SSRF battery for the outbound guard (issue 4). Runs in a network namespace
# of its own whose loopback carries every forbidden address; a catch-all
# listener on [::]:8111 records any connection that reaches one of them.
# Each case asserts the refusal code AND that the listener saw nothing; two
# positive controls prove the listener does see connections the
# administrator opened.
source "$(dirname "$0")/../fixtures/net/netenv.sh"
source "$(dirname "$0")/../lib.sh"
net_start || { fail setup "network namespace set-up failed"; finish; }
P=$CATCH_PORT

enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
json_in() { python3 -c 'import json,sys; print(json.dumps({"url": sys.argv[1]}))' "$1"; }

# refused NAME SKILL URL [CODES...]: the call fails with one of CODES
# (default blocked_address) and no connection reached the listener.
refused() {
    local name=$1 skill=$2 url=$3; shift 3
    local codes=" ${*:-blocked_address} " before after out code
    before=$(caught)
    out=$(run_skill "$skill" "$(json_in "$url")")
    after=$(caught)
    code=$(code_of "$out")
    if [ "$after" != "$before" ]; then
        fail "$name" "a connection reached the forbidden listener for $url"
    elif [[ "$codes" != *" $code "* ]]; then
        fail "$name" "expected${codes}got '$code' for $url: $(echo "$out" | tr -d '\n') $(tail -n 2 "$TMP/stderr" 2>/dev/null | tr '\n' ' ')"
    else
        pass "$name"
    fi
}

# --- loopback in every spelling --------------------------------------------
refused "loopback dotted" http_request "http://127.0.0.1:$P/"
refused "loopback short 127.1" http_request "http://127.1:$P/"
refused "loopback octal 0177.0.0.1" http_request "http://0177.0.0.1:$P/"
refused "loopback hex 0x7f.0.0.1" http_request "http://0x7f.0.0.1:$P/"
refused "loopback hex 0x7f000001" http_request "http://0x7f000001:$P/"
refused "loopback decimal 2130706433" http_request "http://2130706433:$P/"
refused "loopback 127.0.0.3" http_request "http://127.0.0.3:$P/"
refused "loopback trailing dot" http_request "http://127.0.0.1.:$P/" blocked_address network_error
refused "loopback uppercase scheme" http_request "HTTP://127.0.0.1:$P/"
refused "localhost" http_request "http://localhost:$P/"
refused "LOCALHOST uppercase" http_request "http://LOCALHOST:$P/"
refused "localhost trailing dot" http_request "http://localhost.:$P/" blocked_address network_error
refused "ipv6 loopback [::1]" http_request "http://[::1]:$P/"
refused "ipv6 loopback long form" http_request "http://[0:0:0:0:0:0:0:1]:$P/"
refused "mapped [::ffff:127.0.0.1]" http_request "http://[::ffff:127.0.0.1]:$P/"
refused "mapped hex [::ffff:7f00:1]" http_request "http://[::ffff:7f00:1]:$P/"
refused "compatible [::127.0.0.1]" http_request "http://[::127.0.0.1]:$P/"
refused "nat64 [64:ff9b::7f00:1]" http_request "http://[64:ff9b::7f00:1]:$P/"
refused "nat64 dotted [64:ff9b::127.0.0.1]" http_request "http://[64:ff9b::127.0.0.1]:$P/"
refused "6to4 [2002:7f00:1::]" http_request "http://[2002:7f00:1::]:$P/"
# --- unspecified ------------------------------------------------------------
refused "unspecified 0.0.0.0" http_request "http://0.0.0.0:$P/"
refused "unspecified 0" http_request "http://0:$P/"
refused "unspecified [::]" http_request "http://[::]:$P/"
refused "unspecified [::ffff:0.0.0.0]" http_request "http://[::ffff:0.0.0.0]:$P/"
# --- userinfo and parser tricks ----------------------------------------------
refused "userinfo good@127.0.0.1" http_request "http://good@127.0.0.1:$P/" invalid_input
refused "userinfo allowed-looking@loopback" http_request "http://$APP:$APP_PORT@127.0.0.1:$P/" invalid_input
refused "userinfo user:pass" http_request "http://user:pass@$APP:$APP_PORT/text" invalid_input
refused "fragment trick" http_request "http://127.0.0.1:$P#@$APP:$APP_PORT/" blocked_address
refused "backslash trick" http_request "http://$APP:$APP_PORT\\@127.0.0.1:$P/" blocked_address invalid_input
refused "file scheme" http_request "file:///etc/passwd" invalid_input
refused "gopher scheme" http_request "gopher://127.0.0.1:$P/_GET" invalid_input
refused "dict scheme" http_request "dict://127.0.0.1:$P/" invalid_input
# --- private, shared, link-local, metadata, reserved ---------------------------
refused "private 10/8" http_request "http://10.0.0.1:$P/"
refused "private 172.16/12" http_request "http://172.16.0.1:$P/"
refused "private 192.168/16" http_request "http://192.168.0.1:$P/"
refused "cgnat 100.64/10" http_request "http://100.64.0.1:$P/"
refused "link-local 169.254.1.1" http_request "http://169.254.1.1:$P/"
refused "metadata 169.254.169.254" http_request "http://169.254.169.254:$P/latest/meta-data/"
refused "metadata decimal 2852039166" http_request "http://2852039166:$P/"
refused "metadata octal" http_request "http://0251.0376.0251.0376:$P/"
refused "metadata hex 0xa9fea9fe" http_request "http://0xa9fea9fe:$P/"
refused "metadata mapped [::ffff:a9fe:a9fe]" http_request "http://[::ffff:a9fe:a9fe]:$P/"
refused "metadata nat64" http_request "http://[64:ff9b::a9fe:a9fe]:$P/"
refused "metadata 6to4" http_request "http://[2002:a9fe:a9fe::]:$P/"
refused "metadata alibaba 100.100.100.200" http_request "http://100.100.100.200:$P/"
refused "metadata aws ipv6 fd00:ec2::254" http_request "http://[fd00:ec2::254]:$P/"
refused "ula fc00::/7" http_request "http://[fc00::1]:$P/"
refused "site-local fec0::/10" http_request "http://[fec0::1]:$P/"
refused "benchmarking 198.18/15" http_request "http://198.18.0.1:$P/"
refused "ietf 192.0.0/24" http_request "http://192.0.0.1:$P/"
refused "documentation 192.0.2/24" http_request "http://192.0.2.1:$P/"
refused "documentation 198.51.100/24" http_request "http://198.51.100.1:$P/"
refused "documentation 203.0.113/24" http_request "http://203.0.113.1:$P/"
refused "documentation 2001:db8::/32" http_request "http://[2001:db8::1]:$P/"
refused "teredo 2001::/32" http_request "http://[2001::1]:$P/"
refused "reserved 240/4" http_request "http://240.0.0.1:$P/"
refused "broadcast" http_request "http://255.255.255.255:$P/"
refused "multicast 224/4" http_request "http://224.0.0.1:$P/"
refused "multicast ff02::1" http_request "http://[ff02::1]:$P/"
refused "link-local fe80::1" http_request "http://[fe80::1]:$P/" blocked_address network_error

# --- names pinned to forbidden addresses (DNS answers an attacker controls) ----
export SKILLS_OUTBOUND_RESOLVE="evil.test:$P:127.0.0.1,meta.test:$P:169.254.169.254,v6.test:$P:[::1],priv.test:$P:10.0.0.1,mapped.test:$P:[::ffff:127.0.0.1],ula.test:$P:[fd00:ec2::254]"
refused "pinned name to 127.0.0.1" http_request "http://evil.test:$P/"
refused "pinned name to metadata" http_request "http://meta.test:$P/"
refused "pinned name to ::1" http_request "http://v6.test:$P/"
refused "pinned name to 10.0.0.1" http_request "http://priv.test:$P/"
refused "pinned name to mapped loopback" http_request "http://mapped.test:$P/"
refused "pinned name to fd00:ec2::254" http_request "http://ula.test:$P/"
refused "pinned name uppercase" http_request "http://EVIL.TEST:$P/"
refused "pinned name via web_fetch" web_fetch "http://evil.test:$P/"
unset SKILLS_OUTBOUND_RESOLVE

# --- redirects from the allowed server ------------------------------------------
for target in "http://127.0.0.1:$P/" "http://127.1:$P/" "http://2130706433:$P/" \
    "http://[::1]:$P/" "http://[::ffff:127.0.0.1]:$P/" "http://[64:ff9b::7f00:1]:$P/" \
    "http://[2002:7f00:1::]:$P/" "http://169.254.169.254:$P/latest/meta-data/" \
    "http://[fd00:ec2::254]:$P/" "http://10.0.0.1:$P/" "http://0:$P/" "http://localhost:$P/" \
    "http://100.100.100.200:$P/" "http://good@127.0.0.1:$P/"; do
    refused "redirect to $target" http_request "$APP_URL/redirect?to=$(enc "$target")"
done
refused "redirect 307 to loopback" http_request "$APP_URL/redirect?code=307&to=$(enc "http://127.0.0.1:$P/")"
refused "redirect 308 to metadata" http_request "$APP_URL/redirect?code=308&to=$(enc "http://169.254.169.254:$P/")"
refused "redirect to file://" http_request "$APP_URL/redirect?to=$(enc "file:///etc/passwd")"
refused "redirect to gopher://" http_request "$APP_URL/redirect?to=$(enc "gopher://127.0.0.1:$P/_x")"
refused "redirect to ftp://" http_request "$APP_URL/redirect?to=$(enc "ftp://127.0.0.1:$P/")"
refused "web_fetch redirect to loopback" web_fetch "$APP_URL/redirect?to=$(enc "http://127.0.0.1:$P/")"
refused "redirect loop" http_request "$APP_URL/loop" network_error
refused "six redirects" http_request "$APP_URL/chain/6" network_error
out=$(run_skill http_request "$(json_in "$APP_URL/chain/5")")
check "five redirects are followed" test "$(json_get "$out" 'j["status"]')" = 200
out=$(run_skill http_request "{\"url\":\"$APP_URL/redirect?to=$(enc "http://127.0.0.1:$P/")\",\"followRedirects\":false}")
check "redirect not followed when asked" test "$(json_get "$out" 'j["status"]')" = 302

# --- host lists -------------------------------------------------------------------
export SKILLS_OUTBOUND_RESOLVE="public.test:$APP_PORT:$APP"
out=$(run_skill http_request "$(json_in "http://public.test:$APP_PORT/text")")
check "pinned name to the allowed server works" test "$(json_get "$out" 'j["status"]')" = 200
SKILLS_OUTBOUND_DENY_HOSTS=public.test refused "deny host" http_request "http://public.test:$APP_PORT/text"
SKILLS_OUTBOUND_DENY_HOSTS=test refused "deny parent domain" http_request "http://PUBLIC.test.:$APP_PORT/text"
SKILLS_OUTBOUND_DENY_HOSTS=public.test refused "redirect to denied host" http_request \
    "$APP_URL/redirect?to=$(enc "http://public.test:$APP_PORT/text")"
unset SKILLS_OUTBOUND_RESOLVE
# web_search's engine goes through the same guard
before=$(caught)
out=$(SKILLS_SEARXNG_URL="http://127.0.0.1:$P" run_skill web_search '{"query":"x","provider":"searxng"}')
if [ "$(caught)" = "$before" ] && [ "$(code_of "$out")" = blocked_address ]; then
    pass "search engine on loopback"
else
    fail "search engine on loopback" "$out"
fi

# --- positive controls: what the administrator opens is reached ---------------------
before=$(caught)
out=$(SKILLS_OUTBOUND_ALLOW_CIDRS="$APP/32,10.0.0.1/32" run_skill http_request "$(json_in "http://10.0.0.1:$P/")")
if [ "$(caught)" -gt "$before" ] && [ "$(json_get "$out" 'j.get("body")')" = REACHED ]; then
    pass "control: allowed CIDR is reached and recorded"
else
    fail "control: allowed CIDR is reached and recorded" "$out"
fi
before=$(caught)
out=$(SKILLS_OUTBOUND_RESOLVE="intranet.test:$P:127.0.0.3" SKILLS_OUTBOUND_ALLOW_HOSTS=intranet.test \
    run_skill http_request "$(json_in "http://intranet.test:$P/")")
if [ "$(caught)" -gt "$before" ] && [ "$(json_get "$out" 'j.get("body")')" = REACHED ]; then
    pass "control: allowed host is reached and recorded"
else
    fail "control: allowed host is reached and recorded" "$out"
fi
SKILLS_OUTBOUND_RESOLVE="other.test:$P:127.0.0.3" SKILLS_OUTBOUND_ALLOW_HOSTS=intranet.test \
    refused "allowed host does not open other names" http_request "http://other.test:$P/"

# --- the refusals are counted on /metrics --------------------------------------------
source "$(dirname "$0")/../integration/server_common.sh"
start_server
A=(-H "Authorization: Bearer $ADMIN")
req POST /v1/execute "${A[@]}" -d "{\"skill\":\"http_request\",\"input\":{\"url\":\"http://169.254.169.254:$P/\"}}"
check "REST call refused by the guard" test "$(json_get "$BODY" '(j.get("result") or j).get("error",{}).get("code")')" = blocked_address
req GET /metrics "${A[@]}"
if echo "$BODY" | grep -Eq '^skilld_outbound_rejected_total [1-9][0-9]*$'; then
    pass "metrics count outbound refusals"
else
    fail "metrics count outbound refusals" "$(echo "$BODY" | grep outbound)"
fi
stop_server
finish
