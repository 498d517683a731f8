/**
 * The citation verifier's report on the client side (issue 15):
 * `message_end.metadata.gcite_verification`, written by the service when an
 * answer ends (gcite.verify; Dify clients ignore the key):
 *
 *   {"version": 1, "threshold": 0.45,
 *    "sentences": [{"index": 0, "text": "…", "start": 0, "end": 11,
 *                   "citations": [{"id": "2", "score": 0.83, "supported": true,
 *                                  "support": {"text": "…", "start": 261, "end": 283}}]}],
 *    "weak": [{"sentence": 0, "id": "2"}], "checked": 3, "supported": 2,
 *    "answers_question": false,
 *    "answering": {"parts": [{"text": "…多少钱", "types": ["money"], "answered": false,
 *                             "refused": false}], "min_cover": 0.25,
 *                  "outranked_by": null}}
 *
 * Two dimensions: each citation *supported* by its chunk (weak otherwise), and
 * the answer *answering the question* (`answers_question`: false when the
 * verifier found a part of the question the answer gives no answer to - the
 * type of value asked for, or its words, missing - or when every part is
 * answered but a knowledge-base chunk ranked above every cited one answers a
 * part better than the cited chunks do (`answering.outranked_by`: that chunk's
 * id, else null; the notice then names no part); null when not judged).
 *
 * Per cited chunk the best-scoring citation counts (a chunk cited by two
 * sentences is shown by its best support): it is weak when even that one is
 * not supported, and its supporting sentence is the span to highlight in the
 * sheet. Offsets in the report count code points (Python); the span returned
 * here counts UTF-16 code units (JavaScript strings) and is checked against
 * the chunk text, so a stale or hostile report never highlights the wrong text.
 *
 * No DOM, no wx, no dependencies: the H5 page and the WeChat mini program
 * component (through clients/miniprogram/scripts/build-client.mjs) use it alike.
 * ES2017.
 */

/** The line the sheet shows for a citation whose support is weak. */
export var WEAK_SUPPORT_TEXT = '该来源未能直接支持这句话';

/** The notice under an answer the verifier found not to answer the question. */
export var NOT_ANSWERED_TEXT = '可能未回答所问的问题';

function isObject(x) {
  return x !== null && typeof x === 'object' && !Array.isArray(x);
}

/**
 * The verification report of a `message_end.metadata` object, or null when
 * there is none (verifier off, an older service, a Dify backend).
 * @param {object|null|undefined} metadata
 * @returns {object|null}
 */
export function verificationOf(metadata) {
  if (!isObject(metadata)) return null;
  var report = metadata.gcite_verification;
  return isObject(report) && Array.isArray(report.sentences) ? report : null;
}

// The raw id of a citation: a non-empty string, or an integer written in decimal.
function citeId(v) {
  if (typeof v === 'string') return v === '' ? null : v;
  if (typeof v === 'number' && Number.isInteger(v)) return String(v);
  return null;
}

/**
 * Per raw chunk id, the best-scoring citation of the report (the display rule,
 * tests/vectors/verification-display.v1.json, shared with the Python client
 * gcite.verify.terminal): sentences and citations that are not objects,
 * citations without an id (a non-empty string or an integer) are skipped; a
 * score that is not a finite number counts 0; a later citation of the same id
 * wins only with a higher score. `supported` is true, false (weak) or null
 * (not judged: neither highlighted nor marked weak).
 * @param {object|null} report
 * @returns {Map<string, {id: string, score: number, supported: (boolean|null), support: (object|null)}>}
 */
export function bestSupport(report) {
  var best = new Map();
  var sentences = isObject(report) && Array.isArray(report.sentences) ? report.sentences : [];
  for (var k = 0; k < sentences.length; k++) {
    var cites = isObject(sentences[k]) && Array.isArray(sentences[k].citations) ? sentences[k].citations : [];
    for (var j = 0; j < cites.length; j++) {
      var c = cites[j];
      if (!isObject(c)) continue;
      var id = citeId(c.id);
      if (id === null) continue;
      var score = typeof c.score === 'number' && isFinite(c.score) ? c.score : 0;
      var prev = best.get(id);
      if (prev && !(score > prev.score)) continue;
      best.set(id, {
        id: id,
        score: score,
        supported: c.supported === true ? true : c.supported === false ? false : null,
        support: isObject(c.support) ? c.support : null,
      });
    }
  }
  return best;
}

