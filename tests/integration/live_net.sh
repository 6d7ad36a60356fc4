#!/usr/bin/env bash
# Live sandboxes with networkEnabled (docs/sandbox.md, "Live sandboxes";
# docs/egress.md) through the real binary and REST /v1/sandboxes. Runs in a
# network namespace of its own (tests/fixtures/net/netenv.sh); the upstream
# (tests/fixtures/net/recorder.py on 127.0.0.2, HTTP and HTTPS with the
# test's own CA) records the Authorization it receives. bound.test and
# other.test are pinned to it; only bound.test is a secret's host.
#   1. a sandbox with networkEnabled reaches the allowed upstream through the
#      egress proxy in two execs, each with the proxy variables; a background
#      process keeps its network; a forbidden address is refused.
#   2. with a secret for the key: the sandbox's environment holds only the
#      placeholder, curl over HTTPS to the bound host delivers the value
#      (the sandbox's trust bundle holds skilld's CA), an unbound host sees
#      the placeholder; another key's live sandbox has no variable and the
#      first key's placeholder is not replaced for it.
#   3. egress records: each exec's result carries what the sandbox's proxy
#      did since the previous one (the substitution named with the sandbox
#      id), the execution's audit row too, and /v1/usage counts the bytes;
#      delete's result carries the rest; a sandbox the idle timeout ends
#      leaves a sandbox_end row with what no call took.
#   4. without networkEnabled a live sandbox has no route; networkEnabled
#      is refused when the operator does not allow network.
#   5. create + delete in a loop leaves no descriptor behind in the server;
#      the server stops cleanly with one up, whose egress becomes a row.
source "$(dirname "$0")/../fixtures/net/netenv.sh"
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"
net_start || { fail setup "network namespace set-up failed"; finish; }
HP=8444
SP=8445
REC=$TMP/rec.log
: >"$REC"
python3 "$NETFIX_DIR/recorder.py" --bind "$APP" --port $HP --log "$REC" --ready "$TMP/rec-http" \
    >"$TMP/rec-http.out" 2>&1 &
REC_PIDS=$!
trap 'kill "$FIX_PID" $REC_PIDS 2>/dev/null; rm -rf "$TMP"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=testca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    -keyout "$TMP/testca.key" -out "$TMP/testca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bound.test \
    -keyout "$TMP/up.key" -out "$TMP/up.csr" 2>/dev/null
printf 'subjectAltName=DNS:bound.test,DNS:other.test\n' >"$TMP/up.ext"
openssl x509 -req -in "$TMP/up.csr" -CA "$TMP/testca.pem" -CAkey "$TMP/testca.key" -CAcreateserial \
    -days 2 -extfile "$TMP/up.ext" -out "$TMP/up.pem" 2>/dev/null
python3 "$NETFIX_DIR/recorder.py" --bind "$APP" --port $SP --log "$REC" --cert "$TMP/up.pem" \
    --key "$TMP/up.key" --ready "$TMP/rec-https" >"$TMP/rec-https.out" 2>&1 &
REC_PIDS="$REC_PIDS $!"
for _ in $(seq 1 100); do [ -e "$TMP/rec-http" ] && [ -e "$TMP/rec-https" ] && break; sleep 0.1; done

