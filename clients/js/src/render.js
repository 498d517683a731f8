/**
 * Safe rendering helpers: strings out, for an H5 page (innerHTML) and for a
 * mini program's rich-text `nodes` string. All text is escaped; URLs are
 * checked before use. Markup follows the mobile seed §4.3 (DOM structure) and
 * §5.2/§5.4 (icons by source_type, display_subtitle as is).
 */
import { safeUrl, subtitleOf, titleOf } from './panel.js';
import { isOfficeUrl } from './sources.js';

// The panel rules and the URL rule are the stream contract's (docs/stream-contract.md).
export { isOfficeUrl, safeUrl, subtitleOf, titleOf };

var ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/**
 * Escape text for HTML element content and quoted attribute values.
 * @param {*} s any value (null/undefined -> "")
 * @returns {string}
 */
export function escapeHtml(s) {
  if (s === null || s === undefined) return '';
  return String(s).replace(/[&<>"']/g, function (c) {
    return ESCAPES[c];
  });
}

function citeHtml(raw, idx) {
  var i = escapeHtml(idx);
  return '<sup class="g-cite" data-raw-id="' + escapeHtml(raw) + '" data-idx="' + i + '">' + i + '</sup>';
}

/**
 * Answer segments as HTML: text escaped with newlines as <br>, each citation
 * as `<sup class="g-cite" data-raw-id="7" data-idx="1">1</sup>` (seed §4.3).
 * @param {Array<{text: string}|{cite: string, idx: number}>} segments
 * @returns {string}
 */
export function renderSegmentsHtml(segments) {
  var out = '';
  if (!Array.isArray(segments)) return out;
  for (var k = 0; k < segments.length; k++) {
    var s = segments[k];
    if (s === null || typeof s !== 'object') continue;
    if (s.cite !== undefined) out += citeHtml(s.cite, s.idx);
    else if (s.text !== undefined) out += escapeHtml(s.text).replace(/\r\n|\r|\n/g, '<br>');
  }
  return out;
}

function str(v) {
  return typeof v === 'string' ? v : '';
}

/**
 * The citation panel (摘要栏) as HTML per seed §4.3; "" for an empty panel
 * (no panel without citations, seed §5.1). One `div.g-cite-item` per row with
 * data-raw-id and data-source-type, the display index in <sup>, the icon
 * (fa-globe for "web", fa-file-lines otherwise), the title (a link only for
 * a safe http(s) `url` or `source_file_url`) and the subtitle when non-empty.
 * Same markup as the Python renderer (gcite.stream.render.render_panel_html).
 * @param {Array<{idx: number, rawId: string, chunk: (object|null)}>} panel buildPanel()
 * @returns {string}
 */
export function renderPanelHtml(panel) {
  if (!Array.isArray(panel) || panel.length === 0) return '';
  var out = '<div class="citation-panel">';
  for (var k = 0; k < panel.length; k++) {
    var row = panel[k];
    if (row === null || typeof row !== 'object') continue;
    var chunk = row.chunk !== null && typeof row.chunk === 'object' ? row.chunk : null;
    var sourceType = chunk !== null ? str(chunk.source_type) : '';
    var icon = sourceType === 'web' ? 'fa-globe' : 'fa-file-lines';
    var title = escapeHtml(titleOf(row));
    var url = chunk !== null ? safeUrl(chunk.url) || safeUrl(chunk.source_file_url) : null;
    if (url !== null) {
      title = '<a class="g-cite-item-link" href="' + escapeHtml(url) + '" target="_blank" rel="noopener noreferrer">' + title + '</a>';
    }
    var sub = subtitleOf(chunk);
    out +=
      '<div class="g-cite-item" data-raw-id="' + escapeHtml(row.rawId) + '" data-source-type="' + escapeHtml(sourceType) + '">' +
      '<sup>' + escapeHtml(row.idx) + '</sup>' +
      '<i class="fa-solid ' + icon + ' g-cite-item-icon"></i>' +
      '<span class="g-cite-item-title">' + title + '</span>' +
      (sub !== '' ? '<span class="g-cite-item-subtitle">' + escapeHtml(sub) + '</span>' : '') +
      '</div>';
  }
  return out + '</div>';
}
