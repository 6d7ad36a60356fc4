#!/usr/bin/env bash
# build/skilld loads libcurl, libxml2, libarchive and libmicrohttpd on first
# use (src/cli/lazylib.c, scripts/lazy-stubs.sh): a command that needs none
# of them does not load them; one that does loads them and works; a library
# that cannot be loaded is reported by name and stops the process.
source "$(dirname "$0")/../lib.sh"
export DATA_DIR="$TMP/data"
LAZY="libcurl.so libxml2.so libarchive.so libmicrohttpd.so"

needed=$(readelf -d "$SKILLD" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if [ "$(uname -m)" = x86_64 ]; then
    bad=""
    for l in $LAZY; do echo "$needed" | grep -q "^$l" && bad="$bad $l"; done
    if [ -z "$bad" ] && echo "$needed" | grep -q '^libjansson'; then
        pass "not linked at load time:$LAZY"
    else fail "not linked at load time" "NEEDED: $(echo $needed)"; fi
else
    # No trampolines off x86-64: linked as usual.
    if echo "$needed" | grep -q '^libcurl'; then pass "linked as usual off x86-64"
    else fail "linked as usual off x86-64" "NEEDED: $(echo $needed)"; fi
fi

# loaded_by CMD...: the shared objects the dynamic loader opened for CMD.
loaded() { LD_DEBUG=files "$@" 2>&1 >/dev/null | sed -n 's/.*file=\(lib[^ ]*\) .*/\1/p' | sort -u; }

objs=$(loaded "$SKILLD" exec -- true)
n=$(echo "$objs" | wc -l)
if ! echo "$objs" | grep -Eq '^lib(curl|xml2|archive|microhttpd|gnutls|ldap|icu|crypto|ssl)' &&
   echo "$objs" | grep -q '^libseccomp' && [ "$n" -le 12 ]; then
    pass "exec loads $n objects, none of the lazy ones"
else fail "exec loads only what it needs" "$(echo $objs)"; fi

KEY=$("$SKILLD" keys create lazy --json 2>/dev/null | json_get "$(cat)" 'j["id"]')
# http_request parses the URL with libcurl's URL API first: libcurl loads,
# and the address guard refuses 127.0.0.1 with its stable code.
out=$(LD_DEBUG=files "$SKILLD" run http_request --key "$KEY" \
      --input '{"url":"http://127.0.0.1:9/"}' 2>"$TMP/dbg")
if grep -q 'file=libcurl.so.4 .*dynamically loaded' "$TMP/dbg" &&
   [ "$(json_get "$out" 'j["error"]["code"]')" = blocked_address ]; then
    pass "http_request loads libcurl on first use and works"
else fail "http_request loads libcurl" "$out $(grep -c libcurl "$TMP/dbg")"; fi

# Digests and base64 come from nettle: a file skill, base64 both ways,
# never opens libcrypto (3.4 MiB resident in a server otherwise).
out=$(LD_DEBUG=files "$SKILLD" run file_write --key "$KEY" \
      --input '{"path":"b.bin","content":"AAEC/w==","encoding":"base64"}' 2>"$TMP/dbg")
back=$(LD_DEBUG=files "$SKILLD" run file_read --key "$KEY" \
       --input '{"path":"b.bin","encoding":"base64"}' 2>>"$TMP/dbg")
if [ "$(json_get "$back" 'j["content"]')" = "AAEC/w==" ] && grep -q 'file=libnettle' "$TMP/dbg" &&
   ! grep -q 'file=libcrypto' "$TMP/dbg"; then
    pass "file skills round-trip base64 without libcrypto"
else fail "file skills round-trip base64 without libcrypto" "$out $back $(grep -o 'file=lib[a-z]*' "$TMP/dbg" | sort -u | tr '\n' ' ')"; fi

# A broken libcurl (an empty file first in the search path): named, abort.
mkdir -p "$TMP/badlib"
: >"$TMP/badlib/libcurl.so.4"
chmod -R a+rX "$TMP/badlib"
LD_LIBRARY_PATH="$TMP/badlib" "$SKILLD" run http_request --key "$KEY" \
    --input '{"url":"http://127.0.0.1:9/"}' >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$(uname -m)" != x86_64 ]; then
    # Linked as usual: the dynamic loader refuses at start.
    if [ "$rc" -ne 0 ]; then pass "a broken library stops skilld (status $rc)"
    else fail "a broken library stops skilld" "rc=0"; fi
elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] &&
   grep -q 'cannot load library libcurl.so.4' "$TMP/err" && grep -q 'reinstall' "$TMP/err"; then
    pass "a library that cannot be loaded is named (status $rc)"
else fail "a library that cannot be loaded is named" "rc=$rc $(cat "$TMP/err")"; fi

# exec still works without the broken library ever being opened.
out=$(LD_LIBRARY_PATH="$TMP/badlib" "$SKILLD" exec -- echo ok 2>/dev/null)
if [ "$(json_get "$out" 'j["stdout"]')" = ok ]; then pass "exec never opens them"
else fail "exec never opens them" "$out"; fi
finish
