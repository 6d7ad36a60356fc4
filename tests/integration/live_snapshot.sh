#!/usr/bin/env bash
# Pause, resume and fork of live sandboxes (docs/sandbox.md, "Pause,
# resume, fork") through the real binary and REST /v1/sandboxes:
#   1. pause answers 200 state paused; within 2 s none of the sandbox's
#      processes (a background one too) and no cgroup of it is left; GET
#      says paused with savedBytes.
#   2. an exec (and a background exec) in a paused sandbox is 409
#      sandbox_paused with a message that says how to resume, and it stays
#      paused; a second pause is 200 changed false, "already paused".
#   3. resume: the same id runs again; a file in /usr/local (root layer)
#      and files, a mode and a symbolic link in /tmp are as they were; a
#      second resume is 200 changed false, "already running".
#   4. fork (201, a new id): the fork has the files; a write in either is
#      not seen in the other, both ways; a fork of a paused sandbox has its
#      files and leaves it paused.
#   5. another key: 404 not_found on pause, resume and fork.
#   6. onIdle "pause": the idle timeout pauses the sandbox instead of
#      ending it, and a resume finds its files.
#   7. the caps: past SKILLS_SANDBOX_MAX_PAUSED_PER_KEY a pause is 429
#      busy naming the setting, and one whose files would pass
#      SKILLS_SANDBOX_PAUSED_MAX_BYTES is 507 quota_exceeded; both keep
#      running.
#   8. DELETE of a paused sandbox leaves no file of it under DATA_DIR, and
#      neither does revoking its key.
#   9. kill -9 of the server while sandboxes are paused: they are listed
#      after a restart, still 404 to another key, and one resumes with its
#      files; paused again and the server stopped, its files stay (and no
#      snapshot of the server's own), and it resumes after a start; a
#      paused sandbox of the former life is deleted, and once all are,
#      nothing is left under DATA_DIR/snapshots.
#  10. saved files that no paused row names are swept at the server's
#      start: a kill -9 between a pause's publishing of its files and its
#      row's update leaves the row running (set so in the store while the
#      server is stopped), which the start marks lost, and the files go;
#      so do those of an id with no row; a paused sandbox's stay, and it
#      resumes with them; a name that is no sandbox id is left alone and
#      logged. A paused sandbox whose key was revoked in the store while
#      the server was stopped (no revocation removed it) is removed by the
#      live tick after the start: its files go and its row ends.
#  11. a /tmp nearly full of data and many empty files (which the copy
#      counts above what tmpfs charges) pauses and resumes whole.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

SETTINGS=(SKILLS_SANDBOX_MAX_LIVE_PER_KEY=8 SKILLS_SANDBOX_ROOT_LAYER_MAX_BYTES=16777216
    SKILLS_SANDBOX_MAX_PAUSED_PER_KEY=3 SKILLS_SANDBOX_PAUSED_MAX_BYTES=8388608)
start_server "${SETTINGS[@]}"
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
K1=$(new_key s1 skills:execute | cut -d' ' -f2)
K2=$(new_key s2 skills:execute | cut -d' ' -f2)
K3=$(new_key s3 skills:execute | cut -d' ' -f2)
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }
cg_dirs() { find /sys/fs/cgroup -maxdepth 9 -type d -name "$1" 2>/dev/null; }
live_procs() { for d in $(cg_dirs "$1"); do cat "$d/cgroup.procs" 2>/dev/null; done | sort -u; }
sh_in() { # sh_in KEY ID SCRIPT: run sh -c SCRIPT in the sandbox
    local body
    body=$(python3 -c 'import json,sys; print(json.dumps({"command":"sh","args":["-c",sys.argv[1]]}))' "$3")
    as "$1" POST "/v1/sandboxes/$2/exec" -d "$body"
}
saved_files() { find "$DATA/snapshots" -mindepth 2 -maxdepth 2 -name "$1*" 2>/dev/null; }

as "$ADMIN" GET /v1/skills
expect_json "the skills sandbox_pause, sandbox_resume and sandbox_fork are listed" \
    '{"sandbox_pause","sandbox_resume","sandbox_fork"} <= {s["name"] for s in (j["skills"] if isinstance(j, dict) else j)}'

