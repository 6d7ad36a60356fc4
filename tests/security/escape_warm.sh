#!/usr/bin/env bash
# The escape battery's leftover and cross-sandbox cases through the server,
# where a pre-made sandbox (src/sandbox/native/native.c: root built and pivoted
# before its run, one per run) serves every host-image run: nothing of one
# run may be seen by the next, nor by a run beside it, and each run's
# limits and counters are its own. tests/security/escape.sh runs the whole
# battery through `skilld exec`, whose one run is also a pre-made sandbox.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../integration/server_common.sh"
MARK="skilld-warm-$$-$RANDOM"
# dash has no exec -a: processes are told apart by a unique sleep length.
DAEMON="600.$((RANDOM % 9000 + 1000))"
VICTIM="2.$((RANDOM % 9000 + 1000))"
PROBE="1.$((RANDOM % 9000 + 1000))"

start_server SKILLS_SANDBOX_PIDS_LIMIT=16
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
read -r _ SECRET < <(new_key attacker skills:execute)

# run SCRIPT [TIMEOUT_MS]: execute_command sh -c SCRIPT; the result in BODY.
run() {
    local in
    in=$(python3 -c 'import json,sys; print(json.dumps({"skill":"execute_command","input":{"command":"sh","args":["-c",sys.argv[1]],"timeoutMs":int(sys.argv[2])}}))' "$1" "${2:-10000}")
    req POST /v1/execute -H "Authorization: Bearer $SECRET" -H 'Content-Type: application/json' -d "$in"
}
out() { json_get "$BODY" 'j.get("stdout","")' | grep -v '^$'; }
has() { out | grep -q -- "$1"; } # no early exit of grep -q into a closed pipe
SPAWNER=$(pgrep -P "$(pgrep -P "$SRV_PID" | head -1)" | head -1)

# The mechanism is on: a pre-made sandbox waits in its own cgroup.
run true
waiting=""
for _ in $(seq 1 40); do
    waiting=$(find /sys/fs/cgroup -maxdepth 8 -type d -path "*/skilld/$SPAWNER/warm-*" 2>/dev/null | head -1)
    [ -n "$waiting" ] && break
    sleep 0.05
done
[ -n "$waiting" ] && pass "a pre-made sandbox waits between runs" ||
    fail "a pre-made sandbox waits between runs" "no warm-* cgroup under skilld/$SPAWNER"

# leftover-tmp, leftover-devshm: written by one run, absent in the next.
run "echo a > /tmp/$MARK && echo b > /dev/shm/$MARK && ls /tmp /dev/shm"
if [ "$STATUS" = 200 ] && [ "$(out | grep -cx "$MARK")" = 2 ]; then pass "a run writes /tmp and /dev/shm"; else
    fail "a run writes /tmp and /dev/shm" "$BODY"; fi
run "ls -A /tmp /dev/shm; cat /tmp/$MARK /dev/shm/$MARK 2>&1; true"
if [ "$STATUS" = 200 ] && [ "$(out | grep -cx -e "$MARK" -e a -e b)" = 0 ]; then
    pass "no /tmp or /dev/shm leftovers between runs"; else
    fail "no /tmp or /dev/shm leftovers between runs" "$(out)"; fi

# leftover processes: a daemon of one run is gone, and invisible to the next.
run "setsid sleep $DAEMON </dev/null >/dev/null 2>&1 & sleep 0.2; ps -o args= 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '" 2000
if has "sleep $DAEMON"; then pass "a run starts a daemon"; else fail "a run starts a daemon" "$(out)"; fi
run "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'"
if [ "$STATUS" = 200 ] && ! has "sleep $DAEMON" && [ "$(out | tail -n1)" -lt 5 ]; then
    pass "no process of an earlier run in the next"; else fail "no process of an earlier run in the next" "$(out)"; fi
