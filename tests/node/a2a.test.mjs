// A2A against the real server, driven by the official @a2a-js/sdk client
// (A2A protocol 1.0 over JSON-RPC): fetch the agent card, send a message
// that runs file_write, get and list tasks, stream a long execute_command
// and receive its updates, cancel one and see its process gone, and refuse
// unauthenticated and wrong-key calls.
import { readdirSync, readFileSync } from 'node:fs';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { SendMessageRequest } from '@a2a-js/sdk';
import { pass, fail, check, assert, finish, tempDir, removeDir, createKey, startServer } from './lib.mjs';

const STATE = { SUBMITTED: 1, WORKING: 2, COMPLETED: 3, FAILED: 4, CANCELED: 5 };
const dataDir = tempDir();
let server;

function authFetch(secret) {
  return (url, init = {}) => {
    const headers = new Headers(init.headers || {});
    if (secret) headers.set('Authorization', `Bearer ${secret}`);
    return fetch(url, { ...init, headers });
  };
}

async function clientFor(secret) {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch(secret) })],
    preferredTransports: ['JSONRPC'],
  }));
  return factory.createFromUrl(server.url);
}

let seq = 0;
function skillMessage(skill, input) {
  return SendMessageRequest.fromJSON({
    message: { messageId: `m-${Date.now()}-${seq++}`, role: 'ROLE_USER', parts: [{ data: { skill, input } }] },
  });
}

function dataPart(task) {
  const parts = task.artifacts?.[0]?.parts || [];
  const p = parts.find((x) => x.content?.$case === 'data');
  return p && p.content.value;
}

// Host processes whose command line contains marker (sandboxed processes are
// visible in the host's /proc).
function processesWith(marker) {
  const found = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmd.includes(marker) && !cmd.includes('node')) found.push(pid);
    } catch { /* gone */ }
  }
  return found;
}

