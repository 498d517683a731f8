/**
 * Citation marker grammar, version 2 (../shared/spec/citation-markers.md §1).
 *
 * Pure functions, no state. `matchMarker` decides, from an opener (or the
 * backslash of an escaped marker), whether the text is a complete marker, can
 * never become one, or needs more input.
 *
 *     marker := [ESC] OPEN ws item (ws SEP ws item)* ws [ESC] CLOSE
 *     item   := [PREFIX ws COLON ws] id [ws RANGE ws id]   (the first item carries the prefix)
 *     id     := DIGIT{1,4}
 *
 * A range a-b cites a, a+1, ..., b; it is valid only when a <= b and
 * b - a <= 9, and a marker holding an invalid range is no marker at all.
 */

/** Result kinds of {@link matchMarker}. */
export var MATCH = 1;
export var FAIL = 2;
export var MORE = 3;

var OPENERS = '[【［';
var CLOSERS = ']】］';
var PREFIXES = 'CcＣｃ';
var COLONS = ':：';
var SEPARATORS = ',，、;；';
var RANGES = '-–~～';
var SPACES = ' \t\u00a0\u202f\u3000';
var ESCAPE = '\\';
var MAX_RANGE_SPAN = 9;

/** True when `ch` (one UTF-16 unit) opens a marker: "[", "【" or "［". */
export function isOpener(ch) {
  return ch !== '' && OPENERS.indexOf(ch) >= 0;
}

/** True when `ch` is the backslash that may escape a marker's brackets. */
export function isEscape(ch) {
  return ch === ESCAPE;
}

/** Decimal value of an ASCII or full-width digit, or -1. */
export function digitValue(ch) {
  var c = ch.charCodeAt(0);
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 0xff10 && c <= 0xff19) return c - 0xff10;
  return -1;
}

function isIn(set, ch) {
  return set.indexOf(ch) >= 0;
}

// DFA states while reading a marker.
var S_OPEN = 0; // after OPEN: ws or PREFIX (first item must carry the prefix)
var S_PREFIX = 1; // after PREFIX: ws or COLON
var S_COLON = 2; // after COLON: ws or DIGIT
var S_ID = 3; // inside an item's first id
var S_ID_WS = 4; // after the first id and ws: ws, RANGE, SEP, ESC or CLOSE
var S_RANGE = 5; // after RANGE: ws or DIGIT
var S_ID2 = 6; // inside a range's second id
var S_ID2_WS = 7; // after the second id and ws: ws, SEP, ESC or CLOSE
var S_SEP = 8; // after SEP: ws, PREFIX or DIGIT
var S_ESC = 9; // after the closer's escape: CLOSE only

/**
 * Try to read one marker starting at `text[start]`, which must be an opener
 * or a backslash followed by an opener.
 *
 * Only the first `limit` characters from `start` are considered: a marker
 * longer than `limit` never matches (spec §5 "held text is bounded").
 *
 * Returns `{kind: MATCH, end, ids}` (end = index after the closer, ids = the
 * normalised raw ids in written order with ranges expanded, e.g. "０７" -> "7"),
 * `{kind: FAIL}` when the text can no longer become a marker, or
 * `{kind: MORE}` when the text ends while it still can (the caller holds it
 * back, or at end of stream treats it as FAIL).
 *
 * @param {string} text
 * @param {number} start index of the opener (or of its escape)
 * @param {number} limit maximum marker length in UTF-16 units (max_hold)
 * @returns {{kind: number, end?: number, ids?: string[]}}
 */
export function matchMarker(text, start, limit) {
  var state = S_OPEN;
  var ids = [];
  var value = 0;
  var ndigits = 0;
  var stop = Math.min(text.length, start + limit);
  var j = start + 1;
  if (text.charAt(start) === ESCAPE) {
    if (j < stop && !isOpener(text.charAt(j))) return { kind: FAIL };
    j++;
  }
  // The id being read is complete: false when it ends an invalid range.
  function endId() {
    if (state === S_ID2) {
      var first = Number(ids[ids.length - 1]);
      if (!(first <= value && value <= first + MAX_RANGE_SPAN)) return false;
      for (var k = first + 1; k <= value; k++) ids.push(String(k));
    } else {
      ids.push(String(value));
    }
    return true;
  }
  for (; j < stop; j++) {
    var ch = text.charAt(j);
    if (state === S_ESC) {
      if (isIn(CLOSERS, ch)) return { kind: MATCH, end: j + 1, ids: ids };
      return { kind: FAIL };
    }
    var d = digitValue(ch);
    if (d >= 0) {
      if (state === S_ID || state === S_ID2) {
        if (ndigits === 4) return { kind: FAIL };
        value = value * 10 + d;
        ndigits++;
        continue;
      }
      if (state === S_COLON || state === S_SEP) state = S_ID;
      else if (state === S_RANGE) state = S_ID2;
      else return { kind: FAIL };
      value = d;
      ndigits = 1;
      continue;
    }
    if (isIn(SPACES, ch)) {
      if (state === S_ID || state === S_ID2) {
        if (!endId()) return { kind: FAIL };
        state = state === S_ID ? S_ID_WS : S_ID2_WS;
      }
      continue;
    }
    if (isIn(PREFIXES, ch)) {
      if (state !== S_OPEN && state !== S_SEP) return { kind: FAIL };
      state = S_PREFIX;
      continue;
    }
    if (isIn(COLONS, ch)) {
      if (state !== S_PREFIX) return { kind: FAIL };
      state = S_COLON;
      continue;
    }
    if (isIn(RANGES, ch)) {
      if (state === S_ID) endId();
      else if (state !== S_ID_WS) return { kind: FAIL };
      state = S_RANGE;
      continue;
    }
    var sep = isIn(SEPARATORS, ch);
    var close = isIn(CLOSERS, ch);
    if (!sep && !close && ch !== ESCAPE) return { kind: FAIL };
    // SEP, ESC and CLOSE come only after an id.
    if (state === S_ID || state === S_ID2) {
      if (!endId()) return { kind: FAIL };
    } else if (state !== S_ID_WS && state !== S_ID2_WS) {
      return { kind: FAIL };
    }
    if (close) return { kind: MATCH, end: j + 1, ids: ids };
    state = sep ? S_SEP : S_ESC;
  }
  // Ran out of text (or of the window) while the marker was still possible.
  if (stop < text.length || stop - start >= limit) return { kind: FAIL };
  return { kind: MORE };
}
