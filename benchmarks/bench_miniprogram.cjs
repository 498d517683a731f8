#!/usr/bin/env node
// CPU per delta of the mini program's <g-cite-answer> in miniprogram-simulate.
//
//   node benchmarks/bench_miniprogram.cjs [--rounds 3]
//
// Needs the mini program's test packages (make miniprogram, then npm ci in
// clients/miniprogram/test). An answer of N one-character deltas (paragraphs of
// ~100 characters, one citation each) is handed to the component as Dify SSE
// frames, one frame per wx.request chunk (a stand-in for wx.request: no network),
// two ways: "burst" - each chunk in its own macrotask, as fast as possible;
// "paced" - 4 chunks per 1 ms timer (about 4,000 deltas a second, a fast model).
// Measured, in the same process and run:
//   component - CPU (user + system) from ask() to the finish event: parsing,
//               Markdown, the batched setData renders (the component's own frame
//               scheduler, one render per 16 ms at most);
//   deliver   - the baseline: the same frames delivered to a listener that only
//               counts the bytes.
// Prints ONE JSON object on stdout: per N the medians (ms), CPU per delta (µs) and
// the number of setData calls. Not a test: run on demand for docs/benchmarks.md.
'use strict';
const path = require('node:path');

const TEST = path.resolve(__dirname, '..', 'clients', 'miniprogram', 'test');
const h = require(path.join(TEST, 'lib', 'harness.js'));
const { simulate } = require(path.join(TEST, 'lib', 'env.js'));

function frame(obj) {
  return 'data: ' + JSON.stringify(obj) + '\n\n';
}

/** The SSE frames of one answer of `n` one-character deltas. */
function frames(n) {
  const env = { conversation_id: 'c1', message_id: 'm1', task_id: 't1' };
  const out = [];
  out.push(frame(Object.assign({ event: 'workflow_started', workflow_run_id: 'r1', data: { id: 'r1' } }, env)));
  out.push(frame(Object.assign({
    event: 'node_finished',
    data: {
      node_type: 'code',
      status: 'succeeded',
      outputs: {
        chunk_metadata: [
          { id: '1', source_type: 'rag', document_title: '巡更路线与打卡规范 v2.1', display_subtitle: '明湖大厦物业手册', content: '夜间巡更每 1 小时一次。' },
        ],
      },
    },
  }, env)));
  let text = '';
  while (text.length < n) text += '巡'.repeat(90) + '[C:1]。\n\n';
  for (const ch of Array.from(text.slice(0, n))) out.push(frame(Object.assign({ event: 'message', answer: ch }, env)));
  out.push(frame(Object.assign({ event: 'message_end', metadata: {} }, env)));
  return out.map(function (f) { return Buffer.from(f, 'utf8'); });
}

/** A wx.request stand-in delivering `chunks`: one per macrotask, or `paced`: 4 per 1 ms timer. */
function installWx(chunks, paced) {
  global.wx = global.wx || {};
  global.wx.request = function (options) {
    const listeners = [];
    let aborted = false;
    let k = 0;
    function next() {
      if (aborted) return;
      if (k < chunks.length) {
        for (let j = 0; j < (paced ? 4 : 1) && k < chunks.length; j++) {
          const c = chunks[k++];
          const data = c.buffer.slice(c.byteOffset, c.byteOffset + c.byteLength);
          for (const fn of listeners) fn({ data: data });
        }
        if (paced) setTimeout(next, 1);
        else setImmediate(next);
      } else if (options.success) {
        options.success({ statusCode: 200, data: null, header: { 'content-type': 'text/event-stream' } });
      }
    }
    setImmediate(next);
    return {
      onChunkReceived: function (fn) { listeners.push(fn); },
      onHeadersReceived: function () {},
      abort: function () { aborted = true; },
    };
  };
}

function cpuMs(start) {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

async function component(chunks, paced) {
  installWx(chunks, paced);
  const comp = h.mount({ serviceUrl: 'http://bench.invalid', apiKey: 'k', user: 'bench' }, { scheduler: 'frame' });
  const start = process.cpuUsage();
  comp.instance.ask('巡更');
  await h.untilFinished(comp, 1, 600000);
  const ms = cpuMs(start);
  if (comp.finished[0].status !== 'done') throw new Error('answer ended ' + comp.finished[0].status);
  return { ms: ms, setData: comp.setDataCalls, blocks: comp.data.blocks.length };
}

function deliver(chunks, paced) {
  installWx(chunks, paced);
  return new Promise(function (resolve) {
    const start = process.cpuUsage();
    let bytes = 0;
    const task = global.wx.request({ success: function () { resolve({ ms: cpuMs(start), bytes: bytes }); } });
    task.onChunkReceived(function (res) { bytes += res.data.byteLength; });
  });
}

function median(xs) {
  const s = xs.slice().sort(function (a, b) { return a - b; });
  return s[Math.floor(s.length / 2)];
}

async function main() {
  const at = process.argv.indexOf('--rounds');
  const rounds = at > 0 ? Number(process.argv[at + 1]) : 3;
  const out = { rounds: rounds, node: process.version, results: [] };
  for (const mode of ['burst', 'paced']) {
    const paced = mode === 'paced';
    for (const n of [1000, 2000, 4000, 8000]) {
      const chunks = frames(n);
      const comp = [];
      const base = [];
      for (let r = 0; r < rounds; r++) {
        // alternate the order per round
        if (r % 2 === 0) { comp.push(await component(chunks, paced)); base.push(await deliver(chunks, paced)); }
        else { base.push(await deliver(chunks, paced)); comp.push(await component(chunks, paced)); }
        await simulate.sleep(20);
      }
      const c = median(comp.map(function (x) { return x.ms; }));
      const d = median(base.map(function (x) { return x.ms; }));
      out.results.push({
        mode: mode,
        deltas: n,
        component_ms: Math.round(c * 10) / 10,
        deliver_ms: Math.round(d * 10) / 10,
        component_us_per_delta: Math.round((c / n) * 1000),
        extra_us_per_delta: Math.round(((c - d) / n) * 1000),
        set_data_calls: median(comp.map(function (x) { return x.setData; })),
        blocks: comp[0].blocks,
      });
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

main().catch(function (e) {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
