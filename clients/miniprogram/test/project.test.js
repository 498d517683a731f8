// The example project's structure, the copy step (build-client.mjs) and the
// component's view model. No service needed.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const acorn = require('acorn');
const { simulate, MINIPROGRAM_ROOT } = require('./lib/env.js');

const EXAMPLE = path.resolve(MINIPROGRAM_ROOT, '..');
const COMPONENT_DIR = path.join(MINIPROGRAM_ROOT, 'components', 'g-cite-answer');
const REPO = path.resolve(EXAMPLE, '..', '..', '..');
const BUILD = path.join(REPO, 'clients', 'miniprogram', 'scripts', 'build-client.mjs');

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function pageFiles(base) {
  return ['.js', '.json', '.wxml', '.wxss'].map(function (ext) { return base + ext; });
}

/** Resolve a usingComponents value the way the mini program does. */
function componentPath(from, value) {
  return value.charAt(0) === '/' ? path.join(MINIPROGRAM_ROOT, value) : path.join(path.dirname(from), value);
}

test('project.config.json names the mini program root and compile type', function () {
  const cfg = readJson(path.join(EXAMPLE, 'project.config.json'));
  assert.equal(cfg.compileType, 'miniprogram');
  assert.equal(typeof cfg.appid, 'string');
  assert.ok(cfg.appid.length > 0);
  assert.equal(path.resolve(EXAMPLE, cfg.miniprogramRoot), MINIPROGRAM_ROOT);
  assert.equal(cfg.setting.urlCheck, false, 'DevTools may reach gcite demo on 127.0.0.1');
  // enableChunked needs base library 2.20.2 or later.
  const [major, minor] = cfg.libVersion.split('.').map(Number);
  assert.ok(major > 2 || (major === 2 && minor >= 21), 'libVersion ' + cfg.libVersion);
});

test('app.json: every page has its four files; every used component resolves to a component', function () {
  const app = readJson(path.join(MINIPROGRAM_ROOT, 'app.json'));
  assert.ok(Array.isArray(app.pages) && app.pages.length >= 1);
  assert.equal(app.pages[0], 'pages/chat/chat', 'the chat page opens first');
  assert.ok(fs.existsSync(path.join(MINIPROGRAM_ROOT, 'app.js')));
  assert.ok(fs.existsSync(path.join(MINIPROGRAM_ROOT, app.sitemapLocation)));
  readJson(path.join(MINIPROGRAM_ROOT, app.sitemapLocation));
  const seen = new Set();
  const queue = app.pages.map(function (p) { return path.join(MINIPROGRAM_ROOT, p); });
  while (queue.length) {
    const base = queue.shift();
    if (seen.has(base)) continue;
    seen.add(base);
    for (const f of pageFiles(base)) assert.ok(fs.existsSync(f), 'missing ' + path.relative(MINIPROGRAM_ROOT, f));
    const json = readJson(base + '.json');
    const using = json.usingComponents || {};
    for (const name of Object.keys(using)) {
      assert.match(name, /^[a-z][a-z0-9-]*$/, 'component tag ' + name);
      const target = componentPath(base, using[name]);
      assert.ok(fs.existsSync(target + '.json'), name + ' -> ' + using[name] + ' not found');
      assert.equal(readJson(target + '.json').component, true, using[name] + '.json must say "component": true');
      queue.push(target);
    }
  }
  assert.ok(seen.has(path.join(COMPONENT_DIR, 'index')), 'the chat page uses <g-cite-answer>');
  const wxml = fs.readFileSync(path.join(MINIPROGRAM_ROOT, 'pages', 'chat', 'chat.wxml'), 'utf8');
  assert.match(wxml, /<g-cite-answer\b/);
});

