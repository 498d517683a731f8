/**
 * The example's chat page: identity picker, suggestions, the conversation
 * (one <g-cite-answer> per answer) and the composer with 发送 / 停止.
 *
 * Built with the Component constructor (a page may be), so the same code runs
 * in WeChat and in miniprogram-simulate. Settings: ../../config.js.
 */
var config = require('../../config.js');
var client = require('../../components/g-cite-answer/lib/gcite-client/index.js');

function userId() {
  var id = '';
  try {
    id = wx.getStorageSync('gcite.user') || '';
  } catch (e) {
    id = '';
  }
  if (!id) {
    id = 'mp-' + Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
    try {
      wx.setStorageSync('gcite.user', id);
    } catch (e) {
      /* storage full: keep it for this session */
    }
  }
  return id;
}

Component({
  data: {
    title: config.title,
    serviceUrl: config.serviceUrl,
    webViewPage: config.webViewPage,
    webViewDomains: config.webViewDomains,
    suggestions: config.suggestions,
    identities: config.identities,
    identityIndex: 0,
    user: '',
    conversationId: '',
    messages: [],
    input: '',
    busy: false,
    scrollTo: '',
  },

  lifetimes: {
    attached: function () {
      this._next = 1;
      this._running = '';
      this.setData({ user: userId() });
      if (config.loadPageConfig) this.loadPageConfig();
    },
  },

  methods: {
    /** GET {serviceUrl}/page-config.json: title, suggestions, identities (gcite demo). */
    loadPageConfig: function () {
      var self = this;
      wx.request({
        url: String(this.data.serviceUrl).replace(/\/+$/, '') + '/page-config.json',
        method: 'GET',
        success: function (res) {
          var cfg = res && res.statusCode === 200 && res.data && typeof res.data === 'object' ? res.data : null;
          if (!cfg) return;
          var patch = {};
          if (typeof cfg.title === 'string' && cfg.title) patch.title = cfg.title;
          if (Array.isArray(cfg.suggestions) && cfg.suggestions.length) patch.suggestions = cfg.suggestions.filter(function (s) { return typeof s === 'string'; });
          if (Array.isArray(cfg.identities) && cfg.identities.length) {
            patch.identities = cfg.identities.filter(function (i) { return i && typeof i.label === 'string' && typeof i.key === 'string'; });
            patch.identityIndex = 0;
          }
          self.setData(patch);
          if (patch.title && wx.setNavigationBarTitle) wx.setNavigationBarTitle({ title: patch.title });
        },
      });
    },

    onInput: function (evt) {
      this.setData({ input: evt.detail.value });
    },

    onSend: function () {
      if (this.data.busy) {
        this.stop();
        return;
      }
      var text = String(this.data.input || '').trim();
      if (!text) return;
      this.setData({ input: '' });
      this.ask(text);
    },

    onSuggestion: function (evt) {
      this.ask(String(evt.currentTarget.dataset.q || ''));
    },

    /** Add the question and an answer component, which starts streaming when attached. */
    ask: function (query) {
      if (!query || this.data.busy) return;
      var identity = this.data.identities[this.data.identityIndex] || { key: '' };
      var q = this._next++;
      var a = this._next++;
      this._running = 'answer-' + a;
      var messages = this.data.messages.concat([
        { id: q, role: 'user', text: query },
        { id: a, role: 'bot', query: query, apiKey: identity.key, conversationId: this.data.conversationId },
      ]);
      this.setData({ messages: messages, busy: true, scrollTo: 'm' + a });
    },

    /** 停止: stop the running answer (what arrived stays). */
    stop: function () {
      var answer = this._running ? this.selectComponent('#' + this._running) : null;
      if (answer) answer.stop();
    },

    onAnswerFinish: function (evt) {
      var detail = evt.detail || {};
      var patch = { busy: false };
      if (detail.conversationId) patch.conversationId = detail.conversationId;
      this._running = '';
      this.setData(patch);
    },

    onIdentityChange: function (evt) {
      var index = Number(evt.detail.value);
      var identity = this.data.identities[index];
      if (!identity || index === this.data.identityIndex) return;
      this.stop();
      var patch = { identityIndex: index, conversationId: '' };
      if (this.data.messages.length) {
        patch.messages = this.data.messages.concat([{ id: this._next++, role: 'divider', text: client.TEXT.identitySwitched.replace('{label}', identity.label) }]);
      }
      this.setData(patch);
    },

    onNewChat: function () {
      this.stop();
      this.setData({ messages: [], conversationId: '', busy: false });
    },
  },
});
