#!/usr/bin/env bash
# Install what building and testing skilld needs on Debian 12, as root.
# Idempotent: apt-get runs only when a package is missing.
#   scripts/deps.sh          build + run dependencies
#   scripts/deps.sh --test   also everything the test suite drives
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PKGS=(build-essential pkg-config clang libjansson-dev libmicrohttpd-dev
    libcurl4-openssl-dev libseccomp-dev libsqlite3-dev libssl-dev libxml2-dev libcap-dev
    libarchive-dev libsystemd-dev libpq-dev nettle-dev libcjose-dev)
# Test-only packages. Add yours here (one list, sorted by purpose).
TEST_PKGS=(valgrind clang-format python3 python3-pip git curl iproute2 busybox-static bubblewrap sqlite3
    nodejs npm procps psmisc util-linux time
    docker.io podman catatonit uidmap slirp4netns fuse-overlayfs
    qemu-system-x86 debootstrap cpio e2fsprogs
    postgresql-15 postgresql-client-15 haproxy python3-yaml python3-requests
    chromium)
# (qemu, debootstrap, cpio, e2fsprogs: the VM ring, tests/platform/, which
# also fetches Debian's cloud kernel with apt-get download; postgresql-15,
# haproxy, python3-yaml: the store ring, tests/store/ and tests/scale/;
# python3-requests: secrets.sh checks that requests in a sandbox gets a
# secret's value; chromium: the console's browser tests, tests/node/console.test.mjs, which
# drive it with playwright-core from tests/node/package.json.)

want=("${BUILD_PKGS[@]}")
[ "${1:-}" = "--test" ] && want+=("${TEST_PKGS[@]}")

missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node may come from outside Debian's packages (it does on the CI image);
# then do not ask apt for nodejs/npm.
if command -v node >/dev/null && command -v npm >/dev/null; then
    tmp=(); for p in "${missing[@]}"; do [ "$p" = nodejs ] || [ "$p" = npm ] || tmp+=("$p"); done
    missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The unprivileged system user skilld drops to when started as root
# (SKILLD_USER; DESIGN.md "Processes and privileges").
if [ "$(id -u)" = 0 ] && ! getent passwd "${SKILLD_USER:-skilld}" >/dev/null; then
    echo "deps: creating system user ${SKILLD_USER:-skilld}"
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        "${SKILLD_USER:-skilld}"
fi

if [ "${1:-}" = "--test" ] && [ -f tests/node/package.json ]; then
    if [ ! -d tests/node/node_modules ] || [ tests/node/package.json -nt tests/node/node_modules ]; then
        echo "deps: npm install in tests/node"
        (cd tests/node && npm install --no-audit --no-fund --loglevel=error)
        touch tests/node/node_modules
    fi
fi
