// The live sandbox tools (sandbox_create, sandbox_exec, sandbox_list,
// sandbox_delete, sandbox_processes) driven by the official MCP SDK clients
// over Streamable HTTP against the real skilld binary: v1
// (@modelcontextprotocol/sdk, 2025-11-25) and v2 (@modelcontextprotocol/client,
// both eras: 2025-11-25 and the stateless 2026-07-28). Each client makes a
// sandbox, keeps a file in its /tmp across calls, gets a command's output as
// progress notifications while it runs, sees only its own sandboxes (another
// key's id is not_found), runs a background process and reads its output,
// and deletes the sandbox.
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import {
  check, assert, finish, tempDir, removeDir, createKey, startServer,
} from './lib.mjs';

const data = tempDir();
const alice = createKey(data, 'alice', 'skills:read,skills:execute');
const bob = createKey(data, 'bob', 'skills:read,skills:execute');
const srv = await startServer(data, { SKILLD_LOG_LEVEL: 'warn', SKILLD_MCP_PROGRESS_INTERVAL_MS: '200' });

const headers = (k) => ({ requestInit: { headers: { Authorization: `Bearer ${k.secret}` } } });

async function connect(sdk, era, key) {
  if (sdk === 'v1') {
    const c = new ClientV1({ name: 'live-test', version: '1.0.0' });
    await c.connect(new HttpV1(new URL(`${srv.url}/mcp`), headers(key)));
    return c;
  }
  const c = new ClientV2({ name: 'live-test', version: '1.0.0' },
    era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {});
  await c.connect(new HttpV2(new URL(`${srv.url}/mcp`), headers(key)));
  return c;
}

// callTool with options in either SDK's signature.
function call(sdk, c, name, args, options) {
  return sdk === 'v1' ? c.callTool({ name, arguments: args }, undefined, options)
    : c.callTool({ name, arguments: args }, options);
}

async function scenario(label, sdk, era) {
  const a = await connect(sdk, era, alice);
  const b = await connect(sdk, era, bob);
  let id;
  await check(`${label}: sandbox_create answers a running sandbox`, async () => {
    const r = await call(sdk, a, 'sandbox_create', { memoryLimit: 256 });
    assert(!r.isError, JSON.stringify(r));
    id = r.structuredContent.sandbox.id;
    assert(id && r.structuredContent.sandbox.state === 'running', JSON.stringify(r.structuredContent));
  });
  await check(`${label}: /tmp is kept from one sandbox_exec to the next`, async () => {
    const w = await call(sdk, a, 'sandbox_exec', { sandboxId: id, command: 'sh', args: ['-c', `echo ${label} > /tmp/f`] });
    assert(!w.isError && w.structuredContent.exitCode === 0, JSON.stringify(w));
    const r = await call(sdk, a, 'sandbox_exec', { sandboxId: id, command: 'cat', args: ['/tmp/f'] });
    assert(r.structuredContent.stdout === `${label}\n`, JSON.stringify(r.structuredContent));
  });
  await check(`${label}: the output arrives as progress notifications while the command runs`, async () => {
    const seen = [];
    let doneAt = -1;
    const r = await call(sdk, a, 'sandbox_exec',
      { sandboxId: id, command: 'sh', args: ['-c', 'echo first; sleep 1; echo second'] },
      { onprogress: (p) => seen.push(p), timeout: 30000 });
    doneAt = seen.length;
    assert(r.structuredContent.stdout === 'first\nsecond\n', JSON.stringify(r.structuredContent));
    const firstAt = seen.findIndex((p) => (p.message || '').includes('first'));
    const secondAt = seen.findIndex((p) => (p.message || '').includes('second'));
    assert(firstAt >= 0 && secondAt > firstAt && secondAt < doneAt,
      `chunks in progress: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) assert(seen[i].progress > seen[i - 1].progress, 'progress increases');
  });
  await check(`${label}: another key neither lists nor reaches the sandbox`, async () => {
    const l = await call(sdk, b, 'sandbox_list', {});
    assert(!l.isError && l.structuredContent.sandboxes.length === 0, JSON.stringify(l.structuredContent));
    for (const [name, args] of [['sandbox_exec', { sandboxId: id, command: 'true' }],
      ['sandbox_list', { sandboxId: id }], ['sandbox_processes', { sandboxId: id }],
      ['sandbox_delete', { sandboxId: id }]]) {
      const r = await call(sdk, b, name, args);
      assert(r.isError && /not_found/.test(JSON.stringify(r)), `${name}: ${JSON.stringify(r)}`);
    }
    const mine = await call(sdk, a, 'sandbox_list', {});
    assert(mine.structuredContent.sandboxes.some((s) => s.id === id), JSON.stringify(mine.structuredContent));
  });
  await check(`${label}: a background process keeps running and its output is read`, async () => {
    const s = await call(sdk, a, 'sandbox_exec',
      { sandboxId: id, command: 'sh', args: ['-c', 'echo up; exec sleep 60'], background: true });
    assert(!s.isError && s.structuredContent.processId, JSON.stringify(s));
    const pid = s.structuredContent.processId;
    let p;
    for (let i = 0; i < 100; i++) {
      p = (await call(sdk, a, 'sandbox_processes', { sandboxId: id, processId: pid })).structuredContent.process;
      if (p.stdout === 'up\n') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert(p.running && p.stdout === 'up\n', JSON.stringify(p));
    const k = await call(sdk, a, 'sandbox_processes', { sandboxId: id, processId: pid, kill: true });
    assert(!k.isError, JSON.stringify(k));
  });
  await check(`${label}: sandbox_delete ends it; an exec after is not_found`, async () => {
    const d = await call(sdk, a, 'sandbox_delete', { sandboxId: id });
    assert(!d.isError, JSON.stringify(d));
    const r = await call(sdk, a, 'sandbox_exec', { sandboxId: id, command: 'true' });
    assert(r.isError && /not_found/.test(JSON.stringify(r)), JSON.stringify(r));
  });
  await a.close();
  await b.close();
}

try {
  await scenario('sdk v1 http', 'v1', 'legacy');
  await scenario('sdk v2 http 2025-11-25', 'v2', 'legacy');
  await scenario('sdk v2 http 2026-07-28', 'v2', 'modern');
} finally {
  await srv.stop();
  removeDir(data);
  finish();
}
