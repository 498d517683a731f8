/**
 * <g-cite-answer>: one G-Cite answer in a WeChat mini program — the streamed
 * text with superscripts, the source panel and the half-screen sheet (mobile
 * design document §3–§6). Built on the JavaScript client (clients/js/src,
 * copied in as CommonJS by clients/miniprogram/scripts/build-client.mjs):
 * wxStreamChat (wx.request enableChunked + onChunkReceived), the stream
 * parser and idMap, buildPanel and the retriever_resources fallback, and the
 * Markdown renderer (markdown.js MarkdownStream over the vendored markdown-it,
 * copied to lib/markdown-it/).
 *
 * Properties: query, service-url, api-key, user, conversation-id, inputs,
 * autostart (default true: ask `query` when attached), web-view-page,
 * web-view-domains, timeout (ms).
 * Methods (selectComponent): ask(query?), stop(), retry().
 * Events: start {query}; finish {status, conversationId, messageId, error,
 * citations, sources, weak} (weak: raw ids the citation verifier found no
 * support for; superseded: true when a new question replaced the answer).
 *
 * status: idle | waiting | generating | done | empty | stopped | error | incomplete
 *
 * Rendering is batched like the H5 page's: the stream's callbacks only record
 * what changed; one setData per frame (the scheduler's tick, FRAME_MS by
 * default) renders it, so the work per delta does not grow with the answer.
 * Tests inject their own scheduler with setScheduler({later, cancel}).
 */
var client = require('./lib/gcite-client/index.js');
var view = require('./view.js');

var CLOSE_DRAG_PX = 80; // drag the sheet down this far to close it
var FRAME_MS = 16; // one render per frame at most while an answer streams
var TEXT = client.TEXT;

/** The default scheduler: a timer one frame away. */
function frameScheduler() {
  return {
    later: function (fn) {
      return setTimeout(fn, FRAME_MS);
    },
    cancel: function (handle) {
      clearTimeout(handle);
    },
  };
}

