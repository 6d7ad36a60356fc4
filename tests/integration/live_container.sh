#!/usr/bin/env bash
# Live sandboxes on the docker and podman runtimes (docs/containers.md,
# "Live sandboxes") through the real binary and REST /v1/sandboxes, on each
# engine in turn (scripts/setup-containers.sh starts dockerd and imports the
# busybox test image into both, as for tests/providers/providers.sh):
#   1. create answers 201 and the container is up, labelled skilld=1;
#   2. a file in /tmp written by one exec is there for the next; every
#      exec runs as the sandbox user;
#   3. the sandbox's memory limit is on the container's memory cgroup;
#   4. another key gets 404 on get, exec and delete;
#   5. an exec that times out is killed, with what it left running in its
#      session, and the sandbox lives on;
#   6. without networkEnabled there is no network but loopback;
#   7. a background process runs and is killed;
#  10. pause: no container is left and no process; an exec is 409
#      sandbox_paused; resume: the files in /tmp are back (owner 65534,
#      mode, a link kept), a background process of before is not, and the
#      root filesystem is still read-only; fork: a new sandbox with the
#      files, a write in either unseen in the other; a fork of a paused
#      one; a delete of a paused one leaves nothing under
#      DATA_DIR/snapshots;
#  11. a sandbox paused on docker, resumed on the server restarted as
#      podman: 503 naming the docker runtime, it stays paused, and its
#      delete leaves no saved files;
#   8. delete leaves no container (ps -a by label), and a later exec is 404;
#      a sandbox whose container ended from inside is 404 too;
#   9. kill -9 of the server leaves no container of its live sandboxes.
SETUP_LOG=$(mktemp /tmp/skilld-livectr-setup.XXXXXX)
if ! "$(dirname "$0")/../../scripts/setup-containers.sh" >"$SETUP_LOG" 2>&1; then
    echo "FAIL live_container.sh: container setup: $(tail -3 "$SETUP_LOG" | tr '\n' ' ')"
