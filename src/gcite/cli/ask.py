"""``gcite ask "问题"``: one question, the answer streamed in the terminal (issue 7, item 3).

Two sources of the same Dify chat SSE byte stream, one consumer:

- local (default): the chatflow (:class:`gcite.service.pipeline.Chatflow`) runs in this
  process on the local knowledge base, its typed events serialised exactly as the service
  sends them (:func:`gcite.service.envelope.to_wire` + :func:`gcite.service.sse.data_frame`).
  The caller's roles come from ``--role``: a local, trusted operator tool.
- remote (``--url``): ``POST <url>/v1/chat-messages`` of a running gcite or Dify service
  with ``Authorization: Bearer <key>``; the server decides the roles from the key.

The bytes go through :class:`gcite.stream.sse.DifyStreamConsumer` (mobile design
document §3–§4): answer text to stdout as it streams, citations as superscripts
(``¹²³``), then the numbered source list (``1. [知识库] 标题 — 副标题``). ``--json``
prints every event object instead, one JSON per line (a ``ping`` as ``{"event":
"ping"}``). Progress and errors go to stderr; exit status 0, or 1 when the answer
failed (error event, broken stream) — the text received so far is still printed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import click
import httpx

from gcite.config import Settings, load_settings
from gcite.errors import ConfigError, StreamError

CLI_USER = "gcite-cli"
MAX_QUESTION = 4000


async def local_frames(
    settings: Settings, question: str, roles: Sequence[str]
) -> AsyncIterator[bytes]:
    """Run the chatflow in process; yield its events as Dify SSE ``data:`` frames (bytes).

    ``roles``: the caller's roles (trusted: the operator's own machine). Raises
    :class:`~gcite.errors.StoreError` up front when the knowledge base cannot be opened
    and :class:`ConfigError` for bad LLM / web settings.
    """
    from gcite.generate.backends import make_backend
    from gcite.knowledge import open_store
    from gcite.service.envelope import Envelope, to_wire
    from gcite.service.pipeline import ChatDeps, Chatflow, ChatTurn
    from gcite.service.sse import data_frame
    from gcite.service.store import new_id
    from gcite.web import make_web_source

    store = open_store(settings)  # fail early, as one line, when there is no knowledge base
    backend = make_backend(settings)
    web_source = make_web_source(settings)
    turn = ChatTurn(
        query=question,
        user=CLI_USER,
        conversation_id=new_id(),
        message_id=new_id(),
        roles=tuple(roles),
    )
    deps = ChatDeps(
        settings=settings, backend=backend, get_store=lambda: store, web_source=web_source
    )
    envelope = Envelope(
        task_id=new_id(),
        message_id=turn.message_id,
        conversation_id=turn.conversation_id,
        created_at=turn.created_at,
        workflow_run_id=turn.workflow_run_id,
        stream_event=settings.stream_event,
    )
    async for event in Chatflow(turn, deps).events():
        yield data_frame(to_wire(event, envelope))


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


def _error_body(status: int, body: bytes) -> str:
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("message"), str):
        code = obj.get("code")
        return f"服务返回 HTTP {status}: {obj['message']}" + (f"（{code}）" if code else "")
    return f"服务返回 HTTP {status}"


async def remote_frames(
    url: str, key: str, question: str, *, timeout_s: float = 120.0
) -> AsyncIterator[bytes]:
    """POST the question to a gcite / Dify service (streaming mode); yield the body bytes.

    Raises :class:`StreamError` when no event stream opens (connection refused, timeout,
    non-2xx status with Dify's ``{code, message, status}`` body, wrong content type).
    A connection that breaks after the stream opened raises :class:`StreamError` too;
    the caller has already shown what came before.
    """
    body = {"inputs": {}, "query": question, "response_mode": "streaming", "user": CLI_USER}
    headers = {"Accept": "text/event-stream"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    try:
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("POST", url, json=body, headers=headers) as response,
        ):
            if not 200 <= response.status_code < 300:
                data = b""
                async for piece in response.aiter_bytes():
                    data += piece
                    if len(data) > 65536:
                        break
                raise StreamError(_error_body(response.status_code, data))
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type.lower():
                raise StreamError(f"服务没有返回事件流（Content-Type: {content_type or '无'}）")
            async for chunk in response.aiter_bytes():
                yield chunk
    except httpx.TimeoutException as exc:
        raise StreamError(f"连接服务超时：{url}") from exc
    except httpx.HTTPError as exc:
        raise StreamError(f"与服务的连接出错：{url}（{type(exc).__name__}: {exc}）") from exc


async def print_json_events(frames: AsyncIterator[bytes], out: TextIO) -> int:
    """``--json``: every SSE event as one JSON line on ``out``; 1 if an ``error`` event came."""
    from gcite.stream.sse import LineDecoder, SSEDecoder, Utf8Decoder

    utf8, lines, sse = Utf8Decoder(), LineDecoder(), SSEDecoder()
    status = 0

    def emit(text_lines: list[str]) -> None:
        nonlocal status
        for line in text_lines:
            event = sse.decode(line)
            if event is None:
                continue
            if not event.data:
                out.write(json.dumps({"event": event.event}, ensure_ascii=False) + "\n")
                continue
            try:
                obj: Any = json.loads(event.data)
            except ValueError:
                obj = {"event": "invalid_frame", "data": event.data}
            if isinstance(obj, dict) and obj.get("event") == "error":
                status = 1
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            out.flush()

    try:
        async for chunk in frames:
            emit(lines.decode(utf8.decode(chunk)))
    except StreamError:
        emit(lines.decode(utf8.flush()) + lines.flush())
        raise
    emit(lines.decode(utf8.flush()) + lines.flush())
    return status


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
    frames: AsyncIterator[bytes],
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
    if not rich_markdown:
        return await _print_plain(frames, out, err)
    from rich.live import Live
    from rich.markdown import Markdown
    from rich.text import Text

    from gcite.stream.render import MarkdownBlocks
    from gcite.stream.sse import DifyStreamConsumer, SegmentsReceived

    consumer = DifyStreamConsumer()
    blocks = MarkdownBlocks()
    wrote = False
    live = Live(Text(""), console=console, transient=True, auto_refresh=console.is_terminal)

    def markdown(source: str) -> Any:
        return Markdown(source, hyperlinks=False, code_theme="ansi_dark")

    def show(updates: list[Any]) -> None:
        nonlocal wrote, blocks
        for update in updates:
            if isinstance(update, SegmentsReceived) and update.segments:
                if update.replace:
                    # message_replace: what was printed stays; the new answer follows
                    done = blocks.close()
                    for source in done:
                        live.console.print(markdown(source))
                    if wrote:
                        live.console.print(Text("（以下为替换后的回答）", style="dim"))
                    blocks = MarkdownBlocks()
                for source in blocks.feed(update.segments):
                    live.console.print(markdown(source))
                    wrote = True
                if blocks.open.strip():
                    wrote = True
                    if console.is_terminal:
                        live.update(markdown(blocks.open))

    with live:
        try:
            async for chunk in frames:
                show(consumer.feed(chunk))
                if consumer.stopped:
                    break
        except StreamError as exc:
            if not wrote:
                raise
            show(consumer.fail("stream_interrupted", str(exc)))
        show(consumer.close())
        live.update(Text(""))
    for source in blocks.close():
        console.print(markdown(source))
    return _finish(consumer.result, wrote, out, err)


async def _print_plain(frames: AsyncIterator[bytes], out: TextIO, err: TextIO) -> int:
    """The answer's Markdown source as it streams (superscripts in place), then sources."""
    from gcite.stream.render import render_terminal
    from gcite.stream.sse import DifyStreamConsumer, SegmentsReceived

    consumer = DifyStreamConsumer()
    wrote = False
    previous_cite = False

    def show(updates: list[Any]) -> None:
        nonlocal wrote, previous_cite
        for update in updates:
            if isinstance(update, SegmentsReceived) and update.segments:
                if update.replace and wrote:
                    out.write("\n")
                    previous_cite = False
                text = render_terminal(update.segments)
                first = update.segments[0]
                if previous_cite and "cite" in first:
                    text = "˒" + text  # "¹˒²" across two updates too
                last = update.segments[-1]
                previous_cite = "cite" in last
                if text:
                    out.write(text)
                    out.flush()
                    wrote = True

    try:
        async for chunk in frames:
            show(consumer.feed(chunk))
            if consumer.stopped:
                break
    except StreamError as exc:
        if not wrote:
            raise
        show(consumer.fail("stream_interrupted", str(exc)))
    show(consumer.close())
    if wrote:
        out.write("\n")
    return _finish(consumer.result, wrote, out, err)


def _finish(result: Any, wrote: bool, out: TextIO, err: TextIO) -> int:
    """Sources after the answer; the exit status (1 when the answer failed)."""
    from gcite.stream.render import render_sources_terminal

    sources = render_sources_terminal(result.panel)
    if sources:
        out.write("\n" + sources)
    out.flush()
    if result.error is not None:
        err.write(f"错误: 回答中断：{result.error.message}（{result.error.code}）\n")
        return 1
    if not wrote and not result.answer:
        err.write("提示: 服务没有返回回答内容\n")
    return 0


def answer_in_terminal(
    settings: Settings,
    question: str,
    *,
    roles: Sequence[str] = (),
    as_json: bool = False,
    url: str | None = None,
    key: str = "",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Answer ``question`` locally (or through ``url``) and print it; returns the exit status.

    Raises :class:`ConfigError` for an empty or over-long question or a bad URL,
    :class:`StreamError` when the remote service cannot be reached, and
    :class:`~gcite.errors.StoreError` when there is no local knowledge base.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    question = question.strip()
    if not question:
        raise ConfigError("问题不能为空")
    if len(question) > MAX_QUESTION:
        raise ConfigError(f"问题过长（最多 {MAX_QUESTION} 个字符）")
    if url is not None:
        frames = remote_frames(chat_url(url), key, question, timeout_s=settings.llm_timeout_s * 2)
    else:
        frames = local_frames(settings, question, roles)
    if as_json:
        return asyncio.run(print_json_events(frames, out))
    return asyncio.run(print_answer(frames, out, err))


@click.command(
    "ask",
    epilog="示例：\n\n"
    '  gcite ask "夜间巡更要打卡多少个点位？"\n\n'
    '  gcite ask "监控中心的备用钥匙放在哪里？" --role 安保主管\n\n'
    '  gcite ask "干粉灭火器怎么用？" --json\n\n'
    '  gcite ask "会议室怎么预订？" --url http://127.0.0.1:8000 --key app-xxx',
)
@click.argument("question", metavar="问题")
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
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="知识库数据目录（默认 $GCITE_DATA_DIR 或 ./gcite-data）",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="配置文件（TOML，默认 <数据目录>/gcite.toml）",
)
@click.option(
    "--url", default=None, help="改为连接正在运行的 gcite / Dify 服务，例如 http://127.0.0.1:8000"
)
@click.option(
    "--key", envvar="GCITE_API_KEY", default="", help="配合 --url 的 API Key（或 $GCITE_API_KEY）"
)
def ask(
    question: str,
    roles: tuple[str, ...],
    as_json: bool,
    data_dir: Path | None,
    config_file: Path | None,
    url: str | None,
    key: str,
) -> None:
    """在终端提问：流式输出带上标引用的回答，最后列出编号的来源（知识库 / 网页）。

    默认在本进程内对本地知识库运行完整流程（检索 → 合并 → 生成），角色取自 --role。

    用 --url 时改为连接已运行的 gcite / Dify 服务，角色由服务端根据 API Key 决定。

    回答写到标准输出，提示和错误写到标准错误；回答出错时退出码为 1。
    """
    if url is not None and roles:
        raise click.UsageError("--role 只用于本地模式；连接服务时角色由 API Key 决定")
    settings = load_settings(
        {"data_dir": str(data_dir) if data_dir else None}, config_file=config_file
    )
    code = answer_in_terminal(
        settings, question, roles=list(roles), as_json=as_json, url=url, key=key
    )
    sys.exit(code)


__all__ = [
    "answer_in_terminal",
    "ask",
    "chat_url",
    "local_frames",
    "print_answer",
    "print_json_events",
    "remote_frames",
]