# ---- 1 ----
as "$K1" POST /v1/sandboxes -d '{}'
ID=$(echo "$BODY" | "$JGET" .id)
sh_in "$K1" "$ID" 'mkdir -p /usr/local/lib/snap && echo layer-kept > /usr/local/lib/snap/f &&
    echo tmp-kept > /tmp/state && echo secret > /tmp/private && chmod 0640 /tmp/private &&
    ln -s /etc/hostname /tmp/link && mkdir -p /tmp/d/e && echo deep > /tmp/d/e/g && echo ok'
expect_json "files are written to /usr/local and /tmp" 'j["stdout"] == "ok\n"'
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"sleep","args":["600"],"background":true}'
expect_json "a background process runs" 'j["success"]'
PROCS=$(live_procs "$ID")
as "$K1" POST "/v1/sandboxes/$ID/pause"
expect_status "pause answers 200" 200
expect_json "pause: state paused, changed" "j['state'] == 'paused' and j['changed'] and j['sandboxId'] == '$ID'"
left=1
for _ in $(seq 1 40); do
    alive=""
    for p in $PROCS; do [ -d "/proc/$p" ] && alive="$alive $p"; done
    [ -z "$alive" ] && [ -z "$(cg_dirs "$ID")" ] && { left=0; break; }
    sleep 0.05
done
[ -n "$PROCS" ] && [ "$left" = 0 ] && pass "a paused sandbox has no process and no cgroup" ||
    fail "a paused sandbox has no process and no cgroup" "before: $PROCS; left: $alive $(cg_dirs "$ID")"
as "$K1" GET "/v1/sandboxes/$ID"
expect_json "GET says paused, with savedBytes" 'j["state"] == "paused" and j["savedBytes"] > 0 and j["expiresAt"] is None'
[ -n "$(saved_files "$ID")" ] && pass "its files are saved under DATA_DIR/snapshots" ||
    fail "its files are saved under DATA_DIR/snapshots" "$(find "$DATA/snapshots" 2>&1 | head -5)"

# ---- 2 ----
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"true"}'
expect_status "an exec in a paused sandbox is 409" 409
expect_json "its code is sandbox_paused and it says how to resume" \
    "j['error']['code'] == 'sandbox_paused' and '/v1/sandboxes/$ID/resume' in j['error']['message'] and 'sandbox_resume' in j['error']['message']"
as "$K1" POST "/v1/sandboxes/$ID/exec" -d '{"command":"true","background":true}'
expect_json "a background exec in a paused sandbox is sandbox_paused too" 'j["error"]["code"] == "sandbox_paused"'
as "$K1" GET "/v1/sandboxes/$ID"
expect_json "the exec did not resume it" 'j["state"] == "paused"'
[ -z "$(cg_dirs "$ID")" ] && pass "still no cgroup after the refused exec" || fail "still no cgroup after the refused exec" "$(cg_dirs "$ID")"
as "$K1" POST "/v1/sandboxes/$ID/pause"
expect_status "pausing a paused sandbox is 200" 200
expect_json "it says it was paused already" 'j["changed"] is False and "already paused" in j["message"] and j["state"] == "paused"'

# ---- 3 ----
as "$K1" POST "/v1/sandboxes/$ID/resume"
expect_status "resume answers 200" 200
expect_json "resume: the same id, running, changed" "j['sandbox']['id'] == '$ID' and j['state'] == 'running' and j['changed']"
sh_in "$K1" "$ID" 'cat /usr/local/lib/snap/f /tmp/state /tmp/d/e/g; stat -c "%a %U" /tmp/private; readlink /tmp/link; test -L /tmp/link && echo islink'
expect_json "resume finds the root layer's file and /tmp as they were (mode, owner, link)" \
    'j["stdout"] == "layer-kept\ntmp-kept\ndeep\n640 sandbox\n/etc/hostname\nislink\n"'
as "$K1" GET "/v1/sandboxes/$ID/processes"
expect_json "the processes did not survive (a filesystem snapshot)" 'j["processes"] == []'
as "$K1" POST "/v1/sandboxes/$ID/resume"
expect_status "resuming a running sandbox is 200" 200
expect_json "it says it was running already" 'j["changed"] is False and "already running" in j["message"] and j["state"] == "running"'

