// The Markdown renderer (src/markdown.js) with the markdown-it the page ships
// (src/gcite/service/static/vendor/markdown-it.min.js, injected as the page does).
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import {
  CitationParser,
  MarkdownStream,
  copyText,
  createMarkdownIt,
  dropDanglingMarker,
  reasoningDisplay,
  renderMarkdownTree,
  sheetText,
  splitReasoning,
  toRichTextNodes,
  treeText,
  treeToHtml,
} from '../src/index.js';

var require = createRequire(import.meta.url);
var vendor = fileURLToPath(new URL('../../../src/gcite/service/static/vendor/markdown-it.min.js', import.meta.url));
var md = createMarkdownIt(require(vendor));

function parse(answer, known) {
  var p = new CitationParser({ knownIds: known || null });
  return p.feed(answer).concat(p.close());
}

function html(answer, opts) {
  return treeToHtml(renderMarkdownTree(parse(answer), Object.assign({ md: md }, opts || {})));
}

function walk(nodes, fn) {
  for (var k = 0; k < nodes.length; k++) {
    fn(nodes[k]);
    if (nodes[k].children) walk(nodes[k].children, fn);
  }
}

function links(nodes) {
  var out = [];
  walk(nodes, function (n) {
    if (n.attrs && n.attrs.href !== undefined) out.push(n.attrs.href);
  });
  return out;
}

