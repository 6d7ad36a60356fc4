# PostgreSQL 15 for the tests, started by the tests themselves (sourced, not
# a test). A cluster in a temporary directory, owned by an unprivileged user
# (PostgreSQL refuses to run as root: as root we run it as the `postgres`
# user of Debian's package), listening on a free loopback port and a unix
# socket in that directory; trust authentication on loopback only.
#   pg_start         initdb + start in a new /tmp/skilld-pg.* (its own, so that
#                    the postgres user can reach it); sets PG_PORT, PG_DIR,
#                    PG_URL (database skilld)
#   pg_stop          fast shutdown and removal of PG_DIR (idempotent)
#   pg_halt / pg_resume   stop and start the same cluster (outage tests)
#   pg_psql SQL...   run SQL as the superuser on database postgres
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

pg_as() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

pg_start() {
    PG_DIR=$(mktemp -d /tmp/skilld-pg.XXXXXX) || return 1
    # reachable (its unix socket) by the unprivileged user skilld serve drops to
    chmod 755 "$PG_DIR"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$PG_DIR"
    PG_PORT=$(pg_free_port)
    pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U skilld --auth=trust -E UTF8 --locale=C.UTF-8 \
        >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log" >&2; return 1; }
    cat >>"$PG_DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
log_min_messages = warning
CONF
    pg_resume || return 1
    PG_URL="postgresql://skilld@127.0.0.1:$PG_PORT/skilld"
    pg_psql "CREATE DATABASE skilld" >/dev/null || return 1
    export PG_DIR PG_PORT PG_URL
}

pg_resume() {
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null ||
        { tail -20 "$PG_DIR/server.log" >&2; return 1; }
}

pg_halt() {
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 60 stop >/dev/null 2>&1
}

pg_stop() {
    [ -n "${PG_DIR:-}" ] || return 0
    [ -f "$PG_DIR/data/postmaster.pid" ] && pg_halt
    rm -rf "$PG_DIR"
    PG_DIR=""
}

pg_psql() {
    psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U skilld -d postgres -tA -c "$*"
}
