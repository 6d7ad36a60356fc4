#!/usr/bin/env bash
# Secrets at egress through the real binary (issue 29): a key's secret is set
# over REST, its sandboxes hold only a placeholder, and the egress proxy puts
# the value into request headers on connections to the secret's hosts only.
# Runs in a network namespace of its own (tests/fixtures/net/netenv.sh); the
# upstream (tests/fixtures/net/recorder.py on 127.0.0.2) records the
# Authorization it receives. bound.test and other.test are both pinned to it:
# only bound.test is a secret's host.
# Before the network namespace: dockerd and the busybox test image for the
# docker and podman checks (scripts/setup-containers.sh runs in the host's).
if [ -z "${SKILLD_NETNS:-}" ]; then
    SETUP_LOG=$(mktemp /tmp/skilld-secrets-setup.XXXXXX)
    if ! "$(dirname "$0")/../../scripts/setup-containers.sh" >"$SETUP_LOG" 2>&1; then
        echo "FAIL secrets.sh: container setup: $(tail -3 "$SETUP_LOG" | tr '\n' ' ')"
    fi
    rm -f "$SETUP_LOG"
fi
source "$(dirname "$0")/../fixtures/net/netenv.sh"
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"
net_start || { fail setup "network namespace set-up failed"; finish; }
HP=8444
REC=$TMP/rec.log
: >"$REC"
python3 "$NETFIX_DIR/recorder.py" --bind "$APP" --port $HP --log "$REC" --ready "$TMP/rec-http" \
    >"$TMP/rec-http.out" 2>&1 &
REC_PIDS=$!
trap 'kill "$FIX_PID" $REC_PIDS 2>/dev/null; rm -rf "$TMP"' EXIT
# The HTTPS upstream: a certificate for bound.test and other.test from the
# test's own CA, which skilld trusts through SKILLS_EGRESS_UPSTREAM_CA_FILE.
SP=8445
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=testca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    -keyout "$TMP/testca.key" -out "$TMP/testca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bound.test \
    -keyout "$TMP/up.key" -out "$TMP/up.csr" 2>/dev/null
printf 'subjectAltName=DNS:bound.test,DNS:other.test\n' >"$TMP/up.ext"
openssl x509 -req -in "$TMP/up.csr" -CA "$TMP/testca.pem" -CAkey "$TMP/testca.key" -CAcreateserial \
    -days 2 -extfile "$TMP/up.ext" -out "$TMP/up.pem" 2>/dev/null
python3 "$NETFIX_DIR/recorder.py" --bind "$APP" --port $SP --log "$REC" --cert "$TMP/up.pem" \
    --key "$TMP/up.key" --big 2000000 --ready "$TMP/rec-https" >"$TMP/rec-https.out" 2>&1 &
REC_PIDS="$REC_PIDS $!"
for _ in $(seq 1 100); do [ -e "$TMP/rec-http" ] && [ -e "$TMP/rec-https" ] && break; sleep 0.1; done

VALUE="ghp_Secret$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
start_server SKILLS_SANDBOX_NETWORK_ENABLED=true SKILLS_SANDBOX_RUNTIME=native \
    SKILLS_OUTBOUND_RESOLVE="bound.test:$HP:$APP,other.test:$HP:$APP,bound.test:$SP:$APP,other.test:$SP:$APP,meta.bound.test:$SP:169.254.169.254" \
    SKILLS_EGRESS_UPSTREAM_CA_FILE="$TMP/testca.pem" SKILLS_EGRESS_SCRUB_MAX_BYTES=1048576 SKILLS_SECRETS_MAX_PER_KEY=3
A=(-H "Authorization: Bearer $ADMIN")
read -r AID ASEC <<<"$(new_key alice skills:read,skills:execute)"
read -r BID BSEC <<<"$(new_key bob skills:read,skills:execute)"
AL=(-H "Authorization: Bearer $ASEC")
BO=(-H "Authorization: Bearer $BSEC")

