#!/usr/bin/env bash
# `skilld image import|list|rm` and `skilld doctor` through the real binary:
# the busybox test image (scripts/make-test-image.sh), a docker-save archive
# built here from it, hostile archives, and doctor's JSON report.
source "$(dirname "$0")/../lib.sh"
ROOT=${SKILLD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export DATA_DIR="$TMP/var"
OUTSIDE="$TMP/outside"
mkdir -p "$OUTSIDE"

# --- the test image
IMG="$TMP/test-image.tar"
if "$ROOT/scripts/make-test-image.sh" "$IMG" >/dev/null 2>"$TMP/mk.err" &&
    tar tf "$IMG" | grep -qx 'bin/busybox' && tar tvf "$IMG" | grep -q 'bin/sh -> /bin/busybox'; then
    pass "make-test-image builds a busybox rootfs tarball"
else
    fail "make-test-image builds a busybox rootfs tarball" "$(cat "$TMP/mk.err")"
fi

out=$("$SKILLD" image import test:1 "$IMG" 2>&1)
if [ "$(json_get "$out" 'j["source"]+" "+j["name"]+":"+j["tag"]' 2>/dev/null)" = "docker-export test:1" ]; then
    pass "import an export tarball"
else
    fail "import an export tarball" "$out"
fi
ROOTFS="$DATA_DIR/images/test/1/rootfs"
if [ "$("$ROOTFS/bin/busybox" echo imported 2>&1)" = imported ] && [ -d "$ROOTFS/workspace" ] &&
    [ "$(readlink "$ROOTFS/bin/sh")" = /bin/busybox ]; then
    pass "imported rootfs holds busybox, its applet links and the mount points"
else
    fail "imported rootfs holds busybox, its applet links and the mount points" "$(ls -la "$ROOTFS" 2>&1 | head)"
fi

# Started as root, the tarball is read by a child holding SKILLD_USER's ids
# (issue 10: no hostile byte is parsed as root): what it wrote is that
# user's, and nothing under the image is root's.
if [ "$(id -u)" = 0 ]; then
    su=${SKILLD_USER:-skilld}
    rootowned=$(find "$DATA_DIR/images" -user 0 2>/dev/null | head -n 3)
    if [ "$(stat -c %U "$ROOTFS/bin/busybox" 2>&1)" = "$su" ] && [ -z "$rootowned" ]; then
        pass "started as root, the import runs as $su (no file of the image is root's)"
    else
        fail "started as root, the import runs as $su" "busybox owned by $(stat -c %U "$ROOTFS/bin/busybox" 2>&1); root's: $rootowned"
    fi
fi

if "$SKILLD" image import test:1 "$IMG" >/dev/null 2>"$TMP/err"; then
    fail "a second import of the same tag is refused" "exit 0"
else
    grep -q "already exists" "$TMP/err" && pass "a second import of the same tag is refused" ||
        fail "a second import of the same tag is refused" "$(cat "$TMP/err")"
fi
"$SKILLD" image import '../x:1' "$IMG" >/dev/null 2>&1 && fail "an invalid name is refused" "exit 0" ||
    pass "an invalid name is refused"
"$SKILLD" image import nofile:1 "$TMP/missing.tar" >/dev/null 2>&1 &&
    fail "a missing file is refused" "exit 0" || pass "a missing file is refused"
if SKILLS_IMAGE_MAX_BYTES=1000 "$SKILLD" image import big:1 "$IMG" >/dev/null 2>"$TMP/err"; then
    fail "SKILLS_IMAGE_MAX_BYTES caps an import" "exit 0"
else
    grep -q "larger than 1000 bytes" "$TMP/err" && [ ! -e "$DATA_DIR/images/big/1" ] &&
        pass "SKILLS_IMAGE_MAX_BYTES caps an import" ||
        fail "SKILLS_IMAGE_MAX_BYTES caps an import" "$(cat "$TMP/err")"
fi
rc=0; "$SKILLD" image >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] && pass "usage error exits 2" || fail "usage error exits 2" "rc=$rc"

