/**
 * Citation marker grammar (../shared/spec/citation-markers.md §1).
 *
 * Pure functions, no state. `matchMarker` decides, from an opener, whether the
 * text is a complete marker, can never become one, or needs more input.
 *
 *     marker := OPEN ws item (ws SEP ws item)* ws CLOSE
 *     item   := [PREFIX ws COLON ws] id        (the first item carries the prefix)
 *     id     := DIGIT{1,4}
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
var SPACES = ' \u3000';

/** True when `ch` (one UTF-16 unit) opens a marker: "[", "【" or "［". */
export function isOpener(ch) {
  return OPENERS.indexOf(ch) >= 0;
}

/** Decimal value of an ASCII or full-width digit, or -1. */
export function digitValue(ch) {
  var c = ch.charCodeAt(0);
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 0xff10 && c <= 0xff19) return c - 0xff10;
  return -1;
}

// DFA states while reading a marker.
var S_OPEN = 0; // after OPEN: ws or PREFIX (first item must carry the prefix)
var S_PREFIX = 1; // after PREFIX: ws or COLON
var S_COLON = 2; // after COLON: ws or DIGIT
var S_DIGITS = 3; // inside an id: DIGIT (up to 4), ws, SEP or CLOSE
var S_AFTER_ID = 4; // after an id and ws: ws, SEP or CLOSE
var S_SEP = 5; // after SEP: ws, PREFIX or DIGIT

/**
 * Try to read one marker starting at `text[start]` (which must be an opener).
 *
 * Only the first `limit` characters from `start` are considered: a marker
 * longer than `limit` never matches (spec §5 "held text is bounded").
 *
 * Returns `{kind: MATCH, end, ids}` (end = index after the closer, ids = the
 * normalised raw ids in written order, e.g. "０７" -> "7"), `{kind: FAIL}`
 * when the text can no longer become a marker, or `{kind: MORE}` when the
 * text ends while it still can (the caller holds it back, or at end of
 * stream treats it as FAIL).
 *
 * @param {string} text
 * @param {number} start index of the opener
 * @param {number} limit maximum marker length in UTF-16 units (max_hold)
 * @returns {{kind: number, end?: number, ids?: string[]}}
 */
export function matchMarker(text, start, limit) {
  var state = S_OPEN;
  var ids = [];
  var value = 0;
  var ndigits = 0;
  var stop = Math.min(text.length, start + limit);
  for (var j = start + 1; j < stop; j++) {
    var ch = text.charAt(j);
    if (state === S_DIGITS) {
      var d = digitValue(ch);
      if (d >= 0) {
        if (ndigits === 4) return { kind: FAIL };
        value = value * 10 + d;
        ndigits++;
        continue;
      }
      ids.push(String(value));
      state = S_AFTER_ID;
    }
    if (SPACES.indexOf(ch) >= 0) continue;
    switch (state) {
      case S_OPEN:
        if (PREFIXES.indexOf(ch) >= 0) {
          state = S_PREFIX;
          continue;
        }
        return { kind: FAIL };
      case S_PREFIX:
        if (COLONS.indexOf(ch) >= 0) {
          state = S_COLON;
          continue;
        }
        return { kind: FAIL };
      case S_COLON:
        if (digitValue(ch) >= 0) {
          state = S_DIGITS;
          value = digitValue(ch);
          ndigits = 1;
          continue;
        }
        return { kind: FAIL };
      case S_AFTER_ID:
        if (SEPARATORS.indexOf(ch) >= 0) {
          state = S_SEP;
          continue;
        }
        if (CLOSERS.indexOf(ch) >= 0) return { kind: MATCH, end: j + 1, ids: ids };
        return { kind: FAIL };
      case S_SEP:
        if (PREFIXES.indexOf(ch) >= 0) {
          state = S_PREFIX;
          continue;
        }
        if (digitValue(ch) >= 0) {
          state = S_DIGITS;
          value = digitValue(ch);
          ndigits = 1;
          continue;
        }
        return { kind: FAIL };
      default:
        return { kind: FAIL };
    }
  }
  // Ran out of text (or of the window) while the marker was still possible.
  if (stop < text.length || stop - start >= limit) return { kind: FAIL };
  return { kind: MORE };
}