/**
 * The verification display of a report: per cited raw id, in report order,
 * `{id, weak, score, support}` — weak: the verifier found no support;
 * support: the supporting sentence (a non-blank string) of a supported
 * citation, else null.
 * @param {object|null} report
 * @returns {Array<{id: string, weak: boolean, score: number, support: (string|null)}>}
 */
export function supportDisplay(report) {
  var out = [];
  bestSupport(report).forEach(function (cite, id) {
    var text = cite.support !== null && typeof cite.support.text === 'string' && cite.support.text.trim() !== '' ? cite.support.text : null;
    out.push({ id: id, weak: cite.supported === false, score: cite.score, support: cite.supported === true ? text : null });
  });
  return out;
}

/**
 * Raw ids of the cited chunks whose support is weak, in report order.
 * @param {object|null} report
 * @returns {Array<string>}
 */
export function weakIds(report) {
  var out = [];
  bestSupport(report).forEach(function (cite, id) {
    if (cite.supported === false) out.push(id);
  });
  return out;
}

// UTF-16 index of the code point `cp` of `text` (-1 past the end).
function utf16Index(text, cp) {
  var i = 0;
  for (var n = 0; n < cp; n++) {
    if (i >= text.length) return -1;
    var c = text.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < text.length ? 2 : 1;
  }
  return i;
}

/**
 * Where the supporting sentence `support` ({text, start, end}) is in
 * `content`, in UTF-16 code units; null when it is not there.
 * The report's offsets are tried as code units, then as code points; else the
 * first occurrence of its text.
 * @param {string} content the chunk text
 * @param {{text: string, start: number, end: number}|null} support
 * @returns {{start: number, end: number, text: string}|null}
 */
export function supportSpan(content, support) {
  if (typeof content !== 'string' || content === '' || !isObject(support)) return null;
  var text = typeof support.text === 'string' ? support.text : '';
  if (text.trim() === '') return null;
  var start = Number(support.start);
  var end = Number(support.end);
  if (start >= 0 && end > start && Math.floor(start) === start && Math.floor(end) === end) {
    if (content.slice(start, end) === text) return { start: start, end: end, text: text };
    var s16 = utf16Index(content, start);
    var e16 = utf16Index(content, end);
    if (s16 >= 0 && e16 > s16 && content.slice(s16, e16) === text) return { start: s16, end: e16, text: text };
  }
  var at = content.indexOf(text);
  return at >= 0 ? { start: at, end: at + text.length, text: text } : null;
}

/**
 * What the sheet shows for one cited chunk.
 * - checked: the report names this chunk
 * - weak: checked and not supported (dotted superscript, WEAK_SUPPORT_TEXT)
 * - span: the supporting sentence in `content` (only when supported), or null
 * @param {object|null} report
 * @param {string|number} rawId
 * @param {string} content the chunk text
 * @returns {{checked: boolean, weak: boolean, score: (number|null), span: (object|null)}}
 */
export function chunkSupport(report, rawId, content) {
  var cite = bestSupport(report).get(String(rawId));
  if (!cite) return { checked: false, weak: false, score: null, span: null };
  return {
    checked: true,
    weak: cite.supported === false,
    score: cite.score,
    span: cite.supported === true ? supportSpan(content, cite.support) : null,
  };
}

/**
 * The chunk text cut around the supporting sentence: [{text, support}], the
 * pieces in order (one piece when there is no span). Text only.
 * @param {string} content
 * @param {{start: number, end: number}|null} span from supportSpan
 * @returns {Array<{text: string, support: boolean}>}
 */
export function supportParts(content, span) {
  var text = typeof content === 'string' ? content : '';
  if (!span || !(span.start >= 0 && span.end > span.start && span.end <= text.length)) {
    return text === '' ? [] : [{ text: text, support: false }];
  }
  var out = [];
  if (span.start > 0) out.push({ text: text.slice(0, span.start), support: false });
  out.push({ text: text.slice(span.start, span.end), support: true });
  if (span.end < text.length) out.push({ text: text.slice(span.end), support: false });
  return out;
}