# ---- 4 ----
as "$K1" POST "/v1/sandboxes/$ID/fork"
expect_status "fork answers 201" 201
FK=$(echo "$BODY" | "$JGET" .id)
expect_json "the fork is a new running sandbox" "j['id'] != '$ID' and len(j['id']) == 36 and j['state'] == 'running' and j['forkedFrom'] == '$ID'"
sh_in "$K1" "$FK" 'cat /usr/local/lib/snap/f /tmp/state'
expect_json "the fork has the files" 'j["stdout"] == "layer-kept\ntmp-kept\n"'
sh_in "$K1" "$FK" 'echo fork > /tmp/state && echo f > /usr/local/lib/snap/only-fork && echo ok'
sh_in "$K1" "$ID" 'cat /tmp/state; ls /usr/local/lib/snap'
expect_json "a write in the fork is not seen in the original" 'j["stdout"] == "tmp-kept\nf\n"'
sh_in "$K1" "$ID" 'echo orig > /tmp/only-orig && rm /usr/local/lib/snap/f && echo g > /usr/local/lib/snap/g && echo ok'
sh_in "$K1" "$FK" 'cat /tmp/state; ls /tmp/only-orig 2>&1 >/dev/null | wc -l; cat /usr/local/lib/snap/f'
expect_json "a write in the original is not seen in the fork" 'j["stdout"] == "fork\n1\nlayer-kept\n"'
as "$K1" POST "/v1/sandboxes/$ID/pause"
as "$K1" POST "/v1/sandboxes/$ID/fork"
expect_status "a paused sandbox forks: 201" 201
FP=$(echo "$BODY" | "$JGET" .id)
sh_in "$K1" "$FP" 'cat /tmp/only-orig; ls /usr/local/lib/snap'
expect_json "the fork of the paused one has its files (the deletion too)" 'j["stdout"] == "orig\ng\n"'
as "$K1" POST "/v1/sandboxes/$ID/resume"
sh_in "$K1" "$ID" 'ls /usr/local/lib/snap'
expect_json "a pause after a fork keeps the root layer" 'j["stdout"] == "g\n"'
as "$K1" POST "/v1/sandboxes/$ID/pause"
as "$K1" GET "/v1/sandboxes/$ID"
expect_json "the forked paused sandbox stays paused" 'j["state"] == "paused"'

# ---- 5 ----
for op in pause resume fork; do
    as "$K2" POST "/v1/sandboxes/$ID/$op"
    expect_status "another key: $op of a paused sandbox is 404" 404
    expect_json "another key: $op is not_found" 'j["error"]["code"] == "not_found"'
    as "$K2" POST "/v1/sandboxes/$FK/$op"
    expect_status "another key: $op of a running sandbox is 404" 404
done
as "$K1" GET "/v1/sandboxes/$FK"
expect_json "another key's calls changed nothing" 'j["state"] == "running"'

# ---- 6 ----
# 3 s of idleness: long enough that a loaded machine still writes the file
# before the sandbox pauses (the write is checked), short enough to wait for.
as "$K2" POST /v1/sandboxes -d '{"idleTimeoutMs":3000,"onIdle":"pause"}'
expect_json "create takes onIdle pause" 'j["onIdle"] == "pause"'
IDL=$(echo "$BODY" | "$JGET" .id)
# On a machine loaded enough that the exec comes 3 s after the create (or
# the resume), the sandbox is paused first: the exec is then 409 and the
# sandbox is resumed and the write tried again (at most 5 times).
for _ in 1 2 3 4 5; do
    sh_in "$K2" "$IDL" 'echo idle-kept > /tmp/i && echo ok'
    [ "$STATUS" = 409 ] || break
    as "$K2" POST "/v1/sandboxes/$IDL/resume"
done
expect_json "a file is written in /tmp before the idle timeout" 'j["stdout"] == "ok\n"'
st=""
for _ in $(seq 1 150); do
    as "$K2" GET "/v1/sandboxes/$IDL"
    st=$(echo "$BODY" | "$JGET" .state)
    [ "$st" = paused ] && break
    sleep 0.1
done
[ "$st" = paused ] && pass "the idle timeout paused the sandbox instead of deleting it" ||
    fail "the idle timeout paused the sandbox instead of deleting it" "status $STATUS, ${BODY:0:200}"
[ -z "$(cg_dirs "$IDL")" ] && pass "the idle-paused sandbox has no cgroup" || fail "the idle-paused sandbox has no cgroup" "$(cg_dirs "$IDL")"
as "$K2" POST "/v1/sandboxes/$IDL/resume"
sh_in "$K2" "$IDL" 'cat /tmp/i'
expect_json "resumed after the idle pause, its files are there" 'j["stdout"] == "idle-kept\n"'
as "$K2" DELETE "/v1/sandboxes/$IDL"

