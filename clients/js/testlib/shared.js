// Test support (not a test file): locating ../shared, seeded randomness,
// Dify SSE fixtures built from the mobile seed §2 example.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

var here = path.dirname(fileURLToPath(import.meta.url));

/** The shared directory (GCITE_SHARED_DIR or <repo>/../shared), or null. */
export function sharedDir() {
  var dir = process.env.GCITE_SHARED_DIR || path.resolve(here, '..', '..', '..', '..', 'shared');
  return existsSync(dir) ? dir : null;
}

/** Seeded PRNG (mulberry32): returns floats in [0, 1). */
export function rng(seed) {
  var a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    var t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick(rand, items) {
  return items[Math.floor(rand() * items.length)];
}

export function randInt(rand, lo, hi) {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

/** Cut `text` into deltas at random points (lengths 1..maxLen code points). */
export function randomCuts(rand, text, maxLen) {
  var chars = Array.from(text);
  var out = [];
  var i = 0;
  while (i < chars.length) {
    var n = randInt(rand, 1, maxLen);
    out.push(chars.slice(i, i + n).join(''));
    i += n;
  }
  return out;
}

/** The ten chunks of the mobile seed §2.1/§2.3 (UnifiedChunk). */
export var SEED_CHUNKS = [
  ['1', 'rag', '巡更操作指南 v2.1', '测试知识库20260610', 0.73],
  ['2', 'rag', '物业管理制度 · 异常上报处理', '测试知识库20260610', 0.68],
  ['3', 'rag', '多模态RAG知识库技术方案', '测试知识库20260610', 0.55],
  ['4', 'rag', '楼宇设备清单', '测试知识库20260610', 0.5],
  ['5', 'rag', '消防应急预案', '测试知识库20260610', 0.42],
  ['6', 'web', '物业巡检分类 - 百度百科', '百度百科 · 2025-09-01', 0.72],
  ['7', 'web', '物业巡检流程标准 - 知乎', '知乎 · 2025-08-12', 0.68],
  ['8', 'web', '巡更系统对比 - CSDN', 'CSDN · 2025-07-15', 0.55],
  ['9', 'web', '异常处理SOP - 博客园', '博客园 · 2025-06-20', 0.5],
  ['10', 'web', '巡检频次规范 - 行业站', 'example.com', 0.4],
].map(function (r) {
  return {
    id: r[0],
    source_type: r[1],
    document_title: r[2],
    display_subtitle: r[3],
    score: r[4],
    url: r[1] === 'web' ? 'https://example.com/' + r[0] : '',
  };
});

/** The LLM deltas of the mobile seed §3.2 timeline. */
export var SEED_DELTAS = [
  '巡更人员', '需要先在终端登录', '[C:7]。', '登录后系统会根据预设路线', '生成待检点[C:2]。',
  '巡检时如发现异常，', '可在终端直接上报[C:6]。', '上报后系统会自动通知物业，', '这是SOP规定的紧急响应流程[C:2]。',
];

export var SEED_ANSWER =
  '巡更人员需要先在终端登录。登录后系统会根据预设路线生成待检点。巡检时如发现异常，可在终端直接上报。上报后系统会自动通知物业，这是SOP规定的紧急响应流程。';

var ENV = { conversation_id: 'conv-1', message_id: 'msg-1', created_at: 1705407629 };

function ev(obj) {
  return Object.assign({}, ENV, obj);
}

/** Dify chatflow events for one answer (dify-protocol.md §1.3-§1.7). */
export function chatflowEvents(opts) {
  var o = opts || {};
  var deltas = o.deltas || SEED_DELTAS;
  var events = [
    ev({ event: 'workflow_started', task_id: 'task-1', workflow_run_id: 'run-1', data: { id: 'run-1', workflow_id: 'wf', inputs: {} } }),
    ev({ event: 'node_finished', task_id: 'task-1', workflow_run_id: 'run-1',
      data: { id: 'n1', node_id: 'kr', node_type: 'knowledge-retrieval', status: 'succeeded', outputs: { result: [] } } }),
  ];
  if (o.metadata !== false) {
    events.push(ev({ event: 'node_finished', task_id: 'task-1', workflow_run_id: 'run-1',
      data: { id: 'n2', node_id: 'code', node_type: 'code', status: 'succeeded',
        outputs: { formatted_chunks: '…', chunk_count: 10, chunk_metadata: o.chunkMetadata || SEED_CHUNKS } } }));
  }
  for (var k = 0; k < deltas.length; k++) {
    events.push(ev({ event: 'message', task_id: 'task-1', id: 'msg-1', answer: deltas[k] }));
  }
  var wf = ev({ event: 'workflow_finished', task_id: 'task-1', workflow_run_id: 'run-1', data: { id: 'run-1', status: 'succeeded', outputs: {} } });
  var end = ev({ event: 'message_end', task_id: 'task-1', id: 'msg-1',
    metadata: { annotation_reply: null, usage: { total_tokens: 42 }, retriever_resources: o.retrieverResources || [] }, files: [] });
  if (o.tail === 'end_first') events.push(end, wf);
  else if (o.tail !== 'none') events.push(wf, end);
  return events;
}

/** Serialise events as Dify writes them: `data: <json>\n\n`. */
export function sseText(events, eol) {
  var nl = eol || '\n';
  return events.map(function (e) {
    return typeof e === 'string' ? e : 'data: ' + JSON.stringify(e) + nl + nl;
  }).join('');
}
