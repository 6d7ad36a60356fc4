#!/usr/bin/env bash
# Tenant policy through the real server, as a hostile tenant would try it:
# a manifest above each of the operator's ceilings is refused and nothing is
# registered; a timeout above the ceiling in a call is refused; a skill
# stored before a ceiling was lowered runs clamped and says so;
# networkEnabled:true is forbidden unless the operator allows it, on
# native, docker and podman, before any container exists; a sandbox that
# writes 50 MiB into a 10 MiB-quota workspace leaves it within the quota,
# the run says why, and the store still works (native, docker, podman); a
# run within the quota is committed, a killed one changes nothing; tenant
# writes never take the store's reserve; temporary files are reserved,
# never counted, and swept at start.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../integration/server_common.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# restart ENV=VALUE...: stop the server and start it again on the same
# DATA_DIR (no admin secret is printed after the first start).
restart() {
    stop_server
    PORT=$(free_port)
    URL="http://127.0.0.1:$PORT"
    env SKILLD_TEST_SKILLS=true "$@" "$SKILLD_TEST_BIN" --data-dir "$DATA" serve --listen "127.0.0.1:$PORT" \
        >"$TMP/serve.out" 2>"$TMP/serve.err" &
    SRV_PID=$!
    for _ in $(seq 1 200); do
        curl -fsS "$URL/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.05
    done
    fail "restart $*" "$(tail -5 "$TMP/serve.err")"
}

start_server
read -r AID ASEC < <(new_key alice skills:read,skills:execute)
A=(-H "Authorization: Bearer $ASEC" -H 'Content-Type: application/json')
# manifest NAME RUN-EXTRA: a command skill printing {"ok": true}; RUN-EXTRA
# is more members of "run" ('"timeoutMs":5000').
manifest() {
    python3 -c 'import json,sys; r=json.loads("{"+sys.argv[2]+"}"); r["command"]=["/bin/echo","{\"ok\": true}"]
print(json.dumps({"name":sys.argv[1],"version":"1.0.0","description":"d","inputSchema":{"type":"object"},"run":r}))' "$1" "${2:-}"
}
listed() { req GET /v1/skills "${A[@]}"; python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if any(s["name"]==sys.argv[2] for s in j["skills"]) else 1)' "$BODY" "$1"; }

# -- 1. manifest limits over each ceiling ------------------------------------------------
while read -r field value setting; do
    name="over-$(echo "$field" | tr 'A-Z' 'a-z')"
    req POST /v1/skills "${A[@]}" -d "$(manifest "$name" "\"$field\":$value")"
    if [ "$STATUS" = 400 ] && python3 -c 'import json,sys; j=json.loads(sys.argv[1]); e=j["error"]; sys.exit(0 if e["code"]=="invalid_input" and sys.argv[2] in e["message"] and "manifest.run" in e["message"] else 1)' "$BODY" "$setting" &&
       ! listed "$name"; then
        pass "manifest $field above $setting refused, nothing registered"
    else fail "manifest $field above $setting refused, nothing registered" "$STATUS $BODY"; fi
done <<'EOF'
timeoutMs 3600000 SKILLS_SANDBOX_MAX_TIMEOUT_MS
memoryLimit 1048576 SKILLS_SANDBOX_MAX_MEMORY_MB
cpuLimit 102400 SKILLS_SANDBOX_MAX_CPU
pidsLimit 65536 SKILLS_SANDBOX_MAX_PIDS
outputLimit 1073741824 SKILLS_SANDBOX_MAX_OUTPUT_BYTES
tmpSize 68719476736 SKILLS_SANDBOX_MAX_TMP_MB
EOF
# At the ceilings it is accepted.
req POST /v1/skills "${A[@]}" -d "$(manifest at-ceilings '"timeoutMs":60000,"memoryLimit":1024,"pidsLimit":256,"outputLimit":1048576,"tmpSize":268435456')"
expect_status "a manifest at every ceiling is accepted" 201

# -- a call input above a ceiling ---------------------------------------------------------
req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"true","timeoutMs":600000}}'
expect_json "execute_command timeoutMs above the ceiling is invalid_input naming it" \
    'j["error"]["code"]=="invalid_input" and "SKILLS_SANDBOX_MAX_TIMEOUT_MS=60000" in j["error"]["message"]'
req POST /v1/execute "${A[@]}" -d '{"skill":"eval_code","input":{"language":"sh","code":"true","timeoutMs":60001}}'
expect_json "eval_code timeoutMs above the ceiling is invalid_input" 'j["error"]["code"]=="invalid_input"'

