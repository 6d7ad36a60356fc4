#!/usr/bin/env bash
# The sandbox through the real binary: `skilld exec` and the execute_command
# / eval_code skills (skilld run), with the native provider.
source "$(dirname "$0")/../lib.sh"
export DATA_DIR="$TMP/data"

# exec_json ARGS...: run skilld exec, keep stdout in $OUT and status in $RC.
exec_json() { OUT=$("$SKILLD" exec "$@" 2>"$TMP/err"); RC=$?; }
run_skill() { OUT=$("$SKILLD" run "$1" --key "$2" --input "$3" 2>"$TMP/err"); RC=$?; }
# jget [-l] .PATH: a field of $OUT (tests/lib.sh; not a Python start per
# field, which costs about a second on the VM ring's emulated CPU).
jget() { "$JGET" "$@" <<<"$OUT" 2>/dev/null; }

exec_json -- echo hello sandbox
if [ "$RC" = 0 ] && [ "$(jget .stdout)" = "hello sandbox" ] && [ "$(jget .exitCode)" = 0 ] &&
   [ "$(jget .runtime)" = native ]; then pass "exec echo"; else fail "exec echo" "rc=$RC $OUT"; fi

exec_json -- sh -c 'echo err >&2; exit 3'
if [ "$RC" = 1 ] && [ "$(jget .exitCode)" = 3 ] && [ "$(jget .stderr)" = err ]; then
    pass "exit status"; else fail "exit status" "rc=$RC $OUT"; fi

exec_json -- grep -E '^(NoNewPrivs|CapEff|Seccomp):' /proc/self/status
s=$(jget .stdout)
if echo "$s" | grep -q $'NoNewPrivs:\t1' && echo "$s" | grep -q $'CapEff:\t0000000000000000' &&
   echo "$s" | grep -q $'Seccomp:\t2'; then pass "status line"; else fail "status line" "$s"; fi

# 3 s: the sh must start and print first, also on an emulated CPU (tests/platform).
exec_json --timeout 3000 -- sh -c 'echo partial; sleep 30'
if [ "$RC" = 1 ] && [ "$(jget .timedOut)" = true ] && [ "$(jget .stdout)" = partial ] &&
   [ "$(jget .exitCode)" = null ]; then pass "timeout"; else fail "timeout" "$OUT"; fi

exec_json --output-limit 100 -- sh -c 'yes | head -c 500000'
if [ "$(jget .truncated)" = true ] && [ "$(jget -l .stdout)" = 100 ]; then
    pass "output cap"; else fail "output cap" "$(jget -l .stdout)"; fi

exec_json --memory 24 -- python3 -c 's = b"x" * (100 << 20)'
if [ "$(jget .oomKilled)" = true ]; then pass "memory limit"; else fail "memory limit" "$OUT"; fi

exec_json --ro-workspace -- sh -c 'echo x > /workspace/f'
if [ "$RC" = 1 ] && echo "$(jget .stderr)" | grep -qi 'read-only'; then
    pass "read-only workspace"; else fail "read-only workspace" "$OUT"; fi

# An imported image (a busybox root laid out as `skilld image import` does):
# runs only when allowed, with its own root and the same workspace.
img="$DATA_DIR/images/bbox/1.0/rootfs"
mkdir -p "$img/bin" "$img/etc"
cp /bin/busybox "$img/bin/busybox"
for t in sh ls cat; do ln -s busybox "$img/bin/$t"; done
echo 'root:x:0:0::/:/bin/sh' >"$img/etc/passwd"
exec_json --image bbox:1.0 -- true
if [ "$RC" = 1 ] && [ "$(jget .error.code)" = forbidden ]; then pass "image not allowed"; else
    fail "image not allowed" "$OUT"; fi
OUT=$(SKILLS_ALLOWED_SANDBOX_IMAGES=bbox "$SKILLD" exec --image bbox:1.0 -- sh -c 'ls /bin; cat /etc/passwd'); RC=$?
if [ "$RC" = 0 ] && [ "$(jget .stdout)" = $'busybox\ncat\nls\nsh\nroot:x:0:0::/:/bin/sh' ]; then
    pass "imported image"; else fail "imported image" "$OUT"; fi

"$SKILLD" exec --bogus -- true >/dev/null 2>&1
check "usage error" test $? = 2

# execute_command writes /workspace/out.txt; the same key finds it in its
# workspace, another key does not.
run_skill execute_command alice '{"command":"sh","args":["-c","echo written-in-sandbox > /workspace/out.txt"]}'
if [ "$RC" = 0 ] && [ "$(jget .success)" = true ]; then pass "execute_command write"; else
    fail "execute_command write" "$OUT $(cat "$TMP/err")"; fi
