// <g-cite-answer> in miniprogram-simulate against the real gcite chat service
// on loopback (tests/support/miniprogram_service.py: the app under uvicorn, a
// scripted OpenAI stand-in as its LLM). The wx.request stand-in speaks real
// HTTP and hands the body over in random chunk sizes (UTF-8 cut anywhere).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { simulate } = require('./lib/env.js');
const wxHttp = require('./lib/wx-http.js');
const { startService, unavailable } = require('./lib/service.js');
const h = require('./lib/harness.js');
const WXML = require('node:fs').readFileSync(require('node:path').join(require('./lib/env.js').MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'index.wxml'), 'utf8');

const PATROL = '夜间巡更要打卡多少个点位？';
const CONTRACT = '电梯维保合同和值班交接记录怎么规定？被困电梯轿厢会缺氧吗？';
const INJECTION = '注入测试文档说了什么？';
const KEYS = '监控中心的备用钥匙放在哪里？';
const BROKEN = '巡更中断测试';
const GREETING = '你好';
const THINKING = '思考一下：巡更有多少个点位？';
const THINK_CUT = '标签截断：巡更有多少个点位？';
const MARKDOWN = '用列表和表格格式总结夜间巡更要点';
// the scripted answer cites the fault levels (supported) and an unrelated chunk (weak)
const VERIFY = '空调不制冷多久能来人？';
const NOT_ANSWERED = '巡更用的巡检终端买个新的多少钱？'; // tests/browser/scenarios.py NOT_ANSWERED_QUESTION

const RUN_STARTED = Date.now();
const why = unavailable();
const inCi = /^(1|true|yes)$/i.test(process.env.CI || '');
if (why && inCi) throw new Error('the mini program tests need the gcite service: ' + why);
const skip = why ? 'gcite service unavailable: ' + why : false;

let service = null;
const net = {};

test.before(async function () {
  if (skip) return;
  service = await startService();
  wxHttp.install(global.wx, net);
});

test.after(async function () {
  if (service) await service.stop();
});

function reset(options) {
  for (const k of Object.keys(net)) if (k !== 'requests' && k !== 'calls') delete net[k];
  net.requests = [];
  net.calls = [];
  Object.assign(net, { seed: 1, maxChunk: 7 }, options || {});
}

function mount(props, options) {
  return h.mount(Object.assign({ serviceUrl: service.url, apiKey: 'demo-visitor', user: 'mp-test' }, props), options);
}

/** Every recorded render: no raw marker, a valid rich-text tree, numbers never change. */
function assertCleanFrames(comp, finalSups) {
  assert.ok(comp.frames.length > 3, 'renders recorded: ' + comp.frames.length);
  comp.frames.forEach(function (f, i) {
    assert.doesNotMatch(f.text, h.RAW_MARKER, 'render ' + i + ' shows a raw marker: ' + f.text);
    assert.doesNotMatch(f.domText, h.RAW_MARKER, 'render ' + i + ' DOM shows a raw marker');
    assert.deepEqual(f.problems, [], 'render ' + i + ' rich-text nodes');
    assert.ok(!Array.isArray(finalSups) || f.sups.every(function (n, k) { return n === finalSups[k]; }),
      'render ' + i + ': superscripts ' + f.sups + ' are not a prefix of ' + finalSups + ' in ' + JSON.stringify(f.text));
  });
}

function rows(comp) {
  return Array.from(comp.dom.querySelectorAll(h.sel('.g-cite-item')));
}

function domOf(comp, selector) {
  return comp.dom.querySelector(h.sel(selector));
}

for (const [seed, maxChunk] of [[1, 3], [7, 13], [42, 64]]) {
  test('answer streamed in chunks of 1..' + maxChunk + ' bytes (seed ' + seed + '): superscripts by first appearance, panel in idMap order', { skip }, async function () {
    reset({ seed: seed, maxChunk: maxChunk });
    const comp = mount();
    const done = await h.ask(comp, PATROL);
    const turn = service.lastTurn(PATROL);
    const rag = turn.cited.rag;
    const web = turn.cited.web;
    assert.ok(rag && web, 'the scripted answer cites a handbook chunk and a web chunk');

    assert.equal(done.status, 'done');
    assert.equal(comp.data.status, 'done');
    // [C:rag] 【C：web】 [C:rag][C:rag] ［C:rag，web］ [C:99]: 1 2 1 1 2, the unknown 99 dropped.
    const sups = h.rt.supNumbers(h.nodesOf(comp));
    assert.deepEqual(sups, [1, 2, 1, 1, 2]);
    assertCleanFrames(comp, sups);
    const text = h.rt.toText(h.nodesOf(comp));
    assert.match(text, /^夜间巡更每 1 小时一次，必须走完 A、B、C 三条线路的全部 24 个点位1。\n行业里也普遍是夜间巡检频次高于白天2/);
    assert.doesNotMatch(text, /99/);

    // §3: the chunk map (node_finished) came before any text: the first render
    // with a superscript already has the panel row with its real title.
    const firstCite = comp.frames.find(function (f) { return f.sups.length > 0; });
    assert.equal(firstCite.panel[0].rawId, rag);
    assert.notEqual(firstCite.panel[0].title, '来源 ' + rag);
    // Renders are batched per frame: the chunk map may arrive in the same frame as the
    // first text; a render between them says 正在生成回答…, none says 正在检索资料… with text.
    assert.ok(comp.frames.every(function (f) { return f.text === '' || f.statusText === ''; }),
      'no status line once text shows');
    assert.ok(comp.frames.every(function (f) { return f.text !== '' || f.sups.length === 0; }));
    const before = comp.frames.filter(function (f) { return f.text === '' && f.panel.length > 0; });
    assert.ok(before.every(function (f) { return f.statusText === '正在生成回答…'; }), 'status "正在生成回答…" before the first text');

    // §5.1: collapsed panel, two rows in idMap order once each.
    assert.deepEqual(comp.data.panelRows.map(function (r) { return [r.rawId, r.idx, r.type]; }), [[rag, 1, 'rag'], [web, 2, 'web']]);
    assert.equal(domOf(comp, '.panel-count').textContent, '引用来源（2）');
    assert.equal(domOf(comp, '.panel-toggle').textContent, '展开');
    assert.equal(rows(comp).length, 0);
    h.writeArtifact('01-answer-panel-collapsed', '回答完成，摘要栏折叠：引用来源（2）展开', comp);
    await h.tap(comp, '.panel-head');
    assert.equal(domOf(comp, '.panel-toggle').textContent, '收起');
    const list = rows(comp);
    assert.deepEqual(list.map(function (r) { return r.getAttribute('data-raw-id'); }), [rag, web]);
    assert.deepEqual(list.map(function (r) { return r.querySelector('[data-icon]').getAttribute('data-icon'); }), ['file', 'globe']);
    assert.deepEqual(list.map(function (r) { return r.querySelector(h.sel('.g-cite-item-idx')).textContent; }), ['1', '2']);
    assert.equal(list[0].querySelector(h.sel('.g-cite-item-title')).textContent, '巡更路线与打卡规范 v2.1');
    assert.equal(list[0].querySelector(h.sel('.g-cite-item-subtitle')).textContent, '明湖大厦物业手册');
    assert.ok(list[1].querySelector(h.sel('.g-cite-item-subtitle')).textContent.length > 0, 'web row has its display_subtitle');
    if (seed === 1) h.writeArtifact('02-answer-panel-expanded', '摘要栏展开：按 idMap 顺序两条（知识库、公网），收起', comp);

    // The request: wx.request with enableChunked, the key and the Dify body.
    const req = net.requests[0];
    assert.equal(req.enableChunked, true);
    assert.equal(req.responseType, 'arraybuffer');
    assert.equal(req.method, 'POST');
    assert.equal(req.url, service.url + '/v1/chat-messages');
    assert.equal(req.header.Authorization, 'Bearer demo-visitor');
    assert.equal(req.data.query, PATROL);
    assert.equal(req.data.user, 'mp-test');
    assert.equal(req.data.response_mode, 'streaming');
    assert.ok(done.conversationId, 'finish event carries the conversation id');
    await h.tap(comp, '.panel-head');
    assert.equal(rows(comp).length, 0, 'collapsed again');
  });
}