if ! pgrep -f "^sleep $DAEMON" >/dev/null; then pass "daemonised grandchild gone after run"; else
    fail "daemonised grandchild gone after run" "$(pgrep -af "^sleep $DAEMON")"; pkill -9 -f "^sleep $DAEMON"; fi

# cross-sandbox: a run beside a running one can neither see nor signal it.
( run "sleep $VICTIM; echo alive" 8000; echo "$BODY" >"$TMP/victim.json" ) &
VPID=$!
sleep 0.5
run "kill -9 -1; pkill -9 sleep; cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'"
wait "$VPID"
if grep -q '"stdout": *"alive' "$TMP/victim.json"; then pass "cannot signal another sandbox"; else
    fail "cannot signal another sandbox" "$(cat "$TMP/victim.json")"; fi
if [ "$STATUS" = 200 ] && ! has "sleep $VICTIM"; then pass "cannot see another sandbox's processes"; else
    fail "cannot see another sandbox's processes" "$(out)"; fi

# Each run's own cgroup, limits and counters: the pids limit (16 here) holds, and
# the memory an earlier run used is not on the next run's counter.
run "python3 -c 'import os, time
n = 0
for _ in range(40):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    n += 1
print(n)'" 5000
n=$(out | tail -n1)
if [ "$STATUS" = 200 ] && [ -n "$n" ] && [ "$n" -lt 16 ]; then pass "pidsLimit holds in a pre-made sandbox ($n forks of 40)"; else
    fail "pidsLimit holds in a pre-made sandbox" "$n processes: $BODY"; fi
run "head -c 60000000 /dev/zero > /tmp/fill; echo filled" 10000
( run "sleep $PROBE" 5000 ) &
PPID2=$!
peak=""
for _ in $(seq 1 40); do
    p=$(pgrep -f "^sleep $PROBE" | head -1)
    if [ -n "$p" ]; then
        mem=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' "/proc/$p/cgroup")
        mnt=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ {print $2}' /proc/mounts | head -1)
        if [ -n "$mem" ] && [ -n "$mnt" ]; then
            peak=$(cat "$mnt$mem/memory.max_usage_in_bytes" 2>/dev/null)
        else # cgroup v2
            peak=$(cat "/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' "/proc/$p/cgroup")/memory.peak" 2>/dev/null)
        fi
        [ -n "$peak" ] && break
    fi
    sleep 0.05
done
wait "$PPID2"
if [ -n "$peak" ] && [ "$peak" -lt 40000000 ]; then pass "memory counter of a run starts fresh ($peak bytes)"; else
    fail "memory counter of a run starts fresh" "peak '$peak' after a run that used 60 MB"; fi

# Arguments larger than a pre-made sandbox's message buffer (128 KiB) start
# cold; smaller ones are served by the waiting sandbox; both run in full.
big=$(python3 -c 'print("x" * 100000)')
o=$("$SKILLD" --data-dir "$DATA" exec -- sh -c 'echo ${#1} ${#2}' sh "$big" "$big" 2>&1)
o2=$("$SKILLD" --data-dir "$DATA" exec -- sh -c 'echo ${#1}' sh "$big" 2>&1)
if [ "$(json_get "$o" 'j["stdout"]')" = "100000 100000" ] && [ "$(json_get "$o2" 'j["stdout"]')" = 100000 ]; then
    pass "200 KB of arguments (cold) and 100 KB (pre-made) run"; else
    fail "200 KB of arguments (cold) and 100 KB (pre-made) run" "${o:0:200} ${o2:0:200}"; fi

stop_server
if [ -z "$(find /sys/fs/cgroup -maxdepth 8 -type d -path "*/skilld/$SPAWNER" 2>/dev/null)" ]; then
    pass "no cgroup left after the server stops (the waiting sandbox's too)"; else
    fail "no cgroup left after the server stops" "$(find /sys/fs/cgroup -maxdepth 8 -type d -path "*/skilld/$SPAWNER*")"; fi
finish
