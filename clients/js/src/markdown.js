/**
 * Markdown answers with citations inside (citation-markers.md §7), as a plain
 * node tree that a WeChat mini program's <rich-text nodes> takes and that an
 * H5 page turns into DOM. ES2017, no dependencies: the Markdown parser (a
 * markdown-it instance, https://github.com/markdown-it/markdown-it) is
 * INJECTED by the caller; this module only walks its tokens.
 *
 * Node tree (the rich-text "nodes" shape):
 *
 *     {name: 'p', attrs: {class: 'md-p'}, children: [Node, ...]}   element
 *     {type: 'text', text: '...'}                                  text (not escaped)
 *
 * Elements used: p h1-h6 blockquote ul ol li table thead tbody tr th td hr
 * pre code strong em del a span sup br. Attributes: class, href, target, rel,
 * start, data-raw-id, data-idx, aria-label, aria-hidden, title.
 *
 * Rules (§7): a citation is a superscript in place, also inside emphasis,
 * headings, list items, table cells and link text:
 *
 *     <span class="g-cite-nb">次<sup class="g-cite" data-raw-id="7" data-idx="1"
 *       aria-label="引用 1：标题">1</sup>。</span>
 *
 * The span keeps the character before and the punctuation after the
 * superscript on its line ("white-space: nowrap"; U+2060 WORD JOINER when the
 * character before is in another element). Adjacent citations get a
 * separator <sup class="g-cite-sep" aria-hidden="true">,</sup> ("¹,²" not
 * "¹²"). A citation never becomes Markdown syntax: it enters the Markdown
 * source as one private-use character (U+E000 + n), which no Markdown rule
 * consumes, so `[C:1](url)` is not a link and `[C:2]: x` not a definition.
 * Private-use characters written by the model are replaced by U+FFFD. A
 * citation that lands inside a link destination is not shown (it stays in
 * the panel).
 *
 * Code (fenced, indented, inline) is literal; raw HTML from the model is text
 * (markdown-it `html: false`); only http(s) links become links, with
 * rel="noopener noreferrer" and target="_blank" (other links show their text);
 * images are never loaded: an image is a link to its http(s) URL labelled
 * with its alt text, else its alt text. Reasoning segments ({reasoning}) are
 * never mixed into the answer: see splitReasoning().
 *
 * Streaming (MarkdownStream): work is proportional to the new text. The top
 * level blocks before the last one are final and returned once ("commit");
 * only the open last block is parsed again ("tail"). The tail preview holds
 * back what could still turn into syntax (an unfinished line that may open a
 * block, a table header line before its delimiter row, an unclosed `[`/`<`,
 * trailing `*_~` runs) and closes unclosed emphasis/code spans, so no state
 * shows a control sequence that the final rendering consumes.
 */
import { stripMarkers } from './parser.js';

var PUA_FIRST = 0xe000;
var PUA_COUNT = 6400; // U+E000..U+F8FF
var PUA_RE = /[\ue000-\uf8ff]/g;
var WJ = '\u2060';
var CLOSING_PUNCT = /^[。，、；：！？）」』】》〉”’,.;:!?)\]}…%]{1,3}/;

/** Options for a markdown-it instance fit for answers (pass to `markdownit(...)`). */
export var MARKDOWN_OPTIONS = { html: false, linkify: true, typographer: false, breaks: true };

/**
 * A markdown-it instance configured for answers: CommonMark + GFM tables and
 * strikethrough (markdown-it's default preset), raw HTML off, single newlines
 * as line breaks, bare http(s) URLs linked (no fuzzy links or e-mails). Link
 * validation is left to the tree builder (only http(s) become links, other
 * links show their text instead of their source).
 * @param {function(object): object} markdownit the markdown-it factory (e.g. window.markdownit)
 * @returns {object} a markdown-it instance
 */