# ---- 7 ----
# K1 holds one paused (ID); the cap is 3.
as "$K1" POST "/v1/sandboxes/$FK/pause"
expect_json "a second paused sandbox" 'j["state"] == "paused"'
as "$K1" POST "/v1/sandboxes/$FP/pause"
expect_json "a third paused sandbox" 'j["state"] == "paused"'
as "$K1" POST /v1/sandboxes -d '{}'
C4=$(echo "$BODY" | "$JGET" .id)
as "$K1" POST "/v1/sandboxes/$C4/pause"
expect_status "past the paused cap a pause is 429" 429
expect_json "busy, naming SKILLS_SANDBOX_MAX_PAUSED_PER_KEY" \
    'j["error"]["code"] == "busy" and "SKILLS_SANDBOX_MAX_PAUSED_PER_KEY" in j["error"]["message"]'
sh_in "$K1" "$C4" 'echo alive'
expect_json "the refused one runs on" 'j["stdout"] == "alive\n"'
as "$K3" POST /v1/sandboxes -d '{}'
BIG=$(echo "$BODY" | "$JGET" .id)
sh_in "$K3" "$BIG" 'head -c 12582912 /dev/urandom > /tmp/big && echo ok'
as "$K3" POST "/v1/sandboxes/$BIG/pause"
expect_status "files past the paused byte quota: 507" 507
expect_json "quota_exceeded, naming SKILLS_SANDBOX_PAUSED_MAX_BYTES" \
    'j["error"]["code"] == "quota_exceeded" and "SKILLS_SANDBOX_PAUSED_MAX_BYTES" in j["error"]["message"]'
sh_in "$K3" "$BIG" 'ls -l /tmp/big | wc -l'
expect_json "the refused one runs on with its files" 'j["stdout"] == "1\n"'
[ -z "$(saved_files "$BIG")" ] && pass "the refused pause left no partial files" || fail "the refused pause left no partial files" "$(saved_files "$BIG")"

# ---- 8 ----
as "$K1" DELETE "/v1/sandboxes/$FP"
expect_status "DELETE of a paused sandbox is 200" 200
[ -z "$(saved_files "$FP")" ] && pass "DELETE of a paused sandbox leaves no file of it" ||
    fail "DELETE of a paused sandbox leaves no file of it" "$(saved_files "$FP")"
as "$K1" POST "/v1/sandboxes/$FP/resume"
expect_status "a deleted paused sandbox is 404" 404

read -r K5ID K5 < <(new_key s5 skills:execute)
as "$K5" POST /v1/sandboxes -d '{}'
ID5=$(echo "$BODY" | "$JGET" .id)
as "$K5" POST "/v1/sandboxes/$ID5/pause"
[ -n "$(saved_files "$ID5")" ] || fail "a paused sandbox of a key to revoke has saved files" "none"
req DELETE "/v1/keys/$K5ID" -H "Authorization: Bearer $ADMIN"
expect_status "the key is revoked" 204
[ -z "$(saved_files "$ID5")" ] && pass "revoking a key removes its paused sandboxes' files" ||
    fail "revoking a key removes its paused sandboxes' files" "$(saved_files "$ID5")"

# ---- 9 ----
ADMIN0=$ADMIN # the admin key is printed at the first start only
[ -n "$(saved_files "$ID")" ] && pass "before the kill: the paused sandbox's files are saved" ||
    fail "before the kill: the paused sandbox's files are saved" "none"
disown "$SRV_PID"
kill -9 "$SRV_PID"
while kill -0 "$SRV_PID" 2>/dev/null; do sleep 0.05; done
start_server "${SETTINGS[@]}"
# Paused sandboxes outlive their server: their files are under
# DATA_DIR/snapshots/paused, their rows wait for a server to take them.
as "$K1" GET /v1/sandboxes
expect_json "after kill -9 and a restart the key's paused sandboxes are listed" \
    "{'$ID', '$FK'} <= {s['id'] for s in j['sandboxes'] if s['state'] == 'paused'}"
