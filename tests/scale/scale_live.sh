#!/usr/bin/env bash
# Live sandboxes across replicas (issue 30): three skilld replicas on one
# PostgreSQL 15 behind HAProxy (scale_lib.sh), each reached by the others
# at SKILLD_REPLICA_URL with the secret they share.
#   L1 a sandbox made through r1 is exec'd through r2 and r3 (state kept),
#      streamed through r2 (output events before the result), listed and
#      read through r3, refused to another key through r2, deleted through
#      r3: then gone everywhere, and no process of it left
#   L2 the per-key live cap counts every replica: with a cap of 3, a fourth
#      sandbox is refused (429 busy) whichever replica is asked
#   L3 a sandbox paused through r1 resumes through r3 with its files; an
#      exec through r2 while it is paused is 409 sandbox_paused
#   L4 bad forwarded calls: no secret or a wrong one is 401, a skill that
#      acts in no live sandbox is 400, nothing runs
#   L5 kill -9 of the replica that holds a sandbox: sandbox_lost (410)
#      through the others within the lease, no process of it left; a
#      paused sandbox it held is listed through r1 and resumes through r3
#      with its files (DATA_DIR is shared), and its delete leaves no file
#   L7 the per-key paused cap counts every replica: with a cap of 2, a
#      third pause is refused (429 busy) on a third replica; a resume
#      counts against the live cap over every replica
#   L8 a holder stopped (SIGSTOP) past the lease while its sandbox is
#      paused: another replica takes it over and resumes it, and the
#      stalled one, woken, forwards its calls there instead of answering
#      from its stale record
#   L9 a key revoked through r1 while r2 runs a sandbox of it (a
#      background process in it) and r3 holds a paused one: within a
#      bounded wait r2 ends its sandbox (no process of it left, its row
#      done) and r3 ends the paused one (its saved files removed)
#   L6 calls through HAProxy (round robin, no stickiness) reach the sandbox
#      whichever replica answers
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/scale_lib.sh"
trap 'scale_down; rm -rf "$TMP"' EXIT
: "${SKILLD_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
REPLICA_EXTRA="SKILLS_SANDBOX_MAX_LIVE_PER_KEY=3 SKILLS_SANDBOX_MAX_PAUSED_PER_KEY=2"

scale_up || { fail "scale_up" "the cluster did not come up: $(tail -5 "$TMP"/r*.err "$TMP/haproxy.log" 2>/dev/null)"; finish; }
pass "three_replicas_up_behind_haproxy"
ADM=(-H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json')
rreq 1 POST /v1/keys "${ADM[@]}" -d '{"name":"live-a","scopes":["skills:read","skills:execute"]}'
KA=(-H "Authorization: Bearer $(json_get "$BODY" 'j["secret"]')" -H 'Content-Type: application/json')
rreq 1 POST /v1/keys "${ADM[@]}" -d '{"name":"live-b","scopes":["skills:read","skills:execute"]}'
KB=(-H "Authorization: Bearer $(json_get "$BODY" 'j["secret"]')" -H 'Content-Type: application/json')
jq_() { json_get "$BODY" "$1" 2>/dev/null; }
exec_in() { # exec_in N ID KEYVAR COMMAND ARG...
    local n=$1 id=$2 kv=$3[@]; shift 3
    local body
    body=$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1], "args": sys.argv[2:]}))' "$@")
    rreq "$n" POST "/v1/sandboxes/$id/exec" "${!kv}" -d "$body"
}

