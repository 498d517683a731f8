/**
 * Conformance harnesses. (1) Marker test vectors (spec §8 format,
 * ../shared/vectors/citation-stream.v2.json): every case is fed three ways —
 * the deltas as given, the whole answer as one delta, one character (code
 * point) per delta — and each run must produce exactly `expect`.
 */
import { AnswerStream } from './answer.js';
import { chunkId, panelView } from './panel.js';
import { CitationParser, mergeText } from './parser.js';
import { errorText } from './messages.js';
import { copyText, sourceRows, sourceSheet } from './sources.js';
import { answerNotice, answerNoticeText, supportDisplay } from './verification.js';

/** The three ways of feeding a case: [name, deltas -> deltas]. */
export var WAYS = [
  ['as given', function (deltas) {
    return deltas;
  }],
  ['one delta', function (deltas) {
    return [deltas.join('')];
  }],
  ['one character per delta', function (deltas) {
    return Array.from(deltas.join(''));
  }],
];

/**
 * Parse deltas and close: the observable outcome of one run.
 * @param {string[]|null} knownIds
 * @param {string[]} deltas
 * @param {number} [maxHold]
 * @returns {{segments: Array<object>, citations: Array<[string, number]>, invalid: string[]}}
 */
export function runParser(knownIds, deltas, maxHold) {
  var p = new CitationParser({ knownIds: knownIds, maxHold: maxHold });
  var segs = [];
  for (var k = 0; k < deltas.length; k++) Array.prototype.push.apply(segs, p.feed(deltas[k]));
  Array.prototype.push.apply(segs, p.close());
  segs = mergeText(segs);
  return { segments: segs, citations: p.citations, invalid: p.invalid };
}

function canonical(v) {
  return JSON.stringify(v);
}

/**
 * Check the shape of a vectors document.
 * @param {*} doc parsed JSON
 * @returns {string|null} a description of the first problem, or null
 */
export function vectorsProblem(doc) {
  if (doc === null || typeof doc !== 'object' || !Array.isArray(doc.cases)) return 'no "cases" array';
  for (var k = 0; k < doc.cases.length; k++) {
    var c = doc.cases[k];
    var where = 'case ' + k;
    if (c === null || typeof c !== 'object') return where + ' is not an object';
    if (!Array.isArray(c.deltas) || c.deltas.some(function (d) { return typeof d !== 'string'; })) {
      return where + ': "deltas" must be an array of strings';
    }
    if (c.known_ids !== null && !Array.isArray(c.known_ids)) return where + ': "known_ids" must be an array or null';
    if (c.expect === null || typeof c.expect !== 'object') return where + ': "expect" missing';
  }
  return null;
}

/**
 * Run every case the three ways.
 * @param {{cases: Array<object>}} doc a valid vectors document
 * @returns {Array<{name: string, ok: boolean, failures: Array<{way: string, got: object}>}>}
 */
export function runVectors(doc) {
  var results = [];
  for (var k = 0; k < doc.cases.length; k++) {
    var c = doc.cases[k];
    var expect = {
      segments: c.expect.segments || [],
      citations: c.expect.citations || [],
      invalid: c.expect.invalid || [],
    };
    var failures = [];
    for (var w = 0; w < WAYS.length; w++) {
      var got = runParser(c.known_ids, WAYS[w][1](c.deltas));
      if (canonical(got) !== canonical(expect)) failures.push({ way: WAYS[w][0], got: got });
    }
    results.push({ name: String(c.name || '#' + k), ok: failures.length === 0, failures: failures, expect: expect });
  }
  return results;
}

// -- Dify stream-contract vectors (docs/stream-contract.md) --------------------

/** The `kind` of a stream-contract vectors document. */
export var STREAM_KIND = 'dify-stream';
var RANDOM_CUTS = 5;

