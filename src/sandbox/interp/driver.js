// skilld-interp-driver
// The JavaScript driver of an eval_code context (docs/sandbox.md,
// "Interpreter contexts"). skilld starts it inside a live sandbox as the
// sandbox user:
//   node -e <this file> <output cap in bytes>
// Its bytes come from the skilld binary, never from the sandbox's image. It
// is as untrusted as the code it runs: skilld reads its answers with a cap
// and enforces every limit from outside.
//
// Protocol: as the Python driver's (driver.py). A worker thread reads
// stdin: an interrupt becomes SIGINT to this process, which ends the
// running script (vm breakOnSigint) or the promise it is awaiting; every
// other request goes to the main thread, which runs it in this context
// (top-level declarations persist, as in a REPL). Output is what the code
// writes through process.stdout, process.stderr and console; a child
// process writing to fd 1 directly reaches skilld outside a frame, and
// skilld counts it as output of the call.
'use strict';
const vm = require('vm');
const util = require('util');
const fs = require('fs');
const { Worker } = require('worker_threads');

const CAP = Number(process.argv[1]) > 0 ? Number(process.argv[1]) : 1 << 20;
const stringify = JSON.stringify;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

function writeAll(fd, s) {
  let b = Buffer.from(s);
  while (b.length) {
    try {
      b = b.subarray(fs.writeSync(fd, b));
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(sleeper, 0, 0, 1);
    }
  }
}

function send(obj) {
  writeAll(1, '\x1e' + stringify(obj) + '\n');
}

class Capture {
  constructor() { this.parts = []; this.len = 0; this.total = 0; }
  add(chunk) {
    const s = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    this.total += s.length;
    if (this.len < CAP) {
      const k = s.slice(0, CAP - this.len);
      this.parts.push(k);
      this.len += k.length;
    }
  }
  take() {
    const s = this.parts.join(''), t = this.total > this.len;
    this.parts = []; this.len = 0; this.total = 0;
    return [s, t];
  }
}

const out = new Capture(), err = new Capture();
function hook(stream, cap) {
  stream.write = function (chunk, enc, cb) {
    cap.add(chunk);
    if (typeof enc === 'function') enc();
    else if (typeof cb === 'function') cb();
    return true;
  };
}
hook(process.stdout, out);
hook(process.stderr, err);
globalThis.require = require;

let running = false;
let abort = null;
process.on('SIGINT', () => {
  if (abort) abort(new Error('Script execution interrupted.'));
});

function clip(s) {
  return s.length <= CAP ? s : s.slice(0, CAP) + '...';
}

// The stack without the driver's and node's own frames.
function ownStack(e) {
  return String(e.stack).split('\n').filter((l) => !/^\s+at .*(\(node:|node:vm|\[eval\]|sigintHandlersWrap)/.test(l)).join('\n');
}

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e))
    return { name: String(e.name), value: clip(String(e.message)), traceback: clip(ownStack(e)) };
  return { name: 'Uncaught', value: clip(util.inspect(e)), traceback: '' };
}

async function run(job) {
  let result = null, error = null;
  running = true;
  try {
    let v = vm.runInThisContext(String(job.code ?? ''), { filename: 'cell', breakOnSigint: true });
    if (v && typeof v.then === 'function') {
      v = await new Promise((resolve, reject) => {
        abort = reject;
        v.then(resolve, reject);
      });
    }
    if (v !== undefined) {
      globalThis._ = v;
      result = clip(util.inspect(v));
    }
  } catch (e) {
    error = errorOf(e);
  }
  abort = null;
  running = false;
  const [o, t1] = out.take(), [e2, t2] = err.take();
  send({ id: job.id, stdout: o, stderr: e2, truncated: t1 || t2, result, error });
}

const reader = `
const fs = require('fs');
const { parentPort } = require('worker_threads');
const chunk = Buffer.alloc(65536);
const nap = new Int32Array(new SharedArrayBuffer(4));
let buf = Buffer.alloc(0);
for (;;) {
  let n;
  try { n = fs.readSync(0, chunk, 0, chunk.length, null); }
  catch (e) { if (e.code === 'EAGAIN') { Atomics.wait(nap, 0, 0, 2); continue; } break; }
  if (n === 0) break;
  buf = Buffer.concat([buf, chunk.subarray(0, n)]);
  let i;
  while ((i = buf.indexOf(10)) >= 0) {
    const line = buf.subarray(0, i).toString();
    buf = buf.subarray(i + 1);
    let m;
    try { m = JSON.parse(line); } catch (e) { continue; }
    if (!m || typeof m !== 'object') continue;
    if (m.op === 'interrupt') process.kill(process.pid, 'SIGINT');
    else parentPort.postMessage(m);
  }
}
parentPort.postMessage({ op: 'eof' });
`;

const queue = [];
let busy = false;
async function drain() {
  if (busy) return;
  busy = true;
  while (queue.length) await run(queue.shift());
  busy = false;
}
const w = new Worker(reader, { eval: true });
w.on('message', (m) => {
  if (m.op === 'eof') process.exit(0);
  queue.push(m);
  drain();
});
w.on('error', () => process.exit(1));
send({ ready: true });
