#!/usr/bin/env node
// Citation stream parser throughput, JavaScript (issue 3, item 6).
//
//   node benchmarks/bench_stream_js.mjs
//
// A seeded ~100,000-character answer (Chinese prose with [C:N] markers in the
// grammar's variants) is cut into realistic deltas of 2-6 characters. For the
// first 1k, 10k and 100k characters it measures, in the same run:
//   parser - clients/js CitationParser: feed() every delta, then close();
//   naive  - the baseline: append the delta and re-scan the WHOLE accumulated
//            answer with the marker regex at every delta.
// Prints ONE JSON object on stdout (medians over repeated runs; chars/s and
// deltas/s, plus the best run; speedup = naive median time / parser median
// time). Not a test: run on demand (bench_stream.py runs it for the docs).
import os from 'node:os';
import { CitationParser } from '../clients/js/src/index.js';

var MARKER_RE = /[\[【［][ \u3000]*[CcＣｃ][ \u3000]*[:：][ \u3000]*[0-9０-９]{1,4}(?:[ \u3000]*[,，、;；][ \u3000]*(?:[CcＣｃ][ \u3000]*[:：][ \u3000]*)?[0-9０-９]{1,4})*[ \u3000]*[\]】］]/g;

function rng(seed) {
  var a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    var t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

var SENTENCES = [
  '根据《中华人民共和国民法典》的规定，民事主体从事民事活动，应当遵循诚信原则',
  '巡更人员需要先在终端登录，登录后系统会根据预设路线生成待检点',
  '劳动合同期限三个月以上不满一年的，试用期不得超过一个月',
  '用人单位自用工之日起即与劳动者建立劳动关系',
  '当事人对自己提出的主张，有责任提供证据',
  'The model cites each sentence with the chunk it used',
];
var MARKERS = ['[C:1]', '[C:2]', '【C：3】', '[c: 4]', '[C:5,6]', '[C:7, C:8]', '［C:９］', '[C:10]'];

function buildAnswer(rand, size) {
  var s = '';
  while (s.length < size) {
    s += SENTENCES[Math.floor(rand() * SENTENCES.length)];
    if (rand() < 0.7) s += MARKERS[Math.floor(rand() * MARKERS.length)];
    s += rand() < 0.15 ? '。\n' : '。';
  }
  return s.slice(0, size);
}

function cut(rand, text) {
  var out = [];
  for (var i = 0; i < text.length; ) {
    var n = 2 + Math.floor(rand() * 5);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

function runParser(deltas) {
  var p = new CitationParser({ knownIds: null });
  var visible = 0;
  for (var k = 0; k < deltas.length; k++) {
    var segs = p.feed(deltas[k]);
    for (var j = 0; j < segs.length; j++) if (segs[j].text !== undefined) visible += segs[j].text.length;
  }
  var last = p.close();
  for (var m = 0; m < last.length; m++) if (last[m].text !== undefined) visible += last[m].text.length;
  return visible;
}

function runNaive(deltas) {
  var acc = '';
  var visible = 0;
  for (var k = 0; k < deltas.length; k++) {
    acc += deltas[k];
    visible = acc.replace(MARKER_RE, '').length; // re-scan everything so far
  }
  return visible;
}

function median(xs) {
  var s = xs.slice().sort(function (a, b) { return a - b; });
  var mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

function measure(fn, deltas, runs) {
  var times = [];
  var out = null;
  for (var r = 0; r < runs; r++) {
    var t0 = process.hrtime.bigint();
    out = fn(deltas);
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return { times: times, out: out };
}

// Medians are the headline; the best run is given too because the machine
// may be shared (the best run shows the cost without interference).
function figures(m, chars, ndeltas) {
  var t = median(m.times);
  var best = Math.min.apply(null, m.times);
  return {
    runs: m.times.length,
    median_s: Number(t.toPrecision(4)),
    chars_per_s: Math.round(chars / t),
    deltas_per_s: Math.round(ndeltas / t),
    best_s: Number(best.toPrecision(4)),
    best_chars_per_s: Math.round(chars / best),
  };
}

var rand = rng(20261129);
var answer = buildAnswer(rand, 100000);
var allDeltas = cut(rand, answer);
for (var w = 0; w < 10; w++) runParser(allDeltas); // warm-up: let the JIT settle
runNaive(allDeltas.slice(0, 500));

function prefix(size) {
  var deltas = [];
  var chars = 0;
  for (var k = 0; k < allDeltas.length && chars < size; k++) {
    deltas.push(allDeltas[k]);
    chars += allDeltas[k].length;
  }
  return { deltas: deltas, chars: chars };
}

// All parser runs first, then the baseline, so the baseline's garbage does
// not land in the parser's timings.
var SIZES = [1000, 10000, 100000];
var parserFigures = SIZES.map(function (size) {
  var x = prefix(size);
  var m = measure(runParser, x.deltas, size <= 10000 ? 101 : 31);
  return { x: x, m: m, f: figures(m, x.chars, x.deltas.length) };
});
var results = SIZES.map(function (size, i) {
  var x = parserFigures[i].x;
  var n = measure(runNaive, x.deltas, size <= 1000 ? 51 : size <= 10000 ? 11 : 3);
  if (parserFigures[i].m.out !== n.out) throw new Error('parser and baseline disagree on the visible text length at ' + size);
  var pf = parserFigures[i].f;
  var nf = figures(n, x.chars, x.deltas.length);
  return { chars: x.chars, deltas: x.deltas.length, parser: pf, naive: nf, speedup: Number((nf.median_s / pf.median_s).toFixed(1)) };
});

var cpus = os.cpus();
process.stdout.write(JSON.stringify({
  benchmark: 'stream_js',
  date: new Date().toISOString(),
  node: process.version,
  machine: { nproc: cpus.length, cpu: cpus.length ? cpus[0].model : 'unknown', platform: os.platform() + ' ' + os.arch() },
  delta_chars: [2, 6],
  results: results,
}) + '\n');
