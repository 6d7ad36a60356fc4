// SKILL.md front matter as skilld reads it must be exactly what MCP hosts
// read: SkillsClient (the official v2 client) parses every SKILL.md it
// reads and refuses the skill when the parsed front matter differs from
// the entry's in any field. So each sample below is registered with
// `skilld skills add`, listed and read through SkillsClient over stdio;
// a sample skilld cannot read exactly is refused at registration with the
// line number, and never served.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { SkillsClient } from '@modelcontextprotocol/client/ext/skills';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SKILLD, check, assert, finish, tempDir, removeDir, createKey } from './lib.mjs';

const data = tempDir('skilld-fm-');
const dirs = tempDir('skilld-fm-bundles-');
const key = createKey(data, 'fm', 'skills:read');

// name -> front matter lines after "name:" (each sample also gets a description unless it sets one).
const VALID = {
  'literal-clip': ['description: |', '  line one', '  line two', '', ''],
  'literal-strip': ['description: |-', '  kept', '   more indented', ''],
  'literal-keep': ['description: |+', '  keep', '', ''],
  'folded': ['description: >', '  folded', '  text', '', '  new paragraph', '    more indented', '  back'],
  'folded-strip': ['description: >-', '  one', '  two'],
  'double-quoted': ['description: "caf\\u00e9 \\t tab \\\\ back \\"q\\" \\x41 \\U0001F600"'],
  'single-quoted': ["description: 'it''s # not a comment'"],
  'plain-multiline': ['description: first', '  second', '', '  third   '],
  'typed-extras': ['description: typed', 'x-int: 007', 'x-hex: 0x1F', 'x-oct: 0o17', 'x-float: 1.5e3',
    'x-dot: .5', 'x-neg: -12', 'x-bool: True', 'x-false: FALSE', 'x-null: ~', 'x-empty:', 'x-str: 1.2.3',
    'x-plus: +7', 'x-exp-only: 1e5'],
  'nested': ['description: nested', 'metadata:', '  author: "Ada"  # a comment', "  version: '2'",
    '  empty-string: ""', 'x-deep:', '  a:', '    b: c', '    d: [1, 2]'],
  'sequences': ['description: seqs', 'x-flow: [a, "b c", \'d\', 1, true, null, ]', 'x-block:', '  - one',
    "  - 'two'", '  - 3', 'x-compact:', '- a', '- b', 'x-empty-flow: []'],
  'comments': ['# leading comment', 'description: value # trailing', '', '# between', 'license: MIT'],
  'unicode': ['description: 日本語の説明 — with emoji 🚀 and ünïcödé'],
  'quoted-key': ['description: d', '"quoted key": v', "'single: key': w"],
  'colons': ['description: d', 'x-url: http://example.com:8080/a?b=c', 'x-time: 12:30', 'allowed-tools: Bash(git:*) Read'],
  'crlf': ['description: windows', 'license: Apache-2.0'],
};
const REFUSED = {
  'anchor': ['description: &a d'],
  'tag': ['description: !!str d'],
  'flow-map': ['description: d', 'x: {a: 1}'],
  'tab-indent': ['description: d', 'metadata:', '\tk: v'],
  'multiline-quoted': ['description: "open', '  close"'],
  'infinity': ['description: d', 'x: .inf'],
  'huge-int': ['description: d', 'x: 123456789012345678901'],
  'duplicate': ['description: d', 'description: e'],
  'metadata-not-strings': ['description: d', 'metadata:', '  n: 1'],
  'nested-in-sequence': ['description: d', 'x:', '  - a: 1'],
  'bad-name-case': null, // the name itself breaks the Agent Skills rule
};

function write(name, lines, eol = '\n') {
  const dir = join(dirs, name);
  mkdirSync(dir, { recursive: true });
  const fm = lines === null ? ['name: Bad-Name-Case', 'description: d'] : [`name: ${name}`, ...lines];
  if (!fm.some((l) => l.startsWith('description:'))) fm.push('description: d');
  writeFileSync(join(dir, 'SKILL.md'), ['---', ...fm, '---', `# ${name}`, ''].join(eol));
  return dir;
}

const add = (dir) => execFileSync(SKILLD, ['--data-dir', data, 'skills', 'add', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

try {
  for (const [name, lines] of Object.entries(VALID)) {
    await check(`registers ${name}`, async () => { add(write(name, lines, name === 'crlf' ? '\r\n' : '\n')); });
  }
  for (const [name, lines] of Object.entries(REFUSED)) {
    await check(`refuses ${name} with a reason`, async () => {
      let err;
      try { add(write(name, lines)); } catch (e) { err = e; }
      assert(err && err.status !== 0, 'registered');
      const msg = String(err.stderr);
      assert(/invalid_input|too_large/.test(msg) && /SKILL\.md/.test(msg), msg);
    });
  }
  const client = new Client({ name: 'fm-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: SKILLD, args: ['--data-dir', data, 'mcp', '--key', key.id], stderr: 'ignore', env: { ...process.env } }));
  const skills = new SkillsClient(client);
  const listed = (await skills.list()).skills;
  await check('exactly the valid samples are served', async () => {
    const names = listed.map((s) => s.frontmatter.name).sort();
    assert(JSON.stringify(names) === JSON.stringify(Object.keys(VALID).sort()), names.join(','));
  });
  for (const entry of listed) {
    await check(`${entry.frontmatter.name}: the host's reading of SKILL.md equals the entry`, async () => {
      const f = await skills.read(entry); // throws SkillVerificationError('frontmatter') on any difference
      assert(f.verified && f.frontmatter.name === entry.frontmatter.name, 'not verified');
    });
  }
  await check('typed-extras: core-schema types, as a YAML parser gives them', async () => {
    const fm = listed.find((s) => s.frontmatter.name === 'typed-extras').frontmatter;
    const want = { 'x-int': 7, 'x-hex': 31, 'x-oct': 15, 'x-float': 1500, 'x-dot': 0.5, 'x-neg': -12, 'x-bool': true,
      'x-false': false, 'x-null': null, 'x-empty': null, 'x-str': '1.2.3', 'x-plus': 7, 'x-exp-only': 100000 };
    for (const [k, v] of Object.entries(want)) assert(fm[k] === v, `${k}: ${JSON.stringify(fm[k])}`);
  });
  await client.close();
} finally {
  removeDir(data);
  removeDir(dirs);
  finish();
}
