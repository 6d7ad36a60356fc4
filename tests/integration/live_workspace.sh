#!/usr/bin/env bash
# The workspace of a live sandbox under the workspace quota overlay
# (docs/sandbox.md, "Live sandboxes" and "The workspace quota inside the
# sandbox") through the real binary and REST:
#   1. a file an exec writes to /workspace is read by file_read right after
#      the exec (each exec's end commits), and the exec's result says
#      workspace kept;
#   2. a file file_write makes is seen by the next exec, and a later exec
#      does not put back an old copy over a file_write (only what changed
#      since the last commit is applied), nor empty again a directory it
#      replaced once;
#   3. a write past the quota fails inside the sandbox (No space left on
#      device) and the workspace holds no part of it; one that fits the
#      overlay but passes the quota with what the workspace holds is
#      quota_exceeded and nothing of it is kept;
#   4. a background process's writes are committed at the next exec's end;
#   5. what an interpreter context's call (eval_code with sandboxId) writes
#      is read by file_read right after the call, the call's result says
#      so, and a call whose writes pass the quota fails with quota_exceeded
#      and keeps nothing of them;
#   6. what the sandbox wrote survives its pause (committed first) and its
#      delete (committed at its end).
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

Q=4194304 # 4 MiB: the overlay's tmpfs holds 12 MiB
start_server SKILLS_WORKSPACE_QUOTA_BYTES=$Q SKILLS_SANDBOX_MAX_LIVE_PER_KEY=4
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
K1=$(new_key w1 skills:execute | cut -d' ' -f2)
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }
sh_in() { # sh_in ID SCRIPT [background]: run sh -c SCRIPT in the sandbox
    local body
    body=$(python3 -c 'import json,sys; print(json.dumps({"command":"sh","args":["-c",sys.argv[1]],"background":sys.argv[2]=="bg"}))' "$2" "${3:-fg}")
    as "$K1" POST "/v1/sandboxes/$1/exec" -d "$body"
}
skill() { # skill NAME INPUT_JSON
    as "$K1" POST /v1/execute -d "{\"skill\":\"$1\",\"input\":$2}"
}
ev() { # ev ID PYTHON_CODE: eval_code in the sandbox's default python context
    skill eval_code "$(python3 -c 'import json,sys; print(json.dumps({"sandboxId":sys.argv[1],"language":"python","code":sys.argv[2]}))' "$1" "$2")"
}

as "$K1" POST /v1/sandboxes -d '{}'
ID=$(echo "$BODY" | "$JGET" .id)
[ -n "$ID" ] || { fail "a live sandbox is made" "$BODY"; finish; }

# ---- 1 ----
sh_in "$ID" 'echo from-exec > /workspace/a.txt && mkdir -p /workspace/d && echo deep > /workspace/d/b && echo ok'
expect_json "an exec writes to /workspace" 'j["success"] and j["stdout"] == "ok\n"'
expect_json "the exec's result says its workspace changes were kept" 'j["workspace"]["kept"] and j["workspace"]["changed"]'
skill file_read '{"path":"a.txt"}'
expect_json "file_read reads the exec's file right after it" 'j["success"] and j["content"] == "from-exec\n"'
skill file_read '{"path":"d/b"}'
expect_json "file_read reads the exec's nested file" 'j["success"] and j["content"] == "deep\n"'

# ---- 2 ----
skill file_write '{"path":"c.txt","content":"from-file-write"}'
expect_json "file_write writes the workspace" 'j["success"]'
sh_in "$ID" 'cat /workspace/c.txt'
expect_json "the next exec sees the file file_write made" 'j["success"] and j["stdout"] == "from-file-write"'
skill file_write '{"path":"a.txt","content":"outside"}'
sh_in "$ID" 'echo other > /workspace/e.txt'
skill file_read '{"path":"a.txt"}'
expect_json "a later exec does not put an old copy back over file_write's" 'j["success"] and j["content"] == "outside"'
skill file_read '{"path":"e.txt"}'
expect_json "the later exec's own file is kept" 'j["success"] and j["content"] == "other\n"'
sh_in "$ID" 'rm -rf /workspace/d && mkdir /workspace/d && echo n1 > /workspace/d/n1'
skill file_list '{"path":"d"}'
expect_json "a directory the sandbox removed and made again replaces the workspace's" \
    'j["success"] and sorted(e["path"].split("/")[-1] for e in j["entries"]) == ["n1"]'
skill file_write '{"path":"d/fw","content":"x"}'
sh_in "$ID" 'echo n2 > /workspace/d/n2'
skill file_list '{"path":"d"}'
expect_json "a later exec adding to it keeps what is there (its own earlier file, file_write's)" \
    'j["success"] and sorted(e["path"].split("/")[-1] for e in j["entries"]) == ["fw", "n1", "n2"]'

# ---- 3 ----
sh_in "$ID" 'head -c 16777216 /dev/zero > /workspace/big; echo "rc=$?"'
expect_json "a write past the quota fails inside the sandbox with ENOSPC" \
    '"No space left on device" in j["stderr"] and "rc=1" in j["stdout"]'
