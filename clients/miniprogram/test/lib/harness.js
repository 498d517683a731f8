// Mount <g-cite-answer> in miniprogram-simulate, record every render while an
// answer streams, and write renderings of component states to
// test-artifacts/miniprogram/ (gitignored) as HTML.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { simulate, COMPONENT, MINIPROGRAM_ROOT } = require('./env.js');
const rt = require('./richtext.js');
const { REPO } = require('./service.js');

const view = require(path.join(MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'view.js'));
const ARTIFACTS = path.join(REPO, 'test-artifacts', 'miniprogram');

/** A raw marker opener followed by the prefix and colon, in any width (grammar §1). */
const RAW_MARKER = /[[【［]\s*[CcＣｃ]\s*[:：]/;

let componentId = null;

/**
 * A scheduler for the component's batched renders that renders once after each
 * delivered chunk (a microtask): every state a chunk leads to is recorded, with
 * no timer, so what the tests see does not depend on the machine's speed.
 */
const CHUNK_SCHEDULER = {
  later: function (fn) {
    let live = true;
    Promise.resolve().then(function () { if (live) fn(); });
    return { cancel: function () { live = false; } };
  },
  cancel: function (handle) { handle.cancel(); },
};

/**
 * A scheduler the test drives: `tick()` runs the pending render (if any) and
 * says whether there was one; `scheduled` counts the renders asked for.
 */
function manualScheduler() {
  const s = {
    pending: null,
    scheduled: 0,
    ticks: 0,
    later: function (fn) { s.scheduled++; s.pending = fn; return fn; },
    cancel: function (handle) { if (s.pending === handle) s.pending = null; },
    tick: function () {
      const fn = s.pending;
      s.pending = null;
      if (fn) { s.ticks++; fn(); }
      return Boolean(fn);
    },
  };
  return s;
}

/**
 * Render a fresh <g-cite-answer> attached to a parent, with `props`.
 * `options.scheduler`: the render scheduler (default CHUNK_SCHEDULER; "frame":
 * the component's own, one frame away).
 * @returns {object} the simulator's component wrapper, plus .frames (renders) and .finished (events)
 */
function mount(props, options) {
  if (componentId === null) {
    componentId = simulate.load(COMPONENT, 'g-cite-answer', { rootPath: MINIPROGRAM_ROOT, compiler: 'official' });
  }
  const comp = simulate.render(componentId, Object.assign({ autostart: false }, props));
  comp.frames = [];
  comp.finished = [];
  comp.started = [];
  comp.addEventListener('finish', function (evt) { comp.finished.push(evt.detail); });
  comp.addEventListener('start', function (evt) { comp.started.push(evt.detail); });
  // Record the state after every setData (every render the user could see).
  const inst = comp.instance;
  const scheduler = options && options.scheduler ? options.scheduler : CHUNK_SCHEDULER;
  if (scheduler !== 'frame') inst.setScheduler(scheduler);
  comp.setDataCalls = 0;
  comp.patches = []; // the keys of every setData patch
  const setData = inst.setData;
  inst.setData = function () {
    comp.setDataCalls++;
    comp.patches.push(Object.keys(arguments[0] || {}));
    const r = setData.apply(this, arguments);
    comp.frames.push(snapshot(comp));
    return r;
  };
  comp.attach(document.createElement('parent-wrapper'));
  return comp;
}

let pageId = null;

/** Render the example's chat page (built with Component) with its <g-cite-answer> children. */
function mountPage() {
  if (pageId === null) {
    pageId = simulate.load(path.join(MINIPROGRAM_ROOT, 'pages', 'chat', 'chat'), 'chat-page', { rootPath: MINIPROGRAM_ROOT, compiler: 'official' });
  }
  const page = simulate.render(pageId);
  page.attach(document.createElement('parent-wrapper'));
  return page;
}

/** How long a wait may take before the test fails (ms): a hang guard, never a speed limit. */
const HANG_GUARD_MS = 120000;

/** Wait until `check()` is true (polling every 5 ms). */
async function until(check, what, timeoutMs) {
  const deadline = Date.now() + (timeoutMs || HANG_GUARD_MS);
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await simulate.sleep(5);
  }
}

/** The answer's rich-text nodes: every committed block, then the open one. */
function nodesOf(comp) {
  const d = comp.data;
  const out = [];
  for (const b of d.blocks || []) for (const n of b.nodes) out.push(n);
  for (const n of d.tail || []) out.push(n);
  return out;
}

/** The rich-text node lists as the component binds them (each must be an array). */
function nodeLists(comp) {
  return (comp.data.blocks || []).map(function (b) { return b.nodes; }).concat([comp.data.tail]);
}

/** The state of the component now: data, rich-text rendering and the DOM. */
function snapshot(comp) {
  const d = comp.data;
  const nodes = nodesOf(comp);
  return {
    status: d.status,
    statusText: d.statusText,
    nodes: nodes,
    problems: [].concat.apply([], nodeLists(comp).map(function (l) { return rt.validate(l, view.RICH_TEXT_TAGS, view.RICH_TEXT_ATTRS); })),
    text: rt.toText(nodes),
    sups: rt.supNumbers(nodes),
    panel: (d.panelRows || []).map(function (r) { return { rawId: r.rawId, idx: r.idx, title: r.title }; }),
    domText: comp.dom.textContent,
  };
}

