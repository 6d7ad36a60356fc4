#!/usr/bin/env bash
# Workspace escapes through the real binary (the unit battery in
# tests/unit/test_workspace_escape.c covers many more cases): hostile paths
# and links planted in alice's workspace, each call refused with the
# expected code, nothing of the outside in the answer, and the outside tree
# (a sentinel directory and bob's workspace) unchanged afterwards.
source "$(dirname "$0")/../lib.sh"
export DATA_DIR=$TMP/var
cd "$TMP" || exit 1
hex() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
A=$DATA_DIR/workspaces/$(hex alice)
B=$DATA_DIR/workspaces/$(hex bob)
OUT=$TMP/outside
mkdir -p "$OUT"
echo OUTSIDE-SECRET >"$OUT/secret.txt"
"$SKILLD" run file_write --key bob --input '{"path":"secret.txt","content":"BOB-SECRET"}' >/dev/null
"$SKILLD" run file_write --key alice --input '{"path":"d/ok.txt","content":"mine","mkdirs":true}' >/dev/null
ln -s /etc/passwd "$A/passwd"
ln -s "$OUT" "$A/out"
ln -s "../$(hex bob)" "$A/bob"
ln -s ../../.. "$A/d/up"
ln "$OUT/secret.txt" "$A/hard"
mkfifo "$A/fifo"
snapshot() { (cd "$TMP" && find outside "var/workspaces/$(hex bob)" -printf '%p %s %T@ %i\n' | sort | sha256sum); }
before=$(snapshot)

# refused NAME SKILL INPUT CODE
refused() {
    local out rc code
    out=$(timeout 20 "$SKILLD" run "$2" --key alice --input "$3")
    rc=$?
    code=$(json_get "$out" 'j.get("error",{}).get("code","")' 2>/dev/null)
    if [ "$rc" != 1 ] || [ "$code" != "$4" ]; then
        fail "$1" "rc=$rc code=$code want $4: $out"
    elif echo "$out" | grep -q 'OUTSIDE-SECRET\|BOB-SECRET\|root:x:0'; then
        fail "$1" "the answer carries outside data: $out"
    elif [ "$(snapshot)" != "$before" ]; then
        fail "$1" "something outside the workspace changed"
    else
        pass "$1"
    fi
}

refused "dotdot read" file_read '{"path":"../../../etc/passwd"}' invalid_path
refused "absolute read" file_read '{"path":"/etc/passwd"}' invalid_path
refused "symlink to /etc/passwd" file_read '{"path":"passwd"}' forbidden
refused "dir symlink outside, read" file_read '{"path":"out/secret.txt"}' invalid_path
refused "dir symlink outside, write" file_write '{"path":"out/new.txt","content":"x"}' invalid_path
refused "dir symlink to bob, read" file_read '{"path":"bob/secret.txt"}' invalid_path
refused "dir symlink to bob, append" file_write '{"path":"bob/secret.txt","content":"x","mode":"append"}' invalid_path
refused "mid-path symlink up" file_read "{\"path\":\"d/up/workspaces/$(hex bob)/secret.txt\"}" invalid_path
refused "dir symlink to bob, delete" file_delete '{"path":"bob/secret.txt"}' invalid_path
refused "hard link to outside, read" file_read '{"path":"hard"}' forbidden
refused "hard link to outside, append" file_write '{"path":"hard","content":"x","mode":"append"}' forbidden
refused "FIFO read does not hang" file_read '{"path":"fifo"}' forbidden
refused "list through symlink" file_list '{"path":"out"}' forbidden
refused "delete the workspace" file_delete '{"path":"."}' forbidden

# JSON with \u0000 is refused by the parser already (usage error, exit 2);
# the handlers' own NUL check is covered by the unit battery.
"$SKILLD" run file_read --key alice --input '{"path":"d/ok.txt\u0000../x"}' >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] && [ "$(snapshot)" = "$before" ] && pass "NUL in path refused at parse" \
    || fail "NUL in path refused at parse" "rc=$rc"

out=$("$SKILLD" run file_list --key alice --input '{"recursive":true}')
if echo "$out" | grep -q 'secret.txt'; then fail "recursive list stays inside" "$out"; else pass "recursive list stays inside"; fi
[ "$(cat "$OUT/secret.txt")" = OUTSIDE-SECRET ] && [ "$(cat "$B/secret.txt")" = BOB-SECRET ] \
    && pass "outside files intact" || fail "outside files intact" "changed"
finish
