/**
 * Incremental citation parser with idMap (../shared/spec/citation-markers.md
 * §2-§6; mobile seed §4.1 stream buffer, §4.2 idMap).
 *
 * Feed the answer as arbitrary deltas; get back segments:
 *   {text: string}            literal text (adjacent text segments merged)
 *   {cite: string, idx: int}  one citation: raw chunk id and display index
 *
 * Cost is linear: each character is scanned once, plus at most `maxHold`
 * characters re-read per held opener.
 */
import { FAIL, MATCH, MORE, isOpener, matchMarker } from './grammar.js';

// Scanner modes (spec §4: code is literal).
var NORMAL = 0;
var INLINE = 1; // inside an inline code span
var FENCE = 2; // inside a fenced code block

/**
 * Streaming marker parser.
 *
 * @param {{knownIds?: (string[]|null), maxHold?: number}} [options]
 *   knownIds: ids of `chunk_metadata` (null: no metadata, every well-formed id
 *   is accepted); maxHold: the longest text held back from an opener, in
 *   UTF-16 units (default 32; a marker longer than this is literal text).
 * @throws {TypeError} when knownIds is not an array/null or maxHold < 2.
 */
export class CitationParser {
  constructor(options) {
    var opts = options || {};
    var known = opts.knownIds === undefined ? null : opts.knownIds;
    var maxHold = opts.maxHold === undefined ? 32 : opts.maxHold;
    if (typeof maxHold !== 'number' || !(maxHold >= 2) || maxHold !== Math.floor(maxHold)) {
      throw new TypeError('maxHold must be an integer >= 2');
    }
    this._known = null;
    this.setKnownIds(known);
    this._maxHold = maxHold;
    this._buf = ''; // unconsumed text; non-empty only while holding an opener
    this._mode = NORMAL;
    this._lineStart = true; // the next character starts a line
    this._run = 0; // length of the backtick/tilde run being read
    this._runChar = ''; // "`" or "~"
    this._runAtLineStart = false;
    this._spanLen = 0; // backtick count of the open inline span
    this._fenceChar = '';
    this._fenceLen = 0;
    this._idMap = new Map(); // raw id -> display index, insertion ordered
    this._invalid = [];
    this._lastCite = null; // raw id of the last emitted segment if it is a cite
    this._closed = false;
  }

  /** `[[rawId, idx], ...]`, one entry per distinct cited chunk, by idx. */
  get citations() {
    var out = [];
    this._idMap.forEach(function (idx, raw) {
      out.push([raw, idx]);
    });
    return out;
  }

  /** Raw ids dropped as invalid, in order of appearance (repeats kept). */
  get invalid() {
    return this._invalid.slice();
  }

  /** The text currently held back (never longer than maxHold). */
  get held() {
    return this._buf;
  }

  /**
   * Replace the valid ids for markers completed from now on (chunk_metadata
   * that arrives after the answer started, which is unusual). Citations
   * already emitted are final (spec §5).
   * @param {string[]|null} knownIds
   * @throws {TypeError} when knownIds is not an array or null
   */
  setKnownIds(knownIds) {
    if (knownIds !== null && !Array.isArray(knownIds)) {
      throw new TypeError('knownIds must be an array of strings or null');
    }
    if (knownIds === null) {
      this._known = null;
      return;
    }
    this._known = new Set();
    for (var k = 0; k < knownIds.length; k++) this._known.add(String(knownIds[k]));
  }

  /**
   * Parse one delta.
   * @param {string} delta
   * @returns {Array<{text: string}|{cite: string, idx: number}>}
   * @throws {TypeError} when delta is not a string; {Error} after close().
   */
  feed(delta) {
    if (typeof delta !== 'string') throw new TypeError('delta must be a string');
    if (this._closed) throw new Error('CitationParser is closed');
    if (delta === '') return [];
    this._buf += delta;
    return this._scan(false);
  }

  /**
   * End of stream: release everything held as literal text (spec §5).
   * Idempotent: a second call returns [].
   * @returns {Array<{text: string}|{cite: string, idx: number}>}
   */
  close() {
    if (this._closed) return [];
    var out = this._scan(true);
    this._closed = true;
    return out;
  }

