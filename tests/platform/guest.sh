#!/bin/bash
# The VM ring's guest driver. ring.sh puts it on the payload disk
# (/payload); root's login shell on the serial console (autologin, so it
# runs in a systemd login session scope, session-N.scope) execs it. Every
# result is a "PASS case: name" / "FAIL case: name: why" line in
# /payload/results.log, which ring.sh reads back after the VM powers off.
#
# Cases (RING_CASES, default "session service rootless nosd"):
#   session  the server started as scripts/quickstart.sh starts it, from the
#            login shell; skilld exec, doctor, the native sandbox tests
#   service  `make install`, then skilld.service (Delegate=yes) started by
#            systemd; its admin key from the 0600 file; the journal
#   rootless skilld-user.service as user alice (after service: it uses the
#            installed files), the tests in her user manager
#   nosd     no systemd in skilld's view: skilld exec'd alone into a
#            hand-made cgroup (as runit, s6, OpenRC or a container do)
# and in each: doctor clean and agreeing with a real call,
# tests/integration/sandbox_exec.sh and
# tests/security/escape.sh, an MCP tools/call of execute_command with
# memory, pids and cpu limits (read back from the run's cgroup), metering
# of a run's CPU and memory peak, OOM
# reported, a timeout killing the whole cgroup, kill -9 of the server
# leaving no process and no cgroup behind, 16 parallel calls, none hanging.
P=/payload
SRC=$P/src
LOG=$P/results.log
# A hung call must not hang the ring: progress notifications keep an MCP
# stream alive, so every client gets a hard deadline.
MCP="timeout 200 python3 $SRC/tests/platform/mcp.py"
# Results to the payload disk (what ring.sh counts) and, for a person
# watching, to the serial console.
exec > >(tee -a "$LOG" >/dev/ttyS0) 2>&1
. "$P/ring.env"
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8
CASE=boot

pass() { echo "PASS $CASE: $1"; }
fail() { echo "FAIL $CASE: $1: ${2:-}"; }
note() { echo "# $CASE: $*"; }
# ok NAME CONDITION-COMMAND... [-- WHY]: pass when the command succeeds.
ok() { local n=$1; shift; if "$@" >/dev/null 2>&1; then pass "$n"; else fail "$n" "$*"; fi; }
# within SECONDS CMD...: poll CMD every 0.1 s until it succeeds.
within() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.1; done; }
# jf JSON .PATH: a field of JSON, a string as is, anything else as JSON
# (tests/tools/jget.c: a Python start costs about a second on the emulated
# CPU).
jf() { "$SRC/build/tools/jget" "$2" <<<"$1" 2>/dev/null; }
prefixed() { sed -u -E "s/^(PASS|FAIL) /\1 $CASE: /"; }
skilld_cgroups() { find /sys/fs/cgroup -name 'skilld*' -type d 2>/dev/null; }
# The cgroups a spawner made: its transient scope and its "skilld/<pid>".
own_cgroups() { find /sys/fs/cgroup -type d \( -regex '.*/skilld-[0-9]+\.scope' -o -regex '.*/skilld/[0-9]+' \) 2>/dev/null; }
still_there_list() { local d; for d in "$@"; do [ -d "$d" ] && echo "$d"; done; }
still_there() { [ -z "$(still_there_list "$@")" ]; }
# Sandboxed python3 processes carrying a marker as their last argument
# (not the MCP clients, whose JSON argument merely contains it).
marked() { pgrep -f "^python3 -c .* $1\$"; }
no_marker() { ! marked "$1" >/dev/null; }

# run_tests SKILLD [RUNNER...]: the native sandbox test scripts through the
# given binary, optionally inside a runner (systemd-run for the service).
run_tests() {
    local bin=$1; shift
    [ "$RING_TESTS" = 1 ] || { note "RING_TESTS=0: test scripts not run"; return; }
    # Both scripts at once (each has its own DATA_DIR): the guest has two
    # vCPUs, and each script alone keeps about one busy.
    local t t0=$SECONDS i=0 pids=()
    for t in tests/integration/sandbox_exec.sh tests/security/escape.sh; do
        i=$((i + 1))
        # The default sandbox timeout (10 s) is too short for node's start on
        # an emulated CPU; the tests that time out name their own timeout.
        (
            s=$SECONDS
            "$@" env SKILLD="$bin" SKILLD_ROOT="$SRC" SKILLS_SANDBOX_TIMEOUT_MS=60000 bash "$SRC/$t" 2>&1 | prefixed | grep -E '^(PASS|FAIL) '
            note "$t took $((SECONDS - s)) s"
        ) >"/tmp/run_tests.$i" 2>&1 &
        pids+=($!)
    done
    # Not a bare `wait`: bash 5.2 would wait for the tee of our output too.
    wait "${pids[@]}"
    cat /tmp/run_tests.[0-9]*
    rm -f /tmp/run_tests.[0-9]*
    note "the test scripts took $((SECONDS - t0)) s together"
}

