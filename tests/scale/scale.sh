#!/usr/bin/env bash
# Scale-out (issue 11): three skilld replicas on one PostgreSQL 15 behind
# HAProxy 2.6 (deploy/haproxy.cfg), all started here on loopback.
#   S2 keys and custom skills reach every replica; a revocation within 1 s
#   S3 a key capped at 2 never has a third run anywhere (run rows' times)
#   S4 kill -9 of a replica under load: failures only while it dies, its
#      runs marked lost within the lease, no sandbox process left
#   S5 PostgreSQL stopped 5 s: prompt 503 store_unavailable; back within 5 s
#   S6 3 replicas x 50 concurrent overwrites: one writer's payload, whole
#   S7 a run started through r1, cancelled through r3: ended within 1 s
#   S9 rolling restart under load (SIGTERM, drain, rejoin): 0 failed calls
#   S1 300 MCP (2025) sessions through round robin: all succeed, >= 90%
#      served by two or more replicas (the 2026-07-28 stateless half waits
#      for that protocol revision)
#   S8 an A2A task created through r1 reads the same through r2; a cancel
#      through r3 stops it; a subscription on r2 gets the terminal event
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/scale_lib.sh"
trap 'scale_down; rm -rf "$TMP"' EXIT
: "${SKILLD_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
LOAD="$SKILLD_ROOT/tests/scale/load.py"

