#!/usr/bin/env bash
# The same provider test set through the real binary (`skilld exec --runtime
# R --image skilld-test:1`) against native, docker and podman: echo, exit
# codes, workspace visible at /workspace and read-only with --ro-workspace,
# network off, timeout with partial output, memory limit reported as
# oomKilled, pids limit, output cap; for the engines also no leftover
# container after any of them, leftovers of a killed skilld removed by the
# next one, and `skilld image import --engine all` serving every provider
# from one tarball (a `docker save` archive), and metering of native and
# (cgroup v1) podman runs. stdin, environment, kill and
# kill_all through the runner API are in tests/unit/test_sandbox_providers.c.
# scripts/setup-containers.sh starts dockerd and imports the test image.
source "$(dirname "$0")/../lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
"$ROOT/scripts/setup-containers.sh" >"$TMP/setup.log" 2>&1 || {
    fail setup "$(tail -5 "$TMP/setup.log")"; finish; }
export DATA_DIR="$TMP/data"
export SKILLS_ALLOWED_SANDBOX_IMAGES="skilld-test,skilld-saved,skilld-ns/skilld-test:2,registry.example:5000/skilld-ns/skilld-test"
IMG=skilld-test:1
"$SKILLD" image import "$IMG" "$ROOT/build/test-image.tar" >/dev/null 2>"$TMP/err" ||
    fail "native image import" "$(cat "$TMP/err")"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
jget() { "$PY" -c 'import json,sys; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(json.dumps(v) if not isinstance(v,str) else v)' "$OUT" "$1" 2>/dev/null; }
# ex R ARGS...: skilld exec with runtime R and the test image; $OUT, $RC.
ex() { local r=$1; shift; OUT=$("$SKILLD" exec --runtime "$r" --image "$IMG" "$@" 2>"$TMP/err"); RC=$?; }
# no_leftover R CASE: the engine holds no container of the last run (found
# by the run id label, so other skilld users of the same engine do not count).
no_leftover() {
    [ "$1" = native ] && return 0
    local id; id=$(jget 'j["id"]')
    if [ -z "$id" ]; then fail "$1: $2: no leftover container" "no run id in: $OUT"; return; fi
    local left; left=$("$1" ps -a -q --filter "label=skilld.run=$id" 2>&1)
    [ -z "$left" ] || fail "$1: $2: no leftover container" "$left"
}

