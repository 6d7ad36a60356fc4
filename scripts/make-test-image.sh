#!/usr/bin/env bash
# Build a tiny busybox root filesystem as a `docker export`-style tarball
# (a plain rootfs tar, names without a leading "./", owner 0:0), for
# `skilld image import`, `docker import` and `podman import`.
#   scripts/make-test-image.sh [OUT.tar]      default build/test-image.tar
# Needs Debian's busybox-static (/bin/busybox, statically linked). The
# output is deterministic for a given busybox.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/test-image.tar}
bb=/bin/busybox
if ! file -L "$bb" 2>/dev/null | grep -q 'statically linked'; then
    # `file` may be missing; fall back to ldd's verdict.
    if ldd "$bb" 2>&1 | grep -q '=>'; then
        echo "make-test-image: $bb is not statically linked (install busybox-static)" >&2
        exit 1
    fi
fi
root=$(mktemp -d /tmp/skilld-test-image.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,dev,proc,sys,root,home,workspace}
chmod 1777 "$root/tmp"
chmod 0700 "$root/root"
install -m 0755 "$bb" "$root/bin/busybox"
# One symlink per applet at the place busybox says it belongs.
"$bb" --list-full | while read -r applet; do
    [ "$applet" = bin/busybox ] && continue
    mkdir -p "$root/$(dirname "$applet")"
    ln -sf /bin/busybox "$root/$applet"
done
cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PW
cat >"$root/etc/group" <<'GR'
root:x:0:
nogroup:x:65534:
GR
echo "skilld-test" >"$root/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
mkdir -p "$(dirname "$out")"
tmp_out="$out.tmp.$$"
(cd "$root" && tar --sort=name --numeric-owner --owner=0 --group=0 --mtime=@0 \
    --format=gnu -cf - $(ls -A)) >"$tmp_out"
mv "$tmp_out" "$out"
echo "$out"
