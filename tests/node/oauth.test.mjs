// skilld as an OAuth resource server (docs/server.md, "OAuth sign-in"),
// against a real authorization server: oidc-provider (a certified OpenID
// provider) with resource indicators, JWT access tokens and PKCE, started
// here, and the official MCP TypeScript SDK client's OAuth support running
// the whole flow through skilld's metadata: discovery from the 401,
// dynamic registration, authorization code with PKCE (login and consent
// answered by this test at the provider's interaction endpoint), token,
// tools/list and tools/call. Then every token that must be refused, two
// subjects kept apart, a key rotation at the provider picked up without a
// restart, 1,000 unknown kids costing at most a few JWKS fetches, an admin
// disabling a tenant, and API keys working beside tokens.
import { createServer } from 'node:http';
import { execFile } from 'node:child_process';
import { createHmac, createPublicKey } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import Provider from 'oidc-provider';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import {
  SKILLD, assert, check, createKey, finish, freePort, removeDir, startServer, tempDir,
} from './lib.mjs';

const idpPort = await freePort();
const skPort = await freePort();
const ISSUER = `http://127.0.0.1:${idpPort}`;
const PUBLIC = `http://127.0.0.1:${skPort}`;
const RESOURCE = `${PUBLIC}/mcp`;
const REDIRECT = 'http://127.0.0.1:9/callback'; // never reached: the test reads the code

async function signingKey(kid) {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  return { kid, privateKey, publicKey, jwk };
}

// The provider: one Koa app, restarted with other keys to rotate them.
let jwksFetches = 0;
let user = 'alice'; // who logs in at the next interaction
function makeProvider(keys) {
  const provider = new Provider(ISSUER, {
    jwks: { keys: keys.map((k) => k.jwk) },
    clients: [{
      client_id: 'svc', client_secret: 'svc-secret', grant_types: ['client_credentials'],
      redirect_uris: [], response_types: [],
    }],
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator) => {
          if (indicator !== RESOURCE) throw new Provider.errors.InvalidTarget();
          return {
            scope: 'skills:read skills:execute', audience: RESOURCE, accessTokenTTL: 600,
            accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    scopes: ['openid', 'skills:read', 'skills:execute'],
    pkce: { required: () => true },
    ttl: { AccessToken: 600, AuthorizationCode: 60, ClientCredentials: 600, Grant: 600, IdToken: 600, Interaction: 600, Session: 600 },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  });
  provider.use(async (ctx, next) => {
    if (ctx.path === '/jwks') jwksFetches++;
    const m = ctx.path.match(/^\/interaction\/([^/]+)$/);
    if (!m) return next();
    // The test is the user: it logs in as `user` and consents to what the
    // client asked for.
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.prompt.name === 'login') {
      await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: user } },
        { mergeWithLastSubmission: false });
    } else {
      const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      const d = details.prompt.details;
      if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
      for (const [res, scopes] of Object.entries(d.missingResourceScopes || {})) grant.addResourceScope(res, scopes.join(' '));
      const grantId = await grant.save();
      await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } },
        { mergeWithLastSubmission: true });
    }
    ctx.respond = false;
  });
  return provider;
}

// One HTTP server; a rotation swaps the provider behind it.
let handler;
const idp = createServer((req, res) => handler(req, res));
function startIdp(keys) { handler = makeProvider(keys).callback(); }
await new Promise((resolve) => idp.listen(idpPort, '127.0.0.1', resolve));

