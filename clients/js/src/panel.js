/**
 * Panel model: the cited chunks in display order, each once (mobile seed §4.3
 * "摘要栏", §5.1), and the chunkMetadataMap (mobile seed §3.3). The rules —
 * usable chunks, the retriever_resources fallback, each row's title,
 * subtitle and link, and the URL rule — are docs/stream-contract.md §6-§7,
 * shared with the Python client (gcite.stream.panel).
 */

function hasOwn(obj, key) {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

/**
 * The id of a chunk_metadata item as a string, or null: a non-empty string,
 * or an integer written in decimal.
 * @param {*} chunk
 * @returns {string|null}
 */
export function chunkId(chunk) {
  if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) return null;
  var v = chunk.id;
  if (typeof v === 'string') return v === '' ? null : v;
  if (typeof v === 'number' && Number.isInteger(v)) return String(v);
  return null;
}

/**
 * Index chunks by their `id` (as a string): the seed's chunkMetadataMap.
 *
 * Accepts an array of UnifiedChunk objects, a Map, or a plain object keyed by
 * id. Items that are not objects or have no id are skipped; a repeated id
 * keeps the first chunk.
 * @param {Array<object>|Map<string, object>|Object<string, object>|null} source
 * @returns {Map<string, object>}
 */
export function chunkMap(source) {
  var map = new Map();
  if (source === null || source === undefined) return map;
  if (Array.isArray(source)) {
    for (var k = 0; k < source.length; k++) {
      var id = chunkId(source[k]);
      if (id !== null && !map.has(id)) map.set(id, source[k]);
    }
    return map;
  }
  if (source instanceof Map) {
    source.forEach(function (v, key) {
      if (v !== null && typeof v === 'object') map.set(String(key), v);
    });
    return map;
  }
  if (typeof source === 'object') {
    for (var key in source) {
      if (hasOwn(source, key) && source[key] !== null && typeof source[key] === 'object') {
        map.set(key, source[key]);
      }
    }
  }
  return map;
}

/**
 * The panel: cited chunks in display order, each once.
 *
 * A citation whose raw id has no metadata gets a row with `chunk: null`
 * (renderers show "来源 <id>"), so every superscript has its row.
 * @param {Array<[string, number]>} citations parser.citations
 * @param {Map<string, object>|Object<string, object>|Array<object>} chunkMetadataById
 * @returns {Array<{idx: number, rawId: string, chunk: (object|null)}>}
 */
export function buildPanel(citations, chunkMetadataById) {
  var map = chunkMap(chunkMetadataById);
  var seen = new Set();
  var rows = [];
  var list = Array.isArray(citations) ? citations.slice() : [];
  list.sort(function (a, b) {
    return a[1] - b[1];
  });
  for (var k = 0; k < list.length; k++) {
    var raw = String(list[k][0]);
    if (seen.has(raw)) continue;
    seen.add(raw);
    var chunk = map.get(raw);
    rows.push({ idx: list[k][1], rawId: raw, chunk: chunk === undefined ? null : chunk });
  }
  return rows;
}

function str(v) {
  return typeof v === 'string' ? v : '';
}

/**
 * Fallback metadata from `message_end.metadata.retriever_resources` (mobile
 * seed §3.4 "容错"; Dify RetrievalSourceMetadata, dify-protocol.md §1.6),
 * mapped to UnifiedChunk-like objects: id from doc_metadata.chunk_id (gcite's
 * service), else `position` when a positive integer, else the 1-based place
 * in the list; source_type "rag" unless doc_metadata says "web";
 * document_title from doc_metadata.document_title, document_name or title;
 * display_subtitle from doc_metadata.display_subtitle or dataset_name; url
 * from doc_metadata.url or source_file_url. Only strings count as text.
 * Non-object items are skipped.
 * @param {Array<object>} resources
 * @returns {Array<object>} UnifiedChunk-like objects
 */
