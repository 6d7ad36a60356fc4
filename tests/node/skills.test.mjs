// Agent Skills over MCP through the official v2 TypeScript client
// (@modelcontextprotocol/client, SkillsClient): two SKILL.md bundles
// registered with `skilld skills add DIR`, listed, got and read over stdio
// and Streamable HTTP with every file verified (size and SHA-256); key A's
// bundle invisible to key B; a file changed on disk behind the server's back
// is refused or re-registered, never served under its old digest; skill_run
// runs a bundle's script with the workspace mounted and /skill read-only;
// the same client in the 2026-07-28 era (server/discover, no initialize)
// and, forced, in the 2025 era, with tools/list and tools/call in both.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { SkillsClient, SkillVerificationError } from '@modelcontextprotocol/client/ext/skills';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  SKILLD, check, assert, finish, tempDir, removeDir, createKey, startServer,
} from './lib.mjs';

const data = tempDir('skilld-skills-');
const bundles = tempDir('skilld-bundles-');
const alice = createKey(data, 'alice', 'skills:read,skills:execute');
const bob = createKey(data, 'bob', 'skills:read,skills:execute');

function write(dir, rel, text) {
  mkdirSync(join(dir, rel, '..'), { recursive: true });
  writeFileSync(join(dir, rel), text);
}

// pdf-tools: front matter with the optional Agent Skills fields, a script,
// a reference, a binary asset. Global (the operator's): every key sees it.
const pdf = join(bundles, 'pdf-tools');
write(pdf, 'SKILL.md', [
  '---', 'name: pdf-tools', 'description: >', '  Fill and read PDF forms;', '  use it for PDFs.',
  'license: Apache-2.0', 'allowed-tools: Bash(python3:*) Read', 'metadata:', '  author: skilld',
  '  version: "1.2"', 'compatibility: needs python3', '---', '# PDF tools', '',
  'Run `scripts/hello.py` first. See [forms](references/FORMS.md).', ''].join('\n'));
write(pdf, 'scripts/hello.py', [
  'import os, sys',
  'names = sorted(os.listdir("/workspace"))',
  'print("hello from", os.path.dirname(os.path.abspath(__file__)), "args", sys.argv[1:], "workspace", names)',
  ''].join('\n'));
write(pdf, 'scripts/write_skill.py', [
  'try:', '    open("/skill/pwned.txt", "w").write("x")', '    print("wrote /skill")',
  'except OSError as e:', '    print("refused:", e.strerror)', '    raise SystemExit(3)', ''].join('\n'));
write(pdf, 'references/FORMS.md', '# Forms\n\nQ&A about form fields.\n');
writeFileSync(join(pdf, 'logo.bin'), Buffer.from([0, 1, 2, 255, 254, 0, 10]));

// notes: alice's own bundle, no entry script (a bundle only).
const notes = join(bundles, 'notes');
write(notes, 'SKILL.md', '---\nname: notes\ndescription: "Alice\'s private notes: keep them"\n---\nBody.\n');
write(notes, 'docs/a.txt', 'first note\n');

function skilld(...args) {
  return execFileSync(SKILLD, ['--data-dir', data, ...args], { encoding: 'utf8' });
}
skilld('skills', 'add', pdf);
skilld('skills', 'add', notes, '--key', alice.id);

// The bytes on disk, to compare with what the client verified.
function filesOf(dir) {
  const out = {};
  const walk = (d) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p); else out[relative(dir, p)] = readFileSync(p);
    }
  };
  walk(dir);
  return out;
}
const sha = (b) => 'sha256:' + createHash('sha256').update(b).digest('hex');