for R in native docker podman; do
    ex "$R" -- sh -c 'echo hello; echo oops >&2; exit 3'
    if [ "$RC" = 1 ] && [ "$(jget 'j["stdout"]')" = hello ] && [ "$(jget 'j["stderr"]')" = oops ] &&
       [ "$(jget 'j["exitCode"]')" = 3 ] && [ "$(jget 'j["runtime"]')" = "$R" ]; then
        pass "$R: echo and exit code"; else fail "$R: echo and exit code" "rc=$RC $OUT $(cat "$TMP/err")"; fi
    no_leftover "$R" echo

    ex "$R" -- sh -c 'echo "r=$1" > /workspace/from-$1 && cat /workspace/from-$1 && pwd' x "$R"
    if [ "$RC" = 0 ] && [ "$(jget 'j["stdout"]')" = "r=$R
/workspace" ]; then pass "$R: workspace read-write"; else fail "$R: workspace read-write" "$OUT"; fi
    ex "$R" --ro-workspace -- sh -c "cat /workspace/from-$R; echo x > /workspace/ro-$R"
    if [ "$RC" = 1 ] && [ "$(jget 'j["stdout"]')" = "r=$R" ] &&
       echo "$(jget 'j["stderr"]')" | grep -qi 'read-only'; then
        pass "$R: workspace read-only"; else fail "$R: workspace read-only" "$OUT"; fi
    no_leftover "$R" workspace

    ex "$R" -- sh -c 'cat /proc/net/dev; wget -q -T 2 -O- http://127.0.0.1:9/ 2>&1; echo done'
    s=$(jget 'j["stdout"]')
    if echo "$s" | grep -q 'lo:' && ! echo "$s" | grep -Eq 'eth|ens|docker|veth'; then
        pass "$R: network off"; else fail "$R: network off" "$s"; fi

    ex "$R" --timeout 1500 -- sh -c 'echo partial; sleep 30; echo never'
    if [ "$RC" = 1 ] && [ "$(jget 'j["timedOut"]')" = true ] && [ "$(jget 'j["killed"]')" = true ] &&
       [ "$(jget 'j["stdout"]')" = partial ] && [ "$(jget 'j["exitCode"]')" = null ]; then
        pass "$R: timeout with partial output"; else fail "$R: timeout with partial output" "$OUT"; fi
    no_leftover "$R" timeout

    ex "$R" --memory 16 -- sh -c 'echo before; x=aaaaaaaa; while :; do x=$x$x; done'
    if [ "$(jget 'j["oomKilled"]')" = true ] && [ "$(jget 'j["stdout"]')" = before ] &&
       [ "$(jget 'j["exitCode"]')" = null ]; then
        pass "$R: memory limit is oomKilled"; else fail "$R: memory limit is oomKilled" "$OUT"; fi
    no_leftover "$R" oom

    ex "$R" --pids 8 -- sh -c 'n=0; while [ $n -lt 20 ]; do sleep 2 & n=$((n+1)); done; echo spawned'
    if echo "$(jget 'j["stderr"]')" | grep -Eqi 'fork|resource'; then
        pass "$R: pids limit"; else fail "$R: pids limit" "$OUT"; fi
    no_leftover "$R" pids

    ex "$R" --output-limit 100 -- sh -c 'yes | head -c 200000'
    if [ "$(jget 'j["truncated"]')" = true ] && [ "$(jget 'len(j["stdout"])')" = 100 ]; then
        pass "$R: output cap"; else fail "$R: output cap" "$(echo "$OUT" | head -c 300)"; fi
    no_leftover "$R" output
done

# Metering (docs/usage.md): native runs from their own cgroup; podman on a
# cgroup v1 host from the run's parent cgroup (container_cgroup.c), read
# back from the audit row skilld exec writes. Docker keeps no cgroup of the
# run that skilld can read, and podman on v2 none either: not metered.
cpu_of_last_exec() {
    sqlite3 "$DATA_DIR/skilld.db" "SELECT cpu_us || ' ' || mem_peak_bytes FROM executions WHERE skill='exec' ORDER BY created_ms DESC LIMIT 1"
}
meter_runtimes=(native)
[ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] && meter_runtimes+=(podman)
for R in "${meter_runtimes[@]}"; do
    ex "$R" -- sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'
    read -r cpu peak <<<"$(cpu_of_last_exec)"
    if [ "$RC" = 0 ] && [ "${cpu:-0}" -ge 50000 ] && [ "${peak:-0}" -gt 0 ]; then
        pass "$R: a run's CPU time and memory peak are metered ($cpu us, $peak bytes)"
    else
        fail "$R: a run's CPU time and memory peak are metered" "rc=$RC cpu=${cpu:-} peak=${peak:-} $(cat "$TMP/err")"
    fi
done

# A skilld whose spawner is killed with SIGKILL leaves its container running
# (a spawner that sees its server go removes its sandboxes itself; one killed
# outright cannot); the next skilld that uses the engine removes it (its
# owner, the spawner, is dead). Only our container counts: other users of
# the engine on the machine may come and go meanwhile.
for R in docker podman; do
    before=$("$R" ps -a -q --no-trunc --filter label=skilld=1 | sort)
    "$SKILLD" exec --runtime "$R" --image "$IMG" -- sleep 60 >/dev/null 2>&1 &
    pid=$!
    cid=""
    for _ in $(seq 1 300); do
        cid=$(comm -13 <(echo "$before") <("$R" ps -q --no-trunc --filter label=skilld=1 | sort) | head -1)
        [ -n "$cid" ] && break; sleep 0.1
    done
    if [ -z "$cid" ]; then fail "$R: crash leftover" "container did not start"; kill -9 "$pid"; wait "$pid" 2>/dev/null; continue; fi
    owner=$("$R" inspect --format '{{index .Config.Labels "skilld.owner"}}' "$cid" 2>/dev/null)
    kill -9 "${owner%%-*}" "$pid"; wait "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "${owner%%-*}" 2>/dev/null || break; sleep 0.1; done
    "$R" inspect "$cid" >/dev/null 2>&1 || fail "$R: crash leftover" "container gone with skilld (expected it to survive a SIGKILL)"
    ex "$R" -- true
    if [ "$RC" = 0 ] && ! "$R" inspect "$cid" >/dev/null 2>&1; then pass "$R: leftovers of a killed skilld removed";
    else fail "$R: leftovers of a killed skilld removed" "rc=$RC owner=$owner $OUT $(cat "$TMP/err")"; fi
done
# ... including podman's per-run cgroup parents and working directories.
stray=$(find /run/skilld-podman /sys/fs/cgroup/*/skilld-podman -mindepth 1 -maxdepth 1 -type d 2>/dev/null)
if [ -z "$stray" ]; then pass "podman: no per-run directory left"; else fail "podman: no per-run directory left" "$stray"; fi

# One tarball for every provider: a docker save archive imported with
# --engine all runs under native, docker and podman.
docker save -o "$TMP/saved.tar" "$IMG"
if "$SKILLD" image import skilld-saved:1 "$TMP/saved.tar" --engine all >/dev/null 2>"$TMP/err"; then
    ok=1
    for R in native docker podman; do
        OUT=$("$SKILLD" exec --runtime "$R" --image skilld-saved:1 -- echo saved 2>"$TMP/err")
        [ "$(jget 'j["stdout"]')" = saved ] || { ok=0; fail "image import --engine all: $R" "$OUT"; }
    done
    [ $ok = 1 ] && pass "image import --engine all serves native, docker, podman"
else
    fail "image import --engine all" "$(cat "$TMP/err")"
fi
docker image rm -f skilld-saved:1 >/dev/null 2>&1
podman image rm -f localhost/skilld-saved:1 >/dev/null 2>&1

# Image references in the engines' own grammar: a namespaced tag and a
# registry:port one (imported locally, no registry is reached), allowed by
# the list in the same forms, run by every provider; a tag or namespace the
# list does not name is refused.
for ref in skilld-ns/skilld-test:2 registry.example:5000/skilld-ns/skilld-test:3; do
    "$SKILLD" image rm "$ref" >/dev/null 2>&1
    if ! "$SKILLD" image import "$ref" "$ROOT/build/test-image.tar" --engine all >/dev/null 2>"$TMP/err"; then
        fail "image $ref imported" "$(cat "$TMP/err")"; continue; fi
    for R in native docker podman; do
        OUT=$("$SKILLD" exec --runtime "$R" --image "$ref" -- sh -c 'echo "ref ok"' 2>"$TMP/err")
        if [ "$(jget 'j["stdout"]')" = "ref ok" ] && [ "$(jget 'j["runtime"]')" = "$R" ]; then
            pass "$R: runs allowed image $ref"; else fail "$R: runs allowed image $ref" "$OUT $(cat "$TMP/err")"; fi
        no_leftover "$R" "image $ref"
    done
done
for ref in skilld-ns/skilld-test:9 other/skilld-test:2 registry.example:5001/skilld-ns/skilld-test:3; do
    OUT=$("$SKILLD" exec --runtime docker --image "$ref" -- true 2>/dev/null)
    if [ "$(jget 'j["error"]["code"]')" = forbidden ]; then pass "docker: $ref not in the list is refused";
    else fail "docker: $ref not in the list is refused" "$OUT"; fi
done
for ref in skilld-ns/skilld-test:2 registry.example:5000/skilld-ns/skilld-test:3; do
    "$SKILLD" image rm "$ref" >/dev/null 2>&1
    docker image rm -f "$ref" >/dev/null 2>&1
    podman image rm -f "$ref" "localhost/$ref" >/dev/null 2>&1
done

# Two skilld processes on one engine at once: the second one's sweep of
# leftovers leaves the first one's running container alone (its owner is
# alive, however much memory it has taken since it labelled it).
for R in docker podman; do
    "$SKILLD" exec --runtime "$R" --image "$IMG" --timeout 30000 -- sh -c 'sleep 4; echo survived' >"$TMP/first.json" 2>"$TMP/first.err" &
    pid=$!
    for _ in $(seq 1 100); do
        [ -n "$("$R" ps -q --filter label=skilld=1)" ] && break; sleep 0.1
    done
    ex "$R" -- true
    wait "$pid"
    OUT=$(cat "$TMP/first.json")
    if [ "$RC" = 0 ] && [ "$(jget 'j["stdout"]')" = survived ] && [ "$(jget 'j["exitCode"]')" = 0 ]; then
        pass "$R: a second skilld does not reap a live one's container"
    else fail "$R: a second skilld does not reap a live one's container" "$OUT $(cat "$TMP/first.err")"; fi
done
finish
