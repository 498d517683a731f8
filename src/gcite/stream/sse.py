"""Client side of a Dify-style chat SSE stream: bytes in, citation-aware updates out.

A stack of tiny decoders, each with ``decode()``/``flush()`` (httpx ``_decoders.py``
style), wired by one pure state machine, :class:`DifyStreamConsumer`::

    bytes ─ Utf8Decoder ─▶ str ─ LineDecoder ─▶ lines ─ SSEDecoder ─▶ ServerSentEvent
          ─ DifyStreamConsumer ─▶ JSON events ─▶ CitationParser ─▶ StreamUpdate ... AnswerFinished

The rules are ``docs/stream-contract.md``; ``tests/vectors/dify-stream.v1.json`` holds its
vectors, which this consumer and the JavaScript ``AnswerStream`` both pass (fed whole,
byte by byte and in random cuts). Protocol facts (``dify-protocol.md`` §1.2–§1.8; mobile
design document §3):

- frames are ``data: <json>`` lines ended by a blank line; Dify's keep-alive is a bare
  ``event: ping`` line with no ``data:``; lines end in ``\\n``, ``\\r\\n`` or ``\\r``;
  several ``data:`` lines of one event join with ``\\n`` (WHATWG SSE);
- ``chunk_metadata`` comes from ``node_finished`` where ``data.node_type == "code"``
  and ``data.outputs.chunk_metadata`` exists (a list, or a JSON string of one); it is
  cached as ``chunkMetadataMap`` and cleared at ``workflow_started`` (mobile §3.3, §3.4);
- answer text comes from ``message`` / ``agent_message`` (``answer``) and from
  ``text_chunk`` (``data.text``); ``message_replace`` replaces the answer;
- ``message_end`` and ``workflow_finished`` may come in either order, or not at all
  (dify#31253): the answer is final when the byte stream ends;
- an ``error`` event releases held text and surfaces the error (the first one wins; its
  ``code`` is a string, an integer code becomes its decimal string, anything else
  ``"error"``); text arriving after ``message_end`` or ``error`` is kept as literal text,
  with a warning;
- a frame whose JSON has no ``event`` (and came without an ``event:`` line) is a
  ``message`` (the WHATWG default type), with a warning;
- a leading ``<think>`` block of the answer is reasoning (``AnswerResult.reasoning``),
  never answer text, never citing;
- without ``chunk_metadata`` the panel falls back to
  ``message_end.metadata.retriever_resources`` (mobile §3.4): the cited ids are looked up
  by ``doc_metadata.chunk_id`` (gcite's service) or else by ``position`` (Dify).

Bad input never raises from the consumer: undecodable UTF-8 becomes U+FFFD, frames that
are not JSON objects or come incomplete at the end are skipped and listed in
``AnswerResult.warnings`` (each ``"<kind>: <detail>"``, kinds in :data:`WARNING_KINDS`),
an over-long line stops the stream with error ``frame_too_large``.
:func:`consume_chat_stream` adds the HTTP edge over httpx.
"""

from __future__ import annotations

import codecs
import json as jsonlib
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from gcite.errors import StreamError
from gcite.stream.panel import (
    PanelEntry,
    build_panel,
    chunk_map,
    chunks_from_retriever_resources,
    usable_chunk,
)
from gcite.stream.parser import DEFAULT_MAX_HOLD, CitationParser, Segment, merge_segments
from gcite.stream.surrogates import fix_surrogates

if TYPE_CHECKING:  # httpx is imported by consume_chat_stream only: `import gcite` stays light
    import httpx

#: Longest SSE line accepted, in characters. Code-node outputs are capped at 400,000
#: characters by Dify (and JSON escaping can multiply that), so this leaves ample room.
DEFAULT_MAX_LINE: Final = 8_000_000

_LINE_END: Final = re.compile("\r\n|\r|\n")


# -- decoders -------------------------------------------------------------------------


