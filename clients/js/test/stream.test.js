// Utf8Decoder, SseDecoder and AnswerStream over real Dify-shaped SSE bytes.
import test from 'node:test';
import assert from 'node:assert/strict';
import { AnswerStream, SseDecoder, Utf8Decoder } from '../src/index.js';
import { SEED_ANSWER, SEED_CHUNKS, SEED_DELTAS, chatflowEvents, sseText } from '../testlib/shared.js';

var enc = new TextEncoder();

function bytesOf(text) {
  return enc.encode(text);
}

/** Run an AnswerStream over byte chunks; collect every callback. */
function consume(chunks, opts) {
  var seen = { metadata: [], segments: [], events: [], errors: [], done: [] };
  var s = new AnswerStream(Object.assign({
    onMetadata: function (c) { seen.metadata.push(c); },
    onSegments: function (x) { seen.segments.push(x); },
    onEvent: function (e) { seen.events.push(e); },
    onError: function (e) { seen.errors.push(e); },
    onDone: function (r) { seen.done.push(r); },
  }, opts || {}));
  for (var c of chunks) {
    if (typeof c === 'string') s.pushText(c);
    else s.pushBytes(c);
  }
  var result = s.end();
  assert.equal(seen.done.length, 1);
  assert.equal(seen.done[0], result);
  return { result: result, seen: seen };
}

function cutBytes(bytes, at) {
  return [bytes.slice(0, at).buffer, bytes.slice(at).buffer];
}

var SEED_SEGMENTS = [
  { text: '巡更人员需要先在终端登录' }, { cite: '7', idx: 1 },
  { text: '。登录后系统会根据预设路线生成待检点' }, { cite: '2', idx: 2 },
  { text: '。巡检时如发现异常，可在终端直接上报' }, { cite: '6', idx: 3 },
  { text: '。上报后系统会自动通知物业，这是SOP规定的紧急响应流程' }, { cite: '2', idx: 2 },
  { text: '。' },
];

test('Utf8Decoder: every split of multi-byte text, 4-byte characters, BOM, invalid bytes', function () {
  var text = '\ufeff引用【C：５】😀é';
  var bytes = bytesOf(text);
  for (var at = 0; at <= bytes.length; at++) {
    for (var at2 = at; at2 <= bytes.length; at2 += 3) {
      var d = new Utf8Decoder();
      var s = d.decode(bytes.slice(0, at)) + d.decode(bytes.slice(at, at2).buffer) + d.decode(bytes.slice(at2)) + d.flush();
      assert.equal(s, text.slice(1), 'cut at ' + at + ',' + at2);
    }
  }
  var bad = new Utf8Decoder();
  assert.equal(bad.decode(new Uint8Array([0x61, 0xff, 0xe4, 0xb8, 0x62, 0xed, 0xa0, 0x80])), 'a\ufffd\ufffdb\ufffd\ufffd\ufffd');
  var cut = new Utf8Decoder();
  assert.equal(cut.decode(new Uint8Array([0x61, 0xe4, 0xb8])), 'a');
  assert.equal(cut.flush(), '\ufffd');
  assert.throws(function () { new Utf8Decoder().decode('text'); }, TypeError);
});

test('SseDecoder: CRLF, CR split across chunks, comments, bare event lines, multi-line data', function () {
  var d = new SseDecoder();
  var events = [];
  for (var piece of [': comment\r\nevent: ping\r', '\n\r\ndata: {"a":', '1}\r\n\r\ndata: x\ndata: y\n', 'id: 7\n\n', 'data: tail']) {
    events = events.concat(d.feed(piece));
  }
  events = events.concat(d.close());
  assert.deepEqual(events, [
    { event: 'ping', data: null, id: '' },
    { event: '', data: '{"a":1}', id: '' },
    { event: '', data: 'x\ny', id: '7' },
    { event: '', data: 'tail', id: '7' },
  ]);
});

test('SseDecoder: a CR at the end of one chunk and an LF at the start of the next are one line end', function () {
  var d = new SseDecoder();
  var events = d.feed('data: a\r').concat(d.feed('\ndata: b\r'), d.feed('\n\r'), d.feed('\n'));
  assert.deepEqual(events, [{ event: '', data: 'a\nb', id: '' }]);
});

test('SseDecoder: a line past maxLine is an error with code frame_too_large', function () {
  var d = new SseDecoder({ maxLine: 64 });
  assert.throws(function () { d.feed('data: ' + 'x'.repeat(100)); }, function (e) { return e.code === 'frame_too_large'; });
});