/**
 * A copy of a rendered node tree (markdown.js) whose superscripts of the
 * `weak` raw ids carry the class "is-weak" and the title WEAK_SUPPORT_TEXT
 * (the dotted superscript). Other nodes are shared, not copied.
 * @param {Array<object>} nodes
 * @param {Array<string>|Set<string>} weak raw ids
 * @returns {Array<object>}
 */
export function markWeakCitations(nodes, weak) {
  var set = weak instanceof Set ? weak : new Set((weak || []).map(String));
  if (set.size === 0 || !Array.isArray(nodes)) return nodes;
  var out = [];
  for (var k = 0; k < nodes.length; k++) {
    var n = nodes[k];
    if (!isObject(n) || n.type === 'text') {
      out.push(n);
      continue;
    }
    var attrs = n.attrs || {};
    var cls = String(attrs.class || '');
    if (n.name === 'sup' && cls.split(' ').indexOf('g-cite') >= 0 && set.has(String(attrs['data-raw-id']))) {
      var marked = Object.assign({}, attrs, { title: WEAK_SUPPORT_TEXT });
      if (cls.split(' ').indexOf('is-weak') < 0) marked.class = cls + ' is-weak';
      out.push(Object.assign({}, n, { attrs: marked }));
    } else if (Array.isArray(n.children) && n.children.length) {
      out.push(Object.assign({}, n, { children: markWeakCitations(n.children, set) }));
    } else {
      out.push(n);
    }
  }
  return out;
}

/**
 * True when the tree has a superscript of one of the `weak` raw ids.
 * @param {Array<object>} nodes
 * @param {Array<string>|Set<string>} weak
 * @returns {boolean}
 */
export function hasWeakCitation(nodes, weak) {
  var set = weak instanceof Set ? weak : new Set((weak || []).map(String));
  if (set.size === 0 || !Array.isArray(nodes)) return false;
  for (var k = 0; k < nodes.length; k++) {
    var n = nodes[k];
    if (!isObject(n) || n.type === 'text') continue;
    var attrs = n.attrs || {};
    if (n.name === 'sup' && String(attrs.class || '').split(' ').indexOf('g-cite') >= 0 && set.has(String(attrs['data-raw-id']))) return true;
    if (hasWeakCitation(n.children, set)) return true;
  }
  return false;
}

/**
 * The notice under an answer (the display rule, tests/vectors/answer-notice.v1.json,
 * shared with the Python client gcite.verify.terminal.answer_notice): when the
 * report says `answers_question: false`, `notice` is NOT_ANSWERED_TEXT and `parts`
 * the question parts it found unanswered (non-blank strings of `answering.parts`
 * whose `answered` is not true and `refused` is not true, at most 3, each cut to 40
 * characters); otherwise `{notice: null, parts: []}`. Anything else (no report, a
 * malformed one, `answers_question` true, null or not a boolean) shows nothing.
 * @param {object|null} report
 * @returns {{notice: (string|null), parts: Array<string>}}
 */
export function answerNotice(report) {
  if (!isObject(report) || report.answers_question !== false) return { notice: null, parts: [] };
  var answering = isObject(report.answering) ? report.answering : null;
  var parts = answering && Array.isArray(answering.parts) ? answering.parts : [];
  var out = [];
  for (var k = 0; k < parts.length && out.length < 3; k++) {
    var p = parts[k];
    if (!isObject(p) || p.answered === true || p.refused === true) continue;
    if (typeof p.text !== 'string' || p.text.trim() === '') continue;
    var text = p.text.trim();
    out.push(Array.from(text).length > 40 ? Array.from(text).slice(0, 39).join('') + '…' : text);
  }
  return { notice: NOT_ANSWERED_TEXT, parts: out };
}

/**
 * The notice as one line of text: NOT_ANSWERED_TEXT, then the unanswered parts
 * quoted ("可能未回答所问的问题：“…”、“…”"); '' when there is no notice.
 * The terminal prints the same after "⚠ " (gcite.verify.terminal.notice_line).
 * @param {object|null} report
 * @returns {string}
 */
export function answerNoticeText(report) {
  var shown = answerNotice(report);
  if (shown.notice === null) return '';
  var named = shown.parts.map(function (p) { return '“' + p + '”'; }).join('、');
  return shown.notice + (named ? '：' + named : '');
}