# --- REST: validation, set, list --------------------------------------------
bad() { # bad NAME FIELD JSON: 400 invalid_input naming FIELD
    req POST /v1/secrets "${AL[@]}" -d "$3"
    if [ "$STATUS" = 400 ] && json_get "$BODY" 'j["error"]["code"]' | grep -qx invalid_input &&
        json_get "$BODY" 'j["error"]["message"]' | grep -q "^$2"; then
        pass "$1"
    else
        fail "$1" "$STATUS $BODY"
    fi
}
bad "a name that is not an environment variable name" name '{"name":"1X","value":"v","hosts":["a.test"]}'
bad "PATH is taken" name '{"name":"PATH","value":"v","hosts":["a.test"]}'
bad "a proxy variable is taken" name '{"name":"HTTPS_PROXY","value":"v","hosts":["a.test"]}'
bad "a CA variable is taken" name '{"name":"SSL_CERT_FILE","value":"v","hosts":["a.test"]}'
bad "SKILLS_ names are taken" name '{"name":"SKILLS_X","value":"v","hosts":["a.test"]}'
bad "a value with LF" value '{"name":"X","value":"a\nb","hosts":["a.test"]}'
bad "a value with CR" value '{"name":"X","value":"a\rb","hosts":["a.test"]}'
req POST /v1/secrets "${AL[@]}" -d '{"name":"X","value":"a\u0000b","hosts":["a.test"]}'
expect_status "a value with NUL is refused" 400
bad "a value over 16 KiB" value "{\"name\":\"X\",\"value\":\"$(head -c 16385 /dev/zero | tr '\0' a)\",\"hosts\":[\"a.test\"]}"
bad "a bare * host" hosts '{"name":"X","value":"v","hosts":["*"]}'
bad "an IPv4 host" hosts '{"name":"X","value":"v","hosts":["127.0.0.2"]}'
bad "an IPv6 host" hosts '{"name":"X","value":"v","hosts":["::1"]}'
bad "no hosts" hosts '{"name":"X","value":"v","hosts":[]}'
bad "a bad header name" headers '{"name":"X","value":"v","hosts":["a.test"],"headers":["a b"]}'
bad "NODE_OPTIONS is taken (it requires the egress preload)" name '{"name":"NODE_OPTIONS","value":"v","hosts":["a.test"]}'

# An admin sets a secret for another key; a key holds at most
# SKILLS_SECRETS_MAX_PER_KEY (3 here).
req POST /v1/secrets "${A[@]}" -d "{\"name\":\"B1\",\"value\":\"v1\",\"hosts\":[\"a.test\"],\"key\":\"$BID\"}"
expect_status "an admin sets a secret for another key" 201
req GET /v1/secrets "${BO[@]}"
expect_json "that key lists it" "[s['name'] for s in j['secrets']]==['B1']"
req POST /v1/secrets "${AL[@]}" -d "{\"name\":\"B2\",\"value\":\"v2\",\"hosts\":[\"a.test\"],\"key\":\"$BID\"}"
expect_status "only an admin sets one for another key" 403
for n in B2 B3; do req POST /v1/secrets "${BO[@]}" -d "{\"name\":\"$n\",\"value\":\"v\",\"hosts\":[\"a.test\"]}"; done
req POST /v1/secrets "${BO[@]}" -d '{"name":"B4","value":"v","hosts":["a.test"]}'
if json_get "$BODY" 'j["error"]["code"]' | grep -qx quota_exceeded && echo "$BODY" | grep -q SKILLS_SECRETS_MAX_PER_KEY; then
    pass "past SKILLS_SECRETS_MAX_PER_KEY a secret is refused"; else
    fail "past SKILLS_SECRETS_MAX_PER_KEY a secret is refused" "$STATUS $BODY"; fi
for n in B1 B2 B3; do req DELETE "/v1/secrets/$n" "${BO[@]}"; done
expect_status "the key deletes its own" 204

req POST /v1/secrets "${AL[@]}" -d "{\"name\":\"GH_TOKEN\",\"value\":\"$VALUE\",\"hosts\":[\"bound.test\",\"*.bound.test\"],\"headers\":[\"Authorization\",\"X-Api-Key\"]}"
expect_status "set a secret" 201
expect_json "the answer has name, hosts, fingerprint, createdAt and no value" \
    "j['name']=='GH_TOKEN' and j['hosts']==['bound.test','*.bound.test'] and j['fingerprint'].startswith('hmac-sha256:') and j['createdAt']>0 and '$VALUE' not in json.dumps(j)"
req GET /v1/secrets "${AL[@]}"
expect_json "the list names the secret without its value" \
    "[s['name'] for s in j['secrets']]==['GH_TOKEN'] and '$VALUE' not in json.dumps(j) and 'value' not in j['secrets'][0]"