test('the seed timeline: metadata, segments, panel in order of appearance', function () {
  var r = consume([bytesOf(sseText(chatflowEvents()))]);
  var res = r.result;
  assert.deepEqual(res.segments, SEED_SEGMENTS);
  assert.equal(res.answer, SEED_ANSWER);
  assert.deepEqual(res.citations, [['7', 1], ['2', 2], ['6', 3]]);
  assert.deepEqual(res.panel.map(function (p) { return [p.idx, p.rawId, p.chunk.document_title]; }), [
    [1, '7', '物业巡检流程标准 - 知乎'], [2, '2', '物业管理制度 · 异常上报处理'], [3, '6', '物业巡检分类 - 百度百科'],
  ]);
  assert.equal(r.seen.metadata.length, 1);
  assert.equal(r.seen.metadata[0].length, 10);
  assert.equal(res.messageId, 'msg-1');
  assert.equal(res.conversationId, 'conv-1');
  assert.equal(res.taskId, 'task-1');
  assert.deepEqual(res.metadata.usage, { total_tokens: 42 });
  assert.equal(res.error, null);
  assert.deepEqual(res.warnings, []);
  assert.deepEqual(r.seen.events.map(function (e) { return e.event; }).slice(-2), ['workflow_finished', 'message_end']);
});

test('UTF-8 split inside multi-byte characters: every byte offset gives the same result', function () {
  var events = chatflowEvents({ deltas: ['登录【C', '：１】，', '密码[C:1]'] });
  var bytes = bytesOf(sseText(events));
  var expected = consume([bytes.buffer]).result;
  assert.deepEqual(expected.segments, [{ text: '登录' }, { cite: '1', idx: 1 }, { text: '，密码' }, { cite: '1', idx: 1 }]);
  for (var at = 1; at < bytes.length; at++) {
    var got = consume(cutBytes(bytes, at)).result;
    assert.deepEqual(got.segments, expected.segments, 'cut at byte ' + at);
    assert.deepEqual(got.panel, expected.panel);
  }
  // And one byte per chunk.
  var single = [];
  for (var b = 0; b < bytes.length; b++) single.push(bytes.slice(b, b + 1));
  assert.deepEqual(consume(single).result.segments, expected.segments);
});

test('bare event: ping lines and CRLF line endings are understood', function () {
  var events = chatflowEvents();
  var wire = 'event: ping\r\n\r\n' + sseText(events.slice(0, 4), '\r\n') + 'event: ping\r\n\r\n' + sseText(events.slice(4), '\r\n');
  var r = consume([wire]);
  assert.deepEqual(r.result.segments, SEED_SEGMENTS);
  assert.equal(r.seen.events.filter(function (e) { return e.event === 'ping'; }).length, 2);
});

test('message_end before workflow_finished, and a stream that just ends, give the same answer', function () {
  var a = consume([sseText(chatflowEvents({ tail: 'end_first' }))]).result;
  var b = consume([sseText(chatflowEvents({ tail: 'none' }))]).result;
  assert.deepEqual(a.segments, SEED_SEGMENTS);
  assert.deepEqual(b.segments, SEED_SEGMENTS);
  assert.deepEqual(b.panel.map(function (p) { return p.rawId; }), ['7', '2', '6']);
  assert.equal(b.metadata, null);
  assert.equal(b.error, null);
});

test('held text is released at message_end, before the stream closes', function () {
  var segs = [];
  var s = new AnswerStream({ onSegments: function (x) { segs = segs.concat(x); } });
  s.pushText(sseText(chatflowEvents({ deltas: ['结论[C:1'], tail: 'end_first' })));
  assert.deepEqual(segs, [{ text: '结论' }, { text: '[C:1' }]);
  assert.equal(s.ended, false);
  assert.equal(s.end().answer, '结论[C:1');
});

test('an error event releases held text, is reported once, and keeps the partial answer', function () {
  var events = chatflowEvents({ deltas: ['已知[C:3]，正在[C:'], tail: 'none' });
  events.push({ event: 'workflow_finished', data: { status: 'failed', error: 'boom' } });
  events.push({ event: 'error', conversation_id: 'conv-1', message_id: 'msg-1', code: 'internal_server_error', status: 500, message: 'Run failed: boom' });
  var r = consume([sseText(events)]);
  assert.deepEqual(r.result.segments, [{ text: '已知' }, { cite: '3', idx: 1 }, { text: '，正在[C:' }]);
  assert.deepEqual(r.result.error, { code: 'internal_server_error', status: 500, message: 'Run failed: boom' });
  assert.deepEqual(r.seen.errors, [r.result.error]);
});

