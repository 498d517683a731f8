// Seeded property tests (spec §5, version 2): random answers built from tokens
// of known meaning — prose, decoys, markers in every grammar variant (ranges,
// escapes, tabs and no-break spaces), inline code spans and fenced blocks
// (also in list items and block quotes) holding markers, a leading reasoning
// block — cut at random points.
//   - split invariance: any cut gives the output of the whole answer at once;
//   - the output equals the oracle built from the tokens;
//   - no complete marker's raw text is ever emitted outside code;
//   - the held text never exceeds maxHold after any delta.
import test from 'node:test';
import assert from 'node:assert/strict';
import { CitationParser, mergeText } from '../src/index.js';
import { pick, randInt, randomCuts, rng } from '../testlib/shared.js';

var SEED = Number(process.env.GCITE_PROPERTY_SEED || 20261129);
var RUNS = Number(process.env.GCITE_PROPERTY_RUNS || 300);

var PROSE = '甲乙丙丁的是了规定巡检。！？abxyzQ'.split('').concat([' ']);
var DECOYS = ['[7]', '[注]', '[C:]', '[C:x]', '[C 7]', '[CC:7]', '(C:7)', '[C:1,]', '[C:12345]', '【', '[', '［C', '[C:', '[c：1', '[C:1, ',
  '[C:5-3]', '[C:1-20]', '[C:1-2-3]', 'a\\b', '\\x', '[C:1\\x]', '<think>', '[C:1-]', '~'];
var OPEN = ['[', '【', '［'];
var CLOSE = [']', '】', '］'];
var PREFIX = ['C', 'c', 'Ｃ', 'ｃ'];
var COLON = [':', '：'];
var SEP = [',', '，', '、', ';', '；'];
var WS = ['', '', '', ' ', '\u3000', '  ', '\t', '\u00a0', '\u202f'];
var RANGE = ['-', '–', '~', '～'];
var CONTAINERS = ['', '', '- ', '> ', '1. ', '   ', '> - ', '12) ', '\t'];
var FULL = '０１２３４５６７８９';

function digits(rand, value) {
  var s = String(value);
  while (s.length < 4 && rand() < 0.15) s = '0' + s;
  return Array.from(s).map(function (d) { return rand() < 0.25 ? FULL.charAt(Number(d)) : d; }).join('');
}

function marker(rand) {
  var ids = [];
  var escaped = rand() < 0.15;
  var s = (escaped ? '\\' : '') + pick(rand, OPEN) + pick(rand, WS);
  var n = randInt(rand, 1, 3);
  for (var k = 0; k < n; k++) {
    var value = randInt(rand, 0, 12);
    ids.push(String(value));
    if (k > 0) s += pick(rand, WS) + pick(rand, SEP) + pick(rand, WS);
    if (k === 0 || rand() < 0.5) s += pick(rand, PREFIX) + pick(rand, WS) + pick(rand, COLON) + pick(rand, WS);
    s += digits(rand, value);
    if (rand() < 0.2) {
      var end = value + randInt(rand, 0, 3);
      for (var v = value + 1; v <= end; v++) ids.push(String(v));
      s += pick(rand, WS) + pick(rand, RANGE) + pick(rand, WS) + digits(rand, end);
    }
  }
  return { raw: s + pick(rand, WS) + (escaped && rand() < 0.7 ? '\\' : '') + pick(rand, CLOSE), ids: ids };
}

function prose(rand) {
  var s = '';
  var n = randInt(rand, 1, 6);
  for (var k = 0; k < n; k++) s += pick(rand, PROSE);
  return s;
}

function inlineCode(rand) {
  var body = prose(rand) + marker(rand).raw + prose(rand);
  if (rand() < 0.2) return '`' + body + '\n'; // never closed: the span ends at the line end
  if (rand() < 0.4) return '``' + body + '`' + marker(rand).raw + '``。';
  return '`' + body + '`。';
}

function fence(rand) {
  var ch = rand() < 0.7 ? '`' : '~';
  var len = randInt(rand, 3, 5);
  var open = pick(rand, CONTAINERS);
  var close = rand() < 0.5 ? open : pick(rand, CONTAINERS);
  var lines = [];
  for (var k = randInt(rand, 1, 3); k > 0; k--) lines.push(prose(rand) + marker(rand).raw + (rand() < 0.3 ? '``' : ''));
  return '\n' + open + ch.repeat(len) + (rand() < 0.5 ? 'py' : '') + '\n' + lines.join('\n') + '\n' + close + ch.repeat(len + randInt(rand, 0, 1)) + '\n';
}

