#!/usr/bin/env bash
# Live sandboxes (docs/sandbox.md, "Live sandboxes") through the real
# binary and REST /v1/sandboxes:
#   1. create answers 201 with the id, state, times and limits; a limit
#      above the operator's ceiling and an unknown field are 400
#      invalid_input naming the field.
#   2. what a live sandbox keeps: a file in /tmp written by one exec is read
#      by the next; every exec runs as the sandbox user.
#   2b. a background `python3 -m http.server` answers a later exec on
#      127.0.0.1; its output is read by offset; it is listed, killed by
#      DELETE, and what it was is still listed.
#   2c. with Accept: text/event-stream an exec streams: the first chunk of
#      `sh -c 'echo a; sleep N; echo b'` arrives while the command still
#      runs, then b, then the result; a client that goes away cancels it.
#   3. another key gets 404 on every route (get, exec, processes, output,
#      kill, delete) and does not see the sandbox in its list.
#   4. the per-key cap: past SKILLS_SANDBOX_MAX_LIVE_PER_KEY a create is
#      429 busy; another key may still create.
#   5. a 400 MiB allocation in a 256 MiB sandbox is killed and reported
#      (oomKilled), and the sandbox lives on.
#   6. an exec that times out is killed with everything it started (a
#      process it left in the background is gone too).
#   7. delete leaves no process and no cgroup of the sandbox, and a later
#      exec is 404.
#   8. the idle timeout and the lifetime end a sandbox.
#   9. revoking a key ends its live sandboxes.
#  10. kill -9 of the server with 8 live sandboxes: within 2 s none of their
#      processes is left; after a restart, within 2 s none of their cgroups.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server SKILLS_SANDBOX_MAX_LIVE_PER_KEY=4
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
K1=$(new_key l1 skills:execute | cut -d' ' -f2)
K2=$(new_key l2 skills:execute | cut -d' ' -f2)
K3=$(new_key l3 skills:execute | cut -d' ' -f2)
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }

# live_procs ID: the pids in the sandbox's cgroup (memory on v1, the one
# tree on v2), one per line.
cg_dirs() { find /sys/fs/cgroup -maxdepth 9 -type d -name "$1" 2>/dev/null; }
live_procs() { for d in $(cg_dirs "$1"); do cat "$d/cgroup.procs" 2>/dev/null; done | sort -u; }

# ---- 1 ----
as "$K1" POST /v1/sandboxes -d '{"memoryLimit":256,"timeoutMs":20000}'
expect_status "create answers 201" 201
expect_json "create: id, state running, times and limits" \
    'len(j["id"]) == 36 and j["state"] == "running" and j["createdAt"] and j["expiresAt"] and j["limits"]["memoryLimit"] == 256'
ID=$(echo "$BODY" | "$JGET" .id)
as "$K1" POST /v1/sandboxes -d '{"memoryLimit":999999}'
expect_status "a memoryLimit above the ceiling is 400" 400
expect_json "the refusal names memoryLimit" 'j["error"]["code"] == "invalid_input" and "memoryLimit" in j["error"]["message"]'
as "$K1" POST /v1/sandboxes -d '{"bogus":1}'
expect_status "an unknown field is 400" 400
expect_json "the refusal names the field" 'j["error"]["code"] == "invalid_input" and "bogus" in j["error"]["message"]'

# ---- 2 ----
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"sh","args":["-c","echo kept > /tmp/state; id -u"]}'
expect_json "an exec runs as the sandbox user" 'j["success"] and j["stdout"] == "1000\n" and j["exitCode"] == 0'
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"cat","args":["/tmp/state"]}'
expect_json "/tmp is kept between execs" 'j["success"] and j["stdout"] == "kept\n"'
expect_json "the result names the live sandbox" "j['sandboxId'] == '$ID'"

# ---- 2b ----
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"python3","args":["-u","-m","http.server","8123","--bind","127.0.0.1"],"cwd":"/tmp","background":true}'
expect_json "a background exec answers at once with a processId" 'j["success"] and len(j["processId"]) == 36'
PID=$(echo "$BODY" | "$JGET" .processId)
got=""
for _ in $(seq 1 100); do
    as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"python3","args":["-c","import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8123/state\").read().decode(), end=\"\")"]}'
    got=$(echo "$BODY" | "$JGET" .stdout)
    [ "$got" = kept ] && break
    sleep 0.1
done
[ "$got" = kept ] && pass "the background http.server answers a later exec on 127.0.0.1" ||
    fail "the background http.server answers a later exec on 127.0.0.1" "${BODY:0:300}"
