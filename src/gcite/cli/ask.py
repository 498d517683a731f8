"""``gcite ask "问题"``: one question, the answer streamed in the terminal.

Two sources of the same Dify chat SSE byte stream, one consumer:

- local (default): the chatflow (:class:`gcite.chatflow.ChatRun`) runs in this
  process on the local knowledge base, its typed events serialised exactly as the service
  sends them (:class:`gcite.dify.wire.DifyStream`).
  The caller's roles come from ``--role``: a local, trusted operator tool.
- remote (``--url``): ``POST <url>/v1/chat-messages`` of a running gcite or Dify service
  with ``Authorization: Bearer <key>``, through the one HTTP edge of the stream client
  (:func:`gcite.stream.sse.consume_chat_stream`); the server decides the roles from the key.

The bytes go through :class:`gcite.stream.sse.DifyStreamConsumer` (mobile design
document §3–§4): the answer to stdout as it streams — on a terminal rendered as Markdown
by rich, block by block; piped, as its Markdown source — citations as superscripts
(``¹²³``, adjacent ones ``¹˒²``), then the numbered source list
(``1. [知识库] 标题 — 副标题``). ``--json`` prints every event object instead, one JSON
per line (a ``ping`` as ``{"event": "ping"}``). Progress and errors go to stderr; exit
status 0, or 1 when the answer failed (error event, broken stream) — the text received
so far is still printed. Errors are the client's one Chinese sentence
(:func:`gcite.stream.messages.error_text`), never the server's or the provider's text.

Conversations: every answer belongs to a conversation, whose id is printed on stderr;
``--conversation ID`` asks a follow-up in it, and without a question (or with ``-i``)
``gcite ask`` reads questions one per line and keeps the conversation itself. Remotely
the service keeps the conversation (``conversation_id``); locally the turns are kept in
``<data_dir>/conversations/<id>.json`` (:class:`LocalConversations`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import click
import httpx

from gcite.cli.options import Service, SettingsSource, service_options, settings_options
from gcite.config import Settings
from gcite.errors import ConfigError, StreamError
from gcite.stream.messages import error_text
from gcite.stream.sse import AnswerFinished, AnswerResult, SegmentsReceived, StreamUpdate

CLI_USER = "gcite-cli"
MAX_QUESTION = 4000
_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class LocalConversations:
    """The local mode's conversations: ``<data_dir>/conversations/<id>.json``, one file
    per conversation holding its turns (``{"turns": [{"query", "answer", "failed",
    "chunk_metadata", "cited_ids"}]}``, answers as stored by the service: markers and
    reasoning kept). A write replaces the file atomically (old or new turns, never half).
    Ids: 1–64 letters, digits, ``-`` or ``_`` (anything else is a :class:`ConfigError`).
    """

    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir).expanduser() / "conversations"

    def path(self, conversation_id: str) -> Path:
        """The file of ``conversation_id``; :class:`ConfigError` for an id that is not one."""
        if not _CONVERSATION_ID.fullmatch(conversation_id):
            raise ConfigError(f"对话 ID 无效：{conversation_id!r}（只能含字母、数字、- 和 _）")
        return self.root / f"{conversation_id}.json"

    def load(self, conversation_id: str) -> list[Any]:
        """The earlier turns (:class:`gcite.chatflow.PastTurn`, oldest first).

        Raises :class:`ConfigError` when there is no such conversation or its file is
        unreadable.
        """
        from gcite.chatflow import PastTurn

        path = self.path(conversation_id)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            turns = doc["turns"]
            return [
                PastTurn(
                    query=str(t["query"]),
                    answer=str(t["answer"]),
                    failed=bool(t.get("failed")),
                    chunk_metadata=list(t.get("chunk_metadata") or []),
                    cited_ids=[str(i) for i in t.get("cited_ids") or []],
                )
                for t in turns
            ]
        except FileNotFoundError:
            raise ConfigError(f"没有这个对话：{conversation_id}") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"对话 {conversation_id} 的记录无法读取：{path}") from exc

    def append(self, conversation_id: str, turn: dict[str, Any]) -> None:
        """Add one turn (written atomically)."""
        path = self.path(conversation_id)
        try:
            turns = json.loads(path.read_text(encoding="utf-8"))["turns"]
        except FileNotFoundError:
            turns = []
        turns.append(turn)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"turns": turns}, f, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


async def local_frames(
    settings: Settings,
    question: str,
    roles: Sequence[str],
    *,
    conversation_id: str = "",
    past: Sequence[Any] = (),
) -> AsyncIterator[bytes]:
    """Run the chatflow in process; yield its events as Dify SSE ``data:`` frames (bytes).

    The frames are made by the service's own serializer (:mod:`gcite.dify.wire`).
    ``roles``: the caller's roles (trusted: the operator's own machine);
    ``conversation_id`` / ``past``: the conversation and its earlier turns
    (:class:`gcite.chatflow.PastTurn`, oldest first; a new id when empty). Raises
    :class:`~gcite.errors.StoreError` up front when the knowledge base cannot be opened
    and :class:`ConfigError` for bad LLM / web settings.
    """
    import time

    from gcite.chatflow import ChatRun, Deps, Turn, earlier_turns, new_id
    from gcite.chatflow.scheduler import Scheduler
    from gcite.dify.wire import DifyStream, Envelope, data_frame
    from gcite.generate.factory import make_backend
    from gcite.knowledge.access import KnowledgeAccess
    from gcite.knowledge.store import StoreHandles
    from gcite.web import make_web_source

    handles = StoreHandles()  # the store, the verifier and the backend share the embedder
    knowledge = KnowledgeAccess(settings, handles)
    store = knowledge.store()  # fail early, as one line, when there is no knowledge base
    backend = make_backend(settings, handles.embedders)
    web_source = make_web_source(settings, handles=handles)
    from gcite.verify import make_verifier

    deps = Deps(
        settings=settings,
        backend=backend,
        get_store=lambda: store,
        web_source=web_source,
        verifier=make_verifier(settings, embedders=handles.embedders),
        scheduler=Scheduler.from_settings(settings),  # its sched_* settings apply here too
    )
    envelope = Envelope(
        task_id=new_id(),
        message_id=new_id(),
        conversation_id=conversation_id or new_id(),
        created_at=int(time.time()),
        stream_event=settings.service.stream_event,
        user=CLI_USER,
    )
    wire = DifyStream(envelope)
    try:
        yield data_frame(wire.start(question))
        turn = Turn(question, tuple(roles), history=earlier_turns(past))
        async for event in ChatRun(turn, deps).events():
            frames = wire.frames(event)
            if frames:
                yield frames
    finally:
        if web_source is not None:
            await web_source.aclose()
        await backend.aclose()
        knowledge.close()


def chat_url(base: str) -> str:
    """``<base>/v1/chat-messages`` for a service root (``http://host:port`` or ``.../v1``).

    Raises :class:`ConfigError` unless ``base`` is an http(s) URL.
    """
    base = base.strip().rstrip("/")
    parts = httpx.URL(base) if base else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.host:
        raise ConfigError(f"--url 必须是 http(s) 地址，例如 http://127.0.0.1:8000（收到 {base!r}）")
    if base.endswith("/chat-messages"):
        return base
    if base.endswith("/v1"):
        return base + "/chat-messages"
    return base + "/v1/chat-messages"


class _Tap(httpx.AsyncBaseTransport):
    """An httpx transport that hands every byte of each response body to ``on_bytes`` as the
    reader pulls it (``--json`` prints the raw events the shared consumer reads)."""

    def __init__(self, on_bytes: Callable[[bytes], None]) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._on_bytes = on_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        on_bytes = self._on_bytes

        class _Stream(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                assert isinstance(stream, httpx.AsyncByteStream)
                async for chunk in stream:
                    on_bytes(chunk)
                    yield chunk

            async def aclose(self) -> None:
                if isinstance(stream, httpx.AsyncByteStream):
                    await stream.aclose()

        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Stream(),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


async def remote_updates(
    url: str,
    key: str,
    question: str,
    *,
    timeout_s: float = 120.0,
    on_bytes: Callable[[bytes], None] | None = None,
    conversation_id: str = "",
    inputs: Mapping[str, str] | None = None,
) -> AsyncIterator[StreamUpdate]:
    """POST the question to a gcite / Dify service (streaming) through the one HTTP edge,
    :func:`gcite.stream.sse.consume_chat_stream`; yield its updates.

    ``on_bytes``: also receives the raw body bytes (``--json``); ``conversation_id``: the
    conversation to continue (``""``: a new one); ``inputs``: the request's ``inputs``
    (a chatflow's Start-node variables). Raises
    :class:`StreamError` when no event stream opens (connection refused, timeout, non-2xx
    status with Dify's ``{code, message, status}`` body, wrong content type); once the
    stream is open, a broken connection ends it with a ``StreamFailed`` update.
    """
    from gcite.stream.sse import consume_chat_stream

    body = {
        "inputs": dict(inputs or {}),
        "query": question,
        "response_mode": "streaming",
        "user": CLI_USER,
        "conversation_id": conversation_id,
    }
    headers = {"Accept": "text/event-stream"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    transport = _Tap(on_bytes) if on_bytes is not None else None
    async with httpx.AsyncClient(timeout=timeout, transport=transport) as client:
        async for update in consume_chat_stream(client, url, body, headers):
            yield update


async def local_updates(frames: AsyncIterator[bytes]) -> AsyncIterator[StreamUpdate]:
    """The same consumer over the in-process frames (:func:`local_frames`)."""
    from gcite.stream.sse import DifyStreamConsumer

    consumer = DifyStreamConsumer()
    async for chunk in frames:
        for update in consumer.feed(chunk):
            yield update
        if consumer.stopped:
            break
    for update in consumer.close():
        yield update


class JsonPrinter:
    """``--json``: every SSE event of the byte stream as one JSON line (a ping as
    ``{"event": "ping"}``); :attr:`failed` once an ``error`` event came."""

    def __init__(self, out: TextIO) -> None:
        from gcite.stream.sse import LineDecoder, SSEDecoder, Utf8Decoder

        self.out = out
        self.failed = False
        self._utf8, self._lines, self._sse = Utf8Decoder(), LineDecoder(), SSEDecoder()

    def feed(self, chunk: bytes) -> None:
        """Print the events ``chunk`` completes."""
        self._emit(self._lines.decode(self._utf8.decode(chunk)))

    def close(self) -> None:
        """End of the stream: print what is left."""
        self._emit(self._lines.decode(self._utf8.flush()) + self._lines.flush())

    def _emit(self, text_lines: list[str]) -> None:
        for line in text_lines:
            event = self._sse.decode(line)
            if event is None:
                continue
            if not event.data:
                self.out.write(json.dumps({"event": event.event}, ensure_ascii=False) + "\n")
                continue
            try:
                obj: Any = json.loads(event.data)
            except ValueError:
                obj = {"event": "invalid_frame", "data": event.data}
            if isinstance(obj, dict) and obj.get("event") == "error":
                self.failed = True
            self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self.out.flush()


async def print_json_events(frames: AsyncIterator[bytes], out: TextIO) -> int:
    """``--json`` for the local frames; 1 if an ``error`` event came."""
    printer = JsonPrinter(out)
    async for chunk in frames:
        printer.feed(chunk)
    printer.close()
    return 1 if printer.failed else 0


async def print_remote_json(url: str, key: str, question: str, out: TextIO, **kw: Any) -> int:
    """``--json`` with ``--url``: the raw events the shared consumer reads; 1 on an
    ``error`` event or a broken stream."""
    printer = JsonPrinter(out)
    failed = False
    async for update in remote_updates(url, key, question, on_bytes=printer.feed, **kw):
        if isinstance(update, AnswerFinished):
            failed = update.result.error is not None
    printer.close()
    return 1 if printer.failed or failed else 0


def _console(out: TextIO, *, force: bool = False, width: int | None = None) -> Any:
    """A rich Console on ``out`` (no highlighting, no emoji codes, no OSC 8 links)."""
    from rich.console import Console

    return Console(
        file=out,
        highlight=False,
        emoji=False,
        force_terminal=True if force else None,
        width=width,
    )


async def print_answer(
    updates: AsyncIterator[StreamUpdate],
    out: TextIO,
    err: TextIO,
    *,
    rich_markdown: bool | None = None,
    width: int | None = None,
) -> int:
    """Stream the answer to ``out``, then the numbered sources.

    On a terminal (or with ``rich_markdown=True``) the answer is rendered with rich's
    Markdown (headings, lists, bold, tables, code), citations as superscripts in place
    (``一次¹。``, adjacent ones ``¹˒²``); each top-level block is printed once it is
    complete (:class:`gcite.stream.render.MarkdownBlocks`) and the block being written is
    shown live below them. Otherwise (a pipe, a file) the Markdown source is written as it
    streams, with the same superscripts, so it stays greppable and unwrapped. ``width``:
    columns for rich (default: the terminal's). Returns 0, or 1 when the stream reported
    an error or broke off (message on ``err``).
    """
    console = _console(out, force=bool(rich_markdown), width=width)
    if rich_markdown is None:
        rich_markdown = bool(console.is_terminal)
    printer: _RichAnswer | _PlainAnswer = (
        _RichAnswer(console) if rich_markdown else _PlainAnswer(out)
    )
    result = None
    with printer:
        async for update in updates:
            if isinstance(update, SegmentsReceived) and update.segments:
                printer.feed(update)
            elif isinstance(update, AnswerFinished):
                result = update.result
    if result is None:
        raise StreamError("回答流没有正常结束")
    printer.done()
    return _finish(result, printer.wrote, out, err)


class _RichAnswer:
    """The answer rendered by rich: complete Markdown blocks printed, the open one live.
    A context manager around the stream (the live display); :attr:`wrote` once any
    answer text came."""

    def __init__(self, console: Any) -> None:
        from rich.live import Live
        from rich.text import Text

        from gcite.stream.render import MarkdownBlocks

        self.wrote = False
        self._console = console
        self._blocks = MarkdownBlocks()
        self._live = Live(
            Text(""), console=console, transient=True, auto_refresh=console.is_terminal
        )

    @staticmethod
    def _markdown(source: str) -> Any:
        from rich.markdown import Markdown

        return Markdown(source, hyperlinks=False, code_theme="ansi_dark")

    def __enter__(self) -> _RichAnswer:
        self._live.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        from rich.text import Text

        if kind is None:
            self._live.update(Text(""))
        self._live.__exit__(kind, exc, tb)
        if kind is None:
            for source in self._blocks.close():
                self._console.print(self._markdown(source))

    def feed(self, update: SegmentsReceived) -> None:
        """Print the blocks ``update`` completes; show the open one live."""
        from rich.text import Text

        from gcite.stream.render import MarkdownBlocks

        live = self._live
        if update.replace:
            # message_replace: what was printed stays; the new answer follows
            for source in self._blocks.close():
                live.console.print(self._markdown(source))
            if self.wrote:
                live.console.print(Text("（以下为替换后的回答）", style="dim"))
            self._blocks = MarkdownBlocks()
        for source in self._blocks.feed(update.segments):
            live.console.print(self._markdown(source))
            self.wrote = True
        if self._blocks.open.strip():
            self.wrote = True
            if self._console.is_terminal:
                live.update(self._markdown(self._blocks.open))

    def done(self) -> None:
        """The stream ended normally (everything was printed on leaving the context)."""


class _PlainAnswer:
    """The answer's Markdown source as it streams (superscripts in place); :attr:`wrote`
    once any answer text was written."""

    def __init__(self, out: TextIO) -> None:
        self.wrote = False
        self._out = out
        self._previous_cite = False

    def __enter__(self) -> _PlainAnswer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def feed(self, update: SegmentsReceived) -> None:
        """Write the text of ``update`` (a replaced answer starts on a new line)."""
        from gcite.stream.render import CITE_SEPARATOR, render_terminal

        if update.replace and self.wrote:
            self._out.write("\n")
            self._previous_cite = False
        text = render_terminal(update.segments)
        if self._previous_cite and "cite" in update.segments[0]:
            text = CITE_SEPARATOR + text  # "¹˒²" across two updates too
        answer_parts = [s for s in update.segments if "text" in s or "cite" in s]
        if answer_parts:
            self._previous_cite = "cite" in answer_parts[-1]
        if text:
            self._out.write(text)
            self._out.flush()
            self.wrote = True

    def done(self) -> None:
        """The stream ended normally: end the answer's line."""
        if self.wrote:
            self._out.write("\n")


def _with_support(sources: str, result: Any, render: Any) -> str:
    """The source list with each source's supporting sentence under it, from the run's
    ``gcite_verification`` (:func:`gcite.verify.terminal.support_lines`); unchanged
    when the service sent none."""
    from gcite.verify.terminal import support_lines

    lines = support_lines((result.metadata or {}).get("gcite_verification"))
    if not lines:
        return sources
    parts = ["来源："]
    for entry in result.panel:
        block = render([entry]).split("\n", 1)[1].rstrip("\n")
        parts.append(block)
        if str(entry["raw_id"]) in lines:
            parts.append(lines[str(entry["raw_id"])])
    return "\n".join(parts) + "\n"


def _finish(result: Any, wrote: bool, out: TextIO, err: TextIO) -> int:
    """The verifier's notice and the sources after the answer; the exit status (1 when the
    answer failed)."""
    from gcite.stream.render import render_sources_terminal
    from gcite.verify.terminal import notice_line

    notice = notice_line((result.metadata or {}).get("gcite_verification"))
    if notice is not None:  # the verifier found the question (a part of it) unanswered
        out.write(notice + "\n")
    sources = render_sources_terminal(result.panel)
    if sources:
        out.write("\n" + _with_support(sources, result, render_sources_terminal))
    out.flush()
    if result.error is not None:
        sentence = error_text({"code": result.error.code, "status": result.error.status})
        err.write(f"错误: 回答中断：{sentence}\n")
        return 1
    if not wrote and not result.answer:
        err.write("提示: 服务没有返回回答内容\n")
    return 0


async def _recorded(
    updates: AsyncIterator[StreamUpdate], sink: list[AnswerResult]
) -> AsyncIterator[StreamUpdate]:
    """``updates`` as they are, the final result also put in ``sink``."""
    async for update in updates:
        if isinstance(update, AnswerFinished):
            sink.append(update.result)
        yield update


def _stream_failure(exc: StreamError, url: str) -> ConfigError:
    """A remote service that could not be asked, as the client's Chinese sentence."""
    sentence = error_text({"code": exc.code, "status": exc.status})
    return ConfigError(f"{sentence.rstrip('。')}（{url}）")


def answer_in_terminal(
    settings: Settings,
    question: str,
    *,
    roles: Sequence[str] = (),
    as_json: bool = False,
    service: Service | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    conversation: str | None = None,
) -> int:
    """Answer ``question`` locally (or through ``service``) and print it; returns the exit status.

    ``conversation``: an earlier conversation to continue (its id). The conversation's id
    is printed on ``err`` after the answer (not with ``as_json``). Raises
    :class:`ConfigError` for an empty or over-long question, a bad URL, an unknown
    conversation or a service that cannot be reached (the client's Chinese sentence), and
    :class:`~gcite.errors.StoreError` when there is no local knowledge base.
    """
    code, conversation_id = ask_turn(
        settings,
        question,
        roles=roles,
        as_json=as_json,
        service=service,
        out=out,
        err=err,
        conversation=conversation,
    )
    if conversation_id and not as_json:
        hint = f'{continue_command(conversation_id, service)} "…"'
        (err or sys.stderr).write(f"对话 ID：{conversation_id}（追问：{hint}）\n")
    return code


def continue_command(conversation_id: str, service: Service | None) -> str:
    """The ``gcite ask`` command that continues ``conversation_id``: with ``--url`` (and
    ``--key …``, the key itself never printed) when it lives on a remote service."""
    command = f"gcite ask --conversation {conversation_id}"
    if service is None:
        return command
    command += f" --url {service.url}"
    return command + " --key …" if service.key else command


def ask_turn(
    settings: Settings,
    question: str,
    *,
    roles: Sequence[str] = (),
    as_json: bool = False,
    service: Service | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    conversation: str | None = None,
) -> tuple[int, str]:
    """One turn of a conversation: ``(exit status, conversation id)`` (``""`` when no
    conversation id is known: ``--json``, or a service that sent none). Errors as
    :func:`answer_in_terminal`."""
    out = out or sys.stdout
    err = err or sys.stderr
    question = question.strip()
    if not question:
        raise ConfigError("问题不能为空")
    if len(question) > MAX_QUESTION:
        raise ConfigError(f"问题过长（最多 {MAX_QUESTION} 个字符）")
    if service is not None:
        return _remote_turn(settings, question, service, as_json, out, err, conversation)
    results: list[AnswerResult] = []
    store = LocalConversations(settings.data_dir)
    if conversation:
        past = store.load(conversation)
        conversation_id = conversation
    else:
        from gcite.chatflow import new_id

        past, conversation_id = [], new_id()
    frames = local_frames(settings, question, roles, conversation_id=conversation_id, past=past)
    if as_json:
        return asyncio.run(print_json_events(frames, out)), ""
    code = asyncio.run(print_answer(_recorded(local_updates(frames), results), out, err))
    if results:
        result = results[0]
        store.append(
            conversation_id,
            {
                "query": question,
                "answer": result.raw_answer,
                "failed": result.error is not None,
                "chunk_metadata": result.chunk_metadata,
                "cited_ids": [raw for raw, _ in result.citations],
            },
        )
    return code, conversation_id


def parse_inputs(pairs: Sequence[str]) -> dict[str, str]:
    """``--input`` values (``名称=值``) as Dify ``inputs``; the value may contain ``=`` and be
    empty. Raises :class:`click.UsageError` (Chinese) for a pair without ``=`` or a name
    that is not a Dify variable name, or a name given twice."""
    inputs: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,29}", name):
            raise click.UsageError(
                f"--input 应写成 名称=值，名称为字母、数字、下划线（收到 {pair!r}）"
            )
        if name in inputs:
            raise click.UsageError(f"--input 重复给出了 {name}")
        inputs[name] = value
    return inputs


def _remote_turn(
    settings: Settings,
    question: str,
    service: Service,
    as_json: bool,
    out: TextIO,
    err: TextIO,
    conversation: str | None,
) -> tuple[int, str]:
    """:func:`ask_turn` through a running service."""
    results: list[AnswerResult] = []
    target, timeout_s = chat_url(service.url), settings.llm.timeout_s * 2
    try:
        if as_json:
            code = asyncio.run(
                print_remote_json(
                    target,
                    service.key,
                    question,
                    out,
                    timeout_s=timeout_s,
                    conversation_id=conversation or "",
                    inputs=service.inputs,
                )
            )
            return code, ""
        updates = remote_updates(
            target,
            service.key,
            question,
            timeout_s=timeout_s,
            conversation_id=conversation or "",
            inputs=service.inputs,
        )
        code = asyncio.run(print_answer(_recorded(updates, results), out, err))
    except StreamError as exc:
        if exc.status == 404 and conversation:
            raise ConfigError(f"没有这个对话：{conversation}") from exc
        raise _stream_failure(exc, target) from exc
    return code, results[0].conversation_id if results else ""


def interactive(
    settings: Settings,
    *,
    roles: Sequence[str] = (),
    service: Service | None = None,
    conversation: str | None = None,
    read: Callable[[], str | None] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Questions one per line (``read``: the next line, ``None`` at the end; default: the
    terminal's prompt ``问题>``), each answered in the same conversation. An empty line or
    ``退出`` / ``exit`` ends it; errors of one question are printed and the next is read.
    Returns 0, or 1 when the last answer failed."""
    err = err or sys.stderr

    def prompt() -> str | None:
        try:
            return str(click.prompt("问题", prompt_suffix="> ", default="", show_default=False))
        except click.Abort:
            return None

    read = read or prompt
    err.write("对话模式：每行一个问题，回车提问；空行、“退出”或 Ctrl+D 结束。\n")
    code = 0
    while True:
        line = read()
        if line is None or line.strip() in ("", "退出", "exit", "quit"):
            break
        try:
            code, conversation_id = ask_turn(
                settings,
                line,
                roles=roles,
                service=service,
                out=out,
                err=err,
                conversation=conversation,
            )
        except ConfigError as exc:
            err.write(f"错误: {exc}\n")
            code = 1
            continue
        conversation = conversation_id or conversation
        (out or sys.stdout).write("\n")
    if conversation:
        err.write(f"对话 ID：{conversation}（继续：{continue_command(conversation, service)}）\n")
    return code


@click.command(
    "ask",
    epilog="示例：\n\n"
    '  gcite ask "夜间巡更要打卡多少个点位？"\n\n'
    '  gcite ask "那白天呢？" --conversation <上一次打印的对话 ID>\n\n'
    "  gcite ask                       # 对话模式：逐行提问，自动保持对话\n\n"
    '  gcite ask "监控中心的备用钥匙放在哪里？" --role 安保主管\n\n'
    '  gcite ask "干粉灭火器怎么用？" --json\n\n'
    '  gcite ask "会议室怎么预订？" --url http://127.0.0.1:8000 --key app-xxx\n\n'
    '  gcite ask "消防通道能停车吗？" --url http://dify.example/v1 --key app-xxx '
    "--input user_roles=物业经理,运维工程师",
)
@click.argument("question", metavar="[问题]", required=False)
@click.option(
    "--conversation",
    metavar="对话ID",
    default=None,
    help="在这个对话中继续提问（ID 见上一次回答后打印的“对话 ID”）",
)
@click.option(
    "-i",
    "--interactive",
    "interactive_mode",
    is_flag=True,
    help="对话模式：逐行读入问题，在同一对话中回答（不给问题时默认如此）",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="角色",
    help="本地模式下以这些角色检索（可重复）。本命令是本机可信运维工具：角色由你指定，"
    "不经过 API Key 校验；不给则只看到不设角色限制的文档。",
)
@click.option("--json", "as_json", is_flag=True, help="不渲染回答：每行输出一个 Dify 事件 JSON")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="名称=值",
    help="配合 --url：请求的 inputs（Dify chatflow 开始节点的变量，"
    "如 user_roles=物业经理），可重复",
)
@settings_options(
    data_dir_help="知识库数据目录（默认 $GCITE_DATA_DIR 或 ./gcite-data）",
    config_help="配置文件（TOML，默认 <数据目录>/gcite.toml）",
    exists_kinds=True,
)
@service_options(url_help="改为连接正在运行的 gcite / Dify 服务，例如 http://127.0.0.1:8000")
def ask(
    question: str | None,
    conversation: str | None,
    interactive_mode: bool,
    roles: tuple[str, ...],
    as_json: bool,
    inputs: tuple[str, ...],
    source: SettingsSource,
    service: Service | None,
) -> None:
    """在终端提问：流式输出带上标引用的回答，最后列出编号的来源（知识库 / 网页）。

    默认在本进程内对本地知识库运行完整流程（检索 → 合并 → 生成），角色取自 --role。

    用 --url 时改为连接已运行的 gcite / Dify 服务，角色由服务端根据 API Key 决定。

    每次回答后在标准错误打印对话 ID；用 --conversation 在该对话中追问。不给问题（或用 -i）
    进入对话模式：逐行提问，自动保持同一对话。

    回答写到标准输出，提示和错误写到标准错误；回答出错时退出码为 1。
    """
    if service is not None and roles:
        raise click.UsageError("--role 只用于本地模式；连接服务时角色由 API Key 决定")
    if inputs:
        if service is None:
            raise click.UsageError("--input 只用于 --url：本地模式没有 chatflow 的开始节点变量")
        service = replace(service, inputs=parse_inputs(inputs))
    if question is not None and interactive_mode:
        raise click.UsageError("对话模式（-i）不带问题参数：问题逐行输入")
    if (question is None or interactive_mode) and as_json:
        raise click.UsageError("--json 需要给出问题，不能用于对话模式")
    settings = source.load()
    if question is None or interactive_mode:
        code = interactive(settings, roles=list(roles), service=service, conversation=conversation)
    else:
        code = answer_in_terminal(
            settings,
            question,
            roles=list(roles),
            as_json=as_json,
            service=service,
            conversation=conversation,
        )
    sys.exit(code)


__all__ = [
    "LocalConversations",
    "Service",
    "answer_in_terminal",
    "ask",
    "ask_turn",
    "chat_url",
    "continue_command",
    "interactive",
    "local_frames",
    "print_answer",
    "print_json_events",
    "print_remote_json",
    "remote_updates",
]