test('a workflow app streams text_chunk instead of message: same rendering', { skip }, async function () {
  reset({ asTextChunk: true, seed: 3, maxChunk: 5 });
  const comp = mount();
  await h.ask(comp, PATROL);
  assert.equal(comp.data.status, 'done');
  assert.deepEqual(h.rt.supNumbers(h.nodesOf(comp)), [1, 2, 1, 1, 2]);
  assertCleanFrames(comp, [1, 2, 1, 1, 2]);
  assert.equal(comp.data.panelRows.length, 2);
});

test('no node_finished (older Dify): the panel falls back to message_end retriever_resources', { skip }, async function () {
  reset({ omitEvents: ['node_finished'], seed: 5, maxChunk: 9 });
  const comp = mount();
  await h.ask(comp, PATROL);
  const turn = service.lastTurn(PATROL);
  assert.equal(comp.data.status, 'done');
  assertCleanFrames(comp);
  // While streaming without a chunk map there are no placeholder rows.
  assert.ok(comp.frames.filter(function (f) { return f.status === 'generating'; }).every(function (f) { return f.panel.length === 0; }));
  const got = comp.data.panelRows;
  assert.deepEqual(got.slice(0, 2).map(function (r) { return r.rawId; }), [turn.cited.rag, turn.cited.web]);
  assert.equal(got[0].title, '巡更路线与打卡规范 v2.1');
  assert.equal(got[0].type, 'rag');
  assert.equal(got[1].type, 'web');
});

test('the chunk map and idMap are per answer: a second answer numbers from 1 with only its own sources', { skip }, async function () {
  reset();
  const comp = mount();
  await h.ask(comp, PATROL);
  const first = comp.data.panelRows.map(function (r) { return r.rawId; });
  await h.ask(comp, CONTRACT);
  const turn = service.lastTurn(CONTRACT);
  assert.equal(comp.data.status, 'done');
  const second = comp.data.panelRows;
  assert.deepEqual(second.map(function (r) { return r.rawId; }), [turn.cited.office, turn.cited.plain, turn.cited.web]);
  assert.deepEqual(second.map(function (r) { return r.idx; }), [1, 2, 3]);
  assert.deepEqual(h.rt.supNumbers(h.nodesOf(comp)), [1, 2, 3]);
  assert.ok(first.length === 2);
  assert.deepEqual(comp.data.panelRows.map(function (r) { return r.title; }).indexOf('巡更路线与打卡规范 v2.1'), -1);
});