req GET /v1/secrets "${BO[@]}"
expect_json "another key lists none of it" "j['secrets']==[]"
req GET "/v1/secrets?key=$AID" "${BO[@]}"
expect_status "only an admin names another key" 403
req GET "/v1/secrets?key=$AID" "${A[@]}"
expect_json "an admin lists another key's secrets" "[s['name'] for s in j['secrets']]==['GH_TOKEN']"

# The secrets_list skill (MCP and every transport): names, no value.
req POST /v1/execute "${AL[@]}" -d '{"skill":"secrets_list","input":{}}'
expect_json "the secrets_list skill lists the key's names and hosts, never a value" \
    "j['success'] and [s['name'] for s in j['secrets']]==['GH_TOKEN'] and j['secrets'][0]['hosts']==['bound.test','*.bound.test'] and '$VALUE' not in json.dumps(j) and 'value' not in j['secrets'][0]"
req POST /v1/execute "${BO[@]}" -d '{"skill":"secrets_list","input":{}}'
expect_json "secrets_list shows another key none of them" "j['success'] and j['secrets']==[]"
# The command line, as the operator: the value from stdin.
CLIV="cli_$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
if printf '%s\n' "$CLIV" | "$SKILLD" --data-dir "$DATA" secrets set CLI_TOKEN --key "$BID" --hosts cli.test --headers X-Token >"$TMP/cli.out" 2>&1 &&
    grep -q '"fingerprint"' "$TMP/cli.out" && ! grep -qF "$CLIV" "$TMP/cli.out"; then
    pass "skilld secrets set reads the value from stdin"; else
    fail "skilld secrets set reads the value from stdin" "$(cat "$TMP/cli.out")"; fi
req GET /v1/secrets "${BO[@]}"
expect_json "the key lists the secret the command line set" \
    "[s['name'] for s in j['secrets']]==['CLI_TOKEN'] and j['secrets'][0]['headers']==['x-token']"
"$SKILLD" --data-dir "$DATA" secrets list --key "$BID" >"$TMP/cli.out" 2>&1
if grep -q CLI_TOKEN "$TMP/cli.out" && ! grep -qF "$CLIV" "$TMP/cli.out"; then pass "skilld secrets list names it, without the value"; else
    fail "skilld secrets list names it, without the value" "$(cat "$TMP/cli.out")"; fi
if printf 'a\nb' | "$SKILLD" --data-dir "$DATA" secrets set BAD --key "$BID" --hosts cli.test >"$TMP/cli.out" 2>&1; then
    fail "skilld secrets set refuses a value with LF" "$(cat "$TMP/cli.out")"; else
    grep -q invalid_input "$TMP/cli.out" && pass "skilld secrets set refuses a value with LF" ||
        fail "skilld secrets set refuses a value with LF" "$(cat "$TMP/cli.out")"; fi
"$SKILLD" --data-dir "$DATA" secrets rm CLI_TOKEN --key "$BID" >/dev/null 2>&1
req GET /v1/secrets "${BO[@]}"
expect_json "skilld secrets rm removes it" "j['secrets']==[]"

# sbx KEYSECRET SCRIPT: run SCRIPT with sh -c in a sandbox with network (in
# image $SBX_IMAGE, with the caller's variables $SBX_ENV, a JSON object, when set).
sbx() {
    local input
    input=$(python3 -c '
import json, sys
i = {"command": "sh", "args": ["-c", sys.argv[1]], "networkEnabled": True, "timeoutMs": 30000}
if sys.argv[2]:
    i["image"] = sys.argv[2]
if sys.argv[3]:
    i["env"] = json.loads(sys.argv[3])
print(json.dumps({"skill": "execute_command", "input": i}))' "$2" "${SBX_IMAGE:-}" "${SBX_ENV:-}")
    req POST /v1/execute -H "Authorization: Bearer $1" -d "$input"
}
rec_has() { grep -F -- "$1" "$REC" | grep -qF -- "$2"; }
out() { json_get "$BODY" 'j.get("stdout","")' | grep -v '^$' || true; }

# --- the placeholder, and the value at the bound host -------------------------
sbx "$ASEC" 'echo "var=$GH_TOKEN"; curl -sS -H "Authorization: Bearer $GH_TOKEN" http://bound.test:8444/http-curl'
PH=$(out | sed -n 's/^var=//p')
case "$PH" in skd_secret_*) pass "the sandbox holds a placeholder" ;; *) fail "the sandbox holds a placeholder" "$BODY" ;; esac
if rec_has '"/http-curl"' "\"Bearer $VALUE\""; then pass "curl over HTTP: the bound host gets the value"; else
    fail "curl over HTTP: the bound host gets the value" "$(cat "$REC")"; fi
