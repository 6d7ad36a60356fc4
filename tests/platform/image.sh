#!/usr/bin/env bash
# Build (or find cached) the VM the platform ring boots: Debian 12's own
# cloud kernel, a tiny initramfs that loads its virtio modules and
# switch_roots into /dev/vda, and a bookworm root made by debootstrap with
# systemd as init, skilld's runtime libraries and what the guest tests
# drive. Everything comes from Debian's archive and is cached under
# $SKILLD_VM_CACHE (default /var/tmp/skilld-vm); the cache is keyed by the
# SHA-256 of this script, so changing the recipe rebuilds it.
#
#   tests/platform/image.sh        prints the cache directory when ready
#
# Output files in the cache: vmlinuz, initrd.img, root.img (ext4, used
# read-only through qemu's snapshot=on), stamp.
set -euo pipefail
CACHE=${SKILLD_VM_CACHE:-/var/tmp/skilld-vm}
MIRROR=${SKILLD_VM_MIRROR:-http://deb.debian.org/debian}
SELF=$(readlink -f "$0")
mkdir -p "$CACHE/dl" "$CACHE/debs"
STAMP=$(sha256sum "$SELF" | cut -c1-16)

# One builder at a time; later callers wait and then find the cache warm.
exec 9>"$CACHE/lock"
flock 9
if [ -f "$CACHE/stamp" ] && [ "$(cat "$CACHE/stamp")" = "$STAMP" ] &&
    [ -s "$CACHE/vmlinuz" ] && [ -s "$CACHE/initrd.img" ] && [ -s "$CACHE/root.img" ]; then
    echo "$CACHE"
    exit 0
fi
rm -f "$CACHE/stamp"
log() { echo "vm-image: $*" >&2; }
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# -- kernel: the package linux-image-cloud-amd64 points at ------------------
log "kernel: apt-get download linux-image-cloud-amd64"
kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$kpkg" ]; then
    apt-get update -qq >&2
    kpkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
[ -n "$kpkg" ] || { log "apt-cache knows no linux-image-cloud-amd64 (run apt-get update)"; exit 1; }
(cd "$CACHE/dl" && { ls "$kpkg"_*.deb >/dev/null 2>&1 || apt-get download -q "$kpkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true; })
kdeb=$(ls "$CACHE/dl/$kpkg"_*.deb | tail -n1)
dpkg-deb -x "$kdeb" "$WORK/k"
kver=${kpkg#linux-image-}
cp "$WORK/k/boot/vmlinuz-$kver" "$WORK/vmlinuz"

# -- initramfs: busybox + virtio modules; ext4 is built into this kernel ----
log "initramfs for $kver"
grep -q '^CONFIG_EXT4_FS=y' "$WORK/k/boot/config-$kver" || { log "kernel has no built-in ext4"; exit 1; }
I=$WORK/initrd
mkdir -p "$I/bin" "$I/mod" "$I/dev" "$I/proc" "$I/sys" "$I/newroot"
cp /bin/busybox "$I/bin/busybox"
# In dependency order (each module's depends= in its .modinfo); overlay for
# the sandbox's workspace quota overlay (the root has no /lib/modules).
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk overlay; do
    f=$(find "$WORK/k/lib/modules/$kver" -name "$m.ko*" | head -n1)
    [ -n "$f" ] || { log "module $m missing from $kdeb"; exit 1; }
    case $f in *.xz) xz -dc "$f" >"$I/mod/$m.ko" ;; *.zst) zstd -qdc "$f" >"$I/mod/$m.ko" ;; *) cp "$f" "$I/mod/$m.ko" ;; esac
    echo "$m" >>"$I/mod/order"
done
cat >"$I/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /mod/order); do /bin/busybox insmod /mod/$m.ko; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do /bin/busybox usleep 50000; i=$((i + 1)); done
/bin/busybox mount -t ext4 -o rw /dev/vda /newroot || { echo "initramfs: cannot mount /dev/vda"; /bin/busybox poweroff -f; }
/bin/busybox umount /proc /sys /dev
exec /bin/busybox switch_root /newroot /sbin/init
EOF
chmod 755 "$I/init"
(cd "$I" && find . | cpio -o -H newc --quiet | gzip -1) >"$WORK/initrd.img"

# -- root: debootstrap bookworm ----------------------------------------------
# Runtime libraries of build/skilld (ldd), systemd with logind (for a real
# login session scope), udev (device units for the payload disk), and what
# the guest's tests drive (python3 and nodejs for eval_code, curl,
# busybox, gcc for the escape battery's two C programs, procps/psmisc for
# pgrep/pkill, make for `make install`).
PKGS=systemd,systemd-sysv,udev,dbus,libpam-systemd,login,passwd,util-linux,procps,psmisc,make,
PKGS+=python3,nodejs,curl,busybox-static,gcc,libc6-dev,time,e2fsprogs,ca-certificates,
PKGS+=libjansson4,libmicrohttpd12,libcurl4,libseccomp2,libsqlite3-0,libssl3,libxml2,
PKGS+=libarchive13,libsystemd0,libcap2,libpq5,libnettle8
R=$WORK/root
# The debootstrap tree is cached on its own (keyed by the package list), so
# a change to the configuration below costs a tar extraction, not a
# download.
BASE=$CACHE/base-$(echo "$PKGS $MIRROR" | sha256sum | cut -c1-16).tar
if [ ! -s "$BASE" ]; then
    log "debootstrap bookworm (minbase + ${PKGS//,/ })"
    if ! debootstrap --variant=minbase --cache-dir="$CACHE/debs" --include="$PKGS" bookworm "$R" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
        tail -n 30 "$WORK/debootstrap.log" >&2
        [ -f "$R/debootstrap/debootstrap.log" ] && tail -n 30 "$R/debootstrap/debootstrap.log" >&2
        exit 1
    fi
    rm -f "$CACHE"/base-*.tar
    tar -C "$R" -cf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE"
else
    log "root from cached $(basename "$BASE")"
    mkdir -p "$R" && tar -C "$R" -xpf "$BASE"
fi

log "configure the root"
echo skilld-vm >"$R/etc/hostname"
: >"$R/etc/machine-id"
# The payload disk must never send the boot to emergency mode on a slow,
# loaded host: nofail, a long device timeout, no fsck; the login shell waits
# for it instead.
printf '/dev/vda / ext4 rw 0 1\n/dev/vdb /payload ext4 rw,nofail,x-systemd.device-timeout=900s 0 0\n' >"$R/etc/fstab"
mkdir -p "$R/payload"
chroot "$R" passwd -d root >/dev/null
# Serial-console autologin: root's login shell runs in session-N.scope,
# beside login and bash, as a user typing scripts/quickstart.sh would.
mkdir -p "$R/etc/systemd/system/serial-getty@ttyS0.service.d"
cat >"$R/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'EOF'
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --noclear --keep-baud 115200 %I linux
EOF
# The login shell hands over to the ring's guest driver on the payload disk.
cat >"$R/root/.bash_profile" <<'EOF'
if [ "$(tty)" = /dev/ttyS0 ] && [ ! -e /run/skilld-ring-started ]; then
    for _ in $(seq 1 900); do [ -x /payload/guest.sh ] && break; sleep 1; done
fi
if [ "$(tty)" = /dev/ttyS0 ] && [ -x /payload/guest.sh ] && [ ! -e /run/skilld-ring-started ]; then
    touch /run/skilld-ring-started
    exec /payload/guest.sh
fi
EOF
# Nothing the ring does not need at boot: timers, the other gettys, and
# systemd's boot-time housekeeping.
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
    dpkg-db-backup.timer man-db.timer getty@tty1.service systemd-timesyncd.service \
    systemd-networkd-wait-online.service; do
    ln -sf /dev/null "$R/etc/systemd/system/$u"
done
rm -rf "$R/var/cache/apt/archives/"*.deb "$R/var/lib/apt/lists/"* "$R/usr/share/doc" "$R/usr/share/man" \
    "$R/usr/share/locale" "$R/debootstrap"

log "mkfs.ext4 -d"
size=$(( $(du -sm "$R" | cut -f1) + 600 ))
truncate -s "${size}M" "$WORK/root.img"
mkfs.ext4 -q -F -L skilld-root -d "$R" "$WORK/root.img"

mv "$WORK/vmlinuz" "$WORK/initrd.img" "$WORK/root.img" "$CACHE/"
echo "$kver" >"$CACHE/kernel-version"
echo "$STAMP" >"$CACHE/stamp"
log "ready: $CACHE"
echo "$CACHE"