as "$K1" GET "/v1/sandboxes/$ID/processes"
expect_json "the process is listed as running" "[(p['processId'], p['running']) for p in j['processes']] == [('$PID', True)]"
as "$K1" GET "/v1/sandboxes/$ID/processes/$PID/output"
expect_json "its output so far is readable (the request it served)" '"GET /state" in j["stderr"] and j["running"]'
OFF=$(echo "$BODY" | "$JGET" .stderrOffset)
as "$K1" GET "/v1/sandboxes/$ID/processes/$PID/output?stderrOffset=$OFF"
expect_json "reading from the offset returns only what came after" 'j["stderr"] == ""'
as "$K1" DELETE "/v1/sandboxes/$ID/processes/$PID"
expect_status "DELETE kills the process" 200
ended=""
for _ in $(seq 1 100); do
    as "$K1" GET "/v1/sandboxes/$ID/processes"
    ended=$(echo "$BODY" | python3 -c 'import json,sys; p=json.load(sys.stdin)["processes"][0]; print("yes" if not p["running"] and p["killed"] else "")' 2>/dev/null)
    [ -n "$ended" ] && break
    sleep 0.05
done
[ -n "$ended" ] && pass "the killed process is listed as ended and killed" || fail "the killed process is listed as ended and killed" "${BODY:0:300}"
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"python3","args":["-c","import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8123/state\")"]}'
expect_json "after the kill nothing answers on the port" 'not j["success"] and "Connection refused" in j["stderr"]'

# ---- 2c ----
SL=2.$((1000 + RANDOM % 8000))
python3 - "$URL" "$K1" "$ID" "$SL" >"$TMP/sse.out" 2>&1 <<'PY'
import http.client, json, subprocess, sys, urllib.parse
url, key, sid, sl = sys.argv[1:5]
u = urllib.parse.urlparse(url)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
body = json.dumps({"command": "sh", "args": ["-c", f"echo a; sleep {sl}; echo b"]})
c.request("POST", f"/v1/sandboxes/{sid}/exec", body, {"Authorization": "Bearer " + key,
          "Content-Type": "application/json", "Accept": "text/event-stream"})
r = c.getresponse()
print("status", r.status, r.getheader("Content-Type"))
events, ev = [], None
while True:
    line = r.fp.readline()
    if not line:
        break
    line = line.decode().rstrip("\n")
    if line.startswith("event: "):
        ev = line[7:]
    elif line.startswith("data: "):
        d = json.loads(line[6:])
        if ev == "stdout" and not events:
            # the command has not ended: its sleep still runs
            running = subprocess.run(["pgrep", "-f", f"sleep {sl}"], capture_output=True).returncode == 0
            print("first chunk while running", running)
        events.append((ev, d))
        if ev == "result":
            break
print("events", json.dumps([e for e, _ in events]))
print("stdout", json.dumps("".join(d["data"] for e, d in events if e == "stdout")))
print("result", json.dumps(events[-1][1]["stdout"] if events and events[-1][0] == "result" else None))
PY
grep -q '^status 200 text/event-stream' "$TMP/sse.out" && pass "a streamed exec answers text/event-stream" ||
    fail "a streamed exec answers text/event-stream" "$(head -3 "$TMP/sse.out")"
grep -q '^first chunk while running True' "$TMP/sse.out" && pass "the first chunk arrives while the command still runs" ||
    fail "the first chunk arrives while the command still runs" "$(cat "$TMP/sse.out")"
grep -q '^stdout "a\\nb\\n"$' "$TMP/sse.out" && grep -q '^result "a\\nb\\n"$' "$TMP/sse.out" &&
    grep -q '"result"\]$' "$TMP/sse.out" && pass "stdout events carry a then b, and the result event ends the stream" ||
    fail "stdout events carry a then b, and the result event ends the stream" "$(cat "$TMP/sse.out")"
MARK3=$((300 + RANDOM % 400)).$$
curl -sS -N -m 3 -H "Authorization: Bearer $K1" "${J[@]}" -H 'Accept: text/event-stream' \
    -d "{\"command\":\"sh\",\"args\":[\"-c\",\"echo go; sleep $MARK3\"],\"timeoutMs\":20000}" \
    "$URL/v1/sandboxes/$ID/exec" >"$TMP/sse2.out" 2>&1 &