expect_json "the run's egress record names the substitution" \
    "any(r.get('host')=='bound.test' and r.get('substituted')==['GH_TOKEN'] for r in j['egress'])"
EXEC=$(json_get "$BODY" 'j["executionId"]')
req GET "/v1/executions/$EXEC" "${AL[@]}"
expect_json "the execution's audit row names the secret and the host, without the value" \
    "any(r.get('host')=='bound.test' and r.get('substituted')==['GH_TOKEN'] for r in (j.get('execution') or j).get('egress',[])) and '$VALUE' not in json.dumps(j)"
req GET "/v1/executions/$EXEC" "${A[@]}"
expect_json "an admin sees the substitution in the audit row" \
    "any(r.get('substituted')==['GH_TOKEN'] for r in (j.get('execution') or j).get('egress',[]))"
req GET "/v1/executions/$EXEC" "${BO[@]}"
if [ "$STATUS" = 404 ] || [ "$STATUS" = 403 ]; then pass "another key does not see the audit row"; else
    fail "another key does not see the audit row" "$STATUS $BODY"; fi
req GET "/v1/executions?limit=50" "${AL[@]}"
expect_json "the execution list carries the substitution, without the value" \
    "'GH_TOKEN' in json.dumps(j) and 'bound.test' in json.dumps(j) and '$VALUE' not in json.dumps(j)"

