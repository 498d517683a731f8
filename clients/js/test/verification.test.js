// verification.js: the verifier's report (message_end.metadata.gcite_verification)
// turned into what the page and the mini program show: weak citations, the
// supporting sentence inside the chunk text, dotted superscripts in the tree.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  WEAK_SUPPORT_TEXT,
  bestSupport,
  chunkSupport,
  hasWeakCitation,
  markWeakCitations,
  supportParts,
  supportSpan,
  verificationOf,
  weakIds,
} from '../src/verification.js';
import * as client from '../src/index.js';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

var require = createRequire(import.meta.url);
var vendor = fileURLToPath(new URL('../../../src/gcite/service/static/vendor/markdown-it.min.js', import.meta.url));
var md = client.createMarkdownIt(require(vendor));

var CHUNK = '## 报修\n一级故障：物业须在 5 分钟内到场。二级故障（空调不制冷等）：物业须在 30 分钟内到场。';
var SENTENCE = '二级故障（空调不制冷等）：物业须在 30 分钟内到场。';

function report() {
  var at = CHUNK.indexOf(SENTENCE);
  return {
    version: 1,
    threshold: 0.45,
    sentences: [
      {
        index: 0,
        text: '空调不制冷属于二级故障，物业须在 30 分钟内到场。',
        citations: [{ id: '7', score: 0.81, supported: true, support: { text: SENTENCE, start: at, end: at + SENTENCE.length } }],
      },
      {
        index: 1,
        text: '空调不制冷时物业须在 5 分钟内到场。',
        citations: [
          { id: '9', score: 0.12, supported: false, support: { text: '会议室内禁止明火。', start: 0, end: 9 } },
          { id: '7', score: 0.4, supported: false, support: { text: '一级故障：物业须在 5 分钟内到场。', start: 6, end: 23 } },
        ],
      },
      { index: 2, text: '没有来源的句子。', citations: [{ id: 3, score: 0, supported: false, support: null }] },
    ],
    weak: [{ sentence: 1, id: '9' }, { sentence: 1, id: '7' }, { sentence: 2, id: '3' }],
  };
}

test('verificationOf: the report of message_end.metadata, null without one', function () {
  var r = report();
  assert.equal(verificationOf({ retriever_resources: [], gcite_verification: r }), r);
  assert.equal(verificationOf({ retriever_resources: [] }), null);
  assert.equal(verificationOf(null), null);
  assert.equal(verificationOf({ gcite_verification: 'yes' }), null);
  assert.equal(verificationOf({ gcite_verification: { sentences: 'x' } }), null);
});

test('bestSupport: per chunk the best-scoring citation; weakIds: the chunks whose best is unsupported', function () {
  var best = bestSupport(report());
  assert.deepEqual(Array.from(best.keys()), ['7', '9', '3']);
  assert.equal(best.get('7').score, 0.81);
  assert.equal(best.get('7').supported, true);
  assert.equal(best.get('9').supported, false);
  assert.equal(best.get('3').support, null, 'numeric ids are strings');
  assert.deepEqual(weakIds(report()), ['9', '3']);
  assert.deepEqual(weakIds(null), []);
  assert.deepEqual(weakIds({ sentences: [{ citations: [null, { score: 1 }, 'x'] }, null] }), []);
});

test('chunkSupport: the supported chunk gets its supporting sentence, the weak one none', function () {
  var r = report();
  var strong = chunkSupport(r, '7', CHUNK);
  assert.equal(strong.checked, true);
  assert.equal(strong.weak, false);
  assert.equal(CHUNK.slice(strong.span.start, strong.span.end), SENTENCE);
  var weak = chunkSupport(r, 9, '会议室内禁止明火。');
  assert.deepEqual(weak, { checked: true, weak: true, score: 0.12, span: null });
  assert.deepEqual(chunkSupport(r, '42', CHUNK), { checked: false, weak: false, score: null, span: null });
  assert.deepEqual(chunkSupport(null, '7', CHUNK), { checked: false, weak: false, score: null, span: null });
});

