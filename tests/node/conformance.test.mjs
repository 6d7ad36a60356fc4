// @modelcontextprotocol/conformance (0.2.0-alpha.12, the newest published
// version and the first with the 2026-07-28 and SEP-2640 Skills scenarios)
// against the real `skilld serve`, run with Node 22 from the npm `node`
// package (the suite needs fs.globSync): every 2025-11-25 scenario, every
// scenario the 2026-07-28 revision requires, and the Skills extension's.
// The server runs with SKILLD_MCP_TEST_FIXTURES=true (the suite's fixture
// tools and resources) and one SKILL.md bundle. Every scenario the server's
// capabilities allow must pass with no failure and no warning; the ones
// that need a capability skilld does not offer (prompts, completion,
// sampling, elicitation, resource subscriptions, input_required, tasks) are
// run too and their result is recorded with the reason in
// tests/conformance/REPORT.md (rewritten when WRITE_REPORT=1).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { SKILLD, check, assert, finish, tempDir, removeDir, createKey, startServer } from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);
const SUITE = JSON.parse(readFileSync(join(here, 'node_modules/@modelcontextprotocol/conformance/package.json'), 'utf8')).version;
const NODE22 = join(here, 'node_modules', 'node', 'bin', 'node');
const CLI = join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

// Scenarios that need what a skills server does not offer, and why.
const NOT_APPLICABLE = {
  'completion-complete': 'needs completion/complete; skilld offers no prompts or resource templates with arguments to complete',
  'tools-call-sampling': 'needs a tool that asks the client to sample; skills never do',
  'tools-call-elicitation': 'needs a tool that elicits user input; skills never do',
  'elicitation-sep1034-defaults': 'needs an elicitation tool; skills never elicit',
  'elicitation-sep1330-enums': 'needs an elicitation tool; skills never elicit',
  'resources-subscribe': 'needs resources/subscribe; skilld declares no resources.subscribe (bundle files are checked on every read instead)',
  'resources-unsubscribe': 'needs resources/subscribe; skilld declares no resources.subscribe',
  'prompts-list': 'skilld declares no prompts capability',
  'prompts-get-simple': 'no prompts capability',
  'prompts-get-with-args': 'no prompts capability',
  'prompts-get-embedded-resource': 'no prompts capability',
  'prompts-get-with-image': 'no prompts capability',
};
for (const s of ['basic-elicitation', 'basic-sampling', 'basic-list-roots', 'request-state', 'multiple-input-requests',
  'multi-round', 'non-tool-request', 'result-type', 'tampered-state', 'capability-check', 'missing-input-response',
  'unsupported-methods', 'ignore-extra-params', 'validate-input']) {
  NOT_APPLICABLE[`input-required-result-${s}`] = 'needs tools that return input_required (SEP-2322 multi round trip: elicitation, sampling, roots); skills never need input from the client';
}
for (const s of ['lifecycle', 'capability-negotiation', 'wire-fields', 'request-state-removal', 'mrtr-input',
  'request-headers', 'dispatch-and-envelope', 'status-notifications', 'required-task-error', 'mrtr-composition']) {
  NOT_APPLICABLE[`tasks-${s}`] = 'the tasks extension: skilld does not declare it (long calls report progress and are cancelled instead)';
}
// Single checks that need what skilld does not offer, inside scenarios that apply.
const NA_CHECKS = {
  'sep-2575-http-server-no-independent-requests-on-stream': 'needs the fixture test_streaming_elicitation (an input_required tool); skilld never sends requests on a response stream',
  'sep-2549-prompts-list-caching-hints': 'prompts/list: skilld has no prompts (the tools, resources and discover caching hints pass)',
};

function scenarioOf(dir) { return dir.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, ''); }

async function suite(url, args, out) {
  mkdirSync(out, { recursive: true });
  // The verdict is read from the checks.json files, not the exit status.
  await run(NODE22, [CLI, 'server', '--url', url, ...args, '-o', out], { cwd: here, timeout: 600000, maxBuffer: 64 << 20 })
    .catch(() => {});
  const results = {};
  for (const d of readdirSync(out)) {
    const f = join(out, d, 'checks.json');
    if (existsSync(f)) results[scenarioOf(d)] = JSON.parse(readFileSync(f, 'utf8'));
  }
  return results;
}

