"""Socket-level clients for tests/security/tenant_http.sh (not a test itself).

Each sub-command drives the server at 127.0.0.1:PORT the way a hostile or
an ordinary client would and prints one JSON object with what it saw; the
shell test asserts on it. RSS is read from /proc/PID/status (kB).
"""
import http.client
import json
import socket
import statistics
import sys
import threading
import time


def rss_kb(pid):
    with open('/proc/%s/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return -1


def get(port, path, secret, timeout=10):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    c.request('GET', path, headers={'Authorization': 'Bearer ' + secret})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def unauth_flood(port, pid, secret, n, size):
    """n unauthenticated POSTs declaring and sending size-byte bodies, while
    an authenticated client makes n calls. Peak RSS is sampled throughout."""
    rss0 = rss_kb(pid)
    peak = [rss0]
    seen = {'401': 0, 'closed': 0, 'other': 0}
    lock = threading.Lock()
    stop = threading.Event()
    body = b'x' * size

    def sampler():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kb(pid))
            time.sleep(0.02)

    def flood_one():
        s = socket.create_connection(('127.0.0.1', port))
        s.settimeout(30)
        got = b''
        try:
            s.sendall(b'POST /v1/execute HTTP/1.1\r\nHost: 127.0.0.1\r\n'
                      b'Content-Type: application/json\r\n'
                      b'Content-Length: %d\r\n\r\n' % size)
            s.sendall(body)
        except OSError:
            pass  # the server may close before the body is all sent
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except OSError:
            pass
        s.close()
        k = '401' if got.startswith(b'HTTP/1.1 401') else ('closed' if not got else 'other')
        with lock:
            seen[k] += 1

    good = {'ok': 0, 'bad': 0}

    def authed():
        for _ in range(n):
            try:
                st, _ = get(port, '/v1/skills', secret, timeout=30)
            except OSError:
                st = 0
            good['ok' if st == 200 else 'bad'] += 1

    threads = [threading.Thread(target=flood_one) for _ in range(n)]
    threads.append(threading.Thread(target=authed))
    smp = threading.Thread(target=sampler)
    smp.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    smp.join()
    return {'rss0_kb': rss0, 'peak_kb': peak[0], 'grow_kb': peak[0] - rss0, 'unauth': seen,
            'authed': good}