test('supportSpan: code-point offsets (the service counts in Python) become UTF-16 offsets', function () {
  var content = '📞 报修电话 6119。😀 二级故障须在 30 分钟内到场。';
  var text = '二级故障须在 30 分钟内到场。';
  var start = Array.from(content.slice(0, content.indexOf(text))).length; // in code points
  assert.equal(start, content.indexOf(text) - 2);
  var span = supportSpan(content, { text: text, start: start, end: start + Array.from(text).length });
  assert.equal(content.slice(span.start, span.end), text);
  assert.equal(span.start, content.indexOf(text), 'two astral characters before it: +2 code units');
});

test('supportSpan: stale offsets fall back to the text; text not in the chunk gives null', function () {
  assert.deepEqual(supportSpan(CHUNK, { text: SENTENCE, start: 0, end: 3 }), {
    start: CHUNK.indexOf(SENTENCE), end: CHUNK.indexOf(SENTENCE) + SENTENCE.length, text: SENTENCE,
  });
  assert.equal(supportSpan(CHUNK, { text: '<img src=x onerror=alert(1)>', start: 0, end: 28 }), null);
  assert.equal(supportSpan(CHUNK, { text: '', start: 0, end: 0 }), null);
  assert.equal(supportSpan(CHUNK, null), null);
  assert.equal(supportSpan('', { text: 'a', start: 0, end: 1 }), null);
  assert.equal(supportSpan(CHUNK, { text: '一级', start: 'x', end: {} }).start, CHUNK.indexOf('一级'));
});

test('supportParts: the chunk text cut around the span, nothing lost', function () {
  var span = chunkSupport(report(), '7', CHUNK).span;
  var parts = supportParts(CHUNK, span);
  assert.deepEqual(parts.map(function (p) { return p.support; }), [false, true]);
  assert.equal(parts.map(function (p) { return p.text; }).join(''), CHUNK);
  assert.equal(parts[1].text, SENTENCE);
  assert.deepEqual(supportParts('abc', { start: 0, end: 1 }), [{ text: 'a', support: true }, { text: 'bc', support: false }]);
  assert.deepEqual(supportParts('abc', null), [{ text: 'abc', support: false }]);
  assert.deepEqual(supportParts('abc', { start: 2, end: 9 }), [{ text: 'abc', support: false }], 'a span past the end is ignored');
  assert.deepEqual(supportParts('', null), []);
});

test('markWeakCitations: the weak chunk\'s superscripts get is-weak and the title, nothing else changes', function () {
  var tree = client.renderMarkdownTree([
    { text: '- 一级' }, { cite: '7', idx: 1 }, { text: '\n- 二级' }, { cite: '9', idx: 2 }, { cite: '7', idx: 1 },
  ], { md: md });
  var before = JSON.stringify(tree);
  var marked = markWeakCitations(tree, ['9']);
  assert.equal(JSON.stringify(tree), before, 'the input is not changed');
  var sups = [];
  (function walk(nodes) {
    nodes.forEach(function (n) {
      if (n.name === 'sup' && /g-cite\b/.test(n.attrs.class) && n.attrs['data-raw-id']) sups.push(n);
      if (n.children) walk(n.children);
    });
  })(marked);
  assert.deepEqual(sups.map(function (n) { return [n.attrs['data-raw-id'], n.attrs.class, n.attrs.title || '']; }), [
    ['7', 'g-cite', ''], ['9', 'g-cite is-weak', WEAK_SUPPORT_TEXT], ['7', 'g-cite', ''],
  ]);
  assert.equal(hasWeakCitation(tree, new Set(['9'])), true);
  assert.equal(hasWeakCitation(tree, ['3']), false);
  assert.equal(markWeakCitations(tree, []), tree);
  // in the mini program's rich-text nodes: the dotted style next to the superscript style
  var rich = JSON.stringify(client.toRichTextNodes(marked));
  assert.match(rich, /"class":"g-cite is-weak","style":"color:#2563eb;[^"]*;text-decoration:underline dotted/);
  // and in HTML (the page): class and title, text only
  assert.match(client.treeToHtml(marked), /<sup class="g-cite is-weak" data-raw-id="9" data-idx="2"[^>]*title="该来源未能直接支持这句话">2<\/sup>/);
});

test('the index exports the verification helpers', function () {
  assert.equal(client.WEAK_SUPPORT_TEXT, '该来源未能直接支持这句话');
  assert.equal(client.weakIds, weakIds);
  assert.equal(client.markWeakCitations, markWeakCitations);
});
