// G-Cite H5 page (mobile design document §4–§6), built on the JavaScript client.
//
// Safety rule of this file: every string that comes from a document, the model or the
// server is put into the DOM with textContent / createTextNode, never innerHTML; only
// URLs accepted by safeUrl() (http: / https:) ever become links.

import {
  streamChat,
  buildPanel,
  safeUrl,
  subtitleOf,
  isOfficeUrl,
  CitationParser,
  MarkdownStream,
  appendTree,
  copyText,
  createMarkdownIt,
  renderMarkdownTree,
  splitReasoning,
  WEAK_SUPPORT_TEXT,
  chunkSupport,
  supportParts,
  verificationOf,
  weakIds,
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
    var title = chunk && chunk.document_title ? String(chunk.document_title) : "";
    return "引用 " + idx + (title ? "：" + title : "");
  };
}

// Reasoning (§4a) above the answer, collapsed: <details><summary>思考过程</summary>.
function showReasoning(view, text) {
  if (!text) return;
  if (!view.reasoning) {
    var box = el("details", "reasoning");
    box.appendChild(el("summary", "reasoning-summary", "思考过程"));
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

AnswerView.prototype.paint = function () {
  var u = this.stream.update();
  if (!u.changed) return;
  if (u.commit.length) appendTree(u.commit, this.view.blocks, document);
  var tail = this.view.tail;
  while (tail.firstChild) tail.removeChild(tail.firstChild);
  appendTree(u.tail, tail, document);
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
  if (u.commit.length) appendTree(u.commit, this.view.blocks, document);
  var f = this.stream.end({ incomplete: incomplete });
  var tail = this.view.tail;
  while (tail.firstChild) tail.removeChild(tail.firstChild);
  if (f.replace) {
    var blocks = this.view.blocks;
    while (blocks.firstChild) blocks.removeChild(blocks.firstChild);
    appendTree(f.replace, blocks, document);
  } else appendTree(f.commit, this.view.blocks, document);
  showReasoning(this.view, this.stream.reasoning);
};

// A whole answer at once (message_replace, a restored conversation).
function renderWhole(view, segments, metadata) {
  var parts = splitReasoning(segments);
  while (view.blocks.firstChild) view.blocks.removeChild(view.blocks.firstChild);
  while (view.tail.firstChild) view.tail.removeChild(view.tail.firstChild);
  appendTree(renderMarkdownTree(parts.answer, { md: md, label: citeLabel(metadata) }), view.blocks, document);
  showReasoning(view, parts.reasoning);
}

// ------------------------------------------------------------------ source panel

function chunkType(chunk) {
  return chunk && chunk.source_type === "web" ? "web" : "rag";
}

function chunkUrl(chunk) {
  if (!chunk) return "";
  var url = chunk.url || chunk.source_file_url || "";
  return typeof url === "string" ? url : "";
}

function createPanel() {
  var root = el("div", "citation-panel");
  root.hidden = true;
  var head = el("button", "panel-head");
  head.type = "button";
  head.setAttribute("aria-expanded", "false");
  head.appendChild(icon("file"));
  var count = el("span", "panel-count", "引用来源（0）");
  var toggle = el("span", "panel-toggle");
  var toggleText = el("span", "panel-toggle-text", "展开");
  toggle.appendChild(toggleText);
  toggle.appendChild(icon("chevron"));
  head.appendChild(count);
  head.appendChild(toggle);
  var list = el("div", "panel-list");
  list.hidden = true;
  root.appendChild(head);
  root.appendChild(list);
  head.addEventListener("click", function () {
    var open = list.hidden;
    list.hidden = !open;
    head.setAttribute("aria-expanded", open ? "true" : "false");
    toggleText.textContent = open ? "收起" : "展开";
  });
  return { root: root, count: count, list: list, signature: "" };
}

function renderPanel(panel, items) {
  var rows = items.filter(function (item) {
    return item && item.chunk;
  });
  var signature = rows
    .map(function (item) {
      return item.idx + ":" + item.rawId;
    })
    .join(",");
  if (signature === panel.signature) return;
  panel.signature = signature;
  panel.root.hidden = rows.length === 0;
  panel.count.textContent = "引用来源（" + rows.length + "）";
  while (panel.list.firstChild) panel.list.removeChild(panel.list.firstChild);
  // Rows that would look identical (same title and subtitle) get a visible hint of what
  // differs: the passage number and the start of the passage.
  var looks = new Map();
  rows.forEach(function (item) {
    var key = (item.chunk.document_title || "") + "\u0000" + subtitleOf(item.chunk);
    looks.set(key, (looks.get(key) || 0) + 1);
  });
  rows.forEach(function (item) {
    var chunk = item.chunk;
    var type = chunkType(chunk);
    var row = el("button", "g-cite-item");
    row.type = "button";
    row.setAttribute("data-raw-id", String(item.rawId));
    row.setAttribute("data-idx", String(item.idx));
    row.setAttribute("data-source-type", type);
    var iconBox = el("span", "g-cite-item-icon");
    iconBox.appendChild(icon(type === "web" ? "globe" : "file"));
    row.appendChild(iconBox);
    row.appendChild(el("span", "g-cite-item-idx", item.idx));
    var texts = el("span", "g-cite-item-texts");
    texts.appendChild(el("span", "g-cite-item-title", chunk.document_title || "未命名来源"));
    var subtitle = subtitleOf(chunk);
    if (subtitle) texts.appendChild(el("span", "g-cite-item-subtitle", subtitle));
    if (looks.get((chunk.document_title || "") + "\u0000" + subtitle) > 1) {
      texts.appendChild(el("span", "g-cite-item-hint", passageHint(chunk)));
    }
    row.appendChild(texts);
    row.setAttribute("aria-label", "来源 " + item.idx + "：" + (chunk.document_title || "未命名来源") + (subtitle ? "，" + subtitle : ""));
    row.addEventListener("click", function () {
      openSheet(chunk, item.idx);
    });
    panel.list.appendChild(row);
  });
}

function passageHint(chunk) {
  var parts = [];
  var position = Number(chunk.segment_position);
  if (position > 0 && position < 1e6) parts.push("第 " + Math.floor(position) + " 段");
  var content = typeof chunk.content === "string" ? chunk.content.replace(/\s+/g, " ").trim() : "";
  if (content) parts.push("“" + (content.length > 28 ? content.slice(0, 28) + "…" : content) + "”");
  return parts.join(" · ") || "来源编号 " + String(chunk.id);
}

// ------------------------------------------------------------------ sheet (§5.3)

var sheetDrag = null;

// The citation verifier's report of each answer (message_end.metadata.gcite_verification),
// per cited chunk object; read through the client's verification.js, which the
// mini program uses too.
var reportOf = new WeakMap();

// The sheet text with the supporting sentence highlighted and scrolled to; a weak
// citation gets a line saying so. Text only (never HTML).
function showSupport(chunk) {
  var box = $("sheet-text");
  var weak = $("sheet-weak");
  while (box.firstChild) box.removeChild(box.firstChild);
  var content = typeof chunk.content === "string" ? chunk.content : "";
  var support = chunkSupport(reportOf.get(chunk) || null, chunk.id, content);
  weak.hidden = !support.weak;
  weak.textContent = WEAK_SUPPORT_TEXT;
  $("sheet-body").scrollTop = 0;
  if (!content) {
    box.textContent = "（该来源没有可显示的正文片段）";
    return;
  }
  var mark = null;
  supportParts(content, support.span).forEach(function (part) {
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

// After message_end: remember the report for each cited chunk; superscripts and panel rows
// of a chunk the verifier found no support in are marked weak.
function applyVerification(root, report, metadata) {
  metadata.forEach(function (chunk) {
    if (chunk && typeof chunk === "object") reportOf.set(chunk, report);
  });
  weakIds(report).forEach(function (id) {
    var sel = '[data-raw-id="' + id.replace(/["\\]/g, "") + '"]';
    Array.prototype.forEach.call(root.querySelectorAll("sup.g-cite" + sel + ", .g-cite-item" + sel), function (node) {
      node.classList.add("is-weak");
      node.setAttribute("title", WEAK_SUPPORT_TEXT);
    });
  });
}

function openSheet(chunk, idx) {
  var type = chunkType(chunk);
  var sheet = $("sheet");
  var head = $("sheet-head");
  sheet.setAttribute("data-source-type", type);
  sheet.setAttribute("data-idx", String(idx));
  head.className = "sheet-head is-" + type;
  var iconBox = $("sheet-icon");
  while (iconBox.firstChild) iconBox.removeChild(iconBox.firstChild);
  iconBox.appendChild(icon(type === "web" ? "globe" : "file"));
  $("sheet-tag").textContent = type === "web" ? "公网" : "知识库";
  $("sheet-title").textContent = chunk.document_title || "未命名来源";
  var subtitle = subtitleOf(chunk);
  $("sheet-subtitle").textContent = subtitle;
  $("sheet-subtitle").hidden = !subtitle;
  showSupport(chunk);

  var url = chunkUrl(chunk);
  var link = safeUrl(url);
  $("office-notice").hidden = !(type === "rag" && url && isOfficeUrl(url));
  var foot = $("sheet-foot");
  while (foot.firstChild) foot.removeChild(foot.firstChild);
  var button;
  if (link) {
    button = el("a", "btn-primary sheet-open is-" + type);
    button.href = link;
    button.target = "_blank";
    button.rel = "noopener noreferrer";
    button.appendChild(document.createTextNode("完整原文"));
    button.appendChild(icon("external"));
  } else {
    button = el("button", "btn-primary sheet-open is-" + type, "完整原文");
    button.type = "button";
    button.disabled = true;
    button.setAttribute("aria-disabled", "true");
  }
  foot.appendChild(button);
  if (!link) {
    var hint = url ? "原文链接不是网页地址，无法打开" : "该来源没有原文链接";
    foot.appendChild(el("div", "sheet-hint", hint));
  }
  $("mask").hidden = false;
  sheet.hidden = false;
  sheet.style.transform = "";
}

function closeSheet() {
  var sheet = $("sheet");
  sheet.hidden = true;
  sheet.style.transform = "";
  sheet.classList.remove("is-dragging");
  $("mask").hidden = true;
  sheetDrag = null;
}

function setupSheet() {
  var sheet = $("sheet");
  $("mask").addEventListener("click", closeSheet);
  document.addEventListener("keydown", function (evt) {
    if (evt.key === "Escape" && !sheet.hidden) closeSheet();
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

function scrollToEnd(force) {
  var box = $("messages");
  var near = box.scrollHeight - box.scrollTop - box.clientHeight < 120;
  if (force || near) box.scrollTop = box.scrollHeight;
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
  var status = el("div", "answer-status", statusText === undefined ? "正在检索资料…" : statusText);
  status.setAttribute("role", "status");
  bubble.appendChild(text);
  bubble.appendChild(status);
  msg.appendChild(bubble);
  var panel = createPanel();
  msg.appendChild(panel.root);
  $("messages").appendChild(msg);
  scrollToEnd(true);
  return { root: msg, bubble: bubble, text: text, blocks: blocks, tail: tail, status: status, panel: panel, reasoning: null };
}

// Every error the user can see, in Chinese: the server's and the model provider's
// messages are English (Dify's wording), so they are mapped by code and status and
// only shown as they are when they are Chinese.
var ERROR_CODES = {
  network_error: "无法连接服务，请检查网络后重试",
  stream_interrupted: "回答中断，请检查网络后重试",
  timeout: "请求超时，请稍后重试",
  not_event_stream: "服务返回的内容无法识别，请稍后重试",
  frame_too_large: "服务返回的数据异常，请稍后重试",
  invalid_param: "请求参数有误，请刷新页面后重试",
  request_too_large: "问题太长了，请精简后再试",
  unauthorized: "API Key 无效或无权访问，请检查身份设置",
  not_found: "对话不存在或已过期，请开始新对话",
  method_not_allowed: "服务不支持此请求，请刷新页面后重试",
  bad_request: "请求有误，请刷新页面后重试",
  completion_request_error: "模型服务暂时不可用，请稍后重试",
  provider_not_initialize: "模型服务未配置，请联系管理员",
  provider_quota_exceeded: "模型服务额度已用完，请联系管理员",
  model_currently_not_support: "当前模型不可用，请联系管理员",
  internal_server_error: "服务内部错误，请稍后重试",
  http_error: "服务暂时不可用，请稍后重试",
  stream_error: "回答数据异常，请稍后重试",
};

function isChinese(text) {
  return /[\u4e00-\u9fff]/.test(text) && !/[A-Za-z]{3,}/.test(text);
}

function errorText(err) {
  if (!err) return "出错了，请稍后重试";
  var status = err.status;
  if (status === 401 || status === 403) return "出错了：" + ERROR_CODES.unauthorized;
  if (status === 429) return "出错了：请求过于频繁，请稍后再试";
  if (err.code === "network_error" || err.name === "TypeError") return ERROR_CODES.network_error;
  var known = err.code && Object.prototype.hasOwnProperty.call(ERROR_CODES, err.code) ? ERROR_CODES[err.code] : "";
  if (known) return "出错了：" + known;
  var message = err.message ? String(err.message) : "";
  if (message && isChinese(message)) return "出错了：" + message;
  if (status >= 500) return "出错了：服务暂时不可用，请稍后重试";
  if (status >= 400) return "出错了：请求未被接受，请稍后重试";
  return "出错了，请稍后重试";
}

function retryButton(query, label) {
  var button = el("button", "answer-retry", label || "重试");
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
function offerRetry(view, query, error, gotText) {
  var input = $("input");
  if (!gotText && !input.value.trim()) {
    input.value = query;
    input.dispatchEvent(new Event("input"));
  }
  if (error && (error.status === 401 || error.status === 403)) return;
  var button = retryButton(query);
  button.addEventListener("click", function () {
    if (button.parentNode) button.parentNode.removeChild(button);
  });
  view.status.appendChild(document.createTextNode(" "));
  view.status.appendChild(button);
}

// Copy and retry under a finished answer.
function addActions(view, query, segments) {
  var bar = el("div", "answer-actions");
  var copy = el("button", "answer-copy", "复制");
  copy.type = "button";
  copy.setAttribute("aria-label", "复制回答");
  copy.addEventListener("click", function () {
    var text = copyText(segments);
    var done = function () {
      copy.textContent = "已复制";
      setTimeout(function () {
        copy.textContent = "复制";
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
  var again = retryButton(query, "重新回答");
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
    if (verification) applyVerification(view.root, verification, metadata);
    view.status.classList.remove("is-error", "is-incomplete");
    if (aborted) {
      view.status.hidden = false;
      view.status.textContent = "已停止生成";
    } else if (error) {
      view.status.textContent = errorText(error);
      view.status.classList.add("is-error");
      offerRetry(view, query, error, gotText);
    } else if (incomplete) {
      view.root.setAttribute("data-incomplete", "true");
      view.status.textContent = "回答不完整：连接在回答结束前中断";
      view.status.classList.add("is-incomplete");
      offerRetry(view, query, null, gotText);
    } else if (!gotText) {
      view.status.textContent = "（没有回答内容）";
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
      if (!gotText) view.status.textContent = "正在生成回答…";
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
        if (entry && entry.message_id) byMessage.set(String(entry.message_id), entry.chunk_metadata || []);
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

function restoreMessage(message, chunks) {
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
  if (message.failed || message.status === "error") {
    view.status.textContent = "这条回答当时没有完成";
    view.status.classList.add("is-incomplete");
  } else if (message.gcite_status === "stopped") {
    view.status.textContent = "已停止生成";
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
      addDivider("已切换身份：" + chosen.label + "（新对话）");
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