# -- a stored skill above a ceiling lowered later runs clamped ---------------------------
req POST /v1/skills "${A[@]}" -d "$(manifest slowish '"timeoutMs":30000,"memoryLimit":512')"
expect_status "a skill with timeoutMs 30000 registers under the default ceiling" 201
restart SKILLS_SANDBOX_MAX_TIMEOUT_MS=5000 SKILLS_SANDBOX_MAX_MEMORY_MB=256
grep -q 'stored skill slowish@1.0.0 is above a ceiling' "$TMP/serve.err" &&
    pass "start-up warns about the stored skill above a ceiling" || fail "start-up warns about the stored skill above a ceiling" "$(cat "$TMP/serve.err")"
listed slowish && pass "the stored skill is still listed" || fail "the stored skill is still listed" "$BODY"
req POST /v1/execute "${A[@]}" -d '{"skill":"slowish","input":{}}'
expect_json "it runs clamped and says clamped: [timeout, memoryLimit]" \
    'j["success"] is True and j["ok"] is True and j["clamped"]==["timeout","memoryLimit"]'
req POST /v1/skills "${A[@]}" -d "$(manifest slowish2 '"timeoutMs":30000')"
expect_json "registering it now is refused naming the lowered ceiling" \
    'j["error"]["code"]=="invalid_input" and "SKILLS_SANDBOX_MAX_TIMEOUT_MS=5000" in j["error"]["message"]'
restart SKILLS_SANDBOX_TIMEOUT_MS=30000 SKILLS_SANDBOX_MAX_TIMEOUT_MS=5000
grep -q 'SKILLS_SANDBOX_TIMEOUT_MS=30000 is above the ceiling SKILLS_SANDBOX_MAX_TIMEOUT_MS=5000' "$TMP/serve.err" &&
    pass "a default above its ceiling is clamped with a start-up warning" || fail "a default above its ceiling is clamped with a start-up warning" "$(cat "$TMP/serve.err")"
req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sleep","args":["30"]}}'
expect_json "the clamped default timeout applies (5 s, not 30 s)" 'j["timedOut"] is True and j["durationMs"] < 20000'

# -- 2. networkEnabled is the operator's decision ----------------------------------------
restart
req POST /v1/skills "${A[@]}" -d "$(manifest netty '"networkEnabled":true')"
if [ "$STATUS" = 403 ] && python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["error"]["code"]=="forbidden" and "SKILLS_SANDBOX_NETWORK_ENABLED" in j["error"]["message"] else 1)' "$BODY" && ! listed netty; then
    pass "manifest networkEnabled:true is forbidden, nothing registered"
else fail "manifest networkEnabled:true is forbidden, nothing registered" "$STATUS $BODY"; fi
req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"true","networkEnabled":true}}'
expect_json "native: networkEnabled:true is forbidden" 'j["error"]["code"]=="forbidden" and "networkEnabled" in j["error"]["message"]'

if "$ROOT/scripts/setup-containers.sh" >"$TMP/setup.log" 2>&1; then
    for R in docker podman; do
        restart SKILLS_SANDBOX_RUNTIME=$R SKILLS_ALLOWED_SANDBOX_IMAGES=skilld-test
        # Other skilld users of the engine may come and go: only a new
        # container counts.
        "$R" ps -a -q --no-trunc --filter label=skilld=1 | sort >"$TMP/before"
        req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","echo ran"],"image":"skilld-test:1","networkEnabled":true}}'
        "$R" ps -a -q --no-trunc --filter label=skilld=1 | sort >"$TMP/after"
        new=$(comm -13 "$TMP/before" "$TMP/after")
        if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["error"]["code"]=="forbidden" and "ran" not in j.get("stdout","") else 1)' "$BODY" && [ -z "$new" ]; then
            pass "$R: networkEnabled:true is forbidden, no container made"
        else fail "$R: networkEnabled:true is forbidden, no container made" "$BODY (new: $new)"; fi
        req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","echo ran"],"image":"skilld-test:1"}}'
        expect_json "$R: the same call without network runs" 'j["success"] is True and j["stdout"]=="ran\n"'
    done
    # Allowed by the operator: doctor reports the guarded egress proxy (the
    # only network a container gets; tests/security/egress.sh drives it).
    out=$(SKILLS_SANDBOX_NETWORK_ENABLED=true SKILLS_SANDBOX_RUNTIME=docker "$SKILLD" --data-dir "$DATA" doctor --json 2>/dev/null)
    if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); c=[x for x in j["checks"] if x["name"]=="egress_proxy"]; sys.exit(0 if c and c[0]["status"]=="ok" and "169.254.169.254 was refused" in c[0]["detail"] else 1)' "$out"; then
        pass "doctor reports that an allowed network goes through the guarded egress proxy"
    else fail "doctor reports that an allowed network goes through the guarded egress proxy" "$(echo "$out" | head -c 600)"; fi
