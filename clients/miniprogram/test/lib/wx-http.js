// The WeChat platform's network part, stood in by real HTTP: wx.request with
// enableChunked delivers the response body through RequestTask.onChunkReceived
// as ArrayBuffers. This stand-in sends the real request with node:http to the
// gcite service on loopback and re-cuts the body into chunks of random sizes
// (seeded), so UTF-8 characters, SSE lines and citation markers are cut
// anywhere. Between two chunks it yields to the event loop and calls
// `onDelivered` (the test's render recorder).
//
// Options of install(wx, net): net is a mutable object the test changes between
// requests:
//   seed        PRNG seed for the chunk sizes (default 1)
//   maxChunk    largest chunk in bytes (default 7; sizes are 1..maxChunk)
//   dropAfter   destroy the connection after this many body bytes (network
//               loss: fail({errMsg: "request:fail ..."}) as WeChat reports it)
//   dropAfterFirst {needle, bytes}: drop `bytes` bytes after the first
//               occurrence of `needle` (e.g. '"event":"message"') in the body
//   omitEvents  SSE event names removed from the stream (an older Dify that
//               sends no node_finished, mobile seed §3.4)
//   asTextChunk turn `message` frames into workflow `text_chunk` frames
//   inject      {before, event}: send the SSE event `event` (an object) right
//               before the first frame whose event is `before` (e.g. Dify's
//               output moderation: message_replace before message_end)
//   stripVerification  remove metadata.gcite_verification from message_end (a
//               service without the citation verifier); counts them in net.stripped
//   refuse      fail at once with "request:fail" (no network)
//   chunksAfterAbort  keep handing over the chunks already received after
//               abort() (a runtime may still deliver queued chunks)
//   onDelivered function called after each chunk was handed over
//   requests    array: every request's {url, method, header, data} is pushed;
//               its `done` turns true once the body was delivered or it failed
'use strict';
const http = require('node:http');

function prng(seed) {
  let s = seed >>> 0 || 1;
  return function () {
    // xorshift32
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

function later() {
  return new Promise(function (resolve) { setImmediate(resolve); });
}

/**
 * Rewrite the SSE stream frame by frame: drop frames whose event is in
 * `omit`; with `asTextChunk`, turn `message` frames into Dify workflow
 * `text_chunk` frames ({event, data: {text}}).
 */
function frameFilter(omit, asTextChunk, inject, net) {
  let pending = Buffer.alloc(0);
  const sep = Buffer.from('\n\n');
  function rewrite(text) {
    const m = /"event"\s*:\s*"([^"]+)"/.exec(text);
    if (m && inject && m[1] === inject.before) {
      const extra = 'data: ' + JSON.stringify(inject.event) + '\n\n';
      inject = null;
      return extra + rewrite(text);
    }
    if (m && omit.indexOf(m[1]) >= 0) return '';
    if (net && net.stripVerification && m && m[1] === 'message_end') {
      const data = JSON.parse(text.replace(/^data: /, ''));
      if (data.metadata && data.metadata.gcite_verification) {
        delete data.metadata.gcite_verification;
        net.stripped = (net.stripped || 0) + 1;
      }
      return 'data: ' + JSON.stringify(data) + '\n\n';
    }
    if (asTextChunk && m && m[1] === 'message') {
      const data = JSON.parse(text.replace(/^data: /, ''));
      return 'data: ' + JSON.stringify({ event: 'text_chunk', task_id: data.task_id, conversation_id: data.conversation_id, message_id: data.message_id, data: { text: data.answer, from_variable_selector: ['llm', 'text'] } }) + '\n\n';
    }
    return text;
  }
  return {
    push(bytes) {
      pending = Buffer.concat([pending, bytes]);
      const out = [];
      let at;
      while ((at = pending.indexOf(sep)) >= 0) {
        const frame = pending.subarray(0, at + 2);
        pending = pending.subarray(at + 2);
        out.push(Buffer.from(rewrite(frame.toString('utf8')), 'utf8'));
      }
      return Buffer.concat(out);
    },
    end() {
      const rest = pending;
      pending = Buffer.alloc(0);
      return rest;
    },
  };
}

function toArrayBuffer(buf) {
  return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
}

/**
 * Install request() (and a recorder of the other wx calls the component makes)
 * on `wx`.
 * @param {object} wx the global wx object of miniprogram-simulate
 * @param {object} net see the header
 */