# in_user_unit CMD...: run CMD as alice in a oneshot unit of her user
# manager with Delegate=yes, print its output, return its exit status.
in_user_unit() {
    local n="ring-$BASHPID-$RANDOM"
    {
        echo '#!/bin/bash'
        printf 'cd %q || exit 1\nexec ' "$PWD"
        printf '%q ' "$@"
        echo
    } >"/tmp/ring-u/$n.sh"
    chmod 755 "/tmp/ring-u/$n.sh"
    cat >"/home/alice/.config/systemd/user/$n.service" <<UNIT
[Service]
Type=oneshot
ExecStart=/tmp/ring-u/$n.sh
StandardOutput=file:/tmp/ring-u/$n.out
StandardError=append:/tmp/ring-u/$n.out
Delegate=yes
TimeoutStartSec=infinity
Environment=SKILLS_SANDBOX_WORKSPACE_QUOTA=off
UNIT
    chown alice: "/home/alice/.config/systemd/user/$n.service"
    ctl daemon-reload
    ctl start "$n.service" >/dev/null 2>&1
    local rc
    rc=$(ctl show -p ExecMainStatus --value "$n.service")
    cat "/tmp/ring-u/$n.out" 2>/dev/null
    rm -f "/home/alice/.config/systemd/user/$n.service"
    ctl daemon-reload
    return "${rc:-1}"
}

# doctor_clean SKILLD [RUNNER...]: `skilld doctor` reports nothing failing,
# the mode it will run in ("ok  mode_MODE"), and no warning but those of
# the checks named in $DOCTOR_EXPECT_WARN (the rootless case: the
# workspace quota is off in skilld-user.service, and doctor says so).
doctor_clean() {
    local bin=$1; shift
    local out rc=0 warns want
    out=$("$@" "$bin" doctor 2>&1) || rc=$?
    note "doctor exit status $rc"
    warns=$(echo "$out" | awk '$1 == "WARN" && $2 !~ /^(mode_root|mode_rootless|docker|podman)$/ {print $2}' | sort | tr '\n' ' ')
    want=$(printf '%s\n' ${DOCTOR_EXPECT_WARN:-} | sort | tr '\n' ' ')
    [ -n "${DOCTOR_EXPECT_WARN:-}" ] || want=
    if [ $rc = 0 ] && ! echo "$out" | grep -q '^FAIL' && [ "$warns" = "$want" ] &&
        echo "$out" | grep -qE "^ok +mode_$DOCTOR_MODE " &&
        { echo "$out" | grep -q '^overall: ok' || { [ -n "$want" ] && echo "$out" | grep -q '^overall: warn'; }; }; then
        pass "skilld doctor clean (mode $DOCTOR_MODE${want:+; expected warnings: $want})"
    else
        fail "skilld doctor clean" "exit $rc; warnings '$warns' (expected '$want'); $(echo "$out" | grep -E '^(FAIL|WARN)|overall|mode_' | tr '\n' ' ' | head -c 600)"
    fi
    echo "$out" | sed 's/^/#   /'
    agree "$rc" "$bin" "$@"
}

# agree DOCTOR-STATUS SKILLD [RUNNER...]: doctor's verdict (its exit status)
# and a real call's result, in the same place, agree.
agree() {
    local drc=$1 bin=$2 erc=0 out
    shift 2
    out=$("$@" "$bin" exec --key ring-agree -- true 2>&1) || erc=$?
    if [ $((drc == 0)) = $((erc == 0)) ]; then
        pass "doctor's verdict agrees with a real call (doctor exit $drc, skilld exec exit $erc)"
    else
        fail "doctor's verdict agrees with a real call" "doctor exit $drc, skilld exec exit $erc: ${out:0:300}"
    fi
}