else
    fail "containers set up" "$(tail -5 "$TMP/setup.log")"
fi

# -- 3. the workspace quota holds inside the sandbox ------------------------------------
WS="$DATA/workspaces/$(printf %s "$AID" | sha256sum | cut -d' ' -f1)"
RUN_IDS=""
used() { find "$WS" -type f -printf '%s\n' 2>/dev/null | awk '{s+=$1} END {print s+0}'; }
for R in native docker podman; do
    restart SKILLS_WORKSPACE_QUOTA_BYTES=10485760 SKILLS_SANDBOX_RUNTIME=$R SKILLS_ALLOWED_SANDBOX_IMAGES=skilld-test
    img=""; [ "$R" = native ] || img=',"image":"skilld-test:1"'
    req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","echo keep > /workspace/small-'$R'.txt; dd if=/dev/zero of=/workspace/big-'$R' bs=1M count=50 2>&1 | tail -1; echo done"]'"$img"'}}'
    if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); w=j["workspace"]; sys.exit(0 if j["success"] is False and j["error"]["code"]=="quota_exceeded" and "SKILLS_WORKSPACE_QUOTA_BYTES" in j["error"]["message"] and w["kept"] is False and "done" in j["stdout"] else 1)' "$BODY" &&
       [ "$(used)" -le 10485760 ] && [ ! -e "$WS/big-$R" ] && [ ! -e "$WS/small-$R.txt" ]; then
        pass "$R: 50 MiB into a 10 MiB quota: nothing kept, the run says why"
    else fail "$R: 50 MiB into a 10 MiB quota: nothing kept, the run says why" "used=$(used) ${BODY:0:600}"; fi
    req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","head -c 1000 /dev/zero > /workspace/ok-'$R'.bin"]'"$img"'}}'
    if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["success"] is True and j["workspace"]["kept"] is True else 1)' "$BODY" &&
       [ "$(stat -c %s "$WS/ok-$R.bin" 2>/dev/null)" = 1000 ]; then
        pass "$R: a run within the quota is committed to the workspace"
    else fail "$R: a run within the quota is committed to the workspace" "${BODY:0:400}"; fi
    req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","echo x > /workspace/killed-'$R'; sleep 30"],"timeoutMs":1500'"$img"'}}'
    if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["timedOut"] is True and j["workspace"]["kept"] is False else 1)' "$BODY" && [ ! -e "$WS/killed-$R" ]; then
        pass "$R: a killed run changes nothing in the workspace"
    else fail "$R: a killed run changes nothing in the workspace" "${BODY:0:400}"; fi
    RUN_IDS="$RUN_IDS $(json_get "$BODY" 'j.get("sandboxId","")')"
    # The store still works: the audit of those runs is there, and a skill registers.
    req GET /v1/executions "${A[@]}"
    expect_json "$R: the store still works after the quota refusal (executions listed)" 'len(j["executions"]) >= 3'
done
req POST /v1/skills "${A[@]}" -d "$(manifest after-quota)"
expect_status "the store still takes a registration" 201
# doctor says which mechanism holds the quota.
for mode in overlay off; do
    out=$(SKILLS_SANDBOX_WORKSPACE_QUOTA=$mode "$SKILLD" --data-dir "$DATA" doctor --json 2>/dev/null)
    want=$([ $mode = overlay ] && echo ok || echo warn)
    if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); c=[x for x in j["checks"] if x["name"]=="workspace_quota"]; sys.exit(0 if c and c[0]["status"]==sys.argv[2] and ("mechanism "+sys.argv[3]) in c[0]["detail"] else 1)' "$out" "$want" "$mode"; then
        pass "doctor reports the quota mechanism ($mode: $want)"
    else fail "doctor reports the quota mechanism ($mode: $want)" "$(echo "$out" | grep -A3 workspace_quota)"; fi
done
# None of this test's runs left its overlay mounted (other users of the
# machine may have theirs mounted right now: only our run ids count).
left=""
for id in $RUN_IDS; do grep -q "/$id" /proc/self/mounts && left="$left $id"; done
[ -n "$RUN_IDS" ] && [ -z "$left" ] && pass "no quota overlay of these runs left mounted" ||
    fail "no quota overlay of these runs left mounted" "ids: ${RUN_IDS:-none} left:$left"

