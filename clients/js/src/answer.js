/**
 * AnswerStream: the Dify SSE consumer state machine (mobile seed §3 "SSE 事件接收",
 * §4.1 stream buffer, §5.1 panel; Dify Service API streaming, dify-protocol.md §1).
 *
 * bytes -> Utf8Decoder -> SseDecoder -> JSON events -> CitationParser -> segments.
 *
 * - `node_finished` with data.node_type == "code" and data.outputs.chunk_metadata
 *   (an array, or a JSON string of one) caches the chunks by id (the seed's
 *   chunkMetadataMap); `workflow_started` clears the cache (start of an answer).
 * - Answer text: `message` (answer) and `text_chunk` (data.text). The parser is
 *   created at the first text, with the cached ids as known ids (none cached:
 *   every well-formed id is accepted).
 * - `message_end` releases the held text; `workflow_finished` (before or
 *   after it) records its status; the stream may also just end without
 *   either, and then end() releases it. `error` releases it, records
 *   `{code, status, message}` and calls onError (once: the first error wins).
 * - `message_replace` (output moderation) replaces the answer: it is parsed
 *   afresh and onReplace(segments) is called with the new segments.
 * - chunk_metadata arriving after the text started only validates markers
 *   completed from then on.
 * - No chunk_metadata at all: the panel falls back to
 *   message_end.metadata.retriever_resources (id = position).
 * - Nothing is lost: a frame that is not JSON is skipped and listed in
 *   `result.warnings`; text arriving after the flush is kept as literal text.
 *
 * Callbacks (all optional): onMetadata(chunks), onSegments(segments),
 * onEvent(evt), onDone(result), onError(err). onDone runs once, at end().
 *
 * result = {answer, segments, citations, panel, invalid, messageId,
 *   conversationId, taskId, metadata, workflowStatus, error, warnings}
 */
import { CitationParser, mergeText } from './parser.js';
import { buildPanel, chunkMap, chunksFromRetrieverResources } from './panel.js';
import { SseDecoder } from './sse.js';
import { Utf8Decoder } from './utf8.js';

