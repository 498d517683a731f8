// CitationParser and the marker grammar: spec §1-§6 beyond the shared vectors.
import test from 'node:test';
import assert from 'node:assert/strict';
import { CitationParser, citedIds, matchMarker, MATCH, FAIL, MORE, stripMarkers } from '../src/index.js';
import { SurrogateJoiner, fixSurrogates } from '../src/utf8.js';
import { runParser } from '../src/conformance.js';

function parse(text, knownIds, maxHold) {
  return runParser(knownIds === undefined ? null : knownIds, [text], maxHold);
}

test('spec §1 examples that are markers', function () {
  var cases = [
    ['[C:7]', ['7']], ['[c: 7]', ['7']], ['【C：7】', ['7']], ['［C:７］', ['7']],
    ['[C:1,2]', ['1', '2']], ['[C:1, C:2]', ['1', '2']], ['[C:1，3、5]', ['1', '3', '5']],
    ['[ C : 07 ]', ['7']], ['[Ｃ:1;2；3]', ['1', '2', '3']], ['【C:1]', ['1']], ['[C:\u30004\u3000]', ['4']],
    ['[C:0009]', ['9']], ['[ｃ：１２３４]', ['1234']],
  ];
  for (var c of cases) {
    var m = matchMarker(c[0], 0, 32);
    assert.equal(m.kind, MATCH, c[0]);
    assert.equal(m.end, c[0].length, c[0]);
    assert.deepEqual(m.ids, c[1], c[0]);
  }
});

test('spec §1 examples that are not markers stay literal', function () {
  for (var s of ['[7]', '[C:]', '[C:x]', '[C 7]', '[CC:7]', '[注]', '[C:12345]', '(C:7)', '[C:1,]', '[C:1 2]', '[1, C:2]', '[C:1,,2]']) {
    var got = parse('a' + s + 'b');
    assert.deepEqual(got.segments, [{ text: 'a' + s + 'b' }], s);
    assert.deepEqual(got.citations, [], s);
  }
});

test('matchMarker says MORE for every proper prefix of a marker and FAIL past the window', function () {
  var marker = '【Ｃ：１， c : 22、C:333】';
  for (var i = 1; i < marker.length; i++) {
    assert.equal(matchMarker(marker.slice(0, i), 0, 32).kind, MORE, marker.slice(0, i));
  }
  assert.equal(matchMarker(marker, 0, marker.length).kind, MATCH);
  assert.equal(matchMarker(marker, 0, marker.length - 1).kind, FAIL);
  assert.equal(matchMarker(marker.slice(0, 10), 0, 10).kind, FAIL);
});

test('held text is the open marker prefix and is released at close', function () {
  var p = new CitationParser({ knownIds: ['1'] });
  assert.deepEqual(p.feed('结论[C:'), [{ text: '结论' }]);
  assert.equal(p.held, '[C:');
  assert.deepEqual(p.feed('1'), []);
  assert.equal(p.held, '[C:1');
  assert.deepEqual(p.close(), [{ text: '[C:1' }]);
  assert.equal(p.held, '');
  assert.deepEqual(p.close(), []);
  assert.throws(function () { p.feed('x'); }, /closed/);
});

test('a held opener that cannot become a marker is released and parsing resumes after it', function () {
  var p = new CitationParser();
  assert.deepEqual(p.feed('[C'), []);
  assert.deepEqual(p.feed('[C:2]'), [{ text: '[C' }, { cite: '2', idx: 1 }]);
  assert.deepEqual(p.feed('【【'), [{ text: '【' }]);
  assert.equal(p.held, '【');
});

test('maxHold bounds the held text; a longer marker is literal', function () {
  var p = new CitationParser({ maxHold: 8 });
  var out = [];
  for (var ch of '见[C:1, 2, 3]。') {
    out = out.concat(p.feed(ch));
    assert.ok(p.held.length <= 8, 'held ' + JSON.stringify(p.held));
  }
  out = out.concat(p.close());
  assert.equal(out.map(function (s) { return s.text; }).join(''), '见[C:1, 2, 3]。');
  assert.deepEqual(parse('见[C:1,2]', null, 7).citations, [['1', 1], ['2', 2]]);
  assert.deepEqual(parse('见[C:1,2]', null, 6).citations, []);
});

test('default maxHold is 64 and the option is validated', function () {
  var fits = '[C:101, C:102, C:103, C:104, C:105, C:106, C:107, C:108]';
  assert.ok(fits.length > 32 && fits.length <= 64);
  assert.equal(parse(fits).citations.length, 8);
  var long = '[C:1, C:2, C:3, C:4, C:5, C:6, C:7, C:8, C:9, C:10, C:11, C:12, C:13]';
  assert.ok(long.length > 64);
  assert.deepEqual(parse(long).citations, []);
  assert.throws(function () { return new CitationParser({ maxHold: 1 }); }, TypeError);
  assert.throws(function () { return new CitationParser({ maxHold: '32' }); }, TypeError);
  assert.throws(function () { return new CitationParser({ knownIds: '1,2' }); }, TypeError);
  assert.throws(function () { new CitationParser().feed(42); }, TypeError);
});

