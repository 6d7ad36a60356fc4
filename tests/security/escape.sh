#!/usr/bin/env bash
# The escape and abuse battery (issue 3): each case runs an attack inside the
# native sandbox through the real binary (`skilld exec`) and asserts that it
# failed — and, where the attack would leave a trace on the host, that no
# trace is there.
source "$(dirname "$0")/../lib.sh"
export DATA_DIR="$TMP/var"
MARK="skilld-escape-$$-$RANDOM"

# x CASE-ARGS...: run `skilld exec` with the given flags/command, JSON to $TMP/out.json
x() { "$SKILLD" exec "$@" >"$TMP/out.json" 2>"$TMP/err.txt"; echo $? >"$TMP/rc"; }
# field NAME: a top-level field of $TMP/out.json (a string as is, anything
# else as JSON, null when absent or not JSON; tests/lib.sh's jget, not a
# Python start per field, which costs about a second on the VM ring's
# emulated CPU).
field() { "$JGET" ".$1" "$TMP/out.json" 2>/dev/null || echo null; }
ran() { [ "$(field exitCode)" != "null" ] || [ "$(field signal)" != "null" ]; }
py() { x --key attacker -- python3 -c "$1"; }

# -- filesystem, namespaces, credentials ------------------------------------------
# The simple refusals run in one sandbox (on the VM ring's emulated CPU a
# sandbox costs about a second): each probe is a child process of its own,
# its output comes back prefixed "NAME| " and its exit status as "@@ NAME RC".
PROBE_LIB='p() { n=$1; shift; o=$("$@" 2>&1); r=$?; [ -z "$o" ] || printf "%s\n" "$o" | sed "s/^/$n| /"; echo "@@ $n $r"; }'
# probe_rc NAME / probe_out NAME: a probe's exit status (empty when it did not
# report) and output, from the batch's stdout in $TMP/batch.out.
probe_rc() { awk -v n="$1" '$1 == "@@" && $2 == n {print $3}' "$TMP/batch.out"; }
probe_out() { sed -n "s/^$1| //p" "$TMP/batch.out"; }
refused() { local rc; rc=$(probe_rc "$1"); [ -n "$rc" ] && [ "$rc" != 0 ]; }

export SKILLD_TEST_SECRET="$MARK-env"
x --key attacker -- sh -c "$PROBE_LIB
p shadow cat /etc/shadow
p env sh -c 'env; cat /proc/*/environ 2>/dev/null | tr \"\\0\" \"\\n\"'
p w_usr sh -c 'echo x > /usr/$MARK && echo WROTE'
p w_etc sh -c 'echo x > /etc/$MARK && echo WROTE'
p w_root sh -c 'echo x > /$MARK && echo WROTE'
p w_proc sh -c 'echo x > /proc/sys/kernel/$MARK && echo WROTE'
p dotdot sh -c 'echo pwned > /workspace/../../../../tmp/$MARK; ls /tmp'
p mknod mknod /tmp/null2 c 1 3
p remount mount -o remount,rw /
p mnt mount -t tmpfs none /mnt
p userns unshare -Ur id
p netns unshare -n true
p status cat /proc/self/status
p uid id -u
true"
unset SKILLD_TEST_SECRET
field stdout >"$TMP/batch.out"; [ -n "${ESCAPE_DEBUG:-}" ] && cp "$TMP/batch.out" /tmp/escape-batch.out
if [ "$(field exitCode)" = 0 ] && [ "$(grep -c '^@@ ' "$TMP/batch.out")" = 14 ]; then pass "the probes ran, each reported"; else fail "the probes ran, each reported" "$(head -c 400 "$TMP/out.json")"; fi