# mcp_checks URL SECRET CGROUP-ROOT: the sandbox through MCP.
mcp_checks() {
    local url=$1 key=$2 cgroot=$3 out
    # Every limit applied: read memory.max, pids.max and cpu.max of the
    # run's own cgroup while it runs: the cgroup of the marked process (a
    # server also keeps pre-made sandboxes waiting, each in a cgroup of its
    # own that gets the limits of the run it is given).
    local mk="ring-limits-$RANDOM$RANDOM"
    $MCP "$url" "$key" execute_command "{\"command\":\"python3\",\"args\":[\"-c\",\"import time; time.sleep(25)\",\"$mk\"],\"timeoutMs\":60000}" 120 >/tmp/lim.json &
    local cpid=$! f="" p=""
    within 60 eval 'p=$(marked "$mk" | head -n1); [ -n "$p" ]'
    [ -n "$p" ] && f=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$p/cgroup" 2>/dev/null)/memory.max
    local d=${f%/memory.max}
    note "the run's cgroup: $d"
    # Polled for a few seconds: on an emulated CPU under load the process
    # can show before the last limit file is read back.
    lim_ok() {
        [ -n "$p" ] && [[ $d == "$cgroot"/* && $d == */skilld/[0-9]*/* ]] && [ "$(cat "$d/memory.max")" = $((RING_MEM_MB << 20)) ] &&
            [ "$(cat "$d/pids.max")" = "$RING_PIDS" ] && [ "$(cat "$d/cpu.max")" = "$((RING_CPU * 1000)) 100000" ] &&
            [ "$(cat "$d/memory.swap.max")" = 0 ] && [ -n "$(cat "$d/cgroup.procs")" ]
    } 2>/dev/null
    if within 10 lim_ok; then
        pass "execute_command runs in its own cgroup with memory, pids, cpu limits"
    else
        fail "execute_command runs in its own cgroup with memory, pids, cpu limits" "cgroup '$d' (process ${p:-not seen}): memory.max, pids.max, cpu.max, memory.swap.max, procs: $(cat "$d"/memory.max "$d"/pids.max "$d"/cpu.max "$d"/memory.swap.max "$d"/cgroup.procs 2>&1 | tr '\n' ' ')"
    fi
    wait $cpid
    out=$(cat /tmp/lim.json)
    if [ "$(jf "$out" .success)" = true ]; then pass "MCP tools/call execute_command succeeds"; else fail "MCP tools/call execute_command succeeds" "$out"; fi

    # OOM and timeout through REST: MCP turns a failed result into isError
    # text, REST returns the result object with oomKilled and timedOut.
    local rest=${url%/mcp}/v1/execute
    out=$(rest "$rest" "$key" '{"command":"python3","args":["-c","b=[]\nwhile True: b.append(bytearray(4<<20))"],"timeoutMs":30000}')
    if [ "$(jf "$out" .oomKilled)" = true ]; then pass "OOM reported (oomKilled)"; else fail "OOM reported (oomKilled)" "${out:0:300}"; fi

    # Metering on cgroup v2 (docs/usage.md): the run's CPU time (cpu.stat)
    # and memory peak (memory.peak: Linux 5.19 and later) in its audit row.
    # The loop counts its own CPU time, so an emulated CPU makes it slower,
    # not shorter.
    out=$(rest "$rest" "$key" '{"command":"python3","args":["-c","import time\nb=bytearray(16<<20)\nwhile time.process_time() < 0.3: pass"],"timeoutMs":60000}')
    local row cpu peak
    row=$(curl -sS -m 30 -H "Authorization: Bearer $key" "${url%/mcp}/v1/executions/$(jf "$out" .executionId)")
    cpu=$(jf "$row" .usage.sandboxCpuMs)
    peak=$(jf "$row" .usage.sandboxMemoryPeakBytes)
    if [ "${cpu:-0}" -ge 250 ] && [ "${peak:-0}" -ge $((16 << 20)) ]; then
        pass "a run's CPU time and memory peak are metered from its cgroup ($cpu ms, $peak bytes)"
    else
        fail "a run's CPU time and memory peak are metered from its cgroup" "${row:0:300} / ${out:0:200}"
    fi

    local mark="ring-timeout-$RANDOM$RANDOM"
    # All four (the parent, three setsid children) must be seen running
    # before the timeout, or the check would prove nothing.
    rest "$rest" "$key" "{\"command\":\"python3\",\"args\":[\"-c\",\"import os,time\\nfor i in range(3):\\n  if os.fork()==0:\\n    os.setsid(); time.sleep(600)\\ntime.sleep(600)\",\"$mark\"],\"timeoutMs\":10000}" >/tmp/timeout.json &
    local tpid=$! seen=""
    within 60 eval '[ "$(marked "$mark" | wc -l)" -ge 4 ]' && seen=1
    wait $tpid
    out=$(cat /tmp/timeout.json)
    if [ -n "$seen" ] && [ "$(jf "$out" .timedOut)" = true ] && within 5 no_marker "$mark"; then
        pass "timeout kills the whole cgroup (forked, setsid children too)"
    else
        fail "timeout kills the whole cgroup" "all four seen running: ${seen:-no}; ${out:0:300}; left: $(marked "$mark" | head -3 | tr '\n' ' ')"
    fi

    # 16 at once, none hanging (the caps queue them; each must finish):
    # 16 clients, each with its own connection and session, in one Python
    # process (16 Python starts would cost the emulated CPU more than the
    # calls).
    local t0=$SECONDS good
    $MCP --parallel 16 "$url" "$key" execute_command '{"command":"sleep","args":["1"]}' 150 >/tmp/par.out
    good=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l).get("success") is True))' /tmp/par.out 2>/dev/null)
    if [ "$good" = 16 ]; then pass "16 parallel execute_command sleep 1 all succeed ($((SECONDS - t0)) s)"; else fail "16 parallel execute_command sleep 1 all succeed" "${good:-0} of 16; $(head -c 200 /tmp/par.out)"; fi
}

# mcp_checks_bg URL SECRET CGROUP-ROOT / mcp_checks_end: mcp_checks while the
# test scripts run (its calls mostly wait: a sleep, a timeout, a queue), then
# the four marked sleepers ($mark) that the kill -9 check needs, its lines
# printed together when it is done. mcp_checks_end also checks that the
# sleepers still run.
mcp_checks_bg() {
    mark="ring-kill9-$RANDOM$RANDOM"
    { mcp_checks "$@"; start_sleepers "$1" "$2" "$mark" 4; } >/tmp/mcp_checks.out 2>&1 &
    MCP_JOB=$!
}
mcp_checks_end() {
    wait "$MCP_JOB"
    cat /tmp/mcp_checks.out
    rm -f /tmp/mcp_checks.out
    local n
    n=$(marked "$mark" | wc -l)
    if [ "$n" -ge 4 ]; then pass "4 sandboxes still running at kill -9"; else fail "4 sandboxes still running at kill -9" "$n running"; fi
}

# rest URL SECRET INPUT: POST /v1/execute of execute_command; the result.
rest() { curl -sS -m 120 -H "Authorization: Bearer $2" -H 'Content-Type: application/json' -d "{\"skill\":\"execute_command\",\"input\":$3}" "$1"; }

# start_sleepers URL SECRET MARK N: N calls that sleep 300 s, marked (the
# servers of the ring allow 300 s: SKILLS_SANDBOX_MAX_TIMEOUT_MS).
start_sleepers() {
    local mk=$3 count=$4
    $MCP --parallel "$count" "$1" "$2" execute_command "{\"command\":\"python3\",\"args\":[\"-c\",\"import time; time.sleep(300)\",\"$mk\"],\"timeoutMs\":300000}" 400 >/dev/null &
    if within 60 eval '[ "$(marked "$mk" | wc -l)" -ge "$count" ]'; then pass "$count sandboxes running before kill -9"; else fail "$count sandboxes running before kill -9" "$(marked "$mk" | wc -l) running"; fi
}

# -- boot ------------------------------------------------------------------------
note "kernel $(uname -r), $(systemctl --version | head -n1), cgroup $(stat -fc %T /sys/fs/cgroup)"
if ldd "$SRC/build/skilld" | grep -q 'not found'; then fail "runtime libraries present" "$(ldd "$SRC/build/skilld" | grep 'not found' | tr '\n' ' ')"; else pass "runtime libraries present"; fi
within 60 eval 'st=$(systemctl is-system-running); [ "$st" = running ] || [ "$st" = degraded ]'
note "system: $(systemctl is-system-running) $(systemctl --failed --no-legend | tr '\n' ' ')"

for CASE in $RING_CASES; do
    t0=$SECONDS
    case $CASE in
    session)
        # -- a root login session, as a user of scripts/quickstart.sh -----
        cg=$(cat /proc/self/cgroup)
        if [[ $cg =~ ^0::/user.slice/user-0.slice/session-[0-9]+.scope$ ]]; then pass "shell runs in a login session scope"; else fail "shell runs in a login session scope" "$cg"; fi
        B=$SRC/build/skilld
        # As scripts/deps.sh does: the system user the server drops to.
        getent passwd skilld >/dev/null ||
            useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin skilld
        # A root shell in /root, no flags and no DATA_DIR: /var/lib/skilld.
        unset DATA_DIR
        cd /root || exit 1
        out=$("$B" exec -- echo hi 2>/tmp/exec.err)
        if [ "$(jf "$out" .stdout)" = hi ]; then pass "skilld exec -- echo hi from the session in /root, no flags"; else fail "skilld exec -- echo hi from the session in /root, no flags" "${out:0:300} $(tail -n 3 /tmp/exec.err)"; fi
        if [ "$(stat -c %U /var/lib/skilld 2>&1)" = skilld ] && [ ! -e /root/var ]; then pass "its DATA_DIR is /var/lib/skilld, the service user's"; else fail "its DATA_DIR is /var/lib/skilld" "$(stat -c %U /var/lib/skilld 2>&1); $(ls -d /root/var 2>&1)"; fi
        if within 10 eval '[ -z "$(skilld_cgroups)" ]'; then pass "skilld exec leaves no cgroup behind"; else fail "skilld exec leaves no cgroup behind" "$(skilld_cgroups | tr '\n' ' ')"; fi
        if [ "$(cat /proc/self/cgroup)" = "$cg" ] && echo $$ >/dev/null; then pass "the session keeps its cgroup"; else fail "the session keeps its cgroup" "$(cat /proc/self/cgroup)"; fi
        DOCTOR_MODE=root DOCTOR_EXPECT_WARN= doctor_clean "$B"
        # The server as a root shell in /root starts it with no flags (the
        # ring's limits come from the environment): DATA_DIR /var/lib/skilld,
        # 127.0.0.1:8080. Its MCP checks run while the test scripts do.
        serve() {
            SKILLS_SANDBOX_MEMORY_MB=$RING_MEM_MB SKILLS_SANDBOX_PIDS_LIMIT=$RING_PIDS SKILLS_SANDBOX_CPU_PERCENT=$RING_CPU SKILLS_SANDBOX_MAX_TIMEOUT_MS=300000 \
                "$B" serve >>/tmp/serve.out 2>>/tmp/serve.err &
            SRV=$!
            within 60 curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1
        }
        serve
        KEY=$(awk '/^  secret: /{print $2}' /tmp/serve.out)
        if [ -n "$KEY" ]; then pass "first start prints the admin key in a terminal session"; else fail "first start prints the admin key" "$(tail -n 5 /tmp/serve.err)"; fi
        mcp_checks_bg http://127.0.0.1:8080/mcp "$KEY" /sys/fs/cgroup
        run_tests "$B"
        mcp_checks_end
        note "sandboxes running: $(marked "$mark" | wc -l)"
        old=$(own_cgroups)
        note "cgroups of the server before kill -9: $(echo $old)"
        kill -9 $SRV
        wait $SRV 2>/dev/null
        if within 5 no_marker "$mark"; then pass "kill -9 of the server leaves no sandbox process"; else fail "kill -9 of the server leaves no sandbox process" "$(marked "$mark" | head -3 | tr '\n' ' ')"; fi
        serve
        $MCP http://127.0.0.1:8080/mcp "$KEY" execute_command '{"command":"true"}' 60 >/dev/null
        if [ -n "$old" ] && within 10 still_there $old; then pass "the next start removes the dead server's cgroups"; else fail "the next start removes the dead server's cgroups" "before: $(echo $old); left: $(still_there_list $old)"; fi
        kill -TERM $SRV; wait $SRV
        if within 10 eval '[ -z "$(skilld_cgroups)" ]'; then pass "a stopped server leaves no cgroup behind"; else fail "a stopped server leaves no cgroup behind" "$(skilld_cgroups | tr '\n' ' ')"; fi
        rm -rf /var/lib/skilld # the service case starts from a fresh one
        cd "$SRC" || exit 1
        ;;
    service)
        # -- make install; systemctl start skilld --------------------------
        cd "$SRC" || exit 1
        if make -o build/skilld install >/tmp/install.log 2>&1; then pass "make install"; else fail "make install" "$(tail -n 5 /tmp/install.log | tr '\n' ' ')"; fi
        ok "make install created the skilld user" getent passwd skilld
        ok "skilld.service is installed" systemctl cat skilld.service
        echo "SKILLS_SANDBOX_MEMORY_MB=$RING_MEM_MB" >>/etc/skilld/skilld.conf
        echo "SKILLS_SANDBOX_PIDS_LIMIT=$RING_PIDS" >>/etc/skilld/skilld.conf
        echo "SKILLS_SANDBOX_CPU_PERCENT=$RING_CPU" >>/etc/skilld/skilld.conf
        echo "SKILLS_SANDBOX_MAX_TIMEOUT_MS=300000" >>/etc/skilld/skilld.conf
        systemctl start skilld
        within 60 curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1
        ok "systemctl start skilld: active" systemctl is-active skilld
        f=/var/lib/skilld/admin-key
        within 20 test -s $f
        owner=$(stat -c %U /var/lib/skilld)
        if [ "$(stat -c '%a %U' $f 2>&1)" = "600 $owner" ]; then pass "admin key in $f, mode 0600, owned by $owner"; else fail "admin key in $f, mode 0600" "$(stat -c '%a %U' $f 2>&1)"; fi
        KEY=$(cat $f)
        out=$($MCP http://127.0.0.1:8080/mcp "$KEY" execute_command '{"command":"echo","args":["from the service"]}' 120)
        if [ "$(jf "$out" .stdout)" = "from the service" ]; then pass "MCP answers with the key from the file"; else fail "MCP answers with the key from the file" "${out:0:400}"; fi
        if journalctl -u skilld --no-pager -o cat >/tmp/j.txt 2>&1 && ! grep -qF "$KEY" /tmp/j.txt && ! grep -q 'skd_[0-9a-f]\{16\}_' /tmp/j.txt && grep -q admin-key /tmp/j.txt; then
            pass "journalctl -u skilld holds no secret and names the key file"
        else
            fail "journalctl -u skilld holds no secret and names the key file" "$(grep -c . /tmp/j.txt) lines; $(head -c 300 /tmp/j.txt)"
        fi
        mcp_checks_bg http://127.0.0.1:8080/mcp "$KEY" /sys/fs/cgroup/system.slice/skilld.service
        # The tests and doctor in a unit like skilld.service (Delegate=yes,
        # its hardening; its runtime directories exist while it runs).
        unit=(systemd-run --quiet --wait --pipe --collect -p Delegate=yes -p PrivateTmp=yes -p ProtectSystem=strict -p ProtectHome=yes -p "ReadWritePaths=/payload /run/skilld-wsq /run/skilld-sandbox-root")
        # doctor and its real call with a DATA_DIR of their own (the unit's
        # /var/lib is read-only: skilld.service gets its StateDirectory).
        DOCTOR_MODE=root DOCTOR_EXPECT_WARN= doctor_clean /usr/local/bin/skilld "${unit[@]}" -p Environment=DATA_DIR=/payload/ring-service-var
        run_tests /usr/local/bin/skilld "${unit[@]}"
        mcp_checks_end
        main=$(systemctl show -p MainPID --value skilld)
        old=$(own_cgroups)
        kill -9 "$main"
        if within 5 no_marker "$mark"; then pass "kill -9 of the server leaves no sandbox process"; else fail "kill -9 of the server leaves no sandbox process" "$(marked "$mark" | head -3 | tr '\n' ' ')"; fi
        within 30 eval '[ "$(systemctl show -p MainPID --value skilld)" != "$main" ] && [ "$(systemctl show -p MainPID --value skilld)" != 0 ]'
        within 60 curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1
        out=$($MCP http://127.0.0.1:8080/mcp "$KEY" execute_command '{"command":"true"}' 60)
        if [ "$(jf "$out" .success)" = true ]; then pass "restarted by systemd after kill -9, sandbox works"; else fail "restarted by systemd after kill -9, sandbox works" "${out:0:300}"; fi
        if [ -n "$old" ] && within 10 still_there $old; then pass "the dead server's cgroups are gone after the restart"; else fail "the dead server's cgroups are gone after the restart" "before: $(echo $old); left: $(still_there_list $old)"; fi
        systemctl stop skilld
        if within 10 eval '[ ! -d /sys/fs/cgroup/system.slice/skilld.service ] && [ -z "$(skilld_cgroups)" ]'; then pass "systemctl stop skilld removes its cgroups"; else fail "systemctl stop skilld removes its cgroups" "$(skilld_cgroups | tr '\n' ' ')"; fi
        ;;
    rootless)
        # -- skilld-user.service for an ordinary user (installed above) ------
        getent passwd alice >/dev/null || useradd --create-home --uid 1000 alice
        loginctl enable-linger alice
        # Talk to alice's manager as alice (its private socket; no user bus
        # daemon in this image).
        AS=(runuser -u alice -- env XDG_RUNTIME_DIR=/run/user/1000)
        ctl() { "${AS[@]}" systemctl --user "$@"; }
        within 60 ctl show-environment >/dev/null 2>&1
        # Commands run like the service: in a transient unit of alice's with
        # Delegate=yes (systemd-run --user needs a user bus, which this
        # image does not have; a unit file and systemctl --user do not).
        mkdir -p /home/alice/.config/systemd/user /tmp/ring-u
        chown -R alice: /home/alice/.config
        chmod 1777 /tmp/ring-u
        U=(in_user_unit)
        ok "alice's user manager runs" ctl show-environment
        # The ring's default limits, as the service case puts them in
        # /etc/skilld/skilld.conf (which the user unit does not read).
        mkdir -p /home/alice/.config/systemd/user/skilld-user.service.d
        printf '[Service]\nEnvironment=SKILLS_SANDBOX_MEMORY_MB=%s SKILLS_SANDBOX_PIDS_LIMIT=%s SKILLS_SANDBOX_CPU_PERCENT=%s SKILLS_SANDBOX_MAX_TIMEOUT_MS=300000\n' \
            "$RING_MEM_MB" "$RING_PIDS" "$RING_CPU" >/home/alice/.config/systemd/user/skilld-user.service.d/ring.conf
        chown -R alice: /home/alice/.config/systemd
        ctl daemon-reload
        ctl start skilld-user
        within 60 curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1
        note "skilld-user's log: $(journalctl _UID=1000 --no-pager -n 15 -o cat 2>&1 | tr '\n' '|')"
        ok "systemctl --user start skilld-user: active" ctl is-active skilld-user
        # StateDirectory= of a user unit: ~/.local/state since systemd 254,
        # ~/.config before (Debian 12 has 252).
        within 20 eval 'test -s /home/alice/.local/state/skilld/admin-key || test -s /home/alice/.config/skilld/admin-key'
        f=/home/alice/.local/state/skilld/admin-key
        [ -s $f ] || f=/home/alice/.config/skilld/admin-key
        if [ "$(stat -c '%a %U' $f 2>&1)" = "600 alice" ]; then pass "admin key in $f, mode 0600, owned by alice"; else fail "admin key in $f, mode 0600, owned by alice" "$(stat -c '%a %U' $f 2>&1)"; fi
        KEY=$(cat $f)
        ucg=/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/skilld-user.service
        mcp_checks_bg http://127.0.0.1:8080/mcp "$KEY" $ucg
        DOCTOR_MODE=rootless DOCTOR_EXPECT_WARN=workspace_quota doctor_clean /usr/local/bin/skilld "${U[@]}" env DATA_DIR=/home/alice/.ring-var
        run_tests /usr/local/bin/skilld "${U[@]}"
        mcp_checks_end
        main=$(ctl show -p MainPID --value skilld-user)
        old=$(own_cgroups)
        kill -9 "$main"
        if within 5 no_marker "$mark"; then pass "kill -9 of the server leaves no sandbox process"; else fail "kill -9 of the server leaves no sandbox process" "$(marked "$mark" | head -3 | tr '\n' ' ')"; fi
        within 30 eval '[ "$(ctl show -p MainPID --value skilld-user)" != "$main" ] && [ "$(ctl show -p MainPID --value skilld-user)" != 0 ]'
        within 60 curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1
        out=$($MCP http://127.0.0.1:8080/mcp "$KEY" execute_command '{"command":"true"}' 60)
        if [ "$(jf "$out" .success)" = true ]; then pass "restarted after kill -9, sandbox works"; else fail "restarted after kill -9, sandbox works" "${out:0:300}"; fi
        if [ -n "$old" ] && within 10 still_there $old; then pass "the dead server's cgroups are gone after the restart"; else fail "the dead server's cgroups are gone after the restart" "before: $(echo $old); left: $(still_there_list $old)"; fi
        ctl stop skilld-user
        if within 10 eval '[ ! -d $ucg ] && [ -z "$(skilld_cgroups)" ]'; then pass "systemctl --user stop skilld-user removes its cgroups"; else fail "systemctl --user stop skilld-user removes its cgroups" "$(skilld_cgroups | tr '\n' ' ')"; fi
        ;;
    nosd)
        # -- no systemd: a hand-made cgroup, skilld alone in it ------------
        # As under runit, s6, supervisord, OpenRC or in a container without
        # systemd: skilld is exec'd as the only process of a cgroup made for
        # it, memory, pids and cpu enabled by its parent, and it does not see
        # systemd (a mount namespace with an empty /run/systemd, so
        # sd_booted() is false as on those systems). nosd_run CGROUP CMD...
        # does that; /tmp/nosd/skilld runs each skilld in a fresh cgroup of
        # its own below $NC (the test scripts call it many times).
        getent passwd skilld >/dev/null ||
            useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin skilld
        NS=/sys/fs/cgroup/ring-nosd NC=/sys/fs/cgroup/ring-nosd-cli
        mkdir -p /tmp/nosd "$NS" "$NC"
        # A skilld killed with SIGKILL leaves its leaf, and the controllers
        # that keep processes out of its cgroup: the next one goes into the
        # leaf (docs/sandbox.md, as a supervisor's run script does).
        cat >/tmp/nosd/run <<'SH'
#!/bin/sh
cg=$1; shift
mkdir -p "$cg" || exit 125
[ -d "$cg/skilld-server" ] && cg=$cg/skilld-server
echo $$ >"$cg/cgroup.procs" || exit 125
exec unshare --mount sh -c 'mount -t tmpfs -o size=1m none /run/systemd && exec "$@"' sh "$@"
SH
        printf '#!/bin/sh\nexec /tmp/nosd/run %s/c$$ %s "$@"\n' "$NC" "$SRC/build/skilld" >/tmp/nosd/skilld
        chmod 755 /tmp/nosd /tmp/nosd/run /tmp/nosd/skilld
        B=/tmp/nosd/skilld
        if echo "+memory +pids +cpu" >/sys/fs/cgroup/cgroup.subtree_control && echo "+memory +pids +cpu" >"$NC/cgroup.subtree_control"; then
            pass "hand-made cgroups $NS and $NC with memory, pids, cpu"
        else
            fail "hand-made cgroups with memory, pids, cpu" "$(cat /sys/fs/cgroup/cgroup.subtree_control)"
        fi
        if [ "$(/tmp/nosd/run "$NC/probe" sh -c '[ -d /run/systemd/system ] || echo none; cat /proc/self/cgroup')" = "none
0::/ring-nosd-cli/probe" ]; then pass "nosd_run: skilld's view has no systemd, its cgroup its own"; else fail "nosd_run: skilld's view has no systemd" "$(/tmp/nosd/run "$NC/probe2" sh -c 'ls /run/systemd; cat /proc/self/cgroup' 2>&1 | tr '\n' ' ')"; fi
        export DATA_DIR=/tmp/nosd/var
        out=$("$B" exec --key ring -- echo hi 2>/tmp/exec.err)
        if [ "$(jf "$out" .stdout)" = hi ]; then pass "skilld exec alone in a cgroup without systemd"; else fail "skilld exec alone in a cgroup without systemd" "${out:0:300} $(tail -n 3 /tmp/exec.err)"; fi
        if [ -z "$(find "$NC" -mindepth 2 -name 'skilld*')" ]; then pass "it leaves its cgroup as it found it (no leaf, no skilld/)"; else fail "it leaves its cgroup as it found it" "$(find "$NC" -mindepth 2 -name 'skilld*' | head -3 | tr '\n' ' ')"; fi
        DOCTOR_MODE=root DOCTOR_EXPECT_WARN= doctor_clean "$B"
        if [ -z "$(find "$NC" -mindepth 2 -name 'skilld*')" ]; then pass "doctor and its real call leave their cgroups as they found them"; else fail "doctor and its real call leave their cgroups as they found them" "$(find "$NC" -mindepth 2 -name 'skilld*' | head -4 | tr '\n' ' ')"; fi
        # Someone else's process in the cgroup: refused, naming it, by a
        # call and by doctor alike.
        # (The sleeper's output is not the command substitution's pipe, or
        # $(...) would wait for it to end.)
        fx=(/tmp/nosd/run "$NC/foreign" sh -c 'sleep 120 >/dev/null 2>&1 </dev/null & exec "$0" "$@"' "$SRC/build/skilld")
        out=$("${fx[@]}" exec -- true 2>&1)
        erc=$?
        dout=$("${fx[@]}" doctor 2>&1)
        drc=$?
        if [ $erc != 0 ] && echo "$out" | grep -q "not skilld's: sleep (pid [0-9]*)"; then pass "a cgroup holding another program's process is refused, naming it"; else fail "a cgroup holding another program's process is refused, naming it" "exit $erc: ${out:0:300}"; fi
        if [ $drc != 0 ] && echo "$dout" | grep -qE "^FAIL +cgroup_limits .*sleep \(pid"; then pass "doctor fails there too, naming it"; else fail "doctor fails there too, naming it" "exit $drc: $(echo "$dout" | grep -E 'FAIL|first' | head -c 400)"; fi
        kill $(cat "$NC/foreign/cgroup.procs") 2>/dev/null
        # The server, as a supervisor's script starts it: exec'd alone into
        # its cgroup, no flags.
        serve() {
            SKILLS_SANDBOX_MEMORY_MB=$RING_MEM_MB SKILLS_SANDBOX_PIDS_LIMIT=$RING_PIDS SKILLS_SANDBOX_CPU_PERCENT=$RING_CPU SKILLS_SANDBOX_MAX_TIMEOUT_MS=300000 \
                /tmp/nosd/run "$NS" "$SRC/build/skilld" serve >>/tmp/nosd/serve.out 2>>/tmp/nosd/serve.err &
            SRV=$!
            within 60 curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1
        }
        serve
        KEY=$(awk '/^  secret: /{print $2}' /tmp/nosd/serve.out)
        if [ -n "$KEY" ]; then pass "the server starts and prints the admin key"; else fail "the server starts and prints the admin key" "$(tail -n 5 /tmp/nosd/serve.err)"; fi
        if within 30 eval '[ -z "$(cat "$NS/cgroup.procs")" ] && [ "$(wc -l <"$NS/skilld-server/cgroup.procs")" = 3 ] && grep -qx "$SRV" "$NS/skilld-server/cgroup.procs"'; then
            pass "the server, its zygote and spawner moved into $NS/skilld-server"
        else
            fail "the server, its zygote and spawner moved into the leaf" "$NS: $(cat "$NS/cgroup.procs" | tr '\n' ' '); leaf: $(cat "$NS/skilld-server/cgroup.procs" 2>&1 | tr '\n' ' ')"
        fi
        mcp_checks_bg http://127.0.0.1:8080/mcp "$KEY" "$NS"
        run_tests "$B"
        mcp_checks_end
        old=$(own_cgroups)
        kill -9 $SRV
        wait $SRV 2>/dev/null
        if within 5 no_marker "$mark"; then pass "kill -9 of the server leaves no sandbox process"; else fail "kill -9 of the server leaves no sandbox process" "$(marked "$mark" | head -3 | tr '\n' ' ')"; fi
        serve
        out=$($MCP http://127.0.0.1:8080/mcp "$KEY" execute_command '{"command":"true"}' 60)
        if [ "$(jf "$out" .success)" = true ]; then pass "restarted into the leaf the dead one left, sandbox works"; else fail "restarted into the leaf the dead one left, sandbox works" "${out:0:300} $(tail -n 3 /tmp/nosd/serve.err)"; fi
        if [ -n "$old" ] && within 10 still_there $old; then pass "the next start removes the dead server's cgroups"; else fail "the next start removes the dead server's cgroups" "before: $(echo $old); left: $(still_there_list $old)"; fi
        kill -TERM $SRV; wait $SRV
        if within 10 eval '[ -z "$(find "$NS" -mindepth 1 -type d)" ]'; then pass "a stopped server leaves its cgroup as it found it"; else fail "a stopped server leaves its cgroup as it found it" "$(find "$NS" -mindepth 1 -type d | head -3 | tr '\n' ' ')"; fi
        unset DATA_DIR
        find "$NC" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
        ;;
    *)
        fail "unknown case" "$CASE"
        ;;
    esac
    note "case $CASE took $((SECONDS - t0)) s"
done
CASE=boot
echo "RING-DONE"
exec >&- 2>&-
sleep 1
sync
systemctl poweroff --force --force