# --- a docker-save archive: the busybox layer plus a layer that deletes
# bin/vi and replaces etc/hostname
python3 - "$IMG" "$TMP/save.tar" <<'PY'
import io, json, sys, tarfile
base = open(sys.argv[1], 'rb').read()
def tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w') as t:
        for name, data in members:
            ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()
top = tar_bytes([('bin/.wh.vi', b''), ('etc/hostname', b'layer2\n')])
manifest = json.dumps([{"Config": "c.json", "RepoTags": ["t:2"],
                        "Layers": ["l1/layer.tar", "l2/layer.tar"]}]).encode()
with tarfile.open(sys.argv[2], 'w') as t:
    for name, data in [('l2/layer.tar', top), ('l1/layer.tar', base),
                       ('c.json', b'{"config":{"Env":["PATH=/bin"]}}'), ('manifest.json', manifest)]:
        ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
PY
out=$("$SKILLD" image import test:2 "$TMP/save.tar" 2>&1)
R2="$DATA_DIR/images/test/2/rootfs"
if [ "$(json_get "$out" 'j["source"]' 2>/dev/null)" = docker-save ] && [ ! -e "$R2/bin/vi" ] &&
    [ -L "$R2/bin/ls" ] && [ "$(cat "$R2/etc/hostname")" = layer2 ]; then
    pass "import a docker-save archive (layer order, whiteout)"
else
    fail "import a docker-save archive (layer order, whiteout)" "$out"
fi

# --- hostile archives: nothing lands outside, nothing is left behind
python3 - "$TMP" "$OUTSIDE" <<'PY'
import io, sys, tarfile
tmp, outside = sys.argv[1], sys.argv[2]
def mk(path, members):
    with tarfile.open(path, 'w') as t:
        for m in members:
            ti = tarfile.TarInfo(m[0])
            if m[1] == 'l':
                ti.type = tarfile.SYMTYPE; ti.linkname = m[2]; t.addfile(ti)
            elif m[1] == 'h':
                ti.type = tarfile.LNKTYPE; ti.linkname = m[2]; t.addfile(ti)
            else:
                ti.size = len(m[2]); t.addfile(ti, io.BytesIO(m[2]))
mk(tmp + '/dotdot.tar', [('../../outside/pwned', 'f', b'x')])
mk(tmp + '/abs.tar', [(outside + '/pwned', 'f', b'x')])
mk(tmp + '/symlink.tar', [('evil', 'l', outside), ('evil/pwned', 'f', b'x')])
mk(tmp + '/hardlink.tar', [('h', 'h', outside + '/secret')])
PY
echo original >"$OUTSIDE/secret"
for t in dotdot abs symlink hardlink; do
    if "$SKILLD" image import "evil:$t" "$TMP/$t.tar" >/dev/null 2>"$TMP/err"; then
        fail "hostile archive ($t) is refused" "exit 0"
    elif [ -e "$OUTSIDE/pwned" ] || [ -e "$DATA_DIR/images/evil/$t" ] ||
        ls -A "$DATA_DIR/images" | grep -q '^\.'; then
        fail "hostile archive ($t) is refused" "something was written"
    else
        pass "hostile archive ($t) is refused: $(head -c 100 "$TMP/err")"
    fi
done
[ "$(cat "$OUTSIDE/secret")" = original ] && pass "outside file untouched" ||
    fail "outside file untouched" "changed"

# --- running in the imported image (native provider) and the allow-list
OUT=$(SKILLS_ALLOWED_SANDBOX_IMAGES=test "$SKILLD" exec --image test:1 -- sh -c \
    'cat /etc/hostname; readlink /bin/ls; test -e /usr/lib/x86_64-linux-gnu && echo host-lib' 2>"$TMP/err")
if [ "$(json_get "$OUT" 'j["stdout"]' 2>/dev/null)" = $'skilld-test\n/bin/busybox' ]; then
    pass "exec --image runs in the imported rootfs, not the host's"
else
    fail "exec --image runs in the imported rootfs, not the host's" "$OUT $(cat "$TMP/err")"
