/**
 * Streaming UTF-8 decoder (WHATWG Encoding "utf-8" decode with replacement).
 *
 * WeChat mini programs deliver the response as ArrayBuffer chunks cut at any
 * byte, and not every mini-program runtime has TextDecoder, so this is plain
 * code: a multi-byte character split across chunks is completed with the
 * next chunk; invalid bytes become U+FFFD; a leading BOM is dropped (as
 * TextDecoder and the SSE spec do).
 */

// ArrayBuffers handed over by a mini-program runtime may come from another
// realm, where `instanceof ArrayBuffer` is false: check the tag instead.
function isArrayBuffer(v) {
  return v instanceof ArrayBuffer || Object.prototype.toString.call(v) === '[object ArrayBuffer]';
}

/**
 * Bytes of a chunk as a Uint8Array (no copy).
 * @param {Uint8Array|ArrayBuffer|ArrayBufferView} chunk
 * @returns {Uint8Array}
 * @throws {TypeError} for anything else
 */
export function toBytes(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (isArrayBuffer(chunk)) return new Uint8Array(chunk);
  if (chunk !== null && typeof chunk === 'object' && isArrayBuffer(chunk.buffer) && typeof chunk.byteLength === 'number') {
    return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }
  throw new TypeError('expected a Uint8Array, an ArrayBuffer or a typed-array view');
}

export class Utf8Decoder {
  constructor() {
    this._need = 0; // continuation bytes still expected
    this._cp = 0; // code point being assembled
    this._lower = 0x80; // allowed range of the next continuation byte
    this._upper = 0xbf;
    this._bomSeen = false;
  }

  /**
   * Decode one chunk.
   * @param {Uint8Array|ArrayBuffer} chunk
   * @returns {string} the text completed by this chunk
   * @throws {TypeError} for other input types
   */
  decode(chunk) {
    var bytes = toBytes(chunk);
    var parts = [];
    var units = [];
    for (var i = 0; i < bytes.length; i++) {
      var b = bytes[i];
      if (this._need === 0) {
        if (b < 0x80) {
          units.push(b);
        } else if (b >= 0xc2 && b <= 0xdf) {
          this._need = 1;
          this._cp = b & 0x1f;
        } else if (b >= 0xe0 && b <= 0xef) {
          if (b === 0xe0) this._lower = 0xa0;
          if (b === 0xed) this._upper = 0x9f;
          this._need = 2;
          this._cp = b & 0x0f;
        } else if (b >= 0xf0 && b <= 0xf4) {
          if (b === 0xf0) this._lower = 0x90;
          if (b === 0xf4) this._upper = 0x8f;
          this._need = 3;
          this._cp = b & 0x07;
        } else {
          units.push(0xfffd);
        }
      } else if (b < this._lower || b > this._upper) {
        // Broken sequence: replace it and re-read this byte from scratch.
        this._reset();
        units.push(0xfffd);
        i--;
      } else {
        this._lower = 0x80;
        this._upper = 0xbf;
        this._cp = (this._cp << 6) | (b & 0x3f);
        this._need--;
        if (this._need === 0) {
          var cp = this._cp;
          this._cp = 0;
          if (cp > 0xffff) {
            cp -= 0x10000;
            units.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
          } else {
            units.push(cp);
          }
        }
      }
      if (units.length >= 8192) {
        parts.push(String.fromCharCode.apply(null, units));
        units = [];
      }
    }
    if (units.length > 0) parts.push(String.fromCharCode.apply(null, units));
    return this._stripBom(parts.join(''));
  }

  /**
   * End of input: an unfinished sequence becomes U+FFFD.
   * @returns {string}
   */
  flush() {
    if (this._need === 0) return '';
    this._reset();
    return this._stripBom('\ufffd');
  }

  _reset() {
    this._need = 0;
    this._cp = 0;
    this._lower = 0x80;
    this._upper = 0xbf;
  }

  _stripBom(s) {
    if (this._bomSeen || s === '') return s;
    this._bomSeen = true;
    return s.charCodeAt(0) === 0xfeff ? s.slice(1) : s;
  }
}

/**
 * Lone UTF-16 surrogates in decoded text (what JSON.parse makes of a pair
 * split across two frames, "\ud83d" then "\udeaa"): a high surrogate at the
 * end of one delta waits for the next delta, whose leading low surrogate
 * completes it; every other lone surrogate becomes U+FFFD. Same rule as the
 * Python client (gcite.stream.surrogates).
 */
export class SurrogateJoiner {
  constructor() {
    this._pending = '';
  }

  /**
   * @param {string} delta
   * @returns {string} the text that is final
   */
  feed(delta) {
    var s = this._pending + delta;
    this._pending = '';
    var n = s.length;
    if (n > 0) {
      var last = s.charCodeAt(n - 1);
      if (last >= 0xd800 && last <= 0xdbff) {
        this._pending = s.charAt(n - 1);
        s = s.slice(0, n - 1);
      }
    }
    return fixSurrogates(s);
  }

  /**
   * End of input: a waiting high surrogate is lone, so U+FFFD.
   * @returns {string}
   */
  flush() {
    var pending = this._pending;
    this._pending = '';
    return pending === '' ? '' : '\ufffd';
  }
}

/**
 * `s` with every lone surrogate replaced by U+FFFD (pairs kept).
 * @param {string} s
 * @returns {string}
 */
export function fixSurrogates(s) {
  if (!/[\ud800-\udfff]/.test(s)) return s;
  var out = '';
  for (var i = 0; i < s.length; i++) {
    var c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      var d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += s.charAt(i) + s.charAt(i + 1);
        i++;
        continue;
      }
    }
    out += c >= 0xd800 && c <= 0xdfff ? '\ufffd' : s.charAt(i);
  }
  return out;
}
