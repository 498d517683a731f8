/**
 * Incremental citation parser with idMap (../shared/spec/citation-markers.md
 * version 2, §2-§6; mobile seed §4.1 stream buffer, §4.2 idMap).
 *
 * Feed the answer as arbitrary deltas; get back segments:
 *   {text: string}            literal text (adjacent text segments merged)
 *   {cite: string, idx: int}  one citation: raw chunk id and display index
 *   {reasoning: string}       reasoning from a leading <think> block (§4a)
 *
 * Cost is linear: each character is scanned once, plus at most `maxHold`
 * characters re-read per held opener.
 */
import { MATCH, MORE, isEscape, isOpener, matchMarker } from './grammar.js';
import { SurrogateJoiner } from './utf8.js';

/** Default maxHold (spec §5, version 2). */
export var DEFAULT_MAX_HOLD = 64;

// Scanner modes (spec §4: code is literal).
var NORMAL = 0;
var INLINE = 1; // inside an inline code span
var FENCE = 2; // inside a fenced code block

// Where the answer is (spec §4a): at its start (a reasoning block may open),
// in reasoning, dropping the line breaks after it, in the answer body.
var START = 0;
var REASON = 1;
var AFTER_REASON = 2;
var BODY = 3;

// Line-start state (spec §4 container prefixes): mid-line, at a line start
// or inside container prefixes, after a list bullet (a space must follow),
// inside a list number.
var LS_NONE = 0;
var LS_START = 1;
var LS_BULLET = 2;
var LS_DIGITS = 3;
var MAX_LIST_DIGITS = 9;

var START_SPACE = ' \t\r\n';
var THINK_TAGS = { '<think>': '</think>', '<thinking>': '</thinking>' };

function isTagPrefix(s) {
  return '<think>'.indexOf(s) === 0 || '<thinking>'.indexOf(s) === 0;
}

function isDigit(ch) {
  return ch >= '0' && ch <= '9' && ch.length === 1;
}

/**
 * Streaming marker parser.
 *
 * @param {{knownIds?: (string[]|null), maxHold?: number}} [options]
 *   knownIds: ids of `chunk_metadata` (null: no metadata, every well-formed id
 *   is accepted); maxHold: the longest marker, from its first character (the
 *   opener or the backslash of an escaped marker) to its closer, in UTF-16
 *   units (default 64; a longer marker is literal text).
 * @throws {TypeError} when knownIds is not an array/null or maxHold < 2.
 */