// The browser: follow the authorization URL's redirects with the
// provider's cookies until the redirect to the client, and return its code.
async function browse(authUrl) {
  const jar = new Map();
  let url = String(authUrl);
  for (let hop = 0; hop < 20; hop++) {
    if (url.startsWith(REDIRECT)) {
      const u = new URL(url);
      assert(!u.searchParams.get('error'), `authorization error: ${u.search}`);
      return u.searchParams.get('code');
    }
    const r = await fetch(url, {
      redirect: 'manual',
      headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const c of r.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const i = kv.indexOf('=');
      jar.set(kv.slice(0, i), kv.slice(i + 1));
    }
    const loc = r.headers.get('location');
    assert(loc, `no redirect from ${url}: HTTP ${r.status} ${(await r.text()).slice(0, 300)}`);
    url = new URL(loc, url).href;
  }
  throw new Error('too many redirects');
}

// An OAuthClientProvider that keeps everything in memory.
function memoryProvider() {
  const st = { authUrl: null };
  return {
    st,
    get redirectUrl() { return REDIRECT; },
    get clientMetadata() {
      return {
        client_name: 'skilld oauth test', redirect_uris: [REDIRECT], grant_types: ['authorization_code'],
        response_types: ['code'], token_endpoint_auth_method: 'none',
      };
    },
    clientInformation: () => st.client,
    saveClientInformation: (c) => { st.client = c; },
    tokens: () => st.tokens,
    saveTokens: (t) => { st.tokens = t; },
    redirectToAuthorization: (u) => { st.authUrl = u; },
    saveCodeVerifier: (v) => { st.verifier = v; },
    codeVerifier: () => st.verifier,
  };
}

// The whole sign-in of one user through the SDK; returns a connected
// client and the provider (whose tokens hold the access token).
async function signIn(who) {
  user = who;
  const prov = memoryProvider();
  const first = new StreamableHTTPClientTransport(new URL(RESOURCE), { authProvider: prov });
  const c0 = new Client({ name: 'oauth-test', version: '1.0.0' });
  let unauthorized = false;
  try { await c0.connect(first); } catch (e) { unauthorized = e instanceof UnauthorizedError; if (!unauthorized) throw e; }
  assert(unauthorized, 'the first connect should need sign-in');
  assert(prov.st.authUrl, 'the SDK did not start an authorization');
  const au = new URL(prov.st.authUrl);
  assert(au.origin === ISSUER, `authorization went to ${au.origin}`);
  assert(au.searchParams.get('code_challenge_method') === 'S256', 'no PKCE');
  assert(au.searchParams.get('resource') === RESOURCE, `resource ${au.searchParams.get('resource')}`);
  const code = await browse(au);
  await first.finishAuth(code);
  const client = new Client({ name: 'oauth-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(RESOURCE), { authProvider: prov }));
  return { client, prov, token: prov.st.tokens.access_token };
}

function b64(s) { return Buffer.from(s).toString('base64url'); }
async function mint(key, claims = {}, header = {}) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ scope: 'skills:read skills:execute', ...claims })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: key.kid, ...header })
    .setIssuer(claims.iss || ISSUER).setSubject(claims.sub || 'mallory')
    .setAudience(claims.aud || RESOURCE).setIssuedAt(claims.iat || now)
    .setExpirationTime(claims.exp || now + 300).setNotBefore(claims.nbf || now)
    .sign(key.privateKey);
}

