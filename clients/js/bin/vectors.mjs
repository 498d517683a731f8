#!/usr/bin/env node
// Conformance runner for vectors files: citation-marker vectors (spec §8
// format) and Dify stream-contract vectors ("kind": "dify-stream",
// docs/stream-contract.md).
//
//   node clients/js/bin/vectors.mjs ../shared/vectors/citation-stream.v2.json
//   node clients/js/bin/vectors.mjs tests/vectors/dify-stream.v1.json
//
// Feeds every marker case three ways (as given, one delta, one character per
// delta) and every stream case whole, byte by byte and in random cuts,
// prints one line per failing case, then "N passed, N failed" alone on the last
// line. Exit status: 0 all passed, 1 a case failed, 2 the file is unreadable
// or not in the vectors format (one line on stderr).
import { readFileSync } from 'node:fs';
import { STREAM_KIND, runStreamVectors, runVectors, streamVectorsProblem, vectorsProblem } from '../src/conformance.js';

function main(argv) {
  if (argv.length !== 1) {
    process.stderr.write('用法：node bin/vectors.mjs <测试向量文件.json>\n');
    return 2;
  }
  var file = argv[0];
  var doc;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    var reason = e && e.code ? e.code : e && e.message ? e.message : String(e);
    process.stderr.write('无法读取测试向量文件 ' + file + '：' + reason + '\n');
    return 2;
  }
  var stream = doc !== null && typeof doc === 'object' && doc.kind === STREAM_KIND;
  var problem = stream ? streamVectorsProblem(doc) : vectorsProblem(doc);
  if (problem !== null) {
    process.stderr.write('测试向量文件格式不符 ' + file + '：' + problem + '\n');
    return 2;
  }
  var results = stream ? runStreamVectors(doc) : runVectors(doc);
  var passed = 0;
  var failed = 0;
  for (var k = 0; k < results.length; k++) {
    var r = results[k];
    if (r.ok) {
      passed++;
      continue;
    }
    failed++;
    var f = r.failures[0];
    var ways = r.failures.map(function (x) { return x.way; }).join(', ');
    process.stdout.write(
      '失败 ' + r.name + ' [' + ways + ']：期望 ' + JSON.stringify(r.expect) + '，实际 ' + JSON.stringify(f.got) + '\n'
    );
  }
  process.stdout.write(passed + ' passed, ' + failed + ' failed\n');
  return failed > 0 ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
