// G-Cite H5 page (mobile design document §4–§6), built on the JavaScript client.
//
// Safety rule of this file: every string that comes from a document, the model or the
// server is put into the DOM with textContent / createTextNode, never innerHTML; only
// URLs accepted by safeUrl() (http: / https:) ever become links.

import {
  streamChat,
  buildPanel,
  CitationParser,
  MarkdownStream,
  appendTree,
  createMarkdownIt,
  renderMarkdownTree,
  reasoningDisplay,
  sheetText,
  splitReasoning,
  WEAK_SUPPORT_TEXT,
  answerNoticeText,
  chunkSupport,
  supportParts,
  verificationOf,
  weakIds,
  TEXT,
  copyText,
  errorText,
  sourceRows,
  sourceSheet,
  titleOf,
} from "/static/client/index.js";

// markdown-it (static/vendor/markdown-it.min.js, loaded by index.html before this module).
var md = createMarkdownIt(window.markdownit);

var SVG_NS = "http://www.w3.org/2000/svg";

// Icon geometry (24x24, stroke icons drawn for this page).
var ICONS = {
  file: [
    "M14 3H7a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V8z",
    "M14 3v5h5",
    "M9 13h6",
    "M9 17h6",
  ],
  globe: [
    "M12 3a9 9 0 1 0 0 18a9 9 0 1 0 0-18z",
    "M3 12h18",
    "M12 3c2.5 2.7 3.8 5.7 3.8 9s-1.3 6.3-3.8 9c-2.5-2.7-3.8-5.7-3.8-9s1.3-6.3 3.8-9z",
  ],
  send: ["M4 12l16-8-6 16-2.5-6.5z", "M11.5 13.5L20 4"],
  stop: ["M7 7h10v10H7z"],
  plus: ["M12 5v14", "M5 12h14"],
  chevron: ["M6 9l6 6 6-6"],
  external: ["M14 4h6v6", "M20 4l-9 9", "M19 14v5a1 1 0 0 1-1 1H5a1 1 0 0 1-1-1V6a1 1 0 0 1 1-1h5"],
  quote: [
    "M4 5h16v11H9l-5 4z",
    "M9 9.5h6",
    "M9 12.5h4",
  ],
};

function icon(name) {
  var svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("fill", "none");
  svg.setAttribute("stroke", "currentColor");
  svg.setAttribute("stroke-width", "1.8");
  svg.setAttribute("stroke-linecap", "round");
  svg.setAttribute("stroke-linejoin", "round");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("data-icon", name);
  ICONS[name].forEach(function (d) {
    var path = document.createElementNS(SVG_NS, "path");
    path.setAttribute("d", d);
    svg.appendChild(path);
  });
  return svg;
}