fi
OUT=$(SKILLS_ALLOWED_SANDBOX_IMAGES=test:2 "$SKILLD" exec --image test:2 -- cat /etc/hostname 2>/dev/null)
[ "$(json_get "$OUT" 'j["stdout"]' 2>/dev/null)" = layer2 ] &&
    pass "exec --image runs the layered image" || fail "exec --image runs the layered image" "$OUT"
rc=0; OUT=$(SKILLS_ALLOWED_SANDBOX_IMAGES=other,test:2 "$SKILLD" exec --image test:1 -- true 2>/dev/null) || rc=$?
[ "$rc" != 0 ] && [ "$(json_get "$OUT" 'j["error"]["code"]' 2>/dev/null)" = forbidden ] &&
    pass "an image not in SKILLS_ALLOWED_SANDBOX_IMAGES is refused" ||
    fail "an image not in SKILLS_ALLOWED_SANDBOX_IMAGES is refused" "rc=$rc $OUT"
rc=0; OUT=$(SKILLS_ALLOWED_SANDBOX_IMAGES=test "$SKILLD" exec --image test:9 -- true 2>/dev/null) || rc=$?
[ "$rc" != 0 ] && [ "$(json_get "$OUT" 'j["error"]["code"]' 2>/dev/null)" = not_found ] &&
    pass "an allowed image that is not imported is not_found" ||
    fail "an allowed image that is not imported is not_found" "rc=$rc $OUT"

# --- list and rm
out=$("$SKILLD" image list --json 2>&1)
if [ "$(json_get "$out" '" ".join(m["name"]+":"+m["tag"] for m in j)' 2>/dev/null)" = "test:1 test:2" ]; then
    pass "list --json shows the two images, sorted"
else
    fail "list --json shows the two images, sorted" "$out"
fi
"$SKILLD" image list | grep -Eq '^test +1 +docker-export' && pass "list prints a table" ||
    fail "list prints a table" "$("$SKILLD" image list 2>&1)"
check "rm test:1" "$SKILLD" image rm test:1
check "rm test:2" "$SKILLD" image rm test:2
out=$("$SKILLD" image list --json 2>&1)
[ "$(json_get "$out" 'len(j)' 2>/dev/null)" = 0 ] && [ ! -e "$DATA_DIR/images/test" ] &&
    pass "list is empty after rm" || fail "list is empty after rm" "$out"
"$SKILLD" image rm test:1 >/dev/null 2>&1 && fail "rm of a missing image fails" "exit 0" ||
    pass "rm of a missing image fails"

# --- doctor
out=$("$SKILLD" doctor --json 2>"$TMP/err")
st=$(json_get "$out" '{c["name"]: c["status"] for c in j["checks"]}' 2>/dev/null)
if [ -n "$st" ]; then pass "doctor --json parses"; else fail "doctor --json parses" "$out $(cat "$TMP/err")"; fi
for c in userns seccomp openat2 clone3 pidfd_open native_sandbox; do
    [ "$(json_get "$out" "{c['name']: c['status'] for c in j['checks']}['$c']" 2>/dev/null)" = ok ] &&
        pass "doctor reports $c ok" || fail "doctor reports $c ok" "$st"
done
ok=$(json_get "$out" 'all(set(c) >= {"name","status","detail"} and (c["status"] == "ok" or c.get("fix")) for c in j["checks"])' 2>/dev/null)
[ "$ok" = true ] && pass "every check has a detail, and a fix when not ok" ||
    fail "every check has a detail, and a fix when not ok" "$out"
names=$(json_get "$out" '" ".join(c["name"] for c in j["checks"])' 2>/dev/null)
for c in kernel cgroup_v2 cgroup_v1 cgroup_limits protected_symlinks protected_hardlinks docker podman; do
    case " $names " in *" $c "*) pass "doctor checks $c" ;; *) fail "doctor checks $c" "$names" ;; esac
done
"$SKILLD" doctor | grep -Eq '^ok +userns' && pass "doctor prints a table" ||
    fail "doctor prints a table" "$("$SKILLD" doctor 2>&1 | head -5)"
finish