test('retriever_resources fallback when no chunk_metadata came', function () {
  var rr = [
    { position: 1, dataset_name: '法律库', document_name: '民法典.pdf', content: '第一条', score: 0.9, doc_metadata: { source_file_url: 'https://files.example.com/民法典.pdf' } },
    { position: 2, dataset_name: '法律库', title: '刑法', content: '第二条', doc_metadata: null },
    'junk',
  ];
  var r = consume([sseText(chatflowEvents({ metadata: false, deltas: ['见[C:2]与[C:1]及[C:9]'], retrieverResources: rr }))]).result;
  assert.deepEqual(r.citations, [['2', 1], ['1', 2], ['9', 3]]);
  assert.deepEqual(r.invalid, []);
  assert.deepEqual(r.panel.map(function (p) {
    return p.chunk === null ? [p.idx, p.rawId, null] :
      [p.idx, p.rawId, p.chunk.source_type, p.chunk.document_title, p.chunk.display_subtitle, p.chunk.url];
  }), [
    [1, '2', 'rag', '刑法', '法律库', ''],
    [2, '1', 'rag', '民法典.pdf', '法律库', 'https://files.example.com/民法典.pdf'],
    [3, '9', null],
  ]);
});

test('retriever_resources written by the gcite service map back to the cited raw ids', function () {
  // The gcite service numbers positions in display order and keeps the raw chunk id,
  // source type and subtitle in doc_metadata (docs/api.md); the fallback panel must use them.
  var rr = [
    { position: 1, dataset_name: '', document_name: '物业巡检流程标准 - 知乎', content: '网页摘要',
      doc_metadata: { chunk_id: '7', source_type: 'web', document_title: '物业巡检流程标准 - 知乎',
        display_subtitle: '知乎 · 2025-08-12', url: 'https://www.zhihu.com/q/1' } },
    { position: 2, dataset_name: '测试知识库', document_name: '巡更.md', content: '巡更',
      doc_metadata: { chunk_id: '2', source_type: 'rag', document_title: '巡更操作指南',
        display_subtitle: '测试知识库', source_file_url: 'oss://kb/巡更.pdf' } },
  ];
  var r = consume([sseText(chatflowEvents({ metadata: false, deltas: ['先[C:7]后[C:2]再[C:7]'], retrieverResources: rr }))]).result;
  assert.deepEqual(r.citations, [['7', 1], ['2', 2]]);
  assert.deepEqual(r.panel.map(function (p) {
    return [p.idx, p.rawId, p.chunk.source_type, p.chunk.document_title, p.chunk.display_subtitle, p.chunk.url];
  }), [
    [1, '7', 'web', '物业巡检流程标准 - 知乎', '知乎 · 2025-08-12', 'https://www.zhihu.com/q/1'],
    [2, '2', 'rag', '巡更操作指南', '测试知识库', 'oss://kb/巡更.pdf'],
  ]);
});

test('chunk_metadata as a JSON string is accepted; ids outside it are invalid', function () {
  var meta = JSON.stringify(SEED_CHUNKS.slice(0, 3));
  var r = consume([sseText(chatflowEvents({ chunkMetadata: meta, deltas: ['甲[C:3]乙[C:7]'] }))]).result;
  assert.deepEqual(r.citations, [['3', 1]]);
  assert.deepEqual(r.invalid, ['7']);
  assert.equal(r.answer, '甲乙');
});

test('workflow_started clears chunk metadata of an earlier answer', function () {
  var first = chatflowEvents().slice(0, 3); // workflow_started, KR, code node
  var second = chatflowEvents({ metadata: false, deltas: ['见[C:7]'] });
  var r = consume([sseText(first.concat(second))]).result;
  assert.deepEqual(r.panel, [{ idx: 1, rawId: '7', chunk: null }]);
  assert.deepEqual(r.citations, [['7', 1]]);
});

test('text_chunk events (workflow apps) carry the answer in data.text', function () {
  var events = [
    { event: 'workflow_started', task_id: 't', workflow_run_id: 'r', data: {} },
    { event: 'node_finished', data: { node_type: 'code', outputs: { chunk_metadata: SEED_CHUNKS } } },
  ].concat(SEED_DELTAS.map(function (d) { return { event: 'text_chunk', task_id: 't', data: { text: d } }; }),
    [{ event: 'workflow_finished', data: { status: 'succeeded' } }]);
  var r = consume([sseText(events)]).result;
  assert.deepEqual(r.segments, SEED_SEGMENTS);
  assert.equal(r.panel.length, 3);
});

