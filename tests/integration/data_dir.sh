#!/usr/bin/env bash
# DATA_DIR and the service user (src/cli/privsep.c, src/cli/cmd_doctor.c):
# started as root with no DATA_DIR given, skilld uses /var/lib/skilld, an
# ordinary user ./var; a DATA_DIR the service user cannot reach is refused
# by exec, run, serve and doctor alike, before anything in it changes owner
# (every entry's owner, group and mode compared before and after); the
# same directory made reachable works, and doctor agrees with exec.
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { fail "runs as root" "uid $(id -u)"; finish; }
U=${SKILLD_USER:-skilld}

# -- the default (the binary itself: the PostgreSQL ring's stand-in makes a
# database first, which the service user may not) -----------------------------
BIN=${SKILLD_REAL:-$SKILLD}
d=$(env -u DATA_DIR -u SKILLD_CONFIG "$BIN" --print-config | sed -n 's/^DATA_DIR=\([^\t]*\).*/\1/p')
if [ "$d" = /var/lib/skilld ]; then pass "as root DATA_DIR defaults to /var/lib/skilld"; else fail "as root DATA_DIR defaults to /var/lib/skilld" "$d"; fi
d=$(env -u DATA_DIR -u SKILLD_CONFIG runuser -u "$U" -- "$BIN" --print-config | sed -n 's/^DATA_DIR=\([^\t]*\).*/\1/p')
if [ "$d" = ./var ]; then pass "as another user DATA_DIR defaults to ./var"; else fail "as another user DATA_DIR defaults to ./var" "$d"; fi
d=$(DATA_DIR=/srv/x "$BIN" --print-config | sed -n 's/^DATA_DIR=\([^\t]*\).*/\1/p')
if [ "$d" = /srv/x ]; then pass "a given DATA_DIR beats the root default"; else fail "a given DATA_DIR beats the root default" "$d"; fi

# -- a DATA_DIR the service user cannot reach: a 0700 home, as /root -------------
H=$TMP/home
mkdir -m 0700 "$H"
mkdir -p "$H/var/workspaces/abc" "$H/var/images"
echo data >"$H/var/workspaces/abc/f.txt"
echo notes >"$H/var/notes.txt"
ln -s f.txt "$H/var/workspaces/abc/link"
touch "$H/var/nobodys" && chown 65534:65534 "$H/var/nobodys"
owners() { find "$H" -printf '%U:%G %m %p\n' | sort; }
before=$(owners)
out=$(cd "$H" && DATA_DIR=./var "$SKILLD" exec --key t -- echo hi 2>"$TMP/exec.err")
rc=$?
if [ $rc -ne 0 ] && grep -q "DATA_DIR ./var is not usable by user $U: cannot reach its parent $H" "$TMP/exec.err" && grep -q 'fix: ' "$TMP/exec.err"; then
    pass "exec refuses an unreachable DATA_DIR, naming it and the fix"
else
    fail "exec refuses an unreachable DATA_DIR" "rc $rc; ${out:0:200} $(head -c 300 "$TMP/exec.err")"
fi
(cd "$H" && DATA_DIR=./var "$SKILLD" run file_write --key t --input '{"path":"a","content":"x"}' >/dev/null 2>"$TMP/run.err")
if [ $? -ne 0 ] && grep -q 'not usable by user' "$TMP/run.err"; then pass "run refuses it too"; else fail "run refuses it too" "$(head -c 300 "$TMP/run.err")"; fi
(cd "$H" && DATA_DIR=$H/var timeout 20 "$SKILLD" serve --listen 127.0.0.1:0 >/dev/null 2>"$TMP/serve.err")
if [ $? -ne 0 ] && grep -q 'not usable by user' "$TMP/serve.err"; then pass "serve refuses it too"; else fail "serve refuses it too" "$(head -c 300 "$TMP/serve.err")"; fi
(cd "$H" && DATA_DIR=./var "$SKILLD" doctor >"$TMP/doctor.out" 2>&1)
drc=$?
if [ $drc -ne 0 ] && grep -qE '^FAIL +data_dir ' "$TMP/doctor.out" && grep -q '^first failure: data_dir: ' "$TMP/doctor.out" &&
    grep -A1 '^first failure' "$TMP/doctor.out" | grep -q 'fix: set DATA_DIR'; then
    pass "doctor fails data_dir first, with the fix, as exec does"
else
    fail "doctor fails data_dir first, with the fix" "exit $drc; $(grep -E 'data_dir|overall|first' "$TMP/doctor.out" | tr '\n' ' ')"
fi
after=$(owners)
if [ "$before" = "$after" ]; then pass "nothing in the refused DATA_DIR changed owner, group or mode"; else fail "nothing in the refused DATA_DIR changed owner" "$(diff <(echo "$before") <(echo "$after") | head -5 | tr '\n' ' ')"; fi

# -- made reachable: exec works, its contents become the user's, doctor agrees --
chmod 0711 "$H"
out=$(cd "$H" && DATA_DIR=./var "$SKILLD" exec --key t -- echo hi 2>"$TMP/exec.err")
erc=$?
(cd "$H" && DATA_DIR=./var "$SKILLD" doctor >"$TMP/doctor.out" 2>&1)
drc=$?
if [ $erc = 0 ] && [ "$("$JGET" .stdout <<<"$out")" = hi ]; then pass "exec works once the user can reach it"; else fail "exec works once the user can reach it" "rc $erc; ${out:0:200} $(head -c 300 "$TMP/exec.err")"; fi
if [ $drc = 0 ] && grep -qE '^ok +data_dir ' "$TMP/doctor.out"; then pass "doctor agrees: data_dir ok, exit 0"; else fail "doctor agrees: data_dir ok, exit 0" "exit $drc; $(grep -E 'FAIL|overall|first' "$TMP/doctor.out" | tr '\n' ' ')"; fi
if [ -z "$(find "$H/var" ! -user "$U")" ]; then pass "then DATA_DIR is the service user's"; else fail "then DATA_DIR is the service user's" "$(find "$H/var" ! -user "$U" | head -3)"; fi
finish