function el(tag, className, text) {
  var node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function $(id) {
  return document.getElementById(id);
}

var state = {
  config: { title: "", suggestions: [], identities: [] },
  key: "",
  identityLabel: "",
  conversationId: "",
  user: "",
  busy: false,
  controller: null,
  queued: "",
};

// ------------------------------------------------------------------ storage

function storageGet(name) {
  try {
    return window.localStorage.getItem(name) || "";
  } catch (e) {
    return "";
  }
}

function storageSet(name, value) {
  try {
    window.localStorage.setItem(name, value);
  } catch (e) {
    /* private mode: keep it in memory only */
  }
}

function endUserId() {
  var id = storageGet("gcite.user");
  if (!id) {
    id = "h5-" + Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
    storageSet("gcite.user", id);
  }
  return id;
}

// ------------------------------------------------------------------ answer text

// Accessible label of a superscript: "引用 1：<标题>" (the title from chunk metadata).
function citeLabel(metadata) {
  return function (rawId, idx) {
    var chunk = metadata.get(String(rawId));
    return "引用 " + idx + (chunk ? "：" + titleOf({ rawId: String(rawId), chunk: chunk }) : "");
  };
}

// Reasoning (§4a) above the answer, collapsed: <details><summary>思考过程</summary>.
function showReasoning(view, raw) {
  var text = reasoningDisplay(raw);
  if (!text) return;
  if (!view.reasoning) {
    var box = el("details", "reasoning");
    box.appendChild(el("summary", "reasoning-summary", TEXT.reasoning));
    view.reasoningText = el("div", "reasoning-text");
    box.appendChild(view.reasoningText);
    view.bubble.insertBefore(box, view.text);
    view.reasoning = box;
  }
  view.reasoningText.textContent = text;
}

// The streaming renderer of one answer: segments are pushed as they arrive; the DOM is
// updated at most once per animation frame (completed Markdown blocks are appended once,
// only the open block is replaced), so the cost per delta does not grow with the answer.
function AnswerView(view, metadata) {
  this.view = view;
  this.stream = new MarkdownStream({ md: md, label: citeLabel(metadata) });
  this.scheduled = 0;
  this.segments = [];
}

AnswerView.prototype.setMetadata = function (metadata) {
  this.stream.setLabel(citeLabel(metadata));
};

AnswerView.prototype.push = function (segments) {
  for (var i = 0; i < segments.length; i++) this.segments.push(segments[i]);
  this.stream.push(segments);
  if (this.scheduled) return;
  var self = this;
  this.scheduled = requestAnimationFrame(function () {
    self.scheduled = 0;
    self.paint();
  });
};

// Append rendered nodes to `parent`; their superscripts become focusable (Enter or a
// click shows that source in the panel).
function appendAnswer(nodes, parent) {
  var before = parent.lastChild;
  appendTree(nodes, parent, document);
  for (var n = before ? before.nextSibling : parent.firstChild; n; n = n.nextSibling) {
    if (n.nodeType !== 1) continue;
    var cites = n.matches("sup.g-cite") ? [n] : n.querySelectorAll("sup.g-cite");
    Array.prototype.forEach.call(cites, function (sup) {
      sup.setAttribute("tabindex", "0");
      sup.setAttribute("role", "button");
    });
  }
}

AnswerView.prototype.paint = function () {
  var u = this.stream.update();
  if (!u.changed) return;
  if (u.commit.length) appendAnswer(u.commit, this.view.blocks);
  var tail = this.view.tail;
  while (tail.firstChild) tail.removeChild(tail.firstChild);
  appendAnswer(u.tail, tail);
  showReasoning(this.view, this.stream.reasoning);
  scrollToEnd(false);
};

// message_replace: the streamed answer is dropped (a whole new one is rendered instead).
AnswerView.prototype.cancel = function () {
  if (this.scheduled) cancelAnimationFrame(this.scheduled);
  this.scheduled = 0;
  this.stream.end();
};

AnswerView.prototype.end = function (incomplete) {
  if (this.scheduled) {
    cancelAnimationFrame(this.scheduled);
    this.scheduled = 0;
  }
  var u = this.stream.update();
  if (u.commit.length) appendAnswer(u.commit, this.view.blocks);
  var f = this.stream.end({ incomplete: incomplete });
  var tail = this.view.tail;
  while (tail.firstChild) tail.removeChild(tail.firstChild);
  if (f.replace) {
    var blocks = this.view.blocks;
    while (blocks.firstChild) blocks.removeChild(blocks.firstChild);
    appendAnswer(f.replace, blocks);
  } else appendAnswer(f.commit, this.view.blocks);
  showReasoning(this.view, this.stream.reasoning);
};

// A whole answer at once (message_replace, a restored conversation).
function renderWhole(view, segments, metadata) {
  var parts = splitReasoning(segments);
  while (view.blocks.firstChild) view.blocks.removeChild(view.blocks.firstChild);
  while (view.tail.firstChild) view.tail.removeChild(view.tail.firstChild);
  appendAnswer(renderMarkdownTree(parts.answer, { md: md, label: citeLabel(metadata) }), view.blocks);
  showReasoning(view, parts.reasoning);
}

// ------------------------------------------------------------------ source panel

function createPanel() {
  var root = el("div", "citation-panel");
  root.hidden = true;
  var head = el("button", "panel-head");
  head.type = "button";
  head.setAttribute("aria-expanded", "false");
  head.appendChild(icon("file"));
  var count = el("span", "panel-count", "引用来源（0）");
  var toggle = el("span", "panel-toggle");
  var toggleText = el("span", "panel-toggle-text", TEXT.expand);
  toggle.appendChild(toggleText);
  toggle.appendChild(icon("chevron"));
  head.appendChild(count);
  head.appendChild(toggle);
  var list = el("div", "panel-list");
  list.id = "panel-list-" + ++panelSeq;
  list.setAttribute("role", "list");
  list.setAttribute("aria-label", "引用来源");
  head.setAttribute("aria-controls", list.id);
  list.hidden = true;
  root.appendChild(head);
  root.appendChild(list);
  head.addEventListener("click", function () {
    var open = list.hidden;
    list.hidden = !open;
    head.setAttribute("aria-expanded", open ? "true" : "false");
    toggleText.textContent = open ? TEXT.collapse : TEXT.expand;
  });
  return { root: root, head: head, count: count, list: list, toggleText: toggleText, signature: "", items: [] };
}

var panelSeq = 0;

// Open the panel (a superscript's source is shown in it).
function openPanel(panel) {
  if (!panel.list.hidden) return;
  panel.list.hidden = false;
  panel.head.setAttribute("aria-expanded", "true");
  panel.toggleText.textContent = TEXT.collapse;
}

// The panel's rows from `items` (buildPanel) as the latest data says. The rows are drawn
// again only when something they show changed: the signature is every row's view (type,
// title, subtitle, hint, link, weak mark, label), so a row drawn from earlier chunk
// metadata is redrawn when later metadata for the same id says otherwise. `panel.items`
// is always the latest rows: the sheet and the copy text read them.
function renderPanel(panel, items, weak) {
  var rows = items.filter(function (item) {
    return item && item.chunk;
  });
  panel.items = rows;
  // Rows that look the same (same title and subtitle) get the client's segment hint.
  var views = sourceRows(rows, weak || []);
  var signature = JSON.stringify(views);
  if (signature === panel.signature) return;
  panel.signature = signature;
  panel.root.hidden = rows.length === 0;
  panel.count.textContent = "引用来源（" + rows.length + "）";
  while (panel.list.firstChild) panel.list.removeChild(panel.list.firstChild);
  views.forEach(function (view, k) {
    var row = el("button", "g-cite-item" + (view.weak ? " is-weak" : ""));
    row.type = "button";
    row.setAttribute("role", "listitem");
    row.setAttribute("data-raw-id", view.rawId);
    row.setAttribute("data-idx", String(view.idx));
    row.setAttribute("data-source-type", view.type);
    var iconBox = el("span", "g-cite-item-icon");
    iconBox.appendChild(icon(view.type === "web" ? "globe" : "file"));
    row.appendChild(iconBox);
    row.appendChild(el("span", "g-cite-item-idx", view.idx));
    var texts = el("span", "g-cite-item-texts");
    texts.appendChild(el("span", "g-cite-item-title", view.title));
    if (view.subtitle) texts.appendChild(el("span", "g-cite-item-subtitle", view.subtitle));
    if (view.hint) texts.appendChild(el("span", "g-cite-item-hint", view.hint));
    row.appendChild(texts);
    row.setAttribute("aria-label", view.label + (view.weak ? "（" + WEAK_SUPPORT_TEXT + "）" : ""));
    if (view.weak) row.setAttribute("title", WEAK_SUPPORT_TEXT);
    row.addEventListener("click", function () {
      openSheet(panel.items[k], row);
    });
    panel.list.appendChild(row);
  });
}

// ------------------------------------------------------------------ sheet (§5.3)

var sheetDrag = null;

// The citation verifier's report of each answer (message_end.metadata.gcite_verification),
// per cited chunk object; read through the client's verification.js, which the
// mini program uses too.
var reportOf = new WeakMap();

// The sheet text with the supporting sentence highlighted and scrolled to; a weak
// citation gets a line saying so. Text only (never HTML); list markers shown as bullets.
function showSupport(chunk, sheet) {
  var box = $("sheet-text");
  var weak = $("sheet-weak");
  while (box.firstChild) box.removeChild(box.firstChild);
  var content = typeof chunk.content === "string" && chunk.content.trim() !== "" ? chunk.content : "";
  var support = chunkSupport(reportOf.get(chunk) || null, chunk.id, content);
  weak.hidden = !support.weak;
  weak.textContent = WEAK_SUPPORT_TEXT;
  $("sheet-body").scrollTop = 0;
  if (!content) {
    box.textContent = sheet.content;
    return;
  }
  var mark = null;
  supportParts(sheetText(content), support.span).forEach(function (part) {
    if (!part.support) {
      box.appendChild(document.createTextNode(part.text));
      return;
    }
    mark = el("mark", "sheet-support", part.text);
    box.appendChild(mark);
  });
  if (!mark) return;
  setTimeout(function () {
    var body = $("sheet-body");
    body.scrollTop = Math.max(0, mark.offsetTop - box.offsetTop - body.clientHeight / 3);
  }, 0);
}

// The verifier found (a part of) the question unanswered: a small notice under the answer,
// naming the parts (text only).
function showAnswerNotice(view, report) {
  var text = answerNoticeText(report);
  if (!text || view.notice) return;
  view.notice = el("div", "answer-notice", text);
  view.notice.setAttribute("role", "note");
  view.bubble.insertBefore(view.notice, view.status);
}

// After message_end: remember the report for each cited chunk; superscripts and panel rows
// of a chunk the verifier found no support in are marked weak.
function applyVerification(view, report, metadata) {
  if (!report) return;
  metadata.forEach(function (chunk) {
    if (chunk && typeof chunk === "object") reportOf.set(chunk, report);
  });
  showAnswerNotice(view, report);
  var weak = weakIds(report);
  if (!weak.length) return;
  weak.forEach(function (id) {
    var sel = 'sup.g-cite[data-raw-id="' + id.replace(/["\\]/g, "") + '"]';
    Array.prototype.forEach.call(view.root.querySelectorAll(sel), function (node) {
      node.classList.add("is-weak");
      node.setAttribute("title", WEAK_SUPPORT_TEXT);
      node.setAttribute("aria-label", (node.getAttribute("aria-label") || "") + "（" + WEAK_SUPPORT_TEXT + "）");
    });
  });
  renderPanel(view.panel, view.panel.items, weak);
  if (!view.legend) {
    view.legend = el("div", "weak-legend", TEXT.weakLegend);
    view.bubble.insertBefore(view.legend, view.status);
  }
}

// The element that opened the sheet (focus returns to it when the sheet closes).
var sheetOpener = null;

function openSheet(item, opener) {
  var chunk = item.chunk;
  var view = sourceSheet(item);
  var type = view.type;
  var sheet = $("sheet");
  var head = $("sheet-head");
  sheet.setAttribute("data-source-type", type);
  sheet.setAttribute("data-idx", String(item.idx));
  head.className = "sheet-head is-" + type;
  var iconBox = $("sheet-icon");
  while (iconBox.firstChild) iconBox.removeChild(iconBox.firstChild);
  iconBox.appendChild(icon(type === "web" ? "globe" : "file"));
  $("sheet-tag").textContent = view.tag;
  $("sheet-title").textContent = view.title;
  $("sheet-subtitle").textContent = view.subtitle;
  $("sheet-subtitle").hidden = !view.subtitle;
  showSupport(chunk, view);

  $("office-notice").textContent = view.notice;
  $("office-notice").hidden = !view.office;
  var foot = $("sheet-foot");
  while (foot.firstChild) foot.removeChild(foot.firstChild);
  var button;
  if (view.url) {
    button = el("a", "btn-primary sheet-open is-" + type);
    button.href = view.url;
    button.target = "_blank";
    button.rel = "noopener noreferrer";
    button.appendChild(document.createTextNode(TEXT.openOriginal));
    button.appendChild(icon("external"));
  } else {
    button = el("button", "btn-primary sheet-open is-" + type, TEXT.openOriginal);
    button.type = "button";
    button.disabled = true;
    button.setAttribute("aria-disabled", "true");
  }
  foot.appendChild(button);
  if (view.linkHint) foot.appendChild(el("div", "sheet-hint", view.linkHint));
  sheetOpener = opener || document.activeElement;
  $("mask").hidden = false;
  sheet.hidden = false;
  sheet.style.transform = "";
  $("app").setAttribute("aria-hidden", "true");
  $("sheet-close").focus();
}

function closeSheet() {
  var sheet = $("sheet");
  if (sheet.hidden) return;
  sheet.hidden = true;
  sheet.style.transform = "";
  sheet.classList.remove("is-dragging");
  $("mask").hidden = true;
  $("app").removeAttribute("aria-hidden");
  sheetDrag = null;
  var back = sheetOpener;
  sheetOpener = null;
  if (back && document.contains(back) && typeof back.focus === "function") back.focus();
}

// Tab and Shift+Tab stay inside the open sheet (a modal dialog).
function trapFocus(evt) {
  var sheet = $("sheet");
  if (evt.key !== "Tab" || sheet.hidden) return;
  var focusable = Array.prototype.filter.call(
    sheet.querySelectorAll("button:not([disabled]), a[href], [tabindex]:not([tabindex='-1'])"),
    function (node) {
      return !node.hidden && node.offsetParent !== null;
    }
  );
  if (!focusable.length) return;
  var first = focusable[0];
  var last = focusable[focusable.length - 1];
  if (evt.shiftKey && (document.activeElement === first || !sheet.contains(document.activeElement))) {
    evt.preventDefault();
    last.focus();
  } else if (!evt.shiftKey && (document.activeElement === last || !sheet.contains(document.activeElement))) {
    evt.preventDefault();
    first.focus();
  }
}

function setupSheet() {
  var sheet = $("sheet");
  $("mask").addEventListener("click", closeSheet);
  $("sheet-close").addEventListener("click", closeSheet);
  document.addEventListener("keydown", function (evt) {
    if (evt.key === "Escape" && !sheet.hidden) {
      evt.preventDefault();
      closeSheet();
    } else trapFocus(evt);
  });
  // Drag down (on the grip or the header) to close.
  function start(evt) {
    sheetDrag = { y: evt.clientY, dy: 0, id: evt.pointerId };
    sheet.classList.add("is-dragging");
    if (evt.target.setPointerCapture) {
      try {
        evt.target.setPointerCapture(evt.pointerId);
      } catch (e) {
        /* synthetic pointers cannot be captured */
      }
    }
  }
  function move(evt) {
    if (!sheetDrag) return;
    sheetDrag.dy = Math.max(0, evt.clientY - sheetDrag.y);
    sheet.style.transform = "translateY(" + sheetDrag.dy + "px)";
  }
  function end() {
    if (!sheetDrag) return;
    var dy = sheetDrag.dy;
    sheetDrag = null;
    sheet.classList.remove("is-dragging");
    if (dy > Math.min(120, sheet.offsetHeight / 4)) closeSheet();
    else sheet.style.transform = "";
  }
  [$("sheet-grip"), $("sheet-head")].forEach(function (handle) {
    handle.addEventListener("pointerdown", start);
    handle.addEventListener("pointermove", move);
    handle.addEventListener("pointerup", end);
    handle.addEventListener("pointercancel", end);
  });
}

// ------------------------------------------------------------------ messages

// The source panel of each answer's message element.
var panelOf = new WeakMap();

// A superscript (focusable; Enter, Space or a click): its row in the panel, opened,
// scrolled into view, focused and briefly highlighted.
function showCitedSource(sup) {
  var msg = sup.closest(".msg");
  var panel = msg ? panelOf.get(msg) : null;
  if (!panel || panel.root.hidden) return;
  var raw = sup.getAttribute("data-raw-id");
  var row = null;
  Array.prototype.forEach.call(panel.list.children, function (node) {
    if (node.getAttribute("data-raw-id") === raw) row = node;
  });
  if (!row) return;
  openPanel(panel);
  row.classList.add("is-active");
  setTimeout(function () {
    row.classList.remove("is-active");
  }, 1000);
  row.scrollIntoView({ block: "nearest" });
  row.focus();
}

function setupCitations() {
  var box = $("messages");
  box.addEventListener("click", function (evt) {
    var sup = evt.target && evt.target.closest ? evt.target.closest("sup.g-cite") : null;
    if (sup) showCitedSource(sup);
  });
  box.addEventListener("keydown", function (evt) {
    var sup = evt.target && evt.target.matches && evt.target.matches("sup.g-cite") ? evt.target : null;
    if (sup && (evt.key === "Enter" || evt.key === " ")) {
      evt.preventDefault();
      showCitedSource(sup);
    }
  });
}

// The list follows the newest answer until the user scrolls up; scrolling back to the
// bottom (or sending a question) follows again.
var follow = { on: true, top: 0 };

function scrollToEnd(force) {
  var box = $("messages");
  if (force) follow.on = true;
  if (!follow.on) return;
  box.scrollTop = box.scrollHeight;
  follow.top = box.scrollTop;
}

function setupFollow() {
  var box = $("messages");
  box.addEventListener("scroll", function () {
    var gap = box.scrollHeight - box.scrollTop - box.clientHeight;
    if (gap < 24) follow.on = true;
    else if (box.scrollTop < follow.top - 4) follow.on = false;
    follow.top = Math.min(follow.top, box.scrollTop);
    if (follow.on) follow.top = box.scrollTop;
  });
}

function addUserMessage(text) {
  var msg = el("div", "msg msg-user");
  msg.appendChild(el("div", "bubble", text));
  $("messages").appendChild(msg);
  scrollToEnd(true);
}

function addBotMessage(statusText) {
  var msg = el("div", "msg msg-bot");
  var bubble = el("div", "bubble");
  var text = el("div", "answer-text");
  var blocks = el("div", "answer-blocks");
  var tail = el("div", "answer-tail");
  text.appendChild(blocks);
  text.appendChild(tail);
  var status = el("div", "answer-status", statusText === undefined ? TEXT.searching : statusText);
  status.setAttribute("role", "status");
  bubble.appendChild(text);
  bubble.appendChild(status);
  msg.appendChild(bubble);
  var panel = createPanel();
  panelOf.set(msg, panel);
  msg.appendChild(panel.root);
  $("messages").appendChild(msg);
  scrollToEnd(true);
  return { root: msg, bubble: bubble, text: text, blocks: blocks, tail: tail, status: status, panel: panel, reasoning: null };
}

function retryButton(query, label) {
  var button = el("button", "answer-retry", label || TEXT.retry);
  button.type = "button";
  button.addEventListener("click", function () {
    if (state.busy) {
      queueQuestion(query);
      return;
    }
    var input = $("input");
    if (input.value.trim() === query) {
      input.value = "";
      input.dispatchEvent(new Event("input"));
    }
    ask(query);
  });
  return button;
}

// After a failed send: give the question back to the input (unless the user is already
// typing another one) and add a 重试 button that sends it again.
function offerRetry(view, query, error, gotText, label) {
  var input = $("input");
  if (!gotText && !input.value.trim()) {
    input.value = query;
    input.dispatchEvent(new Event("input"));
  }
  if (error && (error.status === 401 || error.status === 403)) return;
  var button = retryButton(query, label);
  button.addEventListener("click", function () {
    if (button.parentNode) button.parentNode.removeChild(button);
  });
  view.status.appendChild(document.createTextNode(" "));
  view.status.appendChild(button);
}

// Copy and retry under a finished answer.
function addActions(view, query, segments) {
  var bar = el("div", "answer-actions");
  var copy = el("button", "answer-copy", TEXT.copy);
  copy.type = "button";
  copy.setAttribute("aria-label", "复制回答和来源");
  copy.addEventListener("click", function () {
    var text = copyText(segments, view.panel.items);
    var done = function () {
      copy.textContent = TEXT.copied;
      setTimeout(function () {
        copy.textContent = TEXT.copy;
      }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () {
        fallbackCopy(text);
        done();
      });
    } else {
      fallbackCopy(text);
      done();
    }
  });
  var again = retryButton(query, TEXT.regenerate);
  again.className = "answer-regenerate";
  again.setAttribute("aria-label", "重新回答这个问题");
  bar.appendChild(copy);
  bar.appendChild(again);
  view.bubble.appendChild(bar);
}

function fallbackCopy(text) {
  var area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "copy-buffer";
  document.body.appendChild(area);
  area.select();
  try {
    document.execCommand("copy");
  } catch (e) {
    /* nothing else to try */
  }
  document.body.removeChild(area);
}

function setBusy(busy) {
  state.busy = busy;
  var send = $("send");
  while (send.firstChild) send.removeChild(send.firstChild);
  send.appendChild(icon(busy ? "stop" : "send"));
  send.classList.toggle("is-stop", busy);
  send.setAttribute("aria-label", busy ? "停止" : "发送");
  send.title = busy ? "停止" : "发送";
  updateQueueHint();
}

// Enter while an answer streams: the new question waits and is sent when the current
// answer ends (the composer says so); the stop button still stops the current answer.
function queueQuestion(text) {
  state.queued = text.trim();
  updateQueueHint();
}

function updateQueueHint() {
  var hint = $("queue-hint");
  if (!hint) return;
  if (state.queued && state.busy) {
    hint.textContent = "当前回答结束后将发送：" + state.queued;
    hint.hidden = false;
  } else {
    hint.hidden = true;
    hint.textContent = "";
  }
}

function sendQueued() {
  if (!state.queued || state.busy) return;
  var next = state.queued;
  state.queued = "";
  updateQueueHint();
  ask(next);
}

function remember(conversationId) {
  state.conversationId = conversationId || "";
  storageSet(conversationKey(), state.conversationId);
}

function conversationKey() {
  return "gcite.conversation." + (state.identityLabel || state.key || "-");
}

function ask(query) {
  query = query.trim();
  if (!query) return;
  if (state.busy) {
    queueQuestion(query);
    return;
  }
  $("empty").hidden = true;
  addUserMessage(query);
  var view = addBotMessage();
  var metadata = new Map();
  var citations = [];
  var seen = new Set();
  var gotText = false;
  var sawEnd = false;
  var verification = null;
  var controller = typeof AbortController === "function" ? new AbortController() : null;
  state.controller = controller;
  setBusy(true);
  var answer = new AnswerView(view, metadata);

  function livePanel() {
    renderPanel(view.panel, buildPanel(citations, metadata));
  }

  function track(segments) {
    var changed = false;
    segments.forEach(function (seg) {
      if (seg.cite !== undefined && !seen.has(String(seg.cite))) {
        seen.add(String(seg.cite));
        citations.push([String(seg.cite), seg.idx]);
        changed = true;
      }
    });
    return changed;
  }

  var headers = { "Content-Type": "application/json" };
  if (state.key) headers.Authorization = "Bearer " + state.key;
  var body = {
    inputs: {},
    query: query,
    response_mode: "streaming",
    user: state.user,
    conversation_id: state.conversationId || "",
  };
  var finished = false;
  var replaced = null;

  function finish(result, err) {
    if (finished) return;
    finished = true;
    var error = err || (result && result.error) || null;
    var aborted = error && error.code === "aborted";
    var incomplete = !sawEnd && !error && gotText;
    if (replaced === null) answer.end(!sawEnd);
    setBusy(false);
    state.controller = null;
    if (result) {
      if (result.conversationId) remember(result.conversationId);
      if (result.panel) renderPanel(view.panel, result.panel);
    }
    applyVerification(view, verification, metadata);
    view.status.classList.remove("is-error", "is-incomplete");
    if (aborted) {
      view.status.hidden = false;
      view.status.textContent = gotText ? TEXT.stoppedPartial : TEXT.stopped;
      offerRetry(view, query, null, gotText, TEXT.regenerate);
    } else if (error) {
      view.status.textContent = errorText(error);
      view.status.classList.add("is-error");
      offerRetry(view, query, error, gotText);
    } else if (incomplete) {
      view.root.setAttribute("data-incomplete", "true");
      view.status.textContent = TEXT.incomplete;
      view.status.classList.add("is-incomplete");
      offerRetry(view, query, null, gotText);
    } else if (!gotText) {
      view.status.textContent = TEXT.empty;
    } else {
      view.status.hidden = true;
    }
    if (gotText && !error && !incomplete) addActions(view, query, replaced || answer.segments);
    view.root.setAttribute("data-done", "true");
    scrollToEnd(false);
    setTimeout(sendQueued, 0);
  }

  streamChat({
    url: "/v1/chat-messages",
    body: body,
    headers: headers,
    fetch: window.fetch.bind(window),
    signal: controller ? controller.signal : undefined,
    onEvent: function (evt) {
      if (evt && evt.event === "message_end") {
        sawEnd = true;
        var report = verificationOf(evt.metadata);
        if (report) verification = report;
      }
      if (evt && typeof evt.conversation_id === "string" && evt.conversation_id && !state.conversationId) {
        remember(evt.conversation_id);
      }
    },
    onMetadata: function (chunks) {
      metadata.clear();
      (chunks || []).forEach(function (chunk) {
        if (chunk && chunk.id !== undefined) metadata.set(String(chunk.id), chunk);
      });
      answer.setMetadata(metadata);
      if (!gotText) view.status.textContent = TEXT.generating;
      livePanel();
    },
    onSegments: function (segments) {
      if (!segments || !segments.length) return;
      if (!gotText) {
        gotText = true;
        view.status.textContent = "";
      }
      if (replaced !== null) {
        for (var i = 0; i < segments.length; i++) replaced.push(segments[i]);
        renderWhole(view, replaced, metadata);
      } else answer.push(segments);
      if (track(segments)) livePanel();
    },
    onReplace: function (segments) {
      // message_replace (e.g. output moderation): the answer shown so far is replaced.
      replaced = (segments || []).slice();
      answer.cancel();
      citations = [];
      seen = new Set();
      gotText = true;
      view.status.textContent = "";
      renderWhole(view, replaced, metadata);
      track(replaced);
      livePanel();
    },
    onDone: function (result) {
      finish(result, null);
    },
    onError: function (err) {
      if (!finished && err && err.code !== "aborted") {
        view.status.textContent = errorText(err);
        view.status.classList.add("is-error");
      }
    },
  }).then(
    function (result) {
      finish(result, null);
    },
    function (err) {
      if (err && err.name === "AbortError") {
        finish(null, { code: "aborted" });
        return;
      }
      finish(null, err || { code: "network_error" });
    }
  );
}

function stop() {
  if (state.controller) state.controller.abort();
}

// ------------------------------------------------------------------ restore after reload

function apiGet(path) {
  var headers = { Accept: "application/json" };
  if (state.key) headers.Authorization = "Bearer " + state.key;
  return window.fetch(path, { headers: headers }).then(function (res) {
    if (!res.ok) {
      var error = new Error("HTTP " + res.status);
      error.status = res.status;
      throw error;
    }
    return res.json();
  });
}

// The conversation of this identity, from the server (Dify's GET /v1/messages, and the
// chunk metadata of each answer through Plan B, GET /v1/conversations/{id}/chunk-metadata):
// questions, answers with their superscripts and their source panels.
function restoreConversation() {
  var id = storageGet(conversationKey());
  if (!id) return Promise.resolve(false);
  var query = "user=" + encodeURIComponent(state.user);
  var cid = encodeURIComponent(id);
  return Promise.all([
    apiGet("/v1/messages?conversation_id=" + cid + "&limit=100&" + query),
    apiGet("/v1/conversations/" + cid + "/chunk-metadata?" + query).catch(function () {
      return { data: [] };
    }),
  ]).then(
    function (parts) {
      var messages = (parts[0] && parts[0].data) || [];
      var byMessage = new Map();
      ((parts[1] && parts[1].data) || []).forEach(function (entry) {
        if (entry && entry.message_id) byMessage.set(String(entry.message_id), entry);
      });
      if (!messages.length) return false;
      state.conversationId = id;
      $("empty").hidden = true;
      messages.forEach(function (message) {
        restoreMessage(message, byMessage.get(String(message.id)));
      });
      scrollToEnd(true);
      return true;
    },
    function (err) {
      if (err && err.status === 404) storageSet(conversationKey(), "");
      return false;
    }
  );
}

function restoreMessage(message, entry) {
  var chunks = entry && entry.chunk_metadata;
  var question = typeof message.query === "string" ? message.query : "";
  if (question) addUserMessage(question);
  var view = addBotMessage("");
  view.root.setAttribute("data-restored", "true");
  var metadata = new Map();
  (Array.isArray(chunks) ? chunks : []).forEach(function (chunk) {
    if (chunk && chunk.id !== undefined) metadata.set(String(chunk.id), chunk);
  });
  var parser = new CitationParser({ knownIds: metadata.size ? Array.from(metadata.keys()) : null, maxHold: 64 });
  var text = typeof message.answer === "string" ? message.answer : "";
  var segments = parser.feed(text).concat(parser.close());
  renderWhole(view, segments, metadata);
  renderPanel(view.panel, buildPanel(parser.citations, metadata));
  applyVerification(view, verificationOf(entry || null), metadata);
  if (message.failed || message.status === "error") {
    view.status.textContent = "这条回答当时没有完成";
    view.status.classList.add("is-incomplete");
  } else if (message.gcite_status === "stopped") {
    view.status.textContent = TEXT.stopped;
  } else {
    view.status.hidden = true;
  }
  if (text) addActions(view, question, segments);
  view.root.setAttribute("data-done", "true");
}

// ------------------------------------------------------------------ identity, setup

function addDivider(text) {
  var box = $("messages");
  if (!box.querySelector(".msg")) return;
  box.appendChild(el("div", "divider", text));
  scrollToEnd(true);
}

function newConversation() {
  state.queued = "";
  stop();
  remember("");
  var box = $("messages");
  Array.prototype.slice.call(box.querySelectorAll(".msg, .divider")).forEach(function (node) {
    box.removeChild(node);
  });
  $("empty").hidden = false;
}

// The selected identity's hint (who it is, what it may read), as visible text.
function showIdentityHint(identity) {
  var hint = $("identity-hint");
  hint.textContent = identity && identity.hint ? identity.label + "：" + identity.hint : "";
  hint.hidden = !hint.textContent;
}

function setupIdentity() {
  var identities = state.config.identities || [];
  if (identities.length) {
    var select = $("identity");
    identities.forEach(function (identity, i) {
      var option = el("option", "", identity.label);
      option.value = String(i);
      if (identity.hint) option.title = identity.hint;
      select.appendChild(option);
    });
    var saved = storageGet("gcite.identity");
    var index = 0;
    identities.forEach(function (identity, i) {
      if (identity.label === saved) index = i;
    });
    select.value = String(index);
    state.key = identities[index].key;
    state.identityLabel = identities[index].label;
    $("identity-wrap").hidden = false;
    showIdentityHint(identities[index]);
    select.addEventListener("change", function () {
      var chosen = identities[Number(select.value)];
      state.key = chosen.key;
      state.identityLabel = chosen.label;
      state.conversationId = "";
      storageSet("gcite.identity", chosen.label);
      showIdentityHint(chosen);
      addDivider(TEXT.identitySwitched.replace("{label}", chosen.label));
    });
  } else {
    var input = $("api-key");
    input.value = storageGet("gcite.key");
    state.key = input.value;
    $("api-key-wrap").hidden = false;
    input.addEventListener("change", function () {
      state.key = input.value.trim();
      state.conversationId = "";
      storageSet("gcite.key", state.key);
    });
  }
}

function setupSuggestions() {
  var box = $("suggestions");
  (state.config.suggestions || []).forEach(function (question) {
    var button = el("button", "suggestion", question);
    button.type = "button";
    button.addEventListener("click", function () {
      ask(question);
    });
    box.appendChild(button);
  });
}

function setupComposer() {
  var input = $("input");
  var hint = $("input-hint");
  var max = Number(input.getAttribute("maxlength")) || 2000;
  // A paste longer than the limit is cut by the browser: say so.
  input.addEventListener("paste", function (evt) {
    var pasted = evt.clipboardData ? evt.clipboardData.getData("text") : "";
    var kept = input.value.length - (input.selectionEnd - input.selectionStart);
    if (kept + pasted.length > max) {
      hint.textContent = "问题最多 " + max + " 个字，粘贴的内容超出的部分（" + (kept + pasted.length - max) + " 个字）没有放进输入框";
      hint.hidden = false;
    }
  });
  input.addEventListener("input", function () {
    if (!hint.hidden && input.value.length < max) hint.hidden = true;
  });
  function grow() {
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight + 2, 120) + "px";
  }
  input.addEventListener("input", grow);
  input.addEventListener("keydown", function (evt) {
    if (evt.key === "Enter" && !evt.shiftKey && !evt.isComposing) {
      evt.preventDefault();
      send();
    }
  });
  // Enter sends; while an answer streams it queues the question (sent when that answer
  // ends). The button is 发送 when idle and 停止 while streaming.
  function send() {
    var text = input.value;
    if (!text.trim()) return;
    input.value = "";
    grow();
    if (state.busy) queueQuestion(text);
    else ask(text);
  }
  function submit(evt) {
    if (evt) evt.preventDefault();
    if (state.busy) stop();
    else send();
  }
  $("composer").addEventListener("submit", submit);
}

function loadConfig() {
  return window
    .fetch("/page-config.json", { headers: { Accept: "application/json" } })
    .then(function (res) {
      return res.ok ? res.json() : {};
    })
    .catch(function () {
      return {};
    });
}

function init() {
  $("new-chat").appendChild(icon("plus"));
  $("empty-logo").appendChild(icon("quote"));
  setBusy(false);
  state.user = endUserId();
  setupSheet();
  setupComposer();
  setupFollow();
  setupCitations();
  $("new-chat").addEventListener("click", newConversation);
  loadConfig().then(function (config) {
    state.config = {
      title: typeof config.title === "string" ? config.title : "",
      suggestions: Array.isArray(config.suggestions) ? config.suggestions : [],
      identities: Array.isArray(config.identities) ? config.identities : [],
    };
    if (state.config.title) {
      $("title").textContent = state.config.title;
      document.title = state.config.title;
    }
    setupIdentity();
    setupSuggestions();
    return restoreConversation().then(null, function () {
      return false;
    });
  }).then(function () {
    document.body.setAttribute("data-ready", "true");
  });
}

init();