test('malformed frames are skipped and listed; bad fields never throw; nothing is lost', function () {
  var wire = 'data: {not json\n\n' + 'data: [1,2]\n\n' +
    sseText([
      { event: 'node_finished', data: { node_type: 'code', outputs: { chunk_metadata: 'also not json' } } },
      { event: 'node_finished', data: { node_type: 'code', outputs: { chunk_metadata: [{ id: '1', document_title: 'A' }, null, { title: 'no id' }] } } },
      { event: 'message', answer: 12 },
      { event: 'text_chunk', data: null },
      { event: 'message', answer: '正文[C:1]' },
      { event: 'message_end', metadata: 'x' },
      { event: 'message', answer: '迟到的[C:1]' },
    ]);
  var r = consume([wire]).result;
  assert.equal(r.answer, '正文迟到的[C:1]');
  assert.deepEqual(r.panel.map(function (p) { return p.chunk.document_title; }), ['A']);
  assert.deepEqual(r.warnings.map(function (w) { return w.kind; }), [
    'malformed_frame', 'malformed_frame', 'bad_chunk_metadata', 'bad_chunk', 'bad_answer', 'bad_text_chunk', 'text_after_end',
  ]);
  assert.equal(r.error, null);
});

test('a frame larger than maxLine stops the stream with an error, keeping earlier text', function () {
  var events = chatflowEvents({ deltas: ['前文[C:1'], tail: 'none' });
  var r = consume([sseText(events), 'data: {"event":"message","answer":"' + 'x'.repeat(5000)], { maxLine: 4096 });
  assert.equal(r.result.answer, '前文[C:1');
  assert.equal(r.result.error.code, 'frame_too_large');
  assert.equal(r.seen.errors.length, 1);
});

test('end() is idempotent and input after it is ignored', function () {
  var s = new AnswerStream();
  s.pushText(sseText(chatflowEvents({ tail: 'none' })));
  var a = s.end();
  s.pushText(sseText([{ event: 'message', answer: 'more' }]));
  assert.equal(s.end(), a);
  assert.equal(a.answer, SEED_ANSWER);
});

test('chunk_metadata after the text started validates only later markers; workflow_started then keeps it', function () {
  var events = [
    { event: 'workflow_started', data: {} },
    { event: 'message', answer: '甲[C:9]' },
    { event: 'node_finished', data: { node_type: 'code', outputs: { chunk_metadata: SEED_CHUNKS.slice(0, 2) } } },
    { event: 'workflow_started', data: {} },
    { event: 'message', answer: '乙[C:9][C:2]' },
    { event: 'message_end', metadata: {} },
  ];
  var r = consume([sseText(events)]).result;
  assert.deepEqual(r.segments, [{ text: '甲' }, { cite: '9', idx: 1 }, { text: '乙' }, { cite: '2', idx: 2 }]);
  assert.deepEqual(r.invalid, ['9']);
  assert.deepEqual(r.panel.map(function (p) { return [p.rawId, p.chunk ? p.chunk.id : null]; }), [['9', null], ['2', '2']]);
});

test('message_replace replaces the answer and calls onReplace; workflow_finished status is kept', function () {
  var replaced = [];
  var events = chatflowEvents({ deltas: ['不当内容[C:1]'], tail: 'none' }).concat([
    { event: 'message_replace', answer: '内容已替换[C:2]' },
    { event: 'workflow_finished', data: { status: 'succeeded' } },
    { event: 'message_end', metadata: {} },
  ]);
  var r = consume([sseText(events)], { onReplace: function (s) { replaced.push(s); } }).result;
  assert.deepEqual(replaced, [[{ text: '内容已替换' }, { cite: '2', idx: 1 }]]);
  assert.deepEqual(r.segments, [{ text: '内容已替换' }, { cite: '2', idx: 1 }]);
  assert.equal(r.answer, '内容已替换');
  assert.deepEqual(r.citations, [['2', 1]]);
  assert.equal(r.workflowStatus, 'succeeded');
});

test('ArrayBuffers from another realm (as a mini-program runtime may hand over) are accepted', async function () {
  var vm = await import('node:vm');
  var foreign = vm.runInNewContext('new ArrayBuffer(3)');
  assert.equal(foreign instanceof ArrayBuffer, false);
  new Uint8Array(foreign).set([0xe5, 0xbc, 0x95]); // 引
  var d = new Utf8Decoder();
  assert.equal(d.decode(foreign), '引');
});