VALUE="ghp_Live$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
start_server SKILLS_SANDBOX_NETWORK_ENABLED=true SKILLS_SANDBOX_RUNTIME=native \
    SKILLS_OUTBOUND_RESOLVE="bound.test:$HP:$APP,other.test:$HP:$APP,bound.test:$SP:$APP,other.test:$SP:$APP,meta.test:$HP:169.254.169.254" \
    SKILLS_EGRESS_UPSTREAM_CA_FILE="$TMP/testca.pem" SKILLS_SANDBOX_MAX_LIVE_PER_KEY=8
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
read -r AID ASEC <<<"$(new_key alice skills:read,skills:execute)"
read -r BID BSEC <<<"$(new_key bob skills:read,skills:execute)"
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }
# ex KEY ID SCRIPT [background]: exec SCRIPT with sh -c in live sandbox ID.
ex() {
    local input
    input=$(python3 -c 'import json,sys; print(json.dumps({"command":"sh","args":["-c",sys.argv[1]],"background":sys.argv[2]=="bg"}))' "$3" "${4:-}")
    as "$1" POST "/v1/sandboxes/$2/exec" -d "$input"
}
out() { json_get "$BODY" 'j.get("stdout","")' | grep -v '^$' || true; }
rec_has() { grep -F -- "$1" "$REC" | grep -qF -- "$2"; }
got() { grep -qF -- "\"path\": \"$1\"" "$REC"; } # got PATH: the upstream saw a request for PATH

as "$ASEC" POST /v1/secrets -d "{\"name\":\"GH_TOKEN\",\"value\":\"$VALUE\",\"hosts\":[\"bound.test\"]}"
expect_status "set a secret for alice" 201

# ---- 1 ----
as "$ASEC" POST /v1/sandboxes -d '{"networkEnabled":true}'
expect_status "create with networkEnabled answers 201" 201
expect_json "its limits say networkEnabled" 'j["limits"]["networkEnabled"] is True'
ID=$(json_get "$BODY" 'j["id"]')
ex "$ASEC" "$ID" 'echo "proxy=$HTTP_PROXY"; curl -sS http://other.test:8444/first'
if out | grep -x 'proxy=http://127.0.0.1:3128' >/dev/null && got /first; then
    pass "exec 1 reaches the allowed upstream through the proxy"; else
    fail "exec 1 reaches the allowed upstream through the proxy" "$BODY"; fi
expect_json "exec 1's egress record: one allowed connection to other.test, with the sandbox id" \
    "[(r['host'], r['verdict'], r['connections'], r['sandboxId']) for r in j['egress']] == [('other.test', 'allowed', 1, '$ID')] and j['egress'][0]['bytesDown'] > 0"
ex "$ASEC" "$ID" 'curl -sS http://other.test:8444/second'
if got /second; then pass "exec 2 reaches it too (the proxy lives with the sandbox)"; else
    fail "exec 2 reaches it too (the proxy lives with the sandbox)" "$BODY"; fi
expect_json "exec 2's egress record holds its own connection only" \
    "[(r['host'], r['connections']) for r in j['egress']] == [('other.test', 1)]"
ex "$ASEC" "$ID" 'true'
expect_json "an exec with no traffic has no egress record" "'egress' not in j"
ex "$ASEC" "$ID" 'sleep 1; curl -sS http://other.test:8444/background; sleep 60' bg
expect_json "a background exec starts" 'j["success"] and len(j["processId"]) == 36'
for _ in $(seq 1 100); do got /background && break; sleep 0.1; done
if got /background; then pass "a background process keeps its network"; else
    fail "a background process keeps its network" "$(cat "$REC")"; fi
ex "$ASEC" "$ID" 'curl -sS -o /dev/null -w "%{http_code}\n" http://meta.test:8444/x; curl -sS -o /dev/null -w "%{http_code}\n" http://10.0.0.1:8111/x; echo done'
if [ "$(out | tr '\n' ' ')" = "403 403 done " ] && [ "$(caught)" = 0 ]; then
    pass "forbidden addresses are refused (a name resolving to one, and a literal)"; else
    fail "forbidden addresses are refused (a name resolving to one, and a literal)" "$BODY caught=$(caught)"; fi
expect_json "the exec's egress record says refused" \
    "any(r.get('verdict')=='refused' for r in j.get('egress',[]))"

