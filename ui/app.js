/*
 * The skilld operator console. Plain JavaScript, no library, nothing loaded
 * from elsewhere (the server's Content-Security-Policy allows only this
 * origin). Every value from the server is put in the page as text, never
 * as HTML. Requests go to the REST API with the session cookie; those that
 * change something carry the session's CSRF token (X-CSRF-Token).
 */
'use strict';

const $ = (id) => document.getElementById(id);
let csrf = '';
let keyNames = {};
let shown = 0;
const PAGES = ['executions', 'sandboxes', 'keys', 'usage'];

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fmtTime(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + 'Z' : '';
}

function keyLabel(id) {
  return keyNames[id] ? keyNames[id] + ' (' + id + ')' : id;
}

class ApiError extends Error {}

async function api(method, path, body) {
  const opt = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') opt.headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
  if (r.status === 401 && path !== '/ui/session') {
    showSignin();
    throw new ApiError('signed out');
  }
  const text = await r.text();
  let j = null;
  try { j = text ? JSON.parse(text) : null; } catch (e) { j = null; }
  if (!r.ok) {
    throw new ApiError(j && j.error ? j.error.code + ': ' + j.error.message : 'HTTP ' + r.status);
  }
  return j;
}

function showSignin() {
  csrf = '';
  $('nav').hidden = true;
  for (const p of PAGES) $('page-' + p).hidden = true;
  $('page-signin').hidden = false;
  $('signin-key').focus();
}

async function signedIn(who) {
  csrf = who.csrf || '';
  $('page-signin').hidden = true;
  $('nav').hidden = false;
  await loadKeyNames();
  route();
}

async function loadKeyNames() {
  const j = await api('GET', '/v1/keys');
  keyNames = {};
  for (const k of j.keys) keyNames[k.id] = k.name;
  return j.keys;
}

function route() {
  if (!csrf) return;
  let page = location.hash.slice(1);
  if (!PAGES.includes(page)) page = 'executions';
  for (const p of PAGES) $('page-' + p).hidden = p !== page;
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const load = { executions: loadExecutions, sandboxes: loadSandboxes, keys: loadKeys, usage: loadUsage }[page];
  load().catch(showError(page));
}

function showError(page) {
  return (e) => {
    if (e instanceof ApiError && e.message === 'signed out') return;
    const sec = $('page-' + page);
    let p = sec.querySelector('.error');
    if (!p) { p = el('p', { class: 'error', role: 'alert' }); sec.append(p); }
    p.textContent = e.message;
  };
}

/* ---- executions ---- */

function fillKeySelect() {
  const sel = $('f-key');
  const keep = sel.value;
  sel.replaceChildren(el('option', { value: '*' }, 'every key'));
  for (const [id, name] of Object.entries(keyNames)) sel.append(el('option', { value: id }, name + ' (' + id + ')'));
  sel.value = keep && (keep === '*' || keyNames[keep]) ? keep : '*';
}

async function loadExecutions() {
  fillKeySelect();
  const q = new URLSearchParams({ limit: '200', key: $('f-key').value });
  if ($('f-skill').value.trim()) q.set('skill', $('f-skill').value.trim());
  if ($('f-status').value) q.set('status', $('f-status').value);
  const since = Date.parse($('f-since').value), until = Date.parse($('f-until').value);
  if (!isNaN(since)) q.set('since', String(since));
  if (!isNaN(until)) q.set('until', String(until));
  const j = await api('GET', '/v1/executions?' + q);
  const body = $('exec-table').tBodies[0];
  body.replaceChildren();
  for (const x of j.executions) {
    const open = () => showExecution(x.id).catch(showError('executions'));
    const tr = el('tr', { class: 'row', tabindex: '0', 'data-id': x.id,
                          onclick: open, onkeydown: (ev) => { if (ev.key === 'Enter') open(); } },
      el('td', {}, fmtTime(x.createdAt)), el('td', {}, keyLabel(x.keyId)), el('td', {}, x.skill),
      el('td', { class: 'status-' + x.status }, x.status + (x.errorCode ? ' (' + x.errorCode + ')' : '')),
      el('td', {}, x.durationMs + ' ms'),
      el('td', {}, x.usage ? (x.usage.sandboxCpuMs / 1000).toFixed(3) + ' s' : ''));
    body.append(tr);
  }
  $('exec-empty').hidden = j.executions.length > 0;
  $('exec-detail').hidden = true;
  shown += 1;
  $('exec-table').dataset.shown = String(shown); /* which answer the table shows (tests wait on it) */
}

