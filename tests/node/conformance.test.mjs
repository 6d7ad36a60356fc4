// @modelcontextprotocol/conformance against the real `skilld serve`: every
// scenario that applies to a tools server must pass with no failure and no
// warning. The others need the suite's fixture tools, resources, prompts,
// completion, sampling or elicitation, which a skills server does not offer;
// they are listed with the reason in tests/conformance/REPORT.md (rewritten
// when WRITE_REPORT=1).
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { check, assert, finish, tempDir, removeDir, createKey, startServer } from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);
const APPLICABLE = [
  'server-initialize', 'ping', 'logging-set-level', 'tools-list',
  'dns-rebinding-protection', 'server-sse-polling', 'server-sse-multiple-streams',
];
const NOT_APPLICABLE = {
  'completion-complete': 'needs completion/complete; skilld offers no prompts or resource templates to complete',
  'tools-call-simple-text': 'needs the fixture tool test_simple_text',
  'tools-call-image': 'needs the fixture tool test_image_content',
  'tools-call-audio': 'needs the fixture tool test_audio_content',
  'tools-call-embedded-resource': 'needs the fixture tool test_embedded_resource',
  'tools-call-mixed-content': 'needs the fixture tool test_multiple_content_types',
  'tools-call-with-logging': 'needs the fixture tool test_tool_with_logging',
  'tools-call-error': 'needs the fixture tool test_error_handling (skill errors are covered by tests/node/mcp.test.mjs)',
  'tools-call-with-progress': 'needs the fixture tool test_tool_with_progress (progress is covered by tests/node/mcp.test.mjs)',
  'tools-call-sampling': 'needs the fixture tool test_sampling; skills never ask the client to sample',
  'tools-call-elicitation': 'needs the fixture tool test_elicitation; skills never elicit',
  'json-schema-2020-12': 'needs the fixture tool json_schema_2020_12_tool',
  'elicitation-sep1034-defaults': 'needs a fixture elicitation tool',
  'elicitation-sep1330-enums': 'needs a fixture elicitation tool',
  'resources-list': 'skilld is a tools server: no resources capability',
  'resources-read-text': 'no resources capability',
  'resources-read-binary': 'no resources capability',
  'resources-templates-read': 'no resources capability',
  'resources-subscribe': 'no resources capability',
  'resources-unsubscribe': 'no resources capability',
  'prompts-list': 'skilld is a tools server: no prompts capability',
  'prompts-get-simple': 'no prompts capability',
  'prompts-get-with-args': 'no prompts capability',
  'prompts-get-embedded-resource': 'no prompts capability',
  'prompts-get-with-image': 'no prompts capability',
};

const dataDir = tempDir();
const outDir = tempDir('skilld-conformance-');
const rows = [];
try {
  const key = createKey(dataDir, 'conformance', 'skills:read,skills:execute');
  const server = await startServer(dataDir, { SKILLD_ANONYMOUS_KEY: key.id, SKILLD_LOG_LEVEL: 'warn' });
  try {
    for (const scenario of APPLICABLE) {
      await check(`conformance ${scenario}`, async () => {
        const out = join(outDir, scenario);
        await run('npx', ['conformance', 'server', '--url', `${server.url}/mcp`, '--scenario', scenario, '-o', out],
          { cwd: here, timeout: 120000 }).catch((e) => e); // the verdict is read from checks.json
        const sub = readdirSync(out)[0];
        const checks = JSON.parse(readFileSync(join(out, sub, 'checks.json'), 'utf8'));
        const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
        const good = checks.filter((c) => c.status === 'SUCCESS' || c.status === 'INFO');
        rows.push([scenario, bad.length ? 'FAIL' : 'pass', checks.map((c) => `${c.id}: ${c.status}`).join('; ')]);
        assert(checks.length > 0 && good.length > 0, 'no checks ran');
        assert(bad.length === 0, bad.map((c) => `${c.id}: ${c.errorMessage || c.status}`).join('; '));
      });
    }
  } finally {
    await server.stop();
  }
  if (process.env.WRITE_REPORT === '1') {
    const lines = ['# MCP conformance report', '',
      'Produced by `tests/node/conformance.test.mjs` (`WRITE_REPORT=1`) with',
      '`@modelcontextprotocol/conformance` 0.1.13 against `skilld serve`.', '',
      '| scenario | result | checks |', '|---|---|---|',
      ...rows.map((r) => `| ${r[0]} | ${r[1]} | ${r[2]} |`), '',
      '## Scenarios that do not apply to a skills server', '',
      '| scenario | reason |', '|---|---|',
      ...Object.entries(NOT_APPLICABLE).map(([s, why]) => `| ${s} | ${why} |`), ''];
    writeFileSync(join(here, '..', 'conformance', 'REPORT.md'), lines.join('\n'));
  }
} finally {
  removeDir(dataDir);
  removeDir(outDir);
  finish();
}