test('WXML and WXSS compile with WeChat\'s own compilers (wcc / wcsc of miniprogram-compiler)', function () {
  const compiler = require('miniprogram-compiler');
  const wxml = compiler.wxmlToJs(MINIPROGRAM_ROOT);
  for (const f of ['pages/chat/chat.wxml', 'pages/webview/webview.wxml', 'components/g-cite-answer/index.wxml']) {
    assert.ok(wxml.indexOf(f) >= 0, f + ' compiled');
  }
  const wxss = compiler.wxssToJs(MINIPROGRAM_ROOT);
  assert.ok(wxss.indexOf('components/g-cite-answer/index.wxss') >= 0);
  // The compiler does reject a broken template (so this check can fail).
  const broken = fs.mkdtempSync(path.join(os.tmpdir(), 'gcite-wcc-'));
  fs.writeFileSync(path.join(broken, 'a.wxml'), '<view><text>{{a}}</view');
  assert.throws(function () { compiler.wxmlToJs(broken); }, /wxml/);
  fs.rmSync(broken, { recursive: true, force: true });
});

test('the page and the component compile and render in the simulator', function () {
  const id = simulate.load(path.join(MINIPROGRAM_ROOT, 'pages', 'chat', 'chat'), 'chat-page', { rootPath: MINIPROGRAM_ROOT, compiler: 'official' });
  const page = simulate.render(id);
  assert.match(page.dom.textContent, /发送/);
  assert.match(page.dom.textContent, /身份：访客/);
});

test('every JavaScript file of the mini program parses as an ES2017 script', function () {
  const files = [];
  (function walk(dir) {
    for (const name of fs.readdirSync(dir)) {
      const full = path.join(dir, name);
      if (fs.statSync(full).isDirectory()) walk(full);
      else if (name.endsWith('.js')) files.push(full);
    }
  })(MINIPROGRAM_ROOT);
  assert.ok(files.some(function (f) { return f.indexOf(path.join('lib', 'gcite-client')) >= 0; }), 'the copied client is there (run the build first)');
  for (const f of files) {
    assert.doesNotThrow(function () {
      acorn.parse(fs.readFileSync(f, 'utf8'), { ecmaVersion: 2017, sourceType: 'script' });
    }, path.relative(MINIPROGRAM_ROOT, f));
  }
});

