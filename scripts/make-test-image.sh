#!/usr/bin/env bash
# Build the small test image from Debian's busybox-static: a plain root
# filesystem tarball (the `docker export` format) at build/test-image.tar
# holding /bin/busybox, one symlink per applet in /bin, an empty /workspace,
# /tmp, /etc/passwd and /etc/group with an unprivileged user. Reproducible
# (fixed mtimes, sorted, numeric root owner). Rebuilt only when missing or
# older than this script.
#   scripts/make-test-image.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/test-image.tar}
BB=/bin/busybox
[ -x "$BB" ] || { echo "make-test-image: $BB missing (apt-get install busybox-static)" >&2; exit 1; }
if [ -f "$OUT" ] && [ "$OUT" -nt "$0" ] && [ "$OUT" -nt "$BB" ]; then exit 0; fi
mkdir -p "$(dirname "$OUT")"
root=$(mktemp -d /tmp/skilld-image.XXXXXX)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,etc,tmp,workspace,proc,dev,sys}
cp "$BB" "$root/bin/busybox"
for a in $("$BB" --list); do
    [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
done
ln -s bin "$root/sbin"
mkdir -p "$root/usr"; ln -s ../bin "$root/usr/bin"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$OUT.tmp" .
mv "$OUT.tmp" "$OUT"