export function createMarkdownIt(markdownit) {
  if (typeof markdownit !== 'function') throw new TypeError('createMarkdownIt: pass the markdown-it factory');
  var md = markdownit('default', MARKDOWN_OPTIONS);
  md.validateLink = function () {
    return true;
  };
  if (md.linkify && typeof md.linkify.set === 'function') md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });
  // A footnote definition written by the model ("[^1]: 《消防法》第十六条") is text, not a
  // link reference definition (which would make the line vanish).
  md.block.ruler.__rules__.forEach(function (rule) {
    if (rule.name !== 'reference') return;
    var reference = rule.fn;
    rule.fn = function (state, startLine, endLine, silent) {
      var pos = state.bMarks[startLine] + state.tShift[startLine];
      if (state.src.charCodeAt(pos) === 0x5b && state.src.charCodeAt(pos + 1) === 0x5e) return false;
      return reference(state, startLine, endLine, silent);
    };
  });
  md.block.ruler.__cache__ = null; // the rule chains are rebuilt with the new function
  return md;
}

/**
 * Only absolute http: and https: URLs with a host; null otherwise.
 * @param {*} url
 * @returns {string|null}
 */
export function safeLink(url) {
  if (typeof url !== 'string') return null;
  var u = url.trim();
  if (/[\u0000-\u001f\u007f\s]/.test(u)) return null;
  if (!/^https?:\/\/[^\/\\?#\s@]/i.test(u)) return null;
  return u;
}

function el(name, attrs, children) {
  return { name: name, attrs: attrs || {}, children: children || [] };
}

function txt(s) {
  return { type: 'text', text: s };
}

/**
 * Split parser segments into the reasoning text and the answer segments
 * (§4a: reasoning is shown apart, collapsed, never mixed into the answer).
 * @param {Array<object>} segments
 * @returns {{reasoning: string, answer: Array<object>}}
 */
export function splitReasoning(segments) {
  var reasoning = '';
  var answer = [];
  var list = Array.isArray(segments) ? segments : [];
  for (var k = 0; k < list.length; k++) {
    var s = list[k];
    if (s === null || typeof s !== 'object') continue;
    if (typeof s.reasoning === 'string') reasoning += s.reasoning;
    else answer.push(s);
  }
  return { reasoning: reasoning, answer: answer };
}

/**
 * The reasoning as shown (collapsed, apart from the answer): citation markers
 * removed (they are not citations in reasoning, spec §4a), also the start of
 * one at the end of a reasoning still streaming; trimmed.
 * @param {string} text the reasoning (splitReasoning().reasoning, MarkdownStream.reasoning)
 * @returns {string}
 */
export function reasoningDisplay(text) {
  if (typeof text !== 'string' || text === '') return '';
  var out = stripMarkers(text).replace(/[\[【［][ \u3000]*(?:[CcＣｃ][ \u3000]*(?:[:：][ \u3000\d０-９,，、;；\-–~～]*)?)?$/, '');
  return out.trim();
}

// ------------------------------------------------------------------ tree builder

function Builder(cites, options) {
  this.cites = cites; // placeholder number -> {cite, idx}
  this.label = typeof options.label === 'function' ? options.label : null;
  this.breaks = Boolean(options.md && options.md.options && options.md.options.breaks);
}

Builder.prototype.citeNode = function (n) {
  var c = this.cites[n];
  if (!c) return null;
  var attrs = { class: 'g-cite', 'data-raw-id': String(c.cite), 'data-idx': String(c.idx) };
  var label = this.label ? this.label(String(c.cite), c.idx) : '';
  attrs['aria-label'] = label ? String(label) : '引用 ' + c.idx;
  return el('sup', attrs, [txt(String(c.idx))]);
};

// Append `text` (may hold placeholders) to `out`, citations grouped with the
// character before and the punctuation after.
Builder.prototype.text = function (out, text) {
  if (text === '') return;
  PUA_RE.lastIndex = 0;
  var pos = 0;
  var m;
  while ((m = PUA_RE.exec(text)) !== null) {
    var start = m.index;
    if (start > pos) pushText(out, text.slice(pos, start));
    // the run of adjacent placeholders
    var end = start;
    var sups = [];
    while (end < text.length && isPua(text.charCodeAt(end))) {
      var node = this.citeNode(text.charCodeAt(end) - PUA_FIRST);
      if (node !== null) {
        if (sups.length) sups.push(el('sup', { class: 'g-cite-sep', 'aria-hidden': 'true' }, [txt(',')]));
        sups.push(node);
      }
      end++;
    }
    PUA_RE.lastIndex = end;
    pos = end;
    if (!sups.length) continue;
    var group = [];
    var last = out.length ? out[out.length - 1] : null;
    if (last !== null && last.type === 'text' && last.text !== '') {
      var ch = lastChar(last.text);
      if (ch !== '\n') {
        last.text = last.text.slice(0, last.text.length - ch.length);
        if (last.text === '') out.pop();
        group.push(txt(ch));
      } else group.push(txt(WJ));
    } else group.push(txt(WJ));
    group = group.concat(sups);
    var rest = text.slice(pos);
    var p = CLOSING_PUNCT.exec(rest);
    if (p !== null && !isPua(rest.charCodeAt(p[0].length))) {
      group.push(txt(p[0]));
      pos += p[0].length;
      PUA_RE.lastIndex = pos;
    }
    out.push(el('span', { class: 'g-cite-nb' }, group));
  }
  if (pos < text.length) pushText(out, text.slice(pos));
};

function isPua(code) {
  return code >= PUA_FIRST && code < PUA_FIRST + PUA_COUNT;
}

function lastChar(s) {
  var n = s.length;
  var c = s.charCodeAt(n - 1);
  if (n >= 2 && c >= 0xdc00 && c <= 0xdfff) {
    var h = s.charCodeAt(n - 2);
    if (h >= 0xd800 && h <= 0xdbff) return s.slice(n - 2);
  }
  return s.charAt(n - 1);
}

function pushText(out, s) {
  if (s === '') return;
  var last = out.length ? out[out.length - 1] : null;
  if (last !== null && last.type === 'text') last.text += s;
  else out.push(txt(s));
}

// Literal text (code): placeholders (only possible where the parser's code
// rules and markdown-it's differ, e.g. indented code) become superscripts.
Builder.prototype.literal = function (s) {
  var out = [];
  this.text(out, s);
  return out;
};

// Inline tokens -> nodes.
Builder.prototype.inline = function (tokens) {
  var root = [];
  var stack = [{ children: root, skip: false }];
  for (var k = 0; k < tokens.length; k++) {
    var t = tokens[k];
    var top = stack[stack.length - 1];
    var out = top.children;
    switch (t.type) {
      case 'text':
        this.text(out, t.content);
        break;
      case 'softbreak':
        if (this.breaks) out.push(el('br'));
        else pushText(out, '\n');
        break;
      case 'hardbreak':
        out.push(el('br'));
        break;
      case 'code_inline':
        out.push(el('code', { class: 'md-code' }, this.literal(t.content)));
        break;
      case 'html_inline':
        this.text(out, t.content); // html is off; kept as text if a plugin adds it
        break;
      case 'image': {
        var alt = t.children ? this.inline(t.children) : [txt(t.content || '')];
        var src = safeLink(t.attrGet('src'));
        if (src !== null) {
          out.push(el('a', { class: 'md-image-link', href: src, target: '_blank', rel: 'noopener noreferrer' },
            alt.length ? alt : [txt('图片')]));
        } else out.push(el('span', { class: 'md-image-alt' }, alt));
        break;
      }
      case 'link_open': {
        var href = safeLink(t.attrGet('href'));
        var node = href !== null
          ? el('a', { class: 'md-link', href: href, target: '_blank', rel: 'noopener noreferrer' })
          : el('span', { class: 'md-link-text' });
        out.push(node);
        stack.push({ children: node.children });
        break;
      }
      case 'strong_open':
      case 'em_open':
      case 's_open': {
        var name = t.type === 'strong_open' ? 'strong' : t.type === 'em_open' ? 'em' : 'del';
        var n2 = el(name);
        out.push(n2);
        stack.push({ children: n2.children });
        break;
      }
      case 'link_close':
      case 'strong_close':
      case 'em_close':
      case 's_close':
        if (stack.length > 1) stack.pop();
        break;
      default:
        if (typeof t.content === 'string' && t.content !== '') this.text(out, t.content);
    }
  }
  return root;
};

var BLOCK_TAGS = {
  paragraph_open: 'p',
  blockquote_open: 'blockquote',
  bullet_list_open: 'ul',
  ordered_list_open: 'ol',
  list_item_open: 'li',
  table_open: 'table',
  thead_open: 'thead',
  tbody_open: 'tbody',
  tr_open: 'tr',
  th_open: 'th',
  td_open: 'td',
};

// Block tokens [from, to) -> nodes.
Builder.prototype.blocks = function (tokens, from, to) {
  var root = [];
  var stack = [root];
  for (var k = from; k < to; k++) {
    var t = tokens[k];
    var out = stack[stack.length - 1];
    if (t.nesting === 1) {
      if (t.hidden) {
        stack.push(out); // tight list paragraphs: their inline goes straight into the li
        continue;
      }
      var name = t.type === 'heading_open' ? t.tag : BLOCK_TAGS[t.type] || 'div';
      var attrs = { class: 'md-' + name };
      if (t.type === 'ordered_list_open') {
        var start = t.attrGet('start');
        if (start !== null && /^\d{1,9}$/.test(String(start))) attrs.start = String(start);
      }
      if (t.type === 'th_open' || t.type === 'td_open') {
        var style = t.attrGet('style') || '';
        var align = /text-align:\s*(left|center|right)/.exec(style);
        if (align) attrs.class += ' md-align-' + align[1];
      }
      var node = el(name, attrs);
      out.push(node);
      stack.push(node.children);
    } else if (t.nesting === -1) {
      if (stack.length > 1) stack.pop();
    } else if (t.type === 'inline') {
      var kids = this.inline(t.children || []);
      for (var j = 0; j < kids.length; j++) out.push(kids[j]);
    } else if (t.type === 'fence' || t.type === 'code_block') {
      out.push(el('pre', { class: 'md-pre' }, [el('code', { class: 'md-code-block' }, this.literal(t.content.replace(/\n$/, '')))]));
    } else if (t.type === 'hr') {
      out.push(el('hr', { class: 'md-hr' }));
    } else if (typeof t.content === 'string' && t.content !== '') {
      out.push(el('p', { class: 'md-p' }, this.literal(t.content))); // html_block etc.: text
    }
  }
  return root;
};

// ------------------------------------------------------------------ source building

function sourceOf(segments, cites) {
  var src = '';
  for (var k = 0; k < segments.length; k++) {
    var s = segments[k];
    if (s === null || typeof s !== 'object' || typeof s.reasoning === 'string') continue;
    if (s.cite !== undefined) {
      if (cites.length < PUA_COUNT) {
        src += String.fromCharCode(PUA_FIRST + cites.length);
        cites.push({ cite: String(s.cite), idx: s.idx });
      }
    } else if (typeof s.text === 'string') {
      src += s.text.replace(PUA_RE, '\ufffd');
    }
  }
  return src;
}

function checkMd(md) {
  if (!md || typeof md.parse !== 'function') throw new TypeError('markdown: options.md must be a markdown-it instance (see createMarkdownIt)');
}

/**
 * Render a whole answer (a finished one, or a restored one) as a node tree.
 * @param {Array<object>|string} input parser segments ({text}|{cite, idx}|{reasoning}; reasoning is skipped) or Markdown text
 * @param {{md: object, label?: function(string, number): string}} options
 *   md: a markdown-it instance (createMarkdownIt); label(rawId, idx): the
 *   accessible label of a superscript (default "引用 <idx>"), e.g. "引用 1：<标题>"
 * @returns {Array<object>} nodes
 */
export function renderMarkdownTree(input, options) {
  var opts = options || {};
  checkMd(opts.md);
  var cites = [];
  var src = typeof input === 'string' ? input.replace(PUA_RE, '\ufffd') : sourceOf(Array.isArray(input) ? input : [], cites);
  var tokens = opts.md.parse(src, {});
  return new Builder(cites, opts).blocks(tokens, 0, tokens.length);
}

// ------------------------------------------------------------------ streaming

var BLOCK_PREFIX = /^ {0,3}(?:[-+*=_ ]*|#{1,6}|\d{1,9}[.)]?|`{1,2}|~{1,2}|\|.*|\\)$/;

function topBlocks(tokens) {
  var starts = [];
  for (var k = 0; k < tokens.length; k++) {
    var t = tokens[k];
    if (t.level === 0 && t.nesting !== -1 && t.map) starts.push(k);
  }
  return starts;
}

/** Inline text children of the last inline token (the open paragraph/cell). */
function lastInline(tokens) {
  for (var k = tokens.length - 1; k >= 0; k--) if (tokens[k].type === 'inline') return tokens[k];
  return null;
}

function leftoverDelims(inline) {
  // Delimiters markdown-it left as text: * _ ~~ and backtick runs, in order.
  var runs = [];
  if (inline === null || !inline.children) return runs;
  for (var k = 0; k < inline.children.length; k++) {
    var c = inline.children[k];
    if (c.type !== 'text') continue;
    var re = /\*+|_+|~~+|`+/g;
    var m;
    while ((m = re.exec(c.content)) !== null) runs.push(m[0]);
  }
  return runs;
}

function cutHeldLink(line) {
  // An unclosed "[" / "![" (link or image still being written) or an
  // unfinished "<scheme:..." autolink: the position to hold back from, or -1.
  var open = -1;
  var depth = 0;
  for (var k = line.length - 1; k >= 0; k--) {
    var ch = line.charAt(k);
    if (ch === ']') depth++;
    else if (ch === '[') {
      if (depth === 0) {
        open = k;
        break;
      }
      depth--;
    }
  }
  var cut = -1;
  if (open >= 0) cut = open;
  else {
    // "[text]" at the very end (a "(" or "[" may follow) or "[text](dest" unclosed
    if (line.charAt(line.length - 1) === ']') cut = line.lastIndexOf('[');
    var paren = line.lastIndexOf('](');
    if (paren >= 0) {
      var bal = 0;
      for (var j = paren + 1; j < line.length; j++) {
        if (line.charAt(j) === '(') bal++;
        else if (line.charAt(j) === ')') bal--;
      }
      if (bal > 0) cut = line.lastIndexOf('[', paren);
    }
  }
  if (cut > 0 && line.charAt(cut - 1) === '!') cut--;
  var lt = line.lastIndexOf('<');
  if (lt >= 0 && line.indexOf('>', lt) < 0 && /^<[^\s<>]*$/.test(line.slice(lt)) && (cut < 0 || lt < cut)) cut = lt;
  if (cut >= 0 && line.length - cut > 300) return -1;
  return cut;
}

/**
 * Incremental renderer of one streaming answer.
 *
 *     var s = new MarkdownStream({md: createMarkdownIt(markdownit), label: fn});
 *     s.push(segments);          // as often as the parser emits (cheap: appends)
 *     var u = s.update();        // once per frame: {commit: Node[], tail: Node[]}
 *     var f = s.end({incomplete: false});   // {commit: Node[], tail: [], replace: Node[]|null}
 *
 * `commit` are final top-level blocks, returned once each, in order (append
 * them); `tail` is the preview of the block still being written (replace the
 * previous tail with it). end() renders what is left exactly as the final
 * Markdown (no holding back); with {incomplete: true} a trailing unfinished
 * citation marker (e.g. "[C:", the stream broke inside it) is dropped.
 * Reasoning segments are collected apart: `reasoning` (string).
 * @param {{md: object, label?: function(string, number): string}} options
 */
export function MarkdownStream(options) {
  var opts = options || {};
  checkMd(opts.md);
  this._md = opts.md;
  this._builder = new Builder([], opts);
  this._cites = this._builder.cites;
  this._env = {};
  this._src = ''; // source of the blocks not committed yet
  this._all = ''; // the whole source (a late reference definition re-renders it once)
  this._dirty = false;
  this._ended = false;
  this.reasoning = '';
}

/**
 * Append parser segments (reasoning segments go to `.reasoning`).
 * @param {Array<object>} segments
 */
MarkdownStream.prototype.push = function (segments) {
  if (this._ended || !Array.isArray(segments)) return;
  for (var k = 0; k < segments.length; k++) {
    var s = segments[k];
    if (s !== null && typeof s === 'object' && typeof s.reasoning === 'string') this.reasoning += s.reasoning;
  }
  var add = sourceOf(segments, this._cites);
  if (add !== '') {
    this._src += add;
    this._all += add;
    this._dirty = true;
  }
};

/** The label function for superscripts can change (metadata arrived later). */
MarkdownStream.prototype.setLabel = function (label) {
  this._builder.label = typeof label === 'function' ? label : null;
};

// Commit the complete top-level blocks of this._src; returns their nodes.
MarkdownStream.prototype._commit = function () {
  var tokens = this._md.parse(this._src, this._env);
  var starts = topBlocks(tokens);
  if (starts.length < 2) return { nodes: [], tokens: tokens };
  var last = starts[starts.length - 1];
  var line = tokens[last].map[0];
  var nodes = this._builder.blocks(tokens, 0, last);
  // drop the committed lines from the source
  var pos = 0;
  for (var n = 0; n < line; n++) {
    var nl = this._src.indexOf('\n', pos);
    if (nl < 0) {
      pos = this._src.length;
      break;
    }
    pos = nl + 1;
  }
  this._src = this._src.slice(pos);
  return { nodes: nodes, tokens: null };
};

/**
 * Render what changed since the last call.
 * @returns {{commit: Array<object>, tail: Array<object>, changed: boolean}}
 */
MarkdownStream.prototype.update = function () {
  if (this._ended || !this._dirty) return { commit: [], tail: [], changed: false };
  this._dirty = false;
  var c = this._commit();
  return { commit: c.nodes, tail: this._preview(), changed: true };
};

// The open block, holding back what may still become syntax.
MarkdownStream.prototype._preview = function () {
  var src = this._src;
  var nl = src.lastIndexOf('\n');
  var lineStart = nl + 1;
  var line = src.slice(lineStart);
  // 1. an unfinished line that may still open a block (list, heading, fence, table row, setext/hr)
  if (line !== '' && BLOCK_PREFIX.test(line)) {
    src = src.slice(0, lineStart);
    line = '';
  }
  var tokens = this._md.parse(src, this._env);
  var starts = topBlocks(tokens);
  var lastType = starts.length ? tokens[starts[starts.length - 1]].type : '';
  // 2. a table still being written: hold its unfinished row
  if (lastType === 'table_open' && line !== '') {
    src = src.slice(0, lineStart);
    line = '';
  }
  // 3. a paragraph whose last complete line has pipes may be a table header
  if (lastType === 'paragraph_open') {
    var body = line === '' ? src.replace(/\n$/, '') : src;
    var lastNl = body.lastIndexOf('\n');
    var lastLine = body.slice(lastNl + 1);
    if (line === '' && lastLine.indexOf('|') >= 0) src = body.slice(0, lastNl + 1);
  }
  // 4. unclosed link / image / autolink on the last line
  var ls = src.lastIndexOf('\n', src.length - 2) + 1;
  var cut = cutHeldLink(src.slice(ls));
  if (cut >= 0) src = src.slice(0, ls + cut);
  // 5. trailing delimiter runs, then close what is still open
  var trail = /[*_~`\\!]+$/.exec(src);
  if (trail !== null) src = src.slice(0, trail.index);
  tokens = this._md.parse(src, this._env);
  var runs = leftoverDelims(lastInline(tokens));
  if (runs.length && runs.length <= 6) {
    var closers = '';
    for (var k = runs.length - 1; k >= 0; k--) closers += runs[k].charAt(0) === '`' ? runs[k] : runs[k].slice(0, 3);
    var stripped = src.replace(/\s+$/, '');
    var tried = this._md.parse(stripped + closers, this._env);
    if (leftoverDelims(lastInline(tried)).length === 0) tokens = tried;
  }
  return this._builder.blocks(tokens, 0, tokens.length);
};

/**
 * End of the answer: everything left, rendered as final.
 * @param {{incomplete?: boolean}} [options] incomplete: the stream ended
 *   without message_end; a trailing unfinished marker is dropped
 * @returns {{commit: Array<object>, tail: Array<object>, replace: (Array<object>|null)}}
 *   replace: when not null, the whole answer's nodes, to show instead of everything
 *   shown so far (the answer defines link references, `[x]: https://...`)
 */
MarkdownStream.prototype.end = function (options) {
  if (this._ended) return { commit: [], tail: [], replace: null };
  this._ended = true;
  var incomplete = Boolean(options && options.incomplete);
  var src = incomplete ? dropDanglingMarker(this._src) : this._src;
  var tokens = this._md.parse(src, this._env);
  this._src = '';
  var out = { commit: this._builder.blocks(tokens, 0, tokens.length), tail: [], replace: null };
  // Link reference definitions apply to the whole document, also to blocks committed
  // before the definition arrived: then the whole answer is rendered once more.
  if (this._env.references && Object.keys(this._env.references).length) {
    var all = incomplete ? dropDanglingMarker(this._all) : this._all;
    var whole = this._md.parse(all, {});
    out.replace = this._builder.blocks(whole, 0, whole.length);
  }
  return out;
};

// "…半截回答[C:" / "【C：1，" / "\[C:1" at the end of a broken stream: drop it; so is a
// stream cut inside its opening "<think" tag (the parser releases it as text).
export function dropDanglingMarker(src) {
  if (/^[ \t\r\n]*<(?:t(?:h(?:i(?:n(?:k(?:i(?:n(?:g)?)?)?)?)?)?)?)?$/.test(src)) return '';
  var m = /\\?[\[【［][ \t\u00a0\u202f\u3000]*(?:[CcＣｃ](?:[ \t\u00a0\u202f\u3000]*[:：][ \t\u00a0\u202f\u3000,，、;；\-–~～0-9０-９CcＣｃ:：\\]*)?)?$/.exec(src);
  if (m === null) return src.replace(/\\$/, '');
  return src.slice(0, m.index);
}

// ------------------------------------------------------------------ outputs

var VOID = { br: true, hr: true };

function escapeText(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function escapeAttr(s) {
  return escapeText(s).replace(/"/g, '&quot;');
}

var SAFE_ATTRS = {
  class: true, href: true, target: true, rel: true, start: true, title: true,
  'data-raw-id': true, 'data-idx': true, 'aria-label': true, 'aria-hidden': true,
};

/**
 * Nodes as an HTML string (text and attributes escaped).
 * @param {Array<object>} nodes
 * @returns {string}
 */
export function treeToHtml(nodes) {
  var out = '';
  for (var k = 0; k < nodes.length; k++) {
    var n = nodes[k];
    if (n.type === 'text') {
      out += escapeText(n.text);
      continue;
    }
    out += '<' + n.name;
    var keys = Object.keys(n.attrs || {});
    for (var j = 0; j < keys.length; j++) {
      if (SAFE_ATTRS[keys[j]]) out += ' ' + keys[j] + '="' + escapeAttr(n.attrs[keys[j]]) + '"';
    }
    out += '>';
    if (VOID[n.name]) continue;
    out += treeToHtml(n.children || []) + '</' + n.name + '>';
  }
  return out;
}

/**
 * Append nodes to a DOM parent with createElement / createTextNode only (no
 * innerHTML; attributes from a fixed list; href only when safeLink passes).
 * @param {Array<object>} nodes
 * @param {Node} parent a DOM element or fragment
 * @param {Document} doc
 * @returns {Node} parent
 */
export function appendTree(nodes, parent, doc) {
  for (var k = 0; k < nodes.length; k++) {
    var n = nodes[k];
    if (n.type === 'text') {
      parent.appendChild(doc.createTextNode(n.text));
      continue;
    }
    var node = doc.createElement(n.name);
    var keys = Object.keys(n.attrs || {});
    for (var j = 0; j < keys.length; j++) {
      var key = keys[j];
      if (!SAFE_ATTRS[key]) continue;
      if (key === 'href' && safeLink(n.attrs[key]) === null) continue;
      node.setAttribute(key, String(n.attrs[key]));
    }
    if (!VOID[n.name]) appendTree(n.children || [], node, doc);
    parent.appendChild(node);
  }
  return parent;
}

var RICH_STYLE = {
  'g-cite': 'color:#2563eb;font-size:0.75em;font-weight:600;vertical-align:super;padding:0 1px;line-height:0',
  'g-cite-sep': 'color:#2563eb;font-size:0.75em;vertical-align:super;line-height:0',
  // a citation the verifier found weak support for (verification.js markWeakCitations)
  'is-weak': 'text-decoration:underline dotted;text-underline-offset:2px;opacity:0.75',
  'g-cite-nb': 'white-space:nowrap',
  'md-code': 'font-family:monospace;background:#f2f3f5;padding:0 3px;border-radius:3px',
  'md-pre': 'background:#f6f8fa;padding:8px;border-radius:6px;overflow-x:auto;white-space:pre',
  'md-table': 'border-collapse:collapse',
  'md-th': 'border:1px solid #dee0e3;padding:4px 8px;font-weight:600',
  'md-td': 'border:1px solid #dee0e3;padding:4px 8px',
  'md-link': 'color:#2563eb',
  'md-image-link': 'color:#2563eb',
};

/**
 * Nodes for a WeChat mini program's <rich-text nodes="{{...}}">: text
 * escaped (rich-text decodes entities in text nodes), inline styles for the
 * classes above (rich-text does not see page CSS pseudo-elements), links kept
 * as <a> (rich-text does not navigate: handle taps yourself), attributes
 * limited to class/style/start.
 * @param {Array<object>} nodes
 * @returns {Array<object>}
 */
export function toRichTextNodes(nodes) {
  var out = [];
  for (var k = 0; k < nodes.length; k++) {
    var n = nodes[k];
    if (n.type === 'text') {
      out.push({ type: 'text', text: escapeText(n.text) });
      continue;
    }
    var attrs = {};
    var cls = n.attrs && n.attrs.class ? String(n.attrs.class) : '';
    if (cls) {
      attrs.class = cls;
      var styles = cls.split(' ').map(function (c) {
        return RICH_STYLE[c] || '';
      }).filter(Boolean);
      if (styles.length) attrs.style = styles.join(';');
    }
    if (n.attrs && n.attrs.start) attrs.start = String(n.attrs.start);
    out.push({ name: n.name, attrs: attrs, children: toRichTextNodes(n.children || []) });
  }
  return out;
}

/**
 * Visible text of nodes (what a reader sees; superscripts as their digits).
 * @param {Array<object>} nodes
 * @returns {string}
 */
export function treeText(nodes) {
  var out = '';
  for (var k = 0; k < nodes.length; k++) {
    var n = nodes[k];
    out += n.type === 'text' ? n.text : treeText(n.children || []);
  }
  return out;
}