# ---- 2 ----
ex "$ASEC" "$ID" 'echo "var=$GH_TOKEN"; echo "ca=$SSL_CERT_FILE"; curl -sS -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/live-https'
PH=$(out | sed -n 's/^var=//p')
case "$PH" in skd_secret_*) pass "the live sandbox holds a placeholder" ;; *) fail "the live sandbox holds a placeholder" "$BODY" ;; esac
if rec_has '"/live-https"' "\"Bearer $VALUE\""; then pass "curl over HTTPS to the bound host delivers the value (no -k)"; else
    fail "curl over HTTPS to the bound host delivers the value (no -k)" "$BODY $(cat "$REC")"; fi
expect_json "the exec's egress record names the substitution and the sandbox" \
    "any(r.get('host')=='bound.test' and r.get('substituted')==['GH_TOKEN'] and r.get('sandboxId')=='$ID' for r in j['egress'])"
EXEC=$(json_get "$BODY" 'j.get("executionId","")')
ex "$ASEC" "$ID" 'cat /proc/self/environ | tr "\0" "\n"; env; echo end'
if out | grep "GH_TOKEN=$PH" >/dev/null && ! out | grep -F "$VALUE" >/dev/null; then
    pass "the value is in no environ of the live sandbox"; else fail "the value is in no environ of the live sandbox" "$BODY"; fi
ex "$ASEC" "$ID" 'curl -sS -H "Authorization: Bearer $GH_TOKEN" http://other.test:8444/live-unbound'
if rec_has '"/live-unbound"' "\"Bearer $PH\""; then pass "an unbound host sees only the placeholder"; else
    fail "an unbound host sees only the placeholder" "$(cat "$REC")"; fi
as "$BSEC" POST /v1/sandboxes -d '{"networkEnabled":true}'
expect_status "bob creates a live sandbox with network" 201
BID2=$(json_get "$BODY" 'j["id"]')
ex "$BSEC" "$BID2" "echo \"bob=\${GH_TOKEN-unset}\"; curl -sS -H \"Authorization: Bearer $PH\" http://bound.test:8444/live-bob"
if out | grep -x 'bob=unset' >/dev/null; then pass "another key's live sandbox has no variable"; else
    fail "another key's live sandbox has no variable" "$BODY"; fi
if rec_has '"/live-bob"' "\"Bearer $PH\""; then pass "another key's live sandbox: the placeholder is not replaced"; else
    fail "another key's live sandbox: the placeholder is not replaced" "$(cat "$REC")"; fi
as "$BSEC" DELETE "/v1/sandboxes/$BID2"

# ---- pause, resume, fork keep the network (a new proxy each time) ----
as "$ASEC" POST "/v1/sandboxes/$ID/pause"
expect_status "a sandbox with network pauses" 200
as "$ASEC" POST "/v1/sandboxes/$ID/resume"
expect_status "and resumes" 200
ex "$ASEC" "$ID" 'echo "var=$GH_TOKEN"; curl -sS -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/after-resume'
if out | grep -x "var=$PH" >/dev/null && rec_has '"/after-resume"' "\"Bearer $VALUE\""; then
    pass "after a resume: a new proxy, the same placeholder, the value delivered over HTTPS"; else
    fail "after a resume: a new proxy, the same placeholder, the value delivered over HTTPS" "$BODY"; fi
expect_json "the resumed sandbox's egress record names it" \
    "any(r.get('host')=='bound.test' and r.get('sandboxId')=='$ID' for r in j.get('egress',[]))"
as "$ASEC" POST "/v1/sandboxes/$ID/fork"
expect_status "a sandbox with network forks" 201
FID=$(json_get "$BODY" 'j["id"]')
ex "$ASEC" "$FID" 'curl -sS -H "Authorization: Bearer $GH_TOKEN" https://bound.test:8445/in-fork'
if rec_has '"/in-fork"' "\"Bearer $VALUE\""; then pass "the fork has its own proxy and the key's secrets"; else
    fail "the fork has its own proxy and the key's secrets" "$BODY $(cat "$REC")"; fi
