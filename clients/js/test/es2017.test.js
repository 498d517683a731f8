// Syntax lint: the client sources must run in a WeChat mini program, so they
// stay within ES2017. acorn is not a dependency here, so this is a documented
// lint check rather than a parse: strip comments, strings, template literals
// and regex literals with a small scanner, then look for syntax and library
// calls newer than ES2017. Every src/*.js file must also load as a module.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

var srcDir = fileURLToPath(new URL('../src/', import.meta.url));
var files = readdirSync(srcDir).filter(function (f) { return f.endsWith('.js'); });

/** Code with comments, strings, templates and regex literals blanked out. */
function codeOnly(src) {
  var out = '';
  var i = 0;
  var prev = ''; // last significant code character, to tell a regex from a division
  while (i < src.length) {
    var c = src[i];
    var d = src[i + 1];
    if (c === '/' && d === '/') {
      while (i < src.length && src[i] !== '\n') i++;
      continue;
    }
    if (c === '/' && d === '*') {
      var end = src.indexOf('*/', i + 2);
      i = end < 0 ? src.length : end + 2;
      out += ' ';
      continue;
    }
    if (c === '"' || c === "'" || c === '`') {
      var j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1;
      out += c + c;
      i = j + 1;
      prev = c;
      continue;
    }
    if (c === '/' && (prev === '' || '(,=:[!&|?{};+-*%<>~^'.indexOf(prev) >= 0 || /\b(return|typeof)\s*$/.test(out))) {
      var k = i + 1;
      var inClass = false;
      while (k < src.length && (src[k] !== '/' || inClass)) {
        if (src[k] === '\\') k++;
        else if (src[k] === '[') inClass = true;
        else if (src[k] === ']') inClass = false;
        k++;
      }
      k++;
      while (/[a-z]/.test(src[k] || '')) k++;
      out += '/re/';
      i = k;
      prev = '/';
      continue;
    }
    out += c;
    if (!/\s/.test(c)) prev = c;
    i++;
  }
  return out;
}

var FORBIDDEN = [
  [/\?\.(?!\d)/, 'optional chaining ?.'],
  [/\?\?/, 'nullish coalescing ??'],
  [/#[A-Za-z_$]/, 'private class member #x'],
  [/\bcatch\s*\{/, 'optional catch binding'],
  [/\bfor\s+await\b/, 'for await'],
  [/\.\.\./, 'spread/rest (object spread is ES2018; kept out entirely)'],
  [/\basync\s+function\s*\*/, 'async generator'],
  [/\bglobalThis\b/, 'globalThis (ES2020)'],
  [/\.(flat|flatMap|matchAll|replaceAll|trimStart|trimEnd|at)\(/, 'post-ES2017 method'],
  [/\b(Object\.fromEntries|Promise\.allSettled|Promise\.any|BigInt|WeakRef|structuredClone)\b/, 'post-ES2017 built-in'],
  [/\*\*=?/, 'exponent operator is ES2016 (allowed) but kept out for old runtimes'],
  [/\bimport\s*\(/, 'dynamic import()'],
  [/\bimport\.meta\b/, 'import.meta'],
  [/^\s*await\b/m, 'top-level await'],
];

// Class fields: a class body statement that is an assignment or bare name.
function classFields(code) {
  var found = [];
  var re = /\bclass\s+[A-Za-z_$][\w$]*(\s+extends\s+[\w$.]+)?\s*\{/g;
  var m;
  while ((m = re.exec(code)) !== null) {
    var depth = 1;
    var i = re.lastIndex;
    var lineStart = i;
    for (; i < code.length && depth > 0; i++) {
      var ch = code[i];
      if (ch === '{') depth++;
      else if (ch === '}') depth--;
      else if (ch === '\n') {
        var line = code.slice(lineStart, i);
        if (depth === 1 && /^\s*(static\s+)?[A-Za-z_$][\w$]*\s*(=|;|$)/.test(line) && line.trim() !== '') found.push(line.trim());
        lineStart = i + 1;
      }
    }
  }
  return found;
}

test('the scanner blanks strings, comments and regex literals', function () {
  var code = codeOnly("var a = 'x ?? y'; // c?.d\nvar r = /a?.b/g; var t = `${x ?? y}`; /* ... */ var q = b / 2;");
  assert.equal(/\?\?|\?\.|\.\.\./.test(code), false, code);
  assert.ok(code.indexOf('b / 2') >= 0);
  assert.ok(FORBIDDEN[0][0].test(codeOnly('var a = b?.c;')));
  assert.deepEqual(classFields(codeOnly('class A {\n  x = 1;\n  constructor() {\n    this.y = 2;\n  }\n}\n')), ['x = 1;']);
});

test('src files use no syntax or built-ins newer than ES2017', function () {
  assert.ok(files.length >= 8, files.join(','));
  for (var f of files) {
    var code = codeOnly(readFileSync(path.join(srcDir, f), 'utf8'));
    for (var rule of FORBIDDEN) assert.equal(rule[0].test(code), false, f + ': ' + rule[1] + ' near ' + JSON.stringify((code.match(rule[0]) || [''])[0]));
    assert.deepEqual(classFields(code), [], f + ': class fields');
  }
});

test('every src file loads as an ES module', async function () {
  for (var f of files) await import(path.join(srcDir, f));
});