/** Wait until the component emitted `finish` `count` times (default: one more). */
async function untilFinished(comp, count, timeoutMs) {
  const want = count === undefined ? comp.finished.length + 1 : count;
  const deadline = Date.now() + (timeoutMs || HANG_GUARD_MS);
  while (comp.finished.length < want) {
    if (Date.now() > deadline) throw new Error('no finish event within ' + (timeoutMs || HANG_GUARD_MS) + ' ms; status ' + comp.data.status);
    await simulate.sleep(5);
  }
  return comp.finished[want - 1];
}

/** Ask `query` and wait for the finish event; returns it. */
async function ask(comp, query) {
  const before = comp.finished.length;
  comp.instance.ask(query);
  return untilFinished(comp, before + 1);
}

/** A CSS selector written with the WXML class names, for the rendered DOM (prefixed classes). */
function sel(selector) {
  return selector.replace(/\.([A-Za-z][\w-]*)/g, '.g-cite-answer--$1');
}

/** The simulator's wrapper of the first element matching `selector` (WXML class names). */
function find(comp, selector) {
  const el = comp.dom.querySelector(sel(selector));
  if (!el) throw new Error('nothing matches ' + selector);
  const cls = el.className.split(/\s+/)[0].replace(/^g-cite-answer--/, '');
  const wrapper = comp.querySelectorAll('.' + cls).find(function (w) { return w.dom === el; });
  if (!wrapper) throw new Error('no component node for ' + selector);
  return wrapper;
}

/** Tap an element of the component (a simulator event through the WXML binding). */
async function tap(comp, selector) {
  const el = find(comp, selector);
  el.dispatchEvent('tap');
  await simulate.sleep(0);
  return el;
}

/** The component DOM as HTML, with the rich-text element filled with what it shows. */
function renderHtml(comp) {
  const clone = comp.dom.cloneNode(true);
  const rich = Array.from(clone.querySelectorAll('wx-rich-text'));
  const lists = (comp.data.blocks || []).map(function (b) { return b.nodes; });
  if (comp.data.tail && comp.data.tail.length) lists.push(comp.data.tail);
  rich.forEach(function (el, i) { el.innerHTML = rt.toHtml(lists[i] || []); });
  return clone.outerHTML;
}

function css() {
  const wxss = fs.readFileSync(path.join(MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'index.wxss'), 'utf8');
  // Selectors get the simulator's class prefix, as the rendered DOM has it.
  return wxss.replace(/(\d+)rpx/g, '$1px').replace(/(^|\})([^{}]*)\{/g, function (all, close, selector) {
    return close + selector.replace(/\.([A-Za-z][\w-]*)/g, '.g-cite-answer--$1') + '{';
  });
}

// simulate renders <image> as an empty element: show the icons from their files.
function iconCss() {
  const dir = path.join(MINIPROGRAM_ROOT, 'components', 'g-cite-answer', 'icons');
  const url = function (name) { return 'url("' + require('node:url').pathToFileURL(path.join(dir, name + '.svg')).href + '")'; };
  return 'wx-image{background-size:contain;background-repeat:no-repeat}\n' +
    'wx-image[data-icon=file]{background-image:' + url('file') + '}\n' +
    'wx-image[data-icon=globe]{background-image:' + url('globe') + '}\n' +
    '.g-cite-answer--panel-head-icon{background-image:' + url('file') + '}\n' +
    '.g-cite-answer--sheet-icon-image[data-icon=file]{background-image:' + url('file-blue') + '}\n' +
    '.g-cite-answer--sheet-icon-image[data-icon=globe]{background-image:' + url('globe-green') + '}\n';
}

/**
 * Write one state of the component as a standalone HTML page.
 * @param {string} name file name without extension
 * @param {string} title what the state shows (Chinese or English)
 * @param {object} comp
 */
function writeArtifact(name, title, comp) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const html =
    '<!doctype html>\n<html lang="zh-CN"><head><meta charset="utf-8"><title>' + rt.esc(title) + '</title>\n' +
    '<meta name="viewport" content="width=390">\n<style>\nbody{margin:0;padding:16px;background:#f5f6f7;font-family:sans-serif;width:358px}\n' +
    'wx-view,wx-scroll-view{display:block} wx-text{display:inline} wx-image{display:inline-block;width:20px;height:20px}\n' +
    'wx-button{display:block;text-align:center}\n' + iconCss() + css() + '\n</style></head>\n<body>\n<!-- ' + rt.esc(title) + ' -->\n' +
    '<h1 style="font-size:14px;color:#646a73">' + rt.esc(title) + '</h1>\n' + renderHtml(comp) + '\n' +
    '<script type="application/json" id="component-data">' + JSON.stringify(comp.data).replace(/</g, '\\u003c') + '</script>\n' +
    '</body></html>\n';
  fs.writeFileSync(path.join(ARTIFACTS, name + '.html'), html);
  return html;
}

module.exports = { CHUNK_SCHEDULER, manualScheduler, nodesOf, mountPage, until, sel, find, mount, snapshot, ask, tap, untilFinished, writeArtifact, renderHtml, RAW_MARKER, view, rt, ARTIFACTS };