expect_json "the fork's egress record names the fork, not its source" \
    "any(r.get('sandboxId')=='$FID' for r in j.get('egress',[])) and not any(r.get('sandboxId')=='$ID' for r in j.get('egress',[]))"
as "$ASEC" DELETE "/v1/sandboxes/$FID"
expect_status "the fork is deleted" 200

# ---- 3 ----
if [ -n "$EXEC" ]; then
    as "$ASEC" GET "/v1/executions/$EXEC"
    expect_json "the exec's audit row names the substitution and the sandbox, without the value" \
        "'GH_TOKEN' in json.dumps(j) and '$ID' in json.dumps(j) and '$VALUE' not in json.dumps(j)"
else
    fail "the exec's audit row names the substitution and the sandbox, without the value" "no executionId"
fi
as "$ASEC" GET /v1/usage
expect_json "/v1/usage counts the live sandbox's egress bytes" \
    "sum(u['egressBytes'] for u in j['usage']) > 0"
ex "$ASEC" "$ID" 'sleep 0.5; curl -sS http://bound.test:8444/after-last-exec' bg
for _ in $(seq 1 100); do got /after-last-exec && break; sleep 0.1; done
sleep 0.3
as "$ASEC" DELETE "/v1/sandboxes/$ID"
expect_status "delete" 200
expect_json "delete's result carries what the proxy did since the last exec (a background process's request)" \
    "[(r['host'], r['connections'], r['sandboxId']) for r in j['egress']] == [('bound.test', 1, '$ID')]"
DEL_EXEC=$(json_get "$BODY" 'j.get("executionId","")')
as "$ASEC" GET "/v1/executions/$DEL_EXEC"
expect_json "the delete's audit row holds them, with its bytes" \
    "j['skill'] == 'sandbox_delete' and j['egress'][0]['host'] == 'bound.test' and j['usage']['egressBytes'] > 0"

# A sandbox its idle timeout ends: what no call took becomes a row of its own.
as "$ASEC" POST /v1/sandboxes -d '{"networkEnabled":true,"idleTimeoutMs":1000}'
RID=$(json_get "$BODY" 'j["id"]')
ex "$ASEC" "$RID" 'sleep 0.2; curl -sS http://other.test:8444/reaped; sleep 60' bg
for _ in $(seq 1 50); do
    as "$ASEC" GET "/v1/sandboxes/$RID"
    [ "$STATUS" = 404 ] && break
    sleep 0.2
done
expect_status "the idle timeout ends it" 404
as "$ASEC" GET "/v1/executions?skill=sandbox_end"
expect_json "a sandbox_end row records its egress, named with its id" \
    "any(x['skill'] == 'sandbox_end' and x['egress'][0]['sandboxId'] == '$RID' and x['usage']['egressBytes'] > 0 for x in j['executions'])"

# ---- 4 ----
as "$ASEC" POST /v1/sandboxes -d '{}'
NID=$(json_get "$BODY" 'j["id"]')
ex "$ASEC" "$NID" 'echo "proxy=${HTTP_PROXY-unset}"; cat /proc/net/route | wc -l; ip -o link 2>/dev/null | wc -l; curl -sS --max-time 3 http://127.0.0.2:8444/nonet; echo "rc=$?"'
if out | grep -x 'proxy=unset' >/dev/null && out | grep -x 'rc=7' >/dev/null && ! got /nonet; then
    pass "without networkEnabled: no proxy variables and no route"; else
    fail "without networkEnabled: no proxy variables and no route" "$BODY"; fi
as "$ASEC" DELETE "/v1/sandboxes/$NID"