as "$K2" GET "/v1/sandboxes/$ID"
expect_status "another key still gets 404 for it" 404
as "$K2" POST "/v1/sandboxes/$ID/resume"
expect_status "and 404 for its resume" 404
as "$K1" GET "/v1/sandboxes/$ID"
expect_json "its owner sees it paused" 'j["state"] == "paused" and j["savedBytes"] > 0'
as "$K1" POST "/v1/sandboxes/$ID/resume"
expect_json "after kill -9 and a restart it resumes" 'j["state"] == "running" and j["changed"]'
sh_in "$K1" "$ID" 'cat /tmp/only-orig; ls /usr/local/lib/snap'
expect_json "with its root layer and /tmp as they were at the pause" 'j["stdout"] == "orig\ng\n"'
sh_in "$K1" "$ID" 'echo again > /tmp/a && echo ok'
as "$K1" POST "/v1/sandboxes/$ID/pause"
expect_json "it pauses again" 'j["state"] == "paused"'
read -r K6ID K6 < <(new_key s6 skills:execute)
as "$K6" POST /v1/sandboxes -d '{}'
ID6=$(echo "$BODY" | "$JGET" .id)
as "$K6" POST "/v1/sandboxes/$ID6/pause"
stop_server
inst=$(find "$DATA/snapshots" -mindepth 1 -maxdepth 1 ! -name paused 2>/dev/null)
[ -z "$inst" ] && pass "a stopped server leaves no snapshot of its own" ||
    fail "a stopped server leaves no snapshot of its own" "$inst"
[ -n "$(saved_files "$ID")" ] && pass "a paused sandbox's files outlive a stopped server" ||
    fail "a paused sandbox's files outlive a stopped server" "none"
start_server "${SETTINGS[@]}"
[ -n "$(saved_files "$ID6")" ] || fail "a paused sandbox of a key to revoke outlives the stop" "none"
req DELETE "/v1/keys/$K6ID" -H "Authorization: Bearer $ADMIN0"
[ "$STATUS" = 204 ] && [ -z "$(saved_files "$ID6")" ] &&
    pass "revoking a key removes its paused sandboxes that no server held" ||
    fail "revoking a key removes its paused sandboxes that no server held" "status $STATUS; $(saved_files "$ID6")"
as "$K1" POST "/v1/sandboxes/$ID/resume"
sh_in "$K1" "$ID" 'cat /tmp/a'
expect_json "after a stop and a start it resumes with its files" 'j["stdout"] == "again\n"'
as "$K1" DELETE "/v1/sandboxes/$FK"
expect_status "a paused sandbox of the server's former life is deleted" 200
as "$K1" GET /v1/sandboxes
for s in $(echo "$BODY" | python3 -c 'import json,sys; [print(s["id"]) for s in json.load(sys.stdin)["sandboxes"]]'); do
    as "$K1" DELETE "/v1/sandboxes/$s"
done
as "$K1" GET /v1/sandboxes
expect_json "the key has no sandbox left" 'j["sandboxes"] == []'
stop_server
left=$(find "$DATA/snapshots" -mindepth 2 2>/dev/null)
[ -z "$left" ] && pass "once they are deleted, nothing of them is left under DATA_DIR/snapshots" ||
    fail "once they are deleted, nothing of them is left under DATA_DIR/snapshots" "$left"

# ---- 10 ----
start_server "${SETTINGS[@]}"
as "$K1" POST /v1/sandboxes -d '{}'
OA=$(echo "$BODY" | "$JGET" .id)
sh_in "$K1" "$OA" 'echo orphan > /tmp/o && echo ok'
as "$K1" POST "/v1/sandboxes/$OA/pause"
as "$K1" POST /v1/sandboxes -d '{}'
OB=$(echo "$BODY" | "$JGET" .id)
sh_in "$K1" "$OB" 'echo b-kept > /tmp/b && echo ok'
as "$K1" POST "/v1/sandboxes/$OB/pause"
expect_json "a second sandbox is paused" 'j["state"] == "paused"'
read -r K7ID K7 < <(new_key s7 skills:execute)
as "$K7" POST /v1/sandboxes -d '{}'
ID7=$(echo "$BODY" | "$JGET" .id)
as "$K7" POST "/v1/sandboxes/$ID7/pause"
expect_json "a sandbox of a key revoked while no server runs is paused" 'j["state"] == "paused"'
stop_server
# Revoked in the store alone, with no server up: as a revocation whose
# removal failed, or whose sandbox's holder let it go after it (the CLI's
# revoke would remove it itself).
store_sql "UPDATE api_keys SET revoked=1 WHERE id='$K7ID'" >/dev/null
[ -n "$(saved_files "$ID7")" ] || fail "a revoked key's paused sandbox keeps its files while no server runs" "none"
NOROW=$(python3 -c 'import uuid; print(uuid.uuid4())')
cp -a "$DATA/snapshots/paused/$OB" "$DATA/snapshots/paused/$NOROW"
mkdir -p "$DATA/snapshots/paused/not-a-sandbox/tmp"
# The crash window: the files are published, the row still says running.
store_sql "UPDATE runs SET state='running' WHERE id='$OA'" >/dev/null
[ -n "$(saved_files "$OA")" ] && [ -n "$(saved_files "$NOROW")" ] &&
    [ "$(store_sql "SELECT state FROM runs WHERE id='$OA'")" = running ] ||
    fail "before the start: files of a running row and of no row" "$(find "$DATA/snapshots" -maxdepth 2)"