# ---------------- L1 ----------------
rreq 1 POST /v1/sandboxes "${KA[@]}" -d '{}'
ID=$(jq_ 'j["id"]')
if [ "$STATUS" = 201 ] && [ -n "$ID" ]; then pass "L1_created_through_r1"; else fail "L1_created_through_r1" "status $STATUS ${BODY:0:300}"; fi
exec_in 2 "$ID" KA sh -c 'echo from-r2 > /tmp/mark; echo $$ > /tmp/pid; cat /tmp/mark'
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["stdout"]')" = "from-r2" ]; then pass "L1_exec_through_r2_runs_in_it"; else fail "L1_exec_through_r2_runs_in_it" "status $STATUS ${BODY:0:300}"; fi
exec_in 3 "$ID" KA cat /tmp/mark
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["stdout"]')" = "from-r2" ]; then pass "L1_exec_through_r3_sees_what_r2s_wrote"; else fail "L1_exec_through_r3_sees_what_r2s_wrote" "status $STATUS ${BODY:0:300}"; fi
xid=$(jq_ 'j["executionId"]')
n_audit=$(psql -X -tA "$PG_URL" -c "SELECT count(*) FROM executions WHERE id='$xid' AND skill='sandbox_exec'")
if [ "$n_audit" = 1 ]; then pass "L1_forwarded_exec_has_one_audit_row_under_the_holders_execution_id"; else fail "L1_forwarded_exec_has_one_audit_row_under_the_holders_execution_id" "id '$xid': $n_audit rows"; fi
# A streamed exec through r2: stdout events, then the result.
curl -sS -N -X POST "${KA[@]}" -H 'Accept: text/event-stream' \
    -d '{"command":"sh","args":["-c","echo a; sleep 1; echo b"]}' \
    "http://127.0.0.1:${R_PORT[2]}/v1/sandboxes/$ID/exec" >"$TMP/l1.sse" 2>&1
ev=$(grep '^event:' "$TMP/l1.sse" | tr -d '\r' | awk '{print $2}' | tr '\n' ' ')
if [ "$ev" = "stdout stdout result " ]; then pass "L1_stream_through_r2_relays_output_events_then_the_result"; else fail "L1_stream_through_r2_relays_output_events_then_the_result" "events '$ev': $(head -c 400 "$TMP/l1.sse")"; fi
if grep -q '"stdout": *"a\\nb\\n"' "$TMP/l1.sse"; then pass "L1_streamed_result_holds_the_whole_output"; else fail "L1_streamed_result_holds_the_whole_output" "$(tail -c 400 "$TMP/l1.sse")"; fi
rreq 3 GET "/v1/sandboxes/$ID" "${KA[@]}"
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["id"]')" = "$ID" ] && [ "$(jq_ 'j["state"]')" = running ]; then pass "L1_get_through_r3"; else fail "L1_get_through_r3" "status $STATUS ${BODY:0:300}"; fi
rreq 2 GET /v1/sandboxes "${KA[@]}"
if [ "$STATUS" = 200 ] && [ "$(jq_ '[s["replica"] for s in j["sandboxes"] if s["id"] == "'"$ID"'"]')" = '["r1"]' ]; then pass "L1_list_through_r2_names_r1_as_holder"; else fail "L1_list_through_r2_names_r1_as_holder" "status $STATUS ${BODY:0:300}"; fi
rreq 2 GET /v1/sandboxes "${KB[@]}"
if [ "$STATUS" = 200 ] && [ "$(jq_ 'len(j["sandboxes"])')" = 0 ]; then pass "L1_another_key_lists_none"; else fail "L1_another_key_lists_none" "${BODY:0:300}"; fi
bad=""
for n in 1 2 3; do
    rreq "$n" GET "/v1/sandboxes/$ID" "${KB[@]}"; [ "$STATUS" = 404 ] || bad="$bad get@r$n=$STATUS"
    exec_in "$n" "$ID" KB true; [ "$STATUS" = 404 ] || bad="$bad exec@r$n=$STATUS"
    rreq "$n" POST "/v1/sandboxes/$ID/pause" "${KB[@]}"; [ "$STATUS" = 404 ] || bad="$bad pause@r$n=$STATUS"
    rreq "$n" DELETE "/v1/sandboxes/$ID" "${KB[@]}"; [ "$STATUS" = 404 ] || bad="$bad delete@r$n=$STATUS"
    rreq "$n" POST /v1/execute "${KB[@]}" -d '{"skill":"eval_code","input":{"language":"python","code":"1","sandboxId":"'"$ID"'"}}'
    [ "$STATUS" = 404 ] || bad="$bad eval@r$n=$STATUS"
