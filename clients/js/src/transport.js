/**
 * Transports: feed an AnswerStream from the network.
 *
 * - streamChat: browsers and Node >= 18 (fetch + ReadableStream reader).
 * - wxStreamChat: WeChat mini programs (wx.request with enableChunked: the
 *   body arrives as ArrayBuffers through RequestTask.onChunkReceived).
 *
 * Both POST a Dify Service API request (`POST /v1/chat-messages`,
 * dify-protocol.md §1.1) and never reject or throw on a failed request: HTTP
 * errors (body `{code, message, status}`, dify-protocol.md §1.8), network
 * errors and aborts end the stream with `result.error` set (and onError
 * called); whatever text arrived is kept. Error codes of our own (as the
 * Python consumer): `network_error` (no connection), `stream_interrupted`
 * (the connection broke mid-stream), `timeout`, `aborted`, `http_error` (a
 * non-2xx without Dify's JSON), `not_event_stream` (2xx but not
 * text/event-stream; fetch only), `frame_too_large`.
 */
import { AnswerStream } from './answer.js';
import { Utf8Decoder, toBytes } from './utf8.js';

var ERROR_BODY_LIMIT = 64 * 1024; // bytes of an error body kept for the message

/** Dify streams only when asked: add response_mode "streaming" to an object body. */
function requestBody(body) {
  if (body === undefined || body === null) return { response_mode: 'streaming' };
  if (typeof body === 'object' && !Array.isArray(body) && body.response_mode === undefined) {
    return Object.assign({}, body, { response_mode: 'streaming' });
  }
  return body;
}

/**
 * Error object for a non-2xx response: Dify's `{code, message, status}` when
 * the body is that JSON, else code "http_error" and the start of the body.
 * @param {number} status
 * @param {string} text
 * @returns {{code: string, status: number, message: string}}
 */
export function httpError(status, text) {
  var body = null;
  try {
    body = JSON.parse(text);
  } catch (e) {
    body = null;
  }
  if (body !== null && typeof body === 'object') {
    return {
      code: typeof body.code === 'string' ? body.code : 'http_error',
      status: typeof body.status === 'number' ? body.status : status,
      message: typeof body.message === 'string' ? body.message : 'HTTP 状态 ' + status,
    };
  }
  var snippet = String(text || '').slice(0, 500);
  return { code: 'http_error', status: status, message: snippet || 'HTTP 状态 ' + status };
}

function isAbort(err, signal) {
  return Boolean((signal && signal.aborted) || (err && err.name === 'AbortError'));
}

/**
 * Stream one chat answer with fetch.
 *
 * @param {{url: string, body?: (object|string), headers?: Object<string, string>,
 *   method?: string, fetch?: Function, signal?: AbortSignal, maxHold?: number,
 *   onMetadata?: Function, onSegments?: Function, onEvent?: Function,
 *   onDone?: Function, onError?: Function}} options
 *   body: the Dify request (an object is sent as JSON with response_mode
 *   "streaming" added when missing; a string is sent as is).
 * @returns {Promise<object>} the AnswerStream result (see answer.js); rejects
 *   only on misuse (no url, no fetch).
 */
export function streamChat(options) {
  var opts = options || {};
  if (typeof opts.url !== 'string' || opts.url === '') {
    return Promise.reject(new TypeError('streamChat: url is required'));
  }
  var fetchImpl = opts.fetch || (typeof fetch === 'function' ? fetch : null);
  if (typeof fetchImpl !== 'function') {
    return Promise.reject(new TypeError('streamChat: no fetch available; pass options.fetch'));
  }
  var stream = new AnswerStream(opts);
  var signal = opts.signal;
  var headers = Object.assign({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }, opts.headers || {});
  var body = requestBody(opts.body);
  var init = {
    method: opts.method || 'POST',
    headers: headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  };
  if (signal) init.signal = signal;

  var opened = false; // a 2xx event stream is being read
  function failed(err) {
    var detail = String((err && err.message) || err);
    if (isAbort(err, signal)) stream.fail({ code: 'aborted', status: 0, message: '请求已取消' });
    else if (opened) stream.fail({ code: 'stream_interrupted', status: 0, message: '回答流中断：' + detail });
    else stream.fail({ code: 'network_error', status: 0, message: '无法连接服务：' + detail });
    return stream.end();
  }

  var started;
  try {
    started = Promise.resolve(fetchImpl(opts.url, init));
  } catch (e) {
    started = Promise.reject(e);
  }
  return started.then(function (res) {
    if (!res.ok) {
      return res.text().then(
        function (text) {
          stream.fail(httpError(res.status, text));
          return stream.end();
        },
        function () {
          stream.fail(httpError(res.status, ''));
          return stream.end();
        }
      );
    }
    var type = res.headers && typeof res.headers.get === 'function' ? res.headers.get('content-type') || '' : 'text/event-stream';
    if (type.toLowerCase().indexOf('text/event-stream') < 0) {
      stream.fail({ code: 'not_event_stream', status: res.status, message: '服务没有返回事件流（Content-Type: ' + (type || '无') + '）' });
      if (res.body && typeof res.body.cancel === 'function') res.body.cancel().then(null, function () {});
      return stream.end();
    }
    opened = true;
    if (res.body && typeof res.body.getReader === 'function') {
      var reader = res.body.getReader();
      var pump = function () {
        return reader.read().then(function (r) {
          if (r.done) return stream.end();
          stream.pushBytes(r.value);
          return pump();
        });
      };
      return pump();
    }
    // No streaming body (old runtimes): read it whole.
    return res.arrayBuffer().then(function (buf) {
      stream.pushBytes(buf);
      return stream.end();
    });
  }).then(null, failed);
}

