/**
 * Server-sent events decoder (WHATWG HTML "event stream interpretation"),
 * text in, events out: `feed(text) -> events`, `close() -> events`.
 *
 * Lines end with "\r\n", "\n" or "\r" (a "\r" at the end of one chunk and a
 * "\n" at the start of the next are one line end). `data:` lines accumulate,
 * `event:` sets the type, `id:` the last event id, lines starting with ":" are
 * comments, a blank line dispatches. Unlike a browser EventSource, an event
 * with a type but no data is dispatched too: Dify's keep-alive is a bare
 * `event: ping` line (dify-protocol.md §1.2). Documented leniency: at close,
 * an event whose blank line never came is still dispatched.
 *
 * Event shape: `{event: string, data: string|null, id: string}` where `event`
 * is "" when no `event:` line came and `data` is null when no `data:` line came.
 */

export class SseDecoder {
  /**
   * @param {{maxLine?: number}} [options] maxLine: the longest line or event
   *   data kept, in UTF-16 units (default 8,000,000, as the Python consumer:
   *   Dify caps Code-node strings at 400,000 characters); beyond it feed() throws.
   */
  constructor(options) {
    var opts = options || {};
    this._maxLine = opts.maxLine === undefined ? 8000000 : opts.maxLine;
    this._partial = ''; // text after the last line end
    this._skipLf = false; // the last chunk ended with "\r"
    this._type = '';
    this._data = null;
    this._lastId = '';
  }

  /**
   * @param {string} text
   * @returns {Array<{event: string, data: (string|null), id: string}>}
   * @throws {RangeError} code "frame_too_large" when a line or an event's data
   *   grows past maxLine.
   */
  feed(text) {
    var events = [];
    var s = text;
    if (this._skipLf && s.charAt(0) === '\n') s = s.slice(1);
    this._skipLf = false;
    var start = 0;
    var n = s.length;
    for (var i = 0; i < n; i++) {
      var c = s.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      var line = this._partial + s.slice(start, i);
      this._partial = '';
      this._line(line, events);
      if (c === 13) {
        if (i + 1 < n) {
          if (s.charCodeAt(i + 1) === 10) i++;
        } else {
          this._skipLf = true;
        }
      }
      start = i + 1;
    }
    if (start < n) {
      this._partial += s.slice(start);
      if (this._partial.length > this._maxLine) throw tooLarge();
    }
    return events;
  }

  /**
   * End of stream: a last unterminated line is processed and a pending event
   * is dispatched.
   * @returns {Array<{event: string, data: (string|null), id: string}>}
   */
  close() {
    var events = [];
    if (this._partial !== '') {
      var line = this._partial;
      this._partial = '';
      this._line(line, events);
    }
    this._dispatch(events);
    return events;
  }

  _line(line, events) {
    if (line === '') {
      this._dispatch(events);
      return;
    }
    if (line.charAt(0) === ':') return;
    var colon = line.indexOf(':');
    var field = colon < 0 ? line : line.slice(0, colon);
    var value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.charAt(0) === ' ') value = value.slice(1);
    if (field === 'data') {
      this._data = this._data === null ? value : this._data + '\n' + value;
      if (this._data.length > this._maxLine) throw tooLarge();
    } else if (field === 'event') {
      this._type = value;
    } else if (field === 'id') {
      if (value.indexOf('\u0000') < 0) this._lastId = value;
    }
    // "retry" and unknown fields are ignored (WHATWG).
  }

  _dispatch(events) {
    if (this._data !== null || this._type !== '') {
      events.push({ event: this._type, data: this._data, id: this._lastId });
    }
    this._type = '';
    this._data = null;
  }
}

function tooLarge() {
  var err = new RangeError('SSE frame too large');
  err.code = 'frame_too_large';
  return err;
}
