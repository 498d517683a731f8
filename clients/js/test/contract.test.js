// The Dify stream contract (docs/stream-contract.md): every case of
// tests/vectors/dify-stream.v1.json, fed whole, byte by byte and in random cuts.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { STREAM_WAYS, caseBytes, runConsumer, runStreamVectors, streamVectorsProblem } from '../src/conformance.js';
import { safeUrl } from '../src/index.js';

var file = fileURLToPath(new URL('../../../tests/vectors/dify-stream.v1.json', import.meta.url));
var doc = JSON.parse(readFileSync(file, 'utf8'));

test('every stream-contract case passes every way', function () {
  assert.equal(streamVectorsProblem(doc), null);
  assert.ok(doc.cases.length >= 30);
  for (var c of doc.cases) {
    var bytes = caseBytes(c);
    for (var way of STREAM_WAYS) {
      assert.deepEqual(runConsumer(way[1](bytes)), c.expect, c.name + ' (' + way[0] + ')');
    }
  }
});

test('a wrong expectation fails every way', function () {
  var c = JSON.parse(JSON.stringify(doc.cases[0]));
  c.expect.outputs.pop();
  var r = runStreamVectors({ cases: [c] })[0];
  assert.equal(r.ok, false);
  assert.equal(r.failures.length, STREAM_WAYS.length);
});

test('the measured differences are settled by the contract', function () {
  var byName = {};
  for (var c of doc.cases) byName[c.name] = c.expect.result;
  assert.equal(byName.frame_without_event.answer, '见');
  assert.deepEqual(byName.frame_without_event.warnings, ['no_event']);
  assert.equal(byName.error_numeric_code.error.code, '500');
  assert.equal(safeUrl('https://@evil.example'), null);
  assert.equal(safeUrl('https://kb.example.com@evil.example/'), null);
  assert.equal(safeUrl(' https://kb.example.com/a '), 'https://kb.example.com/a');
});

test('base64 cases decode to the raw bytes', function () {
  var c = doc.cases.filter(function (x) { return typeof x.sse_base64 === 'string'; })[0];
  var b = caseBytes(c);
  assert.deepEqual(Array.from(b.slice(0, 3)), [0xef, 0xbb, 0xbf]);
  assert.ok(Array.from(b).indexOf(0xff) > 0);
});
