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
} from "/static/client/index.js";

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

// Append parser segments to the answer element: text as text nodes (newlines as <br>),
// citations as <sup class="g-cite" data-raw-id data-idx> (mobile design document §4.3).
function appendSegments(target, segments) {
  for (var i = 0; i < segments.length; i++) {
    var seg = segments[i];
    if (typeof seg.text === "string") {
      var lines = seg.text.split("\n");
      for (var j = 0; j < lines.length; j++) {
        if (j > 0) target.appendChild(document.createElement("br"));
        if (lines[j]) target.appendChild(document.createTextNode(lines[j]));
      }
    } else if (seg.cite !== undefined) {
      var last = target.lastChild;
      var adjacent = last && last.nodeType === 1 && last.classList.contains("g-cite");
      var sup = el("sup", adjacent ? "g-cite g-cite-adjacent" : "g-cite", seg.idx);
      sup.setAttribute("data-raw-id", String(seg.cite));
      sup.setAttribute("data-idx", String(seg.idx));
      target.appendChild(sup);
    }
  }
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
    row.appendChild(texts);
    row.addEventListener("click", function () {
      openSheet(chunk, item.idx);
    });
    panel.list.appendChild(row);
  });
}

// ------------------------------------------------------------------ sheet (§5.3)

var sheetDrag = null;

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
  $("sheet-text").textContent = chunk.content || "（该来源没有可显示的正文片段）";
  $("sheet-body").scrollTop = 0;

  var url = chunkUrl(chunk);
  var link = safeUrl(url);
  $("office-notice").hidden = !(type === "rag" && url && isOfficeUrl(url));
  var foot = $("sheet-foot");
  while (foot.firstChild) foot.removeChild(foot.firstChild);
  var button;
  if (link) {
    button = el("a", "btn-primary sheet-open");
    button.href = link;
    button.target = "_blank";
    button.rel = "noopener noreferrer";
    button.appendChild(document.createTextNode("完整原文"));
    button.appendChild(icon("external"));
  } else {
    button = el("button", "btn-primary sheet-open", "完整原文");
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

function addBotMessage() {
  var msg = el("div", "msg msg-bot");
  var bubble = el("div", "bubble");
  var text = el("p", "answer-text");
  var status = el("div", "answer-status", "正在检索资料…");
  bubble.appendChild(text);
  bubble.appendChild(status);
  msg.appendChild(bubble);
  var panel = createPanel();
  msg.appendChild(panel.root);
  $("messages").appendChild(msg);
  scrollToEnd(true);
  return { root: msg, text: text, status: status, panel: panel };
}

function errorText(err) {
  if (!err) return "出错了，请稍后重试";
  var status = err.status;
  if (status === 401 || status === 403) return "API Key 无效或无权访问，请检查身份设置";
  if (status === 429) return "请求过于频繁，请稍后再试";
  // Transport failures: the client's message carries the browser's own (English) detail,
  // e.g. "Failed to fetch"; show a Chinese sentence instead.
  if (err.code === "network_error") return "无法连接服务，请检查网络后重试";
  if (err.code === "stream_interrupted") return "出错了：回答中断，请检查网络后重试";
  if (err.code === "timeout") return "出错了：请求超时，请稍后重试";
  if (err.name === "TypeError") return "无法连接服务，请检查网络后重试";
  var message = err.message ? String(err.message) : "";
  return "出错了：" + (message || "请稍后重试");
}

// After a failed send: give the question back to the input (unless the user is already
// typing another one) and add a 重试 button that sends it again.
function offerRetry(view, query, error, gotText) {
  var input = $("input");
  if (!gotText && !input.value.trim()) {
    input.value = query;
    input.dispatchEvent(new Event("input"));
  }
  if (error.status === 401 || error.status === 403) return;
  var button = el("button", "answer-retry", "重试");
  button.type = "button";
  button.addEventListener("click", function () {
    if (state.busy) return;
    if (button.parentNode) button.parentNode.removeChild(button);
    if (input.value.trim() === query) {
      input.value = "";
      input.dispatchEvent(new Event("input"));
    }
    ask(query);
  });
  view.status.appendChild(document.createTextNode(" "));
  view.status.appendChild(button);
}

function setBusy(busy) {
  state.busy = busy;
  var send = $("send");
  while (send.firstChild) send.removeChild(send.firstChild);
  send.appendChild(icon(busy ? "stop" : "send"));
  send.classList.toggle("is-stop", busy);
  send.setAttribute("aria-label", busy ? "停止" : "发送");
  send.title = busy ? "停止" : "发送";
}

function ask(query) {
  query = query.trim();
  if (!query || state.busy) return;
  $("empty").hidden = true;
  addUserMessage(query);
  var view = addBotMessage();
  var metadata = new Map();
  var citations = [];
  var seen = new Set();
  var gotText = false;
  var controller = typeof AbortController === "function" ? new AbortController() : null;
  state.controller = controller;
  setBusy(true);

  function livePanel() {
    renderPanel(view.panel, buildPanel(citations, metadata));
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

  function finish(result, err) {
    if (finished) return;
    finished = true;
    setBusy(false);
    state.controller = null;
    var error = err || (result && result.error) || null;
    if (result) {
      if (result.conversationId) state.conversationId = result.conversationId;
      if (result.panel) renderPanel(view.panel, result.panel);
    }
    if (error && error.code === "aborted") {
      view.status.hidden = false;
      view.status.textContent = "已停止生成";
    } else if (error) {
      view.status.textContent = errorText(error);
      view.status.classList.add("is-error");
      offerRetry(view, query, error, gotText);
    } else if (!gotText) {
      view.status.textContent = "（没有回答内容）";
    } else {
      view.status.hidden = true;
    }
    view.root.setAttribute("data-done", "true");
    scrollToEnd(false);
  }

  streamChat({
    url: "/v1/chat-messages",
    body: body,
    headers: headers,
    fetch: window.fetch.bind(window),
    signal: controller ? controller.signal : undefined,
    onMetadata: function (chunks) {
      metadata = new Map();
      (chunks || []).forEach(function (chunk) {
        if (chunk && chunk.id !== undefined) metadata.set(String(chunk.id), chunk);
      });
      if (!gotText) view.status.textContent = "正在生成回答…";
      livePanel();
    },
    onSegments: function (segments) {
      if (!segments || !segments.length) return;
      if (!gotText) {
        gotText = true;
        view.status.textContent = "";
      }
      appendSegments(view.text, segments);
      var changed = false;
      segments.forEach(function (seg) {
        if (seg.cite !== undefined && !seen.has(String(seg.cite))) {
          seen.add(String(seg.cite));
          citations.push([String(seg.cite), seg.idx]);
          changed = true;
        }
      });
      if (changed) livePanel();
      scrollToEnd(false);
    },
    onReplace: function (segments) {
      // message_replace (e.g. output moderation): the answer shown so far is replaced.
      while (view.text.firstChild) view.text.removeChild(view.text.firstChild);
      citations = [];
      seen = new Set();
      gotText = true;
      view.status.textContent = "";
      appendSegments(view.text, segments || []);
      (segments || []).forEach(function (seg) {
        if (seg.cite !== undefined && !seen.has(String(seg.cite))) {
          seen.add(String(seg.cite));
          citations.push([String(seg.cite), seg.idx]);
        }
      });
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
        finish(null, null);
        view.status.hidden = false;
        view.status.textContent = "已停止生成";
        return;
      }
      finish(null, err || { message: "网络错误" });
    }
  );
}

function stop() {
  if (state.controller) state.controller.abort();
}

// ------------------------------------------------------------------ identity, setup

function addDivider(text) {
  var box = $("messages");
  if (!box.querySelector(".msg")) return;
  box.appendChild(el("div", "divider", text));
  scrollToEnd(true);
}

function newConversation() {
  stop();
  state.conversationId = "";
  var box = $("messages");
  Array.prototype.slice.call(box.querySelectorAll(".msg, .divider")).forEach(function (node) {
    box.removeChild(node);
  });
  $("empty").hidden = false;
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
    select.addEventListener("change", function () {
      var chosen = identities[Number(select.value)];
      state.key = chosen.key;
      state.identityLabel = chosen.label;
      state.conversationId = "";
      storageSet("gcite.identity", chosen.label);
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
      $("composer").requestSubmit ? $("composer").requestSubmit() : submit(evt);
    }
  });
  function submit(evt) {
    if (evt) evt.preventDefault();
    if (state.busy) {
      stop();
      return;
    }
    var text = input.value;
    if (!text.trim()) return;
    input.value = "";
    grow();
    ask(text);
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
    document.body.setAttribute("data-ready", "true");
  });
}

init();