test('duplicates collapse across deltas and through dropped invalid ids, not across text', function () {
  var p = new CitationParser({ knownIds: ['2', '3'] });
  var segs = p.feed('甲[C:2]').concat(p.feed('[C:2,2][C:9][C:2]'), p.feed(' [C:2]'), p.close());
  assert.deepEqual(segs, [{ text: '甲' }, { cite: '2', idx: 1 }, { text: ' ' }, { cite: '2', idx: 1 }]);
  assert.deepEqual(p.invalid, ['9']);
  assert.deepEqual(parse('[C:2,3,2]').segments, [{ cite: '2', idx: 1 }, { cite: '3', idx: 2 }, { cite: '2', idx: 1 }]);
});

test('invalid ids are reported in order with repeats; [C:0] is invalid only with metadata', function () {
  var got = parse('a[C:0]b[C:7,1]c[C:7]', ['1', '2']);
  assert.deepEqual(got.segments, [{ text: 'ab' }, { cite: '1', idx: 1 }, { text: 'c' }]);
  assert.deepEqual(got.invalid, ['0', '7', '7']);
  assert.deepEqual(parse('a[C:0]').citations, [['0', 1]]);
});

test('fenced code: backticks and tildes, longer closers, fences split across deltas', function () {
  var text = '~~~~\n[C:1]\n~~~\n[C:1]\n~~~~~\n后[C:2]';
  assert.deepEqual(parse(text).segments, [{ text: '~~~~\n[C:1]\n~~~\n[C:1]\n~~~~~\n后' }, { cite: '2', idx: 1 }]);
  var p = new CitationParser();
  var segs = [];
  for (var d of ['``', '`js\nx[C:1]\n`', '``', '`\n[C:3]']) segs = segs.concat(p.feed(d));
  segs = segs.concat(p.close());
  assert.deepEqual(segs.filter(function (s) { return s.cite; }), [{ cite: '3', idx: 1 }]);
  // A fence opener must start its line; mid-line ``` is an inline span.
  assert.deepEqual(parse('a ```[C:1]``` [C:2]').citations, [['2', 1]]);
  // An unclosed fence keeps the rest of the answer literal.
  assert.deepEqual(parse('```\n[C:1]\n\n[C:2]').citations, []);
});

test('inline code: same-length runs close, other runs do not, a span ends at the line end', function () {
  assert.deepEqual(parse('``a`[C:1]`` [C:2]').citations, [['2', 1]]);
  assert.deepEqual(parse('`open [C:1]\n[C:2]').citations, [['2', 1]]);
  assert.deepEqual(parse('`a` [C:1] `b`').citations, [['1', 1]]);
});

test('stripMarkers and citedIds', function () {
  assert.equal(stripMarkers('A[C:5]B[C:3]C[C:5]`[C:1]`'), 'ABC`[C:1]`');
  assert.deepEqual(citedIds('A[C:5]B[C:3]C[C:5]D[C:9]', ['3', '5']), ['5', '3']);
});

test('linear: a 200k-character answer fed in 3-character deltas', function () {
  var unit = '依据规定，巡更人员需登录[C:1]。`code[C:2]`\n';
  var text = unit.repeat(Math.ceil(200000 / unit.length));
  var deltas = [];
  for (var i = 0; i < text.length; i += 3) deltas.push(text.slice(i, i + 3));
  var got = runParser(null, deltas);
  var whole = runParser(null, [text]);
  assert.deepEqual(got, whole);
  assert.deepEqual(got.citations, [['1', 1]]);
});

// -- version 2 -----------------------------------------------------------------

