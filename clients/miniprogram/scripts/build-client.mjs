#!/usr/bin/env node
// Copy step: the JavaScript client (clients/js/src, ES modules) into the mini
// program as CommonJS modules, which every WeChat base library loads with
// require() without the devtools' ES6 compilation.
//
//   node clients/miniprogram/scripts/build-client.mjs [--out DIR] [--src DIR]
//
// Default output: clients/miniprogram/example/miniprogram/components/g-cite-answer/lib/gcite-client/
// (gitignored; the component requires ./lib/gcite-client/index.js), and the
// vendored markdown-it (src/gcite/service/static/vendor/, the H5 page's copy)
// into lib/markdown-it/ beside it, byte for byte. Exit status
// 0 on success, 2 on an unsupported construct or an unreadable source (one line
// on stderr naming the file and line).
//
// The conversion is a syntax-level rewrite of the top-level import/export
// statements only; the code between them is copied byte for byte. Supported
// forms (the ones clients/js/src is allowed to use, ES2017 + ES modules):
//   import { a, b as c } from './x.js';        -> var a = _x.a, c = _x.b (after require)
//   import * as ns from './x.js';              -> var ns = require('./x.js');
//   export function f / export class C / export var|let|const X
//   export { a, b as c };                      -> exports at the end of the file
//   export { a, b as c } from './x.js';        -> re-exports through getters
// Anything else starting with `import` or `export` at the start of a line
// (default exports, `export *`, dynamic import, bare imports) is refused, so a
// change in the client that this step cannot carry fails loudly.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..', '..');
export const DEFAULT_SRC = path.join(REPO, 'clients', 'js', 'src');
export const DEFAULT_OUT = path.join(
  REPO, 'clients', 'miniprogram', 'example', 'miniprogram', 'components', 'g-cite-answer', 'lib', 'gcite-client'
);
/** The vendored markdown-it (UMD bundle, CommonJS-loadable) the H5 page uses too. */
export const MARKDOWN_IT = path.join(REPO, 'src', 'gcite', 'service', 'static', 'vendor');
const MARKDOWN_IT_FILES = ['markdown-it.min.js', 'markdown-it.LICENSE', 'markdown-it.VERSION'];

export class BuildError extends Error {}

const SPEC = String.raw`['"](\.{1,2}\/[^'"\s]+\.js)['"]`;
const NAME = String.raw`[A-Za-z_$][\w$]*`;
const RE_IMPORT_NAMED = new RegExp(String.raw`^import\s*\{([^}]*)\}\s*from\s*` + SPEC + String.raw`\s*;?\s*$`);
const RE_IMPORT_NS = new RegExp(String.raw`^import\s*\*\s*as\s+(` + NAME + String.raw`)\s+from\s*` + SPEC + String.raw`\s*;?\s*$`);
const RE_EXPORT_FROM = new RegExp(String.raw`^export\s*\{([^}]*)\}\s*from\s*` + SPEC + String.raw`\s*;?\s*$`);
const RE_EXPORT_LIST = new RegExp(String.raw`^export\s*\{([^}]*)\}\s*;?\s*$`);
const RE_EXPORT_DECL = new RegExp(String.raw`^export\s+((?:async\s+)?function\s*\*?\s*|class\s+|var\s+|let\s+|const\s+)(` + NAME + ')');

function specifiers(list, where) {
  const out = [];
  for (const part of list.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const m = new RegExp('^(' + NAME + String.raw`)(?:\s+as\s+(` + NAME + '))?$').exec(item);
    if (!m) throw new BuildError(where + ': cannot read the specifier "' + item + '"');
    out.push({ local: m[1], exported: m[2] || m[1] });
  }
  return out;
}

function moduleVar(spec) {
  return '_' + path.basename(spec, '.js').replace(/[^\w$]/g, '_');
}

/**
 * Convert one ES module source (the restricted form above) to CommonJS.
 * @param {string} source
 * @param {string} name file name, for messages
 * @returns {string}
 * @throws {BuildError} on an unsupported construct
 */
