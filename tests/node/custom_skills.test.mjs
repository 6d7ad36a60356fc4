// Custom skills seen by a real MCP client (@modelcontextprotocol/sdk over
// Streamable HTTP): a skill registered over REST while the client is
// connected produces notifications/tools/list_changed and shows up in
// tools/list at once, callable as a tool; removing it does the same. Also:
// A2A tasks survive a server restart.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, assert, fail, finish, tempDir, removeDir, createKey, startServer } from './lib.mjs';

const dataDir = tempDir();
let server;
let changes = 0;

async function rest(method, path, secret, body) {
  const r = await fetch(`${server.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json', 'A2A-Version': '1.0' },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).catch((e) => {
    throw new Error(`${method} ${path}: ${e.message} (${e.cause || 'no cause'}); the server's log ends: ${server.log().slice(-1500)}`);
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

async function waitFor(fn, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

const manifest = {
  name: 'reverse', version: '1.0.0', description: 'Reverse a string', tags: ['text'],
  inputSchema: { type: 'object', properties: { s: { type: 'string' } }, required: ['s'] },
  run: { command: ['/usr/bin/python3', '-c', 'import json,sys; print(json.dumps({"r": json.load(sys.stdin)["s"][::-1]}))'] },
};

try {
  const alice = createKey(dataDir, 'alice', 'skills:read,skills:execute');
  server = await startServer(dataDir);
  const mcp = new Client({ name: 'custom-skills-test', version: '1.0.0' });
  mcp.setNotificationHandler(ToolListChangedNotificationSchema, () => { changes++; });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${alice.secret}` } },
  });
  await mcp.connect(transport);

  await check('the tool is absent before registration', async () => {
    const { tools } = await mcp.listTools();
    assert(!tools.some((t) => t.name === 'reverse'), 'reverse already listed');
  });

  await check('registering over REST notifies tools/list_changed and lists the tool', async () => {
    // The GET stream that carries notifications opens in the background after
    // connect: toggle a throwaway skill until one notification arrives.
    const primer = { ...manifest, name: 'primer' };
    assert((await rest('POST', '/v1/skills', alice.secret, primer)).status === 201, 'primer');
    let on = false;
    const primed = await waitFor(async () => {
      on = !on;
      await rest('PATCH', '/v1/skills/primer', alice.secret, { enabled: on });
      return waitFor(() => changes > 0, 200);
    }, 15000);
    assert(primed, 'no notification ever arrived on the GET stream');
    const before = changes;
    const r = await rest('POST', '/v1/skills', alice.secret, manifest);
    assert(r.status === 201, `status ${r.status} ${JSON.stringify(r.json)}`);
    assert(await waitFor(() => changes > before), 'no notifications/tools/list_changed');
    const { tools } = await mcp.listTools();
    const t = tools.find((x) => x.name === 'reverse');
    assert(t && t.inputSchema.required[0] === 's', 'reverse listed with its schema');
  });

  await check('the new tool runs in the sandbox', async () => {
    const res = await mcp.callTool({ name: 'reverse', arguments: { s: 'skilld' } });
    assert(!res.isError && res.structuredContent.r === 'dlliks', JSON.stringify(res));
  });

  await check('removing it notifies again and drops it from tools/list', async () => {
    const before = changes;
    const r = await rest('DELETE', '/v1/skills/reverse', alice.secret);
    assert(r.status === 204, `status ${r.status}`);
    assert(await waitFor(() => changes > before), 'no notifications/tools/list_changed');
    const { tools } = await mcp.listTools();
    assert(!tools.some((t) => t.name === 'reverse'), 'still listed');
  });
  await mcp.close();

  let taskId;
  await check('an A2A task is kept across a restart', async () => {
    const r = await rest('POST', '/a2a', alice.secret, {
      jsonrpc: '2.0', id: 1, method: 'SendMessage',
      params: { message: { role: 'ROLE_USER', messageId: 'p1', parts: [{ data: { skill: 'file_list', input: { path: '.' } } }] } },
    });
    taskId = r.json.result.task.id;
    assert(taskId, JSON.stringify(r.json));
    await server.stop();
    server = await startServer(dataDir);
    const g = await rest('POST', '/a2a', alice.secret, { jsonrpc: '2.0', id: 2, method: 'GetTask', params: { id: taskId } });
    assert(g.json.result && g.json.result.id === taskId && g.json.result.status.state === 'TASK_STATE_COMPLETED', JSON.stringify(g.json));
  });
} catch (e) {
  fail('setup', e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e);
} finally {
  if (server) await server.stop();
  removeDir(dataDir);
  finish();
}