scale_up || { fail "scale_up" "the cluster did not come up: $(tail -5 "$TMP"/r*.err "$TMP/haproxy.log" 2>/dev/null)"; finish; }
pass "three_replicas_up_behind_haproxy"
ADM=(-H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json')

# The Skilld-Replica header names who answered; round robin spreads calls.
seen=""
for i in 1 2 3 4 5 6; do
    r=$(curl -sS -D - -o /dev/null "${ADM[@]}" "$LB/v1/skills" | tr -d '\r' | awk -F': ' 'tolower($1)=="skilld-replica"{print $2}')
    seen="$seen $r"
done
n=$(echo "$seen" | tr ' ' '\n' | sort -u | grep -c .)
if [ "$n" = 3 ]; then pass "round_robin_reaches_every_replica_header"; else fail "round_robin_reaches_every_replica_header" "saw:$seen"; fi

# ---------------- S1 ----------------
python3 "$LOAD" mcp "$LB" "$ADMIN" 300 20 >"$TMP/s1.jsonl"
read -r s1ok s1multi <<<"$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(sum(r["ok"] for r in rows), sum(len([x for x in r["replicas"] if x]) >= 2 for r in rows))' "$TMP/s1.jsonl")"
if [ "$s1ok" = 300 ]; then pass "S1_300_mcp_sessions_all_succeed"; else fail "S1_300_mcp_sessions_all_succeed" "$s1ok ok: $(grep -m2 '"ok": false' "$TMP/s1.jsonl")"; fi
if [ "$s1multi" -ge 270 ]; then pass "S1_90pct_sessions_served_by_2_or_more_replicas"; else fail "S1_90pct_sessions_served_by_2_or_more_replicas" "$s1multi of 300"; fi
echo "# S1: $s1ok sessions ok, $s1multi served by two or more replicas"
# S1, second half: 300 stateless 2026-07-28 calls (a write, then the read of
# it as a separate request), nothing kept between them in any replica.
python3 "$LOAD" stateless "$LB" "$ADMIN" 300 20 >"$TMP/s1x.jsonl"
read -r s1xok s1xreps <<<"$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(sum(r["ok"] for r in rows), len({r["replica"] for r in rows if r["replica"]}))' "$TMP/s1x.jsonl")"
if [ "$s1xok" = 300 ]; then pass "S1_300_stateless_2026_calls_all_succeed"; else fail "S1_300_stateless_2026_calls_all_succeed" "$s1xok ok: $(grep -m2 '"ok": false' "$TMP/s1x.jsonl")"; fi
if [ "$s1xreps" = 3 ]; then pass "S1_stateless_calls_spread_over_every_replica"; else fail "S1_stateless_calls_spread_over_every_replica" "$s1xreps replicas"; fi

# ---------------- S2 ----------------
rreq 1 POST /v1/keys "${ADM[@]}" -d '{"name":"s2","scopes":["skills:read","skills:execute"]}'
S2=$(json_get "$BODY" 'j["secret"]'); S2ID=$(json_get "$BODY" 'j["id"]')
K2=(-H "Authorization: Bearer $S2" -H 'Content-Type: application/json')
rreq 2 GET /v1/skills "${K2[@]}"
if [ "$STATUS" = 200 ]; then pass "S2_key_created_on_r1_works_on_r2_at_once"; else fail "S2_key_created_on_r1_works_on_r2_at_once" "status $STATUS"; fi
rreq 3 DELETE "/v1/keys/$S2ID" "${ADM[@]}"
t0=$(now_ms); ok=0
while [ $(($(now_ms) - t0)) -lt 1000 ]; do
    rreq 1 GET /v1/skills "${K2[@]}"; s1=$STATUS
    rreq 2 GET /v1/skills "${K2[@]}"; s2=$STATUS
    [ "$s1" = 401 ] && [ "$s2" = 401 ] && { ok=1; break; }
done
if [ "$ok" = 1 ]; then pass "S2_revoked_on_r3_refused_by_r1_r2_within_1s"; else fail "S2_revoked_on_r3_refused_by_r1_r2_within_1s" "r1 $s1 r2 $s2"; fi
MAN='{"name":"s2echo","version":"1.0.0","description":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"run":{"command":["/usr/bin/python3","-c","import json,sys; print(json.dumps({\"echo\": json.load(sys.stdin)[\"text\"]}))"],"timeoutMs":20000}}'
rreq 1 POST /v1/skills "${ADM[@]}" -d "$MAN"
reg=$STATUS
t0=$(now_ms); ok=0
while [ $(($(now_ms) - t0)) -lt 1000 ]; do
    rreq 3 GET /v1/skills/s2echo "${ADM[@]}"; g3=$STATUS
    rreq 2 GET /v1/skills/s2echo "${ADM[@]}"; g2=$STATUS
    [ "$g3" = 200 ] && [ "$g2" = 200 ] && { ok=1; break; }
done
dt=$(($(now_ms) - t0))
rreq 3 POST /v1/execute "${ADM[@]}" -d '{"skill":"s2echo","input":{"text":"from r3"}}'
if [ "$reg" = 201 ] && [ "$ok" = 1 ] && [ "$(json_get "$BODY" 'j.get("echo")')" = "from r3" ]; then
    pass "S2_skill_registered_on_r1_runs_on_r3"
else fail "S2_skill_registered_on_r1_runs_on_r3" "register $reg, visible $ok after ${dt} ms, run: ${BODY:0:200}"; fi
echo "# S2: registration visible on r2 and r3 after ${dt} ms"
rreq 2 DELETE /v1/skills/s2echo "${ADM[@]}"
del=$STATUS
t0=$(now_ms); ok=0
while [ $(($(now_ms) - t0)) -lt 1000 ]; do
    rreq 1 GET /v1/skills/s2echo "${ADM[@]}"; g1=$STATUS
    rreq 3 GET /v1/skills/s2echo "${ADM[@]}"; g3=$STATUS
    [ "$g1" = 404 ] && [ "$g3" = 404 ] && { ok=1; break; }
done
if [ "$del" = 204 ] || [ "$del" = 200 ] && [ "$ok" = 1 ]; then pass "S2_skill_deleted_on_r2_gone_from_r1_r3_within_1s"; else fail "S2_skill_deleted_on_r2_gone_from_r1_r3_within_1s" "delete $del, r1 $g1 r3 $g3"; fi

# ---------------- S3 ----------------
rreq 1 POST /v1/keys "${ADM[@]}" -d '{"name":"s3","scopes":["skills:read","skills:execute"]}'
S3=$(json_get "$BODY" 'j["secret"]'); S3ID=$(json_get "$BODY" 'j["id"]')
python3 "$LOAD" par "$LB" "$S3" 12 '{"skill":"execute_command","input":{"command":"sleep","args":["1"],"timeoutMs":30000}}' >"$TMP/s3.jsonl"
okn=$(grep -c '"ok": true' "$TMP/s3.jsonl")
reps=$(python3 -c 'import json,sys; print(len({json.loads(l)["replica"] for l in open(sys.argv[1])}))' "$TMP/s3.jsonl")
if [ "$okn" = 12 ]; then pass "S3_all_12_runs_succeed"; else fail "S3_all_12_runs_succeed" "$okn ok: $(grep -v '"ok": true' "$TMP/s3.jsonl" | head -2)"; fi
if [ "$reps" -ge 2 ]; then pass "S3_runs_spread_over_replicas"; else fail "S3_runs_spread_over_replicas" "$reps replica(s)"; fi
maxc=$(psql -X -tA "$PG_URL" -c "SELECT started_ms, ended_ms FROM runs WHERE key_id='$S3ID'" | python3 -c '
import sys
ev = []
for l in sys.stdin:
    if not l.strip(): continue
    s, e = l.strip().split("|"); ev += [(int(s), 1), (int(e), -1)]
ev.sort(key=lambda x: (x[0], x[1]))   # an end at the same ms comes first
cur = best = 0
for _, d in ev:
    cur += d; best = max(best, cur)
print(best, len(ev) // 2)')
if [ "${maxc% *}" -le 2 ] && [ "${maxc#* }" = 12 ]; then pass "S3_never_more_than_2_at_once"; else fail "S3_never_more_than_2_at_once" "max concurrent / rows: $maxc"; fi
echo "# S3: max concurrent, rows: $maxc"

# ---------------- S6 ----------------
python3 - "$ADMIN" "${R_PORT[1]}" "${R_PORT[2]}" "${R_PORT[3]}" >"$TMP/s6.out" <<'PY'
import http.client, json, sys, threading
secret, ports = sys.argv[1], sys.argv[2:]
payloads = {}
def w(r, i):
    p = ("r%s-w%02d:" % (r, i)) * 400
    payloads[(r, i)] = p
    c = http.client.HTTPConnection("127.0.0.1", int(ports[r]), timeout=60)
    c.request("POST", "/v1/execute", json.dumps({"skill": "file_write", "input": {"path": "s6/same.txt", "content": p, "mkdirs": True}}),
              {"Authorization": "Bearer " + secret, "Content-Type": "application/json"})
    ok[(r, i)] = json.loads(c.getresponse().read()).get("success") is True
ok = {}
ts = [threading.Thread(target=w, args=(r, i)) for r in range(3) for i in range(50)]
[t.start() for t in ts]; [t.join() for t in ts]
c = http.client.HTTPConnection("127.0.0.1", int(ports[0]), timeout=60)
c.request("POST", "/v1/execute", json.dumps({"skill": "file_read", "input": {"path": "s6/same.txt"}}),
          {"Authorization": "Bearer " + secret, "Content-Type": "application/json"})
content = json.loads(c.getresponse().read()).get("content")
print(sum(ok.values()), sum(1 for p in payloads.values() if p == content))
PY
read -r s6ok s6match <"$TMP/s6.out"
if [ "$s6ok" = 150 ]; then pass "S6_150_overwrites_succeed"; else fail "S6_150_overwrites_succeed" "$s6ok ok"; fi
if [ "$s6match" = 1 ]; then pass "S6_final_content_is_one_writers_payload"; else fail "S6_final_content_is_one_writers_payload" "matches $s6match payloads"; fi

# ---------------- S7 ----------------
(curl -sS -o "$TMP/s7.body" -w '%{http_code}' "${ADM[@]}" "http://127.0.0.1:${R_PORT[1]}/v1/execute" \
    -d '{"skill":"execute_command","input":{"command":"sleep","args":["37"],"timeoutMs":60000}}' >"$TMP/s7.status"; now_ms >"$TMP/s7.end") &
S7PID=$!
RID=""
for _ in $(seq 1 100); do
    rreq 3 GET "/v1/runs?state=running" "${ADM[@]}"
    RID=$(json_get "$BODY" '[r["id"] for r in j["runs"] if r["replica"]=="r1" and r["skill"]=="execute_command"][0]' 2>/dev/null) && [ -n "$RID" ] && break
    sleep 0.05
done
t0=$(now_ms)
rreq 3 DELETE "/v1/runs/$RID" "${ADM[@]}"
cst=$STATUS
wait "$S7PID"
dt=$(($(cat "$TMP/s7.end") - t0))
if [ "$cst" = 202 ] && [ "$dt" -lt 1000 ]; then pass "S7_cancel_through_r3_ends_r1_run_within_1s"; else fail "S7_cancel_through_r3_ends_r1_run_within_1s" "cancel $cst, ended after ${dt} ms"; fi
echo "# S7: cancel to end ${dt} ms"
if ! pgrep -f "sleep 37" >/dev/null; then pass "S7_sandbox_process_gone"; else fail "S7_sandbox_process_gone" "$(pgrep -af 'sleep 37')"; fi
st=$(psql -X -tA "$PG_URL" -c "SELECT state FROM runs WHERE id='$RID'")
if [ "$st" = cancelled ]; then pass "S7_run_row_cancelled"; else fail "S7_run_row_cancelled" "state $st"; fi

# ---------------- S8 ----------------
A2H=(-H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0')
rreq 1 POST /a2a "${A2H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"s8","parts":[{"data":{"skill":"execute_command","input":{"command":"sleep","args":["38"],"timeoutMs":60000}}}]},"configuration":{"returnImmediately":true}}}'
TID=$(json_get "$BODY" 'j["result"]["task"]["id"]' 2>/dev/null)
for _ in $(seq 1 100); do # until it works on r1
    rreq 2 POST /a2a "${A2H[@]}" -d "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"GetTask\",\"params\":{\"id\":\"$TID\"}}"
    [ "$(json_get "$BODY" 'j["result"]["status"]["state"]' 2>/dev/null)" = TASK_STATE_WORKING ] && break
    sleep 0.05
done
if [ -n "$TID" ] && [ "$(json_get "$BODY" 'j["result"]["id"]' 2>/dev/null)" = "$TID" ]; then pass "S8_task_created_on_r1_reads_the_same_on_r2"; else fail "S8_task_created_on_r1_reads_the_same_on_r2" "${BODY:0:300}"; fi
# a subscription on r2, then a cancel through r3
curl -sS -N -m 20 -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    -H 'Accept: text/event-stream' "http://127.0.0.1:${R_PORT[2]}/a2a" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"SubscribeToTask\",\"params\":{\"id\":\"$TID\"}}" >"$TMP/s8.sse" 2>/dev/null &
SUBPID=$!
sleep 0.5
t0=$(now_ms)
rreq 3 POST /a2a "${A2H[@]}" -d "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"CancelTask\",\"params\":{\"id\":\"$TID\"}}"
dt=$(($(now_ms) - t0))
st=$(json_get "$BODY" 'j["result"]["status"]["state"]' 2>/dev/null)
if [ "$st" = TASK_STATE_CANCELED ]; then pass "S8_cancel_through_r3_stops_it"; else fail "S8_cancel_through_r3_stops_it" "${BODY:0:300}"; fi
echo "# S8: CancelTask through r3 answered canceled after ${dt} ms"
if ! pgrep -f "sleep 38" >/dev/null; then pass "S8_task_sandbox_gone"; else fail "S8_task_sandbox_gone" "$(pgrep -af 'sleep 38')"; fi
wait "$SUBPID"
last=$(grep '^data:' "$TMP/s8.sse" | tail -1 | cut -c6-)
if [ "$(json_get "$last" 'j["result"]["task"]["status"]["state"]' 2>/dev/null)" = TASK_STATE_CANCELED ]; then
    pass "S8_subscription_on_r2_gets_the_terminal_event"
else fail "S8_subscription_on_r2_gets_the_terminal_event" "$(head -c 600 "$TMP/s8.sse")"; fi

# ---------------- S5 ----------------
pg_halt
worst=0; codes=""
for n in 1 2 3; do
    t0=$(now_ms); rreq "$n" GET /v1/skills "${ADM[@]}"; dt=$(($(now_ms) - t0))
    [ "$dt" -gt "$worst" ] && worst=$dt
    codes="$codes $STATUS:$(json_get "$BODY" 'j["error"]["code"]' 2>/dev/null)"
done
if [ "$(echo "$codes" | tr ' ' '\n' | grep -c '^503:store_unavailable$')" = 3 ] && [ "$worst" -lt 2000 ]; then
    pass "S5_outage_503_store_unavailable_within_2s"
else fail "S5_outage_503_store_unavailable_within_2s" "$codes worst ${worst} ms"; fi
sleep 5
pg_resume
t0=$(now_ms); back=""
while [ $(($(now_ms) - t0)) -lt 5000 ]; do
    back=""
    for n in 1 2 3; do rreq "$n" GET /v1/skills "${ADM[@]}"; [ "$STATUS" = 200 ] && back="$back r$n"; done
    [ "$back" = " r1 r2 r3" ] && break
    sleep 0.1
done
alive=0; for n in 1 2 3; do kill -0 "${R_PID[$n]}" 2>/dev/null && alive=$((alive + 1)); done
if [ "$back" = " r1 r2 r3" ] && [ "$alive" = 3 ]; then pass "S5_every_replica_serves_within_5s_without_restart"; else fail "S5_every_replica_serves_within_5s_without_restart" "back:$back alive $alive"; fi
echo "# S5: replicas back $(($(now_ms) - t0)) ms after the restart"
wait_lb_up 3 10 || fail "S5_haproxy_sees_all_up_again" "$(lb_up_count) up"

# ---------------- S4 ----------------
S4_SECONDS=${SKILLD_SCALE_S4_SECONDS:-60} # kill at 1/3, restart at 2/3 (the issue's 60/20/40)
rm -f "$TMP/stop4"
python3 "$LOAD" loop "$LB" "$ADMIN" "$TMP/stop4" 4 "$TMP/s4.jsonl" &
LOADPID=$!
# a long run on r2, to be lost with it
(curl -sS -o /dev/null "${ADM[@]}" "http://127.0.0.1:${R_PORT[2]}/v1/execute" \
    -d '{"skill":"execute_command","input":{"command":"sleep","args":["47"],"timeoutMs":60000}}' || true) &
sleep $((S4_SECONDS / 3))
R2RUN=$(psql -X -tA "$PG_URL" -c "SELECT id FROM runs WHERE replica='r2' AND state='running' LIMIT 1")
kill_ms=$(now_ms)
kill -9 "${R_PID[2]}"
t0=$(now_ms); lost=""
# bound: the lease (3000 ms) plus a sweep interval (a third of it), plus a margin
while [ $(($(now_ms) - t0)) -lt 5500 ]; do
    lost=$(psql -X -tA "$PG_URL" -c "SELECT state FROM runs WHERE id='$R2RUN'")
    [ "$lost" = lost ] && break
    sleep 0.1
done
lost_ms=$(($(now_ms) - kill_ms))
sleep $((S4_SECONDS / 3))
restart_ms=$(now_ms)
start_replica 2 || fail "S4_r2_restarts" "$(tail -3 "$TMP/r2.err")"
sleep $((S4_SECONDS / 3))
touch "$TMP/stop4"; wait "$LOADPID"
if [ -n "$R2RUN" ] && [ "$lost" = lost ]; then pass "S4_r2_run_marked_lost_within_the_lease"; else fail "S4_r2_run_marked_lost_within_the_lease" "run '$R2RUN' state '$lost' after ${lost_ms} ms"; fi
echo "# S4: r2's run marked lost ${lost_ms} ms after kill -9 (lease 3000 ms)"
if ! pgrep -f "sleep 47" >/dev/null; then pass "S4_no_sandbox_process_of_r2_remains"; else fail "S4_no_sandbox_process_of_r2_remains" "$(pgrep -af 'sleep 47')"; fi
read -r total bad wrong window <<<"$(python3 - "$TMP/s4.jsonl" "$kill_ms" "$restart_ms" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
k, r = int(sys.argv[2]) / 1000, int(sys.argv[3]) / 1000
bad = [x for x in rows if not x["ok"]]
wrong = [x for x in bad if x["code"] == "wrong_result"]
window = [x for x in bad if k + 1.5 <= x["t"] < r]
print(len(rows), len(bad), len(wrong), len(window))
PY
)"
echo "# S4: $total calls, $bad failed"
if [ "$wrong" = 0 ]; then pass "S4_no_wrong_result"; else fail "S4_no_wrong_result" "$wrong wrong"; fi
# at most the calls in flight on r2 when it died (4 load workers)
if [ "$bad" -le 4 ]; then pass "S4_failures_at_most_r2_in_flight"; else fail "S4_failures_at_most_r2_in_flight" "$bad failed of $total"; fi
if [ "$window" = 0 ]; then pass "S4_no_failure_from_1.5s_after_kill_to_restart"; else fail "S4_no_failure_from_1.5s_after_kill_to_restart" "$window"; fi
# the audit holds exactly one row per successful call
python3 -c 'import json,sys; [print(json.loads(l)["eid"]) for l in open(sys.argv[1]) if json.loads(l)["ok"]]' "$TMP/s4.jsonl" >"$TMP/s4.eids"
audit=$( (echo "CREATE TEMP TABLE ok(id text);"; echo "COPY ok FROM STDIN;"; cat "$TMP/s4.eids"; echo '\.';
    echo "SELECT (SELECT count(*) FROM ok), (SELECT count(*) FROM ok WHERE (SELECT count(*) FROM executions e WHERE e.id=ok.id AND e.status='success') <> 1);") |
    psql -X -q -tA "$PG_URL" | tail -1)
if [ "${audit%|*}" -gt 0 ] && [ "${audit#*|}" = 0 ]; then pass "S4_audit_one_row_per_successful_call"; else
    fail "S4_audit_one_row_per_successful_call" "ok calls|without exactly one row: $audit"
    (echo "CREATE TEMP TABLE ok(id text);"; echo "COPY ok FROM STDIN;"; cat "$TMP/s4.eids"; echo '\.';
        echo "SELECT ok.id, (SELECT count(*) FROM executions e WHERE e.id=ok.id), (SELECT string_agg(status, ',') FROM executions e WHERE e.id=ok.id) FROM ok WHERE (SELECT count(*) FROM executions e WHERE e.id=ok.id AND e.status='success') <> 1 LIMIT 5;") |
        psql -X -q -tA "$PG_URL" | sed 's/^/#   /'
    grep -h "audit" "$TMP"/r*.err | head -5 | sed 's/^/#   /'
fi
wait_lb_up 3 10 || fail "S4_haproxy_sees_r2_again" "$(lb_up_count) up"

# ---------------- S9 ----------------
rm -f "$TMP/stop9"
python3 "$LOAD" loop "$LB" "$ADMIN" "$TMP/stop9" 4 "$TMP/s9.jsonl" &
LOADPID=$!
sleep 1
for n in 1 2 3; do
    if [ "$n" = 1 ]; then # a call in flight when SIGTERM comes finishes
        (curl -sS -o "$TMP/s9.body" "${ADM[@]}" "http://127.0.0.1:${R_PORT[1]}/v1/execute" \
            -d '{"skill":"execute_command","input":{"command":"sleep","args":["3"],"timeoutMs":60000}}' || true) &
        INFL=$!
        sleep 0.5
    fi
    kill -TERM "${R_PID[$n]}"
    if [ "$n" = 1 ]; then
        sleep 0.3
        rreq 1 GET /healthz
        if [ "$STATUS" = 503 ] && [ "$(json_get "$BODY" 'j["error"]["code"]' 2>/dev/null)" = draining ]; then
            pass "S9_sigterm_turns_healthz_503_draining_first"
        else fail "S9_sigterm_turns_healthz_503_draining_first" "status $STATUS ${BODY:0:200}"; fi
        wait "$INFL"
        if [ "$(json_get "$(cat "$TMP/s9.body")" 'j["success"]' 2>/dev/null)" = true ]; then
            pass "S9_call_in_flight_at_sigterm_finishes"
        else fail "S9_call_in_flight_at_sigterm_finishes" "$(head -c 300 "$TMP/s9.body")"; fi
    fi
    wait "${R_PID[$n]}" 2>/dev/null
    start_replica "$n" || fail "S9_r${n}_restarts" "$(tail -3 "$TMP/r$n.err")"
    wait_lb_up 3 10 || fail "S9_r${n}_rejoins" "$(lb_up_count) up"
done
sleep 1
touch "$TMP/stop9"; wait "$LOADPID"
total=$(wc -l <"$TMP/s9.jsonl"); bad=$(grep -vc '"ok": true' "$TMP/s9.jsonl")
echo "# S9: $total calls during the rolling restart, $bad failed"
if [ "$total" -gt 20 ] && [ "$bad" = 0 ]; then pass "S9_rolling_restart_zero_failed_calls"; else fail "S9_rolling_restart_zero_failed_calls" "$bad of $total: $(grep -v '"ok": true' "$TMP/s9.jsonl" | head -3)"; fi
finish
