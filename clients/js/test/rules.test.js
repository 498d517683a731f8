// The client-rule vectors (tests/vectors/*.v1.json of the kinds in RULES), the same
// files the Python client runs (tests/stream/test_client_rules.py).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RULES, runRuleVectors } from '../src/conformance.js';
import { ERROR_SENTENCES } from '../src/messages.js';

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

test('every error code of the client has its case in the error-text vectors', function () {
  var file = fileURLToPath(new URL('../../../tests/vectors/error-text.v1.json', import.meta.url));
  var doc = JSON.parse(readFileSync(file, 'utf8'));
  var codes = new Set(doc.cases.map(function (c) {
    return c.error !== null && typeof c.error === 'object' ? c.error.code : undefined;
  }));
  for (var code of Object.keys(ERROR_SENTENCES)) assert.ok(codes.has(code), 'no case for ' + code);
});
