// The client-rule vectors (tests/vectors/*.v1.json of the kinds in RULES), the same
// files the Python client runs (tests/stream/test_client_rules.py).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RULES, runRuleVectors } from '../src/conformance.js';

var FILES = ['error-text', 'source-rows', 'verification-display', 'answer-notice', 'copy-text'];

for (var name of FILES) {
  test('client-rule vectors: ' + name, function () {
    var file = fileURLToPath(new URL('../../../tests/vectors/' + name + '.v1.json', import.meta.url));
    var doc = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(doc.kind, name);
    assert.ok(RULES[doc.kind]);
    assert.ok(doc.cases.length >= 4);
    for (var r of runRuleVectors(doc)) assert.deepEqual(r.got, r.expect, name + ': ' + r.name);
  });
}

test('a wrong expectation fails', function () {
  var res = runRuleVectors({ kind: 'error-text', cases: [{ name: 'x', error: { code: 'timeout' }, expect: 'Timeout' }] });
  assert.equal(res[0].ok, false);
  assert.equal(res[0].got, '请求超时，请稍后重试');
});