export function toCommonJs(source, name) {
  const lines = source.split('\n');
  const out = [];
  const exportsAtEnd = [];
  const required = new Map(); // spec -> variable
  let reexports = 0;
  function requireVar(spec) {
    let v = required.get(spec);
    if (v === undefined) {
      v = moduleVar(spec);
      required.set(spec, v);
      return { v: v, stmt: 'var ' + v + ' = require(' + JSON.stringify(spec) + ');' };
    }
    return { v: v, stmt: '' };
  }
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (!/^(import|export)\b/.test(line)) {
      if (/^\s*import\s*\(/.test(line) || /[^\w$.]import\s*\(/.test(line.replace(/\/\/.*$/, ''))) {
        throw new BuildError(name + ':' + (i + 1) + ': dynamic import() is not supported in a mini program');
      }
      out.push(line);
      continue;
    }
    // Gather a multi-line statement (an export/import list) up to its end.
    let stmt = line;
    const start = i;
    if (/^(import|export)\s*\{/.test(line) || /^import\b/.test(line)) {
      while (!/;\s*$/.test(stmt) && !/from\s*['"][^'"]+['"]\s*$/.test(stmt) && !/^export\s*\{[^}]*\}\s*$/.test(stmt)) {
        i++;
        if (i >= lines.length) throw new BuildError(name + ':' + (start + 1) + ': unterminated ' + line.split(/\s/)[0] + ' statement');
        stmt += ' ' + lines[i].trim();
      }
    }
    const where = name + ':' + (start + 1);
    let m;
    const pad = new Array(i - start).fill(''); // keep the line numbers of the source
    if ((m = RE_IMPORT_NAMED.exec(stmt))) {
      const r = requireVar(m[2]);
      const vars = specifiers(m[1], where).map(function (s) {
        return s.exported + ' = ' + r.v + '.' + s.local;
      });
      out.push((r.stmt ? r.stmt + ' ' : '') + (vars.length ? 'var ' + vars.join(', ') + ';' : ''));
    } else if ((m = RE_IMPORT_NS.exec(stmt))) {
      out.push('var ' + m[1] + ' = require(' + JSON.stringify(m[2]) + ');');
    } else if ((m = RE_EXPORT_FROM.exec(stmt))) {
      const v = '_reexport' + reexports++;
      const defs = specifiers(m[1], where).map(function (s) {
        return 'Object.defineProperty(exports, ' + JSON.stringify(s.exported) + ', { enumerable: true, get: function () { return ' + v + '.' + s.local + '; } });';
      });
      out.push('var ' + v + ' = require(' + JSON.stringify(m[2]) + '); ' + defs.join(' '));
    } else if ((m = RE_EXPORT_LIST.exec(stmt))) {
      for (const s of specifiers(m[1], where)) exportsAtEnd.push(s);
      out.push('');
    } else if ((m = RE_EXPORT_DECL.exec(stmt))) {
      exportsAtEnd.push({ local: m[2], exported: m[2] });
      out.push(stmt.replace(/^export\s+/, ''));
    } else {
      throw new BuildError(where + ': unsupported module syntax: ' + stmt.slice(0, 80));
    }
    for (const p of pad) out.push(p);
  }
  const tail = exportsAtEnd.map(function (s) {
    return 'exports.' + s.exported + ' = ' + s.local + ';';
  });
  return "'use strict';\n" + out.join('\n').replace(/\s*$/, '\n') + (tail.length ? tail.join('\n') + '\n' : '');
}

/**
 * Build every *.js of `src` into `out` (which is emptied first).
 * @param {{src?: string, out?: string}} [options]
 * @returns {{files: string[], out: string}}
 * @throws {BuildError}
 */
export function build(options) {
  const src = path.resolve((options && options.src) || DEFAULT_SRC);
  const out = path.resolve((options && options.out) || DEFAULT_OUT);
  let names;
  try {
    names = fs.readdirSync(src).filter(function (n) { return n.endsWith('.js'); }).sort();
  } catch (e) {
    throw new BuildError('cannot read ' + src + ': ' + e.message);
  }
  if (names.indexOf('index.js') < 0) throw new BuildError(src + ' has no index.js');
  const converted = names.map(function (n) {
    const text = fs.readFileSync(path.join(src, n), 'utf8');
    const header =
      '// Generated from clients/js/src/' + n + ' by clients/miniprogram/scripts/build-client.mjs.\n' +
      '// Do not edit: change the source and run the script again.\n';
    return [n, header + toCommonJs(text, n)];
  });
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  for (const [n, text] of converted) fs.writeFileSync(path.join(out, n), text);
  fs.writeFileSync(
    path.join(out, 'README.md'),
    'Generated by clients/miniprogram/scripts/build-client.mjs from clients/js/src (CommonJS for the mini program). Do not edit.\n'
  );
  // markdown-it next to the client: <out>/../markdown-it/ (the renderer takes it injected).
  const mdOut = path.join(path.dirname(out), 'markdown-it');
  const mdSrc = (options && options.markdownIt) || MARKDOWN_IT;
  fs.rmSync(mdOut, { recursive: true, force: true });
  fs.mkdirSync(mdOut, { recursive: true });
  for (const n of MARKDOWN_IT_FILES) {
    let data;
    try {
      data = fs.readFileSync(path.join(mdSrc, n));
    } catch (e) {
      throw new BuildError('cannot read ' + path.join(mdSrc, n) + ': ' + e.message);
    }
    fs.writeFileSync(path.join(mdOut, n), data);
  }
  return { files: names, out: out, markdownIt: mdOut };
}

function main(argv) {
  const opts = {};
  for (let k = 0; k < argv.length; k++) {
    if (argv[k] === '--out' && k + 1 < argv.length) opts.out = argv[++k];
    else if (argv[k] === '--src' && k + 1 < argv.length) opts.src = argv[++k];
    else {
      process.stderr.write('usage: build-client.mjs [--out DIR] [--src DIR]\n');
      return 2;
    }
  }
  try {
    const res = build(opts);
    process.stdout.write('gcite-client: ' + res.files.length + ' modules -> ' + path.relative(process.cwd(), res.out) + ', markdown-it -> ' + path.relative(process.cwd(), res.markdownIt) + '\n');
    return 0;
  } catch (e) {
    if (e instanceof BuildError) {
      process.stderr.write('build-client: ' + e.message + '\n');
      return 2;
    }
    throw e;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
