#!/usr/bin/env bash
# Make docker and podman ready for the provider tests and the benchmark:
# start dockerd when it is not running (scripts/start-dockerd.sh), give
# podman a root configuration that works without systemd (cgroupfs, file
# events), build the busybox test image (scripts/make-test-image.sh) and
# import it into both engines as $SKILLD_TEST_IMAGE (default skilld-test:1).
# Idempotent and quick when everything is in place. Installing the packages
# is scripts/deps.sh --test's job (docker.io podman catatonit ...).
set -euo pipefail
cd "$(dirname "$0")/.."
IMG=${SKILLD_TEST_IMAGE:-skilld-test:1}
TAR=build/test-image.tar

scripts/start-dockerd.sh

# Podman as root outside systemd: cgroupfs manager, events to a file.
# Only written when the operator has no containers.conf of their own.
CONF=/etc/containers/containers.conf
if [ ! -f "$CONF" ] || grep -q '^# skilld test configuration' "$CONF"; then
    mkdir -p /etc/containers
    cat >"$CONF.tmp" <<'CONF'
# skilld test configuration (scripts/setup-containers.sh)
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
    mv "$CONF.tmp" "$CONF"
fi

if [ ! -f "$TAR" ] || [ scripts/make-test-image.sh -nt "$TAR" ] || [ /bin/busybox -nt "$TAR" ]; then
    scripts/make-test-image.sh "$TAR" >/dev/null
fi
for engine in docker podman; do
    stamp=build/.test-image-$engine
    ref=$IMG
    [ "$engine" = podman ] && ref=localhost/$IMG
    if [ -f "$stamp" ] && [ "$stamp" -nt "$TAR" ] && "$engine" image inspect "$ref" >/dev/null 2>&1; then
        continue
    fi
    "$engine" image rm -f "$ref" >/dev/null 2>&1 || true
    out=$("$engine" import "$TAR" "$IMG" 2>&1) || { echo "$engine import failed: $out" >&2; exit 1; }
    touch "$stamp"
done