class Utf8Decoder:
    """Bytes to text, keeping a UTF-8 sequence split across chunks for the next chunk.

    Invalid bytes decode to U+FFFD (never raises); a leading byte-order mark is dropped
    (WHATWG SSE decodes with "UTF-8 decode", which strips it; so does the JS client).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False

    def _strip_bom(self, text: str) -> str:
        if self._started or not text:
            return text
        self._started = True
        return text[1:] if text[0] == "\ufeff" else text

    def decode(self, data: bytes) -> str:
        """Decode one chunk; returns the text it completes."""
        return self._strip_bom(self._decoder.decode(data))

    def flush(self) -> str:
        """End of input: an unfinished sequence becomes U+FFFD."""
        return self._strip_bom(self._decoder.decode(b"", final=True))


class LineDecoder:
    """Text to lines, split on ``\\r\\n``, ``\\r`` or ``\\n`` only (not ``str.splitlines``).

    A ``\\r`` at the end of a chunk waits for the next one (it may be half of ``\\r\\n``).
    A line growing beyond ``max_line`` characters is discarded and :attr:`overflow` set;
    the lines completed before it are still returned.
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._parts: list[str] = []
        self._size = 0
        self._pending_cr = False
        self.overflow = False

    def decode(self, text: str) -> list[str]:
        """Add text; returns the lines it completes, without their line ends."""
        if self._pending_cr:
            self._pending_cr = False
            text = "\r" + text
        if text.endswith("\r"):
            self._pending_cr = True
            text = text[:-1]
        lines: list[str] = []
        start = 0
        for m in _LINE_END.finditer(text):
            self._parts.append(text[start : m.start()])
            lines.append("".join(self._parts))
            self._parts, self._size = [], 0
            start = m.end()
        rest = text[start:]
        if rest:
            self._parts.append(rest)
            self._size += len(rest)
            if self._size > self.max_line:
                self._parts, self._size = [], 0
                self.overflow = True
        return lines

    def flush(self) -> list[str]:
        """End of input: the last line (ended by a lone ``\\r``, or unterminated), if any."""
        if not self._pending_cr and not self._parts:
            return []
        line = "".join(self._parts)
        self._parts, self._size, self._pending_cr = [], 0, False
        return [line]


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched SSE event (WHATWG ``event``/``data``/``id``/``retry`` fields)."""

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None
    #: whether an ``event:`` line named the type (else ``event`` is the default "message")
    event_given: bool = False


class SSEDecoder:
    """Lines to events per the WHATWG SSE parsing rules (as httpx-sse).

    Unlike the browser, an event with a type but no data is dispatched, because
    Dify's keep-alive is exactly that (``event: ping``). ``flush()`` at end of input
    returns an event left without its blank line (the caller decides whether to trust it).
    """

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._last_id = ""
        self._retry: int | None = None

    def decode(self, line: str) -> ServerSentEvent | None:
        """Feed one line (no line end); returns an event at a blank line, else ``None``.

        A block with neither ``event:`` nor ``data:`` (only ``id:``/``retry:``/comments)
        is not dispatched."""
        if not line:
            if not self._event and not self._data:
                self._retry = None
                return None
            sse = ServerSentEvent(
                event=self._event or "message",
                data="\n".join(self._data),
                id=self._last_id,
                retry=self._retry,
                event_given=bool(self._event),
            )
            self._event, self._data, self._retry = "", [], None
            return sse
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def flush(self) -> ServerSentEvent | None:
        """End of input: the pending event as if a blank line had come."""
        return self.decode("")


# -- typed results --------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataReceived:
    """``chunk_metadata`` arrived (``node_finished`` of the code node); the list as received."""

    chunk_metadata: list[dict[str, Any]]


@dataclass(frozen=True)
class SegmentsReceived:
    """Segments that became final. ``replace=True``: they replace everything shown before
    (``message_replace``, e.g. output moderation)."""

    segments: list[Segment]
    replace: bool = False


@dataclass(frozen=True)
class StreamFailed:
    """The stream reported or suffered an error.

    ``code``: Dify's error code (``invalid_param``, ``internal_server_error``, ...) or
    ours: ``stream_interrupted`` (connection broke), ``timeout``, ``frame_too_large``.
    ``status``: the HTTP status Dify put in the ``error`` event, when any.
    """

    code: str
    message: str
    status: int | None = None


@dataclass
class AnswerResult:
    """Everything one streamed answer produced, complete at the end of the stream.

    ``answer``: text without markers; ``raw_answer``: text as received (markers kept);
    ``segments`` merged; ``citations`` ``[(raw_id, idx)]``; ``panel`` cited chunks in
    display order (or the §3.4 fallback); ``panel_source``: where panel metadata came
    from; ``metadata``: ``message_end.metadata`` (usage, retriever_resources);
    ``events``: names of the events seen in order (``ping`` included);
    ``finished``: whether ``message_end`` arrived; ``warnings``: ``"<kind>: <detail>"``
    for each frame or field skipped or kept by a fallback (:data:`WARNING_KINDS`);
    ``reasoning``: the answer's leading ``<think>`` block (not part of ``answer``).
    """

    answer: str = ""
    reasoning: str = ""
    raw_answer: str = ""
    segments: list[Segment] = field(default_factory=list)
    citations: list[tuple[str, int]] = field(default_factory=list)
    panel: list[PanelEntry] = field(default_factory=list)
    panel_source: Literal["chunk_metadata", "retriever_resources", "none"] = "none"
    invalid: list[str] = field(default_factory=list)
    chunk_metadata: list[dict[str, Any]] = field(default_factory=list)
    message_id: str = ""
    conversation_id: str = ""
    task_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    workflow_status: str = ""
    error: StreamFailed | None = None
    events: list[str] = field(default_factory=list)
    finished: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AnswerFinished:
    """The last update of every stream: the complete :class:`AnswerResult`."""

    result: AnswerResult


StreamUpdate = MetadataReceived | SegmentsReceived | StreamFailed | AnswerFinished

#: The warning kinds of ``AnswerResult.warnings`` (``docs/stream-contract.md`` §5).
WARNING_KINDS: Final = (
    "malformed_frame",  # data is not JSON, or not a JSON object (also incomplete at the end)
    "no_event",  # a JSON object without an event name: taken as "message"
    "bad_answer",  # message / agent_message / message_replace without a string answer
    "bad_text_chunk",  # text_chunk without a string data.text
    "bad_chunk_metadata",  # chunk_metadata neither a list nor a JSON string of one
    "bad_chunk",  # chunk_metadata items that are not objects with a string or integer id
    "text_after_end",  # non-empty text (or a replace) after message_end or error: kept
    "later_error",  # an error event after the first error: ignored
)


# -- the consumer ---------------------------------------------------------------------


def _parse_chunk_metadata(value: Any) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = jsonlib.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def _brief(value: Any) -> str:
    text = value if isinstance(value, str) else jsonlib.dumps(value, ensure_ascii=False)
    return repr(text[:200])


def _error_code(value: Any) -> str:
    """Dify's error ``code``: a non-empty string as is, an integer as its decimal string
    (some gateways send the HTTP status there), anything else ``"error"``."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return "error"


