/**
 * How a client shows its sources: the panel rows (title, subtitle, the hint
 * that tells same-looking rows apart, link), the sheet of one row (tag, link,
 * the Office and link notices) and the copy text of an answer (the answer and
 * its numbered source list, plain text). No DOM, no wx, ES2017.
 *
 * The rules are shared with the Python client (gcite.stream.panel.source_rows,
 * source_sheet; gcite.stream.render.copy_text) through
 * tests/vectors/source-rows.v1.json and tests/vectors/copy-text.v1.json.
 */
import { subtitleOf, titleOf, urlOf } from './panel.js';
import { TEXT } from './messages.js';

function chunkOf(row) {
  return row && row.chunk !== null && typeof row.chunk === 'object' ? row.chunk : null;
}

/** "rag" or "web" (anything but "web" is the knowledge base). */
export function sourceTypeOf(chunk) {
  return chunk !== null && typeof chunk === 'object' && chunk.source_type === 'web' ? 'web' : 'rag';
}

var PREVIEW_CHARS = 28;

// The chunk text's first PREVIEW_CHARS code points, whitespace runs as one space.
function preview(content) {
  if (typeof content !== 'string') return '';
  var flat = content.split(/[\s\u3000]+/).filter(function (p) { return p !== ''; }).join(' ');
  var chars = Array.from(flat);
  return chars.length > PREVIEW_CHARS ? chars.slice(0, PREVIEW_CHARS).join('') + '…' : flat;
}

/**
 * The hint of a row that looks like another one (same title and subtitle):
 * "第 N 段" when the chunk has a segment_position (a positive integer below
 * 10^6), then the start of its text in quotes, joined by " · "; else
 * "来源编号 <raw id>".
 * @param {{rawId: string, chunk: (object|null)}} row
 * @returns {string}
 */
export function segmentHint(row) {
  var chunk = chunkOf(row);
  var parts = [];
  if (chunk !== null) {
    var pos = chunk.segment_position;
    if (typeof pos === 'number' && Math.floor(pos) === pos && pos > 0 && pos < 1e6) parts.push('第 ' + pos + ' 段');
    var text = preview(chunk.content);
    if (text !== '') parts.push('“' + text + '”');
  }
  return parts.length ? parts.join(' · ') : '来源编号 ' + String(row ? row.rawId : '');
}

/**
 * What each panel row shows: `[{idx, rawId, type, title, subtitle, hint, url,
 * weak, label}]`. `hint` is "" unless another row has the same title and
 * subtitle (segmentHint); `label` is the row's accessible name
 * ("来源 1：标题，副标题，第 2 段").
 * @param {Array<{idx: number, rawId: string, chunk: (object|null)}>} panel buildPanel()
 * @param {Array<string>} [weak] raw ids of weakly supported citations
 * @returns {Array<object>}
 */
export function sourceRows(panel, weak) {
  var list = Array.isArray(panel) ? panel.filter(function (r) { return r !== null && typeof r === 'object'; }) : [];
  var weakSet = new Set((weak || []).map(String));
  var looks = new Map();
  var base = list.map(function (row) {
    var title = titleOf(row);
    var subtitle = subtitleOf(chunkOf(row));
    var key = title + '\u0000' + subtitle;
    looks.set(key, (looks.get(key) || 0) + 1);
    return { row: row, title: title, subtitle: subtitle, key: key };
  });
  return base.map(function (b) {
    var hint = looks.get(b.key) > 1 ? segmentHint(b.row) : '';
    var label = '来源 ' + b.row.idx + '：' + b.title + (b.subtitle ? '，' + b.subtitle : '') + (hint ? '，' + hint : '');
    return {
      idx: b.row.idx,
      rawId: String(b.row.rawId),
      type: sourceTypeOf(chunkOf(b.row)),
      title: b.title,
      subtitle: b.subtitle,
      hint: hint,
      url: urlOf(b.row),
      weak: weakSet.has(String(b.row.rawId)),
      label: label,
    };
  });
}

/**
 * True when the URL's path ends in .doc, .docx or .pdf (query and fragment
 * ignored, case-insensitive).
 * @param {*} url
 * @returns {boolean}
 */
export function isOfficeUrl(url) {
  if (typeof url !== 'string') return false;
  var path = url.trim().split('#')[0].split('?')[0].toLowerCase();
  return /\.(docx?|pdf)$/.test(path);
}

/**
 * The sheet of one panel row: `{type, tag, title, subtitle, url, office,
 * notice, linkHint, content}`.
 * - url: the link "完整原文" opens (urlOf), or null
 * - office: a knowledge-base Office/PDF link; notice: TEXT.officeNotice then
 * - linkHint: why there is no button target: TEXT.badLink when the chunk has
 *   a link that is not an http(s) URL, TEXT.noLink when it has none, else ""
 * - content: the chunk text, or TEXT.noContent when it is blank
 * @param {{idx: number, rawId: string, chunk: (object|null)}} row
 * @returns {object}
 */
