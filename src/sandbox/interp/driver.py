# skilld-interp-driver
# The Python driver of an eval_code context (docs/sandbox.md, "Interpreter
# contexts"). skilld starts it inside a live sandbox as the sandbox user:
#   python3 -c <this file> <output cap in bytes>
# Its bytes come from the skilld binary, never from the sandbox's image. It
# is as untrusted as the code it runs: skilld reads its answers with a cap
# and enforces every limit from outside.
#
# Protocol: one JSON object per line on stdin; one frame per answer on the
# original stdout: the byte 0x1e, a JSON object, a newline. Anything else
# on that stdout (a child process writing to it) is the call's output.
#   in:  {"id": N, "code": "..."}          run code
#        {"op": "interrupt"}               SIGINT to this process while code runs
#   out: {"ready": true}                   once, when it can take code
#        {"id": N, "stdout", "stderr", "truncated", "result", "error"}
# Variables, imports and functions live in one namespace for the life of
# the process. fds 1 and 2 are pipes read by two threads into the running
# call's output; a marker written after the code closes each stream's part.
import ast
import builtins
import json
import os
import signal
import sys
import threading
import traceback

CAP = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
FILENAME = "<cell>"
MARK = ("\x00skd-%s\x00" % os.urandom(8).hex()).encode()

proto = os.dup(1)
lock = threading.Condition()


class Stream:
    def __init__(self):
        self.kept = bytearray()
        self.total = 0
        self.pending = b""
        self.marks = 0

    def add(self, b):
        self.total += len(b)
        room = CAP - len(self.kept)
        if room > 0:
            self.kept += b[:room]

    def take(self):
        out, trunc = bytes(self.kept), self.total > len(self.kept)
        self.kept, self.total = bytearray(), 0
        return out.decode("utf-8", "replace"), trunc


streams = {1: Stream(), 2: Stream()}


def pump(fd, s):
    keep = len(MARK) - 1
    while True:
        try:
            d = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not d:
            return
        with lock:
            s.pending += d
            while True:
                i = s.pending.find(MARK)
                if i < 0:
                    break
                s.add(s.pending[:i])
                s.pending = s.pending[i + len(MARK):]
                s.marks += 1
                lock.notify_all()
            if len(s.pending) > keep:
                s.add(s.pending[:-keep])
                s.pending = s.pending[-keep:]


for fd in (1, 2):
    r, w = os.pipe()
    os.dup2(w, fd)
    os.close(w)
    threading.Thread(target=pump, args=(r, streams[fd]), daemon=True).start()
sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)


def send(obj):
    b = b"\x1e" + json.dumps(obj).encode() + b"\n"
    while b:
        b = b[os.write(proto, b):]


state = {"running": False}


def on_sigint(signum, frame):
    if state["running"]:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)
jobs = []


def reader():
    for line in sys.stdin.buffer:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if not isinstance(m, dict):
            continue
        if m.get("op") == "interrupt":
            if state["running"]:
                os.kill(os.getpid(), signal.SIGINT)
            continue
        with lock:
            jobs.append(m)
            lock.notify_all()
    os._exit(0)


def clip(s):
    return s if len(s) <= CAP else s[:CAP] + "..."


def user_traceback(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != FILENAME:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb))


def run(code, ns):
    tree = ast.parse(code, FILENAME, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, FILENAME, "exec"), ns)
    if last is not None:
        v = eval(compile(last, FILENAME, "eval"), ns)
        if v is not None:
            ns["_"] = v
            return repr(v)
    return None


def collect():
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    with lock:
        want = {fd: s.marks + 1 for fd, s in streams.items()}
    for fd in (1, 2):
        try:
            os.write(fd, MARK)
        except OSError:
            pass
    with lock:
        lock.wait_for(lambda: all(streams[fd].marks >= want[fd] for fd in (1, 2)), timeout=2)
        out, t1 = streams[1].take()
        err, t2 = streams[2].take()
    return out, err, t1 or t2


def main():
    ns = {"__name__": "__main__", "__builtins__": builtins}
    threading.Thread(target=reader, daemon=True).start()
    send({"ready": True})
    while True:
        with lock:
            lock.wait_for(lambda: jobs)
            job = jobs.pop(0)
        result, error = None, None
        try:
            state["running"] = True
            result = run(str(job.get("code", "")), ns)
            state["running"] = False
        except BaseException as e:  # noqa: B902: the code's own failure, reported
            state["running"] = False
            error = {"name": type(e).__name__, "value": clip(str(e)),
                     "traceback": clip(user_traceback(e))}
        out, err, trunc = collect()
        send({"id": job.get("id"), "stdout": out, "stderr": err, "truncated": trunc,
              "result": clip(result) if result is not None else None, "error": error})


main()