async function waitFor(fn, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

try {
  const alice = createKey(dataDir, 'alice', 'skills:read,skills:execute');
  const bob = createKey(dataDir, 'bob', 'skills:read,skills:execute');
  server = await startServer(dataDir);
  let client;

  await check('agent card is served and parsed by the SDK', async () => {
    client = await clientFor(alice.secret);
    const card = await client.getAgentCard();
    assert(card.name === 'skilld', `name ${card.name}`);
    assert(card.capabilities?.streaming === true, 'streaming capability');
    assert(card.supportedInterfaces.some((i) => i.protocolVersion === '1.0' && i.url === `${server.url}/a2a`), 'JSON-RPC 1.0 interface');
    assert(card.skills.some((s) => s.id === 'file_write'), 'file_write listed as an AgentSkill');
    assert(card.securitySchemes.bearer, 'bearer security scheme');
  });

  let writeTask;
  await check('SendMessage runs file_write and completes with the result artifact', async () => {
    writeTask = await client.sendMessage(skillMessage('file_write', { path: 'a2a-note.txt', content: 'hello from a2a' }));
    assert(writeTask.id, 'a task came back');
    assert(writeTask.status.state === STATE.COMPLETED, `state ${writeTask.status.state}`);
    const data = dataPart(writeTask);
    assert(data && data.success === true, `result ${JSON.stringify(data)}`);
  });

  await check('the file written over A2A is readable by the same key', async () => {
    const t = await client.sendMessage(skillMessage('file_read', { path: 'a2a-note.txt' }));
    const data = dataPart(t);
    assert(data && data.success && JSON.stringify(data).includes('hello from a2a'), JSON.stringify(data));
  });

  await check('GetTask returns the task', async () => {
    const t = await client.getTask({ id: writeTask.id });
    assert(t.id === writeTask.id && t.status.state === STATE.COMPLETED, JSON.stringify(t.status));
    assert(dataPart(t).success === true, 'artifact kept');
  });

  await check('ListTasks lists the key\'s tasks', async () => {
    const r = await client.listTasks({ pageSize: 50 });
    assert(r.totalSize >= 2, `totalSize ${r.totalSize}`);
    assert(r.tasks.some((t) => t.id === writeTask.id), 'the file_write task is listed');
  });

  await check('another key cannot get the task', async () => {
    const bobClient = await clientFor(bob.secret);
    let threw = false;
    try { await bobClient.getTask({ id: writeTask.id }); } catch (e) { threw = /not found/i.test(String(e.message)) || e.name === 'TaskNotFoundError'; }
    assert(threw, 'TaskNotFoundError expected');
    const r = await bobClient.listTasks({});
    assert(!r.tasks.some((t) => t.id === writeTask.id), 'bob lists no alice task');
  });

  await check('SendStreamingMessage streams a long execute_command', async () => {
    const events = [];
    const stream = client.sendMessageStream(skillMessage('execute_command', {
      command: 'sh', args: ['-c', 'for i in 1 2 3; do echo tick $i; sleep 1; done'], timeoutMs: 30000,
    }));
    for await (const ev of stream) events.push(ev.payload);
    assert(events[0].$case === 'task', `first event ${events[0].$case}`);
    const working = events.filter((e) => e.$case === 'statusUpdate' && e.value.status.state === STATE.WORKING);
    assert(working.length >= 2, `working updates: ${working.length}`); // start + progress while it runs
    const art = events.find((e) => e.$case === 'artifactUpdate');
    const data = art.value.artifact.parts.find((p) => p.content.$case === 'data').content.value;
    assert(data.success === true && data.stdout.includes('tick 3'), JSON.stringify(data));
    const last = events[events.length - 1];
    assert(last.$case === 'statusUpdate' && last.value.status.state === STATE.COMPLETED, 'ends completed');
  });

  await check('CancelTask stops a running execute_command and its process is gone', async () => {
    const marker = '47.31337';
    const stream = client.sendMessageStream(skillMessage('execute_command', {
      command: 'sleep', args: [marker], timeoutMs: 60000,
    }));
    const it = stream[Symbol.asyncIterator]();
    const first = (await it.next()).value.payload;
    assert(first.$case === 'task', 'stream starts with the task');
    const taskId = first.value.id;
    assert(await waitFor(() => processesWith(marker).length > 0), 'the sandboxed sleep never started');
    const canceled = await client.cancelTask({ id: taskId });
    assert(canceled.status.state === STATE.CANCELED, `state after cancel ${canceled.status.state}`);
    assert(await waitFor(() => processesWith(marker).length === 0), `process still there: ${processesWith(marker)}`);
    let last;
    for (let r = await it.next(); !r.done; r = await it.next()) last = r.value.payload;
    assert(last && last.$case === 'statusUpdate' && last.value.status.state === STATE.CANCELED, 'stream ends canceled');
    const t = await client.getTask({ id: taskId });
    assert(t.status.state === STATE.CANCELED, 'GetTask says canceled');
    let threw = false;
    try { await client.cancelTask({ id: taskId }); } catch (e) { threw = e.name === 'TaskNotCancelableError' || /ended|cancel/i.test(e.message); }
    assert(threw, 'a second cancel is TaskNotCancelable');
  });

  await check('a text-only message is refused with the list of skills', async () => {
    let msg = '';
    try {
      await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: 'txt', role: 'ROLE_USER', parts: [{ text: 'hello' }] } }));
    } catch (e) { msg = e.message; }
    assert(msg.includes('file_write') && msg.includes('execute_command'), msg);
  });

  await check('a 0.3 client (SDK compat layer, /.well-known/agent.json) sends, gets and streams', async () => {
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch(alice.secret), legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true }, path: '.well-known/agent.json' }),
    }));
    const legacy = await factory.createFromUrl(server.url);
    assert(legacy.protocolVersion === '0.3', `protocol ${legacy.protocolVersion}`);
    const t = await legacy.sendMessage(skillMessage('file_write', { path: 'legacy.txt', content: '0.3' }));
    assert(t.status.state === STATE.COMPLETED && dataPart(t).success === true, JSON.stringify(t.status));
    assert((await legacy.getTask({ id: t.id })).status.state === STATE.COMPLETED, 'tasks/get');
    const kinds = [];
    for await (const ev of legacy.sendMessageStream(skillMessage('file_list', { path: '.' }))) kinds.push(ev.payload.$case);
    assert(kinds[0] === 'task' && kinds.includes('artifactUpdate') && kinds[kinds.length - 1] === 'statusUpdate', kinds.join(','));
  });

  await check('unauthenticated calls are refused', async () => {
    const anon = await clientFor(null); // the card itself is public
    let err = '';
    try { await anon.sendMessage(skillMessage('file_list', { path: '.' })); } catch (e) { err = String(e.message); }
    assert(/401/.test(err), `expected a 401, got: ${err}`);
  });

  await check('a wrong key is refused', async () => {
    const wrong = await clientFor(`${alice.secret.slice(0, -4)}0000`);
    let err = '';
    try { await wrong.getTask({ id: writeTask.id }); } catch (e) { err = String(e.message); }
    assert(/401/.test(err), `expected a 401, got: ${err}`);
  });
} catch (e) {
  fail('setup', e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e);
} finally {
  if (server) await server.stop();
  removeDir(dataDir);
  finish();
}