done
if [ -z "$bad" ]; then pass "L1_another_key_gets_404_on_every_route_through_every_replica"; else fail "L1_another_key_gets_404_on_every_route_through_every_replica" "$bad"; fi
exec_in 2 "$ID" KA sh -c 'sleep 4242 & echo started'
rreq 3 DELETE "/v1/sandboxes/$ID" "${KA[@]}"
if [ "$STATUS" = 200 ]; then pass "L1_deleted_through_r3"; else fail "L1_deleted_through_r3" "status $STATUS ${BODY:0:300}"; fi
gone=""
for n in 1 2 3; do rreq "$n" GET "/v1/sandboxes/$ID" "${KA[@]}"; gone="$gone$STATUS "; done
if [ "$gone" = "404 404 404 " ]; then pass "L1_gone_on_every_replica_after_the_delete"; else fail "L1_gone_on_every_replica_after_the_delete" "$gone"; fi
left=1; for _ in $(seq 1 40); do pgrep -f "sleep 4242" >/dev/null || { left=0; break; }; sleep 0.05; done
if [ "$left" = 0 ]; then pass "L1_no_process_of_it_left"; else fail "L1_no_process_of_it_left" "$(pgrep -af 'sleep 4242')"; fi
st=$(psql -X -tA "$PG_URL" -c "SELECT state FROM runs WHERE id='$ID'")
if [ "$st" = done ]; then pass "L1_its_row_is_done"; else fail "L1_its_row_is_done" "state '$st'"; fi

# ---------------- L2 ----------------
ids=()
for n in 1 2 3; do rreq "$n" POST /v1/sandboxes "${KA[@]}" -d '{}'; [ "$STATUS" = 201 ] && ids+=("$(jq_ 'j["id"]')"); done
codes=""
for n in 1 2 3; do rreq "$n" POST /v1/sandboxes "${KA[@]}" -d '{}'; codes="$codes$STATUS:$(jq_ 'j["error"]["code"]') "; done
if [ "${#ids[@]}" = 3 ] && [ "$codes" = "429:busy 429:busy 429:busy " ]; then pass "L2_per_key_live_cap_holds_over_every_replica"; else fail "L2_per_key_live_cap_holds_over_every_replica" "${#ids[@]} made; then $codes"; fi
rreq 2 POST /v1/sandboxes "${KB[@]}" -d '{}'
if [ "$STATUS" = 201 ]; then pass "L2_another_key_is_not_held_by_that_cap"; else fail "L2_another_key_is_not_held_by_that_cap" "status $STATUS ${BODY:0:200}"; fi
IDB=$(jq_ 'j["id"]')
for i in "${!ids[@]}"; do rreq $((i % 3 + 1)) DELETE "/v1/sandboxes/${ids[$i]}" "${KA[@]}"; done
rreq 1 DELETE "/v1/sandboxes/$IDB" "${KB[@]}"

