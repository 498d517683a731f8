// A Dify-protocol stand-in on 127.0.0.1 (node:http) for transport tests, and a
// minimal fake `wx` whose request() speaks real HTTP to it and hands the body
// over as ArrayBuffer chunks through onChunkReceived, as a WeChat mini program
// does with enableChunked (the WeChat platform is outside our control).
import http from 'node:http';
import { chatflowEvents, sseText } from './shared.js';

function later() {
  return new Promise(function (resolve) { setImmediate(resolve); });
}

/** Write `text` as UTF-8 in pieces of `step` bytes (cutting characters). */
async function writeCut(res, text, step) {
  var buf = Buffer.from(text, 'utf8');
  for (var i = 0; i < buf.length; i += step) {
    res.write(buf.subarray(i, i + step));
    await later();
  }
}

/**
 * Start the server. Routes (POST):
 *   /v1/chat-messages   the seed answer, bytes cut every 5 bytes (records the request)
 *   /http-error         400 with Dify's error JSON
 *   /json-ok            200 with a JSON body (a blocking-mode answer)
 *   /html-error         502 with an HTML body
 *   /drop               some frames, then the socket is destroyed
 *   /hang               some frames, then nothing until the client goes away
 * @returns {Promise<{url: string, requests: Array<object>, close: Function}>}
 */
export function startServer() {
  var requests = [];
  var server = http.createServer(function (req, res) {
    var body = '';
    req.setEncoding('utf8');
    req.on('data', function (c) { body += c; });
    req.on('end', async function () {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body: body });
      var events = chatflowEvents();
      if (req.url === '/v1/chat-messages') {
        res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' });
        await writeCut(res, 'event: ping\n\n' + sseText(events), 5);
        res.end();
      } else if (req.url === '/http-error') {
        res.writeHead(400, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ code: 'invalid_param', message: '参数错误：query 不能为空', status: 400 }));
      } else if (req.url === '/json-ok') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ event: 'message', answer: 'blocking' }));
      } else if (req.url === '/html-error') {
        res.writeHead(502, { 'Content-Type': 'text/html' });
        res.end('<html><body>Bad Gateway</body></html>');
      } else if (req.url === '/drop' || req.url === '/hang') {
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        var partial = chatflowEvents({ deltas: ['部分回答[C:2]', '，未完[C:'], tail: 'none' });
        await writeCut(res, sseText(partial), 64);
        if (req.url === '/drop') {
          await later();
          res.socket.destroy();
        }
      } else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  return new Promise(function (resolve) {
    server.listen(0, '127.0.0.1', function () {
      resolve({
        url: 'http://127.0.0.1:' + server.address().port,
        requests: requests,
        close: function () {
          server.closeAllConnections();
          return new Promise(function (r) { server.close(r); });
        },
      });
    });
  });
}

/**
 * A minimal `wx` with request({url, method, data, header, enableChunked,
 * success, fail}) -> RequestTask {onHeadersReceived, onChunkReceived, abort}.
 * Object `data` is sent as JSON, as WeChat does; `timeout` (ms) fails the
 * request with "request:fail timeout". Chunks are re-cut every
 * `step` bytes. With chunked=false the whole body comes in success.data.
 */
export function fakeWx(options) {
  var opts = options || {};
  var step = opts.step || 7;
  var chunked = opts.chunked !== false;
  var calls = [];
  return {
    calls: calls,
    request: function (o) {
      calls.push(o);
      var onHeaders = null;
      var onChunk = null;
      var finished = false;
      var url = new URL(o.url);
      var payload = typeof o.data === 'string' ? o.data : JSON.stringify(o.data);
      var req = http.request({
        host: url.hostname, port: url.port, path: url.pathname, method: o.method || 'GET', headers: o.header,
      }, function (res) {
        var all = [];
        if (onHeaders) onHeaders({ statusCode: res.statusCode, header: res.headers });
        res.on('data', function (buf) {
          if (!chunked || !onChunk) {
            all.push(buf);
            return;
          }
          for (var i = 0; i < buf.length; i += step) {
            var piece = buf.subarray(i, i + step);
            onChunk({ data: piece.buffer.slice(piece.byteOffset, piece.byteOffset + piece.length) });
          }
        });
        res.on('end', function () {
          if (finished) return;
          finished = true;
          var whole = Buffer.concat(all);
          o.success({ statusCode: res.statusCode, header: res.headers, data: whole.buffer.slice(whole.byteOffset, whole.byteOffset + whole.length) });
        });
        res.on('error', function (e) {
          if (finished) return;
          finished = true;
          o.fail({ errMsg: 'request:fail ' + e.message });
        });
      });
      req.on('error', function (e) {
        if (finished) return;
        finished = true;
        o.fail({ errMsg: 'request:fail ' + e.message });
      });
      req.end(payload);
      if (typeof o.timeout === 'number') {
        // wx.request's `timeout` (ms): the request fails with "request:fail timeout".
        var timer = setTimeout(function () {
          if (finished) return;
          finished = true;
          req.destroy();
          o.fail({ errMsg: 'request:fail timeout' });
        }, o.timeout);
        req.on('close', function () { clearTimeout(timer); });
      }
      var task = {
        abort: function () {
          if (finished) return;
          finished = true;
          req.destroy();
          o.fail({ errMsg: 'request:fail abort' });
        },
      };
      if (chunked) {
        task.onHeadersReceived = function (cb) { onHeaders = cb; };
        task.onChunkReceived = function (cb) { onChunk = cb; };
      }
      return task;
    },
  };
}