function stdioTransport(key) {
  return new StdioClientTransport({ command: SKILLD, args: ['--data-dir', data, 'mcp', '--key', key.id], stderr: 'ignore', env: { ...process.env } });
}
function httpTransport(url, key) {
  return new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key.secret}` } },
  });
}
// era 'modern': 2026-07-28 through server/discover; 'legacy': initialize only.
async function connect(transport, era) {
  const client = new Client({ name: 'skills-test', version: '1.0.0' },
    era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {});
  await client.connect(transport);
  return client;
}

async function readAll(skills, entry, expectedDir) {
  const disk = filesOf(expectedDir);
  let verified = 0;
  for (const r of entry.resources) {
    const rel = decodeURIComponent(r.uri.slice(entry.uri.length - 'SKILL.md'.length));
    const f = await skills.read(entry, rel);
    assert(f.verified, `${r.uri} not verified`);
    assert(Buffer.from(f.bytes).equals(disk[rel]), `${rel}: bytes differ from the disk`);
    assert(r.size === disk[rel].length && r.digest === sha(disk[rel]), `${rel}: size/digest`);
    verified++;
  }
  assert(verified === Object.keys(disk).length, `read ${verified} of ${Object.keys(disk).length} files`);
}

async function scenario(label, makeTransport, era) {
  const a = await connect(makeTransport(alice), era);
  const skills = new SkillsClient(a);
  await check(`${label}: negotiated revision is ${era === 'modern' ? '2026-07-28' : '2025-11-25'}`, async () => {
    const v = a.getNegotiatedProtocolVersion();
    console.log(`# ${label}: negotiated protocol version ${v}`);
    assert(v === (era === 'modern' ? '2026-07-28' : '2025-11-25'), `negotiated ${v}`);
    assert(skills.supported && skills.directoryRead, 'Skills extension not declared');
  });
  let listing;
  await check(`${label}: skills/list shows both bundles to alice, front matter verbatim`, async () => {
    listing = await skills.list();
    const names = listing.skills.map((s) => s.frontmatter.name).sort();
    assert(JSON.stringify(names) === '["notes","pdf-tools"]', `names ${names}`);
    const p = listing.skills.find((s) => s.frontmatter.name === 'pdf-tools');
    assert(p.uri === 'skill://pdf-tools/SKILL.md', p.uri);
    assert(p.frontmatter.description === 'Fill and read PDF forms; use it for PDFs.\n', JSON.stringify(p.frontmatter.description));
    assert(p.frontmatter.metadata.version === '1.2' && p.frontmatter['allowed-tools'] === 'Bash(python3:*) Read', 'optional fields');
    if (era === 'modern') assert(listing.ttlMs === 0 && listing.cacheScope === 'private', `cache fields ${listing.ttlMs} ${listing.cacheScope}`);
  });
  await check(`${label}: every file of both bundles reads and verifies (size, SHA-256)`, async () => {
    for (const s of listing.skills) await readAll(skills, s, s.frontmatter.name === 'notes' ? notes : pdf);
  });
  await check(`${label}: skills/get and resources/directory/read`, async () => {
    const g = await skills.get('skill://notes/SKILL.md');
    assert(g.skill.frontmatter.name === 'notes', 'get');
    if (era === 'modern') assert(g.ttlMs === 0 && g.cacheScope === 'private', 'get cache fields');
    const d = await skills.readDirectory('skill://pdf-tools');
    const kids = d.resources.map((r) => `${r.name}:${r.mimeType}`).sort();
    assert(kids.includes('scripts:inode/directory') && kids.includes('SKILL.md:text/markdown'), kids.join(','));
    const sub = await skills.readDirectory('skill://pdf-tools/scripts');
    assert(sub.resources.map((r) => r.name).sort().join() === 'hello.py,write_skill.py', 'scripts dir');
  });
  await check(`${label}: tools/list and tools/call`, async () => {
    const t = await a.listTools();
    assert(t.tools.some((x) => x.name === 'skill_run') && t.tools.some((x) => x.name === 'skills_list'), 'tools');
    const r = await a.callTool({ name: 'skills_list', arguments: {} });
    assert(!r.isError && r.structuredContent.success === true, JSON.stringify(r).slice(0, 200));
  });
  await check(`${label}: skill_run runs scripts/hello.py with the workspace mounted`, async () => {
    await a.callTool({ name: 'skills_execute', arguments: { skill: 'file_write', input: { path: 'seen.txt', content: 'x' } } });
    const r = await a.callTool({ name: 'skill_run', arguments: { skill: 'pdf-tools', script: 'scripts/hello.py', args: ['one', 'two'] } });
    const out = r.structuredContent;
    assert(!r.isError && out.success === true, JSON.stringify(r).slice(0, 300));
    assert(out.stdout.includes("hello from /skill/scripts args ['one', 'two']") && out.stdout.includes("'seen.txt'"), out.stdout);
  });
  await check(`${label}: a script that writes /skill fails`, async () => {
    const r = await a.callTool({ name: 'skill_run', arguments: { skill: 'pdf-tools', script: 'scripts/write_skill.py' } });
    assert(r.isError, 'writing /skill succeeded');
    assert(JSON.stringify(r).includes('Read-only file system'), JSON.stringify(r).slice(0, 300));
  });
  await a.close();

  const b = await connect(makeTransport(bob), era);
  const bskills = new SkillsClient(b);
  await check(`${label}: alice's bundle is invisible to bob`, async () => {
    const l = await bskills.list();
    const names = l.skills.map((s) => s.frontmatter.name);
    assert(JSON.stringify(names) === '["pdf-tools"]', `bob sees ${names}`);
    let refused = false;
    try { await bskills.get('skill://notes/SKILL.md'); } catch { refused = true; }
    assert(refused, 'skills/get of alice\'s bundle answered for bob');
    let readRefused = false;
    try { await b.readResource({ uri: 'skill://notes/docs/a.txt' }); } catch { readRefused = true; }
    assert(readRefused, 'bob read alice\'s file');
    const r = await b.callTool({ name: 'skill_run', arguments: { skill: 'notes', script: 'docs/a.txt' } });
    assert(r.isError || r.structuredContent?.success === false, 'bob ran a script of alice\'s bundle');
  });
  await b.close();
}

