// Every case of ../shared/vectors/citation-stream.v2.json, fed three ways, and
// the bin/vectors.mjs runner's output and exit status.
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WAYS, runParser, runVectors } from '../src/conformance.js';
import { sharedDir } from '../testlib/shared.js';

var shared = sharedDir();
var vectorsFile = shared ? path.join(shared, 'vectors', 'citation-stream.v2.json') : null;
var runner = fileURLToPath(new URL('../bin/vectors.mjs', import.meta.url));
var skip = shared ? false : 'shared vectors not found (set GCITE_SHARED_DIR)';

test('shared vectors, three ways each', { skip: skip }, function (t) {
  var doc = JSON.parse(readFileSync(vectorsFile, 'utf8'));
  assert.ok(doc.cases.length >= 20);
  for (var c of doc.cases) {
    for (var way of WAYS) {
      var got = runParser(c.known_ids, way[1](c.deltas));
      assert.deepEqual(got, c.expect, c.name + ' (' + way[0] + ')');
    }
  }
});

test('runVectors reports a case whose expectation is wrong', function () {
  var doc = { cases: [
    { name: 'ok', known_ids: null, deltas: ['a[C:1]'], expect: { segments: [{ text: 'a' }, { cite: '1', idx: 1 }], citations: [['1', 1]], invalid: [] } },
    { name: 'wrong', known_ids: ['2'], deltas: ['a[C:1]'], expect: { segments: [{ text: 'a' }, { cite: '1', idx: 1 }], citations: [['1', 1]], invalid: [] } },
  ] };
  var res = runVectors(doc);
  assert.deepEqual(res.map(function (r) { return [r.name, r.ok]; }), [['ok', true], ['wrong', false]]);
  assert.equal(res[1].failures.length, 3);
  assert.deepEqual(res[1].failures[0].got, { segments: [{ text: 'a' }], citations: [], invalid: ['1'] });
});

function run(args) {
  return spawnSync(process.execPath, [runner].concat(args), { encoding: 'utf8' });
}

test('bin/vectors.mjs passes the shared file and ends with the summary line', { skip: skip }, function () {
  var out = execFileSync(process.execPath, [runner, vectorsFile], { encoding: 'utf8' });
  var n = JSON.parse(readFileSync(vectorsFile, 'utf8')).cases.length;
  assert.equal(out, n + ' passed, 0 failed\n');
});

test('bin/vectors.mjs prints a line per failing case and exits 1', function () {
  var dir = mkdtempSync(path.join(tmpdir(), 'gcite-vectors-'));
  var file = path.join(dir, 'v.json');
  writeFileSync(file, JSON.stringify({ version: 1, cases: [
    { name: 'good', known_ids: null, deltas: ['x'], expect: { segments: [{ text: 'x' }], citations: [], invalid: [] } },
    { name: 'bad_one', known_ids: null, deltas: ['x[C:3]'], expect: { segments: [{ text: 'x[C:3]' }], citations: [], invalid: [] } },
  ] }));
  var r = run([file]);
  assert.equal(r.status, 1);
  var lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 2);
  assert.match(lines[0], /bad_one/);
  assert.equal(lines[1], '1 passed, 1 failed');
});

test('bin/vectors.mjs exits 2 with one line for an unreadable or malformed file', function () {
  var dir = mkdtempSync(path.join(tmpdir(), 'gcite-vectors-'));
  var missing = run([path.join(dir, 'missing.json')]);
  assert.equal(missing.status, 2);
  assert.equal(missing.stdout, '');
  assert.equal(missing.stderr.trim().split('\n').length, 1);
  assert.match(missing.stderr, /missing\.json/);

  var notJson = path.join(dir, 'broken.json');
  writeFileSync(notJson, '{"cases": [');
  var broken = run([notJson]);
  assert.equal(broken.status, 2);
  assert.equal(broken.stderr.trim().split('\n').length, 1);

  var wrongShape = path.join(dir, 'shape.json');
  writeFileSync(wrongShape, JSON.stringify({ cases: [{ name: 'x', deltas: 'abc', known_ids: null, expect: {} }] }));
  var shape = run([wrongShape]);
  assert.equal(shape.status, 2);
  assert.match(shape.stderr, /deltas/);

  var usage = run([]);
  assert.equal(usage.status, 2);
});