if refused shadow && ! probe_out shadow | grep -q 'root:'; then pass "read /etc/shadow"; else fail "read /etc/shadow" "$(probe_out shadow | head -3)"; fi
if [ -n "$(probe_rc env)" ] && ! grep -q "$MARK-env" "$TMP/out.json"; then pass "server environment invisible"; else fail "server environment invisible" "secret leaked or did not run"; fi
for w in usr:/usr/$MARK etc:/etc/$MARK root:/$MARK proc:/proc/sys/kernel/$MARK; do
    target=${w#*:}
    if refused "w_${w%%:*}" && ! probe_out "w_${w%%:*}" | grep -q WROTE && [ ! -e "$target" ]; then pass "write $target refused"; else fail "write $target refused" "$(probe_out "w_${w%%:*}" | head -3)"; fi
done
if [ -n "$(probe_rc dotdot)" ] && [ ! -e "/tmp/$MARK" ]; then pass "workspace dot-dot write stays inside"; else fail "workspace dot-dot write stays inside" "host /tmp/$MARK exists or the probe did not run"; rm -f "/tmp/$MARK"; fi
if refused mknod; then pass "mknod refused"; else fail "mknod refused" "$(probe_out mknod | head -3)"; fi
if refused remount; then pass "remount refused"; else fail "remount refused" "$(probe_out remount | head -3)"; fi
if refused mnt; then pass "mount tmpfs refused"; else fail "mount tmpfs refused" "$(probe_out mnt | head -3)"; fi
if refused userns; then pass "nested user namespace refused"; else fail "nested user namespace refused" "$(probe_out userns | head -3)"; fi
if refused netns; then pass "nested net namespace refused"; else fail "nested net namespace refused" "$(probe_out netns | head -3)"; fi
st=$(probe_out status)
if echo "$st" | grep -q '^NoNewPrivs:[[:space:]]*1' && echo "$st" | grep -q '^CapEff:[[:space:]]*0000000000000000' && echo "$st" | grep -q '^Seccomp:[[:space:]]*2'; then
    pass "status NoNewPrivs 1, CapEff 0, Seccomp 2"
else
    fail "status NoNewPrivs 1, CapEff 0, Seccomp 2" "$(echo "$st" | grep -E 'NoNewPrivs|CapEff|Seccomp')"
fi
uid=$(probe_out uid)
if [ "$(probe_rc uid)" = 0 ] && [ -n "$uid" ] && [ "$uid" != 0 ]; then pass "runs as an unprivileged uid"; else fail "runs as an unprivileged uid" "uid '$uid'"; fi

# -- processes ----------------------------------------------------------------
sleep 300 & HOSTPID=$!
exec -a "$MARK-host" sleep 301 & HOSTPID2=$!
x --key attacker -- sh -c 'cat /proc/[0-9]*/cmdline | tr "\0" " "; echo; ls /proc | grep -c "^[0-9]"'
if ran && ! grep -q "$MARK-host" "$TMP/out.json" && [ "$(field stdout | grep -v '^$' | tail -n1)" -lt 10 ]; then pass "host processes invisible"; else fail "host processes invisible" "$(head -c 300 "$TMP/out.json")"; fi
x --key attacker -- kill -9 "$HOSTPID"
if kill -0 "$HOSTPID" 2>/dev/null; then pass "cannot signal host process"; else fail "cannot signal host process" "pid $HOSTPID gone"; fi
kill "$HOSTPID" "$HOSTPID2" 2>/dev/null; wait 2>/dev/null

# The victim must be running for the whole attack: seen running before it
# and, as the same process, after it. When it merely ended first (a slow
# host), the attack is tried again against a longer-lived victim.
victim_ok=""
for vs in 6 12 24; do
    "$SKILLD" exec --key victim --timeout $(((vs + 20) * 1000)) -- sh -c "sleep $vs; echo alive" "$MARK-victim" >"$TMP/victim.json" 2>/dev/null &
    VPID=$!
    vpat="^sh -c sleep $vs; echo alive $MARK-victim\$"
    for _ in $(seq 1 300); do pgrep -f "$vpat" >/dev/null && break; sleep 0.1; done
    before=$(pgrep -f "$vpat")
    x --key attacker -- sh -c 'kill -9 -1; pkill -9 sleep; python3 -c "import ctypes; print(ctypes.CDLL(None).ptrace(16, 2, 0, 0))"; true'
    after=$(pgrep -f "$vpat")
    wait "$VPID"
    if [ -n "$before" ] && [ "$before" = "$after" ]; then victim_ok=1; break; fi
    grep -q '"stdout": "alive' "$TMP/victim.json" || break # killed: no retry
done
if [ -n "$victim_ok" ] && grep -q '"stdout": "alive' "$TMP/victim.json"; then pass "cannot signal or ptrace another sandbox"; else fail "cannot signal or ptrace another sandbox" "victim running before/after the attack: '${before:-}'/'${after:-}'; $(cat "$TMP/victim.json")"; fi

# -- dangerous system calls (python ctypes; each must fail) -----------------------
SYSCALLS='
import ctypes, errno, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *a):
    r = libc.syscall(nr, *[ctypes.c_long(x) for x in a])
    return r, ctypes.get_errno()
