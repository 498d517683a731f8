/**
 * Panel model: the cited chunks in display order, each once (mobile seed §4.3
 * "摘要栏", §5.1), and the chunkMetadataMap (mobile seed §3.3).
 */

function hasOwn(obj, key) {
  return Object.prototype.hasOwnProperty.call(obj, key);
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
      var c = source[k];
      if (c === null || typeof c !== 'object') continue;
      if (c.id === undefined || c.id === null || c.id === '') continue;
      var id = String(c.id);
      if (!map.has(id)) map.set(id, c);
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
  return typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v);
}

/**
 * Fallback metadata from `message_end.metadata.retriever_resources` (mobile
 * seed §3.4 "容错"; Dify RetrievalSourceMetadata, dify-protocol.md §1.6),
 * mapped to UnifiedChunk-like objects: id from `position` (or the 1-based
 * index when missing), source_type "rag", document_title from
 * document_name/title, display_subtitle from dataset_name, url from
 * doc_metadata.source_file_url. Non-object items are skipped.
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
    var id = typeof pos === 'number' || (typeof pos === 'string' && pos !== '') ? String(pos) : String(k + 1);
    if (meta.chunk_id !== undefined && meta.chunk_id !== null && String(meta.chunk_id) !== '') id = String(meta.chunk_id);
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
      score: typeof r.score === 'number' ? r.score : 0,
      segment_position: typeof r.segment_position === 'number' ? r.segment_position : 0,
    });
  }
  return out;
}