// POST /mcp with a bearer token (an initialize unless told): {status, www}.
async function probe(token, method = 'initialize', params = {
  protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' },
}) {
  const r = await fetch(RESOURCE, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`, 'content-type': 'application/json',
      accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  await r.text();
  return { status: r.status, www: r.headers.get('www-authenticate') || '' };
}

async function refusedInvalid(token, what) {
  const { status, www } = await probe(token);
  assert(status === 401, `${what}: HTTP ${status}`);
  assert(/error="invalid_token"/.test(www), `${what}: ${www}`);
  assert(www.includes(`resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp"`), `${what}: ${www}`);
}

function toolText(res) { return res.content.map((c) => c.text || '').join(''); }

const k1 = await signingKey('k1');
const k2 = await signingKey('k2');
startIdp([k1]);
const data = tempDir();
const admin = createKey(data, 'admin');
const srv = await startServer(data, {
  SKILLD_PUBLIC_URL: PUBLIC, SKILLD_OAUTH_ISSUER: ISSUER,
}, { port: skPort });

try {
  await check('protected-resource metadata (RFC 9728), both paths', async () => {
    for (const p of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const r = await fetch(`${PUBLIC}${p}`);
      assert(r.status === 200, `${p}: ${r.status}`);
      const m = await r.json();
      assert(m.resource === RESOURCE, JSON.stringify(m));
      assert(m.authorization_servers.length === 1 && m.authorization_servers[0] === ISSUER, JSON.stringify(m));
      assert(m.scopes_supported.join(' ') === 'skills:read skills:execute', JSON.stringify(m));
      assert(m.bearer_methods_supported.join() === 'header', JSON.stringify(m));
    }
  });

  await check('401 without a credential names the metadata', async () => {
    const r = await fetch(RESOURCE, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert(r.status === 401, `HTTP ${r.status}`);
    const www = r.headers.get('www-authenticate');
    assert(/^Bearer /.test(www) && www.includes(`resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp"`), www);
  });

  await check('the issuer\'s keys are read at start, before any token', async () => {
    const deadline = Date.now() + 15000;
    let n = 0;
    while (Date.now() < deadline) {
      const m = await (await fetch(`${PUBLIC}/metrics`, { headers: { authorization: `Bearer ${admin.secret}` } })).text();
      n = Number((m.match(/^skilld_oauth_jwks_fetches_total (\d+)$/m) || [])[1]);
      if (n >= 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert(n === 1 && jwksFetches === 1, `skilld: ${n} fetches, the provider saw ${jwksFetches}`);
  });

  let alice;
  await check('MCP SDK client signs in: discovery, registration, code + PKCE, token', async () => {
    alice = await signIn('alice');
    const parts = alice.token.split('.');
    const head = JSON.parse(Buffer.from(parts[0], 'base64url'));
    const body = JSON.parse(Buffer.from(parts[1], 'base64url'));
    assert(head.typ === 'at+jwt' && head.kid === 'k1', JSON.stringify(head));
    assert(body.aud === RESOURCE && body.sub === 'alice' && body.iss === ISSUER, JSON.stringify(body));
  });

  await check('tools/list and tools/call with the token', async () => {
    const tools = await alice.client.listTools();
    assert(tools.tools.some((t) => t.name === 'file_write'), 'no file_write tool');
    const w = await alice.client.callTool({ name: 'file_write', arguments: { path: 'alice.txt', content: 'from alice' } });
    assert(!w.isError, toolText(w));
    const rd = await alice.client.callTool({ name: 'file_read', arguments: { path: 'alice.txt' } });
    assert(!rd.isError && toolText(rd).includes('from alice'), toolText(rd));
  });

  await check('two subjects cannot see each other\'s workspace', async () => {
    const bob = await signIn('bob');
    const rd = await bob.client.callTool({ name: 'file_read', arguments: { path: 'alice.txt' } });
    assert(rd.isError && /not_found/.test(toolText(rd)), toolText(rd));
    const w = await bob.client.callTool({ name: 'file_write', arguments: { path: 'bob.txt', content: 'b' } });
    assert(!w.isError, toolText(w));
    const ra = await alice.client.callTool({ name: 'file_read', arguments: { path: 'bob.txt' } });
    assert(ra.isError && /not_found/.test(toolText(ra)), toolText(ra));
    await bob.client.close();
  });

  await check('admins see OAuth tenants in GET /v1/keys', async () => {
    const r = await fetch(`${PUBLIC}/v1/keys`, { headers: { authorization: `Bearer ${admin.secret}` } });
    const keys = (await r.json()).keys || [];
    const oa = keys.filter((k) => k.id.startsWith('oa_'));
    assert(oa.length === 2, JSON.stringify(keys));
    assert(oa.some((k) => k.name.includes('alice') && k.name.includes(ISSUER)), JSON.stringify(oa));
  });

  await check('refused with invalid_token: wrong aud, expired, nbf, other issuer', async () => {
    const now = Math.floor(Date.now() / 1000);
    await refusedInvalid(await mint(k1, { aud: PUBLIC }), 'aud without /mcp');
    await refusedInvalid(await mint(k1, { aud: 'https://other.example/mcp' }), 'other audience');
    await refusedInvalid(await mint(k1, { iat: now - 900, nbf: now - 900, exp: now - 120 }), 'expired');
    await refusedInvalid(await mint(k1, { nbf: now + 600, exp: now + 900 }), 'not yet valid');
    await refusedInvalid(await mint(k1, { iss: 'http://127.0.0.1:1' }), 'another issuer');
  });

  await check('refused: alg none, HS256 keyed with the public key', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = b64(JSON.stringify({ iss: ISSUER, sub: 'mallory', aud: RESOURCE, exp: now + 300, scope: 'skills:read' }));
    await refusedInvalid(`${b64(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid: 'k1' }))}.${claims}.`, 'alg none');
    const pem = createPublicKey(await exportJWK(k1.publicKey).then((j) => ({ key: j, format: 'jwk' })))
      .export({ type: 'spki', format: 'pem' });
    const hs = `${b64(JSON.stringify({ alg: 'HS256', typ: 'at+jwt', kid: 'k1' }))}.${claims}`;
    const sig = createHmac('sha256', pem).update(hs).digest('base64url');
    await refusedInvalid(`${hs}.${sig}`, 'HS256 with the public key');
  });

  await check('a read-only token calling file_write gets 403 insufficient_scope', async () => {
    const ro = await mint(k1, { sub: 'reader', scope: 'skills:read' });
    const init = await probe(ro);
    assert(init.status === 200, `initialize: ${init.status}`);
    const { status, www } = await probe(ro, 'tools/call', { name: 'file_write', arguments: { path: 'x', content: 'x' } });
    assert(status === 403, `HTTP ${status}`);
    assert(/error="insufficient_scope"/.test(www) && /scope="skills:execute"/.test(www) && /resource_metadata=/.test(www), www);
  });

  await check('REST and A2A accept the tokens and give the same challenges; secrets are per tenant', async () => {
    const full = await mint(k1, { sub: 'rest-user' });
    const ro = await mint(k1, { sub: 'reader', scope: 'skills:read' });
    const post = (path, token, body) => fetch(`${PUBLIC}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    const exec = { skill: 'file_write', input: { path: 'r.txt', content: 'rest' } };
    const ok = await post('/v1/execute', full, exec);
    assert(ok.status === 200 && (await ok.json()).success === true, `execute: ${ok.status}`);
    for (const [path, body] of [
      ['/v1/execute', exec],
      ['/a2a', { jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { role: 'user', messageId: 'm1', kind: 'message', parts: [{ kind: 'text', text: 'hi' }] } } }],
    ]) {
      const none = await post(path, null, body);
      assert(none.status === 401 && /resource_metadata=/.test(none.headers.get('www-authenticate')), `${path} no credential: ${none.status}`);
      const bad = await post(path, `${full}x`, body);
      assert(bad.status === 401 && /error="invalid_token"/.test(bad.headers.get('www-authenticate')), `${path} bad token: ${bad.status}`);
      const r = await post(path, ro, body);
      const www = r.headers.get('www-authenticate') || '';
      assert(r.status === 403 && /error="insufficient_scope"/.test(www) && /scope="skills:execute"/.test(www), `${path} read-only: ${r.status} ${www}`);
    }
    for (const card of ['agent-card.json', 'agent.json']) {
      const c = await (await fetch(`${PUBLIC}/.well-known/${card}`)).json();
      const d = JSON.stringify(c.securitySchemes);
      assert(d.includes(`${PUBLIC}/.well-known/oauth-protected-resource/mcp`), `${card}: ${d}`);
    }
    // Secrets are per tenant too.
    const put = await post('/v1/secrets', full, { name: 'REST_USER_TOKEN', value: 's3cret', hosts: ['api.example.com'] });
    assert(put.status === 201, `POST /v1/secrets: ${put.status} ${await put.text()}`);
    const mine = await (await fetch(`${PUBLIC}/v1/secrets`, { headers: { authorization: `Bearer ${full}` } })).json();
    const theirs = await (await fetch(`${PUBLIC}/v1/secrets`, { headers: { authorization: `Bearer ${ro}` } })).json();
    assert(mine.secrets.map((x) => x.name).join() === 'REST_USER_TOKEN', JSON.stringify(mine));
    assert(theirs.secrets.length === 0, JSON.stringify(theirs));
    const listed = await fetch(`${PUBLIC}/v1/skills`, { headers: { authorization: `Bearer ${ro}` } });
    assert(listed.status === 200, `GET /v1/skills read-only: ${listed.status}`);
  });

  await check('a signing-key rotation at the provider is picked up without a restart', async () => {
    const before = jwksFetches;
    startIdp([k2, k1]); // the provider now signs with k2
    const r = await fetch(`${ISSUER}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from('svc:svc-secret').toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource: RESOURCE, scope: 'skills:read skills:execute' }),
    });
    const tok = await r.json();
    assert(tok.access_token, JSON.stringify(tok));
    const head = JSON.parse(Buffer.from(tok.access_token.split('.')[0], 'base64url'));
    assert(head.kid === 'k2', JSON.stringify(head));
    const { status } = await probe(tok.access_token);
    assert(status === 200, `HTTP ${status}`);
    assert(jwksFetches === before + 1, `JWKS fetched ${jwksFetches - before} times`);
  });

  await check('a key not in the JWKS is refused; 1,000 unknown kids cost at most a few fetches', async () => {
    const before = jwksFetches;
    const stray = await signingKey('k-unknown');
    await refusedInvalid(await mint(stray), 'unknown key');
    const tokens = await Promise.all(Array.from({ length: 1000 }, (_, i) => mint(k1, {}, { kid: `nope-${i}` })));
    for (let i = 0; i < tokens.length; i += 50) {
      const batch = await Promise.all(tokens.slice(i, i + 50).map((t) => probe(t)));
      assert(batch.every((b) => b.status === 401 && /invalid_token/.test(b.www)), JSON.stringify(batch[0]));
    }
    assert(jwksFetches - before <= 2, `JWKS fetched ${jwksFetches - before} times`);
    // skilld counts the same fetches as the provider saw.
    const m = await (await fetch(`${PUBLIC}/metrics`, { headers: { authorization: `Bearer ${admin.secret}` } })).text();
    const n = Number((m.match(/^skilld_oauth_jwks_fetches_total (\d+)$/m) || [])[1]);
    assert(n === jwksFetches, `metrics say ${n} fetches, the provider saw ${jwksFetches}`);
  });

  await check('skilld doctor reads the issuers\' metadata and keys, and says when it cannot', async () => {
    // Asynchronous: the provider answering it runs in this process.
    const doctor = (issuer) => new Promise((resolve) => {
      execFile(SKILLD, ['--data-dir', data, 'doctor', '--json'], {
        env: { ...process.env, SKILLD_PUBLIC_URL: PUBLIC, SKILLD_OAUTH_ISSUER: issuer }, timeout: 120000,
      }, (e, stdout) => {
        const rep = JSON.parse(stdout);
        resolve({ rep, oa: rep.checks.find((c) => c.name === 'oauth') });
      });
    });
    const good = await doctor(ISSUER);
    assert(good.oa && good.oa.status === 'ok' && /2 signing key\(s\) at .*\/jwks/.test(good.oa.detail), JSON.stringify(good.oa));
    const bad = await doctor(`http://127.0.0.1:${skPort}/nothing`);
    assert(bad.oa && bad.oa.status === 'fail' && bad.oa.fix && bad.rep.status === 'fail', JSON.stringify(bad.oa));
  });

  await check('an admin disabling a tenant ends its access', async () => {
    const id = (await (await fetch(`${PUBLIC}/v1/keys`, { headers: { authorization: `Bearer ${admin.secret}` } })).json())
      .keys.find((k) => k.name.includes('oauth alice')).id;
    const d = await fetch(`${PUBLIC}/v1/keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${admin.secret}` } });
    assert(d.ok, `DELETE: ${d.status}`);
    const { status, www } = await probe(alice.token);
    assert(status === 401 && /invalid_token/.test(www), `${status} ${www}`);
  });

  await check('API keys keep working beside tokens', async () => {
    const { status } = await probe(admin.secret);
    assert(status === 200, `HTTP ${status}`);
  });

  await check('per-tenant rate limit and workspace quota hold for OAuth tenants', async () => {
    // A second server with a tight rate limit and quota, the same provider.
    const port2 = await freePort();
    const pub2 = `http://127.0.0.1:${port2}`;
    const data2 = tempDir();
    const s2 = await startServer(data2, {
      SKILLD_PUBLIC_URL: pub2, SKILLD_OAUTH_ISSUER: ISSUER, SKILLD_RATE_LIMIT_PER_KEY: '1',
      SKILLD_RATE_LIMIT_BURST: '3', SKILLS_WORKSPACE_QUOTA_BYTES: '100',
    }, { port: port2 });
    try {
      const exec = (token, input) => fetch(`${pub2}/v1/execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ skill: 'file_write', input }),
      });
      const ta = await mint(k2, { sub: 'tenant-a', aud: `${pub2}/mcp` });
      const tb = await mint(k2, { sub: 'tenant-b', aud: `${pub2}/mcp` });
      const big = await exec(ta, { path: 'big.txt', content: 'x'.repeat(101) });
      const bj = await big.json();
      assert(bj.error && bj.error.code === 'quota_exceeded', `over quota: ${JSON.stringify(bj)}`);
      // 20 at once against a burst of 3 and 1 a second: some must wait.
      const statuses = (await Promise.all(Array.from({ length: 20 }, () => exec(ta, { path: 'a.txt', content: 'a' }))))
        .map((r) => r.status);
      assert(statuses.includes(429) && statuses.includes(200), `tenant a: ${statuses}`);
      const b = await exec(tb, { path: 'b.txt', content: 'x'.repeat(90) });
      assert(b.status === 200, `tenant b is limited on its own: ${b.status}`);
    } finally {
      await s2.stop();
      removeDir(data2);
    }
  });

  await check('a key the provider drops stops its tokens, remembered ones too', async () => {
    // A token of k1 is verified once (and remembered), then the provider
    // keeps only k3. The first k3 token after the 30 s refetch interval
    // (polled for) makes skilld read the new set; the k1 token is then
    // checked again and refused.
    const k3 = await signingKey('k3');
    const old = await mint(k1, { sub: 'remembered' });
    assert((await probe(old)).status === 200, 'the k1 token before the change');
    assert((await probe(old)).status === 200, 'the k1 token again (remembered)');
    startIdp([k3]);
    const fresh = await mint(k3, { sub: 'fresh' });
    const deadline = Date.now() + 60000;
    let st = 0;
    while (Date.now() < deadline && (st = (await probe(fresh)).status) !== 200)
      await new Promise((r) => setTimeout(r, 500));
    assert(st === 200, `the k3 token: ${st}`);
    const { status, www } = await probe(old);
    assert(status === 401 && /invalid_token/.test(www), `the k1 token after k1 left: ${status} ${www}`);
  });

  await check('the server stops cleanly (under ASan: no leak)', async () => {
    const code = await srv.stop();
    assert(code === 0, `exit ${code}: ${srv.log().slice(-500)}`);
  });
} finally {
  await srv.stop();
  idp.closeAllConnections();
  idp.close();
  removeDir(data);
}
finish();