def probe(name):
    if name == "io_uring":   r = sc(425, 8, ctypes.addressof(ctypes.create_string_buffer(120)))
    elif name == "keyctl":   r = sc(250, 0, 0, 0, 0)
    elif name == "add_key":  r = sc(248, ctypes.addressof(ctypes.create_string_buffer(b"user")), 0, 0, 0, -2)
    elif name == "bpf":      r = sc(321, 0, 0, 0)
    elif name == "perf":     r = sc(298, ctypes.addressof(ctypes.create_string_buffer(128)), 0, -1, -1, 0)
    elif name == "userfaultfd": r = sc(323, 0)
    elif name == "ptrace":   r = sc(101, 16, 1, 0, 0)
    elif name == "kexec":    r = sc(246, 0, 0, 0, 0)
    elif name == "init_module": r = sc(175, 0, 0, 0)
    elif name == "reboot":   r = sc(169, 0xfee1dead, 672274793, 0x4321fedc, 0)
    elif name == "swapon":   r = sc(167, 0, 0)
    elif name == "personality": r = sc(135, 0x0008)
    elif name == "open_by_handle_at": r = sc(304, -100, 0, 0)
    elif name == "setns":    r = sc(308, 0, 0)
    elif name == "unshare":  r = sc(272, 0x10000000)
    elif name == "clone3":   r = sc(435, 0, 0)
    elif name == "clone_ns": r = sc(56, 0x20000000 | 17, 0, 0, 0, 0)
    elif name == "pivot_root": r = sc(155, 0, 0)
    elif name == "fsopen":   r = sc(430, 0, 0)
    elif name == "vsock":
        try: socket.socket(40, socket.SOCK_STREAM); r = (0, 0)
        except OSError as e: r = (-1, e.errno)
    elif name == "netlink":
        try: socket.socket(16, socket.SOCK_RAW, 0); r = (0, 0)
        except OSError as e: r = (-1, e.errno)
    elif name == "packet":
        try: socket.socket(17, socket.SOCK_RAW, 0); r = (0, 0)
        except OSError as e: r = (-1, e.errno)
    return r
# Every probe in a child of its own, so a probe killed by the filter
# (SIGSYS) is told apart from one that returned, and the next still runs:
# one sandbox for all of them (under the emulated CPU of the VM ring a sandbox
# start and a Python start cost seconds each).
import os
for name in sys.argv[1:]:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            r = probe(name)
            print(name, "OK" if r[0] == -1 and r[1] != 0 else "ALLOWED", r)
        finally:
            sys.stdout.flush()
            os._exit(0)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        print(name, "OK" if os.WTERMSIG(st) == 31 else "ALLOWED", "killed by signal", os.WTERMSIG(st))
'
printf '%s' "$SYSCALLS" > "$TMP/sc.py"
NAMES="io_uring keyctl add_key bpf perf userfaultfd ptrace kexec init_module reboot swapon personality open_by_handle_at setns unshare clone3 clone_ns pivot_root fsopen vsock netlink packet"
# shellcheck disable=SC2086 # one argument per name
x --key attacker -- python3 -c "$SYSCALLS" $NAMES
field stdout >"$TMP/sc.out"
for s in $NAMES; do
    line=$(grep "^$s " "$TMP/sc.out" | head -n1)
    if [ "${line#"$s" OK}" != "$line" ]; then pass "syscall $s denied"; else fail "syscall $s denied" "${line:-no result} $(field stderr | tail -c 200)"; fi