export function sourceSheet(row) {
  var chunk = chunkOf(row);
  var type = sourceTypeOf(chunk);
  var url = urlOf(row);
  var given = '';
  if (chunk !== null) {
    given = typeof chunk.url === 'string' && chunk.url.trim() !== '' ? chunk.url.trim() : typeof chunk.source_file_url === 'string' ? chunk.source_file_url.trim() : '';
  }
  var office = type === 'rag' && url !== null && isOfficeUrl(url);
  var content = chunk !== null && typeof chunk.content === 'string' ? chunk.content : '';
  return {
    type: type,
    tag: type === 'web' ? TEXT.web : TEXT.rag,
    title: titleOf(row || { rawId: '', chunk: null }),
    subtitle: subtitleOf(chunk),
    url: url,
    office: office,
    notice: office ? TEXT.officeNotice : '',
    linkHint: url !== null ? '' : given !== '' ? TEXT.badLink : TEXT.noLink,
    content: content.trim() !== '' ? content : TEXT.noContent,
  };
}

/**
 * The chunk text as the sheet shows it: list markers at the start of a line
 * ("- ", "* ", "+ ") shown as "• ". Same length, so offsets into the chunk
 * text (the supporting sentence) still hold.
 * @param {string} content
 * @returns {string}
 */
export function sheetText(content) {
  if (typeof content !== 'string') return '';
  return content.replace(/^([ \t]*)[-*+]([ \t])/gm, '$1•$2');
}

// -- copy text ---------------------------------------------------------------

var CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

// One line of Markdown as plain text: block markers (headings, quotes, list
// bullets, fences, table rules) and inline syntax (emphasis, code, links,
// images) removed; list numbers and table cells kept.
function plainLine(line) {
  var s = line;
  if (/^\s*(`{3,}|~{3,})/.test(s)) return null; // a code fence line
  if (/^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(s) && s.indexOf('-') >= 0 && s.indexOf('|') >= 0) return null;
  if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(s)) return '';
  s = s.replace(/^\s{0,3}#{1,6}\s+/, '');
  s = s.replace(/^(\s{0,3}>\s?)+/, '');
  s = s.replace(/^(\s*)[-*+]\s+\[[ xX]\]\s+/, '$1');
  s = s.replace(/^(\s*)[-*+]\s+/, '$1• ');
  s = s.replace(/!\[([^\]]*)\]\(([^()\s]*)\)/g, '$1');
  s = s.replace(/\[([^\]]+)\]\((https?:\/\/[^()\s]+)\)/g, '$1（$2）');
  s = s.replace(/\[([^\]]+)\]\(([^()\s]*)\)/g, '$1');
  s = s.replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, '$2');
  s = s.replace(/(^|[^\w*])\*(?=\S)([^*]*?\S)\*(?!\w)/g, '$1$2');
  s = s.replace(/~~(?=\S)([\s\S]*?\S)~~/g, '$1');
  s = s.replace(/`([^`]+)`/g, '$1');
  if (/^\s*\|.*\|\s*$/.test(s)) {
    s = s.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map(function (c) { return c.trim(); }).join('\t');
  }
  return s;
}

function sourceLine(row) {
  var title = titleOf(row).split(/\s+/).filter(Boolean).join(' ');
  var subtitle = subtitleOf(chunkOf(row));
  var url = urlOf(row);
  return '[' + row.idx + '] ' + title + (subtitle ? ' · ' + subtitle : '') + (url ? ' ' + url : '');
}

/**
 * The copy text of an answer: the answer as plain text (Markdown syntax
 * removed line by line, reasoning left out, each citation "[N]", control
 * characters removed), then a blank line, "来源：" and one line per source
 * "[N] 标题 · 副标题 https://…" (the panel's rows; a cited index missing from
 * the panel gets "来源 <raw id>").
 * @param {Array<object>} segments parser segments
 * @param {Array<{idx: number, rawId: string, chunk: (object|null)}>} [panel]
 * @returns {string}
 */
export function copyText(segments, panel) {
  var body = '';
  var cited = [];
  var list = Array.isArray(segments) ? segments : [];
  for (var k = 0; k < list.length; k++) {
    var s = list[k];
    if (s === null || typeof s !== 'object' || typeof s.reasoning === 'string') continue;
    if (s.cite !== undefined) {
      body += '[' + s.idx + ']';
      cited.push({ idx: s.idx, rawId: String(s.cite) });
    } else if (typeof s.text === 'string') body += s.text;
  }
  var lines = [];
  body.replace(CONTROL, '').replace(/\r\n?/g, '\n').split('\n').forEach(function (line) {
    var p = plainLine(line);
    if (p !== null) lines.push(p.replace(/\s+$/, ''));
  });
  var text = lines.join('\n').replace(/\n{3,}/g, '\n\n').replace(/^\n+|\n+$/g, '');
  var rows = new Map();
  (Array.isArray(panel) ? panel : []).forEach(function (row) {
    if (row !== null && typeof row === 'object' && !rows.has(row.idx)) rows.set(row.idx, row);
  });
  cited.forEach(function (c) {
    if (!rows.has(c.idx)) rows.set(c.idx, { idx: c.idx, rawId: c.rawId, chunk: null });
  });
  if (rows.size === 0) return text;
  var order = Array.from(rows.keys()).sort(function (a, b) { return a - b; });
  var out = order.map(function (idx) { return sourceLine(rows.get(idx)).replace(CONTROL, ''); });
  return text + '\n\n' + TEXT.sources + '：\n' + out.join('\n');
}