export function chunksFromRetrieverResources(resources) {
  var out = [];
  if (!Array.isArray(resources)) return out;
  for (var k = 0; k < resources.length; k++) {
    var r = resources[k];
    if (r === null || typeof r !== 'object') continue;
    var meta = r.doc_metadata !== null && typeof r.doc_metadata === 'object' ? r.doc_metadata : {};
    // G-Cite fields written by the gcite service win, so the raw ids of the
    // answer's markers match (same rule as the Python client).
    var url = str(meta.url) || str(meta.source_file_url);
    var pos = r.position;
    var id = typeof pos === 'number' && Number.isInteger(pos) && pos > 0 ? String(pos) : String(k + 1);
    var own = chunkId({ id: meta.chunk_id });
    if (own !== null) id = own;
    var sourceType = meta.source_type === 'web' ? 'web' : 'rag';
    var title = str(meta.document_title) || str(r.document_name) || str(r.title);
    var subtitle = typeof meta.display_subtitle === 'string' ? meta.display_subtitle : str(r.dataset_name);
    out.push({
      id: id,
      source_type: sourceType,
      content: str(r.content),
      document_title: title,
      document_name: str(r.document_name),
      dataset_name: str(r.dataset_name),
      display_subtitle: subtitle,
      url: url,
      source_file_url: str(meta.source_file_url),
      score: typeof r.score === 'number' ? r.score : null,
      segment_position: typeof r.segment_position === 'number' ? r.segment_position : 0,
    });
  }
  return out;
}

// -- the row's view and the URL rule (docs/stream-contract.md §6, §7) --------

var URL_FORBIDDEN = /[\u0000-\u0020\u007f-\u009f\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff\\]/;
var URL_RE = /^https?:\/\/([^\/?#@:\[\]]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?([\/?#][\s\S]*)?$/i;

/**
 * The URL rule (fails closed): the URL, trimmed of ASCII whitespace, when it
 * may become a link, else null. Accepted: an absolute http or https URL
 * (scheme in any case), "//", a host, optionally a port of 1-5 digits, then
 * optionally a path, query or fragment. Refused: other schemes, relative
 * URLs, user info (any "@" in the authority, "https://@evil.example"), an
 * empty host, backslashes, and control, space, invisible formatting or
 * bidirectional characters anywhere.
 * @param {*} url
 * @returns {string|null}
 */
export function safeUrl(url) {
  if (typeof url !== 'string') return null;
  var u = url.replace(/^[ \t\n\r\f]+|[ \t\n\r\f]+$/g, '');
  if (u === '' || URL_FORBIDDEN.test(u) || !URL_RE.test(u)) return null;
  return u;
}

function chunkOf(row) {
  return row && row.chunk !== null && typeof row.chunk === 'object' ? row.chunk : null;
}

/**
 * The title of a panel row: the first non-blank string of document_title,
 * document_name, title; else "来源 <raw id>" (no metadata for that id).
 * @param {{rawId: string, chunk: (object|null)}} row
 * @returns {string}
 */
export function titleOf(row) {
  var chunk = chunkOf(row);
  if (chunk !== null) {
    var keys = ['document_title', 'document_name', 'title'];
    for (var k = 0; k < keys.length; k++) {
      var v = str(chunk[keys[k]]);
      if (v.trim() !== '') return v;
    }
  }
  return '来源 ' + String(row ? row.rawId : '');
}

/**
 * The subtitle line of a chunk: `display_subtitle` trimmed (platform seed
 * §3.6, mobile seed §5.4: no client-side fallback chain); "" means "no
 * subtitle row".
 * @param {object} chunk UnifiedChunk
 * @returns {string}
 */
export function subtitleOf(chunk) {
  if (chunk === null || typeof chunk !== 'object') return '';
  var s = chunk.display_subtitle;
  return typeof s === 'string' ? s.trim() : '';
}

/**
 * The link of a panel row: safeUrl(url), else safeUrl(source_file_url), else null.
 * @param {{chunk: (object|null)}} row
 * @returns {string|null}
 */
export function urlOf(row) {
  var chunk = chunkOf(row);
  if (chunk === null) return null;
  return safeUrl(chunk.url) || safeUrl(chunk.source_file_url);
}

/**
 * What a client shows for each row (the stream contract's panel output):
 * `[{idx, raw_id, source_type, title, subtitle, url}]`.
 * @param {Array<{idx: number, rawId: string, chunk: (object|null)}>} panel
 * @returns {Array<object>}
 */
export function panelView(panel) {
  var out = [];
  for (var k = 0; k < panel.length; k++) {
    var row = panel[k];
    var chunk = chunkOf(row);
    out.push({
      idx: row.idx,
      raw_id: row.rawId,
      source_type: chunk !== null ? str(chunk.source_type) : '',
      title: titleOf(row),
      subtitle: subtitleOf(chunk),
      url: urlOf(row),
    });
  }
  return out;
}