done

# -- 32-bit ABI and setuid ------------------------------------------------------
WS_ATT="$DATA_DIR/workspaces/$(printf %s attacker | sha256sum | cut -d' ' -f1)"
mkdir -p "$WS_ATT"
# Built by make (tests/tools/escape_*.c), not here: gcc costs seconds on the
# VM ring's emulated CPU.
TOOLS=$(dirname "$JGET")
if cp "$TOOLS/escape_int80" "$WS_ATT/int80" && cp "$TOOLS/escape_euid" "$WS_ATT/euid"; then pass "attack programs in place"; else fail "attack programs in place" "$TOOLS/escape_int80, escape_euid (make tests builds them)"; fi
chmod 4755 "$WS_ATT/euid"
x --key attacker -- /workspace/int80
if [ "$(field signal)" = "SIGSYS" ] || { ran && ! grep -q 'int80 returned [0-9]' "$TMP/out.json"; }; then pass "32-bit syscall ABI killed"; else fail "32-bit syscall ABI killed" "$(cat "$TMP/out.json")"; fi
x --key attacker -- /workspace/euid
if ran && [[ $(field stdout) =~ ^[0-9]+$ ]] && [ "$(field stdout)" != "0" ]; then pass "setuid binary gains nothing"; else fail "setuid binary gains nothing" "$(cat "$TMP/out.json")"; fi

# -- resource abuse -------------------------------------------------------------
x --key attacker --timeout 2000 --pids 32 -- sh -c 'bomb() { bomb | bomb & }; bomb'
if [ "$(field killed)" = "true" ] || [ "$(field exitCode)" != "null" ]; then pass "fork bomb contained"; else fail "fork bomb contained" "$(cat "$TMP/out.json")"; fi
sleep 0.5
if ! pgrep -f 'bomb' >/dev/null; then pass "fork bomb leaves nothing"; else fail "fork bomb leaves nothing" "$(pgrep -af bomb | head -3)"; fi

x --key attacker --memory 64 --timeout 20000 -- python3 -c 'b = []
while True: b.append(bytearray(8 << 20))'
if [ "$(field oomKilled)" = "true" ]; then pass "memory bomb oomKilled"; else fail "memory bomb oomKilled" "$(cat "$TMP/out.json" | head -c 400)"; fi

/usr/bin/time -f '%M' -o "$TMP/rss" "$SKILLD" exec --key attacker --timeout 1500 --output-limit 100000 -- yes >"$TMP/out.json" 2>/dev/null
len=$("$JGET" -l .stdout "$TMP/out.json")
if [ "$(field truncated)" = "true" ] && [ "$len" -le 100000 ]; then pass "yes flood capped"; else fail "yes flood capped" "truncated=$(field truncated) len=$len"; fi
rss=$(tail -n1 "$TMP/rss")
if [ "$rss" -lt 65536 ]; then pass "yes flood keeps skilld memory flat (${rss} KiB)"; else fail "yes flood keeps skilld memory flat" "max RSS ${rss} KiB"; fi

x --key attacker --timeout 1000 -- sh -c 'echo partial; sleep 1000'
if [ "$(field timedOut)" = "true" ] && [ "$(field killed)" = "true" ] && [ "$(field stdout)" = "partial" ]; then pass "sleep 1000 killed at timeout with partial output"; else fail "sleep 1000 killed at timeout" "$(cat "$TMP/out.json")"; fi

x --key attacker --timeout 1500 -- sh -c "setsid sh -c 'exec -a $MARK-daemon sleep 600' </dev/null >/dev/null 2>&1 & echo started"
sleep 0.3
if ! pgrep -f "$MARK-daemon" >/dev/null; then pass "daemonised grandchild gone after run"; else fail "daemonised grandchild gone after run" "$(pgrep -af "$MARK-daemon")"; pkill -9 -f "$MARK-daemon"; fi

