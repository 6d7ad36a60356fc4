#!/usr/bin/env bash
# A spawner killed between freezing a run's cgroup and thawing it (the v1
# kill sequence) leaves a frozen run behind, whose processes cannot die of
# SIGKILL. The next spawner must thaw it, kill it and remove its cgroups,
# instead of retrying on every start (which cost every later `skilld exec`
# about 300 ms, and never freed the cgroup).
source "$(dirname "$0")/../lib.sh"
export DATA_DIR="$TMP/data"

# The hierarchy skilld uses: v2 when the unified hierarchy has the pids
# controller, else v1 (as on this machine: memory, pids, cpu and freezer
# hierarchies). The "skilld" parents may come and go (any skilld that exits
# removes them when empty): mkdir -p makes them as needed.
self() { sed -n "s/^[0-9]*:$1:\(.*\)/\1/p" /proc/self/cgroup | sed 's|^/$||'; }
V1_FREEZER=/sys/fs/cgroup/freezer$(self freezer)/skilld
V1_PIDS=/sys/fs/cgroup/pids$(self pids)/skilld
V2=/sys/fs/cgroup$(self '')/skilld
if grep -qw pids /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then mode=v2; else mode=v1; fi

# A pid that is gone: the dead "spawner" whose directory is left.
sh -c 'exit 0' &
dead=$!
wait $dead
run=00000000-0000-4000-8000-$(printf '%012x' $$)
sleep 300 &
victim=$!
if [ $mode = v1 ]; then
    dirs="$V1_PIDS/$dead/$run $V1_FREEZER/$dead/$run"
    mkdir -p $dirs
    for d in $dirs; do echo $victim >"$d/cgroup.procs"; done
    echo FROZEN >"$V1_FREEZER/$dead/$run/freezer.state"
    state=$(cat "$V1_FREEZER/$dead/$run/freezer.state")
else
    dirs="$V2/$dead/$run"
    mkdir -p $dirs
    echo $victim >"$V2/$dead/$run/cgroup.procs"
    echo 1 >"$V2/$dead/$run/cgroup.freeze"
    state=$(grep -o 'frozen [01]' "$V2/$dead/$run/cgroup.events")
fi
kill -KILL $victim
sleep 0.2
st=$(sed -n 's/^State:\s*\(.\).*/\1/p' /proc/$victim/status 2>/dev/null)
if [ -n "$st" ] && [ "$st" != Z ]; then
    pass "set-up ($mode): a frozen run survives SIGKILL ($state, state $st)"
else fail "set-up ($mode)" "victim $victim not frozen: state '$st'"; fi

out=$("$SKILLD" exec -- echo ok 2>"$TMP/err")
[ "$(json_get "$out" 'j["stdout"]')" = ok ] && pass "exec runs" || fail "exec runs" "$out $(cat "$TMP/err")"

gone=1
for i in $(seq 50); do
    st=$(sed -n 's/^State:\s*\(.\).*/\1/p' /proc/$victim/status 2>/dev/null)
    [ -z "$st" ] || [ "$st" = Z ] && { gone=0; break; }
    sleep 0.1
done
if [ $gone = 0 ]; then pass "the frozen run's process was thawed and killed"
else fail "frozen run's process killed" "state $st"; fi
left=""
for d in $dirs; do [ -d "$d" ] && left="$left $d"; done
if [ -z "$left" ]; then pass "its cgroups are removed"
else
    fail "its cgroups are removed" "left:$left"
    for d in $dirs; do
        { echo THAWED >"$d/freezer.state"; } 2>/dev/null
        { echo 0 >"$d/cgroup.freeze"; } 2>/dev/null
        rmdir "$d" "$(dirname "$d")" 2>/dev/null
    done
fi
rmdir "$V1_PIDS/$dead" "$V1_FREEZER/$dead" "$V2/$dead" 2>/dev/null
kill -KILL $victim 2>/dev/null
wait $victim 2>/dev/null
finish