async function showExecution(id) {
  const x = await api('GET', '/v1/executions/' + encodeURIComponent(id));
  const d = $('exec-detail');
  const dl = el('dl');
  const add = (k, v) => dl.append(el('dt', {}, k), el('dd', {}, v));
  add('Execution', x.id);
  add('Key', keyLabel(x.keyId));
  add('Skill', x.skill + '@' + x.version);
  add('Result', x.status + (x.errorCode ? ': ' + x.errorCode : ''));
  add('Duration', x.durationMs + ' ms');
  add('Time', fmtTime(x.createdAt));
  add('Input SHA-256', x.inputSha256);
  if (x.usage) {
    add('Sandbox runs', x.usage.sandboxRuns);
    add('Sandbox CPU', (x.usage.sandboxCpuMs / 1000).toFixed(3) + ' s');
    add('Memory peak', x.usage.sandboxMemoryPeakBytes + ' bytes');
    add('Egress', x.usage.egressBytes + ' bytes');
    add('Workspace written', x.usage.workspaceBytes + ' bytes');
  }
  const eg = el('div', { class: 'egress' }, el('h3', {}, 'Egress'));
  if (x.egress && x.egress.length) {
    const t = el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'Host'), el('th', {}, 'Port'),
      el('th', {}, 'Verdict'), el('th', {}, 'Up'), el('th', {}, 'Down'))));
    const tb = el('tbody');
    for (const g of x.egress) {
      tb.append(el('tr', {}, el('td', {}, g.host || ''), el('td', {}, g.port || ''), el('td', {}, g.verdict || ''),
        el('td', {}, g.bytesUp || 0), el('td', {}, g.bytesDown || 0)));
    }
    t.append(tb);
    eg.append(el('div', { class: 'scroll' }, t));
  } else {
    eg.append(el('p', {}, 'No network: this call reached nothing through the egress proxy.'));
  }
  d.replaceChildren(el('h3', {}, 'Execution ' + x.id), dl, eg,
    el('button', { type: 'button', onclick: () => { d.hidden = true; } }, 'Close'));
  d.hidden = false;
  d.focus();
}

/* ---- sandboxes ---- */

/* What is running now, in every replica: the run table's running rows.
 * Live sandboxes plug in here when the server lists them. */
async function liveSandboxes() {
  const j = await api('GET', '/v1/runs?state=running');
  return j.runs.map((r) => ({ id: r.id, kind: r.kind || 'run', keyId: r.keyId, skill: r.skill,
                              startedAt: r.startedAt, replica: r.replica }));
}

async function killSandbox(id) {
  await api('DELETE', '/v1/runs/' + encodeURIComponent(id));
}

async function loadSandboxes() {
  const rows = await liveSandboxes();
  const body = $('sbx-table').tBodies[0];
  body.replaceChildren();
  for (const r of rows) {
    const kill = el('button', { type: 'button', class: 'danger', 'data-kill': r.id }, 'Kill');
    kill.addEventListener('click', async () => {
      kill.disabled = true;
      try {
        await killSandbox(r.id);
        $('sbx-msg').textContent = 'Kill requested for ' + r.id + '.';
        for (let i = 0; i < 40; i++) {
          const left = await liveSandboxes();
          if (!left.some((x) => x.id === r.id)) break;
          await new Promise((res) => setTimeout(res, 250));
        }
        await loadSandboxes();
      } catch (e) {
        kill.disabled = false;
        showError('sandboxes')(e);
      }
    });
    body.append(el('tr', { 'data-id': r.id }, el('td', {}, r.id), el('td', {}, r.kind), el('td', {}, keyLabel(r.keyId)),
      el('td', {}, r.skill), el('td', {}, fmtTime(r.startedAt)), el('td', {}, r.replica || ''), el('td', {}, kill)));
  }
  $('sbx-empty').hidden = rows.length > 0;
}

/* ---- keys ---- */

async function loadKeys() {
  const keys = await loadKeyNames();
  const body = $('key-table').tBodies[0];
  body.replaceChildren();
  for (const k of keys) {
    const cell = el('td');
    if (!k.revoked) {
      const b = el('button', { type: 'button', class: 'danger', 'data-revoke': k.id }, 'Revoke');
      b.addEventListener('click', async () => {
        if (b.dataset.armed !== '1') {
          b.dataset.armed = '1';
          b.textContent = 'Confirm revoke';
          return;
        }
        try {
          await api('DELETE', '/v1/keys/' + encodeURIComponent(k.id));
          await loadKeys();
        } catch (e) { showError('keys')(e); }
      });
      cell.append(b);
    }
    body.append(el('tr', { 'data-id': k.id }, el('td', {}, k.name), el('td', {}, k.id),
      el('td', {}, (k.scopes || []).join(', ')), el('td', {}, fmtTime(k.created)),
      el('td', {}, k.revoked ? 'revoked' : 'live'), cell));
  }
  $('key-empty').hidden = keys.length > 0;
}

async function createKey(ev) {
  ev.preventDefault();
  const scopes = [...document.querySelectorAll('#key-form input[name=scope]:checked')].map((c) => c.value);
  const k = await api('POST', '/v1/keys', { name: $('key-name').value, scopes });
  const box = $('key-secret');
  box.replaceChildren(el('p', {}, 'Key ' + k.name + ' (' + k.id + ') created. Its secret is shown this once:'),
    el('code', { id: 'new-secret' }, k.secret));
  box.hidden = false;
  $('key-name').value = '';
  await loadKeys();
}