# Entries: empty directories cost no byte of the quota, so the workspace's
# files, directories and links are bounded apart (SKILLS_WORKSPACE_MAX_ENTRIES),
# for sandboxed code and file skills alike, and nothing over it is kept.
entries() { find "$WS" -mindepth 1 ! -name '.skd-tmp-*' 2>/dev/null | wc -l; }
cap=$(( $(entries) + 10 ))
restart SKILLS_WORKSPACE_MAX_ENTRIES=$cap
req POST /v1/execute "${A[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","mkdir /workspace/many && cd /workspace/many && for i in $(seq 30); do mkdir d$i; done; echo made"]}}'
if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); w=j["workspace"]; sys.exit(0 if j["success"] is False and w["kept"] is False and w["error"]["code"]=="quota_exceeded" and "SKILLS_WORKSPACE_MAX_ENTRIES" in w["error"]["message"] and "made" in j["stdout"] else 1)' "$BODY" &&
   [ ! -e "$WS/many" ] && [ "$(entries)" -le "$cap" ]; then
    pass "30 empty directories past SKILLS_WORKSPACE_MAX_ENTRIES: nothing kept, the run says why"
else fail "30 empty directories past SKILLS_WORKSPACE_MAX_ENTRIES: nothing kept, the run says why" "entries=$(entries) cap=$cap ${BODY:0:500}"; fi
for i in $(seq 10); do
    req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":"e'$i'.txt","content":"x"}}'
done
expect_json "the 10th new file is within SKILLS_WORKSPACE_MAX_ENTRIES" 'j["success"] is True'
req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":"e11.txt","content":"x"}}'
expect_json "a new file past SKILLS_WORKSPACE_MAX_ENTRIES is quota_exceeded, saying so" \
    'j["error"]["code"]=="quota_exceeded" and "SKILLS_WORKSPACE_MAX_ENTRIES" in j["error"]["message"]'
req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":"deep/a/b/c.txt","content":"x","mkdirs":true}}'
if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["error"]["code"]=="quota_exceeded" and "SKILLS_WORKSPACE_MAX_ENTRIES" in j["error"]["message"] else 1)' "$BODY" &&
   [ ! -e "$WS/deep" ]; then
    pass "mkdirs makes no directory past SKILLS_WORKSPACE_MAX_ENTRIES"
else fail "mkdirs makes no directory past SKILLS_WORKSPACE_MAX_ENTRIES" "$(ls "$WS") ${BODY:0:300}"; fi
req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":"e1.txt","content":"rewritten"}}'
expect_json "an existing file can still be rewritten at SKILLS_WORKSPACE_MAX_ENTRIES" 'j["success"] is True'
[ "$(entries)" -le "$cap" ] && pass "the workspace holds no more entries than the bound" ||
    fail "the workspace holds no more entries than the bound" "entries=$(entries) cap=$cap"

# The store's reserve: a tenant write that would eat into it is refused;
# the store itself keeps working.
restart SKILLS_DATA_RESERVE_BYTES=9223372036854775807
req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":"r.txt","content":"x"}}'
expect_json "file_write into the store's reserve is quota_exceeded" \
    'j["error"]["code"]=="quota_exceeded" and "SKILLS_DATA_RESERVE_BYTES" in j["error"]["message"]'
req POST /v1/skills "${A[@]}" -d "$(manifest in-reserve)"
expect_status "the store still writes inside the reserve" 201

# Temporary files: reserved for the workspace layer, never counted, swept at start.
req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":".skd-tmp-0123456789abcdef","content":"x"}}'
expect_json "a client may not name a file .skd-tmp-*" 'j["error"]["code"]=="invalid_path"'
head -c 5000000 /dev/zero >"$WS/.skd-tmp-00000000000000aa"
touch -d '2 hours ago' "$WS/.skd-tmp-00000000000000aa"
head -c 10 /dev/zero >"$WS/.skd-tmp-00000000000000bb"
restart SKILLS_WORKSPACE_QUOTA_BYTES=1000000
# No write holds the workspace's lock at start: both are a crashed writer's
# (a young one is left only where the lock is held: test_workspace_crash).
if [ ! -e "$WS/.skd-tmp-00000000000000aa" ] && [ ! -e "$WS/.skd-tmp-00000000000000bb" ]; then
    pass "an interrupted write's temporary files, old and young, are removed at start"
else fail "an interrupted write's temporary files, old and young, are removed at start" "$(ls -la "$WS")"; fi
head -c 900000 /dev/zero >"$WS/.skd-tmp-00000000000000cc"
req POST /v1/execute "${A[@]}" -d '{"skill":"file_write","input":{"path":"t.txt","content":"counted"}}'
expect_json "temporary files never count against the quota" 'j["success"] is True'
[ ! -e "$WS/.skd-tmp-00000000000000cc" ] && pass "a write removes what an interrupted write left" ||
    fail "a write removes what an interrupted write left" "$(ls -la "$WS")"

stop_server
finish
