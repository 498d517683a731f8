/**
 * View model of <g-cite-answer>: pure functions from the JavaScript client's
 * output (segments, panel rows, UnifiedChunk objects) to the data the
 * component's WXML binds. No wx, no I/O: the component (index.js) calls these
 * and setData()s the result. ES2017, CommonJS (mini program require).
 *
 * Seeds (mobile design document): §4.1/§4.3 the answer text with
 * superscripts, §5.1 the panel, §5.2 icons by source_type, §5.3 the
 * half-screen sheet, §6.1 the superscript style.
 *
 * Safety: the answer is Markdown rendered by the client's markdown.js (raw
 * HTML off, only http(s) links) and handed to <rich-text> as node trees
 * (never an HTML string); every string from the model or a document is a
 * `{type: "text"}` node (entity-escaped by toRichTextNodes, as rich-text
 * decodes entities) or a WXML text binding, never parsed as markup.
 * URLs are used only when the client's safeUrl() accepts them (http/https).
 */
var client = require('./lib/gcite-client/index.js');
var markdownit = require('./lib/markdown-it/markdown-it.min.js');

var md = null; // one markdown-it instance for every answer (createMarkdownIt's options)

/**
 * A streaming Markdown renderer for one answer (the client's MarkdownStream
 * over markdown-it, raw HTML off, only http(s) links): push parser segments,
 * update() once per render.
 * @returns {object} MarkdownStream
 */
function markdownStream() {
  if (md === null) md = client.createMarkdownIt(markdownit);
  return new client.MarkdownStream({ md: md });
}

/**
 * Renderer nodes as rich-text blocks, one per top-level node (each block
 * gets its own <rich-text>, so a committed block is sent once).
 * @param {Array<object>} nodes the client's node tree
 * @param {number} [start] key of the first block (blocks already shown)
 * @returns {Array<{key: number, nodes: Array<object>}>}
 */
function blocksOf(nodes, start) {
  var out = [];
  var first = start || 0;
  var list = client.toRichTextNodes(Array.isArray(nodes) ? nodes : []);
  for (var k = 0; k < list.length; k++) out.push({ key: first + k, nodes: [list[k]] });
  return out;
}

/**
 * The whole answer (segments) as rich-text blocks, e.g. after message_replace.
 * @param {Array<object>} segments
 * @returns {Array<{key: number, nodes: Array<object>}>}
 */
function markdownBlocks(segments) {
  return blocksOf(markdownTree(segments));
}

/**
 * The whole answer (segments) as the renderer's node tree.
 * @param {Array<object>} segments
 * @returns {Array<object>}
 */
function markdownTree(segments) {
  if (md === null) md = client.createMarkdownIt(markdownit);
  return client.renderMarkdownTree(segments, { md: md });
}

/** Element id of the supporting sentence in the sheet (its scroll-view scrolls to it). */
var SUPPORT_ID = 'g-cite-support';

/** Header colours of the sheet by source type, mobile seed §5.3. */
var SHEET_COLORS = {
  rag: { background: '#eff6ff', color: '#2563eb' },
  web: { background: '#f0fdf4', color: '#15803d' },
};

/** Tag names the answer's rich-text nodes may use (a subset of rich-text's whitelist). */
var RICH_TEXT_TAGS = [
  'a', 'b', 'blockquote', 'br', 'code', 'del', 'div', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr',
  'i', 'li', 'ol', 'p', 'pre', 'span', 'strong', 'sub', 'sup', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul',
];

/** Attributes the answer's rich-text nodes may carry. */
var RICH_TEXT_ATTRS = ['class', 'style', 'start'];

/**
 * The reasoning of an answer (parser `{reasoning}` segments from a leading
 * <think> block, citation-markers.md §4a): shown apart, collapsed, never in
 * the answer text; markers removed (the client's reasoningDisplay).
 * @param {Array<object>} segments
 * @returns {string}
 */
function reasoningText(segments) {
  return client.reasoningDisplay(client.splitReasoning(segments).reasoning);
}

/** "rag" or "web" (anything but "web" is the knowledge base). */
var sourceType = client.sourceTypeOf;

/**
 * Panel rows for the WXML (seed §5.1/§5.2), in the panel's order (the idMap's):
 * the client's sourceRows (title, subtitle, the segment hint of same-looking
 * rows, accessible label) plus the icon.
 * @param {Array<{idx: number, rawId: string, chunk: (object|null)}>} panel buildPanel()
 * @param {Array<string>} [weak] raw ids of weakly supported citations (verification.js weakIds)
 * @returns {Array<{idx: number, rawId: string, type: string, icon: string, title: string, subtitle: string, hint: string, label: string, weak: boolean}>}
 */
function panelRows(panel, weak) {
  var list = Array.isArray(panel) ? panel.filter(function (r) { return r !== null && typeof r === 'object'; }) : [];
  return client.sourceRows(list, weak).map(function (r) {
    return {
      idx: r.idx,
      rawId: r.rawId,
      type: r.type,
      icon: r.type === 'web' ? 'globe' : 'file',
      title: r.title,
      subtitle: r.subtitle,
      hint: r.hint,
      label: r.label + (r.weak ? '（' + client.WEAK_SUPPORT_TEXT + '）' : ''),
      weak: r.weak,
    };
  });
}

