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
import select
import signal
import sys
import threading
import traceback

CAP = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
FILENAME = "<cell>"
MARK = ("\x00skd-%s\x00" % os.urandom(8).hex()).encode()

# The protocol keeps the original stdin and stdout on descriptors of its
# own (not inherited by child processes); fd 0 becomes /dev/null, so that
# neither the code (input()) nor a child it starts reads the requests.
proto = os.dup(1)
requests = os.fdopen(os.dup(0), "rb")
null_fd = os.open(os.devnull, os.O_RDONLY)
os.dup2(null_fd, 0)
os.close(null_fd)
sys.stdin = open(0, "r", closefd=False)
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


def pump(fds):
    # One thread for both streams (each thread counts against pidsLimit).
    keep = len(MARK) - 1
    while fds:
        ready, _, _ = select.select(list(fds), [], [])
        for fd in ready:
            try:
                d = os.read(fd, 65536)
            except InterruptedError:
                continue
            if not d:
                del fds[fd]
                continue
            s = fds[fd]
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


# Set-up failures (a thread the pids limit refuses) go to the original
# stderr, which skilld reports.
startup_err = os.dup(2)
try:
    pipes = {}
    for fd in (1, 2):
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        pipes[r] = streams[fd]
    threading.Thread(target=pump, args=(pipes,), daemon=True).start()
except BaseException as e:
    os.write(startup_err, ("driver start-up: %s: %s\n" % (type(e).__name__, e)).encode())
    os._exit(1)
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
    for line in requests:
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
    # Without the driver's own frames (its file is "<string>": python -c).
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != "<string>"]
    text = traceback.format_list(frames)
    return "".join(["Traceback (most recent call last):\n"] + text if text else []) + \
        "".join(traceback.format_exception_only(type(e), e))


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
    try:
        threading.Thread(target=reader, daemon=True).start()
    except BaseException as e:
        os.write(startup_err, ("driver start-up: %s: %s\n" % (type(e).__name__, e)).encode())
        os._exit(1)
    os.close(startup_err)
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
