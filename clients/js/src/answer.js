/**
 * AnswerStream: the Dify SSE consumer state machine (mobile seed §3 "SSE 事件接收",
 * §4.1 stream buffer, §5.1 panel; Dify Service API streaming, dify-protocol.md §1).
 * Its rules are docs/stream-contract.md; tests/vectors/dify-stream.v1.json holds
 * the vectors that it and the Python DifyStreamConsumer both pass.
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
 * - A frame whose JSON has no `event` (and came without an `event:` line)
 *   is a `message` (the WHATWG default type), with a `no_event` warning.
 * - A leading <think> block is reasoning (`result.reasoning`, reasoning
 *   segments): never answer text, never citing.
 * - Nothing is lost: a frame that is not JSON is skipped and listed in
 *   `result.warnings` ({kind, raw}; kinds in docs/stream-contract.md §5);
 *   text arriving after the flush is kept as literal text.
 *
 * Callbacks (all optional): onMetadata(chunks), onSegments(segments),
 * onEvent(evt), onDone(result), onError(err). onDone runs once, at end().
 *
 * result = {answer, reasoning, segments, citations, panel, panelSource,
 *   invalid, messageId, conversationId, taskId, metadata, workflowStatus,
 *   error, finished, events, warnings}
 */
import { CitationParser, mergeText } from './parser.js';
import { buildPanel, chunkId, chunkMap, chunksFromRetrieverResources } from './panel.js';
import { SseDecoder } from './sse.js';
import { Utf8Decoder, fixSurrogates } from './utf8.js';

// Dify's error code: a non-empty string as is, an integer as its decimal
// string, anything else "error" (docs/stream-contract.md §4).
function errorCode(v) {
  if (typeof v === 'string' && v !== '') return v;
  if (typeof v === 'number' && Number.isInteger(v)) return String(v);
  return 'error';
}

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
    this._maxHold = opts.maxHold === undefined ? 64 : opts.maxHold;
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
    this._messageIdSeen = false; // a message_id field was seen
    this._finished = false; // message_end arrived
    this._events = [];
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
    var source = 'chunk_metadata';
    if (chunks === null) {
      var rr = this._metadata && Array.isArray(this._metadata.retriever_resources) ? this._metadata.retriever_resources : [];
      chunks = chunksFromRetrieverResources(rr);
      source = chunks.length > 0 ? 'retriever_resources' : 'none';
    }
    var segments = mergeText(this._segments);
    var reasoning = '';
    for (var k = 0; k < segments.length; k++) if (typeof segments[k].reasoning === 'string') reasoning += segments[k].reasoning;
    return {
      answer: this._answer,
      reasoning: reasoning,
      segments: segments,
      citations: citations,
      panel: buildPanel(citations, chunkMap(chunks)),
      panelSource: source,
      invalid: this._parser ? this._parser.invalid : [],
      messageId: this._messageId,
      conversationId: this._conversationId,
      taskId: this._taskId,
      metadata: this._metadata,
      workflowStatus: this._workflowStatus,
      error: this._error,
      finished: this._finished,
      events: this._events.slice(),
      warnings: this._warnings.slice(),
    };
  }

  _frame(frame) {
    if (frame.data === null || frame.data === '') {
      // A keep-alive: Dify's bare `event: ping` (or any data-less event).
      var kept = frame.event || 'message';
      this._events.push(kept);
      this._onEvent({ event: kept });
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
    if (typeof evt.event !== 'string' || evt.event === '') {
      if (frame.event === '') this._warn('no_event', frame.data);
      evt.event = frame.event || 'message';
    }
    this._events.push(evt.event);
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
        else this._warn('bad_answer', frame.data);
        break;
      case 'text_chunk':
        if (typeof data.text === 'string') this._text(data.text);
        else this._warn('bad_text_chunk', frame.data);
        break;
      case 'message_end':
        this._finished = true;
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
        if (this._error !== null) {
          this._warn('later_error', frame.data); // the first error wins
          break;
        }
        this._fail({
          code: errorCode(evt.code),
          status: typeof evt.status === 'number' && Number.isInteger(evt.status) ? evt.status : 0,
          message: typeof evt.message === 'string' ? evt.message : '',
        });
        break;
      default:
        break;
    }
  }

  // The last non-empty conversation_id / message_id / task_id seen; the `id`
  // of message and message_end stands in while no message_id was ever seen.
  _ids(evt) {
    if (typeof evt.conversation_id === 'string' && evt.conversation_id !== '') this._conversationId = evt.conversation_id;
    if (typeof evt.message_id === 'string' && evt.message_id !== '') {
      this._messageId = evt.message_id;
      this._messageIdSeen = true;
    }
    if (!this._messageIdSeen && (evt.event === 'message' || evt.event === 'message_end') && typeof evt.id === 'string' && evt.id !== '') {
      this._messageId = evt.id;
    }
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
      if (chunkId(chunks[k]) !== null) kept.push(chunks[k]);
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
      this._emit([{ text: fixSurrogates(delta) }]);
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
    for (var k = 0; k < segments.length; k++) if (typeof segments[k].text === 'string') this._answer += segments[k].text;
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
      if (typeof segments[k].text === 'string') this._answer += segments[k].text;
    }
    this._onSegments(segments);
  }

  _warn(kind, raw) {
    var s = String(raw);
    this._warnings.push({ kind: kind, raw: s.length > 200 ? s.slice(0, 200) + '…' : s });
  }
}
