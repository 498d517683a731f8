/**
 * Conformance harness for marker test vectors (spec §8 format,
 * ../shared/vectors/citation-stream.v2.json): every case is fed three ways —
 * the deltas as given, the whole answer as one delta, one character (code
 * point) per delta — and each run must produce exactly `expect`.
 */
import { CitationParser, mergeText } from './parser.js';

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