# ---------------- L3 ----------------
rreq 2 POST /v1/sandboxes "${KA[@]}" -d '{}'
P=$(jq_ 'j["id"]')
exec_in 1 "$P" KA sh -c 'echo kept > /tmp/f; mkdir -p /usr/local/share/l3 && echo layer > /usr/local/share/l3/g; echo ok'
wrote=$(jq_ 'j["stdout"]')
rreq 1 POST "/v1/sandboxes/$P/pause" "${KA[@]}"
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["state"]')" = paused ]; then pass "L3_paused_through_r1"; else fail "L3_paused_through_r1" "status $STATUS ${BODY:0:300}"; fi
exec_in 2 "$P" KA true
if [ "$STATUS" = 409 ] && [ "$(jq_ 'j["error"]["code"]')" = sandbox_paused ]; then pass "L3_exec_through_r2_while_paused_is_409"; else fail "L3_exec_through_r2_while_paused_is_409" "status $STATUS ${BODY:0:300}"; fi
rreq 3 GET /v1/sandboxes "${KA[@]}"
if [ "$(jq_ '[s["state"] for s in j["sandboxes"] if s["id"] == "'"$P"'"]')" = '["paused"]' ]; then pass "L3_listed_paused_through_r3"; else fail "L3_listed_paused_through_r3" "${BODY:0:300}"; fi
rreq 3 POST "/v1/sandboxes/$P/resume" "${KA[@]}"
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["state"]')" = running ]; then pass "L3_resumed_through_r3"; else fail "L3_resumed_through_r3" "status $STATUS ${BODY:0:300}"; fi
exec_in 1 "$P" KA sh -c 'cat /tmp/f /usr/local/share/l3/g'
if [ "$wrote" = ok ] && [ "$(jq_ 'j["stdout"]')" = "kept
layer" ]; then pass "L3_its_tmp_and_root_layer_are_as_at_the_pause"; else fail "L3_its_tmp_and_root_layer_are_as_at_the_pause" "wrote '$wrote'; ${BODY:0:300}"; fi
rreq 3 POST "/v1/sandboxes/$P/fork" "${KA[@]}"
F=$(jq_ 'j["id"]')
exec_in 2 "$F" KA cat /tmp/f
if [ -n "$F" ] && [ "$STATUS" = 200 ] && [ "$(jq_ 'j["stdout"]')" = kept ]; then pass "L3_fork_through_r3_has_its_files"; else fail "L3_fork_through_r3_has_its_files" "fork '$F' status $STATUS ${BODY:0:300}"; fi
rreq 1 DELETE "/v1/sandboxes/$F" "${KA[@]}"
rreq 1 DELETE "/v1/sandboxes/$P" "${KA[@]}"

# ---------------- L4 ----------------
rcall() { # rcall N SECRET BODY
    BODY=$(curl -sS -o - -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' \
        ${2:+-H "Skilld-Replica-Secret: $2"} -d "$3" "http://127.0.0.1:${R_PORT[$1]}/v1/replica/call")
    STATUS=${BODY##*$'\n'}; BODY=${BODY%$'\n'*}
}
KAID=$(psql -X -tA "$PG_URL" -c "SELECT id FROM api_keys WHERE name='live-a'")
CALL='{"keyId":"'"$KAID"'","scopes":3,"skill":"execute_command","input":{"command":"touch","args":["/workspace/l4"]},"from":"x"}'
rcall 1 "" "$CALL"; s_none=$STATUS
rcall 1 "wrong-secret-wrong-secret-wrong-secret" "$CALL"; s_wrong=$STATUS
secret=$(printf '%s\n' "${REPLICA_ENV[@]}" | sed -n 's/^SKILLD_REPLICA_SECRET=//p')
rcall 1 "$secret" "$CALL"; s_skill=$STATUS
rcall 1 "$secret" '{"keyId":"x"}'; s_shape=$STATUS
if [ "$s_none $s_wrong $s_skill $s_shape" = "401 401 400 400" ] && ! ls "$TMP/data/workspaces"/*/l4 >/dev/null 2>&1; then
    pass "L4_forwarded_calls_need_the_secret_and_a_live_sandbox_skill"
else fail "L4_forwarded_calls_need_the_secret_and_a_live_sandbox_skill" "no secret $s_none, wrong $s_wrong, other skill $s_skill, bad shape $s_shape"; fi

# ---------------- L6 ----------------
rreq 3 POST /v1/sandboxes "${KA[@]}" -d '{}'
H=$(jq_ 'j["id"]')
ok=0; reps=""
for i in $(seq 1 9); do
    out=$(curl -sS -D "$TMP/l6.h" -X POST "${KA[@]}" -d '{"command":"sh","args":["-c","echo '"$i"' >> /tmp/n; wc -l < /tmp/n"]}' "$LB/v1/sandboxes/$H/exec")
    [ "$(json_get "$out" 'j["stdout"].strip()' 2>/dev/null)" = "$i" ] && ok=$((ok + 1))
    reps="$reps $(tr -d '\r' <"$TMP/l6.h" | awk -F': ' 'tolower($1)=="skilld-replica"{print $2}')"
done
nrep=$(echo "$reps" | tr ' ' '\n' | sort -u | grep -c .)
if [ "$ok" = 9 ] && [ "$nrep" -ge 2 ]; then pass "L6_round_robin_calls_all_reach_the_one_sandbox"; else fail "L6_round_robin_calls_all_reach_the_one_sandbox" "$ok of 9 in order; answered by:$reps"; fi
rreq 1 DELETE "/v1/sandboxes/$H" "${KA[@]}"

# ---------------- L7 ----------------
ids=()
for n in 1 2 3; do rreq "$n" POST /v1/sandboxes "${KB[@]}" -d '{}'; ids+=("$(jq_ 'j["id"]')"); done
codes=""
for n in 1 2 3; do rreq "$n" POST "/v1/sandboxes/${ids[$((n - 1))]}/pause" "${KB[@]}"; codes="$codes$STATUS:$(jq_ 'j.get("state") or j["error"]["code"]') "; done
msg=$(jq_ 'j["error"]["message"]')
if [ "$codes" = "200:paused 200:paused 429:busy " ] && [[ "$msg" == *SKILLS_SANDBOX_MAX_PAUSED_PER_KEY* ]]; then
    pass "L7_per_key_paused_cap_holds_over_every_replica"
else fail "L7_per_key_paused_cap_holds_over_every_replica" "$codes; $msg"; fi
# Two paused, one running: two more make the live cap (3) full, and a
# resume through the third replica is refused until one is deleted.
more=()
for n in 1 2; do rreq "$n" POST /v1/sandboxes "${KB[@]}" -d '{}'; more+=("$(jq_ 'j["id"]')"); done
rreq 3 POST "/v1/sandboxes/${ids[0]}/resume" "${KB[@]}"
r1="$STATUS:$(jq_ 'j["error"]["code"]')"
rreq 3 GET "/v1/sandboxes/${ids[0]}" "${KB[@]}"
st1=$(jq_ 'j["state"]')
rreq 2 DELETE "/v1/sandboxes/${more[0]}" "${KB[@]}"
rreq 3 POST "/v1/sandboxes/${ids[0]}/resume" "${KB[@]}"
r2="$STATUS:$(jq_ 'j["state"]')"
if [ "$r1 $st1 $r2" = "429:busy paused 200:running" ]; then pass "L7_a_resume_counts_against_the_live_cap_over_every_replica"
else fail "L7_a_resume_counts_against_the_live_cap_over_every_replica" "full: $r1 (then $st1); after a delete: $r2"; fi
for i in "${!ids[@]}"; do rreq $((i % 3 + 1)) DELETE "/v1/sandboxes/${ids[$i]}" "${KB[@]}"; done
rreq 1 DELETE "/v1/sandboxes/${more[1]}" "${KB[@]}"

# ---------------- L8 ----------------
rreq 1 POST /v1/sandboxes "${KA[@]}" -d '{}'
S=$(jq_ 'j["id"]')
exec_in 1 "$S" KA sh -c 'echo s-kept > /tmp/s; echo ok'
rreq 1 POST "/v1/sandboxes/$S/pause" "${KA[@]}"
kill -STOP "${R_PID[1]}"
expired=0
for _ in $(seq 1 200); do
    [ "$(psql -X -tA "$PG_URL" -c "SELECT count(*) FROM runs WHERE id='$S' AND lease_until_ms < extract(epoch from clock_timestamp()) * 1000")" = 1 ] && { expired=1; break; }
    sleep 0.1
done
rreq 3 POST "/v1/sandboxes/$S/resume" "${KA[@]}"
r3="$STATUS:$(jq_ 'j["state"]')"
kill -CONT "${R_PID[1]}"
exec_in 1 "$S" KA cat /tmp/s
r1="$STATUS:$(jq_ 'j["stdout"]')"
if [ "$expired $r3 $r1" = "1 200:running 200:s-kept" ]; then pass "L8_a_stalled_holder_gives_way_to_the_replica_that_took_its_paused_sandbox"
else fail "L8_a_stalled_holder_gives_way_to_the_replica_that_took_its_paused_sandbox" "lease expired: $expired; resume through r3: $r3; exec through r1 after: $r1 ${BODY:0:200}"; fi
rreq 3 DELETE "/v1/sandboxes/$S" "${KA[@]}"

# ---------------- L9 ----------------
rreq 1 POST /v1/keys "${ADM[@]}" -d '{"name":"live-r","scopes":["skills:read","skills:execute"]}'
KRID=$(jq_ 'j["id"]')
KR=(-H "Authorization: Bearer $(jq_ 'j["secret"]')" -H 'Content-Type: application/json')
rreq 2 POST /v1/sandboxes "${KR[@]}" -d '{}'
RS=$(jq_ 'j["id"]')
rreq 2 POST "/v1/sandboxes/$RS/exec" "${KR[@]}" -d '{"command":"sleep","args":["1919"],"background":true}'
started=$(pgrep -f "sleep 1919" | wc -l)
rreq 3 POST /v1/sandboxes "${KR[@]}" -d '{}'
RP=$(jq_ 'j["id"]')
exec_in 3 "$RP" KR sh -c 'echo r > /tmp/r; echo ok'
rreq 3 POST "/v1/sandboxes/$RP/pause" "${KR[@]}"
saved=$(find "$TMP/data/snapshots/paused" -mindepth 1 -maxdepth 1 -name "$RP" 2>/dev/null)
held=$(psql -X -tA "$PG_URL" -c "SELECT replica || ':' || state FROM runs WHERE id IN ('$RS','$RP') ORDER BY replica")
rreq 1 DELETE "/v1/keys/$KRID" "${ADM[@]}"
revoked=$STATUS
gone=0
for _ in $(seq 1 150); do # bounded: a tick every 2 s on each replica, and a margin
    if ! pgrep -f "sleep 1919" >/dev/null && [ -z "$(find "$TMP/data/snapshots/paused" -mindepth 1 -maxdepth 1 -name "$RP" 2>/dev/null)" ] &&
        [ "$(psql -X -tA "$PG_URL" -c "SELECT string_agg(state, ',' ORDER BY state) FROM runs WHERE id IN ('$RS','$RP')")" = "done,done" ]; then
        gone=1
        break
    fi
    sleep 0.1
done
if [ "$started" -ge 1 ] && [ -n "$saved" ] && [ "$held" = "r2:running
r3:paused" ] && [ "$revoked" = 204 ] && [ "$gone" = 1 ]; then
    pass "L9_a_key_revoked_through_r1_ends_its_sandboxes_on_r2_and_r3"
else fail "L9_a_key_revoked_through_r1_ends_its_sandboxes_on_r2_and_r3" "started $started; saved '$saved'; held '$held'; revoke $revoked; left: $(pgrep -af 'sleep 1919'); files $(find "$TMP/data/snapshots/paused" -mindepth 1 -maxdepth 1 2>/dev/null); rows $(psql -X -tA "$PG_URL" -c "SELECT id, replica, state FROM runs WHERE id IN ('$RS','$RP')")"; fi

# ---------------- L5 ----------------
rreq 2 POST /v1/sandboxes "${KA[@]}" -d '{}'
Q=$(jq_ 'j["id"]')
exec_in 2 "$Q" KA sh -c 'echo q-kept > /tmp/q; mkdir -p /usr/local/share/q && echo q-layer > /usr/local/share/q/g; echo ok'
rreq 2 POST "/v1/sandboxes/$Q/pause" "${KA[@]}"
[ "$(jq_ 'j["state"]')" = paused ] || fail "L5_a_paused_sandbox_on_r2" "status $STATUS ${BODY:0:300}"
rreq 2 POST /v1/sandboxes "${KA[@]}" -d '{}'
K=$(jq_ 'j["id"]')
rreq 1 POST "/v1/sandboxes/$K/exec" "${KA[@]}" -d '{"command":"sleep","args":["4747"],"background":true}'
started=$(pgrep -f "sleep 4747" | wc -l)
kill_ms=$(now_ms)
kill -9 "${R_PID[2]}"
code=""; t0=$(now_ms)
# bound: the lease (3000 ms) plus a sweep interval (a third of it), plus a
# margin for a loaded machine
while [ $(($(now_ms) - t0)) -lt 7000 ]; do
    rreq 1 GET "/v1/sandboxes/$K" "${KA[@]}"
    code="$STATUS:$(jq_ 'j["error"]["code"]')"
    [ "$code" = "410:sandbox_lost" ] && break
    sleep 0.1
done
lost_ms=$(($(now_ms) - kill_ms))
echo "# L5: r2's sandbox answered sandbox_lost through r1 ${lost_ms} ms after kill -9 (lease 3000 ms)"
if [ "$code" = "410:sandbox_lost" ]; then pass "L5_owner_killed_sandbox_lost_within_the_lease"; else fail "L5_owner_killed_sandbox_lost_within_the_lease" "last answer $code after $lost_ms ms"; fi
exec_in 3 "$K" KA true
if [ "$STATUS" = 410 ]; then pass "L5_exec_through_r3_is_410_too"; else fail "L5_exec_through_r3_is_410_too" "status $STATUS ${BODY:0:200}"; fi
left=1; for _ in $(seq 1 40); do pgrep -f "sleep 4747" >/dev/null || { left=0; break; }; sleep 0.05; done
if [ "$started" -ge 1 ] && [ "$left" = 0 ]; then pass "L5_no_process_of_its_sandbox_left"; else fail "L5_no_process_of_its_sandbox_left" "started $started; left: $(pgrep -af 'sleep 4747')"; fi
rreq 1 GET /v1/sandboxes "${KA[@]}"
if [ "$(jq_ '[s for s in j["sandboxes"] if s["id"] == "'"$K"'"]')" = "[]" ]; then pass "L5_lost_sandbox_is_no_longer_listed"; else fail "L5_lost_sandbox_is_no_longer_listed" "${BODY:0:300}"; fi
if [ "$(jq_ '[(s["state"], s["replica"]) for s in j["sandboxes"] if s["id"] == "'"$Q"'"]')" = '[["paused", null]]' ]; then
    pass "L5_the_dead_replicas_paused_sandbox_is_listed_unheld"
else fail "L5_the_dead_replicas_paused_sandbox_is_listed_unheld" "${BODY:0:400}"; fi
# Four first calls at once through the two replicas left: one claims it,
# and a call that loses the claim is forwarded to the one that won.
cpids=()
for i in 1 2 3 4; do
    curl -sS -o /dev/null -w '%{http_code}\n' "${KA[@]}" "http://127.0.0.1:${R_PORT[$((i % 2 * 2 + 1))]}/v1/sandboxes/$Q" >"$TMP/l5.$i" &
    cpids+=($!)
done
wait "${cpids[@]}" # not the replicas, which are children too
got="$(cat "$TMP"/l5.[1-4] | tr '\n' ' ')"
if [ "$got" = "200 200 200 200 " ]; then pass "L5_four_first_calls_at_once_all_reach_it"; else fail "L5_four_first_calls_at_once_all_reach_it" "$got"; fi
rreq 3 POST "/v1/sandboxes/$Q/resume" "${KA[@]}"
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["state"]')" = running ]; then pass "L5_the_dead_replicas_paused_sandbox_resumes_through_r3"; else fail "L5_the_dead_replicas_paused_sandbox_resumes_through_r3" "status $STATUS ${BODY:0:300}"; fi
exec_in 1 "$Q" KA sh -c 'cat /tmp/q /usr/local/share/q/g'
if [ "$STATUS" = 200 ] && [ "$(jq_ 'j["stdout"]')" = "q-kept
q-layer" ]; then pass "L5_with_its_tmp_and_root_layer_and_reached_through_r1"; else fail "L5_with_its_tmp_and_root_layer_and_reached_through_r1" "status $STATUS ${BODY:0:300}"; fi
rreq 1 DELETE "/v1/sandboxes/$Q" "${KA[@]}"
if [ "$STATUS" = 200 ] && [ -z "$(find "$TMP/data/snapshots" -mindepth 2 -maxdepth 2 -name "$Q*" 2>/dev/null)" ]; then
    pass "L5_its_delete_leaves_no_saved_file"
else fail "L5_its_delete_leaves_no_saved_file" "status $STATUS; $(find "$TMP/data/snapshots" -mindepth 2 -maxdepth 2 2>/dev/null)"; fi

finish
