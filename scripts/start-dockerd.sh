#!/usr/bin/env bash
# Start dockerd (and containerd under it) in the background when it is not
# already answering, for the provider tests and the benchmark. Idempotent.
#
# The daemon is started so that it cannot disturb the host's network:
# --iptables=false and --ip6tables=false (no NAT or filter rules written),
# --bridge=none (no docker0 bridge: containers get --network none, or a
# loopback-only namespace; skilld never needs more in tests). State lives in
# the default /var/lib/docker; the log goes to $DOCKERD_LOG.
#   scripts/start-dockerd.sh          start if needed, wait for the socket
#   scripts/start-dockerd.sh --stop   stop the daemon this script started
set -euo pipefail
SOCK=/var/run/docker.sock
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/skilld-dockerd.log}
PIDFILE=/var/run/skilld-dockerd.pid
DOCKER=/usr/bin/docker

if [ "${1:-}" = "--stop" ]; then
    if [ -f "$PIDFILE" ]; then
        pid=$(cat "$PIDFILE")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$PIDFILE"
    fi
    exit 0
fi

if DOCKER_HOST=unix://$SOCK "$DOCKER" version >/dev/null 2>&1; then
    exit 0
fi
command -v dockerd >/dev/null || { echo "start-dockerd: dockerd is not installed" >&2; exit 1; }

# A stale pid file or socket from a killed daemon would stop it starting.
# The daemon counts as alive only when that pid is a dockerd that is not a
# zombie (a killed daemon whose parent has not reaped it yet).
alive() {
    local pid; pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] &&
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}
if [ -f "$PIDFILE" ] && ! alive "$PIDFILE"; then rm -f "$PIDFILE"; fi
if [ -f /var/run/docker.pid ] && ! alive /var/run/docker.pid; then rm -f /var/run/docker.pid; fi
[ -S "$SOCK" ] && rm -f "$SOCK"

setsid dockerd --iptables=false --ip6tables=false --bridge=none --ip-forward=false \
    --ip-masq=false --userland-proxy=false --log-level=warn \
    >>"$DOCKERD_LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"

for _ in $(seq 1 300); do
    if "$DOCKER" version >/dev/null 2>&1; then exit 0; fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
    sleep 0.1
done
echo "start-dockerd: dockerd did not come up; last log lines:" >&2
tail -n 30 "$DOCKERD_LOG" >&2
exit 1
