// streamChat (fetch) and wxStreamChat (fake wx over real HTTP) against a
// Dify-protocol server on 127.0.0.1.
import test from 'node:test';
import assert from 'node:assert/strict';
import { streamChat, wxStreamChat } from '../src/index.js';
import { SEED_ANSWER } from '../testlib/shared.js';
import { fakeWx, startServer } from '../testlib/server.js';

var server;
test.before(async function () { server = await startServer(); });
test.after(async function () { await server.close(); });

function collector() {
  var seen = { segments: [], errors: [], done: [], metadata: 0, events: [] };
  return {
    seen: seen,
    callbacks: {
      onSegments: function (s) { seen.segments = seen.segments.concat(s); },
      onError: function (e) { seen.errors.push(e); },
      onDone: function (r) { seen.done.push(r); },
      onMetadata: function () { seen.metadata++; },
      onEvent: function (e) { seen.events.push(e.event); },
    },
  };
}

test('streamChat: a streamed answer with metadata, markers and a panel', async function () {
  var c = collector();
  var res = await streamChat(Object.assign({
    url: server.url + '/v1/chat-messages',
    headers: { Authorization: 'Bearer app-test' },
    body: { query: '巡更怎么做？', inputs: {}, user: 'u1' },
  }, c.callbacks));
  assert.equal(res.answer, SEED_ANSWER);
  assert.deepEqual(res.citations, [['7', 1], ['2', 2], ['6', 3]]);
  assert.deepEqual(res.panel.map(function (p) { return p.rawId; }), ['7', '2', '6']);
  assert.equal(res.error, null);
  assert.equal(c.seen.done[0], res);
  assert.equal(c.seen.metadata, 1);
  assert.equal(c.seen.events[0], 'ping');
  var req = server.requests[server.requests.length - 1];
  assert.equal(req.method, 'POST');
  assert.equal(req.headers.authorization, 'Bearer app-test');
  assert.equal(req.headers.accept, 'text/event-stream');
  assert.deepEqual(JSON.parse(req.body), { query: '巡更怎么做？', inputs: {}, user: 'u1', response_mode: 'streaming' });
});

test('streamChat: an HTTP error with Dify error JSON resolves with result.error', async function () {
  var c = collector();
  var res = await streamChat(Object.assign({ url: server.url + '/http-error', body: { query: '' } }, c.callbacks));
  assert.deepEqual(res.error, { code: 'invalid_param', status: 400, message: '参数错误：query 不能为空' });
  assert.deepEqual(c.seen.errors, [res.error]);
  assert.equal(res.answer, '');
});

test('streamChat: a non-JSON error body gives code http_error and the status', async function () {
  var res = await streamChat({ url: server.url + '/html-error', body: {} });
  assert.equal(res.error.code, 'http_error');
  assert.equal(res.error.status, 502);
  assert.match(res.error.message, /Bad Gateway/);
});

test('streamChat: a dropped connection keeps the partial answer and releases held text', async function () {
  var c = collector();
  var res = await streamChat(Object.assign({ url: server.url + '/drop', body: {} }, c.callbacks));
  assert.equal(res.error.code, 'stream_interrupted');
  assert.equal(res.answer, '部分回答，未完[C:');
  assert.deepEqual(res.citations, [['2', 1]]);
  assert.equal(c.seen.errors.length, 1);
});

test('streamChat: abort through the signal ends with code aborted', async function () {
  var ctl = new AbortController();
  var res = await streamChat({
    url: server.url + '/hang',
    body: {},
    signal: ctl.signal,
    onSegments: function (segs) {
      if (segs.some(function (s) { return s.cite; })) ctl.abort();
    },
  });
  assert.equal(res.error.code, 'aborted');
  assert.match(res.answer, /^部分回答/);
});

test('streamChat: a 2xx response that is not an event stream is an error', async function () {
  var res = await streamChat({ url: server.url + '/json-ok', body: {} });
  assert.equal(res.error.code, 'not_event_stream');
  assert.equal(res.error.status, 200);
  assert.match(res.error.message, /application\/json/);
});

test('streamChat: refused connection and misuse', async function () {
  var res = await streamChat({ url: 'http://127.0.0.1:9/v1/chat-messages', body: {} });
  assert.equal(res.error.code, 'network_error');
  await assert.rejects(streamChat({ body: {} }), TypeError);
  await assert.rejects(streamChat({ url: server.url, fetch: 'nope' }), TypeError);
});

function wxRun(wx, url, extra) {
  return new Promise(function (resolve) {
    var c = collector();
    var handle = wxStreamChat(wx, Object.assign({ url: url, body: { query: '巡更', user: 'u1' }, header: { Authorization: 'Bearer app-test' } }, c.callbacks, {
      onDone: function (r) { c.seen.done.push(r); resolve({ result: r, seen: c.seen, handle: handle }); },
    }, extra || {}));
  });
}

test('wxStreamChat: ArrayBuffer chunks cut inside UTF-8 characters', async function () {
  for (var step of [1, 2, 7, 4096]) {
    var wx = fakeWx({ step: step });
    var r = await wxRun(wx, server.url + '/v1/chat-messages');
    assert.equal(r.result.answer, SEED_ANSWER, 'step ' + step);
    assert.deepEqual(r.result.panel.map(function (p) { return p.rawId; }), ['7', '2', '6']);
    assert.equal(r.result.error, null);
    assert.equal(r.seen.done.length, 1);
    var call = wx.calls[0];
    assert.equal(call.enableChunked, true);
    assert.equal(call.method, 'POST');
    assert.equal(call.responseType, 'arraybuffer');
    assert.equal(call.data.response_mode, 'streaming');
  }
});

test('wxStreamChat: without chunk support the body in success is used', async function () {
  var r = await wxRun(fakeWx({ chunked: false }), server.url + '/v1/chat-messages');
  assert.equal(r.result.answer, SEED_ANSWER);
});

test('wxStreamChat: HTTP error, dropped connection, abort', async function () {
  var e = await wxRun(fakeWx(), server.url + '/http-error');
  assert.deepEqual(e.result.error, { code: 'invalid_param', status: 400, message: '参数错误：query 不能为空' });
  assert.deepEqual(e.seen.errors, [e.result.error]);

  var d = await wxRun(fakeWx(), server.url + '/drop');
  assert.equal(d.result.error.code, 'stream_interrupted');
  assert.equal(d.result.answer, '部分回答，未完[C:');

  var handle = null;
  var a = await new Promise(function (resolve) {
    handle = wxStreamChat(fakeWx(), {
      url: server.url + '/hang',
      body: {},
      onSegments: function (segs) {
        if (segs.some(function (s) { return s.cite; })) handle.abort();
      },
      onDone: resolve,
    });
  });
  assert.equal(a.error.code, 'aborted');
  assert.match(a.answer, /^部分回答/);
  handle.abort(); // a second abort is harmless
  assert.throws(function () { wxStreamChat({}, { url: 'x' }); }, TypeError);

  var slow = await wxRun(fakeWx(), server.url + '/hang', { timeout: 300 });
  assert.equal(slow.result.error.code, 'timeout');
  assert.match(slow.result.answer, /^部分回答/);

  var refused = await wxRun(fakeWx(), 'http://127.0.0.1:9/v1/chat-messages');
  assert.equal(refused.result.error.code, 'network_error');
  assert.match(refused.result.error.message, /request:fail/);
});
