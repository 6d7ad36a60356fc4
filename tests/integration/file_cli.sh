#!/usr/bin/env bash
# The file skills through the real binary (issue 2, "What it must show"):
# alice writes notes/a.txt and reads back "hi"; bob gets not_found for the
# same path; the file lies under $DATA_DIR/workspaces/<sha256("alice")>/;
# exit codes are 0 on success, 1 on a failed skill, 2 on a usage error.
source "$(dirname "$0")/../lib.sh"
export DATA_DIR=$TMP/var
cd "$TMP" || exit 1

out=$("$SKILLD" run file_write --key alice --input '{"path":"notes/a.txt","content":"hi","mkdirs":true}')
rc=$?
if [ "$rc" = 0 ] && [ "$(json_get "$out" 'j["success"]')" = true ] && [ "$(json_get "$out" 'j["bytes"]')" = 2 ]; then
    pass "alice writes notes/a.txt"
else
    fail "alice writes notes/a.txt" "rc=$rc out=$out"
fi

out=$("$SKILLD" run file_read --key alice --input '{"path":"notes/a.txt"}')
rc=$?
if [ "$rc" = 0 ] && [ "$(json_get "$out" 'j["content"]')" = hi ]; then
    pass "alice reads hi back"
else
    fail "alice reads hi back" "rc=$rc out=$out"
fi

out=$("$SKILLD" run file_read --key bob --input '{"path":"notes/a.txt"}')
rc=$?
if [ "$rc" = 1 ] && [ "$(json_get "$out" 'j["error"]["code"]')" = not_found ]; then
    pass "bob gets not_found"
else
    fail "bob gets not_found" "rc=$rc out=$out"
fi

hex=$(printf '%s' alice | sha256sum | cut -d' ' -f1)
f=$DATA_DIR/workspaces/$hex/notes/a.txt
if [ -f "$f" ] && [ "$(cat "$f")" = hi ]; then
    pass "file lies under workspaces/sha256(alice)/notes/a.txt"
else
    fail "file lies under workspaces/sha256(alice)/notes/a.txt" "$(find "$DATA_DIR" -type f)"
fi
mode=$(stat -c %a "$DATA_DIR/workspaces/$hex")
[ "$mode" = 700 ] && pass "workspace mode 0700" || fail "workspace mode 0700" "mode=$mode"

# input from a file and from stdin
printf '{"path":"notes/b.bin","content":"AAEC","encoding":"base64"}' >"$TMP/in.json"
check "input @FILE (base64 write)" "$SKILLD" run file_write --key alice --input @"$TMP/in.json"
out=$(printf '{"path":"notes/b.bin","encoding":"base64"}' | "$SKILLD" run file_read --key alice --input -)
[ "$(json_get "$out" 'j["content"]')" = AAEC ] && pass "input - (base64 read)" || fail "input - (base64 read)" "$out"

out=$("$SKILLD" run file_list --key alice --input '{"recursive":true}')
paths=$(json_get "$out" '",".join(e["path"]+":"+e["type"] for e in j["entries"])')
[ "$paths" = "notes:directory,notes/a.txt:file,notes/b.bin:file" ] && pass "file_list recursive" \
    || fail "file_list recursive" "$paths"

out=$("$SKILLD" run file_read --key alice --input '{"path":"../../etc/passwd"}')
rc=$?
[ "$rc" = 1 ] && [ "$(json_get "$out" 'j["error"]["code"]')" = invalid_path ] \
    && pass "escape refused with invalid_path" || fail "escape refused with invalid_path" "rc=$rc $out"

out=$("$SKILLD" run file_delete --key alice --input '{"path":"notes/a.txt"}')
rc=$?
[ "$rc" = 0 ] && [ ! -e "$f" ] && pass "file_delete removes the file" || fail "file_delete removes the file" "rc=$rc $out"

"$SKILLD" run file_read --key alice --input '{"path":' >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] && pass "malformed --input is a usage error (exit 2)" || fail "malformed --input is a usage error (exit 2)" "rc=$rc"

nothing_else=$(cd "$DATA_DIR" && ls -A | sort | tr '\n' ' ')
case "$nothing_else" in
    # (the PostgreSQL ring keeps the store in the database: no skilld.db)
    "skilld.db "*"workspaces " | "workspaces ") pass "DATA_DIR holds only skilld.db* and workspaces/" ;;
    *) fail "DATA_DIR holds only skilld.db* and workspaces/" "$nothing_else" ;;
esac
finish