function install(wx, net) {
  net.requests = net.requests || [];
  net.calls = net.calls || [];
  wx.request = function (options) {
    const chunkListeners = [];
    const headerListeners = [];
    let aborted = false;
    let finished = false;
    let req = null;
    const random = prng(net.seed || 1);
    const maxChunk = net.maxChunk || 7;
    const entry = { url: options.url, method: options.method, header: options.header, data: options.data, enableChunked: options.enableChunked, responseType: options.responseType, aborted: false, lateChunks: 0, done: false };
    net.requests.push(entry);
    const lateDelivery = Boolean(net.chunksAfterAbort);

    function fail(msg) {
      if (finished) return;
      finished = true;
      entry.done = true;
      if (options.fail) options.fail({ errMsg: 'request:fail ' + msg });
      if (options.complete) options.complete({ errMsg: 'request:fail ' + msg });
    }

    async function deliver(bytes) {
      let i = 0;
      while (i < bytes.length) {
        if ((aborted && !lateDelivery) || (finished && !aborted)) return;
        const size = 1 + Math.floor(random() * maxChunk);
        const part = bytes.subarray(i, i + size);
        i += size;
        if (aborted) entry.lateChunks++;
        for (const l of chunkListeners) l({ data: toArrayBuffer(Buffer.from(part)) });
        if (net.onDelivered) net.onDelivered();
        await later();
      }
    }

    setImmediate(function () {
      if (aborted) return;
      if (net.refuse) {
        fail('connect ECONNREFUSED');
        return;
      }
      const method = options.method || 'GET';
      const body = method === 'GET' || options.data === undefined ? '' : typeof options.data === 'string' ? options.data : JSON.stringify(options.data);
      const url = new URL(options.url);
      req = http.request({
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: method,
        headers: Object.assign({ 'content-length': Buffer.byteLength(body) }, options.header || {}),
      });
      req.on('error', function (err) {
        fail(aborted ? 'abort' : String(err.message || err));
      });
      req.on('response', function (res) {
        const header = Object.assign({}, res.headers);
        if (!options.enableChunked) {
          // A plain request: the whole body in success, JSON parsed (dataType "json").
          const parts = [];
          res.on('data', function (c) { parts.push(c); });
          res.on('end', function () {
            if (aborted || finished) return;
            finished = true;
            entry.done = true;
            let data = Buffer.concat(parts).toString('utf8');
            try { data = JSON.parse(data); } catch (e) { /* text stays text */ }
            const result = { statusCode: res.statusCode, header: header, data: data, errMsg: 'request:ok' };
            if (options.success) options.success(result);
            if (options.complete) options.complete(result);
          });
          return;
        }
        for (const l of headerListeners) l({ statusCode: res.statusCode, header: header });
        const filter = net.omitEvents || net.asTextChunk || net.inject || net.stripVerification ? frameFilter(net.omitEvents || [], Boolean(net.asTextChunk), net.inject, net) : null;
        let received = 0;
        let queue = Promise.resolve();
        let ended = false;
        let dropAfter = net.dropAfter;
        let head = '';
        res.on('data', function (chunk) {
          if (ended) return;
          if (net.dropAfterFirst && dropAfter === undefined) {
            // Drop `bytes` bytes after the first occurrence of `needle` in the body.
            const from = head.length;
            head += chunk.toString('latin1');
            const at = head.indexOf(net.dropAfterFirst.needle, Math.max(0, from - net.dropAfterFirst.needle.length));
            if (at >= 0) dropAfter = at + net.dropAfterFirst.bytes;
          }
          const before = received;
          received += chunk.length;
          if (dropAfter !== undefined && received > dropAfter) chunk = chunk.subarray(0, Math.max(0, dropAfter - before));
          const bytes = filter ? filter.push(chunk) : chunk;
          queue = queue.then(function () { return deliver(bytes); });
          if (dropAfter !== undefined && received >= dropAfter && !ended) {
            ended = true;
            queue.then(function () {
              res.destroy();
              fail('net::ERR_CONNECTION_CLOSED');
            });
          }
        });
        res.on('error', function () {});
        res.on('end', function () {
          if (ended) return;
          ended = true;
          const rest = filter ? filter.end() : Buffer.alloc(0);
          queue.then(function () { return deliver(rest); }).then(function () {
            if (aborted || finished) return;
            finished = true;
            entry.done = true;
            const result = { statusCode: res.statusCode, header: header, data: new ArrayBuffer(0), errMsg: 'request:ok' };
            if (options.success) options.success(result);
            if (options.complete) options.complete(result);
          });
        });
      });
      req.end(body);
    });

    return {
      abort: function () {
        if (aborted || finished) return;
        aborted = true;
        entry.aborted = true;
        if (req && !lateDelivery) req.destroy();
        fail('abort');
      },
      onChunkReceived: function (fn) { chunkListeners.push(fn); },
      offChunkReceived: function () {},
      onHeadersReceived: function (fn) { headerListeners.push(fn); },
      offHeadersReceived: function () {},
    };
  };

  function record(name, result) {
    return function (options) {
      net.calls.push({ api: name, options: options });
      const res = typeof result === 'function' ? result(options) : result;
      setImmediate(function () {
        if (res && res.fail) {
          if (options.fail) options.fail(res.fail);
        } else if (options.success) {
          options.success(res || { errMsg: name + ':ok' });
        }
        if (options.complete) options.complete(res || {});
      });
    };
  }
  wx.setClipboardData = record('setClipboardData', { errMsg: 'setClipboardData:ok' });
  wx.showToast = record('showToast', { errMsg: 'showToast:ok' });
  wx.showLoading = record('showLoading', { errMsg: 'showLoading:ok' });
  wx.hideLoading = function () { net.calls.push({ api: 'hideLoading' }); };
  wx.navigateTo = record('navigateTo', { errMsg: 'navigateTo:ok' });
  wx.downloadFile = record('downloadFile', function () {
    return net.download || { statusCode: 200, tempFilePath: 'wxfile://tmp/original.docx', errMsg: 'downloadFile:ok' };
  });
  wx.openDocument = record('openDocument', { errMsg: 'openDocument:ok' });
}

module.exports = { install, prng };