export class CitationParser {
  constructor(options) {
    var opts = options || {};
    var known = opts.knownIds === undefined ? null : opts.knownIds;
    var maxHold = opts.maxHold === undefined ? DEFAULT_MAX_HOLD : opts.maxHold;
    if (typeof maxHold !== 'number' || !(maxHold >= 2) || maxHold !== Math.floor(maxHold)) {
      throw new TypeError('maxHold must be an integer >= 2');
    }
    this._known = null;
    this.setKnownIds(known);
    this._maxHold = maxHold;
    this._surrogates = new SurrogateJoiner();
    this._phase = START;
    this._startSpace = ''; // whitespace held at the very start
    this._startTag = ''; // a prefix of "<think>" / "<thinking>" held at the start
    this._closeTag = '';
    this._reasonHeld = ''; // a possible start of the closing tag
    this._buf = ''; // unconsumed body text; non-empty only while holding an opener
    this._mode = NORMAL;
    this._ls = LS_START;
    this._lsList = false; // a list marker was seen in this line's prefix
    this._lsDigits = 0;
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

  /** The text currently held back (a marker start shorter than maxHold, or a possible <think>). */
  get held() {
    if (this._phase === START) return this._startSpace + this._startTag;
    if (this._phase === REASON) return this._reasonHeld;
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
   * @returns {Array<{text: string}|{cite: string, idx: number}|{reasoning: string}>}
   * @throws {TypeError} when delta is not a string; {Error} after close().
   */
  feed(delta) {
    if (typeof delta !== 'string') throw new TypeError('delta must be a string');
    if (this._closed) throw new Error('CitationParser is closed');
    var out = [];
    this._consume(this._surrogates.feed(delta), out, false);
    return mergeText(out);
  }

  /**
   * End of stream: release everything held as literal text (spec §5).
   * Idempotent: a second call returns [].
   * @returns {Array<{text: string}|{cite: string, idx: number}|{reasoning: string}>}
   */
  close() {
    if (this._closed) return [];
    var out = [];
    this._consume(this._surrogates.flush(), out, false);
    if (this._phase === START) {
      this._buf += this._startSpace + this._startTag;
      this._startSpace = '';
      this._startTag = '';
      this._phase = BODY;
    } else if (this._phase === REASON) {
      if (this._reasonHeld !== '') out.push({ reasoning: this._reasonHeld });
      this._reasonHeld = '';
    }
    this._scan(true, out);
    this._closed = true;
    return mergeText(out);
  }

  // Phases before the body (spec §4a), then the body scanner.
  _consume(s, out, final) {
    var i = 0;
    var n = s.length;
    while (i < n && this._phase !== BODY) {
      if (this._phase === START) {
        var ch = s.charAt(i);
        if (this._startTag === '' && START_SPACE.indexOf(ch) >= 0) {
          this._startSpace += ch;
          i++;
          continue;
        }
        var tag = this._startTag + ch;
        if (Object.prototype.hasOwnProperty.call(THINK_TAGS, tag)) {
          this._phase = REASON;
          this._closeTag = THINK_TAGS[tag];
          this._startSpace = '';
          this._startTag = '';
        } else if (isTagPrefix(tag)) {
          this._startTag = tag;
        } else {
          // No reasoning block: what was held is the answer's start.
          this._buf += this._startSpace + this._startTag;
          this._startSpace = '';
          this._startTag = '';
          this._phase = BODY;
          continue;
        }
        i++;
      } else if (this._phase === REASON) {
        var rest = this._reasonHeld + s.slice(i);
        var end = rest.indexOf(this._closeTag);
        if (end >= 0) {
          if (end > 0) out.push({ reasoning: rest.slice(0, end) });
          this._reasonHeld = '';
          this._phase = AFTER_REASON;
          s = rest;
          i = end + this._closeTag.length;
          n = s.length;
          continue;
        }
        var keep = rest.lastIndexOf('<');
        if (keep >= 0 && keep > rest.length - this._closeTag.length && this._closeTag.indexOf(rest.slice(keep)) === 0) {
          if (keep > 0) out.push({ reasoning: rest.slice(0, keep) });
          this._reasonHeld = rest.slice(keep);
        } else {
          if (rest !== '') out.push({ reasoning: rest });
          this._reasonHeld = '';
        }
        i = n;
      } else {
        // AFTER_REASON: line breaks right after the closing tag are dropped.
        var c = s.charAt(i);
        if (c === '\r' || c === '\n') i++;
        else this._phase = BODY;
      }
    }
    if (i < n) this._buf += s.slice(i);
    if (this._phase === BODY && this._buf !== '') this._scan(final, out);
  }

  _newLine() {
    this._ls = LS_START;
    this._lsList = false;
    this._lsDigits = 0;
  }

  // At a line start: true when `ch` belongs to the container prefixes
  // (spec §4: block quotes, spaces, tabs, one list marker); false ends them.
  _linePrefix(ch) {
    var ls = this._ls;
    if (ls === LS_START) {
      if (ch === ' ' || ch === '\t' || ch === '>') return true;
      if (!this._lsList && (ch === '-' || ch === '*' || ch === '+')) {
        this._ls = LS_BULLET;
        this._lsList = true;
        return true;
      }
      if (!this._lsList && isDigit(ch)) {
        this._ls = LS_DIGITS;
        this._lsList = true;
        this._lsDigits = 1;
        return true;
      }
    } else if (ls === LS_BULLET) {
      if (ch === ' ' || ch === '\t') {
        this._ls = LS_START;
        return true;
      }
    } else if (isDigit(ch) && this._lsDigits < MAX_LIST_DIGITS) {
      this._lsDigits++;
      return true;
    } else if (ch === '.' || ch === ')') {
      this._ls = LS_BULLET;
      return true;
    }
    this._ls = LS_NONE;
    return false;
  }

  _scan(final, out) {
    var buf = this._buf;
    var text = '';
    var i = 0;
    var n = buf.length;
    while (i < n) {
      var c = buf.charCodeAt(i);
      var ch = buf.charAt(i);
      if (c === 96 || c === 126) {
        // A run of backticks or tildes (code fences and spans).
        if (this._run > 0 && ch === this._runChar) {
          this._run++;
        } else {
          if (this._run > 0) this._endRun();
          this._run = 1;
          this._runChar = ch;
          this._runAtLineStart = this._ls === LS_START;
        }
        this._ls = LS_NONE;
        text += ch;
        i++;
        continue;
      }
      if (this._run > 0) this._endRun();
      if (this._ls !== LS_NONE && this._linePrefix(ch)) {
        text += ch;
        i++;
        continue;
      }
      if (!isSpecial(c)) {
        // Fast path: a stretch of ordinary characters is literal text.
        var j = i + 1;
        while (j < n && !isSpecial(buf.charCodeAt(j))) j++;
        text += buf.slice(i, j);
        i = j;
        continue;
      }
      if (ch === '\n') {
        if (this._mode === INLINE) this._mode = NORMAL; // spec §4: a span ends at the line end
        this._newLine();
        text += ch;
        i++;
        continue;
      }
      if (this._mode === NORMAL && (isOpener(ch) || isEscape(ch))) {
        var m = matchMarker(buf, i, this._maxHold);
        if (m.kind === MORE && !final) break; // hold from the opener
        if (m.kind === MATCH) {
          if (text !== '') {
            out.push({ text: text });
            text = '';
            this._lastCite = null;
          }
          this._cite(m.ids, out);
          i = m.end;
          continue;
        }
        // FAIL (or MORE at end of stream): the opener (or the backslash) is
        // literal text and parsing resumes right after it.
      }
      text += ch;
      i++;
    }
    if (text !== '') {
      out.push({ text: text });
      this._lastCite = null;
    }
    this._buf = i < n ? buf.slice(i) : '';
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
// feed, backslash and the three openers "[", "【", "［".
function isSpecial(c) {
  return c === 96 || c === 126 || c === 10 || c === 92 || c === 91 || c === 0x3010 || c === 0xff3b;
}

/**
 * Merge adjacent text segments and adjacent reasoning segments, drop empty
 * ones (spec §6). Returns a new array.
 */
export function mergeText(segments) {
  var out = [];
  for (var k = 0; k < segments.length; k++) {
    var s = segments[k];
    var last = out.length > 0 ? out[out.length - 1] : null;
    if (typeof s.text === 'string') {
      if (s.text === '') continue;
      if (last !== null && typeof last.text === 'string') out[out.length - 1] = { text: last.text + s.text };
      else out.push({ text: s.text });
    } else if (typeof s.reasoning === 'string') {
      if (s.reasoning === '') continue;
      if (last !== null && typeof last.reasoning === 'string') out[out.length - 1] = { reasoning: last.reasoning + s.reasoning };
      else out.push({ reasoning: s.reasoning });
    } else {
      out.push(s);
    }
  }
  return out;
}

/**
 * The visible text of an answer: markers and reasoning removed, code kept literal.
 * @param {string} text the whole answer
 * @param {string[]|null} [knownIds]
 * @returns {string}
 */
export function stripMarkers(text, knownIds) {
  var p = new CitationParser({ knownIds: knownIds === undefined ? null : knownIds });
  var segs = p.feed(String(text)).concat(p.close());
  var s = '';
  for (var k = 0; k < segs.length; k++) if (typeof segs[k].text === 'string') s += segs[k].text;
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