test('sheets per source type: colours, 完整原文 / 复制链接 / disabled, Office notice with downloadFile + openDocument', { skip }, async function () {
  reset({ seed: 11, maxChunk: 6 });
  const comp = mount({ webViewPage: '/pages/webview/webview', webViewDomains: ['news.city-daily.example'] });
  await h.ask(comp, CONTRACT);
  const turn = service.lastTurn(CONTRACT);
  assert.equal(comp.data.status, 'done');
  await h.tap(comp, '.panel-head');
  const byId = function (raw) { return '.g-cite-item[data-raw-id="' + raw + '"]'; };

  // Knowledge base, Word file: blue header, Office notice, download + open.
  await h.tap(comp, byId(turn.cited.office));
  let sheet = domOf(comp, '.sheet');
  assert.equal(sheet.getAttribute('data-source-type'), 'rag');
  const head = domOf(comp, '.sheet-head');
  assert.match(head.getAttribute('style'), /background:#eff6ff;color:#2563eb;/);
  assert.equal(domOf(comp, '.sheet-tag').textContent, '知识库');
  assert.equal(domOf(comp, '.sheet-title').textContent, '设备维保合同（Word 版）');
  assert.equal(domOf(comp, '.sheet-subtitle').textContent, '明湖大厦物业手册');
  assert.match(domOf(comp, '.sheet-text').textContent, /维保合同专用段落/);
  assert.match(domOf(comp, '.office-notice').textContent, /Office \/ PDF/);
  let button = domOf(comp, '.sheet-open');
  assert.equal(button.textContent, '完整原文');
  assert.equal(button.getAttribute('data-action'), 'document');
  assert.notEqual(comp.data.sheet.buttonDisabled, true);
  h.writeArtifact('03-sheet-rag-office', '半屏（知识库，蓝色）：Word 原文，Office 提示，完整原文 = 下载并打开', comp);
  await h.tap(comp, '.sheet-open');
  await h.until(function () { return net.calls.some(function (c) { return c.api === 'openDocument'; }); }, 'the document opened');
  const download = net.calls.find(function (c) { return c.api === 'downloadFile'; });
  assert.equal(download.options.url, 'https://files.minghu-tower.example/contracts/maintenance-2026.docx');
  const open = net.calls.find(function (c) { return c.api === 'openDocument'; });
  assert.equal(open.options.filePath, 'wxfile://tmp/original.docx');
  assert.equal(open.options.fileType, 'docx');
  // A failed download says why and offers the link.
  net.download = { fail: { errMsg: 'downloadFile:fail url not in domain list' } };
  await h.tap(comp, '.sheet-open');
  await h.until(function () { return /downloadFile 合法域名/.test(domOf(comp, '.sheet-hint').textContent); }, 'the failed download explained');
  assert.match(domOf(comp, '.sheet-hint').textContent, /downloadFile 合法域名/);
  assert.ok(domOf(comp, '.sheet-copy'), '复制链接 offered after a failed download');
  delete net.download;

  // Closed by the mask.
  await h.tap(comp, '.mask');
  assert.equal(domOf(comp, '.sheet'), null);

  // Knowledge base without a link: 完整原文 disabled, no Office notice.
  await h.tap(comp, byId(turn.cited.plain));
  button = domOf(comp, '.sheet-open');
  assert.equal(button.textContent, '完整原文');
  assert.equal(comp.data.sheet.buttonDisabled, true);
  assert.equal(domOf(comp, '.office-notice'), null);
  assert.equal(domOf(comp, '.sheet-hint').textContent, '该来源没有原文链接');
  h.writeArtifact('04-sheet-rag-no-url', '半屏（知识库）：没有原文链接，完整原文置灰', comp);
  const before = net.calls.length;
  await h.tap(comp, '.sheet-open');
  assert.equal(net.calls.length, before, 'a disabled button does nothing');

  // Closed by dragging down: a short drag snaps back, a long one closes.
  const grab = h.find(comp, '.sheet-grab');
  grab.dispatchEvent('touchstart', { touches: [{ x: 100, y: 300 }] });
  grab.dispatchEvent('touchmove', { touches: [{ x: 100, y: 340 }] });
  await simulate.sleep(0);
  assert.match(domOf(comp, '.sheet').getAttribute('style'), /translateY\(40px\)/);
  grab.dispatchEvent('touchend', { changedTouches: [{ x: 100, y: 340 }] });
  await simulate.sleep(0);
  assert.ok(domOf(comp, '.sheet'), 'a 40px drag does not close');
  grab.dispatchEvent('touchstart', { touches: [{ x: 100, y: 300 }] });
  grab.dispatchEvent('touchmove', { touches: [{ x: 100, y: 420 }] });
  grab.dispatchEvent('touchend', { changedTouches: [{ x: 100, y: 420 }] });
  await simulate.sleep(0);
  assert.equal(domOf(comp, '.sheet'), null, 'a 120px drag closes');

  // Web page on a business domain: green header, 完整原文 opens the web-view page.
  await h.tap(comp, byId(turn.cited.web));
  sheet = domOf(comp, '.sheet');
  assert.equal(sheet.getAttribute('data-source-type'), 'web');
  assert.match(domOf(comp, '.sheet-head').getAttribute('style'), /background:#f0fdf4;color:#15803d;/);
  assert.equal(domOf(comp, '.sheet-tag').textContent, '公网');
  assert.equal(domOf(comp, '.office-notice'), null);
  button = domOf(comp, '.sheet-open');
  assert.equal(button.textContent, '完整原文');
  assert.equal(button.getAttribute('data-action'), 'webview');
  h.writeArtifact('05-sheet-web', '半屏（公网，绿色）：业务域名内，完整原文打开 web-view', comp);
  await h.tap(comp, '.sheet-open');
  await h.until(function () { return net.calls.some(function (c) { return c.api === 'navigateTo'; }); }, 'the web-view opened');
  const nav = net.calls.find(function (c) { return c.api === 'navigateTo'; });
  assert.equal(nav.options.url, '/pages/webview/webview?url=' + encodeURIComponent('https://news.city-daily.example/2025/07/15/elevator-safety.html'));
});

test('a web page outside the business domains: the button copies the link and says why', { skip }, async function () {
  reset({ seed: 13 });
  const comp = mount({ webViewPage: '/pages/webview/webview', webViewDomains: ['wiki.minghu-tower.example'] });
  await h.ask(comp, PATROL);
  const turn = service.lastTurn(PATROL);
  await h.tap(comp, '.panel-head');
  await h.tap(comp, '.g-cite-item[data-raw-id="' + turn.cited.web + '"]');
  const button = domOf(comp, '.sheet-open');
  assert.equal(button.textContent, '复制链接');
  assert.equal(button.getAttribute('data-action'), 'copy');
  assert.match(domOf(comp, '.sheet-hint').textContent, /业务域名/);
  h.writeArtifact('06-sheet-web-copy-link', '半屏（公网）：域名不在业务域名中，复制链接并说明原因', comp);
  await h.tap(comp, '.sheet-open');
  await h.until(function () { return net.calls.some(function (c) { return c.api === 'showToast'; }); }, 'the link copied');
  const copy = net.calls.find(function (c) { return c.api === 'setClipboardData'; });
  assert.match(copy.options.data, /^https:\/\/www\.wenda-forum\.example\//);
  assert.ok(net.calls.some(function (c) { return c.api === 'showToast' && c.options.title === '链接已复制'; }));
  // The knowledge-base page on a business domain opens in the web-view.
  await h.tap(comp, '.mask');
  await h.tap(comp, '.g-cite-item[data-raw-id="' + turn.cited.rag + '"]');
  assert.equal(domOf(comp, '.sheet-open').getAttribute('data-action'), 'webview');
});

test('hostile titles, contents and URLs render as text; javascript: links stay disabled', { skip }, async function () {
  reset({ seed: 17, maxChunk: 4 });
  const comp = mount();
  await h.ask(comp, INJECTION);
  const turn = service.lastTurn(INJECTION);
  assert.ok(turn.cited.doc, 'the hostile document was retrieved and cited');
  assert.equal(comp.data.status, 'done');
  assertCleanFrames(comp);
  // The model's "<img ...>" is a text node, shown literally.
  assert.match(h.rt.toText(h.nodesOf(comp)), /模型输出<img src=x onerror=alert\(3\)>。/);
  assert.doesNotMatch(h.rt.toHtml(h.nodesOf(comp)), /<img/);
  await h.tap(comp, '.panel-head');
  const row = domOf(comp, '.g-cite-item[data-raw-id="' + turn.cited.doc + '"]');
  assert.equal(row.querySelector(h.sel('.g-cite-item-title')).textContent, '<img src=x onerror=alert(1)>');
  await h.tap(comp, '.g-cite-item[data-raw-id="' + turn.cited.doc + '"]');
  assert.equal(domOf(comp, '.sheet-title').textContent, '<img src=x onerror=alert(1)>');
  assert.equal(comp.data.sheet.buttonDisabled, true);
  assert.equal(domOf(comp, '.sheet-hint').textContent, '原文链接不是网页地址，无法打开');
  h.writeArtifact('07-hostile', '注入测试：标题、正文、链接都按纯文本显示，javascript: 链接不可打开', comp);
  if (turn.cited.web) {
    await h.tap(comp, '.mask');
    await h.tap(comp, '.g-cite-item[data-raw-id="' + turn.cited.web + '"]');
    assert.equal(domOf(comp, '.sheet-title').textContent, '<b onmouseover=alert(2)>注入测试网页</b>');
    assert.equal(comp.data.sheet.type, 'web');
    assert.equal(comp.data.sheet.buttonDisabled, true);
  }
  // No element came from data: only the component's own tags are in the DOM.
  const tags = new Set(Array.from(comp.dom.querySelectorAll('*')).map(function (e) { return e.tagName.toLowerCase(); }));
  for (const t of tags) assert.match(t, /^(wx-|g-cite-answer)/, 'unexpected element <' + t + '>');
});

test('a stream dropped by the network ends in a visible error with the partial answer and 重试', { skip }, async function () {
  reset({ seed: 19, maxChunk: 5, dropAfterFirst: { needle: '"event":"message"', bytes: 2500 } });
  const comp = mount();
  const done = await h.ask(comp, PATROL);
  assert.equal(done.status, 'error');
  assert.equal(done.error.code, 'stream_interrupted');
  assert.equal(comp.data.status, 'error');
  assert.equal(comp.data.incomplete, true);
  assert.equal(domOf(comp, '.answer-status-text').textContent, '回答未完成：回答中断，请检查网络后重试');
  assert.ok(domOf(comp, '.answer-retry'), '重试 button');
  const partial = h.rt.toText(h.nodesOf(comp));
  assert.ok(partial.length > 0 && partial.length < 60, 'partial answer kept: ' + partial);
  // Every render is clean, the last one too: the renderer drops a marker the
  // broken stream left unfinished.
  assertCleanFrames(comp);
  h.writeArtifact('08-dropped-stream', '断网：回答未完成，保留已收到的内容，显示错误和重试按钮', comp);
  // 重试 asks again and now completes.
  delete net.dropAfterFirst;
  const before = comp.finished.length;
  await h.tap(comp, '.answer-retry');
  const again = await h.untilFinished(comp, before + 1);
  assert.equal(again.status, 'done');
  assert.deepEqual(h.rt.supNumbers(h.nodesOf(comp)), [1, 2, 1, 1, 2]);
  assert.equal(domOf(comp, '.answer-retry'), null);
});

test('wx.request fail (no network): error state and 重试 that succeeds', { skip }, async function () {
  reset({ refuse: true });
  const comp = mount();
  const done = await h.ask(comp, GREETING);
  assert.equal(done.status, 'error');
  assert.equal(done.error.code, 'network_error');
  assert.equal(domOf(comp, '.answer-status-text').textContent, '无法连接服务，请检查网络后重试');
  assert.equal(comp.data.panelRows.length, 0);
  h.writeArtifact('09-network-error', 'wx.request 失败：无法连接服务，可重试', comp);
  net.refuse = false;
  const before = comp.finished.length;
  await h.tap(comp, '.answer-retry');
  const again = await h.untilFinished(comp, before + 1);
  assert.equal(again.status, 'done');
  assert.match(h.rt.toText(h.nodesOf(comp)), /^你好！/);
  // §5.1: nothing cited, no panel.
  assert.equal(domOf(comp, '.citation-panel'), null);
  h.writeArtifact('10-no-citations', '寒暄：没有引用，不显示摘要栏', comp);
});

test('the model stream breaks upstream: the service error event ends in the error state', { skip }, async function () {
  reset({ seed: 23 });
  const comp = mount();
  const done = await h.ask(comp, BROKEN);
  assert.equal(done.status, 'error');
  assert.ok(comp.data.statusText.length > 0);
  assert.ok(domOf(comp, '.answer-retry'));
  assertCleanFrames(comp);
});

test('stop: the partial answer stays, marked as stopped, with 重试', { skip }, async function () {
  reset({ seed: 29, maxChunk: 2 });
  const comp = mount();
  let stopped = false;
  net.onDelivered = function () {
    if (!stopped && h.rt.supNumbers(h.nodesOf(comp)).length > 0) {
      stopped = true;
      comp.instance.stop();
    }
  };
  const done = await h.ask(comp, PATROL);
  assert.equal(done.status, 'stopped');
  assert.equal(done.error.code, 'aborted');
  assert.equal(comp.data.busy, false);
  assert.equal(domOf(comp, '.answer-status-text').textContent, '已停止生成，回答不完整');
  assert.ok(domOf(comp, '.answer-retry'));
  assert.deepEqual(h.rt.supNumbers(h.nodesOf(comp)), [1]);
  assert.equal(comp.data.panelRows.length, 1);
  h.writeArtifact('11-stopped', '停止生成：保留已显示的内容和引用，可重试', comp);
});

test('identity keys: a wrong key is refused without 重试; the security key sees its restricted source', { skip }, async function () {
  reset();
  const wrong = mount({ apiKey: 'not-a-key' });
  const done = await h.ask(wrong, KEYS);
  assert.equal(done.status, 'error');
  assert.equal(done.error.status, 401);
  assert.equal(domOf(wrong, '.answer-status-text').textContent, 'API Key 无效或无权访问，请检查身份设置');
  assert.equal(domOf(wrong, '.answer-retry'), null);
  h.writeArtifact('12-wrong-key', 'API Key 无效：提示检查身份设置，不提供重试', wrong);

  const visitor = mount({ apiKey: 'demo-visitor' });
  await h.ask(visitor, KEYS);
  assert.equal(visitor.data.status, 'done');
  assert.equal(visitor.data.panelRows.length, 0, 'a visitor gets no restricted source');

  const security = mount({ apiKey: 'demo-security' });
  await h.ask(security, KEYS);
  assert.equal(net.requests[net.requests.length - 1].header.Authorization, 'Bearer demo-security');
  assert.equal(security.data.panelRows.length, 1);
  assert.equal(security.data.panelRows[0].title, '监控中心值守与应急联络（安保内部）');
  await h.tap(security, '.panel-head');
  await h.tap(security, '.g-cite-item');
  assert.ok(domOf(security, '.office-notice'), 'the .pdf original shows the Office notice');
  assert.equal(security.data.sheet.officeType, 'pdf');
});

test('the waiting state before any event, and a missing service URL', { skip }, async function () {
  reset();
  const comp = mount();
  comp.instance.ask(PATROL);
  assert.equal(comp.data.status, 'waiting');
  assert.equal(comp.data.statusText, '正在检索资料…');
  assert.equal(comp.data.busy, true);
  h.writeArtifact('00-waiting', '等待：正在检索资料…', comp);
  await h.untilFinished(comp, 1);
  const none = h.mount({ serviceUrl: '' });
  const done = await h.ask(none, PATROL);
  assert.equal(done.status, 'error');
  assert.match(none.data.statusText, /未配置服务地址/);
  assert.equal(none.data.canRetry, false);
});

test('the example chat page: identities and suggestions from the service, ask, stop, conversation, identity switch', { skip }, async function () {
  reset({ seed: 31, maxChunk: 4 });
  // The example's config.js points at `gcite demo` (127.0.0.1:8000); here at the test service.
  const config = require(require('node:path').join(require('./lib/env.js').MINIPROGRAM_ROOT, 'config.js'));
  config.serviceUrl = service.url;
  const page = h.mountPage();
  await h.until(function () { return page.data.identities.length === 3 && page.data.identities[0].key === 'demo-visitor' && page.data.title !== 'G-Cite 示例'; }, 'page-config.json');
  assert.equal(net.requests[0].url, service.url + '/page-config.json');
  assert.equal(net.requests[0].method, 'GET');
  assert.ok(page.data.suggestions.indexOf(PATROL) >= 0, 'suggestions of gcite demo');
  const pageSel = function (s) { return s.replace(/\.([A-Za-z][\w-]*)/g, '.chat-page--$1'); };
  assert.match(page.dom.querySelector(pageSel('.identity-label')).textContent, /身份：访客/);

  // Tap a suggestion: the question and a streaming answer appear; 发送 becomes 停止.
  const suggestion = page.querySelectorAll('.suggestion').find(function (w) { return w.dom.textContent === PATROL; });
  suggestion.dispatchEvent('tap');
  await h.until(function () { return page.data.messages.length === 2; }, 'messages');
  assert.equal(page.data.busy, true);
  assert.equal(page.dom.querySelector(pageSel('.send')).textContent, '停止');
  const answer = page.querySelector('#answer-2');
  assert.ok(answer, 'the answer component is rendered');
  await h.until(function () { return page.data.busy === false; }, 'the answer to finish');
  assert.equal(answer.data.status, 'done');
  assert.deepEqual(h.rt.supNumbers(h.nodesOf(answer)), [1, 2, 1, 1, 2]);
  assert.equal(page.dom.querySelector(pageSel('.send')).textContent, '发送');
  const conversation = page.data.conversationId;
  assert.ok(conversation, 'conversation id kept from the answer');
  h.writeArtifact('13-page-answer', '示例对话页中的回答（上标与摘要栏）', answer);

  // Type a question and send: it goes out in the same conversation; 停止 stops it.
  page.instance.onInput({ detail: { value: CONTRACT } });
  let stopped = false;
  net.onDelivered = function () {
    const a = page.querySelector('#answer-4');
    if (!stopped && a && h.rt.toText(h.nodesOf(a)).length > 3) {
      stopped = true;
      page.querySelector('.send').dispatchEvent('tap');
    }
  };
  page.querySelector('.send').dispatchEvent('tap');
  await h.until(function () { return page.data.messages.length === 4 && page.data.busy === false; }, 'the stopped answer');
  const last = net.requests[net.requests.length - 1];
  assert.equal(last.data.conversation_id, conversation);
  assert.equal(last.data.query, CONTRACT);
  assert.equal(page.querySelector('#answer-4').data.status, 'stopped');
  net.onDelivered = null;

  // Switch identity: a divider, a new conversation, the new key on the next question.
  page.querySelector('.identity').dispatchEvent('change', { detail: { value: 2 } });
  await h.until(function () { return page.data.identityIndex === 2; }, 'identity switch');
  assert.equal(page.data.conversationId, '');
  assert.equal(page.data.messages[page.data.messages.length - 1].text, '已切换身份：安保主管（新对话）');
  page.instance.ask(KEYS);
  await h.until(function () { return page.data.messages.length === 7 && page.data.busy === false; }, 'the security answer');
  const req = net.requests[net.requests.length - 1];
  assert.equal(req.header.Authorization, 'Bearer demo-security');
  assert.equal(req.data.conversation_id, '');
  assert.equal(page.querySelector('#answer-7').data.panelRows.length, 1);

  // 新对话 clears the page.
  page.querySelector('.new-chat').dispatchEvent('tap');
  await h.until(function () { return page.data.messages.length === 0; }, 'new conversation');
});

test('reasoning (<think>) is shown apart and collapsed; its markers are neither numbered nor shown', { skip }, async function () {
  reset({ seed: 37, maxChunk: 3 });
  const comp = mount();
  await h.ask(comp, THINKING);
  const turn = service.lastTurn(THINKING);
  assert.equal(comp.data.status, 'done');
  assertCleanFrames(comp, [1]);
  assert.equal(h.rt.toText(h.nodesOf(comp)), '共有 24 个巡更点位1。');
  assert.deepEqual(comp.data.panelRows.map(function (r) { return r.rawId; }), [turn.cited.rag]);
  assert.equal(domOf(comp, '.reasoning-toggle').textContent, '展开');
  assert.equal(domOf(comp, '.reasoning-text'), null, 'collapsed');
  await h.tap(comp, '.reasoning-head');
  assert.equal(domOf(comp, '.reasoning-text').textContent, '用户问巡更点位，资料里写了 24 个点位。');
  assert.doesNotMatch(comp.dom.textContent, h.RAW_MARKER);
  h.writeArtifact('14-reasoning', '思考过程：与回答分开显示，默认折叠', comp);
});

test('a stream cut right after the opening <think tag shows no "<think" as the answer', { skip }, async function () {
  reset({ seed: 39, maxChunk: 2 });
  const comp = mount();
  const done = await h.ask(comp, THINK_CUT);
  assert.equal(service.lastTurn(THINK_CUT).answer, '<think', 'the model sent the cut tag');
  assert.notEqual(done.status, 'done');
  assert.equal(h.rt.toText(h.nodesOf(comp)), '');
  comp.frames.forEach(function (f, i) {
    assert.doesNotMatch(f.text + f.domText, /<\s*think/i, 'render ' + i + ' shows the cut tag');
  });
  assert.doesNotMatch(comp.dom.textContent, /<\s*think/i);
  assert.equal(comp.data.reasoning, '');
  assert.ok(domOf(comp, '.answer-retry'), '重试 is offered');
});

test('a stream that ends without message_end: the incomplete-answer state with 重试', { skip }, async function () {
  reset({ seed: 41, omitEvents: ['message_end', 'workflow_finished'] });
  const comp = mount();
  const done = await h.ask(comp, PATROL);
  assert.equal(done.status, 'incomplete');
  assert.equal(done.error, null);
  assert.equal(comp.data.incomplete, true);
  assert.equal(domOf(comp, '.answer-status-text').textContent, '回答可能不完整：服务没有发送结束信号');
  assert.ok(domOf(comp, '.answer-retry'));
  assert.deepEqual(h.rt.supNumbers(h.nodesOf(comp)), [1, 2, 1, 1, 2]);
  assertCleanFrames(comp, [1, 2, 1, 1, 2]);
  assert.equal(comp.data.panelRows.length, 2, 'the chunk map still gives the panel');
  h.writeArtifact('15-incomplete', '回答可能不完整：服务没有发送结束信号，可重试', comp);
});

test('Markdown answers: heading, list, emphasis and table; superscripts inside them; no syntax ever shown', { skip }, async function () {
  reset({ seed: 43, maxChunk: 2 });
  const comp = mount();
  await h.ask(comp, MARKDOWN);
  const turn = service.lastTurn(MARKDOWN);
  assert.ok(turn.cited.rag && turn.cited.web);
  assert.equal(comp.data.status, 'done');
  assertCleanFrames(comp, [1, 1, 2]);
  const nodes = h.nodesOf(comp);
  assert.deepEqual(nodes.map(function (n) { return n.name; }), ['h2', 'ul', 'table']);
  assert.equal(comp.data.blocks.length, 3, 'one rich-text per top-level block');
  assert.deepEqual(h.rt.supNumbers(nodes), [1, 1, 2]);
  const html = h.rt.toHtml(nodes);
  assert.match(html, /<strong[^>]*>夜间<\/strong>/);
  assert.match(html, /<em[^>]*>补录<\/em>/);
  // The superscript stays on the line of the character before it (g-cite-nb).
  assert.match(html, /<td[^>]*>1 小<span class="g-cite-nb"[^>]*>时<sup class="g-cite"[^>]*>2<\/sup><\/span><\/td>/);
  // No render ever shows Markdown syntax that the final rendering consumes.
  comp.frames.forEach(function (f, i) {
    assert.doesNotMatch(f.text, /\*\*|##|\| ---|^- /m, 'render ' + i + ': ' + f.text);
  });
  assert.deepEqual(comp.data.panelRows.map(function (r) { return r.rawId; }), [turn.cited.rag, turn.cited.web]);
  h.writeArtifact('16-markdown', 'Markdown 回答：标题、列表、强调、表格，上标在其中', comp);
});

test('message_replace (output moderation) replaces the answer and its panel', { skip }, async function () {
  reset({ seed: 47, inject: { before: 'message_end', event: { event: 'message_replace', answer: '该回答已按审核要求替换[C:1]。' } } });
  const comp = mount();
  await h.ask(comp, PATROL);
  assert.equal(comp.data.status, 'done');
  assertCleanFrames(comp);
  assert.equal(h.rt.toText(h.nodesOf(comp)), '该回答已按审核要求替换1。');
  assert.deepEqual(comp.data.panelRows.map(function (r) { return [r.rawId, r.idx]; }), [['1', 1]]);
  assert.ok(comp.frames.some(function (f) { return f.sups.length >= 2; }), 'the original answer was shown first');
});

test('a new question while an answer streams supersedes it: the old request is aborted, its late chunks are ignored', { skip }, async function () {
  reset({ seed: 53, maxChunk: 3, chunksAfterAbort: true });
  const comp = mount();
  comp.instance.ask(PATROL);
  await h.until(function () { return h.rt.toText(h.nodesOf(comp)).length > 4; }, 'the first answer streaming');
  const mark = comp.frames.length;
  comp.instance.ask(GREETING);
  // the superseded answer finished at once, as stopped, before the new one started
  assert.deepEqual(comp.finished.map(function (f) { return [f.status, Boolean(f.superseded)]; }), [['stopped', true]]);
  assert.ok(comp.finished[0].conversationId, 'the superseded answer still reports its conversation');
  assert.deepEqual(comp.started.map(function (s) { return s.query; }), [PATROL, GREETING]);
  await h.until(function () { return comp.finished.length >= 2; }, 'the second answer finished');
  await h.until(function () { return net.requests[0].lateChunks > 0; }, 'chunks of the old request after abort()');
  await new Promise(function (resolve) { setTimeout(resolve, 200); });
  assert.equal(net.requests.length, 2);
  assert.equal(net.requests[0].aborted, true);
  assert.equal(net.requests[1].aborted, false);
  assert.deepEqual(comp.finished.map(function (f) { return f.status; }), ['stopped', 'done']);
  assert.equal(comp.data.status, 'done');
  assert.equal(h.rt.toText(h.nodesOf(comp)), '你好！我是明湖大厦物业助手，有什么可以帮你？');
  assert.deepEqual(comp.data.panelRows, [], 'no source of the first answer in the second one');
  comp.frames.slice(mark).forEach(function (f, i) {
    assert.doesNotMatch(f.text, /巡更|点位/, 'render ' + i + ' after the new question shows the old answer: ' + f.text);
    assert.deepEqual(f.sups, [], 'render ' + i + ' has superscripts of the old answer');
  });
});

test('a finish listener that asks again while a question supersedes another: the latest question wins, no request is left running', { skip }, async function () {
  reset({ seed: 59, maxChunk: 5 });
  const comp = mount();
  comp.instance.ask(PATROL);
  await h.until(function () { return h.rt.toText(h.nodesOf(comp)).length > 4; }, 'the first answer streaming');
  let asked = false;
  comp.addEventListener('finish', function (evt) {
    // e.g. a page that asks its queued question when an answer stops
    if (!asked && evt.detail.status === 'stopped') {
      asked = true;
      comp.instance.ask(GREETING);
    }
  });
  comp.instance.ask(KEYS);
  await h.until(function () { return comp.finished.length >= 2; }, 'the latest answer finished');
  await new Promise(function (resolve) { setTimeout(resolve, 300); });
  assert.equal(comp.data.status, 'done');
  assert.equal(h.rt.toText(h.nodesOf(comp)), '你好！我是明湖大厦物业助手，有什么可以帮你？');
  assert.deepEqual(comp.finished.map(function (f) { return f.status; }), ['stopped', 'done']);
  // every question that started also finished; only the latest one ran to the end
  assert.equal(comp.started.length, comp.finished.length);
  const running = net.requests.filter(function (r) { return !r.aborted; }).map(function (r) { return r.data.query; });
  assert.deepEqual(running, [GREETING]);
});

/** The answer's citation superscripts: [number, class, style] in order. */
function citeSups(nodes) {
  const out = [];
  (function walk(list) {
    for (const n of list) {
      if (n.name === 'sup' && /(^| )g-cite( |$)/.test((n.attrs && n.attrs.class) || '')) {
        out.push([h.rt.toText(n.children || []), n.attrs.class, n.attrs.style || '']);
      }
      if (n.children) walk(n.children);
    }
  })(nodes);
  return out;
}

test('verified citations (issue 15): the sheet highlights the supporting sentence and scrolls to it; a weak citation is dotted and says so', { skip }, async function () {
  reset({ seed: 61, maxChunk: 9 });
  const comp = mount();
  const done = await h.ask(comp, VERIFY);
  const turn = service.lastTurn(VERIFY);
  assert.ok(turn.cited.right && turn.cited.wrong, 'the scripted answer cites the fault levels and an unrelated chunk: ' + JSON.stringify(turn));
  assert.equal(done.status, 'done');
  assert.deepEqual(done.weak, [turn.cited.wrong]);
  assertCleanFrames(comp, [1, 2]);
  // The weak citation's superscript is dotted (class is-weak, inline style for rich-text);
  // the supported one is not. The marking comes with message_end, not before.
  const sups = citeSups(h.nodesOf(comp));
  assert.deepEqual(sups.map(function (s) { return [s[0], s[1]]; }), [['1', 'g-cite'], ['2', 'g-cite is-weak']]);
  assert.match(sups[1][2], /text-decoration:underline dotted/);
  assert.doesNotMatch(sups[0][2], /dotted/);
  assert.ok(comp.frames.slice(0, -1).every(function (f) { return !/is-weak/.test(JSON.stringify(f.nodes)); }), 'no weak mark while streaming');
  // a legend says what the mark means
  assert.equal(domOf(comp, '.weak-legend').textContent, '虚线下划线的角标：该来源未能直接支持所在的句子');
  h.writeArtifact('17-weak-superscript', '核验后：第 2 个上标为虚线下划线（该来源未能直接支持这句话）', comp);

  await h.tap(comp, '.panel-head');
  const list = rows(comp);
  assert.deepEqual(list.map(function (r) { return [r.getAttribute('data-raw-id'), /is-weak/.test(r.className)]; }), [[turn.cited.right, false], [turn.cited.wrong, true]]);

  // The supported citation: the supporting sentence highlighted inside the whole chunk text,
  // and the sheet's scroll-view scrolled to it (scroll-into-view).
  await h.tap(comp, '.g-cite-item[data-raw-id="' + turn.cited.right + '"]');
  await h.until(function () { return comp.data.sheetScrollTo !== ''; }, 'scroll-into-view set');
  const mark = domOf(comp, '.sheet-support');
  assert.ok(mark, 'the supporting sentence is highlighted');
  assert.match(mark.textContent, /30 分钟内到场/);
  // scroll-into-view of the sheet's scroll-view names the highlighted sentence (the simulator
  // keeps no scroll position: the binding is checked in the compiled template's source)
  const target = comp.querySelector('#' + comp.data.sheetScrollTo);
  assert.ok(target && target.dom === mark, 'the scroll target is the highlighted sentence');
  assert.match(WXML, /<scroll-view class="sheet-body"[^>]*scroll-into-view="\{\{sheetScrollTo\}\}"/);
  assert.equal(comp.dom.querySelectorAll(h.sel('.sheet-support')).length, 1);
  assert.ok(domOf(comp, '.sheet-body').contains(mark), 'inside the scrolling body');
  assert.equal(domOf(comp, '.sheet-text').textContent, comp.data.sheet.content, 'the whole chunk text, nothing lost');
  assert.ok(comp.data.sheet.content.indexOf(mark.textContent) >= 0);
  assert.equal(domOf(comp, '.sheet-weak'), null);
  h.writeArtifact('18-sheet-support', '半屏：支持这句话的原文句子高亮（黄色底），并滚动到该句', comp);
  await h.tap(comp, '.mask');
  assert.equal(comp.data.sheetScrollTo, '');

  // The weak citation: the line 该来源未能直接支持这句话, nothing highlighted, no scrolling.
  await h.tap(comp, '.g-cite-item[data-raw-id="' + turn.cited.wrong + '"]');
  await simulate.sleep(20);
  assert.equal(domOf(comp, '.sheet-weak').textContent, '该来源未能直接支持这句话');
  assert.equal(domOf(comp, '.sheet-support'), null);
  assert.equal(comp.data.sheetScrollTo, '');
  assert.equal(domOf(comp, '.sheet-text').textContent, comp.data.sheet.content);
  h.writeArtifact('19-sheet-weak', '半屏：弱支持的引用，提示“该来源未能直接支持这句话”', comp);
});

test('an answer the verifier found not to answer the question gets a small notice naming it; an answer that answers gets none', { skip }, async function () {
  reset({ seed: 71, maxChunk: 9 });
  const comp = mount();
  await h.ask(comp, VERIFY);
  assert.equal(comp.data.answerNotice, '');
  assert.equal(domOf(comp, '.answer-notice'), null);
  const done = await h.ask(comp, NOT_ANSWERED);
  assert.ok(service.lastTurn(NOT_ANSWERED).cited.rag, 'the patrol chunk was retrieved and cited');
  assert.equal(done.status, 'done');
  assert.deepEqual(done.weak, [], 'the citation itself is supported: the two dimensions are separate');
  assert.equal(domOf(comp, '.answer-notice').textContent, '⚠ 可能未回答所问的问题：“' + NOT_ANSWERED + '”');
  h.writeArtifact('20-answer-notice', '核验后：回答可能未回答所问的问题（问价格，引用的句子没有价格）', comp);
});

test('without a verification report (an older service or Dify) nothing is marked and the sheet shows the plain chunk', { skip }, async function () {
  // the same answer as above, its message_end without metadata.gcite_verification
  reset({ seed: 67, maxChunk: 9, stripVerification: true });
  const comp = mount();
  await h.ask(comp, VERIFY);
  const turn = service.lastTurn(VERIFY);
  assert.equal(comp.data.status, 'done');
  assert.equal(net.stripped, 1, 'the report was there and was removed');
  assert.deepEqual(citeSups(h.nodesOf(comp)).map(function (s) { return s[1]; }), ['g-cite', 'g-cite']);
  await h.tap(comp, '.panel-head');
  assert.ok(rows(comp).every(function (r) { return !/is-weak/.test(r.className); }));
  for (const raw of [turn.cited.right, turn.cited.wrong]) {
    await h.tap(comp, '.g-cite-item[data-raw-id="' + raw + '"]');
    await simulate.sleep(20);
    assert.equal(domOf(comp, '.sheet-support'), null);
    assert.equal(domOf(comp, '.sheet-weak'), null);
    assert.equal(comp.data.sheetScrollTo, '');
    assert.equal(domOf(comp, '.sheet-text').textContent, comp.data.sheet.content);
    await h.tap(comp, '.mask');
  }
});

test('errors show the client\'s one Chinese sentence, never the server\'s or the provider\'s text', { skip }, async function () {
  const client = require(require('node:path').join(require('./lib/env.js').MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'lib', 'gcite-client', 'index.js'));
  reset({ seed: 23 });
  const comp = mount();
  const done = await h.ask(comp, BROKEN);
  assert.equal(done.status, 'error');
  const text = domOf(comp, '.answer-status-text').textContent;
  assert.equal(text, '回答未完成：' + client.errorText(done.error));
  assert.doesNotMatch(text.replace('API Key', ''), /[A-Za-z]/);
  // a refused key: the sentence for 401, not "Access token is invalid"
  reset();
  const refused = mount({ apiKey: 'no-such-key' });
  const r = await h.ask(refused, PATROL);
  assert.equal(r.status, 'error');
  assert.equal(domOf(refused, '.answer-status-text').textContent, 'API Key 无效或无权访问，请检查身份设置');
});

test('rows with the same title get the segment hint, as on the page and in the terminal', { skip }, async function () {
  reset();
  const comp = mount();
  const done = await h.ask(comp, '同名来源：巡更路线与打卡规范的班次、路线、打卡、检查内容和交接班规定');
  assert.equal(done.status, 'done');
  const rowsData = comp.data.panelRows;
  assert.ok(rowsData.length >= 2, 'several passages cited: ' + JSON.stringify(rowsData));
  const titles = rowsData.map(function (r) { return r.title; });
  assert.equal(new Set(titles).size, 1, 'one document: ' + titles);
  const hints = rowsData.map(function (r) { return r.hint; });
  assert.ok(hints.every(function (x) { return x !== ''; }), 'every same-title row has a hint: ' + JSON.stringify(rowsData));
  assert.equal(new Set(hints).size, hints.length, 'the hints tell the rows apart: ' + hints);
  await h.tap(comp, '.panel-head');
  const shown = rows(comp).map(function (r) { return r.querySelector(h.sel('.g-cite-item-hint')).textContent; });
  assert.deepEqual(shown, hints);
  assert.ok(rowsData.every(function (r) { return r.label.indexOf(r.hint) > 0; }), 'the hint is in the accessible label');
  // WeChat's screen reader reads aria-role / aria-label (the simulator does not render them)
  assert.match(WXML, /class="g-cite-item[^>]*aria-role="button" aria-label="\{\{item\.label\}\}"/);
  assert.match(WXML, /class="panel-head"[^>]*aria-role="button"\s+aria-expanded="\{\{panelOpen\}\}"/);
  assert.match(WXML, /class="sheet"[^>]*aria-role="dialog" aria-label="\{\{sheet\.label\}\}"/);
});

test('the web sheet button is green, the knowledge-base one blue; sheet text shows bullets; a stopped answer offers 重新回答', { skip }, async function () {
  reset();
  const comp = mount();
  await h.ask(comp, PATROL);
  const turn = service.lastTurn(PATROL);
  await h.tap(comp, '.panel-head');
  comp.instance.onRowTap({ currentTarget: { dataset: { rawId: turn.cited.web } } });
  await simulate.sleep(10);
  const wxss = require('node:fs').readFileSync(require('node:path').join(require('./lib/env.js').MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'index.wxss'), 'utf8');
  assert.match(domOf(comp, '.sheet-open').getAttribute('class'), /is-web/);
  assert.match(wxss, /\.sheet-open\.is-web\s*\{[^}]*background:\s*#15803d/);
  comp.instance.closeSheet();
  comp.instance.onRowTap({ currentTarget: { dataset: { rawId: turn.cited.rag } } });
  await simulate.sleep(10);
  assert.match(domOf(comp, '.sheet-open').getAttribute('class'), /is-rag/);
  assert.doesNotMatch(comp.data.sheet.content, /^\s*[-*+] /m);

  reset();
  const stopped = mount();
  stopped.instance.ask('逐字回答 3000');
  await h.until(function () { return stopped.data.blocks.length > 0; }, 'first text');
  stopped.instance.stop();
  const done = await h.untilFinished(stopped, 1);
  assert.equal(done.status, 'stopped');
  assert.equal(domOf(stopped, '.answer-retry').textContent, '重新回答');
});

for (const deltas of [1000, 4000]) {
  test('renders are batched: ' + deltas + ' one-character deltas, one setData per frame, each block sent once', { skip }, async function () {
    reset({ seed: 3, maxChunk: 3 });
    const frames = h.manualScheduler();
    const comp = mount({}, { scheduler: frames });
    // The frame clock counts network chunks handed over, not wall time, so a slow server
    // on a busy machine gives the same frames: one every FRAME_CHUNKS chunks while the
    // answer streams, then one each turn of the loop once the body has been delivered.
    const FRAME_CHUNKS = 1024;
    let delivered = 0;
    net.onDelivered = function () {
      delivered++;
      if (delivered % FRAME_CHUNKS === 0) frames.tick();
    };
    comp.instance.ask('逐字回答 ' + deltas);
    const request = net.requests[net.requests.length - 1];
    try {
      while (comp.finished.length === 0) {
        await simulate.sleep(4);
        if (request.done) frames.tick();
      }
    } finally {
      net.onDelivered = null;
    }
    const done = comp.finished[0];
    assert.equal(done.status, 'done');
    // setData: the reset at ask, one per frame that had changes, the final one
    assert.ok(comp.setDataCalls <= frames.ticks + 2, comp.setDataCalls + ' setData for ' + frames.ticks + ' frames');
    assert.ok(frames.scheduled <= frames.ticks + 1);
    const answer = service.lastTurn('逐字回答 ' + deltas).answer;
    assert.ok(answer.length >= deltas);
    assert.ok(comp.setDataCalls < answer.length / 4, comp.setDataCalls + ' setData for ' + answer.length + ' deltas');
    // every committed block is sent once, by its own path, while the answer streams (the
    // final render may send a block again with its weak superscripts marked)
    const keys = function (patches) {
      return [].concat.apply([], patches).filter(function (k) { return /^blocks\[\d+\]$/.test(k); });
    };
    const streamed = keys(comp.patches.slice(0, -1));
    assert.equal(new Set(streamed).size, streamed.length, 'a block was sent twice');
    assert.equal(new Set(keys(comp.patches)).size, comp.data.blocks.length);
    assert.equal(comp.data.blocks.length, (answer.match(/\n\n/g) || []).length, JSON.stringify(answer.slice(0, 300)) + ' ' + answer.length);
  });
}

test('every state the README describes has its HTML rendering, written by this run', { skip }, function () {
  const fs = require('node:fs');
  const path = require('node:path');
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('## 各状态说明'), readme.indexOf('## 与设计文档的对应'));
  const codes = new Set();
  for (const m of table.matchAll(/`(\d\d)(?:-[a-z-]+)?`/g)) codes.add(m[1]);
  assert.ok(codes.size >= 19, 'states named in the README: ' + Array.from(codes));
  const files = fs.readdirSync(h.ARTIFACTS);
  for (const code of codes) {
    const file = files.find(function (f) { return f.startsWith(code + '-') && f.endsWith('.html'); });
    assert.ok(file, 'no rendering for state ' + code);
    const stat = fs.statSync(path.join(h.ARTIFACTS, file));
    assert.ok(stat.mtimeMs >= RUN_STARTED - 1000, file + ' was not written by this run');
    const html = fs.readFileSync(path.join(h.ARTIFACTS, file), 'utf8');
    assert.match(html, /<wx-view class="g-cite-answer--answer"/, file + ' holds the rendered component');
  }
  // and every named full file name matches the file written
  for (const m of table.matchAll(/`(\d\d-[a-z-]+)`/g)) assert.ok(files.indexOf(m[1] + '.html') >= 0, m[1]);
});