wsdir="$DATA_DIR/workspaces/$(printf %s alice | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$wsdir/out.txt" 2>/dev/null)" = written-in-sandbox ] && [ "$(stat -c %u "$wsdir/out.txt")" = "$(stat -c %u "$DATA_DIR")" ]; then
    pass "workspace file on the host"; else fail "workspace file on the host" "$(ls -ln "$wsdir" 2>&1)"; fi
run_skill file_read alice '{"path":"out.txt"}'
if [ "$(jget .success)" = true ] && [ "$(jget .content)" = written-in-sandbox ]; then
    pass "file_read by the same key"; else fail "file_read by the same key" "$OUT"; fi
run_skill file_write alice '{"path":"in.txt","content":"from-file_write"}'
run_skill execute_command alice '{"command":"cat","args":["in.txt"]}'
if [ "$(jget .stdout)" = from-file_write ]; then pass "sandbox reads file_write"; else
    fail "sandbox reads file_write" "$OUT"; fi
run_skill execute_command bob '{"command":"cat","args":["/workspace/out.txt"]}'
if [ "$(jget .success)" = false ] && [ "$(jget .exitCode)" = 1 ]; then
    pass "other key cannot see it"; else fail "other key cannot see it" "$OUT"; fi

run_skill execute_command alice '{"command":"sh","args":["-c","cat; echo $FOO"],"stdin":"in\n","env":{"FOO":"bar"}}'
if [ "$(jget .stdout)" = $'in\nbar' ] && [ "$(jget .output)" = $'in\nbar' ]; then
    pass "stdin and env"; else fail "stdin and env" "$OUT"; fi

run_skill execute_command alice '{"command":"sleep","args":["30"],"timeoutMs":300}'
if [ "$(jget .success)" = false ] && [ "$(jget .timedOut)" = true ] &&
   [ "$(jget .error.code)" = timeout ]; then pass "skill timeout"; else fail "skill timeout" "$OUT"; fi

run_skill execute_command alice '{"command":"true","networkEnabled":true}'
if [ "$(jget .error.code)" = forbidden ]; then pass "network refused"; else
    fail "network refused" "$OUT"; fi

run_skill execute_command alice '{"command":"true","timeoutMs":600000}'
if [ "$(jget .error.code)" = invalid_input ]; then pass "timeout capped"; else
    fail "timeout capped" "$OUT"; fi

for lang in python javascript sh; do
    case $lang in
        python) code='print(6 * 7)' ;;
        javascript) code='console.log(6 * 7)' ;;
        sh) code='echo $((6 * 7))' ;;
    esac
    # (No quote or backslash in these: they go into JSON as they are.)
    run_skill eval_code alice "{\"language\":\"$lang\",\"code\":\"$code\"}"
    if [ "$(jget .stdout)" = 42 ] && [ "$(jget .success)" = true ]; then
        pass "eval_code $lang"; else fail "eval_code $lang" "rc=$RC $OUT $(head -c 300 "$TMP/err")"; fi
done
# Each exec leaves one audit row for its key, written before the command
# returns (at once, not from a writer thread); read back through the store
# (SQLite here, PostgreSQL in the store ring) with `skilld mcp`'s
# skills_executions. With SQLite the last to close (skilld mcp) checkpoints
# and deletes the WAL that the execs left (tests/integration/exec_wal.sh).
KID=$("$SKILLD" keys create audit-exec --json 2>/dev/null | "$JGET" .id 2>/dev/null)
exec_json --key "$KID" -- true
exec_json --key "$KID" -- false
OUT=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"skills_executions","arguments":{"limit":10}}}' |
    "$SKILLD" mcp --key "$KID" 2>/dev/null | tail -1)
rows=$(python3 -c 'import json,sys; e=json.loads(sys.argv[1])["result"]["structuredContent"]["executions"]; print(" ".join("%s/%s/%s" % (x["skill"], x["status"], x.get("errorCode") or "-") for x in reversed(e)))' "$OUT" 2>/dev/null)
if [ -n "$KID" ] && [ "$rows" = "exec/success/- exec/error/command_failed" ] &&
   { [ ! -e "$DATA_DIR/skilld.db" ] || [ ! -e "$DATA_DIR/skilld.db-wal" ]; }; then
    pass "exec audit rows"; else fail "exec audit rows" "key=$KID rows=$rows $(ls "$DATA_DIR") ${OUT:0:300}"; fi
finish
