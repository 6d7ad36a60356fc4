#!/usr/bin/env bash
# Metering through the real server (DESIGN.md, "Metering"; docs/usage.md):
# a busy loop's CPU read from its run's cgroup, the bytes a call wrote into
# the workspace, /v1/usage per tenant, the per-key CPU budget, and the same
# numbers in the store's audit rows, in /v1/usage and in /metrics.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

# A CPU budget of 1 s a day: the busy loop of key A spends it.
start_server SKILLS_KEY_CPU_SECONDS_PER_DAY=1
A=(-H "Authorization: Bearer $ADMIN")
read -r AID ASEC <<<"$(new_key tenant-a skills:read,skills:execute)"
read -r BID BSEC <<<"$(new_key tenant-b skills:read,skills:execute)"
KA=(-H "Authorization: Bearer $ASEC")
KB=(-H "Authorization: Bearer $BSEC")

# A busy loop that spends 1.5 s of its own CPU time and says how much it spent.
BUSY='import time
while time.process_time() < 1.5: pass
print(time.process_time())'
req POST /v1/execute "${KA[@]}" -d "$(python3 -c 'import json,sys; print(json.dumps({"skill":"execute_command","input":{"command":"python3","args":["-c",sys.argv[1]]}}))' "$BUSY")"
expect_status "a 1.5 s busy loop runs" 200
LOOP_ID=$(json_get "$BODY" 'j["executionId"]')
expect_json "the loop spent 1.5 s of CPU by its own count" 'float(j["stdout"]) >= 1.5'

req GET "/v1/executions/$LOOP_ID" "${KA[@]}"
expect_json "its audit row holds one sandbox run of at least 1.2 s of CPU" \
    'j["usage"]["sandboxRuns"]==1 and j["usage"]["sandboxCpuMs"]>=1200'
expect_json "its audit row holds the run's memory peak" 'j["usage"]["sandboxMemoryPeakBytes"]>0'

# 200 KB written into the workspace by the sandbox, and 200 KB by file_write.
req POST /v1/execute "${KB[@]}" -d '{"skill":"execute_command","input":{"command":"dd","args":["if=/dev/zero","of=/workspace/blob","bs=1000","count=200"]}}'
expect_status "a sandboxed 200 KB write runs" 200
python3 -c 'import json; print(json.dumps({"skill":"file_write","input":{"path":"f.txt","content":"x"*200000}}))' >"$TMP/write.json"
req POST /v1/execute "${KB[@]}" --data-binary @"$TMP/write.json"
expect_status "a 200 KB file_write runs" 200

req GET /v1/usage "${KB[@]}"
expect_status "a tenant reads its usage" 200
expect_json "a tenant's /v1/usage shows only itself" "[r['keyId'] for r in j['usage']]==['$BID']"
expect_json "both 200 KB writes are counted" \
    'j["usage"][0]["workspaceBytes"]==400000 and j["usage"][0]["executions"]==2 and j["usage"][0]["sandboxRuns"]==1'
req GET "/v1/usage?key=$AID" "${KB[@]}"
expect_status "a tenant may not read another key's usage" 403

req GET /v1/usage "${KA[@]}"
expect_json "tenant A sees its own CPU" "[r['keyId'] for r in j['usage']]==['$AID'] and j['usage'][0]['sandboxCpuMs']>=1200"

# The budget (1 s) is spent: the next sandboxed call is refused, with why.
req POST /v1/execute "${KA[@]}" -d '{"skill":"execute_command","input":{"command":"true"}}'
expect_status "past its CPU budget a sandboxed call is refused (quota_exceeded: 507)" 507
expect_json "the refusal is quota_exceeded and names the budget" \
    'j["error"]["code"]=="quota_exceeded" and "SKILLS_KEY_CPU_SECONDS_PER_DAY=1" in j["error"]["message"]'
REFUSED=$(json_get "$BODY" 'j["executionId"]')
req GET "/v1/executions/$REFUSED" "${KA[@]}"
expect_json "the refused call's audit row keeps its code and message" \
    'j["errorCode"]=="quota_exceeded" and "SKILLS_KEY_CPU_SECONDS_PER_DAY=1" in j["errorMessage"] and j["usage"]["sandboxRuns"]==0'
req GET "/v1/executions/$LOOP_ID" "${KA[@]}"
expect_json "a successful call's row has no error message" '"errorMessage" not in j'
req POST /v1/execute "${KA[@]}" -d '{"skill":"file_write","input":{"path":"a.txt","content":"a"}}'
expect_status "a call without a sandbox is not held to the CPU budget" 200
req POST /v1/execute "${KB[@]}" -d '{"skill":"execute_command","input":{"command":"true"}}'
expect_status "another key's budget is its own" 200