/** The host of an http(s) URL, lower case ("" when there is none). */
function hostOf(url) {
  var m = /^https?:\/\/(?:[^@\/?#]*@)?(\[[^\]]*\]|[^:\/?#]*)/i.exec(url || '');
  return m ? m[1].toLowerCase() : '';
}

/**
 * True when `url`'s host is one of the mini program's business domains (the
 * hosts a <web-view> may open): an entry "example.com" matches that host
 * only; an entry "*.example.com" matches its sub-domains.
 * @param {string} url
 * @param {Array<string>} domains
 * @returns {boolean}
 */
function webViewAllowed(url, domains) {
  var host = hostOf(url);
  if (host === '' || !Array.isArray(domains)) return false;
  for (var k = 0; k < domains.length; k++) {
    var d = String(domains[k] || '').trim().toLowerCase().replace(/^https?:\/\//, '').replace(/\/.*$/, '');
    if (d === '') continue;
    if (d.indexOf('*.') === 0) {
      var base = d.slice(2);
      if (host.length > base.length && host.slice(-base.length - 1) === '.' + base) return true;
    } else if (host === d) {
      return true;
    }
  }
  return false;
}

/** The file type wx.openDocument expects for an Office URL ("doc", "docx", "pdf"), or "". */
function officeType(url) {
  if (!client.isOfficeUrl(url)) return '';
  var m = /\.(docx?|pdf)$/i.exec(url.trim().split('#')[0].split('?')[0]);
  return m ? m[1].toLowerCase() : '';
}

/**
 * The half-screen sheet of one panel row (seed §5.3), in mini-program terms.
 *
 * `action` says what "完整原文" does:
 * - "document": knowledge-base Office/PDF file (.doc/.docx/.pdf) — download
 *   with wx.downloadFile, open with wx.openDocument; the Office notice shows.
 * - "webview": open the page in the example's <web-view> page (the host is a
 *   business domain).
 * - "copy": the host is not a business domain: the button reads "复制链接"
 *   and copies the link (wx.setClipboardData); the notice says why.
 * - "none": disabled — no link (knowledge base), or a link that is not an
 *   http(s) URL (hostile or broken data; web sources included).
 *
 * The chunk text comes as `parts` ([{text, support}]): with the verifier's
 * report (`options.report`, message_end.metadata.gcite_verification) the
 * supporting sentence is its own part, highlighted, with the id `supportId`
 * the sheet scrolls to; a weakly supported citation gets `weak` and the line
 * `weakText` (the client's WEAK_SUPPORT_TEXT). Shared with the H5 page through the
 * client's verification.js.
 *
 * @param {{idx: number, rawId: string, chunk: (object|null)}} row a panel row
 * @param {{webViewDomains?: Array<string>, webViewPage?: string, report?: (object|null)}} [options]
 * @returns {object} the sheet's data
 */
function sheetModel(row, options) {
  var opts = options || {};
  var base = client.sourceSheet(row || { rawId: '', chunk: null });
  var chunk = row && row.chunk !== null && typeof row.chunk === 'object' ? row.chunk : null;
  var type = base.type;
  var url = base.url || '';
  var office = base.office ? officeType(url) : '';
  var action = 'none';
  var hint = base.linkHint;
  if (url === '') {
    action = 'none';
  } else if (office !== '') {
    action = 'document';
  } else if (opts.webViewPage && webViewAllowed(url, opts.webViewDomains)) {
    action = 'webview';
  } else {
    action = 'copy';
    hint = client.TEXT.webNotice;
  }
  var colors = SHEET_COLORS[type];
  var content = chunk !== null && typeof chunk.content === 'string' ? chunk.content : '';
  var shown = content.trim() !== '' ? client.sheetText(content) : base.content;
  var support = client.chunkSupport(opts.report || null, row ? row.rawId : '', content);
  var span = content.trim() !== '' ? support.span : null;
  return {
    rawId: String(row ? row.rawId : ''),
    idx: row ? row.idx : 0,
    type: type,
    icon: type === 'web' ? 'globe' : 'file',
    tag: base.tag,
    headStyle: 'background:' + colors.background + ';color:' + colors.color + ';',
    title: base.title,
    subtitle: base.subtitle,
    content: shown,
    parts: client.supportParts(shown, span),
    supportId: span ? SUPPORT_ID : '',
    support: span ? span.text : '',
    weak: support.weak,
    weakText: support.weak ? client.WEAK_SUPPORT_TEXT : '',
    url: url,
    action: action,
    buttonText: action === 'copy' ? client.TEXT.copyLink : client.TEXT.openOriginal,
    buttonDisabled: action === 'none',
    hint: hint,
    office: office !== '',
    officeType: office,
    officeNotice: office !== '' ? base.notice : '',
    label: base.tag + '来源 ' + (row ? row.idx : '') + '：' + base.title,
  };
}

module.exports = {
  markdownStream: markdownStream,
  blocksOf: blocksOf,
  markdownBlocks: markdownBlocks,
  markdownTree: markdownTree,
  SUPPORT_ID: SUPPORT_ID,
  SHEET_COLORS: SHEET_COLORS,
  RICH_TEXT_TAGS: RICH_TEXT_TAGS,
  RICH_TEXT_ATTRS: RICH_TEXT_ATTRS,
  reasoningText: reasoningText,
  panelRows: panelRows,
  sheetModel: sheetModel,
  sourceType: sourceType,
  webViewAllowed: webViewAllowed,
  officeType: officeType,
  hostOf: hostOf,
};