# ---- 5 ----
# nfd: the server's descriptors, but the store's files (its connections
# are opened per thread as threads first use it).
nfd() { find "/proc/$SRV_PID/fd" -mindepth 1 -printf '%l\n' | grep -vc '/skilld\.db'; }
cycle() {
    local i id
    for i in $(seq 1 "$1"); do
        as "$ASEC" POST /v1/sandboxes -d '{"networkEnabled":true}'
        id=$(json_get "$BODY" 'j["id"]')
        ex "$ASEC" "$id" 'curl -sS http://other.test:8444/loop >/dev/null; sleep 30' bg
        ex "$ASEC" "$id" 'curl -sS http://other.test:8444/loop >/dev/null'
        as "$ASEC" DELETE "/v1/sandboxes/$id"
    done
}
# spawner_pid: this server's spawner (a skilld-spawner below it).
spawner_pid() {
    local p q
    for p in $(pgrep -x skilld-spawner); do
        q=$p
        for _ in 1 2 3 4; do
            q=$(awk '/^PPid:/{print $2}' "/proc/$q/status" 2>/dev/null)
            [ -n "$q" ] || break
            [ "$q" = "$SRV_PID" ] && { echo "$p"; return; }
        done
    done
}
cycle 2 # the proxy's threads, the CA and the server's pools exist
SPW=$(spawner_pid)
before=$(nfd)
sp_before=$(ls "/proc/$SPW/fd" 2>/dev/null | wc -l)
cycle 10
after=$(nfd)
sp_after=$(ls "/proc/$SPW/fd" 2>/dev/null | wc -l)
# With PostgreSQL a store connection is a socket, opened the first time a
# thread uses the store: that may add one that is no leak. A second batch
# tells them apart: a leak grows again, a warm pool does not.
if [ "$after" -gt "$before" ]; then
    first=$after
    cycle 10
    after=$(nfd)
    [ "$after" -le "$first" ] && after=$before
fi
if [ "$after" -le "$before" ]; then pass "10 creates and deletes leave no descriptor in the server ($before -> $after)"; else
    fail "10 creates and deletes leave no descriptor in the server" "$before -> $after: $(ls -l /proc/$SRV_PID/fd)"; fi
if [ -n "$SPW" ] && [ "$sp_before" -gt 0 ] && [ "$sp_after" -le "$sp_before" ]; then
    pass "nor in the spawner ($sp_before -> $sp_after)"; else
    fail "nor in the spawner" "pid '$SPW': $sp_before -> $sp_after"; fi
# Live sandboxes with network still up when the server stops: it stops
# cleanly (under ASan: nothing leaked), and their egress becomes rows.
as "$ASEC" POST /v1/sandboxes -d '{"networkEnabled":true}'
SID=$(json_get "$BODY" 'j["id"]')
ex "$ASEC" "$SID" 'curl -sS http://other.test:8444/at-stop; sleep 60' bg
for _ in $(seq 1 100); do got /at-stop && break; sleep 0.1; done
sleep 0.3
if stop_server; then pass "the server stops cleanly with a live sandbox with network up"; else
    fail "the server stops cleanly with a live sandbox with network up" "$(tail -5 "$TMP/serve.err")"; fi
# The operator does not allow network: networkEnabled is refused.
rm -f "$TMP/serve.out"
start_server SKILLS_SANDBOX_RUNTIME=native
as "$ASEC" GET "/v1/executions?skill=sandbox_end"
expect_json "the sandbox ended by the stop left its egress in a sandbox_end row" \
    "any(x['egress'][0]['sandboxId'] == '$SID' and x['usage']['egressBytes'] > 0 for x in j['executions'])"
as "$ASEC" POST /v1/sandboxes -d '{"networkEnabled":true}'
expect_status "networkEnabled without the operator's SKILLS_SANDBOX_NETWORK_ENABLED is 403, as for a one-shot run" 403
expect_json "the refusal names networkEnabled" 'j["error"]["code"] == "forbidden" and "networkEnabled" in j["error"]["message"]'
stop_server
if grep -qF -- "$VALUE" "$TMP/serve.err" "$TMP/serve.out"; then fail "the value is in no log" "found"; else
    pass "the value is in no log"; fi
finish