/* ---- usage ---- */

function drawChart(u) {
  const box = $('usage-chart');
  const keys = u.usage.map((r) => r.keyId);
  const nb = Math.max(1, Math.ceil((u.until - u.since) / u.bucketMs));
  const per = new Map(); /* bucket index -> [{keyId, ms}] */
  for (const s of u.series) {
    const i = Math.floor((s.t - u.since) / u.bucketMs);
    if (!per.has(i)) per.set(i, []);
    per.get(i).push(s);
  }
  let max = 0;
  for (const list of per.values()) max = Math.max(max, list.reduce((a, s) => a + s.sandboxCpuMs, 0));
  const W = 600, H = 220, L = 44, B = 20, T = 10, bw = (W - L - 4) / nb;
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'Sandbox CPU-seconds per key over time');
  const mk = (tag, a, text) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(a)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const top = max > 0 ? max : 1000;
  svg.append(mk('line', { x1: L, y1: H - B, x2: W, y2: H - B, stroke: '#94a3b8' }));
  svg.append(mk('text', { x: 2, y: T + 8 }, (top / 1000).toFixed(2) + ' s'));
  svg.append(mk('text', { x: 2, y: H - B }, '0'));
  svg.append(mk('text', { x: L, y: H - 4 }, fmtTime(u.since)));
  svg.append(mk('text', { x: W - 130, y: H - 4 }, fmtTime(u.until)));
  for (const [i, list] of per) {
    let y = H - B;
    for (const s of list) {
      const h = (s.sandboxCpuMs / top) * (H - B - T);
      y -= h;
      const r = mk('rect', { x: L + i * bw + 1, y, width: Math.max(1, bw - 2), height: Math.max(h, 0),
                             class: 'bar c' + (keys.indexOf(s.keyId) % 8),
                             'data-key': s.keyId, 'data-cpu-ms': s.sandboxCpuMs, 'data-t': s.t });
      r.append(mk('title', {}, keyLabel(s.keyId) + ' ' + fmtTime(s.t) + ': ' + (s.sandboxCpuMs / 1000).toFixed(3) + ' CPU-s'));
      svg.append(r);
    }
  }
  const legend = el('div', { class: 'legend' });
  for (const r of u.usage) {
    legend.append(el('span', { 'data-key': r.keyId, 'data-total-cpu-ms': r.sandboxCpuMs },
      el('span', { class: 'swatch c' + (keys.indexOf(r.keyId) % 8) }),
      keyLabel(r.keyId) + ': ' + (r.sandboxCpuMs / 1000).toFixed(3) + ' CPU-s'));
  }
  box.replaceChildren(svg, legend);
}

async function loadUsage() {
  const range = Number($('u-range').value);
  const until = Date.now() + 1000;
  const since = until - range;
  const bucket = Math.ceil(range / 24);
  const u = await api('GET', `/v1/usage?since=${since}&until=${until}&bucket=${bucket}`);
  const body = $('usage-table').tBodies[0];
  body.replaceChildren();
  for (const r of u.usage) {
    body.append(el('tr', { 'data-key': r.keyId }, el('td', {}, keyLabel(r.keyId)), el('td', {}, r.executions),
      el('td', {}, r.sandboxRuns), el('td', { 'data-cpu-ms': r.sandboxCpuMs }, (r.sandboxCpuMs / 1000).toFixed(3)),
      el('td', {}, r.sandboxMemoryPeakBytes), el('td', {}, r.egressBytes), el('td', {}, r.workspaceBytes)));
  }
  $('usage-empty').hidden = u.usage.length > 0;
  drawChart(u);
}

/* ---- start ---- */

function wire() {
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('signin-error').textContent = '';
    try {
      const who = await api('POST', '/ui/session', { key: $('signin-key').value });
      $('signin-key').value = '';
      await signedIn(who);
    } catch (e) {
      $('signin-error').textContent = e.message;
    }
  });
  $('signout').addEventListener('click', async () => {
    try { await api('DELETE', '/ui/session'); } catch (e) { /* the session is gone either way */ }
    showSignin();
  });
  $('exec-filters').addEventListener('submit', (ev) => { ev.preventDefault(); loadExecutions().catch(showError('executions')); });
  $('sbx-refresh').addEventListener('click', () => loadSandboxes().catch(showError('sandboxes')));
  $('key-form').addEventListener('submit', (ev) => createKey(ev).catch(showError('keys')));
  $('usage-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadUsage().catch(showError('usage')); });
  window.addEventListener('hashchange', route);
}

async function start() {
  wire();
  try {
    const who = await api('GET', '/ui/session');
    await signedIn(who);
  } catch (e) {
    showSignin();
  }
}

start();