  _scan(final) {
    var buf = this._buf;
    var out = [];
    var text = '';
    var i = 0;
    var n = buf.length;
    while (i < n) {
      if (!isSpecial(buf.charCodeAt(i))) {
        // Fast path: a stretch of ordinary characters is literal text.
        var j = i + 1;
        while (j < n && !isSpecial(buf.charCodeAt(j))) j++;
        if (this._run > 0) this._endRun();
        this._lineStart = false;
        text += buf.slice(i, j);
        i = j;
        continue;
      }
      var ch = buf.charAt(i);
      if (ch === '`' || ch === '~') {
        if (this._run > 0 && ch === this._runChar) {
          this._run++;
        } else {
          if (this._run > 0) this._endRun();
          this._run = 1;
          this._runChar = ch;
          this._runAtLineStart = this._lineStart;
        }
        this._lineStart = false;
        text += ch;
        i++;
        continue;
      }
      if (this._run > 0) this._endRun();
      if (ch === '\n') {
        if (this._mode === INLINE) this._mode = NORMAL; // spec §4: a span ends at the line end
        this._lineStart = true;
        text += ch;
        i++;
        continue;
      }
      if (this._mode === NORMAL && isOpener(ch)) {
        var m = matchMarker(buf, i, this._maxHold);
        if (m.kind === MORE && !final) break; // hold from the opener
        if (m.kind === MATCH) {
          if (text !== '') {
            out.push({ text: text });
            text = '';
            this._lastCite = null;
          }
          this._cite(m.ids, out);
          this._lineStart = false;
          i = m.end;
          continue;
        }
        // FAIL (or MORE at end of stream): the opener is literal text and
        // parsing resumes right after it.
      }
      this._lineStart = false;
      text += ch;
      i++;
    }
    if (text !== '') {
      out.push({ text: text });
      this._lastCite = null;
    }
    this._buf = i < n ? buf.slice(i) : '';
    return mergeText(out);
  }

  // A run of backticks or tildes just ended: update the code state.
  _endRun() {
    var len = this._run;
    var c = this._runChar;
    this._run = 0;
    if (this._mode === FENCE) {
      if (this._runAtLineStart && c === this._fenceChar && len >= this._fenceLen) {
        this._mode = NORMAL;
      }
      return;
    }
    if (this._runAtLineStart && len >= 3) {
      this._mode = FENCE;
      this._fenceChar = c;
      this._fenceLen = len;
      return;
    }
    if (c !== '`') return;
    if (this._mode === INLINE) {
      if (len === this._spanLen) this._mode = NORMAL;
    } else {
      this._mode = INLINE;
      this._spanLen = len;
    }
  }

  _cite(ids, out) {
    for (var k = 0; k < ids.length; k++) {
      var raw = ids[k];
      if (this._known !== null && !this._known.has(raw)) {
        this._invalid.push(raw);
        continue;
      }
      if (this._lastCite === raw) continue; // spec §3: adjacent duplicates collapse
      var idx = this._idMap.get(raw);
      if (idx === undefined) {
        idx = this._idMap.size + 1;
        this._idMap.set(raw, idx);
      }
      out.push({ cite: raw, idx: idx });
      this._lastCite = raw;
    }
  }
}

// Characters that can change the scanner's state: backtick, tilde, line
// feed and the three openers "[", "【", "［".
function isSpecial(c) {
  return c === 96 || c === 126 || c === 10 || c === 91 || c === 0x3010 || c === 0xff3b;
}

/** Merge adjacent text segments (spec §6). Returns a new array. */
export function mergeText(segments) {
  var out = [];
  for (var k = 0; k < segments.length; k++) {
    var s = segments[k];
    var last = out.length > 0 ? out[out.length - 1] : null;
    if (s.cite === undefined && last !== null && last.cite === undefined) {
      out[out.length - 1] = { text: last.text + s.text };
    } else {
      out.push(s);
    }
  }
  return out;
}

/**
 * The visible text of an answer: markers removed, code kept literal.
 * @param {string} text the whole answer
 * @param {string[]|null} [knownIds]
 * @returns {string}
 */
export function stripMarkers(text, knownIds) {
  var p = new CitationParser({ knownIds: knownIds === undefined ? null : knownIds });
  var segs = p.feed(String(text)).concat(p.close());
  var s = '';
  for (var k = 0; k < segs.length; k++) if (segs[k].cite === undefined) s += segs[k].text;
  return s;
}

/**
 * Raw ids cited in an answer, in display order (each once).
 * @param {string} text
 * @param {string[]|null} [knownIds]
 * @returns {string[]}
 */
export function citedIds(text, knownIds) {
  var p = new CitationParser({ knownIds: knownIds === undefined ? null : knownIds });
  p.feed(String(text));
  p.close();
  return p.citations.map(function (c) {
    return c[0];
  });
}