sbx "$ASEC" 'python3 -c "
import os, urllib.request
r = urllib.request.Request(\"http://bound.test:8444/http-python\", headers={\"X-Api-Key\": os.environ[\"GH_TOKEN\"]})
print(urllib.request.urlopen(r).read().decode())"'
if rec_has '"/http-python"' "\"xapikey\": \"$VALUE\""; then pass "python urllib over HTTP: the value in X-Api-Key"; else
    fail "python urllib over HTTP: the value in X-Api-Key" "$BODY $(cat "$REC")"; fi

sbx "$ASEC" 'curl -sS -H "Cookie: t=$GH_TOKEN" -H "Authorization: Bearer $GH_TOKEN" "http://bound.test:8444/http-path-$GH_TOKEN"'
if grep -F '"/http-path-' "$REC" | grep -q "http-path-$PH" && ! grep -F '"/http-path-' "$REC" | grep -qF "path-$VALUE"; then
    pass "the request line keeps the placeholder (headers only)"; else
    fail "the request line keeps the placeholder (headers only)" "$(cat "$REC")"; fi

# --- HTTPS: TLS terminated for the bound host only ------------------------------
CA_PEM=$(cat "$TMP/data/egress-ca.pem")
[ -n "$CA_PEM" ] && pass "the egress CA is made in DATA_DIR" || fail "the egress CA is made in DATA_DIR" "$(ls "$TMP/data")"
[ "$(stat -c %a "$TMP/data/egress-ca.key")" = 600 ] &&
    [ "$(stat -c %U "$TMP/data/egress-ca.key")" = "$(stat -c %U "$TMP/data")" ] &&
    pass "the CA key is mode 0600 and the service user's" || fail "the CA key is mode 0600 and the service user's" "$(ls -l "$TMP/data")"
sbx "$ASEC" 'curl -sS -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/https-curl'
if rec_has '"/https-curl"' "\"Bearer $VALUE\""; then pass "curl over HTTPS: the bound host gets the value"; else
    fail "curl over HTTPS: the bound host gets the value" "$BODY $(cat "$REC")"; fi
expect_json "the HTTPS record names the substitution" \
    "any(r.get('host')=='bound.test' and r.get('port')==8445 and r.get('substituted')==['GH_TOKEN'] for r in j['egress'])"
sbx "$ASEC" 'python3 -c "
import os, urllib.request
r = urllib.request.Request(\"https://bound.test:8445/https-python\", headers={\"Authorization\": \"Bearer \" + os.environ[\"GH_TOKEN\"]})
print(urllib.request.urlopen(r).read().decode())"'
if rec_has '"/https-python"' "\"Bearer $VALUE\""; then pass "python urllib over HTTPS: the bound host gets the value"; else
    fail "python urllib over HTTPS: the bound host gets the value" "$BODY $(cat "$REC")"; fi
# Python's requests (Debian's python3-requests): HTTPS_PROXY and REQUESTS_CA_BUNDLE.
sbx "$ASEC" 'python3 -c "
import os, requests
r = requests.get(\"https://bound.test:8445/https-requests\", headers={\"Authorization\": \"Bearer \" + os.environ[\"GH_TOKEN\"]})
print(\"status=%d\" % r.status_code)"'
if rec_has '"/https-requests"' "\"Bearer $VALUE\"" && echo "$BODY" | grep -q 'status=200'; then
    pass "python requests over HTTPS: the bound host gets the value, TLS verified against the bundle"; else
    fail "python requests over HTTPS: the bound host gets the value, TLS verified against the bundle" "$BODY $(cat "$REC")"; fi
# Node's fetch (undici; node < 22.21 reads no proxy variable): the preload
# NODE_OPTIONS requires sends it through the proxy, and node verifies the
# leaf skilld mints against NODE_EXTRA_CA_CERTS (without it, the same fetch fails).
NODE_FETCH='node -e "fetch(process.argv[1], {headers: {Authorization: \"Bearer \" + process.env.GH_TOKEN}}).then(r => r.text()).then(t => console.log(\"node=\" + t.length), e => console.log(\"nodeerr=\" + (e.cause && e.cause.code || e)))"'
sbx "$ASEC" "$NODE_FETCH https://bound.test:8445/https-node; $NODE_FETCH http://bound.test:8444/http-node; env -u NODE_EXTRA_CA_CERTS $NODE_FETCH https://bound.test:8445/https-node-untrusted; echo \"opts=\$NODE_OPTIONS\""
if rec_has '"/https-node"' "\"Bearer $VALUE\"" && [ "$(out | grep -c '^node=[1-9]')" = 2 ]; then
    pass "node fetch over HTTPS: the bound host gets the value, TLS verified"; else
    fail "node fetch over HTTPS: the bound host gets the value, TLS verified" "$BODY $(cat "$REC")"; fi
if rec_has '"/http-node"' "\"Bearer $VALUE\""; then pass "node fetch over HTTP: the bound host gets the value"; else
    fail "node fetch over HTTP: the bound host gets the value" "$BODY $(cat "$REC")"; fi
if out | grep -E '^nodeerr=(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$' >/dev/null &&
    ! grep -F '"/https-node-untrusted"' "$REC" >/dev/null; then
    pass "node fetch without skilld's CA refuses the intercepted TLS (it verifies)"; else
    fail "node fetch without skilld's CA refuses the intercepted TLS (it verifies)" "$BODY"; fi
SBX_ENV='{"NODE_OPTIONS": "--max-old-space-size=200"}' sbx "$ASEC" "echo \"opts=\$NODE_OPTIONS\"; $NODE_FETCH https://bound.test:8445/https-node-opts"
if out | grep -x 'opts=--require=/.skilld-egress.cjs --max-old-space-size=200' >/dev/null && rec_has '"/https-node-opts"' "\"Bearer $VALUE\""; then
    pass "a caller's NODE_OPTIONS is kept behind the preload"; else
    fail "a caller's NODE_OPTIONS is kept behind the preload" "$BODY"; fi
sbx "$ASEC" 'git -c http.extraHeader="X-Api-Key: $GH_TOKEN" ls-remote https://bound.test:8445/repo.git; echo "git=$?"'
if rec_has '"/repo.git/info/refs' "\"xapikey\": \"$VALUE\"" && out | grep -x 'git=0' >/dev/null; then
    pass "git ls-remote over HTTPS: the value in an extra header"; else
    fail "git ls-remote over HTTPS: the value in an extra header" "$BODY $(cat "$REC")"; fi
sbx "$ASEC" 'curl -sS -D - -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/echo; curl -sS -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/echo-chunked; curl -sS -H "Authorization: Bearer $GH_TOKEN" http://bound.test:8444/echo'
if [ "$(out | grep -c "you sent: Bearer $PH")" = 3 ] && out | grep -i "^x-echo: Bearer $PH" >/dev/null && ! out | grep -F "$VALUE" >/dev/null; then
    pass "an upstream that echoes the value: the sandbox reads the placeholder (headers, bodies, chunked, HTTP)"; else
    fail "an upstream that echoes the value: the sandbox reads the placeholder (headers, bodies, chunked, HTTP)" "$BODY"; fi
sbx "$ASEC" 'curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/big; echo'
if out | grep -x 502 >/dev/null; then pass "a response past SKILLS_EGRESS_SCRUB_MAX_BYTES is cut"; else
    fail "a response past SKILLS_EGRESS_SCRUB_MAX_BYTES is cut" "$BODY"; fi
expect_json "the run says why it was cut" \
    "any(r.get('verdict')=='cut' and 'SKILLS_EGRESS_SCRUB_MAX_BYTES' in r.get('reason','') for r in j['egress'])"
sbx "$ASEC" 'curl -sS -H "Authorization: Bearer $GH_TOKEN" https://other.test:8445/https-unbound; echo "rc=$?"'
if out | grep -x 'rc=60' >/dev/null && ! grep -F '"/https-unbound"' "$REC" | grep -F "$VALUE" >/dev/null; then
    pass "an unbound HTTPS host stays an opaque tunnel (its own certificate, the test CA the sandbox does not trust)"; else
    fail "an unbound HTTPS host stays an opaque tunnel (its own certificate, the test CA the sandbox does not trust)" "$BODY"; fi
sbx "$ASEC" "curl -sS --cacert /dev/stdin -H \"Authorization: Bearer \$GH_TOKEN\" https://other.test:8445/https-unbound2 <<'EOF'
$(cat "$TMP/testca.pem")
EOF"
if rec_has '"/https-unbound2"' "\"Bearer $PH\""; then pass "an unbound HTTPS host sees only the placeholder"; else
    fail "an unbound HTTPS host sees only the placeholder" "$BODY $(cat "$REC")"; fi
sbx "$ASEC" 'curl -sS -o /dev/null -w "%{http_code}" https://meta.bound.test:8445/; echo'
if out | grep -x 000 >/dev/null && json_get "$BODY" 'j["egress"]' | grep -F 'outbound guard' >/dev/null; then
    pass "a bound host at a forbidden address is refused before any TLS"; else
    fail "a bound host at a forbidden address is refused before any TLS" "$BODY"; fi

# --- elsewhere: an unbound host, a forged Host, another key ---------------------
sbx "$ASEC" 'curl -sS -H "Authorization: Bearer $GH_TOKEN" http://other.test:8444/unbound'
if rec_has '"/unbound"' "\"Bearer $PH\""; then pass "an unbound host sees only the placeholder"; else
    fail "an unbound host sees only the placeholder" "$(cat "$REC")"; fi
expect_json "the record notes placeholder_elsewhere" \
    "any(r.get('host')=='other.test' and r.get('placeholderElsewhere')==['GH_TOKEN'] for r in j['egress'])"
EXEC=$(json_get "$BODY" 'j["executionId"]')
req GET "/v1/executions/$EXEC" "${AL[@]}"
expect_json "the audit row notes placeholder_elsewhere with the host" \
    "any(r.get('host')=='other.test' and r.get('placeholderElsewhere')==['GH_TOKEN'] for r in (j.get('execution') or j).get('egress',[]))"
sbx "$ASEC" 'curl -sS -H "Host: bound.test:8444" -H "Authorization: Bearer $GH_TOKEN" http://other.test:8444/forged'
if rec_has '"/forged"' "\"Bearer $PH\""; then pass "a forged Host naming the bound host gets no value"; else
    fail "a forged Host naming the bound host gets no value" "$(cat "$REC")"; fi
sbx "$BSEC" "echo \"bob=\${GH_TOKEN-unset}\"; curl -sS -H \"Authorization: Bearer $PH\" http://bound.test:8444/bob"
if out | grep -x 'bob=unset' >/dev/null; then pass "another key's sandbox has no variable"; else
    fail "another key's sandbox has no variable" "$BODY"; fi
if rec_has '"/bob"' "\"Bearer $PH\""; then pass "another key's sandbox: the placeholder is not replaced"; else
    fail "another key's sandbox: the placeholder is not replaced" "$(cat "$REC")"; fi

# --- where the value is not ----------------------------------------------------
sbx "$ASEC" 'cat /proc/self/environ | tr "\0" "\n"; env; grep -rsl -- "$GH_TOKEN" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; echo end'
if out | grep "GH_TOKEN=$PH" >/dev/null && ! out | grep -F "$VALUE" >/dev/null; then
    pass "the value is in no environ of the sandbox"; else fail "the value is in no environ of the sandbox" "$BODY"; fi
sbx "$ASEC" "grep -rslF -- '${VALUE:0:20}' /workspace /tmp /etc /home /root 2>/dev/null; echo searched"
if [ "$(out)" = searched ]; then
    pass "the value is in no file the sandbox sees"; else fail "the value is in no file the sandbox sees" "$BODY"; fi
if grep -rqF -- "$VALUE" "$TMP/data" 2>/dev/null; then
    fail "the value is in no file under DATA_DIR" "$(grep -rlF -- "$VALUE" "$TMP/data")"; else
    pass "the value is in no file under DATA_DIR"; fi
[ -s "$TMP/data/secrets.key" ] && [ "$(stat -c %a "$TMP/data/secrets.key")" = 600 ] &&
    [ "$(stat -c %U "$TMP/data/secrets.key")" = "$(stat -c %U "$TMP/data")" ] &&
    pass "the sealing key is made in DATA_DIR, mode 0600, owned by the service user" ||
    fail "the sealing key is made in DATA_DIR, mode 0600, owned by the service user" "$(ls -l "$TMP/data")"
req GET /metrics "${A[@]}"
if echo "$BODY" | grep -qF -- "$VALUE"; then fail "the value is not in /metrics" "found"; else pass "the value is not in /metrics"; fi

# --- after DELETE --------------------------------------------------------------
req DELETE /v1/secrets/GH_TOKEN "${BO[@]}"
expect_status "another key cannot delete it" 404
req DELETE /v1/secrets/GH_TOKEN "${AL[@]}"
expect_status "delete" 204
sbx "$ASEC" 'echo "after=${GH_TOKEN-unset}"'
if out | grep -x 'after=unset' >/dev/null; then pass "after DELETE, no variable"; else fail "after DELETE, no variable" "$BODY"; fi
req DELETE /v1/secrets/GH_TOKEN "${AL[@]}"
expect_status "a second delete is 404" 404

stop_server
cat "$TMP/serve.err" "$TMP/serve.out" >>"$TMP/serve-all.log"

# --- docker and podman: the same placeholders and trust bundle ------------------
# The busybox test image: its wget verifies no TLS, takes no CA file and
# sends https:// URLs to a proxy without CONNECT, so the checks are that the
# TRUST variables name a read-only bundle that holds skilld's CA (the
# interception itself is the proxy's, whatever the runtime: checked above),
# and that the value reaches the bound host over HTTP.
for R in docker podman; do
    start_server SKILLS_SANDBOX_NETWORK_ENABLED=true SKILLS_SANDBOX_RUNTIME=$R SKILLS_ALLOWED_SANDBOX_IMAGES=skilld-test \
        SKILLS_OUTBOUND_RESOLVE="bound.test:$HP:$APP,other.test:$HP:$APP,bound.test:$SP:$APP" \
        SKILLS_EGRESS_UPSTREAM_CA_FILE="$TMP/testca.pem"
    req POST /v1/secrets "${AL[@]}" -d "{\"name\":\"GH_TOKEN\",\"value\":\"$VALUE\",\"hosts\":[\"bound.test\"]}"
    expect_status "$R: set the secret again" 201
    CALINE=$(sed -n 2p "$TMP/data/egress-ca.pem")
    SBX_IMAGE=skilld-test:1 sbx "$ASEC" 'echo "var=$GH_TOKEN"; echo "trust=$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS $CURL_CA_BUNDLE $GIT_SSL_CAINFO"; echo "node=$NODE_OPTIONS"; test -s /.skilld-egress.cjs && echo preload; echo x 2>/dev/null >>/.skilld-trust.pem || echo read-only; echo "certs=$(grep -c "BEGIN CERTIFICATE" /.skilld-trust.pem)"; grep -qxF "'"$CALINE"'" /.skilld-trust.pem && echo has-ca'
    CPH=$(out | sed -n 's/^var=//p')
    case "$CPH" in skd_secret_*) pass "$R: the container holds a placeholder" ;; *) fail "$R: the container holds a placeholder" "$BODY" ;; esac
    T=/.skilld-trust.pem
    if out | grep -x "trust=$T $T $T $T $T" >/dev/null && out | grep -x read-only >/dev/null &&
        out | grep -x has-ca >/dev/null && [ "$(out | sed -n 's/^certs=//p')" -gt 1 ]; then
        pass "$R: the TRUST variables name a read-only bundle of the system's roots and skilld's CA"; else
        fail "$R: the TRUST variables name a read-only bundle of the system's roots and skilld's CA" "$BODY"; fi
    if out | grep -x 'node=--require=/.skilld-egress.cjs' >/dev/null && out | grep -x preload >/dev/null; then
        pass "$R: NODE_OPTIONS requires the egress preload, which is there"; else
        fail "$R: NODE_OPTIONS requires the egress preload, which is there" "$BODY"; fi
    SBX_IMAGE=skilld-test:1 sbx "$ASEC" "wget -q -O - --header \"Authorization: Bearer \$GH_TOKEN\" http://bound.test:$HP/ctr-http-$R; wget -q -O - --header \"Authorization: Bearer \$GH_TOKEN\" http://other.test:$HP/ctr-unbound-$R"
    if rec_has "\"/ctr-http-$R\"" "\"Bearer $VALUE\""; then
        pass "$R: the bound host gets the value"; else
        fail "$R: the bound host gets the value" "$BODY $(tail -5 "$REC")"; fi
    if rec_has "\"/ctr-unbound-$R\"" "\"Bearer $CPH\""; then pass "$R: an unbound host sees only the placeholder"; else
        fail "$R: an unbound host sees only the placeholder" "$BODY $(tail -5 "$REC")"; fi
    # A live sandbox of the engine (docs/containers.md, "Live sandboxes"):
    # the same proxy, placed once, serves every exec.
    req POST /v1/sandboxes "${AL[@]}" -H 'Content-Type: application/json' \
        -d '{"image":"skilld-test:1","networkEnabled":true}'
    LID=$(json_get "$BODY" 'j.get("id","")')
    req POST "/v1/sandboxes/$LID/exec" "${AL[@]}" -H 'Content-Type: application/json' \
        -d "{\"command\":\"sh\",\"args\":[\"-c\",\"wget -q -O - --header \\\"Authorization: Bearer \$GH_TOKEN\\\" http://bound.test:$HP/ctr-live-$R\"]}"
    if [ ${#LID} = 36 ] && rec_has "\"/ctr-live-$R\"" "\"Bearer $VALUE\""; then
        pass "$R: a live container's exec reaches the bound host through the proxy, with the value"; else
        fail "$R: a live container's exec reaches the bound host through the proxy, with the value" "$BODY $(tail -3 "$REC")"; fi
    req DELETE "/v1/sandboxes/$LID" "${AL[@]}"
    SBX_IMAGE=skilld-test:1 sbx "$BSEC" 'echo "bob=${GH_TOKEN-unset}"; test -e /.skilld-trust.pem && echo bundle || echo no-bundle'
    if out | grep -x 'bob=unset' >/dev/null && out | grep -x no-bundle >/dev/null; then
        pass "$R: another key's container has no variable and no bundle"; else
        fail "$R: another key's container has no variable and no bundle" "$BODY"; fi
    req DELETE /v1/secrets/GH_TOKEN "${AL[@]}"
    SBX_IMAGE=skilld-test:1 sbx "$ASEC" 'echo "after=${GH_TOKEN-unset}"'
    if out | grep -x 'after=unset' >/dev/null; then pass "$R: after DELETE, no variable"; else
        fail "$R: after DELETE, no variable" "$BODY"; fi
    SID=$(json_get "$BODY" 'j.get("sandboxId","")')
    if [ ${#SID} = 36 ] && [ ! -e "/run/skilld-podman/$SID" ]; then
        pass "$R: the run's directory (the bound files) is removed with the container"; else
        fail "$R: the run's directory (the bound files) is removed with the container" "$SID $(ls /run/skilld-podman)"; fi
    stop_server
    cat "$TMP/serve.err" "$TMP/serve.out" >>"$TMP/serve-all.log"
done
if grep -qF -- "$VALUE" "$TMP/serve-all.log"; then fail "the value is in no log" "found"; else
    pass "the value is in no log"; fi
finish