fi
rm -f "$SETUP_LOG"
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }
# run KEY ID COMMAND: a foreground `sh -c COMMAND` exec; its stdout in OUT.
run() {
    as "$1" POST "/v1/sandboxes/$2/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"command":"sh","args":["-c",sys.argv[1]]}))' "$3")"
    OUT=$(echo "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("stdout",""), end="")' 2>/dev/null)
}
ctrs() { "$1" ps -a -q --filter label=skilld=1 --filter "label=skilld.run=$2" 2>/dev/null | wc -l; }
saved_files() { find "$DATA/snapshots" -mindepth 2 -maxdepth 2 -name "$1*" 2>/dev/null; }
# The host's processes in pid namespace $1 (a readlink of /proc/<pid>/ns/pid).
in_pidns() { for p in /proc/[0-9]*; do [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"; done; }

# ---- 10 ----
pause_cases() {
    local R=$1 ID=$2 FK FP NS BEFORE
    run "$K1" "$ID" 'echo tmp-kept >/tmp/state && mkdir /tmp/d && echo kept >/tmp/d/f && chmod 640 /tmp/d/f && ln -s d/f /tmp/l && echo ok'
    [ "$OUT" = ok ] && pass "$R: files written in /tmp" || fail "$R: files written in /tmp" "$BODY"
    as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"sh","args":["-c","echo bg >/tmp/bg; sleep 300"],"background":true}'
    for _ in $(seq 1 100); do run "$K1" "$ID" 'cat /tmp/bg 2>/dev/null'; [ "$OUT" = bg ] && break; sleep 0.1; done
    NS=$(readlink "/proc/$($R inspect --format '{{.State.Pid}}' "skilld-$ID")/ns/pid")
    BEFORE=$(in_pidns "$NS" | wc -l)
    as "$K1" POST "/v1/sandboxes/$ID/pause" -d '{}'
    expect_status "$R: pause answers 200" 200
    expect_json "$R: pause: state paused, changed" "j['state'] == 'paused' and j['changed'] and j['sandboxId'] == '$ID'"
    [ "$(ctrs $R "$ID")" = 0 ] && pass "$R: a paused sandbox has no container (ps -a)" ||
        fail "$R: a paused sandbox has no container (ps -a)" "$($R ps -a)"
    [ "$BEFORE" -ge 2 ] && [ -z "$(in_pidns "$NS")" ] && pass "$R: and no process (it had $BEFORE)" ||
        fail "$R: and no process" "before: $BEFORE; left: $(in_pidns "$NS")"
    [ -n "$(saved_files "$ID")" ] && pass "$R: its files are saved under DATA_DIR/snapshots" ||
        fail "$R: its files are saved under DATA_DIR/snapshots" "$(find "$DATA/snapshots" 2>&1 | head -5)"
    as "$K1" GET "/v1/sandboxes/$ID"
    expect_json "$R: GET says paused, with savedBytes" 'j["state"] == "paused" and j["savedBytes"] > 0'
    run "$K1" "$ID" 'echo no'
    expect_status "$R: an exec in a paused sandbox is 409" 409
    expect_json "$R: its code is sandbox_paused" 'j["error"]["code"] == "sandbox_paused"'

    as "$K1" POST "/v1/sandboxes/$ID/resume"
    expect_status "$R: resume answers 200" 200
    expect_json "$R: resume: the same id, running" "j['sandbox']['id'] == '$ID' and j['state'] == 'running' and j['changed']"
    [ "$(ctrs $R "$ID")" = 1 ] && pass "$R: the resumed sandbox has its container" || fail "$R: the resumed sandbox has its container" "$($R ps -a)"
    run "$K1" "$ID" 'cat /tmp/state /tmp/l; stat -c "%u %a" /tmp/state /tmp/d/f; readlink /tmp/l; cat /tmp/bg; ps -o args | grep -c "^sleep 300"; awk "\$2 == \"/\" { split(\$4, o, \",\"); print o[1] }" /proc/mounts'
    [ "$OUT" = "$(printf 'tmp-kept\nkept\n65534 644\n65534 640\nd/f\nbg\n0\nro')" ] &&
        pass "$R: resume finds /tmp as it was (owner, mode, link), no process of before, the root read-only" ||
        fail "$R: resume finds /tmp as it was" "$BODY"
    [ -z "$(saved_files "$ID")" ] && pass "$R: a resume leaves no saved files" || fail "$R: a resume leaves no saved files" "$(saved_files "$ID")"

    as "$K1" POST "/v1/sandboxes/$ID/fork"
    expect_status "$R: fork answers 201" 201
    FK=$(echo "$BODY" | "$JGET" .id)
    expect_json "$R: the fork is a new running sandbox" "j['id'] != '$ID' and j['state'] == 'running' and j['forkedFrom'] == '$ID'"
    [ "$(ctrs $R "$FK")" = 1 ] && pass "$R: the fork has a container of its own" || fail "$R: the fork has a container of its own" "$($R ps -a)"
    run "$K1" "$FK" 'cat /tmp/state /tmp/d/f; echo fork >/tmp/state; echo f >/tmp/only-fork; echo ok'
    [ "$OUT" = "$(printf 'tmp-kept\nkept\nok')" ] && pass "$R: the fork has the files" || fail "$R: the fork has the files" "$BODY"
    run "$K1" "$ID" 'cat /tmp/state; ls /tmp/only-fork 2>/dev/null | wc -l; echo orig >/tmp/o'
    [ "$OUT" = "$(printf 'tmp-kept\n0')" ] && pass "$R: a write in the fork is not seen in the original" ||
        fail "$R: a write in the fork is not seen in the original" "$BODY"
    run "$K1" "$FK" 'cat /tmp/state; ls /tmp/o 2>/dev/null | wc -l'
    [ "$OUT" = "$(printf 'fork\n0')" ] && pass "$R: a write in the original is not seen in the fork" ||
        fail "$R: a write in the original is not seen in the fork" "$BODY"

    # A fork of a paused sandbox, then the delete of a paused one.
    as "$K1" POST "/v1/sandboxes/$FK/pause" -d '{}'
    expect_json "$R: the fork pauses" "j['state'] == 'paused'"
    as "$K1" POST "/v1/sandboxes/$FK/fork"
    expect_status "$R: a fork of a paused sandbox answers 201" 201
    FP=$(echo "$BODY" | "$JGET" .id)
    run "$K1" "$FP" 'cat /tmp/state /tmp/only-fork'
    [ "$OUT" = "$(printf 'fork\nf')" ] && pass "$R: a fork of a paused sandbox has its files" || fail "$R: a fork of a paused sandbox has its files" "$BODY"
    as "$K1" GET "/v1/sandboxes/$FK"
    expect_json "$R: and leaves it paused" 'j["state"] == "paused"'
    as "$K1" DELETE "/v1/sandboxes/$FK"
    expect_status "$R: delete of a paused sandbox" 200
    [ -z "$(saved_files "$FK")" ] && pass "$R: it leaves nothing under DATA_DIR/snapshots" ||
        fail "$R: it leaves nothing under DATA_DIR/snapshots" "$(saved_files "$FK")"
    as "$K1" DELETE "/v1/sandboxes/$FP"
    [ "$(ctrs $R "$FP")" = 0 ] && pass "$R: a fork's delete leaves no container" || fail "$R: a fork's delete leaves no container" "$($R ps -a)"
}

for R in docker podman; do
    # One data directory for both (a later start prints no admin secret).
    start_server SKILLS_SANDBOX_RUNTIME=$R SKILLS_ALLOWED_SANDBOX_IMAGES=skilld-test
    curl -fsS "$URL/healthz" >/dev/null 2>&1 || { fail "$R: server starts" "$(tail -5 "$TMP/serve.err")"; continue; }
    K1=$(new_key "c1$R" skills:execute | cut -d' ' -f2)
    K2=$(new_key "c2$R" skills:execute | cut -d' ' -f2)

    # ---- 1 ----
    as "$K1" POST /v1/sandboxes -d '{}'
    expect_status "$R: a live sandbox without an image is refused" 503
    expect_json "$R: the refusal says the runtime needs an image" '"needs an image" in j["error"]["message"]'
    as "$K1" POST /v1/sandboxes -d '{"image":"skilld-test:1","memoryLimit":200,"pidsLimit":50,"timeoutMs":20000}'
    expect_status "$R: create answers 201" 201
    ID=$(echo "$BODY" | "$JGET" .id)
    [ "$(ctrs $R "$ID")" = 1 ] && pass "$R: its container is up, labelled" || fail "$R: its container is up, labelled" "$($R ps -a)"

    # ---- 2 ----
    run "$K1" "$ID" 'echo kept >/tmp/a; echo root >/home/b 2>/dev/null || echo root >/b 2>/dev/null || mkdir -p /var/x 2>/dev/null; id -u'
    expect_json "$R: an exec answers as execute_command" 'j["success"] is True and j["exitCode"] == 0'
    [ "$OUT" = 65534 ] && pass "$R: the exec runs as the sandbox user" || fail "$R: the exec runs as the sandbox user" "$BODY"
    run "$K1" "$ID" 'cat /tmp/a; echo x >>/tmp/a; wc -l </tmp/a'
    [ "$OUT" = "$(printf 'kept\n2')" ] && pass "$R: /tmp is kept between execs" || fail "$R: /tmp is kept between execs" "$BODY"
    # ---- 3 ----
    run "$K1" "$ID" 'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes'
    [ "$OUT" = $((200 * 1048576)) ] && pass "$R: the memory limit is on the container's cgroup" || fail "$R: the memory limit is on the container's cgroup" "$BODY"
    run "$K1" "$ID" 'cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max'
    [ "$OUT" = 50 ] && pass "$R: the pids limit is on the container's cgroup" || fail "$R: the pids limit is on the container's cgroup" "$BODY"

    # ---- 4 ----
    as "$K2" GET "/v1/sandboxes/$ID"
    expect_status "$R: another key's get is 404" 404
    run "$K2" "$ID" 'echo no'
    expect_status "$R: another key's exec is 404" 404
    as "$K2" DELETE "/v1/sandboxes/$ID"
    expect_status "$R: another key's delete is 404" 404

    # ---- 5 ----
    as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"sh","args":["-c","(sleep 300; echo late >/tmp/late) & echo $! >/tmp/bgpid; sleep 300"],"timeoutMs":1500}'
    expect_json "$R: an exec that times out is killed" 'j["timedOut"] is True and j["killed"] is True'
    run "$K1" "$ID" 'p=$(cat /tmp/bgpid); if [ -d /proc/$p ]; then echo alive; else echo gone; fi; ps -o args | grep -c "^sleep 300"'
    [ "$OUT" = "$(printf 'gone\n0')" ] && pass "$R: what the timed-out exec started is gone; the sandbox lives on" || fail "$R: what the timed-out exec started is gone" "$BODY"

    # ---- 6 ----
    run "$K1" "$ID" 'ls /sys/class/net | tr "\n" " "; wget -q -T 3 -O- http://1.1.1.1/ >/dev/null 2>&1 && echo reached || echo unreachable'
    [ "$OUT" = "lo unreachable" ] && pass "$R: without networkEnabled only loopback, nothing reached" || fail "$R: without networkEnabled only loopback" "$BODY"

    # ---- 7 ----
    as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"sh","args":["-c","echo started; sleep 300"],"background":true}'
    expect_json "$R: a background exec answers its processId" 'j["success"] is True and len(j["processId"]) == 36'
    PID7=$(echo "$BODY" | "$JGET" .processId)
    for _ in $(seq 1 300); do as "$K1" GET "/v1/sandboxes/$ID/processes/$PID7/output"; echo "$BODY" | grep -q '"stdout":"started' && break; sleep 0.1; done
    expect_json "$R: its output is read while it runs" '"started" in j["stdout"]'
    as "$K1" DELETE "/v1/sandboxes/$ID/processes/$PID7"
    run "$K1" "$ID" 'ps -o args | grep -c "^sleep 300"'
    [ "$OUT" = 0 ] && pass "$R: a killed background process is gone" || fail "$R: a killed background process is gone" "$BODY"
    # A kill that comes before the engine has started the process: the
    # engine starts it anyway, and it must find itself ended.
    as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"sleep","args":["299"],"background":true}'
    PID7B=$(echo "$BODY" | "$JGET" .processId)
    as "$K1" DELETE "/v1/sandboxes/$ID/processes/$PID7B"
    sleep 2
    run "$K1" "$ID" 'ps -o args | grep -c "^sleep 299"'
    [ "$OUT" = 0 ] && pass "$R: a background process killed as soon as it is started never runs" ||
        fail "$R: a background process killed as soon as it is started never runs" "$BODY"

    # ---- 10: pause, resume, fork ----
    pause_cases "$R" "$ID"
    if [ "$R" = docker ]; then
        # ---- 11 (first half): a sandbox paused on docker, for podman ----
        as "$K1" POST /v1/sandboxes -d '{"image":"skilld-test:1"}'
        XP=$(echo "$BODY" | "$JGET" .id)
        KD=$K1
        run "$K1" "$XP" 'echo x >/tmp/x'
        as "$K1" POST "/v1/sandboxes/$XP/pause" -d '{}'
        expect_json "docker: a second sandbox pauses" "j['state'] == 'paused'"
    else
        # ---- 11 ----
        as "$KD" POST "/v1/sandboxes/$XP/resume"
        expect_status "podman: a resume of a sandbox paused on docker is refused" 503
        expect_json "podman: saying which runtime to resume it on" \
            '"paused on the docker runtime" in j["error"]["message"] and "SKILLS_SANDBOX_RUNTIME is docker" in j["error"]["message"]'
        as "$KD" GET "/v1/sandboxes/$XP"
        expect_json "podman: it stays paused" 'j["state"] == "paused"'
        as "$KD" DELETE "/v1/sandboxes/$XP"
        expect_status "podman: and is deleted" 200
        [ -z "$(saved_files "$XP")" ] && pass "podman: leaving nothing under DATA_DIR/snapshots" ||
            fail "podman: leaving nothing under DATA_DIR/snapshots" "$(saved_files "$XP")"
    fi

    # ---- 8 ----
    as "$K1" DELETE "/v1/sandboxes/$ID"
    expect_status "$R: delete" 200
    [ "$(ctrs $R "$ID")" = 0 ] && pass "$R: delete leaves no container" || fail "$R: delete leaves no container" "$($R ps -a)"
    run "$K1" "$ID" 'echo no'
    expect_status "$R: an exec after delete is 404" 404

    # ---- 8b: a sandbox whose container ended from inside is 404 ----
    as "$K1" POST /v1/sandboxes -d '{"image":"skilld-test:1"}'
    ID8=$(echo "$BODY" | "$JGET" .id)
    run "$K1" "$ID8" 'kill $(ps -o pid,args | sed -n "s/^ *\([0-9]*\) sh -c read _.*/\1/p")'
    for _ in $(seq 1 300); do [ "$(ctrs $R "$ID8")" = 0 ] && break; sleep 0.1; done
    run "$K1" "$ID8" 'echo no'
    expect_status "$R: an exec in a sandbox whose container ended from inside is 404" 404
    as "$K1" GET "/v1/sandboxes/$ID8"
    expect_status "$R: and the sandbox is gone" 404

    # ---- 9 ----
    IDS=""
    for _ in 1 2; do
        as "$K1" POST /v1/sandboxes -d '{"image":"skilld-test:1"}'
        IDS="$IDS $(echo "$BODY" | "$JGET" .id)"
    done
    kill -9 "$SRV_PID"; wait "$SRV_PID" 2>/dev/null
    left=""
    for _ in $(seq 1 100); do
        left=""
        for i in $IDS; do [ "$(ctrs $R "$i")" = 0 ] || left="$left $i"; done
        [ -z "$left" ] && break
        sleep 0.2
    done
    [ -z "$left" ] && [ -n "${IDS// /}" ] && pass "$R: kill -9 of the server leaves no container of its live sandboxes" ||
        fail "$R: kill -9 of the server leaves no container" "left:$left; $($R ps -a)"
done
finish