expect_json "the over-quota exec's changes are not kept" \
    'j["success"] is False and j["error"]["code"] == "quota_exceeded" and j["workspace"]["kept"] is False'
skill file_read '{"path":"big"}'
expect_json "the workspace holds no part of the over-quota file" 'j["success"] is False and j["error"]["code"] == "not_found"'
sh_in "$ID" 'rm -f /workspace/big && echo fine > /workspace/f.txt'
expect_json "once the sandbox removed it, its next exec is kept" 'j["success"] and j["workspace"]["kept"]'
skill file_read '{"path":"f.txt"}'
expect_json "the next exec's file is in the workspace" 'j["success"] and j["content"] == "fine\n"'
sh_in "$ID" 'cat /workspace/f.txt'
expect_json "an exec that writes nothing says the workspace is unchanged" 'j["success"] and j["workspace"] == {"kept": True, "changed": False}'
skill file_read '{"path":"big"}'
expect_json "still no part of the over-quota file" 'j["success"] is False and j["error"]["code"] == "not_found"'

# ---- 4 ----
sh_in "$ID" 'echo started > /workspace/bg.log; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >> /workspace/bg.log; touch /tmp/done; sleep 600' bg
expect_json "a background process starts" 'j["success"]'
sh_in "$ID" 'while [ ! -s /workspace/bg.log ]; do sleep 0.05; done; touch /tmp/go; while [ ! -e /tmp/done ]; do sleep 0.05; done; echo waited'
expect_json "an exec waits for the background writes" 'j["stdout"] == "waited\n"'
skill file_read '{"path":"bg.log"}'
expect_json "the background process's writes are committed at the next exec's end" \
    'j["success"] and j["content"] == "started\nsecond\n"'

# ---- 5 ----
ev "$ID" 'open("/workspace/ev.txt", "w").write("from-eval")'
expect_json "an interpreter call writes to /workspace" 'j["success"] and j["workspace"]["kept"] and j["workspace"]["changed"]'
skill file_read '{"path":"ev.txt"}'
expect_json "file_read reads the interpreter's file right after the call" 'j["success"] and j["content"] == "from-eval"'
ev "$ID" '1 + 1'
expect_json "a call that writes nothing says the workspace is unchanged" 'j["success"] and j["result"] == "2" and j["workspace"] == {"kept": True, "changed": False}'
ev "$ID" 'open("/workspace/big6", "wb").write(b"x" * 6291456)'
expect_json "a call whose writes pass the quota fails with quota_exceeded" \
    'j["success"] is False and j["error"]["code"] == "quota_exceeded" and j["workspace"]["kept"] is False'
skill file_read '{"path":"big6"}'
expect_json "the workspace holds no part of the interpreter's over-quota file" 'j["success"] is False and j["error"]["code"] == "not_found"'
ev "$ID" 'import os; os.remove("/workspace/big6"); open("/workspace/ev2.txt", "w").write("after")'
expect_json "once the context removed it, its next call is kept" 'j["success"] and j["workspace"]["kept"]'
skill file_read '{"path":"ev2.txt"}'
expect_json "the context's next file is in the workspace" 'j["success"] and j["content"] == "after"'

# ---- 6 ----
# bg_write ID FILE TEXT: a background process writes FILE after the last
# exec ended, says so on stdout and lives on; returns when it has said so.
bg_write() {
    sh_in "$1" "while [ ! -e /tmp/go-$2 ]; do sleep 0.05; done; echo $3 > /workspace/$2; echo written; sleep 600" bg
    local pid
    pid=$(echo "$BODY" | "$JGET" .processId)
    sh_in "$1" "touch /tmp/go-$2"
    said=""
    for _ in $(seq 1 200); do
        as "$K1" GET "/v1/sandboxes/$1/processes/$pid/output"
        echo "$BODY" | grep -q written && { said=1; break; }
        sleep 0.05
    done
    [ -n "$said" ] || fail "a background process writes $2" "$BODY"
}
sh_in "$ID" 'echo before-pause > /workspace/p.txt'
bg_write "$ID" q.txt bg-before-pause
as "$K1" POST "/v1/sandboxes/$ID/pause"
expect_status "pause answers 200" 200
skill file_read '{"path":"q.txt"}'
expect_json "a background write after the last exec is committed at the pause" 'j["success"] and j["content"] == "bg-before-pause\n"'
as "$K1" POST "/v1/sandboxes/$ID/resume"
expect_status "resume answers 200" 200
sh_in "$ID" 'cat /workspace/p.txt /workspace/a.txt'
expect_json "after a resume the workspace is there" 'j["stdout"] == "before-pause\noutside"'
bg_write "$ID" z.txt at-delete
as "$K1" DELETE "/v1/sandboxes/$ID"
expect_status "delete answers 200" 200
skill file_read '{"path":"z.txt"}'
expect_json "a background write after the last exec survives the delete" 'j["success"] and j["content"] == "at-delete\n"'
stop_server
finish
