// The operator console at /ui in a real browser: Debian's chromium driven by
// playwright-core. Signs in with an admin key, runs calls through the API
// and finds them on the executions page with working filters, kills a
// running sandbox from the console and checks its process is gone, creates
// and revokes a key, checks the usage chart's numbers against /v1/usage,
// and checks that a cross-origin POST is refused. Screenshots of every page
// go to build/ui-screenshots/ (docs/console.md shows them).
import { chromium } from 'playwright-core';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  assert, check, createKey, fail, finish, freePort, pass, removeDir, startServer, tempDir,
} from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const SHOTS = join(here, '..', '..', 'build', 'ui-screenshots');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
mkdirSync(SHOTS, { recursive: true });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// Processes whose command line holds token (the sandbox's sleep).
function procsWith(token) {
  let n = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cmdline`).toString().split('\0').join(' ').includes(token)) n++;
    } catch { /* gone */ }
  }
  return n;
}

const dir = tempDir();
const admin = createKey(dir, 'admin');
const tenant = createKey(dir, 'tenant', 'skills:read,skills:execute');
const srv = await startServer(dir, { SKILLS_SANDBOX_TIMEOUT_MS: '60000' });
const api = async (secret, method, path, body) => {
  const r = await fetch(srv.url + path, {
    method, headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
};
const exec = (secret, skill, input) => api(secret, 'POST', '/v1/execute', { skill, input });

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
const ctx = await browser.newContext({ viewport: { width: 1200, height: 800 } });
const page = await ctx.newPage();
const shot = (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
const consoleErrors = [];
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });

try {
  await check('the console is served with a strict Content-Security-Policy', async () => {
    const r = await page.goto(`${srv.url}/ui`);
    assert(r.status() === 200, `status ${r.status()}`);
    const csp = r.headers()['content-security-policy'] || '';
    assert(csp.includes("default-src 'self'") && csp.includes("frame-ancestors 'none'") &&
           !csp.includes('unsafe-inline'), csp);
    const html = await r.text();
    assert(!/<script>|<script [^>]*>[^<]/.test(html) && !/ on[a-z]+=/.test(html), 'inline script in the page');
    assert(!/https?:\/\//.test(html.replace(/http:\/\/www\.w3\.org/g, '')), 'the page loads something from elsewhere');
    await page.waitForSelector('#page-signin:not([hidden])');
    await shot('signin');
  });

  await check('a key without skills:admin cannot sign in', async () => {
    await page.fill('#signin-key', tenant.secret);
    await page.press('#signin-key', 'Enter');
    await until('the refusal', async () => (await page.textContent('#signin-error')).includes('forbidden'));
    assert((await ctx.cookies()).every((c) => c.name !== 'skd_session'), 'a cookie was set');
  });

  await check('signing in with the admin key gives an HttpOnly, SameSite=Strict session cookie', async () => {
    await page.fill('#signin-key', admin.secret);
    await page.click('#signin-form button');
    await page.waitForSelector('#nav:not([hidden])');
    const c = (await ctx.cookies()).find((x) => x.name === 'skd_session');
    assert(c && c.httpOnly && c.sameSite === 'Strict' && c.expires > Date.now() / 1000, JSON.stringify(c));
    assert(!(await page.evaluate(() => document.cookie)).includes('skd_session'), 'script can read the cookie');
    assert((await page.inputValue('#signin-key')) === '', 'the key stays in the form');
  });

  // Calls through the API, by two keys.
  const w = await exec(tenant.secret, 'file_write', { path: 'note.txt', content: 'hello' });
  const r = await exec(tenant.secret, 'file_read', { path: 'missing.txt' });
  const e = await exec(admin.secret, 'execute_command', { command: 'echo', args: ['hi'] });
  const loop = await exec(tenant.secret, 'execute_command', {
    command: 'python3', args: ['-c', 'import time\nwhile time.process_time() < 0.4: pass'],
  });

  await check('calls made through the API appear on the executions page', async () => {
    assert(w.status === 200 && r.status === 404 && e.status === 200 && loop.status === 200,
      `${w.status} ${r.status} ${e.status} ${loop.status}`);
    await page.goto(`${srv.url}/ui#executions`);
    for (const id of [w.body.executionId, r.body.executionId, e.body.executionId, loop.body.executionId])
      await page.waitForSelector(`#exec-table tr[data-id="${id}"]`);
    await shot('executions');
  });

  const ids = async () => page.$$eval('#exec-table tbody tr', (rows) => rows.map((x) => x.dataset.id));
  // Set the filters, submit, and wait for the table of that answer (the
  // app marks the table with the query it shows).
  const filter = async (f) => {
    await page.selectOption('#f-key', f.key || '*');
    await page.fill('#f-skill', f.skill || '');
    await page.selectOption('#f-status', f.status || '');
    await page.fill('#f-since', f.since || '');
    const before = await page.getAttribute('#exec-table', 'data-shown');
    await page.click('#exec-filters button');
    await until('the filtered table', async () => (await page.getAttribute('#exec-table', 'data-shown')) !== before);
  };
  await check('the key filter shows one key\'s calls', async () => {
    await filter({ key: tenant.id });
    const got = await ids();
    assert(got.length === 3 && !got.includes(e.body.executionId), got.join(','));
  });
  await check('the skill filter shows one skill\'s calls', async () => {
    await filter({ skill: 'file_read' });
    assert(JSON.stringify(await ids()) === JSON.stringify([r.body.executionId]), (await ids()).join(','));
  });
  await check('the status filter shows the failed calls', async () => {
    await filter({ status: 'error' });
    assert(JSON.stringify(await ids()) === JSON.stringify([r.body.executionId]), (await ids()).join(','));
  });
  await check('the time filter, past every call, gives the empty state with what to do', async () => {
    await filter({ since: '2999-01-01T00:00' });
    assert((await ids()).length === 0, 'rows left');
    assert(await page.isVisible('#exec-empty'), 'no empty state');
    assert((await page.textContent('#exec-empty')).includes('Run a skill'), 'the empty state says nothing to do');
  });
  await check('the detail of a failed call shows its error code and message', async () => {
    await filter({});
    await page.click(`#exec-table tr[data-id="${r.body.executionId}"]`);
    await page.waitForSelector('#exec-detail:not([hidden])');
    const text = await page.textContent('#exec-detail');
    assert(text.includes('not_found') && text.includes(r.body.error.message), text.slice(0, 400));
  });
  await check('the detail view opens from the keyboard and shows the result and its egress', async () => {
    await filter({});
    const row = page.locator(`#exec-table tr[data-id="${loop.body.executionId}"]`);
    await row.focus();
    await page.keyboard.press('Enter');
    await page.waitForSelector('#exec-detail:not([hidden])');
    const text = await page.textContent('#exec-detail');
    assert(text.includes(loop.body.executionId) && text.includes('success') && text.includes('Sandbox CPU') &&
           text.includes('Egress'), text.slice(0, 300));
    await shot('execution-detail');
  });

  await check('a running sandbox is listed and killed from the console, and its processes are gone', async () => {
    const token = `57.${process.pid % 10000}${Date.now() % 1000}`;
    const call = exec(admin.secret, 'execute_command', { command: 'sleep', args: [token] });
    await until('the sandbox to start', async () => procsWith(token) > 0);
    await page.goto(`${srv.url}/ui#sandboxes`);
    const row = await until('the run on the sandboxes page', async () => {
      await page.click('#sbx-refresh');
      await page.waitForLoadState('networkidle');
      const n = await page.$$('#sbx-table tbody tr');
      return n.length ? n[0] : null;
    });
    const id = await row.getAttribute('data-id');
    await shot('sandboxes');
    await page.click(`#sbx-table button[data-kill="${id}"]`);
    const res = await call;
    assert(res.status !== 200 && res.body.error.code === 'cancelled', JSON.stringify(res.body).slice(0, 200));
    await until('its processes to be gone', async () => procsWith(token) === 0);
    await until('the row to go', async () => !(await page.$(`#sbx-table tr[data-id="${id}"]`)));
    assert(await page.isVisible('#sbx-empty'), 'no empty state once nothing runs');
  });

  await check('a live sandbox is listed and killed from the console, and it is gone', async () => {
    const made = await api(admin.secret, 'POST', '/v1/sandboxes', {});
    assert(made.status === 201 && made.body.id, JSON.stringify(made.body).slice(0, 200));
    const id = made.body.id;
    await page.goto(`${srv.url}/ui#sandboxes`);
    await until('the live sandbox on the page', async () => {
      await page.click('#sbx-refresh');
      return page.$(`#sbx-table tr[data-id="${id}"]`);
    });
    assert((await page.textContent(`#sbx-table tr[data-id="${id}"]`)).includes('live'), 'not shown as live');
    await page.click(`#sbx-table button[data-kill="${id}"]`);
    await until('the live sandbox to end', async () =>
      (await api(admin.secret, 'GET', `/v1/sandboxes/${id}`)).status === 404 ||
      (await api(admin.secret, 'GET', `/v1/sandboxes/${id}`)).body.state !== 'running');
    await until('its row to go', async () => !(await page.$(`#sbx-table tr[data-id="${id}"]`)));
  });

  await check('a key is created (its secret shown once) and revoked from the console', async () => {
    await page.goto(`${srv.url}/ui#keys`);
    await page.fill('#key-name', 'made-in-console');
    await page.click('#key-form button[type=submit]');
    const secret = await (await page.waitForSelector('#new-secret')).textContent();
    assert(secret.startsWith('skd_'), secret);
    assert((await api(secret, 'GET', '/v1/skills')).status === 200, 'the new key does not work');
    const row = await page.waitForSelector('#key-table tr:has-text("made-in-console")');
    const id = await row.getAttribute('data-id');
    await shot('keys');
    await page.click(`button[data-revoke="${id}"]`);
    await page.click(`button[data-revoke="${id}"]`); /* confirm */
    await until('the key to show revoked', async () =>
      (await page.textContent(`#key-table tr[data-id="${id}"]`)).includes('revoked'));
    assert((await api(secret, 'GET', '/v1/skills')).status === 401, 'the revoked key still works');
  });

  await check('the usage chart\'s numbers are those of /v1/usage', async () => {
    await page.goto(`${srv.url}/ui#usage`);
    await page.waitForSelector('#usage-chart svg');
    await shot('usage');
    const u = (await api(admin.secret, 'GET', '/v1/usage')).body.usage;
    const legend = await page.$$eval('#usage-chart [data-total-cpu-ms]',
      (xs) => Object.fromEntries(xs.map((x) => [x.dataset.key, Number(x.dataset.totalCpuMs)])));
    const bars = await page.$$eval('#usage-chart rect.bar', (xs) => xs.map((x) => [x.dataset.key, Number(x.dataset.cpuMs)]));
    const table = await page.$$eval('#usage-table td[data-cpu-ms]',
      (xs) => Object.fromEntries(xs.map((x) => [x.parentElement.dataset.key, Number(x.dataset.cpuMs)])));
    const t = u.find((x) => x.keyId === tenant.id);
    assert(t && t.sandboxCpuMs >= 350, JSON.stringify(t)); /* 0.4 s of process time; the cgroup's clock may read a little less */
    for (const row of u) {
      assert(legend[row.keyId] === row.sandboxCpuMs, `legend ${row.keyId}: ${legend[row.keyId]} vs ${row.sandboxCpuMs}`);
      assert(table[row.keyId] === row.sandboxCpuMs, `table ${row.keyId}`);
      const sum = bars.filter(([k]) => k === row.keyId).reduce((a, [, v]) => a + v, 0);
      /* each bucket rounds its microseconds down to milliseconds */
      assert(sum <= row.sandboxCpuMs && row.sandboxCpuMs - sum <= 24, `bars ${row.keyId}: ${sum} vs ${row.sandboxCpuMs}`);
    }
  });

  await check('a cross-origin POST with the session cookie is refused', async () => {
    // A page on another port of the same host: same site, so the
    // SameSite=Strict cookie goes along; the Origin check refuses it.
    const evilPort = await freePort();
    const evil = createServer((req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(`<form id="f" method="POST" action="${srv.url}/v1/keys" enctype="text/plain">` +
              '<input name=\'{"name":"evil","x":"\' value=\'"}\'></form>' +
              '<script>document.getElementById("f").submit()</script>');
    });
    await new Promise((res) => evil.listen(evilPort, '127.0.0.1', res));
    const other = await ctx.newPage();
    const posted = other.waitForResponse((x) => x.url().endsWith('/v1/keys') && x.request().method() === 'POST');
    await other.goto(`http://127.0.0.1:${evilPort}/`);
    const resp = await posted;
    assert(resp.status() === 403, `status ${resp.status()}`);
    const keys = (await api(admin.secret, 'GET', '/v1/keys')).body.keys;
    assert(!keys.some((k) => k.name === 'evil'), 'the cross-origin POST made a key');
    await other.close();
    evil.close();
  });

  await check('a same-origin request without the CSRF token is refused', async () => {
    const status = await page.evaluate(async () => (await fetch('/v1/keys', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"name":"nocsrf"}',
    })).status);
    assert(status === 403, `status ${status}`);
  });

  await check('the console is usable at 320 px wide', async () => {
    await page.setViewportSize({ width: 320, height: 640 });
    for (const p of ['executions', 'sandboxes', 'keys', 'usage']) {
      await page.goto(`${srv.url}/ui#${p}`);
      await page.waitForSelector(`#page-${p}:not([hidden])`);
      await page.waitForLoadState('networkidle');
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      assert(wide <= 320, `${p} is ${wide} px wide`);
    }
    await shot('usage-320px');
    await page.setViewportSize({ width: 1200, height: 800 });
  });

  await check('the pages are reached from the keyboard', async () => {
    await page.goto(`${srv.url}/ui#executions`);
    await page.waitForSelector('#page-executions:not([hidden])');
    await page.focus('nav a[data-page="keys"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#page-keys:not([hidden])');
    assert((await page.getAttribute('nav a[data-page="keys"]', 'aria-current')) === 'page', 'not marked current');
  });

  await check('signing out ends the session', async () => {
    await page.click('#signout');
    await page.waitForSelector('#page-signin:not([hidden])');
    const status = await page.evaluate(async () => (await fetch('/v1/keys')).status);
    assert(status === 401, `status ${status}`);
  });

  await check('revoking the signed-in key ends its console sessions', async () => {
    const second = createKey(dir, 'second-admin');
    await page.fill('#signin-key', second.secret);
    await page.click('#signin-form button');
    await page.waitForSelector('#nav:not([hidden])');
    assert((await api(admin.secret, 'DELETE', `/v1/keys/${second.id}`)).status === 204, 'revoke');
    const status = await page.evaluate(async () => (await fetch('/v1/keys')).status);
    assert(status === 401, `status ${status}`);
  });

  await check('no script error in the console', async () => {
    const real = consoleErrors.filter((m) => !/status of 40[134]/.test(m));
    assert(real.length === 0, real.join(' | '));
  });
} catch (err) {
  fail('console test', err && err.stack ? err.stack : err);
} finally {
  await browser.close();
  const code = await srv.stop();
  if (code === 0) pass('the server stops cleanly');
  else fail('the server stops cleanly', `exit ${code}: ${srv.log().slice(-500)}`);
  removeDir(dir);
  finish();
}
