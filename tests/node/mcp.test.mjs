// The official MCP TypeScript SDK client driving the real skilld binary, over
// stdio (`skilld mcp`) and over Streamable HTTP (`skilld serve`, /mcp):
// initialize, paginated tools/list, file_write/file_read called directly and
// through skills_execute, progress notifications during a long sandbox run,
// cancellation that leaves no process behind, and invalid input as isError.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFileSync } from 'node:child_process';
import {
  SKILLD, check, assert, finish, tempDir, removeDir, createKey, startServer,
} from './lib.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const env = {
  SKILLD_MCP_PAGE_SIZE: '4',
  SKILLD_MCP_PROGRESS_INTERVAL_MS: '200',
  SKILLD_LOG_LEVEL: 'warn',
};

function processesMatching(marker) {
  try {
    return execFileSync('pgrep', ['-f', marker]).toString().trim().split('\n').filter(Boolean);
  } catch { return []; } // pgrep exits 1 when nothing matches
}

async function suite(label, makeClient) {
  const client = new Client({ name: 'skilld-test', version: '1.0.0' });
  await check(`${label}: initialize`, async () => {
    await client.connect(await makeClient());
    const info = client.getServerVersion();
    assert(info && info.name === 'skilld', `server name ${JSON.stringify(info)}`);
    assert(client.getServerCapabilities().tools, 'tools capability missing');
  });

  await check(`${label}: tools/list paginates over every tool`, async () => {
    const names = []; const tools = [];
    let cursor; let pages = 0;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      assert(page.tools.length <= 4, `page of ${page.tools.length} tools exceeds the page size`);
      names.push(...page.tools.map((t) => t.name));
      tools.push(...page.tools);
      cursor = page.nextCursor; pages++;
    } while (cursor && pages < 100);
    assert(pages > 1, 'expected more than one page');
    assert(new Set(names).size === names.length, `duplicate tools: ${names}`);
    for (const want of ['skills_list', 'skills_execute', 'skills_executions', 'file_read', 'file_write', 'execute_command']) {
      assert(names.includes(want), `${want} missing from ${names}`);
    }
    const fr = tools.find((t) => t.name === 'file_read');
    assert(fr && fr.inputSchema && fr.inputSchema.properties.path, 'file_read has its input schema');
  });

  await check(`${label}: file_write then file_read`, async () => {
    const w = await client.callTool({ name: 'file_write', arguments: { path: 'mcp/a.txt', content: `hello ${label}`, mkdirs: true } });
    assert(!w.isError, JSON.stringify(w));
    assert(w.structuredContent.success === true && w.structuredContent.bytes === `hello ${label}`.length, JSON.stringify(w.structuredContent));
    const r = await client.callTool({ name: 'file_read', arguments: { path: 'mcp/a.txt' } });
    assert(!r.isError && r.structuredContent.content === `hello ${label}`, JSON.stringify(r));
    assert(r.content[0].type === 'text' && r.content[0].text.includes(`hello ${label}`), 'text content carries the result');
  });

  await check(`${label}: skills_execute runs file_read`, async () => {
    const r = await client.callTool({ name: 'skills_execute', arguments: { skill: 'file_read', input: { path: 'mcp/a.txt' } } });
    assert(!r.isError && r.structuredContent.content === `hello ${label}`, JSON.stringify(r));
    const l = await client.callTool({ name: 'skills_list', arguments: {} });
    assert(!l.isError && JSON.stringify(l.structuredContent).includes('file_read'), 'skills_list names file_read');
    const h = await client.callTool({ name: 'skills_executions', arguments: {} });
    assert(!h.isError && JSON.stringify(h.structuredContent).includes('file_read'), 'history shows the call');
  });

  await check(`${label}: invalid input is isError with a clear message`, async () => {
    const r = await client.callTool({ name: 'file_read', arguments: { path: 42 } });
    assert(r.isError === true, JSON.stringify(r));
    assert(/invalid_input/.test(r.content[0].text) && /path/.test(r.content[0].text), r.content[0].text);
    const e = await client.callTool({ name: 'file_read', arguments: { path: '../../etc/passwd' } });
    assert(e.isError === true && /invalid_path/.test(e.content[0].text), JSON.stringify(e));
  });

  await check(`${label}: progress notifications during a long sandbox run`, async () => {
    const seen = [];
    const r = await client.callTool(
      { name: 'execute_command', arguments: { command: 'sh', args: ['-c', 'sleep 1.5; echo finished'] } },
      undefined,
      { onprogress: (p) => seen.push(p), timeout: 30000 },
    );
    assert(!r.isError && r.structuredContent.stdout.trim() === 'finished', JSON.stringify(r));
    assert(seen.length >= 2, `only ${seen.length} progress notifications`);
    for (let i = 1; i < seen.length; i++) assert(seen[i].progress > seen[i - 1].progress, 'progress increases');
  });

  await check(`${label}: cancellation stops the sandboxed process`, async () => {
    const marker = `skilld-cancel-${label}-${process.pid}`;
    const ac = new AbortController();
    const call = client.callTool(
      { name: 'execute_command', arguments: { command: 'python3', args: ['-c', 'import time; time.sleep(30)', marker], timeoutMs: 30000 } },
      undefined,
      { signal: ac.signal, timeout: 60000 },
    );
    let running = [];
    for (let i = 0; i < 50 && running.length === 0; i++) { await sleep(100); running = processesMatching(marker); }
    assert(running.length > 0, 'the command never started');
    ac.abort('test cancels');
    let rejected = false;
    try { await call; } catch { rejected = true; }
    assert(rejected, 'the aborted call should reject');
    let left = running;
    for (let i = 0; i < 50 && left.length; i++) { await sleep(100); left = processesMatching(marker); }
    assert(left.length === 0, `process still running after cancel: ${left}`);
    const after = await client.callTool({ name: 'file_read', arguments: { path: 'mcp/a.txt' } });
    assert(!after.isError, 'the session keeps working after a cancellation');
  });

  await client.close();
}

const dataDir = tempDir();
try {
  const stdioKey = createKey(dataDir, 'mcp-stdio', 'skills:read,skills:execute');
  await suite('stdio', async () => new StdioClientTransport({
    command: SKILLD, args: ['--data-dir', dataDir, 'mcp', '--key', stdioKey.id], env: { ...process.env, ...env }, stderr: 'ignore',
  }));

  const key = createKey(dataDir, 'mcp-http');
  const server = await startServer(dataDir, env);
  try {
    await suite('http', async () => new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${key.secret}` } },
    }));
    await check('http: wrong key is refused', async () => {
      const c = new Client({ name: 'intruder', version: '1' });
      let refused = false;
      try {
        await c.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
          requestInit: { headers: { Authorization: 'Bearer skd_0000000000000000_' + '0'.repeat(64) } },
        }));
      } catch (e) { refused = /401|Unauthorized|invalid/i.test(String(e)); }
      assert(refused, 'connect with a wrong key must fail with 401');
    });
    await check('http: workspaces follow the key', async () => {
      // stdio ran as another key; the HTTP key sees its own workspace only.
      const c = new Client({ name: 'ws', version: '1' });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${key.secret}` } },
      }));
      const r = await c.callTool({ name: 'file_read', arguments: { path: 'mcp/a.txt' } });
      assert(r.structuredContent.content === 'hello http', JSON.stringify(r.structuredContent));
      await c.close();
    });
  } finally {
    const code = await server.stop();
    await check('http: SIGTERM stops the server cleanly', async () => assert(code === 0, `exit code ${code}: ${server.log().slice(-500)}`));
  }
} finally {
  removeDir(dataDir);
  finish();
}