// A ustar archive of entries {name, body?, link?} (type '0' file, '2'
// symlink, '5' directory when the name ends with '/'), built here so a
// hostile name can be sent as is.
function tarOf(entries) {
  const blocks = [];
  for (const e of entries) {
    const body = Buffer.from(e.body || '');
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100);
    h.write(e.name.endsWith('/') ? '0000755\0' : '0000644\0', 100);
    h.write('0000000\0', 108); h.write('0000000\0', 116);
    h.write((e.link || e.name.endsWith('/') ? 0 : body.length).toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write(e.link ? '2' : e.name.endsWith('/') ? '5' : '0', 156);
    if (e.link) h.write(e.link, 157, 100);
    h.write('ustar\0', 257); h.write('00', 263);
    h.fill(' ', 148, 156);
    let sum = 0; for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h);
    if (!e.link && !e.name.endsWith('/')) {
      blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
    }
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

async function imports(url) {
  const post = (key, tar, q = '') => fetch(`${url}/v1/skills${q}`, {
    method: 'POST', headers: { 'Content-Type': 'application/x-tar', Authorization: `Bearer ${key.secret}` }, body: tar,
  });
  const good = tarOf([
    { name: 'csv-tools/' }, { name: 'csv-tools/SKILL.md', body: '---\nname: csv-tools\ndescription: Sum CSV columns\n---\nUse scripts/sum.py.\n' },
    { name: 'csv-tools/scripts/' }, { name: 'csv-tools/scripts/sum.py', body: 'print(sum(int(x) for x in "1,2,3".split(",")))\n' },
  ]);
  await check('POST /v1/skills application/x-tar imports a bundle for the key', async () => {
    const r = await post(alice, good);
    const j = await r.json();
    assert(r.status === 201 && j.bundle === 'csv-tools' && j.skill === null, `${r.status} ${JSON.stringify(j)}`);
    const again = await post(alice, good);
    assert(again.status === 409, `a second import without replace: ${again.status}`);
    assert((await post(alice, good, '?replace=true')).status === 201, 'replace');
  });
  await check('the imported bundle verifies for alice, is invisible to bob, and its script runs', async () => {
    const a = await connect(httpTransport(url, alice), 'modern');
    const entry = (await new SkillsClient(a).list()).skills.find((s) => s.frontmatter.name === 'csv-tools');
    assert(entry && entry.resources.length === 2, 'csv-tools not listed for alice');
    for (const r of ['SKILL.md', 'scripts/sum.py']) assert((await new SkillsClient(a).read(entry, r)).verified, r);
    const run = await a.callTool({ name: 'skill_run', arguments: { skill: 'csv-tools', script: 'scripts/sum.py' } });
    assert(!run.isError && run.structuredContent.stdout.trim() === '6', JSON.stringify(run).slice(0, 300));
    await a.close();
    const b = await connect(httpTransport(url, bob), 'modern');
    assert(!(await new SkillsClient(b).list()).skills.some((s) => s.frontmatter.name === 'csv-tools'), 'bob sees it');
    await b.close();
  });
  await check('DELETE /v1/skills/csv-tools removes the imported bundle and its folder (bob cannot)', async () => {
    const del = (k) => fetch(`${url}/v1/skills/csv-tools`, { method: 'DELETE', headers: { Authorization: `Bearer ${k.secret}` } });
    assert((await del(bob)).status === 404, 'bob deleted alice\'s bundle');
    const folders = () => readdirSync(join(data, 'bundles')).flatMap((t) => readdirSync(join(data, 'bundles', t)));
    assert(folders().includes('csv-tools'), 'no imported folder');
    assert((await del(alice)).status === 204, 'alice could not delete');
    assert(!folders().includes('csv-tools'), 'the folder stayed');
    const a = await connect(httpTransport(url, alice), 'modern');
    assert(!(await new SkillsClient(a).list()).skills.some((s) => s.frontmatter.name === 'csv-tools'), 'still listed');
    await a.close();
  });
  await check('a tar entry that climbs out (../) is refused and writes nothing outside', async () => {
    const r = await post(alice, tarOf([{ name: 'SKILL.md', body: '---\nname: evil\ndescription: d\n---\n' }, { name: '../../escaped.txt', body: 'x' }]));
    const j = await r.json();
    assert(r.status === 400 && j.error, `${r.status} ${JSON.stringify(j)}`);
    assert(!readdirSync(join(data, 'bundles')).some((n) => n === 'escaped.txt') && !readdirSync(data).includes('escaped.txt'), 'escaped.txt written');
  });
  await check('a bundle whose symlink points out of it is refused', async () => {
    const r = await post(alice, tarOf([{ name: 'SKILL.md', body: '---\nname: leaky\ndescription: d\n---\n' }, { name: 'passwd', link: '/etc/passwd' }]));
    const j = await r.json();
    assert(r.status >= 400 && r.status < 500 && /outside|link/.test(j.error.message), `${r.status} ${JSON.stringify(j)}`);
    const a = await connect(httpTransport(url, alice), 'legacy');
    assert(!(await new SkillsClient(a).list()).skills.some((s) => s.frontmatter.name === 'leaky'), 'leaky is served');
    await a.close();
  });
  await check('skills_register {bundleTar} registers a bundle for bob only', async () => {
    const b = await connect(httpTransport(url, bob), 'legacy');
    const tar = tarOf([{ name: 'SKILL.md', body: '---\nname: bob-notes\ndescription: Bob\'s\n---\n' }]);
    const r = await b.callTool({ name: 'skills_register', arguments: { bundleTar: tar.toString('base64') } });
    assert(!r.isError && r.structuredContent.bundle === 'bob-notes', JSON.stringify(r).slice(0, 300));
    assert((await new SkillsClient(b).list()).skills.some((s) => s.frontmatter.name === 'bob-notes'), 'bob does not see it');
    await b.close();
    const a = await connect(stdioTransport(alice), 'modern');
    assert(!(await new SkillsClient(a).list()).skills.some((s) => s.frontmatter.name === 'bob-notes'), 'alice sees bob\'s');
    await a.close();
  });
}

async function changedOnDisk(label, makeTransport, era) {
  const a = await connect(makeTransport(alice), era);
  const skills = new SkillsClient(a);
  const notesOf = async () => (await skills.list()).skills.find((s) => s.frontmatter.name === 'notes');
  await check(`${label}: a file changed on disk is refused until re-registered, never a verification error`, async () => {
    const before = await notesOf();
    assert(before, 'notes not listed');
    const text = `changed ${label} ${Date.now()}\n`;
    writeFileSync(join(notes, 'docs/a.txt'), text);
    let err;
    try { await skills.read(before, 'docs/a.txt'); } catch (e) { err = e; }
    assert(err, 'the changed file was served under its old digest');
    assert(!(err instanceof SkillVerificationError), `client verification error: ${err.message}`);
    assert(/changed on disk/.test(err.message), err.message);
    let other;
    try { await skills.read(before, 'SKILL.md'); } catch (e) { other = e; }
    assert(!other, `an unchanged file of the bundle is still served: ${other && other.message}`);
    assert(!(await notesOf()), 'a changed bundle is still listed with its old digests');
    skilld('skills', 'add', notes, '--key', alice.id);
    const after = await notesOf();
    const f = await skills.read(after, 'docs/a.txt');
    assert(f.verified && Buffer.from(f.bytes).toString() === text, 'new content after re-registration');
  });
  await check(`${label}: a touch that keeps the bytes keeps the bundle served`, async () => {
    const t = new Date(Date.now() + 5000);
    utimesSync(join(notes, 'docs/a.txt'), t, t);
    const entry = await notesOf();
    assert(entry && (await skills.read(entry, 'docs/a.txt')).verified, 'withdrawn after a touch');
  });
  await a.close();
}

const srv = await startServer(data);
// A second server on the same DATA_DIR with the test-only debug_sleep skill.
const srv2 = await startServer(data, { SKILLD_TEST_SKILLS: 'true' });
try {
  for (const era of ['modern', 'legacy']) {
    await scenario(`stdio ${era}`, (k) => stdioTransport(k), era);
    await scenario(`http ${era}`, (k) => httpTransport(srv.url, k), era);
    await changedOnDisk(`stdio ${era}`, (k) => stdioTransport(k), era);
    await changedOnDisk(`http ${era}`, (k) => httpTransport(srv.url, k), era);
  }
  await imports(srv.url);
  await check('an admin-published bundle of alice is visible to bob; unpublished it is gone again', async () => {
    skilld('skills', 'publish', 'notes', '--key', alice.id);
    const b = await connect(httpTransport(srv.url, bob), 'modern');
    const entry = (await new SkillsClient(b).list()).skills.find((s) => s.frontmatter.name === 'notes');
    assert(entry && (await new SkillsClient(b).read(entry, 'docs/a.txt')).verified, 'bob cannot read the published bundle');
    skilld('skills', 'unpublish', 'notes', '--key', alice.id);
    assert(!(await new SkillsClient(b).list()).skills.some((s) => s.frontmatter.name === 'notes'), 'still visible');
    await b.close();
  });
  await check('PATCH /v1/skills/notes {public}: refused to alice (not an admin), done by an admin', async () => {
    const admin = createKey(data, 'admin', 'skills:read,skills:execute,skills:admin');
    const patch = (k, body) => fetch(`${srv.url}/v1/skills/notes`, {
      method: 'PATCH', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${k.secret}` }, body: JSON.stringify(body),
    });
    assert((await patch(alice, { public: true, owner: alice.id })).status === 403, 'alice published');
    assert((await patch(admin, { public: true, owner: alice.id })).status === 200, 'admin could not publish');
    const b = await connect(httpTransport(srv.url, bob), 'legacy');
    assert((await new SkillsClient(b).list()).skills.some((s) => s.frontmatter.name === 'notes'), 'not visible to bob');
    assert((await patch(admin, { public: false, owner: alice.id })).status === 200, 'admin could not unpublish');
    assert(!(await new SkillsClient(b).list()).skills.some((s) => s.frontmatter.name === 'notes'), 'still visible to bob');
    await b.close();
  });
  await check('skills/list pages (SKILLD_MCP_PAGE_SIZE=1): SkillsClient walks every page, a cursor gives one', async () => {
    const t = new StdioClientTransport({ command: SKILLD, args: ['--data-dir', data, 'mcp', '--key', alice.id], stderr: 'ignore',
      env: { ...process.env, SKILLD_MCP_PAGE_SIZE: '1' } });
    const a = await connect(t, 'modern');
    const sk = new SkillsClient(a);
    const all = await sk.list();
    assert(all.skills.length >= 2 && all.nextCursor === undefined, `walked ${all.skills.length}`);
    const one = await sk.list({ cursor: '0' });
    assert(one.skills.length === 1 && one.nextCursor === '1', JSON.stringify(one).slice(0, 200));
    let bad;
    try { await sk.list({ cursor: 'x' }); } catch (e) { bad = e; }
    assert(bad && /cursor/.test(bad.message), 'an invalid cursor was accepted');
    await a.close();
  });
  await check('http 2026-07-28: a request without Mcp-Method is refused with -32020', async () => {
    const r = await fetch(`${srv.url}/mcp`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${alice.secret}`, 'MCP-Protocol-Version': '2026-07-28' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    });
    const j = await r.json();
    assert(r.status === 400 && j.error.code === -32020, `${r.status} ${JSON.stringify(j)}`);
  });
  await check('http: an unknown modern revision gets -32022 with the supported list', async () => {
    const r = await fetch(`${srv.url}/mcp`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', Authorization: `Bearer ${alice.secret}`, 'MCP-Protocol-Version': '2027-01-01', 'Mcp-Method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2027-01-01', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
    });
    const j = await r.json();
    assert(r.status === 400 && j.error.code === -32022 && j.error.data.supported[0] === '2026-07-28', `${r.status} ${JSON.stringify(j)}`);
  });
  await check('http 2026-07-28: a client that hangs up cancels its call (no session to cancel it through)', async () => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const post = (body, signal) => fetch(`${srv2.url}/mcp`, {
      method: 'POST', signal,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', Authorization: `Bearer ${alice.secret}`,
        'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': body.params.name },
      body: JSON.stringify(body),
    });
    const ac = new AbortController();
    const t0 = Date.now();
    const pending = post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'debug_sleep', arguments: { ms: 30000 }, _meta: meta } }, ac.signal);
    await new Promise((r) => setTimeout(r, 500));
    ac.abort();
    await pending.catch(() => {});
    let row;
    for (let i = 0; i < 100 && !row; i++) {
      const r = await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'skills_executions', arguments: {}, _meta: meta } })).json();
      row = r.result.structuredContent.executions.find((e) => e.skill === 'debug_sleep');
      if (!row) await new Promise((res) => setTimeout(res, 100));
    }
    assert(row && row.status !== 'success' && row.durationMs < 15000 && Date.now() - t0 < 20000, JSON.stringify(row));
  });
} finally {
  await srv.stop();
  await srv2.stop();
  removeDir(data);
  removeDir(bundles);
  finish();
}