x --key attacker --timeout 1000 -- sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done'
if [ "$(field timedOut)" = "true" ] && [ "$(field signal)" = "SIGKILL" ]; then pass "SIGTERM-ignoring process killed"; else fail "SIGTERM-ignoring process killed" "$(cat "$TMP/out.json")"; fi

x --key attacker -- sh -c "echo a > /tmp/$MARK; echo b > /dev/shm/$MARK 2>/dev/null; ls /tmp /dev/shm"
x --key attacker -- sh -c "ls /tmp/$MARK /dev/shm/$MARK 2>&1; true"
if ! field stdout | grep -q "^/tmp/$MARK\$" && ! field stdout | grep -q "^/dev/shm/$MARK\$"; then pass "no /tmp or /dev/shm leftovers between runs"; else fail "no /tmp or /dev/shm leftovers between runs" "$(field stdout)"; fi

# -- network ------------------------------------------------------------------------
# A host service on loopback; it logs every request to http.log and writes
# its port to http.port once it listens (one Python start: they cost about a
# second on the VM ring's emulated CPU).
python3 -c '
import http.server, sys
srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()' "$TMP/http.port" >"$TMP/http.log" 2>&1 & HTTPPID=$!
for _ in $(seq 1 300); do [ -s "$TMP/http.port" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/http.port" 2>/dev/null)
# Every destination from one sandbox, each connect() in turn: "ADDR CONNECTED"
# or "ADDR refused ...".
NETPY='import socket,sys
a = sys.argv[1:]
for addr, port in zip(a[::2], a[1::2]):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.settimeout(3)
    try:
        s.connect((addr, int(port))); print(addr, "CONNECTED")
    except OSError as e:
        print(addr, "refused", e)
    s.close()'
x --key attacker -- python3 -c "$NETPY" 127.0.0.1 "${PORT:-1}" 1.1.1.1 80 10.0.0.1 80 169.254.169.254 80
field stdout >"$TMP/net.out"
if [ -n "$PORT" ] && grep -q '^127.0.0.1 ' "$TMP/net.out" && ! grep -q '^127.0.0.1 CONNECTED' "$TMP/net.out" && ! grep -q 'GET\|"' "$TMP/http.log"; then pass "host 127.0.0.1 service unreachable"; else fail "host 127.0.0.1 service unreachable" "port '$PORT': $(grep '^127' "$TMP/net.out")"; fi
for addr in 1.1.1.1 10.0.0.1 169.254.169.254; do
    if grep -q "^$addr " "$TMP/net.out" && ! grep -q "^$addr CONNECTED" "$TMP/net.out"; then pass "outside address $addr unreachable"; else fail "outside address $addr unreachable" "$(grep "^$addr " "$TMP/net.out" || echo no result)"; fi
done
kill "$HTTPPID" 2>/dev/null
"$SKILLD" run execute_command --key attacker --input '{"command":"true","networkEnabled":true}' >"$TMP/out.json" 2>/dev/null
if [ "$(field success)" = "false" ] && grep -qi 'network' "$TMP/out.json"; then pass "networkEnabled refused by native"; else fail "networkEnabled refused by native" "$(cat "$TMP/out.json")"; fi

# -- two keys at once -------------------------------------------------------------------
WS_A="$DATA_DIR/workspaces/$(printf %s key-a | sha256sum | cut -d' ' -f1)"
mkdir -p "$WS_A" && echo "$MARK-secret-a" > "$WS_A/secret.txt"
"$SKILLD" exec --key key-a --timeout 30000 -- sh -c 'sleep 2; cat /workspace/secret.txt' >"$TMP/a.json" 2>/dev/null &
APID=$!
sleep 0.5
x --key key-b -- sh -c "cat /proc/*/root/workspace/secret.txt /workspace/secret.txt /tmp/*/secret.txt 2>/dev/null; ls -a /workspace; ls /proc | grep -c '^[0-9]'"
wait "$APID"
if ran && ! field stdout | grep -q "secret-a" && grep -q "$MARK-secret-a" "$TMP/a.json"; then pass "two keys cannot see each other's workspaces"; else fail "two keys cannot see each other's workspaces" "$(field stdout | head -c 300)"; fi

finish