Component({
  options: { addGlobalClass: false },

  properties: {
    query: { type: String, value: '' },
    serviceUrl: { type: String, value: '' },
    apiKey: { type: String, value: '' },
    user: { type: String, value: '' },
    conversationId: { type: String, value: '' },
    inputs: { type: Object, value: {} },
    autostart: { type: Boolean, value: true },
    webViewPage: { type: String, value: '' },
    webViewDomains: { type: Array, value: [] },
    timeout: { type: Number, value: 300000 },
  },

  data: {
    blocks: [], // committed Markdown blocks, one rich-text node list each (sent once)
    tail: [], // the block still being written (rich-text nodes, replaced per render)
    reasoning: '',
    reasoningOpen: false,
    status: 'idle',
    statusText: '',
    busy: false,
    canRetry: false,
    retryText: '重试',
    weakLegend: '',
    answerNotice: '',
    incomplete: false,
    panelRows: [],
    panelOpen: false,
    sheet: null,
    sheetOpen: false,
    sheetOffset: 0,
    sheetScrollTo: '', // id of the supporting sentence in the sheet (scroll-into-view)
  },

  lifetimes: {
    attached: function () {
      this._seq = 0;
      this._task = null;
      this._panel = [];
      this._scheduler = this._scheduler || frameScheduler();
      this._timer = null;
      this._pending = null;
      if (this.data.autostart && this.data.query) this.ask(this.data.query);
    },
    detached: function () {
      this.stop();
    },
  },

  methods: {
    /**
     * Use `scheduler` ({later(fn) -> handle, cancel(handle)}) for the batched
     * renders (tests drive the frames themselves).
     */
    setScheduler: function (scheduler) {
      this._scheduler = scheduler;
    },

    /**
     * Ask `query` (default: the query property). A running answer is superseded:
     * its callbacks are cut off first (nothing it still delivers reaches the new
     * answer), its request is aborted, and it finishes as "stopped"
     * ({superseded: true}) before the new answer starts. When a `finish`
     * listener asks again meanwhile, that later question wins.
     */
    ask: function (query) {
      var q = String(query === undefined || query === null ? this.data.query : query).trim();
      if (q === '') return;
      var seq = this._supersede();
      if (seq !== this._seq) return; // a finish listener asked another question
      this._query = q;
      var self = this;
      this._cancelRender();
      this._segments = [];
      this._reasoningRaw = '';
      this._dirty = { md: false, reasoning: false, panel: false, replaced: false };
      this._metadata = new Map(); // chunkMetadataMap, new for every answer (seed §3.3)
      this._citations = [];
      this._seen = new Set();
      this._gotText = false;
      this._sawEnd = false;
      this._finished = false;
      this._panel = [];
      this._md = view.markdownStream();
      this._blockCount = 0;
      this._trees = []; // the renderer's tree of each block (to mark weak citations at the end)
      this._report = null; // the citation verifier's report (message_end.metadata.gcite_verification)
      this._replaced = null;
      this.setData({
        blocks: [],
        tail: [],
        reasoning: '',
        reasoningOpen: false,
        status: 'waiting',
        statusText: TEXT.searching,
        busy: true,
        canRetry: false,
        retryText: TEXT.retry,
        weakLegend: '',
        answerNotice: '',
        incomplete: false,
        panelRows: [],
        panelOpen: false,
        sheet: null,
        sheetOpen: false,
        sheetOffset: 0,
        sheetScrollTo: '',
      });
      this.triggerEvent('start', { query: q });
      var base = String(this.data.serviceUrl || '').replace(/\/+$/, '');
      if (base === '') {
        this._finish({ error: { code: 'config', status: 0, message: '未配置服务地址（service-url）' } }, seq);
        return;
      }
      var header = {};
      if (this.data.apiKey) header.Authorization = 'Bearer ' + this.data.apiKey;
      var live = function (fn) {
        return function (arg) {
          if (seq === self._seq && !self._finished) fn.call(self, arg);
        };
      };
      try {
        this._task = client.wxStreamChat(wx, {
          url: base + '/v1/chat-messages',
          header: header,
          timeout: this.data.timeout,
          body: {
            query: q,
            inputs: this.data.inputs || {},
            user: this.data.user || 'miniprogram-user',
            conversation_id: this.data.conversationId || '',
            response_mode: 'streaming',
          },
          onMetadata: live(this._onMetadata),
          onSegments: live(this._onSegments),
          onReplace: live(this._onReplace),
          onEvent: live(this._onEvent),
          onDone: function (result) {
            self._finish(result, seq);
          },
        });
      } catch (e) {
        this._finish({ error: { code: 'network_error', status: 0, message: String(e && e.message ? e.message : e) } }, seq);
      }
    },

    // Cut the running answer off (if any) and return the sequence number of the next one.
    _supersede: function () {
      var task = this._task;
      var running = Boolean(task) && !this._finished;
      var seq = ++this._seq; // from here on the old stream's callbacks are ignored
      this._task = null;
      if (!running) return seq;
      this._finished = true;
      task.abort(); // its onDone runs _finish with the old number: ignored
      var result = task.stream && typeof task.stream.end === 'function' ? task.stream.end() : null;
      this.triggerEvent('finish', {
        status: 'stopped',
        superseded: true,
        conversationId: result && result.conversationId ? result.conversationId : '',
        messageId: result && result.messageId ? result.messageId : '',
        error: { code: 'aborted', status: 0, message: '已被新的问题取代' },
        citations: this._citations ? this._citations.slice() : [],
        sources: this.data.panelRows.length,
        weak: [],
      });
      return seq;
    },

    /** Stop the running answer: what arrived stays, marked as stopped. */
    stop: function () {
      var task = this._task;
      this._task = null;
      if (task && !this._finished) task.abort();
    },

    /** Ask the same question again (after an error, a stop or an incomplete answer). */
    retry: function () {
      if (this.data.busy || !this._query) return;
      this.ask(this._query);
    },

    _onEvent: function (evt) {
      if (evt && (evt.event === 'message_end' || evt.event === 'workflow_finished')) this._sawEnd = true;
    },

    _onMetadata: function (chunks) {
      this._metadata = client.chunkMap(chunks);
      var patch = { status: 'generating' };
      if (!this._gotText) patch.statusText = TEXT.generating;
      this._dirty.panel = true;
      this._queue(patch);
    },

    _onSegments: function (segments) {
      if (!segments || segments.length === 0) return;
      for (var k = 0; k < segments.length; k++) {
        if (segments[k] !== null && typeof segments[k] === 'object' && typeof segments[k].reasoning === 'string') {
          this._reasoningRaw += segments[k].reasoning;
          this._dirty.reasoning = true;
        }
      }
      if (this._note(segments)) this._dirty.panel = true;
      if (this._replaced !== null) {
        // After message_replace the answer is rendered whole at the next frame.
        this._replaced = this._replaced.concat(segments);
        this._dirty.replaced = true;
      } else {
        this._md.push(segments);
        this._dirty.md = true;
      }
      this._queue({ status: 'generating' });
    },

    _onReplace: function (segments) {
      // message_replace (output moderation): the answer so far is replaced.
      this._segments = client.mergeText((segments || []).slice());
      this._replaced = this._segments.slice();
      this._reasoningRaw = client.splitReasoning(this._segments).reasoning;
      this._citations = [];
      this._seen = new Set();
      this._note(this._segments);
      this._gotText = true;
      this._dirty = { md: false, reasoning: true, panel: true, replaced: true };
      this._queue({ statusText: '' });
    },

    // Merge `patch` into the next render and make sure one is scheduled.
    _queue: function (patch) {
      var pending = this._pending || (this._pending = {});
      for (var key in patch) pending[key] = patch[key];
      if (this._timer !== null) return;
      var self = this;
      var seq = this._seq;
      this._timer = this._scheduler.later(function () {
        self._timer = null;
        if (seq === self._seq && !self._finished) self._flush();
      });
    },

    _cancelRender: function () {
      if (this._timer !== null && this._timer !== undefined) this._scheduler.cancel(this._timer);
      this._timer = null;
      this._pending = null;
    },

    // One render: what changed since the last one, in one setData.
    _flush: function () {
      var patch = this._takePending();
      if (Object.keys(patch).length > 0) this.setData(patch);
    },

    // The pending patch with the recorded changes rendered into it.
    _takePending: function () {
      var patch = this._pending || {};
      this._pending = null;
      var dirty = this._dirty;
      if (dirty.replaced) this._wholeAnswer(patch, this._replaced);
      else if (dirty.md && this._md) {
        var u = this._md.update();
        if (u.changed) {
          this._appendBlocks(patch, u.commit);
          patch.tail = client.toRichTextNodes(u.tail);
        }
      }
      if (dirty.reasoning) patch.reasoning = client.reasoningDisplay(this._reasoningRaw);
      if (!this._gotText && (this._blockCount > 0 || (patch.tail && patch.tail.length > 0))) {
        this._gotText = true;
        patch.statusText = '';
      }
      if (dirty.panel) {
        // Without chunk_metadata (an older Dify without node_finished) the rows wait for
        // message_end's retriever_resources (seed §3.4), so no placeholder rows flash up.
        this._panel = this._metadata.size > 0 ? client.buildPanel(this._citations, this._metadata) : [];
        patch.panelRows = view.panelRows(this._panel);
      }
      this._dirty = { md: false, reasoning: false, panel: false, replaced: false };
      return patch;
    },

    // Append committed top-level blocks (each sent once, by path).
    _appendBlocks: function (patch, nodes) {
      var blocks = view.blocksOf(nodes, this._blockCount);
      for (var j = 0; j < nodes.length; j++) this._trees.push(nodes[j]);
      for (var k = 0; k < blocks.length; k++) patch['blocks[' + this._blockCount++ + ']'] = blocks[k];
    },

    // Render the whole answer anew (message_replace, a late link definition).
    _wholeAnswer: function (patch, segmentsOrNodes, isTree) {
      var tree = isTree ? segmentsOrNodes : view.markdownTree(segmentsOrNodes);
      var blocks = view.blocksOf(tree);
      this._trees = tree.slice();
      for (var key in patch) if (key.indexOf('blocks[') === 0) delete patch[key];
      this._blockCount = blocks.length;
      patch.blocks = blocks;
      patch.tail = [];
    },

    // Re-render the blocks holding a superscript of a weak citation, marked (is-weak).
    _markWeak: function (patch, weak) {
      for (var k = 0; k < this._trees.length; k++) {
        if (!client.hasWeakCitation([this._trees[k]], weak)) continue;
        var block = view.blocksOf(client.markWeakCitations([this._trees[k]], weak), k)[0];
        if (Array.isArray(patch.blocks)) patch.blocks[k] = block;
        else patch['blocks[' + k + ']'] = block;
      }
    },

    // Record the citations of new segments in display order; true when a new one came.
    _note: function (segments) {
      var changed = false;
      for (var k = 0; k < segments.length; k++) {
        var seg = segments[k];
        if (seg.cite === undefined) continue;
        var raw = String(seg.cite);
        if (this._seen.has(raw)) continue;
        this._seen.add(raw);
        this._citations.push([raw, seg.idx]);
        changed = true;
      }
      return changed;
    },

    _finish: function (result, seq) {
      if (seq !== this._seq || this._finished) return;
      this._finished = true;
      this._task = null;
      if (this._timer !== null) this._scheduler.cancel(this._timer);
      this._timer = null;
      var error = result && result.error ? result.error : null;
      var patch = this._dirty ? this._takePending() : {};
      patch.busy = false;
      var incompleteStream = Boolean(error) || !this._sawEnd;
      if (this._replaced === null && this._md) {
        // What is left, rendered as final; a dangling "[C:" of a broken stream is dropped.
        var u = this._md.update();
        if (u.changed) this._appendBlocks(patch, u.commit);
        var f = this._md.end({ incomplete: incompleteStream });
        if (f.replace) this._wholeAnswer(patch, f.replace, true);
        else this._appendBlocks(patch, f.commit);
        patch.tail = [];
        this._gotText = this._gotText || this._blockCount > 0;
      }
      if (result && Array.isArray(result.segments)) patch.reasoning = view.reasoningText(result.segments);
      if (!this._gotText && this._replaced !== null) this._gotText = true;
      if (result && Array.isArray(result.panel)) {
        // The final panel: chunk_metadata, or message_end.metadata.retriever_resources (seed §3.4).
        this._panel = result.panel;
        patch.panelRows = view.panelRows(result.panel);
      }
      // The citation verifier's report (issue 15): weak citations get a dotted superscript
      // and panel number; the sheet shows the supporting sentence (onRowTap).
      this._report = client.verificationOf(result && result.metadata);
      var weak = client.weakIds(this._report);
      if (weak.length > 0) {
        this._markWeak(patch, weak);
        patch.panelRows = view.panelRows(this._panel, weak);
        patch.weakLegend = TEXT.weakLegend;
      }
      // ... and an answer the verifier found not to answer (a part of) the question gets
      // a small notice naming the parts.
      patch.answerNotice = client.answerNoticeText(this._report);
      var status;
      if (error && error.code === 'aborted') {
        status = 'stopped';
        patch.statusText = this._gotText ? TEXT.stoppedPartial : TEXT.stopped;
      } else if (error) {
        status = 'error';
        patch.statusText = (this._gotText ? TEXT.unfinished : '') + client.errorText(error);
      } else if (!this._gotText) {
        status = 'empty';
        patch.statusText = TEXT.empty;
      } else if (!this._sawEnd) {
        status = 'incomplete';
        patch.statusText = '回答可能不完整：服务没有发送结束信号';
      } else {
        status = 'done';
        patch.statusText = '';
      }
      patch.status = status;
      patch.retryText = status === 'stopped' ? TEXT.regenerate : TEXT.retry;
      patch.incomplete = status === 'stopped' || status === 'incomplete' || (status === 'error' && this._gotText);
      patch.canRetry = status === 'stopped' || status === 'incomplete' ||
        (status === 'error' && !(error.status === 401 || error.status === 403) && error.code !== 'config');
      this.setData(patch);
      this.triggerEvent('finish', {
        status: status,
        conversationId: result && result.conversationId ? result.conversationId : '',
        messageId: result && result.messageId ? result.messageId : '',
        error: error,
        citations: result && result.citations ? result.citations : this._citations,
        sources: this.data.panelRows.length,
        weak: weak,
      });
    },

    // ------------------------------------------------------------ panel (§5.1)
    onReasoningToggle: function () {
      this.setData({ reasoningOpen: !this.data.reasoningOpen });
    },

    onPanelToggle: function () {
      this.setData({ panelOpen: !this.data.panelOpen });
    },

    onRowTap: function (evt) {
      var raw = String(evt.currentTarget.dataset.rawId);
      var row = null;
      for (var k = 0; k < this._panel.length; k++) if (String(this._panel[k].rawId) === raw) row = this._panel[k];
      if (row === null) return;
      var sheet = view.sheetModel(row, {
        webViewDomains: this.data.webViewDomains,
        webViewPage: this.data.webViewPage,
        report: this._report,
      });
      var self = this;
      // Scroll to the supporting sentence once the sheet is rendered (scroll-into-view).
      this.setData({ sheet: sheet, sheetOpen: true, sheetOffset: 0, sheetScrollTo: '' }, function () {
        var open = self.data.sheetOpen && self.data.sheet;
        if (sheet.supportId && open && self.data.sheet.rawId === sheet.rawId) self.setData({ sheetScrollTo: sheet.supportId });
      });
    },

    // ------------------------------------------------------------ sheet (§5.3)
    closeSheet: function () {
      this.setData({ sheetOpen: false, sheetOffset: 0, sheetScrollTo: '' });
    },

    onSheetTouchStart: function (evt) {
      var t = evt.touches && evt.touches[0];
      this._dragY = t ? t.clientY : null;
    },

    onSheetTouchMove: function (evt) {
      if (this._dragY === null || this._dragY === undefined) return;
      var t = evt.touches && evt.touches[0];
      if (!t) return;
      this.setData({ sheetOffset: Math.max(0, Math.round(t.clientY - this._dragY)) });
    },

    onSheetTouchEnd: function () {
      var dy = this.data.sheetOffset;
      this._dragY = null;
      if (dy > CLOSE_DRAG_PX) this.closeSheet();
      else this.setData({ sheetOffset: 0 });
    },

    noop: function () {},

    onOpenOriginal: function () {
      var sheet = this.data.sheet;
      if (!sheet || sheet.buttonDisabled) return;
      var self = this;
      if (sheet.action === 'document') {
        wx.showLoading({ title: '正在下载原文' });
        wx.downloadFile({
          url: sheet.url,
          success: function (res) {
            wx.hideLoading();
            if (res.statusCode !== 200) {
              self._sheetHint('下载原文失败（HTTP ' + res.statusCode + '），可复制链接后在浏览器中打开。');
              return;
            }
            wx.openDocument({
              filePath: res.tempFilePath,
              fileType: sheet.officeType,
              showMenu: true,
              fail: function () {
                self._sheetHint('无法打开该文档，可复制链接后在浏览器中打开。');
              },
            });
          },
          fail: function () {
            wx.hideLoading();
            self._sheetHint('下载原文失败：该文件的域名需加入小程序的 downloadFile 合法域名；可复制链接后在浏览器中打开。');
          },
        });
      } else if (sheet.action === 'webview') {
        wx.navigateTo({ url: this.data.webViewPage + '?url=' + encodeURIComponent(sheet.url) });
      } else if (sheet.action === 'copy') {
        this.onCopyLink();
      }
    },

    onCopyLink: function () {
      var sheet = this.data.sheet;
      if (!sheet || !sheet.url) return;
      wx.setClipboardData({
        data: sheet.url,
        success: function () {
          wx.showToast({ title: TEXT.linkCopied, icon: 'none' });
        },
      });
    },

    _sheetHint: function (hint) {
      this.setData({ 'sheet.hint': hint, 'sheet.showCopy': true });
    },
  },
});