CURL=$!
for _ in $(seq 1 200); do pgrep -f "sleep $MARK3" >/dev/null && break; sleep 0.05; done
kill "$CURL" 2>/dev/null
wait "$CURL" 2>/dev/null
left=1
for _ in $(seq 1 100); do pgrep -f "sleep $MARK3" >/dev/null || { left=0; break; }; sleep 0.05; done
[ "$left" = 0 ] && pass "a client that goes away cancels the streamed command" ||
    fail "a client that goes away cancels the streamed command" "$(pgrep -fa "sleep $MARK3")"

# ---- 3 ----
as "$K2" GET "/v1/sandboxes/$ID"
expect_status "another key: GET is 404" 404
as "$K2" POST "/v1/sandboxes/$ID/exec" -d '{"command":"true"}'
expect_status "another key: exec is 404" 404
as "$K2" GET "/v1/sandboxes/$ID/processes"
expect_status "another key: the process list is 404" 404
as "$K2" GET "/v1/sandboxes/$ID/processes/$PID/output"
expect_status "another key: a process's output is 404" 404
as "$K2" DELETE "/v1/sandboxes/$ID/processes/$PID"
expect_status "another key: killing a process is 404" 404
as "$K2" DELETE "/v1/sandboxes/$ID"
expect_status "another key: DELETE is 404" 404
as "$K2" GET /v1/sandboxes
expect_json "another key's list does not show it" 'j["sandboxes"] == []'
as "$K1" GET "/v1/sandboxes/not-a-uuid"
expect_status "a malformed id is 404" 404
as "$K1" GET /v1/sandboxes
expect_json "the owner's list shows it" "[s['id'] for s in j['sandboxes']] == ['$ID']"

# ---- 4 ----
for i in 2 3 4; do as "$K1" POST /v1/sandboxes -d '{}'; done
expect_status "the 4th sandbox of a key is made" 201
as "$K1" POST /v1/sandboxes -d '{}'
expect_status "the 5th is refused" 429
expect_json "with code busy" 'j["error"]["code"] == "busy"'
as "$K3" POST /v1/sandboxes -d '{}'
expect_status "another key may still create" 201
ID3=$(echo "$BODY" | "$JGET" .id)
as "$K1" GET /v1/sandboxes
for s in $(echo "$BODY" | python3 -c 'import json,sys; [print(s["id"]) for s in json.load(sys.stdin)["sandboxes"]]'); do
    [ "$s" = "$ID" ] || as "$K1" DELETE "/v1/sandboxes/$s"
done

# ---- 5 ----
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"python3","args":["-c","a = bytearray(400 << 20); print(len(a))"]}'
expect_json "400 MiB in a 256 MiB sandbox is OOM-killed" 'not j["success"] and j["oomKilled"] is True'
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"cat","args":["/tmp/state"]}'
expect_json "the sandbox lives on after the OOM kill" 'j["success"] and j["stdout"] == "kept\n"'

# ---- 6 ----
MARK=$((300 + RANDOM % 400)).$$
as "$K1" POST "/v1/sandboxes/$ID/exec" -d "{\"command\":\"sh\",\"args\":[\"-c\",\"sleep $MARK & sleep 60\"],\"timeoutMs\":1000}"
expect_json "an exec past its timeout is killed" 'not j["success"] and j["timedOut"] is True'
left=1
for _ in $(seq 1 40); do pgrep -f "sleep $MARK" >/dev/null || { left=0; break; }; sleep 0.05; done
[ "$left" = 0 ] && pass "what the timed-out exec started is gone too" ||
    fail "what the timed-out exec started is gone too" "$(pgrep -fa "sleep $MARK")"

# ---- 7 ----
PROCS=$(live_procs "$ID")
[ -n "$PROCS" ] && [ -n "$(cg_dirs "$ID")" ] && pass "the sandbox has its cgroup and its init" ||
    fail "the sandbox has its cgroup and its init" "dirs: $(cg_dirs "$ID") procs: $PROCS"
MARK2=$((300 + RANDOM % 400)).$$
curl -sS -m 30 -H "Authorization: Bearer $K1" "${J[@]}" -d "{\"command\":\"sleep\",\"args\":[\"$MARK2\"],\"timeoutMs\":20000}" \
    "$URL/v1/sandboxes/$ID/exec" >"$TMP/during.json" 2>&1 &
