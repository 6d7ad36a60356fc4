// Shared helpers for Node integration tests: PASS/FAIL lines in the format
// scripts/test.sh counts, a free port, and starting the real skilld binary.
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, basename } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const SKILLD = process.env.SKILLD || join(here, '..', '..', 'build', 'skilld');
// The same binary with the test fixtures (tests/fixtures/): what a server
// with SKILLD_TEST_SKILLS or SKILLD_MCP_TEST_FIXTURES runs.
export const SKILLD_TEST = process.env.SKILLD_TEST_BIN || `${SKILLD}-test`;
const testName = basename(process.argv[1] || 'node-test');
let failures = 0;

export function pass(name) { console.log(`PASS ${testName}: ${name}`); }
export function fail(name, why) {
  failures++;
  console.log(`FAIL ${testName}: ${name}: ${String(why).replace(/\n/g, ' ')}`);
}
// check(name, fn): run an async assertion; any throw is a failure.
export async function check(name, fn) {
  try { await fn(); pass(name); } catch (e) { fail(name, e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e); }
}
export function assert(cond, msg) { if (!cond) throw new Error(msg || 'assertion failed'); }
export function finish() { process.exitCode = failures ? 1 : 0; }

// Reachable by SKILLD_USER, whom a root-started skilld drops to.
export function tempDir(prefix = 'skilld-node-') {
  const d = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(d, 0o755);
  return d;
}
export function removeDir(d) { rmSync(d, { recursive: true, force: true }); }

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on('error', reject);
  });
}

// Create an API key in dataDir and return {id, secret}.
export function createKey(dataDir, name, scopes = 'skills:read,skills:execute,skills:admin') {
  const out = execFileSync(SKILLD, ['--data-dir', dataDir, 'keys', 'create', name, '--scopes', scopes, '--json']);
  return JSON.parse(out.toString());
}

// Start `skilld serve` on a free port; resolves when /healthz answers.
// opts.port: listen there (a test that must name its URL in the env first).
export async function startServer(dataDir, extraEnv = {}, opts = {}) {
  const port = opts.port || await freePort();
  const fixtures = extraEnv.SKILLD_TEST_SKILLS === 'true' || extraEnv.SKILLD_MCP_TEST_FIXTURES === 'true';
  const child = spawn(fixtures ? SKILLD_TEST : SKILLD, ['--data-dir', dataDir, 'serve', '--listen', `127.0.0.1:${port}`], {
    env: { ...process.env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  const url = `http://127.0.0.1:${port}`;
  // A deadline, not a count: a sanitizer build on a loaded machine may take
  // seconds to start; a server that never answers is an error, not a pass.
  const deadline = Date.now() + 60000;
  for (;;) {
    try { const r = await fetch(`${url}/healthz`); if (r.ok) break; } catch { /* not yet */ }
    if (child.exitCode !== null) throw new Error(`skilld serve exited: ${log}`);
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`skilld serve did not answer /healthz within 60 s: ${log}`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url, port, child, log: () => log,
    stop: () => new Promise((resolve) => {
      if (child.exitCode !== null) return resolve(child.exitCode);
      child.on('exit', (code) => resolve(code));
      child.kill('SIGTERM');
    }),
  };
}