class DifyStreamConsumer:
    """Pure state machine from the bytes of one Dify chat SSE response to updates.

    ``feed(data)`` takes the next chunk of bytes, cut anywhere; ``close()`` ends the
    stream and returns the remaining updates, the last one :class:`AnswerFinished`.
    ``fail(code, message)`` records a transport failure, then closes. After
    ``close()``, :attr:`result` holds the :class:`AnswerResult`.
    """

    def __init__(
        self, *, max_hold: int = DEFAULT_MAX_HOLD, max_line: int = DEFAULT_MAX_LINE
    ) -> None:
        self._max_hold = max_hold
        self._utf8 = Utf8Decoder()
        self._lines = LineDecoder(max_line)
        self._sse = SSEDecoder()
        self._parser = CitationParser(None, max_hold)
        self._text_started = False
        self._message_id_seen = False
        self._segments: list[Segment] = []
        self._raw: list[str] = []
        self._chunks: dict[str, dict[str, Any]] | None = None
        self._chunk_list: list[dict[str, Any]] = []
        self._res = AnswerResult()
        self._stopped = False
        self._closed = False

    @property
    def stopped(self) -> bool:
        """True once the input is no longer read (over-long line, transport failure, closed)."""
        return self._stopped or self._closed

    @property
    def result(self) -> AnswerResult:
        """The answer; complete only after :meth:`close`."""
        return self._res

    def feed(self, data: bytes | bytearray | memoryview) -> list[StreamUpdate]:
        """Decode the next chunk of the response body."""
        if self._closed:
            raise RuntimeError("DifyStreamConsumer.feed() after close()")
        if self._stopped:
            return []
        updates: list[StreamUpdate] = []
        for line in self._lines.decode(self._utf8.decode(bytes(data))):
            self._line(line, updates)
            if self._stopped:
                return updates
        self._check_overflow(updates)
        return updates

    def _check_overflow(self, updates: list[StreamUpdate]) -> None:
        if self._lines.overflow and not self._stopped:
            message = f"SSE line longer than {self._lines.max_line} characters"
            self._stop(StreamFailed("frame_too_large", message), updates)

    def fail(self, code: str, message: str) -> list[StreamUpdate]:
        """The transport broke (``code``: ``stream_interrupted``, ``timeout``): record, close."""
        updates: list[StreamUpdate] = []
        if not self._stopped and not self._closed:
            self._stop(StreamFailed(code, message), updates)
        return updates + self.close()

    def close(self) -> list[StreamUpdate]:
        """End of the byte stream: flush every decoder and the parser, finish the result."""
        if self._closed:
            return []
        updates: list[StreamUpdate] = []
        if not self._stopped:
            lines = self._lines.decode(self._utf8.flush())
            self._check_overflow(updates)
            if not self._stopped:
                lines += self._lines.flush()
            for line in lines:
                self._line(line, updates)
                if self._stopped:
                    break
            if not self._stopped:
                sse = self._sse.flush()
                if sse is not None:
                    self._event(sse, updates, complete=False)
        self._closed = True
        self._finish_text(updates)
        self._res.segments = merge_segments(self._segments)
        self._res.answer = "".join(s["text"] for s in self._res.segments if "text" in s)
        self._res.reasoning = "".join(
            s["reasoning"] for s in self._res.segments if "reasoning" in s
        )
        self._res.raw_answer = "".join(self._raw)
        self._res.citations = self._parser.citations
        self._res.invalid = self._parser.invalid
        self._res.chunk_metadata = self._chunk_list
        resources = chunks_from_retriever_resources(self._res.metadata.get("retriever_resources"))
        if self._chunks is not None:
            self._res.panel = build_panel(self._res.citations, self._chunks)
            self._res.panel_source = "chunk_metadata"
        elif resources:
            self._res.panel = build_panel(self._res.citations, resources)
            self._res.panel_source = "retriever_resources"
        else:
            self._res.panel = build_panel(self._res.citations, {})
        updates.append(AnswerFinished(self._res))
        return updates

    # -- internals ---------------------------------------------------------------------

    def _stop(self, error: StreamFailed, updates: list[StreamUpdate]) -> None:
        self._stopped = True
        self._finish_text(updates)
        if self._res.error is None:  # the first error wins
            self._res.error = error
            updates.append(error)

    def _line(self, line: str, updates: list[StreamUpdate]) -> None:
        sse = self._sse.decode(line)
        if sse is not None:
            self._event(sse, updates, complete=True)

    def _emit(self, segments: list[Segment], updates: list[StreamUpdate]) -> None:
        if segments:
            self._segments.extend(segments)
            updates.append(SegmentsReceived(segments))

    def _finish_text(self, updates: list[StreamUpdate]) -> None:
        if not self._parser.closed:
            self._emit(self._parser.close(), updates)

    def _warn(self, kind: str, detail: str) -> None:
        self._res.warnings.append(f"{kind}: {detail}")

    def _text(self, text: Any, updates: list[StreamUpdate], event: str) -> None:
        if not isinstance(text, str):
            kind = "bad_text_chunk" if event == "text_chunk" else "bad_answer"
            self._warn(kind, f"{event} without a string answer; skipped")
            return
        if not text:
            return
        self._raw.append(text)
        if self._parser.closed:  # after message_end or error: kept, as literal text
            self._warn("text_after_end", f"{event} after the end of the answer: {text[:200]!r}")
            self._emit([{"text": fix_surrogates(text)}], updates)
            return
        self._text_started = True
        self._emit(self._parser.feed(text), updates)

    def _event(self, sse: ServerSentEvent, updates: list[StreamUpdate], *, complete: bool) -> None:
        if not sse.data:  # a keep-alive such as Dify's bare "event: ping"
            self._res.events.append(sse.event)
            return
        try:
            payload = jsonlib.loads(sse.data)
        except ValueError:
            what = "incomplete frame at end of stream" if not complete else "frame is not JSON"
            self._warn("malformed_frame", f"{what}; skipped: {sse.data[:200]!r}")
            return
        if not isinstance(payload, dict):
            self._warn(
                "malformed_frame", f"frame is not a JSON object; skipped: {sse.data[:200]!r}"
            )
            return
        name = payload.get("event")
        if not isinstance(name, str) or not name:
            name = sse.event
            if sse.event == "message" and not sse.event_given:
                self._warn(
                    "no_event", f"frame without an event name, taken as message: {sse.data[:200]!r}"
                )
        self._res.events.append(name)
        self._envelope(payload, name)
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, payload, updates)

    def _envelope(self, payload: Mapping[str, Any], name: str) -> None:
        for key in ("conversation_id", "message_id", "task_id"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                setattr(self._res, key, value)
                if key == "message_id":
                    self._message_id_seen = True
        message_id = payload.get("id")
        if (
            name in ("message", "message_end")
            and not self._message_id_seen
            and isinstance(message_id, str)
            and message_id
        ):
            self._res.message_id = message_id

    def _on_workflow_started(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        if not self._text_started:  # a new answer starts: forget earlier metadata (mobile §3.3)
            self._chunks = None
            self._chunk_list = []
            self._parser.set_known_ids(None)

    def _on_node_finished(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        data = payload.get("data")
        if not isinstance(data, dict) or data.get("node_type") != "code":
            return
        outputs = data.get("outputs")
        if not isinstance(outputs, dict) or "chunk_metadata" not in outputs:
            return
        items = _parse_chunk_metadata(outputs["chunk_metadata"])
        if items is None:
            self._warn("bad_chunk_metadata", "node_finished: chunk_metadata is not a list; ignored")
            return
        chunks = [item for item in items if usable_chunk(item)]
        if len(chunks) < len(items):
            self._warn("bad_chunk", f"{len(items) - len(chunks)} item(s) without an id; skipped")
        self._chunk_list = chunks
        self._chunks = chunk_map(chunks)
        self._parser.set_known_ids(self._chunks)
        updates.append(MetadataReceived(chunks))

    def _on_message(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        name = payload.get("event")
        self._text(payload.get("answer"), updates, name if name == "agent_message" else "message")

    def _on_text_chunk(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        data = payload.get("data")
        self._text(data.get("text") if isinstance(data, dict) else None, updates, "text_chunk")

    def _on_message_replace(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        answer = payload.get("answer")
        if not isinstance(answer, str):
            self._warn("bad_answer", "message_replace without a string answer; skipped")
            return
        if self._parser.closed:
            self._warn("text_after_end", f"message_replace after the end of the answer: {answer!r}")
            return
        known = None if self._chunks is None else list(self._chunks)
        self._parser = CitationParser(known, self._max_hold)
        self._raw = [answer]
        self._text_started = True
        segments = self._parser.feed(answer)
        self._segments = list(segments)
        updates.append(SegmentsReceived(segments, replace=True))

    def _on_message_end(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        self._res.finished = True
        metadata = payload.get("metadata")
        if isinstance(metadata, dict):
            self._res.metadata = metadata
        self._finish_text(updates)

    def _on_workflow_finished(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        data = payload.get("data")
        status = data.get("status") if isinstance(data, dict) else None
        if isinstance(status, str):
            self._res.workflow_status = status

    def _on_error(self, payload: dict[str, Any], updates: list[StreamUpdate]) -> None:
        status = payload.get("status")
        message = payload.get("message")
        error = StreamFailed(
            code=_error_code(payload.get("code")),
            message=message if isinstance(message, str) else "",
            status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        )
        if self._res.error is not None:  # the first error wins
            self._warn("later_error", f"{error.code}: {error.message[:200]!r}")
            return
        self._res.error = error
        self._finish_text(updates)
        updates.append(error)


_HANDLERS: Final = {
    "workflow_started": DifyStreamConsumer._on_workflow_started,
    "node_finished": DifyStreamConsumer._on_node_finished,
    "message": DifyStreamConsumer._on_message,
    "agent_message": DifyStreamConsumer._on_message,
    "text_chunk": DifyStreamConsumer._on_text_chunk,
    "message_replace": DifyStreamConsumer._on_message_replace,
    "message_end": DifyStreamConsumer._on_message_end,
    "workflow_finished": DifyStreamConsumer._on_workflow_finished,
    "error": DifyStreamConsumer._on_error,
}


# -- the HTTP edge --------------------------------------------------------------------


def _http_error(status: int, body: bytes) -> StreamError:
    code, message = "", ""
    try:
        payload = jsonlib.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        code = str(payload.get("code") or "")
        message = str(payload.get("message") or "")
    else:
        message = body[:200].decode("utf-8", errors="replace").strip()
    detail = f"（{code}）" if code else ""
    return StreamError(
        f"服务返回 HTTP {status}{detail}：{message or '无详细信息'}",
        code=code or "http_error",
        status=status,
    )


async def _check_event_stream(response: httpx.Response) -> None:
    """Raise :class:`StreamError` unless ``response`` opened an event stream (2xx,
    ``text/event-stream``); an error's body is read up to 64 KiB for its message."""
    if not 200 <= response.status_code < 300:
        body = b""
        async for piece in response.aiter_bytes():
            body += piece
            if len(body) > 65536:
                break
        raise _http_error(response.status_code, body)
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type.lower():
        raise StreamError(
            f"服务没有返回事件流（Content-Type: {content_type or '无'}）",
            code="not_event_stream",
            status=response.status_code,
        )


async def _stream_updates(
    response: httpx.Response, consumer: DifyStreamConsumer
) -> AsyncIterator[StreamUpdate]:
    """The updates of an open event stream, ending with :class:`AnswerFinished`; a
    timeout or a broken connection ends it with :class:`StreamFailed` first."""
    import httpx

    tail: list[StreamUpdate] = []
    try:
        async for chunk in response.aiter_bytes():
            for update in consumer.feed(chunk):
                yield update
            if consumer.stopped:
                break
    except httpx.TimeoutException as exc:
        tail = consumer.fail("timeout", f"stream timed out: {type(exc).__name__}")
    except httpx.HTTPError as exc:
        tail = consumer.fail("stream_interrupted", f"stream broke off: {exc}")
    for update in tail or consumer.close():
        yield update


async def consume_chat_stream(
    client: httpx.AsyncClient,
    url: str,
    json: dict[str, Any],
    headers: dict[str, str],
    *,
    max_hold: int = DEFAULT_MAX_HOLD,
) -> AsyncIterator[StreamUpdate]:
    """POST a Dify ``chat-messages`` request and yield updates while the answer streams.

    The last update is always :class:`AnswerFinished`. Raises
    :class:`~gcite.errors.StreamError` only when no event stream was opened: the
    connection failed, the status was not 2xx (message from Dify's
    ``{code, message, status}`` body) or the response was not ``text/event-stream``.
    Once the stream is open, a broken connection or a timeout ends it with a
    :class:`StreamFailed` update and ``result.error`` — the text received so far is kept.
    Timeouts are the ``client``'s.
    """
    import httpx

    consumer = DifyStreamConsumer(max_hold=max_hold)
    try:
        async with client.stream("POST", url, json=json, headers=headers) as response:
            await _check_event_stream(response)
            async for update in _stream_updates(response, consumer):
                yield update
    except httpx.TimeoutException as exc:
        raise StreamError(f"连接服务超时：{url}", code="timeout") from exc
    except httpx.HTTPError as exc:
        raise StreamError(f"无法连接服务：{url}（{exc}）", code="network_error") from exc