CURL=$!
for _ in $(seq 1 200); do pgrep -f "sleep $MARK2" >/dev/null && break; sleep 0.05; done
req DELETE "/v1/sandboxes/$ID" -m 10 -H "Authorization: Bearer $K1"
expect_status "delete answers 200 while an exec runs in the sandbox" 200
wait "$CURL"
BODY=$(cat "$TMP/during.json")
expect_json "the running exec ends, killed" 'not j["success"] and j["killed"]'
alive=""
for p in $PROCS; do [ -d "/proc/$p" ] && alive="$alive $p"; done
[ -z "$alive" ] && pass "delete leaves no process of the sandbox" || fail "delete leaves no process of the sandbox" "$alive"
[ -z "$(cg_dirs "$ID")" ] && pass "delete leaves no cgroup of the sandbox" ||
    fail "delete leaves no cgroup of the sandbox" "$(cg_dirs "$ID")"
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"true"}'
expect_status "an exec after delete is 404" 404
as "$K1" DELETE "/v1/sandboxes/$ID"
expect_status "a second delete is 404" 404

# ---- 8 ----
as "$K2" POST /v1/sandboxes -d '{"idleTimeoutMs":1000}'
IDLE=$(echo "$BODY" | "$JGET" .id)
as "$K2" POST /v1/sandboxes -d '{"lifetimeMs":2500,"idleTimeoutMs":2000}'
LIFE=$(echo "$BODY" | "$JGET" .id)
LPROCS=$(live_procs "$LIFE")
gone=""
for _ in $(seq 1 100); do
    as "$K2" POST "/v1/sandboxes/$LIFE/exec" -d '{"command":"true"}' # keeps it from idling
    [ "$STATUS" = 404 ] && { gone=life; break; }
    sleep 0.1
done
[ "$gone" = life ] && pass "the lifetime ends a sandbox that is in use" || fail "the lifetime ends a sandbox that is in use" "status $STATUS"
as "$K2" GET "/v1/sandboxes/$IDLE"
expect_status "the idle timeout ended the idle one" 404
alive=""
for p in $LPROCS; do [ -d "/proc/$p" ] && alive="$alive $p"; done
[ -z "$alive" ] && [ -z "$(cg_dirs "$LIFE")" ] && pass "an expired sandbox leaves no process and no cgroup" ||
    fail "an expired sandbox leaves no process and no cgroup" "$alive $(cg_dirs "$LIFE")"

# ---- 9 ----
read -r K4ID K4 < <(new_key l4 skills:execute)
as "$K4" POST /v1/sandboxes -d '{}'
ID4=$(echo "$BODY" | "$JGET" .id)
P4=$(live_procs "$ID4")
req DELETE "/v1/keys/$K4ID" -H "Authorization: Bearer $ADMIN"
expect_status "the key is revoked" 204
alive=""
for p in $P4; do [ -d "/proc/$p" ] && alive="$alive $p"; done
[ -n "$P4" ] && [ -z "$alive" ] && [ -z "$(cg_dirs "$ID4")" ] && pass "revoking a key ends its live sandboxes" ||
    fail "revoking a key ends its live sandboxes" "procs before: $P4, left: $alive $(cg_dirs "$ID4")"

# ---- 10 ----
IDS="$ID3"
for i in 1 2 3 4; do as "$K1" POST /v1/sandboxes -d '{}'; IDS="$IDS $(echo "$BODY" | "$JGET" .id)"; done
for i in 1 2 3; do as "$K2" POST /v1/sandboxes -d '{}'; IDS="$IDS $(echo "$BODY" | "$JGET" .id)"; done
ALL=""
n=0
for s in $IDS; do
    p=$(live_procs "$s")
    [ -n "$p" ] && n=$((n + 1))
    ALL="$ALL $p"
done
[ "$n" = 8 ] && pass "8 live sandboxes run" || fail "8 live sandboxes run" "$n with processes: $IDS"
disown "$SRV_PID"
kill -9 "$SRV_PID"
left=1
for _ in $(seq 1 40); do
    alive=""
    for p in $ALL; do [ -d "/proc/$p" ] && alive="$alive $p"; done
    [ -z "$alive" ] && { left=0; break; }
    sleep 0.05
done
[ "$left" = 0 ] && pass "kill -9 of the server: no live sandbox process left within 2 s" ||
    fail "kill -9 of the server: no live sandbox process left within 2 s" "$alive"
while kill -0 "$SRV_PID" 2>/dev/null; do sleep 0.05; done
start_server
gone=1
for _ in $(seq 1 40); do
    dirs=""
    for s in $IDS; do dirs="$dirs$(cg_dirs "$s")"; done
    [ -z "$dirs" ] && { gone=0; break; }
    sleep 0.05
done
[ "$gone" = 0 ] && pass "after a restart no cgroup of the 8 is left within 2 s" ||
    fail "after a restart no cgroup of the 8 is left within 2 s" "$dirs"
as "$K1" GET /v1/sandboxes
expect_json "after a restart the key holds no live sandbox" 'j["sandboxes"] == []'
stop_server
finish
