// The client rules have one home (clients/js/src): the H5 page and the mini program
// call them and hold no copy (no own error table, title fallback, link rule, segment
// hint, and none of the shared Chinese sentences written out again).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ERROR_SENTENCES, TEXT, WEAK_SUPPORT_TEXT } from '../src/index.js';

function read(rel) {
  return readFileSync(fileURLToPath(new URL('../../../' + rel, import.meta.url)), 'utf8');
}

var MP = 'clients/miniprogram/example/miniprogram/';
var FILES = [
  'src/gcite/service/static/app.js',
  'src/gcite/service/static/index.html',
  MP + 'components/g-cite-answer/index.js',
  MP + 'components/g-cite-answer/view.js',
  MP + 'components/g-cite-answer/index.wxml',
  MP + 'pages/chat/chat.js',
  MP + 'pages/chat/chat.wxml',
];

var OLD_COPIES = [
  [/function\s+errorText\b/, 'an own errorText'],
  [/ERROR_CODES/, 'an own error table'],
  [/isChinese/, 'showing server text when it looks Chinese'],
  [/document_title\s*\|\|/, 'an own title fallback'],
  [/未命名来源/, 'an own title placeholder'],
  [/function\s+chunkUrl\b/, 'an own chunkUrl'],
  [/function\s+rawUrl\b/, 'an own link rule'],
  [/function\s+passageHint\b/, 'an own segment hint'],
  [/chunk\.url\s*\|\|\s*chunk\.source_file_url/, 'an own link fallback'],
  [/stripMarkers\(/, 'an own reasoning cleanup'],
  [/已切换身份：/, 'an own identity-switch line'],
];

test('the page and the mini program hold no copy of a client rule', function () {
  for (var file of FILES) {
    var src = read(file);
    for (var pair of OLD_COPIES) assert.doesNotMatch(src, pair[0], file + ': ' + pair[1]);
  }
});

test('the shared Chinese sentences are written only in clients/js/src', function () {
  var sentences = Object.keys(TEXT).map(function (k) { return TEXT[k]; })
    .concat(Object.keys(ERROR_SENTENCES).map(function (k) { return ERROR_SENTENCES[k]; }))
    .concat([WEAK_SUPPORT_TEXT])
    .filter(function (s) { return s.length >= 5; });
  assert.ok(sentences.length >= 18);
  for (var file of FILES) {
    var src = read(file);
    for (var s of sentences) assert.ok(src.indexOf(s) < 0, file + ' writes out "' + s + '" (use the client\'s TEXT / errorText)');
  }
});