test('citations are superscripts inside emphasis, headings, list items, table cells and link text', function () {
  var out = html('## 标题[C:1]\n\n- **加粗[C:2]** 与 *斜体[C:3]*\n- ~~删除[C:1]~~\n\n| 列 | 值 |\n|---|---|\n| 单元[C:2] | 2 |\n\n[链接文字[C:3]](https://example.com/a)');
  assert.match(out, /<h2 class="md-h2">标<span class="g-cite-nb">题<sup class="g-cite" data-raw-id="1" data-idx="1"/);
  assert.match(out, /<strong>加<span class="g-cite-nb">粗<sup class="g-cite" data-raw-id="2" data-idx="2"/);
  assert.match(out, /<em>斜<span class="g-cite-nb">体<sup class="g-cite" data-raw-id="3" data-idx="3"/);
  assert.match(out, /<del>删<span class="g-cite-nb">除<sup class="g-cite" data-raw-id="1" data-idx="1"/);
  assert.match(out, /<td class="md-td">单<span class="g-cite-nb">元<sup class="g-cite" data-raw-id="2"/);
  assert.match(out, /<a class="md-link" href="https:\/\/example.com\/a" target="_blank" rel="noopener noreferrer">链接文<span class="g-cite-nb">字<sup class="g-cite" data-raw-id="3"/);
  assert.doesNotMatch(out, /\[C:|\*\*|~~|\|/);
});

test('a marker never becomes Markdown syntax: [C:1](url), a line "[C:2]: url", a model footnote, image alt', function () {
  var nodes = renderMarkdownTree(parse('见[C:1](https://evil.example)。\n\n[C:2]: https://x.example\n\n模型自己的脚注[^1]\n\n![图[C:1]](https://img.example/a.png)'), { md: md });
  var out = treeToHtml(nodes);
  assert.match(out, /见<sup class="g-cite" data-raw-id="1" data-idx="1"[^>]*>1<\/sup><\/span>\(<a class="md-link" href="https:\/\/evil\.example"[^>]*>https:\/\/evil\.example<\/a>\)。/);
  assert.match(out, /<sup class="g-cite" data-raw-id="2" data-idx="2"[^>]*>2<\/sup>:<\/span> <a class="md-link" href="https:\/\/x\.example"/);
  assert.match(out, /模型自己的脚注\[\^1\]/);
  assert.match(out, /<a class="md-image-link" href="https:\/\/img\.example\/a\.png"[^>]*>图<span class="g-cite-nb"><sup|<a class="md-image-link" href="https:\/\/img\.example\/a\.png"[^>]*><span class="g-cite-nb">图<sup/);
  assert.deepEqual(links(nodes), ['https://evil.example', 'https://x.example', 'https://img.example/a.png']); // bare URLs are linked
});

test('code stays literal (fenced, indented, inline); raw HTML is text', function () {
  var out = html('```js\nvar a = "**x**" + [C:1];\n```\n\n    indented **y**\n\n`**z**` <b>bold</b> <script>alert(1)</script>');
  assert.match(out, /<pre class="md-pre"><code class="md-code-block">var a = &quot;\*\*x\*\*&quot; \+ \[C:1\];|<pre class="md-pre"><code class="md-code-block">var a = "\*\*x\*\*" \+ \[C:1\];/);
  assert.match(out, /<code class="md-code-block">indented \*\*y\*\*<\/code>/);
  assert.match(out, /<code class="md-code">\*\*z\*\*<\/code> &lt;b&gt;bold&lt;\/b&gt; &lt;script&gt;alert\(1\)&lt;\/script&gt;/);
});

test('hostile Markdown: only http(s) links, no image loaded, entities are text', function () {
  var answer = [
    '[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,<script>alert(1)</script>)',
    '<javascript:alert(2)> <https://ok.example/a> <mailto:a@b.c> vbscript:x',
    '[ref][r1] [ref2][r2]',
    '',
    '[r1]: javascript:alert(3)',
    '[r2]: https://ref.example/',
    '',
    '![a](javascript:alert(4)) ![b](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+) ![c](x" onerror="alert(5))',
    '<img src=x onerror=alert(6)> <svg onload=alert(7)> &lt;script&gt; &#x6A;avascript: &amp;',
    '[e](&#x6A;avascript:alert(8)) [f](java&#x09;script:alert(9)) [g](  https://sp.example/  )',
  ].join('\n');
  var nodes = renderMarkdownTree(parse(answer), { md: md });
  var hrefs = links(nodes);
  assert.deepEqual(hrefs, ['https://ok.example/a', 'https://ref.example/', 'https://sp.example/']);
  var names = [];
  walk(nodes, function (n) {
    if (n.name) names.push(n.name);
  });
  assert.equal(names.indexOf('img'), -1);
  assert.equal(names.indexOf('svg'), -1);
  assert.equal(names.indexOf('script'), -1);
  var text = treeText(nodes);
  assert.match(text, /<img src=x onerror=alert\(6\)> <svg onload=alert\(7\)> <script> javascript: &/);
  var out = treeToHtml(nodes);
  assert.doesNotMatch(out, /<(img|svg|script)\b/i);
  assert.doesNotMatch(out, /href="(?!https?:)/i);
});

test('rich-text nodes: escaped text, inline styles instead of page CSS, no href', function () {
  var rich = toRichTextNodes(renderMarkdownTree(parse('a <b> & c[C:1]'), { md: md }));
  assert.equal(rich[0].name, 'p');
  assert.equal(rich[0].children[0].text, 'a &lt;b&gt; &amp; ');
  var nb = rich[0].children[1];
  assert.equal(nb.attrs.style, 'white-space:nowrap');
  assert.match(nb.children[1].attrs.style, /vertical-align:super/);
  assert.equal(JSON.stringify(rich).indexOf('href'), -1);
});

test('labels, adjacent separators and copy text', function () {
  var segments = parse('一次[C:7][C:2]。');
  var out = treeToHtml(renderMarkdownTree(segments, {
    md: md,
    label: function (raw, idx) {
      return '引用 ' + idx + '：文档' + raw;
    },
  }));
  assert.equal(out, '<p class="md-p">一<span class="g-cite-nb">次<sup class="g-cite" data-raw-id="7" data-idx="1" aria-label="引用 1：文档7">1</sup>' +
    '<sup class="g-cite-sep" aria-hidden="true">,</sup><sup class="g-cite" data-raw-id="2" data-idx="2" aria-label="引用 2：文档2">2</sup>。</span></p>');
  assert.equal(copyText(segments, []), '一次[1][2]。\n\n来源：\n[1] 来源 7\n[2] 来源 2');
});

test('reasoning segments are split off and never rendered into the answer', function () {
  var segments = [{ reasoning: '先想一想[C:1]' }, { text: '答案' }, { cite: '1', idx: 1 }];
  var parts = splitReasoning(segments);
  assert.equal(parts.reasoning, '先想一想[C:1]');
  assert.equal(treeText(renderMarkdownTree(segments, { md: md })), '答案1');
  var s = new MarkdownStream({ md: md });
  s.push(segments);
  assert.equal(s.reasoning, '先想一想[C:1]');
  assert.equal(treeText(s.end().commit), '答案1');
});

var LONG = [
  '# 夜间巡更规范[C:1]',
  '',
  '夜间巡更**每 1 小时**一次[C:1]，必须走完 *A、B、C* 三条线路[C:2]。',
  '',
  '1. 登录终端[C:1]',
  '2. 按 `NFC` 标签打卡[C:3][C:1]',
  '   - 漏打卡视为未巡查[C:2]',
  '',
  '| 线路 | 点位 | 说明 |',
  '|:---|---:|---|',
  '| A | 8 | 大堂[C:1] |',
  '| B | 8 | ~~地库~~[C:2] |',
  '',
  '> 注意：[手册](https://wiki.example/handbook)[C:3]',
  '',
  '```',
  'code stays',
  '```',
  '',
  '结束。',
].join('\n');

function visible(nodes) {
  return treeText(nodes).replace(/[\s\u2060]/g, '');
}

test('streaming in every split gives exactly the one-shot tree; committed blocks are final', function () {
  var whole = renderMarkdownTree(parse(LONG), { md: md });
  var finalText = visible(whole);
  [1, 2, 3, 4, 7].forEach(function (size) {
    var p = new CitationParser();
    var s = new MarkdownStream({ md: md });
    var committed = [];
    for (var i = 0; i < LONG.length; i += size) {
      s.push(p.feed(LONG.slice(i, i + size)));
      var u = s.update();
      committed = committed.concat(u.commit);
      var shown = treeToHtml(committed) + treeToHtml(u.tail);
      var text = visible(committed.concat(u.tail));
      // no state shows a control sequence the final rendering consumes
      assert.doesNotMatch(text, /\*\*|~~|^#|\|\s*:?-|\]\(|`NFC|\[C:|\[手册/, 'size ' + size + ' at ' + i + ': ' + text);
      assert.ok(finalText.indexOf(text.replace(/结束。?$/, '')) >= 0 || text.length <= finalText.length, 'text outside the final one');
      assert.ok(shown.length >= 0);
    }
    s.push(p.close());
    var last = s.update();
    committed = committed.concat(last.commit);
    committed = committed.concat(s.end().commit);
    assert.equal(treeToHtml(committed), treeToHtml(whole), 'split size ' + size);
  });
});

test('streaming work: committed source is dropped (the open block stays small)', function () {
  var p = new CitationParser();
  var s = new MarkdownStream({ md: md });
  var para = '这是一段带引用的说明文字[C:1]，用来模拟很长的回答。\n\n';
  var maxOpen = 0;
  for (var k = 0; k < 300; k++) {
    s.push(p.feed(para));
    s.update();
    maxOpen = Math.max(maxOpen, s._src.length);
  }
  assert.ok(maxOpen < para.length * 3, 'open source grew to ' + maxOpen);
});

test('incomplete answers drop a dangling marker', function () {
  assert.equal(dropDanglingMarker('半截回答[C:'), '半截回答');
  assert.equal(dropDanglingMarker('半截回答【C：1，'), '半截回答');
  assert.equal(dropDanglingMarker('半截回答\\[C:1'), '半截回答');
  assert.equal(dropDanglingMarker('半截回答['), '半截回答');
  assert.equal(dropDanglingMarker('数组 a[i]'), '数组 a[i]');
  var s = new MarkdownStream({ md: md });
  var p = new CitationParser();
  s.push(p.feed('半截回答[C:'));
  s.push(p.close());
  assert.equal(treeText(s.end({ incomplete: true }).commit), '半截回答');
});

test('a reference definition after its use: end() renders the whole answer once more', function () {
  var answer = '见[手册][h][C:1]。\n\n后文。\n\n[h]: https://wiki.example/h\n';
  var p = new CitationParser();
  var s = new MarkdownStream({ md: md });
  var committed = [];
  for (var i = 0; i < answer.length; i++) {
    s.push(p.feed(answer.charAt(i)));
    committed = committed.concat(s.update().commit);
  }
  s.push(p.close());
  committed = committed.concat(s.update().commit);
  var f = s.end();
  assert.equal(treeToHtml(committed.concat(f.commit)).indexOf('href'), -1);
  assert.notEqual(f.replace, null);
  assert.equal(treeToHtml(f.replace), treeToHtml(renderMarkdownTree(parse(answer), { md: md })));
  assert.deepEqual(links(f.replace), ['https://wiki.example/h']);
});

test('a stream cut inside the opening <think tag shows nothing; reasoning is shown without markers', function () {
  for (var cut of ['<think', '<thi', '  <thinking', '<']) {
    var s = new MarkdownStream({ md: md });
    var p = new CitationParser();
    s.push(p.feed(cut).concat(p.close()));
    s.update();
    var f = s.end({ incomplete: true });
    assert.equal(treeText(f.commit.concat(f.replace || [])), '', cut);
  }
  // a complete answer that is just "<" stays
  var whole = new MarkdownStream({ md: md });
  var q = new CitationParser();
  whole.push(q.feed('a < b').concat(q.close()));
  whole.update();
  assert.match(treeText(whole.end().commit), /a < b/);
  assert.equal(reasoningDisplay('先查[C:3]和【C：4】再答 [C:'), '先查和再答');
  assert.equal(reasoningDisplay(''), '');
});

test('footnote definitions written by the model stay visible text; link definitions still work', function () {
  var p = new CitationParser();
  var out = treeToHtml(renderMarkdownTree(p.feed('见[^1]。\n\n[^1]: 《消防法》第十六条\n\n[a][x]\n\n[x]: https://e.example').concat(p.close()), { md: md }));
  assert.match(out, /\[\^1\]: 《消防法》第十六条/);
  assert.match(out, /<a class="md-link" href="https:\/\/e\.example"/);
});

test('sheetText shows list markers as bullets, keeping every offset', function () {
  var text = '规定：\n- 夜间巡更\n  * 日间巡更\n+ 交接\n不是-列表';
  var shown = sheetText(text);
  assert.equal(shown, '规定：\n• 夜间巡更\n  • 日间巡更\n• 交接\n不是-列表');
  assert.equal(shown.length, text.length);
});