// Tokens of known meaning: {text} literal or {marker}. Returns the answer and
// the expected segments/citations/invalid (the oracle).
function generate(rand, withCode, knownIds, maxHold) {
  var known = knownIds === null ? null : new Set(knownIds);
  var answer = '';
  var segments = [];
  var idMap = new Map();
  var invalid = [];
  var lastCite = null;
  var markers = [];
  function literal(s) {
    answer += s;
    segments.push({ text: s });
    lastCite = null;
  }
  if (rand() < 0.2) {
    // A leading reasoning block: never parsed; the line breaks after it are dropped.
    var thought = prose(rand) + marker(rand).raw + prose(rand) + '\n';
    var tag = rand() < 0.5 ? 'think' : 'thinking';
    answer += pick(rand, ['', ' ', '\n']) + '<' + tag + '>' + thought + '</' + tag + '>' + pick(rand, ['', '\n', '\r\n\n']);
    segments.push({ reasoning: thought });
    literal('答');
  }
  for (var t = randInt(rand, 1, 25); t > 0; t--) {
    var r = rand();
    if (r < 0.35) literal(prose(rand));
    else if (r < 0.45) {
      var decoy = pick(rand, DECOYS);
      // "<think>" opens reasoning only at the very start (spec §4a): keep it a decoy.
      literal(/^[ \t\r\n]*$/.test(answer) && decoy.charAt(0) === '<' ? '甲' + decoy : decoy);
    }
    else if (r < 0.5) literal('\n');
    else if (withCode && r < 0.58) literal(inlineCode(rand));
    else if (withCode && r < 0.64) literal(fence(rand));
    else {
      var m = marker(rand);
      if (m.raw.length > maxHold && m.raw.charAt(0) === '\\' && m.raw.length - 1 <= maxHold) {
        // Too long with its escape: the backslash is literal, the rest still fits.
        literal('\\');
        m.raw = m.raw.slice(1);
      }
      if (m.raw.length > maxHold) {
        literal(m.raw);
        continue;
      }
      answer += m.raw;
      markers.push(m.raw);
      for (var id of m.ids) {
        if (known !== null && !known.has(id)) {
          invalid.push(id);
          continue;
        }
        if (id === lastCite) continue;
        if (!idMap.has(id)) idMap.set(id, idMap.size + 1);
        segments.push({ cite: id, idx: idMap.get(id) });
        lastCite = id;
      }
    }
  }
  return {
    answer: answer,
    markers: markers,
    expect: { segments: mergeText(segments), citations: Array.from(idMap.entries()), invalid: invalid },
  };
}

var W = '[ \\t\\u00a0\\u202f\\u3000]*';
var ID = '[0-9０-９]{1,4}(?:' + W + '[-–~～]' + W + '[0-9０-９]{1,4})?';
var PFX = '[CcＣｃ]' + W + '[:：]' + W;
var MARKER_RE = new RegExp('\\\\?[\\[【［]' + W + PFX + ID + '(?:' + W + '[,，、;；]' + W + '(?:' + PFX + ')?' + ID + ')*' + W + '\\\\?[\\]】］]', 'g');

// The regex does not check range widths (spec §1: a <= b, at most ten ids).
function rangesValid(raw) {
  var norm = raw.replace(/[０-９]/g, function (d) { return String(d.charCodeAt(0) - 0xff10); });
  var re = /([0-9]+)[ \t\u00a0\u202f\u3000]*[-–~～][ \t\u00a0\u202f\u3000]*([0-9]+)/g;
  var m;
  while ((m = re.exec(norm)) !== null) {
    var a = Number(m[1]);
    var b = Number(m[2]);
    if (!(a <= b && b - a <= 9)) return false;
  }
  return true;
}

function run(deltas, knownIds, maxHold, onStep) {
  var p = new CitationParser({ knownIds: knownIds, maxHold: maxHold });
  var segs = [];
  for (var d of deltas) {
    var out = p.feed(d);
    if (onStep) onStep(out, p);
    Array.prototype.push.apply(segs, out);
  }
  var last = p.close();
  if (onStep) onStep(last, p);
  Array.prototype.push.apply(segs, last);
  return { segments: mergeText(segs), citations: p.citations, invalid: p.invalid };
}

test('random answers and random cuts: split invariance, oracle, no raw marker, bounded hold', function () {
  var rand = rng(SEED);
  for (var i = 0; i < RUNS; i++) {
    var withCode = rand() < 0.6;
    var knownIds = rand() < 0.3 ? null : ['1', '2', '3', '5', '8', '10', '12'];
    var maxHold = rand() < 0.75 ? 64 : randInt(rand, 6, 20);
    var g = generate(rand, withCode, knownIds, maxHold);
    var label = 'seed ' + SEED + ' run ' + i + ' maxHold ' + maxHold + ' answer ' + JSON.stringify(g.answer);

    var whole = run([g.answer], knownIds, maxHold);
    assert.deepEqual(whole, g.expect, label);

    var chars = run(Array.from(g.answer), knownIds, maxHold);
    assert.deepEqual(chars, whole, label + ' (one character per delta)');

    for (var cut = 0; cut < 3; cut++) {
      var deltas = randomCuts(rand, g.answer, randInt(rand, 2, 12));
      var emitted = '';
      var got = run(deltas, knownIds, maxHold, function (out, p) {
        // a possible <think> or </thinking> tag is held too (spec §4a)
        assert.ok(p.held.length <= Math.max(maxHold, 12), label + ' held ' + JSON.stringify(p.held));
        for (var s of out) if (typeof s.text === 'string') emitted += s.text;
      });
      assert.deepEqual(got, whole, label + ' cuts ' + JSON.stringify(deltas));
      if (!withCode) {
        var hits = (emitted.match(MARKER_RE) || []).filter(function (h) { return h.length <= maxHold && rangesValid(h); });
        assert.deepEqual(hits, [], label + ' raw marker emitted');
      }
    }
  }
});

test('the raw-marker check would catch a leaking parser', function () {
  // The regex used above must see every generated marker in raw text.
  var rand = rng(SEED + 1);
  for (var i = 0; i < 200; i++) {
    var m = marker(rand).raw;
    assert.deepEqual(('x' + m + 'y').match(MARKER_RE), [m], m);
  }
});