var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function base64Bytes(s) {
  var clean = String(s).replace(/=+$/, '');
  var out = [];
  var acc = 0;
  var bits = 0;
  for (var k = 0; k < clean.length; k++) {
    var v = B64.indexOf(clean.charAt(k));
    if (v < 0) throw new TypeError('not base64');
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  return new Uint8Array(out);
}

function utf8Bytes(s) {
  var out = [];
  for (var k = 0; k < s.length; k++) {
    var c = s.charCodeAt(k);
    if (c >= 0xd800 && c <= 0xdbff && k + 1 < s.length) {
      var d = s.charCodeAt(k + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        k++;
      }
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}

/**
 * The raw response bytes of a case (`sse` text as UTF-8, or `sse_base64`).
 * @param {object} c
 * @returns {Uint8Array}
 */
export function caseBytes(c) {
  return typeof c.sse_base64 === 'string' ? base64Bytes(c.sse_base64) : utf8Bytes(c.sse);
}

// Seeded PRNG (mulberry32), for reproducible random cuts.
function prng(seed) {
  var a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    var t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomCuts(bytes, seed) {
  if (bytes.length < 2) return [bytes];
  var rand = prng(seed);
  var n = 1 + Math.floor(rand() * 12);
  var cuts = [];
  for (var k = 0; k < n; k++) cuts.push(1 + Math.floor(rand() * (bytes.length - 1)));
  cuts.sort(function (a, b) { return a - b; });
  var out = [];
  var prev = 0;
  for (var j = 0; j < cuts.length; j++) {
    out.push(bytes.slice(prev, cuts[j]));
    prev = cuts[j];
  }
  out.push(bytes.slice(prev));
  return out;
}

/** The ways of feeding a stream case: [name, bytes -> chunks]. */
export var STREAM_WAYS = [
  ['whole', function (b) { return [b]; }],
  ['byte by byte', function (b) {
    var out = [];
    for (var k = 0; k < b.length; k++) out.push(b.slice(k, k + 1));
    return out;
  }],
];
for (var cutRun = 0; cutRun < RANDOM_CUTS; cutRun++) {
  STREAM_WAYS.push(['random cuts #' + (cutRun + 1), (function (seed) {
    return function (b) { return randomCuts(b, seed); };
  })(1000 + cutRun)]);
}

function errorView(err) {
  if (err === null) return null;
  return { code: err.code, status: err.status === 0 ? null : err.status, message: err.message };
}

/**
 * Feed byte chunks to a fresh AnswerStream and end it: the contract's
 * projection `{outputs, result}` (docs/stream-contract.md §8).
 * @param {Array<Uint8Array>} chunks
 * @returns {{outputs: Array<object>, result: object}}
 */
export function runConsumer(chunks) {
  var outputs = [];
  var s = new AnswerStream({
    onMetadata: function (chunks) { outputs.push({ metadata: chunks.map(chunkId) }); },
    onSegments: function (segs) {
      var last = outputs.length > 0 ? outputs[outputs.length - 1] : null;
      if (last !== null && last.segments !== undefined) last.segments = mergeText(last.segments.concat(segs));
      else outputs.push({ segments: mergeText(segs) });
    },
    onReplace: function (segs) { outputs.push({ replace: mergeText(segs) }); },
    onError: function (err) { outputs.push({ error: errorView(err) }); },
  });
  for (var k = 0; k < chunks.length; k++) s.pushBytes(chunks[k]);
  var r = s.end();
  return {
    outputs: outputs,
    result: {
      answer: r.answer,
      reasoning: r.reasoning,
      segments: r.segments,
      citations: r.citations,
      invalid: r.invalid,
      panel: panelView(r.panel),
      panel_source: r.panelSource,
      message_id: r.messageId,
      conversation_id: r.conversationId,
      task_id: r.taskId,
      workflow_status: r.workflowStatus,
      finished: r.finished,
      error: errorView(r.error),
      warnings: r.warnings.map(function (w) { return w.kind; }),
      events: r.events,
    },
  };
}

/**
 * Check the shape of a stream-contract vectors document.
 * @param {*} doc parsed JSON
 * @returns {string|null} the first problem, or null
 */
export function streamVectorsProblem(doc) {
  if (doc === null || typeof doc !== 'object' || !Array.isArray(doc.cases)) return 'no "cases" array';
  for (var k = 0; k < doc.cases.length; k++) {
    var c = doc.cases[k];
    var where = 'case ' + k;
    if (c === null || typeof c !== 'object') return where + ' is not an object';
    if (typeof c.sse !== 'string' && typeof c.sse_base64 !== 'string') return where + ': "sse" or "sse_base64" must be a string';
    if (typeof c.sse_base64 === 'string' && !/^[A-Za-z0-9+/]*=*$/.test(c.sse_base64)) return where + ': "sse_base64" is not base64';
    if (c.expect === null || typeof c.expect !== 'object' || !Array.isArray(c.expect.outputs)) return where + ': "expect.outputs" must be an array';
    if (c.expect.result === null || typeof c.expect.result !== 'object') return where + ': "expect.result" must be an object';
  }
  return null;
}

// Deep equality of JSON values, key order ignored.
function sameJson(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    if (a.length !== b.length) return false;
    for (var k = 0; k < a.length; k++) if (!sameJson(a[k], b[k])) return false;
    return true;
  }
  var ka = Object.keys(a);
  var kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (var j = 0; j < ka.length; j++) {
    if (!Object.prototype.hasOwnProperty.call(b, ka[j]) || !sameJson(a[ka[j]], b[ka[j]])) return false;
  }
  return true;
}

/**
 * Run every case of a stream-contract document every way.
 * @param {{cases: Array<object>}} doc a valid document
 * @returns {Array<{name: string, ok: boolean, failures: Array<{way: string, got: object}>, expect: object}>}
 */
export function runStreamVectors(doc) {
  var results = [];
  for (var k = 0; k < doc.cases.length; k++) {
    var c = doc.cases[k];
    var expect = { outputs: c.expect.outputs, result: c.expect.result };
    var bytes = caseBytes(c);
    var failures = [];
    for (var w = 0; w < STREAM_WAYS.length; w++) {
      var got = runConsumer(STREAM_WAYS[w][1](bytes));
      if (!sameJson(got, expect)) failures.push({ way: STREAM_WAYS[w][0], got: got });
    }
    results.push({ name: String(c.name || '#' + k), ok: failures.length === 0, failures: failures, expect: expect });
  }
  return results;
}

// -- (3) client-rule vectors (tests/vectors/{error-text,source-rows,answer-notice,
// verification-display,copy-text}.v1.json): one input -> one output per case,
// shared with the Python client (tests/stream/test_client_rules.py).

function jsRows(panel) {
  return (Array.isArray(panel) ? panel : []).map(function (r) {
    return { idx: r.idx, rawId: r.raw_id, chunk: r.chunk };
  });
}

/** What each client-rule kind computes from a case: kind -> (case -> output). */
export var RULES = {
  'error-text': function (c) {
    return errorText(c.error);
  },
  'source-rows': function (c) {
    var panel = jsRows(c.panel);
    return {
      rows: sourceRows(panel, c.weak).map(function (r) {
        return { idx: r.idx, raw_id: r.rawId, type: r.type, title: r.title, subtitle: r.subtitle, hint: r.hint, url: r.url, weak: r.weak, label: r.label };
      }),
      sheets: panel.map(function (row) {
        var s = sourceSheet(row);
        return { type: s.type, tag: s.tag, title: s.title, subtitle: s.subtitle, url: s.url, office: s.office, notice: s.notice, link_hint: s.linkHint, content: s.content };
      }),
    };
  },
  'verification-display': function (c) {
    return supportDisplay(c.report);
  },
  'answer-notice': function (c) {
    var shown = answerNotice(c.report);
    return { notice: shown.notice, parts: shown.parts, text: answerNoticeText(c.report) };
  },
  'copy-text': function (c) {
    return copyText(c.segments, jsRows(c.panel));
  },
};

// The expectation as JavaScript computes it (the terminal line is Python's only).
function ruleExpect(kind, c) {
  if (kind !== 'verification-display') return c.expect;
  return c.expect.map(function (v) {
    return { id: v.id, weak: v.weak, score: v.score, support: v.support };
  });
}

/**
 * Run a client-rule vectors document: [{name, ok, expect, got}] per case.
 * @param {{kind: string, cases: Array<object>}} doc
 * @returns {Array<{name: string, ok: boolean, expect: *, got: *}>}
 */
export function runRuleVectors(doc) {
  var rule = RULES[doc.kind];
  if (typeof rule !== 'function') throw new TypeError('unknown client-rule kind: ' + doc.kind);
  return doc.cases.map(function (c) {
    var got = rule(c);
    var expect = ruleExpect(doc.kind, c);
    return { name: c.name, ok: JSON.stringify(got) === JSON.stringify(expect), expect: expect, got: got };
  });
}