req GET "/v1/usage?since=0&until=1" "${A[@]}"
expect_json "a time range outside the calls has no rows" 'j["usage"]==[]'
req GET "/v1/usage?since=5&until=5" "${A[@]}"
expect_status "an empty range is refused" 400
req GET "/v1/usage?since=yesterday" "${A[@]}"
expect_status "a time that is not a number is refused" 400

# The admin sees every key; the three views agree.
NOW=$(date +%s%3N)
req GET "/v1/usage?since=$((NOW - 3600000))&until=$((NOW + 60000))&bucket=60000" "${A[@]}"
expect_status "the admin reads every key" 200
USAGE=$BODY
expect_json "the admin sees both tenants" "{'$AID','$BID'} <= {r['keyId'] for r in j['usage']}"
expect_json "the series per bucket sums to the totals" \
    "all(sum(s['sandboxCpuMs'] for s in j['series'] if s['keyId']==r['keyId']) <= r['sandboxCpuMs'] and sum(s['executions'] for s in j['series'] if s['keyId']==r['keyId'])==r['executions'] for r in j['usage'])"
req GET /metrics "${A[@]}"
METRICS=$BODY
if stop_server; then pass "the server stops cleanly"; else fail "the server stops cleanly" "$(tail -5 "$TMP/serve.err")"; fi

# db_sums KEY_ID: "executions|sandbox runs|cpu us|workspace bytes" of the
# key's audit rows, read from the database by another client.
db_sums() {
    store_sql "SELECT COUNT(*), SUM(sandbox_runs), SUM(cpu_us), SUM(workspace_bytes) FROM executions WHERE key_id='$1'"
}
if python3 - "$USAGE" "$METRICS" "$AID" "$(db_sums "$AID")" "$BID" "$(db_sums "$BID")" <<'EOF'; then
import json, re, sys
usage, metrics = json.loads(sys.argv[1]), sys.argv[2]
rows = {r["keyId"]: r for r in usage["usage"]}
for key, sums in ((sys.argv[3], sys.argv[4]), (sys.argv[5], sys.argv[6])):
    n, runs, cpu, ws = (int(x) for x in sums.split("|"))
    r = rows[key]
    assert (n, runs, cpu, ws) == (r["executions"], r["sandboxRuns"], r["sandboxCpuUs"], r["workspaceBytes"]), (key, sums, r)
    m = re.search(r'^skilld_sandbox_cpu_seconds_total\{key="%s"\} ([0-9.]+)$' % key, metrics, re.M)
    assert m and abs(float(m.group(1)) * 1e6 - cpu) < 1, ("cpu", key, m and m.group(1), cpu)
    m = re.search(r'^skilld_workspace_bytes_written_total\{key="%s"\} (\d+)$' % key, metrics, re.M)
    assert m and int(m.group(1)) == ws, ("ws", key)
    m = re.search(r'^skilld_sandbox_runs_total\{key="%s"\} (\d+)$' % key, metrics, re.M)
    assert m and int(m.group(1)) == runs, ("runs", key)
    ex = sum(int(v) for v in re.findall(r'^skilld_key_executions_total\{key="%s",skill="[^"]+",status="[a-z]+"\} (\d+)$' % key, metrics, re.M))
    assert ex == n, ("executions", key, ex, n)
EOF
    pass "the store, /v1/usage and /metrics agree per key"
else
    fail "the store, /v1/usage and /metrics agree per key"
fi

# A tenant's /metrics shows its own key's rows only; SKILLD_METRICS_MAX_KEYS
# folds the keys past the bound into key="_other".
start_server SKILLD_METRICS_MAX_KEYS=1
req POST /v1/execute "${KA[@]}" -d '{"skill":"file_write","input":{"path":"b.txt","content":"bb"}}'
req POST /v1/execute "${KB[@]}" -d '{"skill":"file_write","input":{"path":"b.txt","content":"bbb"}}'
req GET /metrics "${KB[@]}"
if grep -q "key=\"$AID\"" <<<"$BODY" || grep -q 'key="_other"' <<<"$BODY"; then
    fail "a tenant's /metrics has no other key's label" "${BODY:0:300}"
else
    pass "a tenant's /metrics has no other key's label"
fi
req GET /metrics "${A[@]}"
if grep -q "skilld_workspace_bytes_written_total{key=\"$AID\"} 2$" <<<"$BODY" &&
    grep -q 'skilld_workspace_bytes_written_total{key="_other"} 3$' <<<"$BODY"; then
    pass "past SKILLD_METRICS_MAX_KEYS keys are summed under _other"
else
    fail "past SKILLD_METRICS_MAX_KEYS keys are summed under _other" "$(grep workspace_bytes <<<"$BODY")"
fi
if stop_server; then pass "the second server stops cleanly"; else fail "the second server stops cleanly" "$(tail -5 "$TMP/serve.err")"; fi
finish