test('the wxss keeps the seed rules: rows >= 44px, superscript #2563eb 0.75em 600', function () {
  const wxss = fs.readFileSync(path.join(COMPONENT_DIR, 'index.wxss'), 'utf8');
  const rule = function (selector) {
    const m = new RegExp('(^|\\n)' + selector.replace(/\./g, '\\.') + '\\s*\\{([^}]*)\\}').exec(wxss);
    assert.ok(m, 'no rule ' + selector);
    return m[2];
  };
  const row = rule('.g-cite-item');
  assert.ok(Number(/min-height:\s*(\d+)px/.exec(row)[1]) >= 44);
  assert.ok(Number(/min-height:\s*(\d+)px/.exec(rule('.panel-head'))[1]) >= 44);
  const sup = rule('.g-cite');
  assert.match(sup, /color:\s*#2563eb/);
  assert.match(sup, /font-size:\s*0\.75em/);
  assert.match(sup, /font-weight:\s*600/);
  assert.match(sup, /vertical-align:\s*super/);
  assert.match(rule('.g-cite-item-icon'), /width:\s*20px/);
  for (const icon of ['file', 'globe']) {
    assert.match(fs.readFileSync(path.join(COMPONENT_DIR, 'icons', icon + '.svg'), 'utf8'), /stroke="#8f959e"/);
  }
  // The answer text goes to rich-text as a node tree bound from data, never a string literal.
  const wxml = fs.readFileSync(path.join(COMPONENT_DIR, 'index.wxml'), 'utf8');
  assert.match(wxml, /<rich-text[^>]*nodes="\{\{item\.nodes\}\}"/);
  assert.match(wxml, /<rich-text[^>]*nodes="\{\{tail\}\}"/);
  assert.doesNotMatch(wxml, /bindtap="[^"]*"[^>]*class="g-cite"/);
});

// ------------------------------------------------------------------ copy step

test('build-client: the CommonJS copy exports what the ES module exports and behaves the same', async function () {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gcite-build-'));
  const out = path.join(tmp, 'gcite-client');
  const { build, MARKDOWN_IT } = await import(BUILD);
  const res = build({ out: out });
  // markdown-it is copied beside the client byte for byte.
  assert.ok(fs.readFileSync(path.join(tmp, 'markdown-it', 'markdown-it.min.js')).equals(fs.readFileSync(path.join(MARKDOWN_IT, 'markdown-it.min.js'))));
  assert.equal(typeof require(path.join(tmp, 'markdown-it', 'markdown-it.min.js')), 'function');
  assert.ok(res.files.indexOf('index.js') >= 0);
  const esm = await import(path.join(REPO, 'clients', 'js', 'src', 'index.js'));
  const cjs = require(path.join(out, 'index.js'));
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
  const sse =
    'data: {"event":"node_finished","data":{"node_type":"code","outputs":{"chunk_metadata":[{"id":"7","source_type":"web","document_title":"网页"},{"id":"2","source_type":"rag","document_title":"文档"}]}}}\n\n' +
    'data: {"event":"message","answer":"登录[C:7]，再[C:"}\n\n' +
    'data: {"event":"message","answer":"2]上报【C：7】。"}\n\n' +
    'data: {"event":"message_end","metadata":{}}\n\n';
  const run = function (mod) {
    const s = new mod.AnswerStream();
    const bytes = Buffer.from(sse, 'utf8');
    for (let i = 0; i < bytes.length; i += 3) s.pushBytes(new Uint8Array(bytes.subarray(i, i + 3)));
    const r = s.end();
    return { answer: r.answer, segments: r.segments, citations: r.citations, panel: r.panel };
  };
  const a = run(esm);
  assert.deepEqual(run(cjs), a);
  assert.deepEqual(a.citations, [['7', 1], ['2', 2]]);
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('build-client: the installed copy is up to date with clients/js/src', async function () {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gcite-build-'));
  const { build } = await import(BUILD);
  build({ out: path.join(tmp, 'gcite-client') });
  for (const dir of ['gcite-client', 'markdown-it']) {
    const installed = path.join(COMPONENT_DIR, 'lib', dir);
    for (const name of fs.readdirSync(path.join(tmp, dir))) {
      assert.equal(fs.readFileSync(path.join(installed, name), 'utf8'), fs.readFileSync(path.join(tmp, dir, name), 'utf8'),
        dir + '/' + name + ' is stale: run node clients/miniprogram/scripts/build-client.mjs');
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('build-client: module syntax it cannot carry is refused with the file and line', async function () {
  const { toCommonJs, BuildError } = await import(BUILD);
  assert.equal(
    toCommonJs("import { a, b as c } from './x.js';\nexport function f() { return a + c; }\n", 'm.js'),
    "'use strict';\nvar _x = require(\"./x.js\"); var a = _x.a, c = _x.b;\nfunction f() { return a + c; }\nexports.f = f;\n"
  );
  for (const [src, why] of [
    ['export default function () {}\n', /m\.js:1: unsupported module syntax/],
    ["export * from './x.js';\n", /m\.js:1: unsupported/],
    ["import x from './x.js';\n", /m\.js:1: unsupported/],
    ["var x = 1;\nvar m = import('./x.js');\n", /m\.js:2: dynamic import/],
    ["import { a } from 'markdown-it';\n", /m\.js:1: unsupported/],
  ]) {
    assert.throws(function () { toCommonJs(src, 'm.js'); }, function (e) { return e instanceof BuildError && why.test(e.message); }, src);
  }
});

test('build-client CLI: exit 2 and one line on stderr for a bad source directory', function () {
  const { spawnSync } = require('node:child_process');
  const r = spawnSync(process.execPath, [BUILD, '--src', path.join(os.tmpdir(), 'no-such-dir-gcite'), '--out', path.join(os.tmpdir(), 'gcite-out-unused')], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^build-client: cannot read /);
  assert.equal(r.stderr.trim().split('\n').length, 1);
});

// ------------------------------------------------------------------ view model

const view = require(path.join(COMPONENT_DIR, 'view.js'));

test('Markdown answers: rich-text blocks with styled superscripts, raw HTML and bad links as text', function () {
  const rt = require('./lib/richtext.js');
  const blocks = view.markdownBlocks([
    { text: '## 巡更\n\n**夜间**每小时一次' }, { cite: '7', idx: 1 }, { cite: '2', idx: 2 },
    { text: '。\n\n- <img src=x onerror=alert(1)>\n- [点我](javascript:alert(1)) &amp;' },
  ]);
  assert.ok(Array.isArray(blocks) && blocks.length === 3);
  assert.deepEqual(blocks.map(function (b) { return b.key; }), [0, 1, 2]);
  const nodes = [].concat.apply([], blocks.map(function (b) { return b.nodes; }));
  assert.deepEqual(rt.validate(nodes, view.RICH_TEXT_TAGS, view.RICH_TEXT_ATTRS), []);
  assert.deepEqual(blocks.map(function (b) { return b.nodes[0].name; }), ['h2', 'p', 'ul']);
  assert.deepEqual(rt.supNumbers(nodes), [1, 2]);
  const html = rt.toHtml(nodes);
  assert.doesNotMatch(html, /<img|<a /);
  assert.match(rt.toText(nodes), /<img src=x onerror=alert\(1\)>/);
  assert.match(rt.toText(nodes), /点我 &$/, 'a javascript: link shows its text only; an entity is Markdown text');
  // §6.1: the superscript's inline style (rich-text does not see the component's wxss).
  const sup = (function find(list) {
    for (const n of list) {
      if (n.name === 'sup' && n.attrs.class === 'g-cite') return n;
      const f = n.children && find(n.children);
      if (f) return f;
    }
    return null;
  })(nodes);
  assert.match(sup.attrs.style, /color:#2563eb;font-size:0\.75em;font-weight:600;vertical-align:super/);
});

test('sheetModel: actions, colours and notices by source type and URL', function () {
  const row = function (chunk) { return { idx: 1, rawId: '3', chunk: chunk }; };
  const opts = { webViewPage: '/pages/webview/webview', webViewDomains: ['docs.example.com', '*.example.org'] };
  let s = view.sheetModel(row({ source_type: 'rag', document_title: 'T', url: 'https://files.example.com/a.PDF?x=1#p' }), opts);
  assert.deepEqual([s.action, s.office, s.officeType, s.buttonDisabled, s.headStyle], ['document', true, 'pdf', false, 'background:#eff6ff;color:#2563eb;']);
  s = view.sheetModel(row({ source_type: 'rag', source_file_url: 'https://docs.example.com/a.html' }), opts);
  assert.deepEqual([s.action, s.office, s.buttonText], ['webview', false, '完整原文']);
  s = view.sheetModel(row({ source_type: 'web', url: 'https://a.example.org/p.pdf' }), opts);
  assert.deepEqual([s.action, s.office, s.tag, s.headStyle], ['webview', false, '公网', 'background:#f0fdf4;color:#15803d;']);
  s = view.sheetModel(row({ source_type: 'web', url: 'https://example.org/' }), opts);
  assert.deepEqual([s.action, s.buttonText], ['copy', '复制链接'], 'the bare domain is not *.example.org');
  s = view.sheetModel(row({ source_type: 'web', url: 'https://docs.example.com.evil.test/' }), opts);
  assert.equal(s.action, 'copy');
  s = view.sheetModel(row({ source_type: 'web', url: 'https://docs.example.com@evil.test/' }), opts);
  assert.equal(s.action, 'none', 'a URL with user info is refused (safeUrl fails closed)');
  // user info never becomes a link (docs/stream-contract.md §7, the URL rule fails closed)
  s = view.sheetModel(row({ source_type: 'web', url: 'https://x@evil.test/docs.example.com' }), opts);
  assert.deepEqual([s.action, s.buttonDisabled], ['none', true]);
  for (const bad of ['javascript:alert(1)', 'data:text/html,x', '//docs.example.com/a', 'oss://bucket/a.docx', 'https://docs.example.com/a b']) {
    s = view.sheetModel(row({ source_type: 'web', url: bad }), opts);
    assert.deepEqual([s.action, s.buttonDisabled, s.url, s.hint], ['none', true, '', '原文链接不是网页地址，无法打开'], bad);
  }
  s = view.sheetModel(row({ source_type: 'rag', document_title: 'T' }), opts);
  assert.deepEqual([s.action, s.buttonDisabled, s.hint], ['none', true, '该来源没有原文链接']);
  s = view.sheetModel({ idx: 2, rawId: '9', chunk: null }, opts);
  assert.deepEqual([s.title, s.type, s.content], ['来源 9', 'rag', '（该来源没有可显示的正文片段）']);
  // No web-view page configured: nothing opens in a web-view.
  s = view.sheetModel(row({ source_type: 'rag', url: 'https://docs.example.com/a.html' }), { webViewDomains: ['docs.example.com'] });
  assert.equal(s.action, 'copy');
});

test('panelRows: idMap order, icons by source_type, display_subtitle as is', function () {
  const rows = view.panelRows([
    { idx: 1, rawId: '7', chunk: { source_type: 'web', document_title: '网页', display_subtitle: '知乎 · 2025-08-12' } },
    { idx: 2, rawId: '2', chunk: { source_type: 'rag', document_title: '文档', display_subtitle: '' } },
    { idx: 3, rawId: '9', chunk: null },
  ]);
  assert.deepEqual(rows.map(function (r) { return [r.rawId, r.idx, r.icon, r.title, r.subtitle]; }), [
    ['7', 1, 'globe', '网页', '知乎 · 2025-08-12'],
    ['2', 2, 'file', '文档', ''],
    ['9', 3, 'file', '来源 9', ''],
  ]);
});

test('sheetModel with the verifier\'s report: the supporting sentence as its own part, weak citations flagged', function () {
  const content = '一级故障：物业须在 5 分钟内到场。\n二级故障：物业须在 30 分钟内到场。';
  const sentence = '二级故障：物业须在 30 分钟内到场。';
  const at = content.indexOf(sentence);
  const report = {
    sentences: [
      { citations: [{ id: '3', score: 0.8, supported: true, support: { text: sentence, start: at, end: at + sentence.length } }] },
      { citations: [{ id: '4', score: 0.1, supported: false, support: { text: 'x', start: 0, end: 1 } }] },
    ],
  };
  const row = function (raw, text) { return { idx: 1, rawId: raw, chunk: { source_type: 'rag', document_title: 'T', content: text } }; };
  let s = view.sheetModel(row('3', content), { report: report });
  assert.deepEqual(s.parts, [{ text: content.slice(0, at), support: false }, { text: sentence, support: true }]);
  assert.deepEqual([s.supportId, s.support, s.weak, s.weakText], [view.SUPPORT_ID, sentence, false, '']);
  s = view.sheetModel(row('4', '会议室内禁止明火。'), { report: report });
  assert.deepEqual([s.parts, s.supportId, s.weak, s.weakText], [[{ text: '会议室内禁止明火。', support: false }], '', true, '该来源未能直接支持这句话']);
  // no report, or a chunk the report does not name: the plain text, nothing flagged
  for (const opts of [{}, { report: report }]) {
    s = view.sheetModel(row('5', content), opts);
    assert.deepEqual([s.parts, s.supportId, s.weak], [[{ text: content, support: false }], '', false]);
  }
  // a chunk without text keeps its placeholder, never highlighted
  s = view.sheetModel(row('3', ''), { report: report });
  assert.deepEqual([s.content, s.supportId], ['（该来源没有可显示的正文片段）', '']);
  // the panel numbers of weak citations are marked
  const rows = view.panelRows([{ idx: 1, rawId: '3', chunk: null }, { idx: 2, rawId: '4', chunk: null }], ['4']);
  assert.deepEqual(rows.map(function (r) { return r.weak; }), [false, true]);
  assert.deepEqual(view.panelRows([{ idx: 1, rawId: '3', chunk: null }]).map(function (r) { return r.weak; }), [false]);
});