function noop() {}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export class AnswerStream {
  /**
   * @param {{maxHold?: number, maxLine?: number,
   *   onMetadata?: function(Array<object>): void,
   *   onSegments?: function(Array<object>): void,
   *   onReplace?: function(Array<object>): void,
   *   onEvent?: function(object): void,
   *   onDone?: function(object): void,
   *   onError?: function({code: string, status: number, message: string}): void}} [options]
   */
  constructor(options) {
    var opts = options || {};
    this._maxHold = opts.maxHold === undefined ? 32 : opts.maxHold;
    this._onMetadata = opts.onMetadata || noop;
    this._onSegments = opts.onSegments || noop;
    this._onEvent = opts.onEvent || noop;
    this._onDone = opts.onDone || noop;
    this._onError = opts.onError || noop;
    this._onReplace = opts.onReplace || noop;
    this._utf8 = new Utf8Decoder();
    this._sse = new SseDecoder({ maxLine: opts.maxLine });
    this._metadataChunks = null; // chunk_metadata of the current answer
    this._parser = null;
    this._flushed = false;
    this._segments = [];
    this._answer = '';
    this._messageId = null;
    this._conversationId = null;
    this._taskId = null;
    this._metadata = null;
    this._workflowStatus = null;
    this._error = null;
    this._warnings = [];
    this._ended = false;
    this._broken = false;
    this._result = null;
  }

  /** True once end() has run. */
  get ended() {
    return this._ended;
  }

  /**
   * Feed raw response bytes (UTF-8 characters may be split across chunks).
   * @param {Uint8Array|ArrayBuffer} chunk
   */
  pushBytes(chunk) {
    if (this._ended || this._broken) return;
    this.pushText(this._utf8.decode(chunk));
  }

  /**
   * Feed decoded response text (lines may be split across calls).
   * @param {string} text
   */
  pushText(text) {
    if (this._ended || this._broken || text === '') return;
    var events;
    try {
      events = this._sse.feed(String(text));
    } catch (e) {
      // The framing is lost (e.g. a frame past maxLine): stop reading input.
      this._broken = true;
      this._fail({ code: e.code || 'stream_error', status: 0, message: String(e.message || e) });
      return;
    }
    for (var k = 0; k < events.length; k++) this._frame(events[k]);
  }

  /**
   * Record an error that happened outside the stream (HTTP status, network,
   * abort): flushes held text and calls onError. The first error wins.
   * @param {{code: string, status?: number, message?: string}} err
   */
  fail(err) {
    if (this._ended) return;
    this._fail({
      code: String(err && err.code ? err.code : 'error'),
      status: err && typeof err.status === 'number' ? err.status : 0,
      message: String(err && err.message !== undefined ? err.message : ''),
    });
  }

  /**
   * End of stream: flush decoders and parser, build the panel, call onDone.
   * Idempotent.
   * @returns {object} the result
   */
  end() {
    if (this._ended) return this._result;
    var events = [];
    if (!this._broken) {
      var tail = this._utf8.flush();
      try {
        if (tail !== '') events = this._sse.feed(tail);
        events = events.concat(this._sse.close());
      } catch (e) {
        this._fail({ code: e.code || 'stream_error', status: 0, message: String(e.message || e) });
      }
    }
    for (var k = 0; k < events.length; k++) this._frame(events[k]);
    this._flush();
    this._ended = true;
    this._result = this._buildResult();
    this._onDone(this._result);
    return this._result;
  }

  _buildResult() {
    var citations = this._parser ? this._parser.citations : [];
    var chunks = this._metadataChunks;
    if (chunks === null) {
      var rr = this._metadata && Array.isArray(this._metadata.retriever_resources) ? this._metadata.retriever_resources : [];
      chunks = chunksFromRetrieverResources(rr);
    }
    return {
      answer: this._answer,
      segments: mergeText(this._segments),
      citations: citations,
      panel: buildPanel(citations, chunkMap(chunks)),
      invalid: this._parser ? this._parser.invalid : [],
      messageId: this._messageId,
      conversationId: this._conversationId,
      taskId: this._taskId,
      metadata: this._metadata,
      workflowStatus: this._workflowStatus,
      error: this._error,
      warnings: this._warnings.slice(),
    };
  }

  _frame(frame) {
    if (frame.data === null) {
      // A bare `event: ping` (or any data-less event).
      this._onEvent({ event: frame.event || 'ping' });
      return;
    }
    var evt;
    try {
      evt = JSON.parse(frame.data);
    } catch (e) {
      this._warn('malformed_frame', frame.data);
      return;
    }
    if (!isObject(evt)) {
      this._warn('malformed_frame', frame.data);
      return;
    }
    if (typeof evt.event !== 'string' && frame.event !== '') evt.event = frame.event;
    this._onEvent(evt);
    this._ids(evt);
    var data = isObject(evt.data) ? evt.data : {};
    switch (evt.event) {
      case 'workflow_started':
        // A new answer starts: forget earlier metadata (mobile seed §3.3).
        if (this._parser === null) this._metadataChunks = null;
        break;
      case 'node_finished':
        if (data.node_type === 'code' && isObject(data.outputs) && data.outputs.chunk_metadata !== undefined) {
          this._chunkMetadata(data.outputs.chunk_metadata);
        }
        break;
      case 'message':
      case 'agent_message':
        if (typeof evt.answer === 'string') this._text(evt.answer);
        else if (evt.answer !== undefined && evt.answer !== null) this._warn('bad_answer', JSON.stringify(evt.answer));
        break;
      case 'text_chunk':
        if (typeof data.text === 'string') this._text(data.text);
        else this._warn('bad_text_chunk', frame.data);
        break;
      case 'message_end':
        if (isObject(evt.metadata)) this._metadata = evt.metadata;
        this._flush();
        break;
      case 'workflow_finished':
        if (typeof data.status === 'string') this._workflowStatus = data.status;
        break;
      case 'message_replace':
        if (typeof evt.answer === 'string') this._replace(evt.answer);
        else this._warn('bad_answer', frame.data);
        break;
      case 'error':
        this._fail({
          code: typeof evt.code === 'string' ? evt.code : 'error',
          status: typeof evt.status === 'number' ? evt.status : 0,
          message: typeof evt.message === 'string' ? evt.message : '',
        });
        break;
      default:
        break;
    }
  }

  _ids(evt) {
    if (typeof evt.conversation_id === 'string' && evt.conversation_id !== '') this._conversationId = evt.conversation_id;
    if (typeof evt.message_id === 'string' && evt.message_id !== '') this._messageId = evt.message_id;
    else if ((evt.event === 'message' || evt.event === 'message_end') && typeof evt.id === 'string') this._messageId = evt.id;
    if (typeof evt.task_id === 'string' && evt.task_id !== '') this._taskId = evt.task_id;
  }

  _chunkMetadata(value) {
    var chunks = value;
    if (typeof value === 'string') {
      try {
        chunks = JSON.parse(value);
      } catch (e) {
        this._warn('bad_chunk_metadata', value);
        return;
      }
    }
    if (!Array.isArray(chunks)) {
      this._warn('bad_chunk_metadata', JSON.stringify(value));
      return;
    }
    var kept = [];
    for (var k = 0; k < chunks.length; k++) {
      var c = chunks[k];
      if (isObject(c) && c.id !== undefined && c.id !== null && c.id !== '') kept.push(c);
    }
    if (kept.length !== chunks.length) this._warn('bad_chunk', String(chunks.length - kept.length) + ' item(s) without id');
    this._metadataChunks = kept;
    if (this._parser !== null) this._parser.setKnownIds(this._knownIds());
    this._onMetadata(kept);
  }

  _text(delta) {
    if (delta === '') return;
    if (this._flushed) {
      // Text after message_end / workflow_finished / error: keep it, literally.
      this._warn('text_after_end', delta);
      this._emit([{ text: delta }]);
      return;
    }
    if (this._parser === null) {
      this._parser = new CitationParser({ knownIds: this._knownIds(), maxHold: this._maxHold });
    }
    this._emit(this._parser.feed(delta));
  }

  _knownIds() {
    if (this._metadataChunks === null) return null;
    return this._metadataChunks.map(function (c) {
      return String(c.id);
    });
  }

  // message_replace (e.g. output moderation): the answer so far is replaced
  // by `answer`, parsed afresh; onReplace(segments) gets the new segments.
  _replace(answer) {
    if (this._flushed) {
      this._warn('text_after_end', answer);
      return;
    }
    this._parser = new CitationParser({ knownIds: this._knownIds(), maxHold: this._maxHold });
    var segments = this._parser.feed(answer);
    this._segments = segments.slice();
    this._answer = '';
    for (var k = 0; k < segments.length; k++) if (segments[k].cite === undefined) this._answer += segments[k].text;
    this._onReplace(segments);
  }

  _flush() {
    if (this._flushed) return;
    this._flushed = true;
    if (this._parser !== null) this._emit(this._parser.close());
  }

  _fail(err) {
    this._flush();
    if (this._error !== null) return; // the first error wins
    this._error = err;
    this._onError(err);
  }

  _emit(segments) {
    if (segments.length === 0) return;
    for (var k = 0; k < segments.length; k++) {
      this._segments.push(segments[k]);
      if (segments[k].cite === undefined) this._answer += segments[k].text;
    }
    this._onSegments(segments);
  }

  _warn(kind, raw) {
    var s = String(raw);
    this._warnings.push({ kind: kind, raw: s.length > 200 ? s.slice(0, 200) + '…' : s });
  }
}
