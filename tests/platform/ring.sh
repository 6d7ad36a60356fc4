#!/usr/bin/env bash
# The platform ring: boot stock Debian 12 (its own kernel 6.1, cgroup v2,
# systemd 252 as PID 1) under qemu with TCG and no network device, and run
# skilld there as users run it (tests/platform/guest.sh: a root login
# session, skilld.service after `make install`). The binary is the one
# built on this host. Prints the guest's PASS/FAIL lines.
#
#   tests/platform/ring.sh               (scripts/test.sh runs it)
#   RING_CASES="session" tests/platform/ring.sh   one case
#   RING_TESTS=0 ...   without the two test scripts in each case (a quick
#                      look while developing; the suite always runs them)
#
# The VM image is built once and cached (tests/platform/image.sh, under
# /var/tmp/skilld-vm); each run boots it with a throw-away overlay
# (snapshot=on) and a fresh payload disk (ext4 made with mkfs.ext4 -d) that
# carries the build, the test scripts and, afterwards, the results.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
NAME=platform/ring.sh
fail() { echo "FAIL $NAME: $1: ${2:-}"; exit 1; }

CACHE=$(tests/platform/image.sh) || fail "VM image" "tests/platform/image.sh failed"
for f in build/skilld build/tools/jget build/tools/escape_int80 build/tools/escape_euid; do
    [ -x "$f" ] || fail "build" "$f missing (run make)"
done

W=$(mktemp -d /tmp/skilld-ring.XXXXXX)
QPID=
cleanup() {
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT

# -- payload: what `make install` needs, the build, the tests ---------------
PL=$W/payload
mkdir -p "$PL/src/build/tools" "$PL/src/docs" "$PL/src/tests/integration" "$PL/src/tests/security"
cp -a Makefile dist "$PL/src/"
cp -a docs/skilld.1 "$PL/src/docs/"
cp -a build/skilld "$PL/src/build/"
cp -a build/tools/jget build/tools/escape_int80 build/tools/escape_euid "$PL/src/build/tools/"
cp -a tests/lib.sh "$PL/src/tests/"
cp -a tests/integration/sandbox_exec.sh "$PL/src/tests/integration/"
cp -a tests/security/escape.sh "$PL/src/tests/security/"
cp -a tests/platform "$PL/src/tests/"
cp -a tests/platform/guest.sh "$PL/guest.sh"
cat >"$PL/ring.env" <<EOF
RING_CASES="${RING_CASES:-session service rootless nosd}"
RING_TESTS=${RING_TESTS:-1}
RING_MEM_MB=64
RING_PIDS=48
RING_CPU=150
EOF
: >"$PL/results.log"
chmod 755 "$PL" # reachable by the guest's skilld user, as a checkout would be
truncate -s 512M "$W/payload.img"
mkfs.ext4 -q -F -L payload -d "$PL" "$W/payload.img" || fail "payload disk" "mkfs.ext4 -d failed"

# -- boot ----------------------------------------------------------------------
# TCG (no KVM on these machines), 2 vCPUs, no network device; the serial
# console is the guest's ttyS0, where root is logged in automatically.
t0=$SECONDS
timeout "${RING_VM_TIMEOUT:-2700}" qemu-system-x86_64 -accel tcg -smp 2 -m 2048 -nic none -nographic -no-reboot \
    -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.img" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 systemd.show_status=false" \
    -drive "file=$CACHE/root.img,format=raw,if=virtio,snapshot=on" \
    -drive "file=$W/payload.img,format=raw,if=virtio" \
    </dev/null >"$W/serial.log" 2>&1 &
QPID=$!
wait "$QPID"
rc=$?
QPID=
echo "# VM ran $((SECONDS - t0)) s (qemu exit $rc)"

# -- results -------------------------------------------------------------------
debugfs -R "cat /results.log" "$W/payload.img" 2>/dev/null | tr -d '\000' >"$W/results.log"
grep -E '^(PASS|FAIL|#) ' "$W/results.log"
if ! grep -q '^RING-DONE' "$W/results.log"; then
    echo "FAIL $NAME: the guest finished its cases: qemu exit $rc after $((SECONDS - t0)) s; serial console tail:"
    tail -n 40 "$W/serial.log" | sed 's/^/    /'
    echo "    guest log tail:"
    tail -n 20 "$W/results.log" | sed 's/^/    /'
    exit 1
fi
if ! grep -q '^PASS ' "$W/results.log"; then fail "the guest ran tests" "no PASS line"; fi
! grep -q '^FAIL ' "$W/results.log"