/**
 * Stream one chat answer in a WeChat mini program.
 *
 * Calls `wx.request({url, method: "POST", data, header, enableChunked: true,
 * responseType: "arraybuffer", success, fail})` and feeds every
 * `onChunkReceived` ArrayBuffer to an AnswerStream. When the runtime does not
 * deliver chunks, the body in `success` is used instead.
 *
 * @param {{request: Function}} wx the mini program's `wx` object
 * @param {{url: string, body?: (object|string), header?: Object<string, string>,
 *   timeout?: number, maxHold?: number, onMetadata?: Function,
 *   onSegments?: Function, onEvent?: Function, onDone?: Function,
 *   onError?: Function}} options
 * @returns {{abort: function(): void, stream: AnswerStream}} abort() cancels
 *   the request; the held text is released and onDone runs with error
 *   `{code: "aborted"}`.
 * @throws {TypeError} when wx.request is missing or url is empty.
 */
export function wxStreamChat(wx, options) {
  var opts = options || {};
  if (!wx || typeof wx.request !== 'function') throw new TypeError('wxStreamChat: wx.request is required');
  if (typeof opts.url !== 'string' || opts.url === '') throw new TypeError('wxStreamChat: url is required');
  var stream = new AnswerStream(opts);
  var status = 0;
  var chunks = 0;
  var head = []; // the first bytes, to explain an HTTP error
  var headBytes = 0;
  var done = false;

  function keepHead(bytes) {
    if (headBytes >= ERROR_BODY_LIMIT) return;
    var part = bytes.subarray(0, ERROR_BODY_LIMIT - headBytes);
    head.push(new Uint8Array(part));
    headBytes += part.length;
  }

  function headText() {
    var d = new Utf8Decoder();
    var s = '';
    for (var k = 0; k < head.length; k++) s += d.decode(head[k]);
    return s + d.flush();
  }

  function take(data) {
    if (typeof data === 'string') {
      if (status < 400) stream.pushText(data);
      return;
    }
    var bytes;
    try {
      bytes = toBytes(data);
    } catch (e) {
      return; // no body in this callback (e.g. success after chunks)
    }
    keepHead(bytes);
    if (status < 400) stream.pushBytes(bytes);
  }

  function finish() {
    if (done) return;
    done = true;
    stream.end();
  }

  var task = wx.request({
    url: opts.url,
    method: 'POST',
    data: requestBody(opts.body),
    header: Object.assign({ 'content-type': 'application/json', accept: 'text/event-stream' }, opts.header || {}),
    enableChunked: true,
    responseType: 'arraybuffer',
    timeout: opts.timeout,
    success: function (res) {
      if (done) return;
      if (res && typeof res.statusCode === 'number') status = res.statusCode;
      if (chunks === 0 && res && res.data !== undefined && res.data !== null) take(res.data);
      if (status >= 400) stream.fail(httpError(status, headText()));
      finish();
    },
    fail: function (err) {
      if (done) return;
      var msg = err && err.errMsg ? String(err.errMsg) : String(err);
      if (/timeout/i.test(msg)) stream.fail({ code: 'timeout', status: 0, message: '请求超时：' + msg });
      else if (chunks > 0) stream.fail({ code: 'stream_interrupted', status: 0, message: '回答流中断：' + msg });
      else stream.fail({ code: 'network_error', status: 0, message: '无法连接服务：' + msg });
      finish();
    },
  });
  if (task && typeof task.onHeadersReceived === 'function') {
    task.onHeadersReceived(function (res) {
      if (res && typeof res.statusCode === 'number') status = res.statusCode;
    });
  }
  if (task && typeof task.onChunkReceived === 'function') {
    task.onChunkReceived(function (res) {
      if (done) return;
      chunks++;
      take(res ? res.data : null);
    });
  }
  return {
    abort: function () {
      if (done) return;
      stream.fail({ code: 'aborted', status: 0, message: '请求已取消' });
      finish();
      if (task && typeof task.abort === 'function') task.abort();
    },
    stream: stream,
  };
}