const dataDir = tempDir();
const outDir = tempDir('skilld-conformance-');
const bundle = join(tempDir('skilld-conformance-bundle-'), 'pdf-tools');
const eras = {};
try {
  mkdirSync(join(bundle, 'scripts'), { recursive: true });
  writeFileSync(join(bundle, 'SKILL.md'), '---\nname: pdf-tools\ndescription: Fill and read PDF forms\nlicense: MIT\n---\n# PDF tools\n');
  writeFileSync(join(bundle, 'scripts', 'run.py'), 'print("{}")\n');
  const key = createKey(dataDir, 'conformance', 'skills:read,skills:execute');
  execFileSync(SKILLD, ['--data-dir', dataDir, 'skills', 'add', bundle]);
  const server = await startServer(dataDir, { SKILLD_ANONYMOUS_KEY: key.id, SKILLD_LOG_LEVEL: 'warn', SKILLD_MCP_TEST_FIXTURES: 'true' });
  const url = `${server.url}/mcp`;
  try {
    await check('the conformance suite runs on Node 22', async () => {
      const v = execFileSync(NODE22, ['--version']).toString().trim();
      assert(/^v22\./.test(v), `node ${v}`);
    });
    eras['2025-11-25'] = await suite(url, ['--spec-version', '2025-11-25', '--suite', 'all'], join(outDir, '2025'));
    eras['2026-07-28'] = await suite(url, ['--requirements', '2026-07-28'], join(outDir, '2026'));
    eras.extension = {};
    for (const s of ['sep-2640-skills-enumeration', 'sep-2640-skills-manifest', 'sep-2640-skills-directory']) {
      Object.assign(eras.extension, await suite(url, ['--scenario', s], join(outDir, s)));
    }
  } finally {
    await server.stop();
  }
  for (const [era, results] of Object.entries(eras)) {
    await check(`conformance ${era}: scenarios ran`, async () => {
      assert(Object.keys(results).length > 0, 'no scenario results');
    });
    for (const [scenario, checks] of Object.entries(results)) {
      if (NOT_APPLICABLE[scenario]) continue;
      await check(`conformance ${era} ${scenario}`, async () => {
        const bad = checks.filter((c) => (c.status === 'FAILURE' || c.status === 'WARNING') && !NA_CHECKS[c.id]);
        assert(checks.some((c) => c.status === 'SUCCESS' || c.status === 'INFO'), 'no check ran');
        assert(bad.length === 0, bad.map((c) => `${c.id}: ${c.errorMessage || c.status}`).join('; '));
      });
    }
  }
  await check('conformance: the Skills extension scenarios all ran', async () => {
    for (const s of ['sep-2640-skills-enumeration', 'sep-2640-skills-manifest', 'sep-2640-skills-directory']) assert(eras.extension[s], `${s} missing`);
  });
  if (process.env.WRITE_REPORT === '1') {
    const lines = ['# MCP conformance report', '',
      `Produced by \`tests/node/conformance.test.mjs\` (\`WRITE_REPORT=1\`) with \`@modelcontextprotocol/conformance\` ${SUITE}`,
      'run on Node 22 (the npm `node` package in tests/node) against `skilld serve` with `SKILLD_MCP_TEST_FIXTURES=true`',
      '(the suite\'s fixture tools and resources) and one SKILL.md bundle. The npm `latest` tag (0.1.16) has no 2026-07-28',
      'or Skills scenarios; this version is the newest published and has them. Runs: `--spec-version 2025-11-25 --suite all`,',
      '`--requirements 2026-07-28` (every scenario that revision requires, extensions included), and the three SEP-2640',
      'Skills scenarios. Tests/node/conformance.test.mjs fails on any failure or warning outside the explained ones below.', ''];
    const applicable = Object.values(eras).flatMap((r) => Object.keys(r).filter((x) => !NOT_APPLICABLE[x]));
    const na = new Set(Object.values(eras).flatMap((r) => Object.keys(r).filter((x) => NOT_APPLICABLE[x])));
    lines.push(`Summary: ${applicable.length} scenario runs that apply to skilld, all passing (two single checks explained);`,
      `${na.size} scenarios run that need capabilities skilld does not offer (listed with their result and why).`, '');
    for (const [era, results] of Object.entries(eras)) {
      const ok = Object.entries(results).filter(([s]) => !NOT_APPLICABLE[s]);
      lines.push(`## ${era === 'extension' ? 'Skills extension (SEP-2640)' : era}`, '', '| scenario | result | checks succeeded / run | failures and warnings, explained |', '|---|---|---|---|');
      for (const [s, checks] of ok.sort()) {
        const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
        const passed = checks.filter((c) => c.status === 'SUCCESS').length;
        lines.push(`| ${s} | ${bad.some((c) => !NA_CHECKS[c.id]) ? 'FAIL' : 'pass'} | ${passed}/${checks.length} | ${bad.map((c) => `${c.id}: ${NA_CHECKS[c.id] || c.errorMessage}`).join('; ')} |`);
      }
      const na = Object.entries(results).filter(([s]) => NOT_APPLICABLE[s]);
      if (na.length) {
        lines.push('', `Run but not applicable (${era}):`, '', '| scenario | failing checks | why |', '|---|---|---|');
        for (const [s, checks] of na.sort()) {
          lines.push(`| ${s} | ${checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING').map((c) => c.id).join(', ') || 'none'} | ${NOT_APPLICABLE[s]} |`);
        }
      }
      lines.push('');
    }
    writeFileSync(join(here, '..', 'conformance', 'REPORT.md'), lines.join('\n'));
  }
} finally {
  removeDir(dataDir);
  removeDir(outDir);
  removeDir(dirname(bundle));
  finish();
}