test('v2 ranges: expanded in order, at most ten ids, reversed or wider ranges are literal', function () {
  var cases = [
    ['[C:1-3]', ['1', '2', '3']], ['[C:2–4]', ['2', '3', '4']], ['[C:1 ~ 2]', ['1', '2']],
    ['【C：5～6】', ['5', '6']], ['[C:1, C:4-5]', ['1', '4', '5']], ['[C:3-3]', ['3']],
    ['[C:1-10]', ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10']], ['[C:０８-１０]', ['8', '9', '10']],
  ];
  for (var c of cases) {
    var m = matchMarker(c[0], 0, 64);
    assert.equal(m.kind, MATCH, c[0]);
    assert.deepEqual(m.ids, c[1], c[0]);
  }
  for (var bad of ['[C:1-11]', '[C:5-3]', '[C:1-2-3]', '[C:1-]', '[C:-1]', '[C:1,2-C:3]', '[C:1-C:3]']) {
    assert.deepEqual(parse('见' + bad).segments, [{ text: '见' + bad }], bad);
  }
});

test('v2 escapes: backslashes before the brackets belong to the marker', function () {
  assert.deepEqual(parse('如此\\[C:1\\]。').segments, [{ text: '如此' }, { cite: '1', idx: 1 }, { text: '。' }]);
  assert.deepEqual(parse('\\[C:1]').segments, [{ cite: '1', idx: 1 }]);
  assert.deepEqual(parse('[C:1\\]').segments, [{ cite: '1', idx: 1 }]);
  assert.deepEqual(parse('\\\\[C:1]').segments, [{ text: '\\' }, { cite: '1', idx: 1 }]);
  assert.deepEqual(parse('[C:1\\ ]').segments, [{ text: '[C:1\\ ]' }]);
  // a failing marker's backslash starts the next escaped marker
  assert.deepEqual(parse('[C:1\\[C:2]').segments, [{ text: '[C:1' }, { cite: '2', idx: 1 }]);
  // too long with its escape: the backslash is literal, the marker still fits
  var m = '[C:' + ' '.repeat(59) + '1]';
  assert.equal(m.length, 64);
  assert.deepEqual(parse('\\' + m).segments, [{ text: '\\' }, { cite: '1', idx: 1 }]);
  var p = new CitationParser();
  assert.deepEqual(p.feed('a\\'), [{ text: 'a' }]);
  assert.equal(p.held, '\\');
  assert.deepEqual(p.feed('b'), [{ text: '\\b' }]);
});

test('v2 spaces: tab, no-break and narrow no-break spaces inside a marker', function () {
  assert.deepEqual(parse('[C:\t1]').citations, [['1', 1]]);
  assert.deepEqual(parse('[C:\u00a02 ]').citations, [['2', 1]]);
  assert.deepEqual(parse('[\u202fC\u202f:\u202f3\u202f,\t4]').citations, [['3', 1], ['4', 2]]);
});

test('v2 fences inside list items and block quotes', function () {
  var texts = [
    '- ```\n  [C:1]\n  ```\n[C:2]', '1. ```py\n   [C:1]\n   ```\n[C:2]', '> ```\n> [C:1]\n> ```\n[C:2]',
    '> - ~~~\n> [C:1]\n> ~~~\n[C:2]', '12) ````\n[C:1]\n````\n[C:2]', '   ```\n[C:1]\n```\n[C:2]',
  ];
  for (var t of texts) assert.deepEqual(parse(t).citations, [['2', 1]], t);
  // not container prefixes: a bullet without a space, two bullets, ten digits
  for (var u of ['-```\n[C:1]', '- - ```\n[C:1]', '1234567890. ```\n[C:1]', '1.```\n[C:1]', 'a ```\n[C:1]']) {
    assert.deepEqual(parse(u).citations, [['1', 1]], u);
  }
});

test('v2 reasoning: a leading think block becomes reasoning segments, never citations', function () {
  var got = parse(' \n<think>看[C:1]和[C:9]\n</think>\r\n\n答案[C:2]', ['1', '2']);
  assert.deepEqual(got.segments, [{ reasoning: '看[C:1]和[C:9]\n' }, { text: '答案' }, { cite: '2', idx: 1 }]);
  assert.deepEqual(got.invalid, []);
  assert.deepEqual(parse('<thinking>a</thinking> b').segments, [{ reasoning: 'a' }, { text: ' b' }]);
  assert.deepEqual(parse('<thinking>a</think>b').segments, [{ reasoning: 'a</think>b' }]);
  assert.deepEqual(parse('<think').segments, [{ text: '<think' }]);
  assert.deepEqual(parse('  <b>x').segments, [{ text: '  <b>x' }]);
  assert.deepEqual(parse('x<think>y</think>').segments, [{ text: 'x<think>y</think>' }]);
  var p = new CitationParser();
  assert.deepEqual(p.feed(' <thi'), []);
  assert.equal(p.held, ' <thi');
  assert.deepEqual(p.feed('nk>想</th'), [{ reasoning: '想' }]);
  assert.equal(p.held, '</th');
  assert.deepEqual(p.feed('x'), [{ reasoning: '</thx' }]);
  assert.deepEqual(p.close(), []);
  assert.equal(stripMarkers('<think>x[C:1]</think>答[C:2]'), '答');
  assert.deepEqual(citedIds('<think>[C:1]</think>[C:2]'), ['2']);
});

test('lone surrogates become U+FFFD; pairs split across deltas are joined', function () {
  var p = new CitationParser();
  var segs = p.feed('a\ud83d').concat(p.feed('\ude00b\udc00'), p.feed('\ud83d'), p.close());
  assert.deepEqual(segs, [{ text: 'a' }, { text: '\ud83d\ude00b\ufffd' }, { text: '\ufffd' }]);
  assert.equal(fixSurrogates('x\ud800y\ud83d\ude00'), 'x\ufffdy\ud83d\ude00');
  var j = new SurrogateJoiner();
  assert.equal(j.feed('\ud83d') + j.feed('\udeaa'), '\ud83d\udeaa');
});
