// Safe rendering helpers with hostile inputs.
import test from 'node:test';
import assert from 'node:assert/strict';
import { buildPanel, escapeHtml, isOfficeUrl, renderPanelHtml, renderSegmentsHtml, safeUrl, subtitleOf } from '../src/index.js';
import { SEED_CHUNKS } from '../testlib/shared.js';

var XSS = '<img src=x onerror=alert(1)>';

test('escapeHtml escapes markup and quotes; null is empty', function () {
  assert.equal(escapeHtml(XSS), '&lt;img src=x onerror=alert(1)&gt;');
  assert.equal(escapeHtml('"\'&'), '&quot;&#39;&amp;');
  assert.equal(escapeHtml(null), '');
  assert.equal(escapeHtml(undefined), '');
  assert.equal(escapeHtml(7), '7');
});

test('safeUrl keeps only http(s) URLs with a host', function () {
  assert.equal(safeUrl('  https://example.com/a?b=1#c  '), 'https://example.com/a?b=1#c');
  assert.equal(safeUrl('HTTP://EXAMPLE.COM'), 'HTTP://EXAMPLE.COM');
  for (var bad of ['javascript:alert(1)', ' JAVASCRIPT:alert(1)', 'jav\tascript:alert(1)', 'data:text/html,<script>alert(1)</script>',
    'DATA:image/svg+xml;base64,AAAA', 'vbscript:x', 'https://x.com/a b', 'https://x.com/\u3000y', '//evil.com', 'https:/x', 'http://', 'https:// x', 'http://\u0000evil',
    'oss://kb-raw/巡更.pdf', 'ftp://x', '', null, undefined, 42, { href: 'https://x' }]) {
    assert.equal(safeUrl(bad), null, JSON.stringify(String(bad)));
  }
});

test('renderSegmentsHtml: escaped text, <br> for newlines, seed §4.3 superscripts', function () {
  var html = renderSegmentsHtml([
    { text: '登录' + XSS + '\n下一行' }, { cite: '7', idx: 1 }, { text: '。' }, { cite: '"><script>', idx: '2"><b>' }, null, 'x',
  ]);
  assert.equal(html,
    '登录&lt;img src=x onerror=alert(1)&gt;<br>下一行' +
    '<sup class="g-cite" data-raw-id="7" data-idx="1">1</sup>。' +
    '<sup class="g-cite" data-raw-id="&quot;&gt;&lt;script&gt;" data-idx="2&quot;&gt;&lt;b&gt;">2&quot;&gt;&lt;b&gt;</sup>');
  assert.equal(renderSegmentsHtml('nope'), '');
});

test('renderPanelHtml: seed §4.3 panel, icons by source_type, safe links only, hostile titles escaped', function () {
  var chunks = SEED_CHUNKS.slice();
  chunks[1] = Object.assign({}, chunks[1], { document_title: XSS, display_subtitle: '', url: 'javascript:alert(1)', source_file_url: 'https://files.example.com/a b.pdf' });
  chunks[2] = Object.assign({}, chunks[2], { document_title: ' ', document_name: '方案.docx', source_type: '"><x>' });
  var panel = buildPanel([['7', 1], ['2', 2], ['3', 3], ['42', 4]], chunks);
  var html = renderPanelHtml(panel);
  assert.equal(html,
    '<div class="citation-panel">' +
    '<div class="g-cite-item" data-raw-id="7" data-source-type="web"><sup>1</sup><i class="fa-solid fa-globe g-cite-item-icon"></i>' +
    '<span class="g-cite-item-title"><a class="g-cite-item-link" href="https://example.com/7" target="_blank" rel="noopener noreferrer">物业巡检流程标准 - 知乎</a></span>' +
    '<span class="g-cite-item-subtitle">知乎 · 2025-08-12</span></div>' +
    '<div class="g-cite-item" data-raw-id="2" data-source-type="rag"><sup>2</sup><i class="fa-solid fa-file-lines g-cite-item-icon"></i>' +
    '<span class="g-cite-item-title">&lt;img src=x onerror=alert(1)&gt;</span></div>' +
    '<div class="g-cite-item" data-raw-id="3" data-source-type="&quot;&gt;&lt;x&gt;"><sup>3</sup><i class="fa-solid fa-file-lines g-cite-item-icon"></i>' +
    '<span class="g-cite-item-title">方案.docx</span><span class="g-cite-item-subtitle">测试知识库20260610</span></div>' +
    '<div class="g-cite-item" data-raw-id="42" data-source-type=""><sup>4</sup><i class="fa-solid fa-file-lines g-cite-item-icon"></i>' +
    '<span class="g-cite-item-title">来源 42</span></div>' +
    '</div>');
  assert.equal(renderPanelHtml([]), '');
  assert.equal(renderPanelHtml(null), '');
});

test('buildPanel: display order, each chunk once, unknown ids with chunk null, Map/object/array input', function () {
  var byId = new Map(SEED_CHUNKS.map(function (c) { return [c.id, c]; }));
  var rows = buildPanel([['6', 3], ['7', 1], ['2', 2], ['7', 1], ['99', 4]], byId);
  assert.deepEqual(rows.map(function (r) { return [r.idx, r.rawId, r.chunk && r.chunk.id]; }), [[1, '7', '7'], [2, '2', '2'], [3, '6', '6'], [4, '99', null]]);
  var obj = {};
  SEED_CHUNKS.forEach(function (c) { obj[c.id] = c; });
  assert.deepEqual(buildPanel([['3', 1]], obj)[0].chunk, SEED_CHUNKS[2]);
  assert.deepEqual(buildPanel([['3', 1]], null), [{ idx: 1, rawId: '3', chunk: null }]);
  assert.deepEqual(buildPanel(null, obj), []);
});

test('subtitleOf uses display_subtitle as is; isOfficeUrl ignores query, fragment and case', function () {
  assert.equal(subtitleOf(SEED_CHUNKS[6]), '知乎 · 2025-08-12');
  assert.equal(subtitleOf({ site_name: '知乎' }), '');
  assert.equal(subtitleOf(null), '');
  assert.equal(subtitleOf({ display_subtitle: 5 }), '');
  for (var yes of ['https://x/a.pdf', 'https://x/a.DOCX?sig=1', 'https://x/a.Doc#p=2', 'oss://kb-raw/2026/06/巡更.pdf']) assert.equal(isOfficeUrl(yes), true, yes);
  for (var no of ['https://x/a.pdf.html', 'https://x/?f=a.pdf', 'https://x/a#b.pdf', 'https://x/docx', '', null, 3]) assert.equal(isOfficeUrl(no), false, String(no));
});