start_server "${SETTINGS[@]}"
for _ in $(seq 1 150); do # bounded: the sweep runs at the start
    [ -z "$(saved_files "$OA")" ] && [ -z "$(saved_files "$NOROW")" ] && break
    sleep 0.1
done
st=$(store_sql "SELECT state FROM runs WHERE id='$OA'")
[ "$st" = lost ] && [ -z "$(saved_files "$OA")" ] &&
    pass "the start marks the crashed pause's row lost and removes its files" ||
    fail "the start marks the crashed pause's row lost and removes its files" "row $st; $(saved_files "$OA")"
[ -z "$(saved_files "$NOROW")" ] && pass "saved files of an id with no row are removed" ||
    fail "saved files of an id with no row are removed" "$(saved_files "$NOROW")"
[ -d "$DATA/snapshots/paused/not-a-sandbox/tmp" ] && pass "a name that is no sandbox id is left alone" ||
    fail "a name that is no sandbox id is left alone" "$(ls "$DATA/snapshots/paused")"
[ "$(grep -c 'not sandbox ids ("not-a-sandbox"' "$TMP/serve.err")" = 1 ] &&
    pass "and it is logged once" || fail "and it is logged once" "$(grep -i 'sandbox ids' "$TMP/serve.err")"
for _ in $(seq 1 100); do # bounded: the live tick looks every 2 s
    [ -z "$(saved_files "$ID7")" ] && break
    sleep 0.1
done
st=$(store_sql "SELECT state FROM runs WHERE id='$ID7'")
[ -z "$(saved_files "$ID7")" ] && [ -n "$st" ] && [ "$st" != paused ] && [ "$st" != running ] &&
    pass "a revoked key's paused sandbox that no server held is removed by the live tick" ||
    fail "a revoked key's paused sandbox that no server held is removed by the live tick" \
        "row $st; $(saved_files "$ID7")"
[ -n "$(saved_files "$OB")" ] && pass "a paused sandbox's files are kept" ||
    fail "a paused sandbox's files are kept" "none"
as "$K1" POST "/v1/sandboxes/$OB/resume"
sh_in "$K1" "$OB" 'cat /tmp/b'
expect_json "and it resumes with them" 'j["stdout"] == "b-kept\n"'
as "$K1" DELETE "/v1/sandboxes/$OB"
rm -rf "$DATA/snapshots/paused/not-a-sandbox"

# ---- 11 ----
as "$K3" POST /v1/sandboxes -d '{"tmpSize":4194304}'
expect_status "a sandbox with a 4 MiB /tmp is made" 201
FULL=$(echo "$BODY" | "$JGET" .id)
sh_in "$K3" "$FULL" 'head -c 3670016 /dev/urandom > /tmp/big && mkdir /tmp/many && cd /tmp/many && seq 1 1500 | xargs touch && echo ok'
expect_json "its /tmp holds 3.5 MiB and 1500 empty files" 'j["stdout"] == "ok\n"'
as "$K3" POST "/v1/sandboxes/$FULL/pause"
expect_status "it pauses" 200
as "$K3" POST "/v1/sandboxes/$FULL/resume"
expect_status "it resumes: what fitted its /tmp fits it again" 200
sh_in "$K3" "$FULL" 'ls /tmp/many | wc -l; wc -c < /tmp/big'
expect_json "with every file" 'j["stdout"].split() == ["1500", "3670016"]'
as "$K3" DELETE "/v1/sandboxes/$FULL"
stop_server
finish