def open_idle(port, n):
    """n keep-alive connections, each left idle after one answered request."""
    conns = []
    for _ in range(n):
        conns.append(socket.create_connection(('127.0.0.1', port)))
    for s in conns:
        s.sendall(b'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    for s in conns:
        s.settimeout(10)
        d = s.recv(4096)
        if not d.startswith(b'HTTP/1.1 200'):
            raise SystemExit('healthz on an idle connection: %r' % d[:60])
    return conns


def still_open(s):
    """True while the server has not closed s (no EOF, no reset)."""
    s.setblocking(False)
    try:
        return s.recv(1) != b''
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def idle_hold(port, pid, secret, n, calls):
    rss0 = rss_kb(pid)
    conns = open_idle(port, n)
    time.sleep(0.3)
    rss_idle = rss_kb(pid)
    lat = []
    bad = 0
    for _ in range(calls):
        t = time.monotonic()
        st, _ = get(port, '/v1/skills', secret)
        lat.append((time.monotonic() - t) * 1000.0)
        bad += st != 200
    alive = sum(1 for s in conns if still_open(s))
    out = {'rss0_kb': rss0, 'rss_idle_kb': rss_idle, 'rss_after_kb': rss_kb(pid),
           'p50_ms': statistics.median(lat), 'max_ms': max(lat), 'bad': bad, 'alive': alive}
    for s in conns:
        s.close()
    return out


def cap_evict(port, secret, cap):
    """cap idle connections, then one more client: the first idle one goes.
    The connections are made idle one after the other (each request answered
    before the next connection opens), so the first is the longest idle. The
    server puts a connection on its idle list when it has finished the
    request, which may be after the client read the answer: a pause after
    each keeps a busy machine from listing two of them out of order."""
    conns = []
    for _ in range(cap):
        conns.extend(open_idle(port, 1))
        time.sleep(0.1)
    time.sleep(0.2)
    st, _ = get(port, '/v1/skills', secret)
    time.sleep(0.5)
    states = [still_open(s) for s in conns]
    for s in conns:
        s.close()
    return {'status': st, 'oldest_open': states[0], 'open': sum(states), 'newest_open': states[-1]}


def slow_headers(port, every_s, limit_s):
    """Trickle a request's headers, one byte every every_s seconds, never
    ending them; after how long did the server close the connection (None:
    still open after limit_s)?"""
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ')
    t0 = time.monotonic()
    closed_after = None
    while time.monotonic() - t0 < limit_s:
        try:
            s.sendall(b'a')
        except OSError:
            closed_after = time.monotonic() - t0
            break
        if not still_open(s):
            closed_after = time.monotonic() - t0
            break
        time.sleep(every_s)
    s.close()
    return {'closed_after_s': closed_after}


def running(mark):
    import subprocess
    return subprocess.run(['pgrep', '-f', 'sleep ' + mark], capture_output=True).returncode == 0


def hang_up(port, secret, mark, path, body, headers):
    """Send a call that runs `sleep mark`, hang up once it runs, and report
    how long the sandbox outlived the connection."""
    s = socket.create_connection(('127.0.0.1', port))
    hdr = ''.join('%s: %s\r\n' % kv for kv in headers.items())
    data = json.dumps(body).encode()
    s.sendall(('POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n'
               'Content-Type: application/json\r\n%sContent-Length: %d\r\n\r\n'
               % (path, secret, hdr, len(data))).encode() + data)
    t0 = time.monotonic()
    while not running(mark):
        if time.monotonic() - t0 > 20:
            return {'started': False}
        time.sleep(0.05)
    t = time.monotonic()
    s.close()
    while running(mark):
        if time.monotonic() - t > 15:
            return {'started': True, 'gone_after_s': None}
        time.sleep(0.02)
    return {'started': True, 'gone_after_s': time.monotonic() - t}


def hangup_rest(port, secret, mark):
    return hang_up(port, secret, mark, '/v1/execute',
                   {'skill': 'execute_command',
                    'input': {'command': 'sleep', 'args': [mark], 'timeoutMs': 60000}}, {})


def hangup_mcp(port, secret, sid, mark):
    return hang_up(port, secret, mark, '/mcp',
                   {'jsonrpc': '2.0', 'id': 'h1', 'method': 'tools/call',
                    'params': {'name': 'execute_command',
                               'arguments': {'command': 'sleep', 'args': [mark],
                                             'timeoutMs': 60000}}},
                   {'Accept': 'application/json, text/event-stream', 'Mcp-Session-Id': sid})


def slow_body(port, secret, every_s, limit_s):
    """An authenticated POST whose body trickles in; when is it closed?"""
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'POST /v1/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer '
              + secret.encode() + b'\r\nContent-Type: application/json\r\n'
              b'Content-Length: 100000\r\n\r\n')
    t0 = time.monotonic()
    closed_after = None
    while time.monotonic() - t0 < limit_s:
        try:
            s.sendall(b' ')
        except OSError:
            closed_after = time.monotonic() - t0
            break
        if not still_open(s):
            closed_after = time.monotonic() - t0
            break
        time.sleep(every_s)
    s.close()
    return {'closed_after_s': closed_after}


def sse_keepalive(port, secret, sid, wait_s):
    """Hold an idle MCP GET stream open for wait_s seconds: what came?"""
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(('GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n'
               'Accept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n'
               % (secret, sid)).encode())
    data = b''
    t0 = time.monotonic()
    s.settimeout(0.5)
    while time.monotonic() - t0 < wait_s:
        try:
            d = s.recv(4096)
        except socket.timeout:
            continue
        if not d:
            break
        data += d
    s.close()
    head, _, body = data.partition(b'\r\n\r\n')
    return {'status': head.split(b'\r\n')[0].decode(errors='replace'),
            'keepalive': b':\n\n' in body, 'body_bytes': len(body)}


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    a = sys.argv[3:]
    if cmd == 'unauth_flood':
        r = unauth_flood(port, a[0], a[1], int(a[2]), int(a[3]))
    elif cmd == 'idle_hold':
        r = idle_hold(port, a[0], a[1], int(a[2]), int(a[3]))
    elif cmd == 'cap_evict':
        r = cap_evict(port, a[0], int(a[1]))
    elif cmd == 'slow_headers':
        r = slow_headers(port, float(a[0]), float(a[1]))
    elif cmd == 'hangup_rest':
        r = hangup_rest(port, a[0], a[1])
    elif cmd == 'hangup_mcp':
        r = hangup_mcp(port, a[0], a[1], a[2])
    elif cmd == 'sse_keepalive':
        r = sse_keepalive(port, a[0], a[1], float(a[2]))
    elif cmd == 'slow_body':
        r = slow_body(port, a[0], float(a[1]), float(a[2]))
    else:
        raise SystemExit('unknown command ' + cmd)
    print(json.dumps(r))


if __name__ == '__main__':
    try:
        main()
    except (OSError, SystemExit) as e:  # report, so the test's FAIL line says why
        print(json.dumps({'error': '%s: %s' % (type(e).__name__, e)}))
