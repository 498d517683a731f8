"""An OpenAI-compatible chat-completions backend, streaming, through the official SDK.

Covers any endpoint speaking the OpenAI chat-completions protocol (OpenAI, DeepSeek,
Qwen/DashScope compatible mode, Ollama, vLLM, ...). Base URL, key and model come
from settings (``llm_base_url``, ``llm_api_key``, ``llm_model``; or ``GCITE_LLM_*``).

All SDK / transport exceptions are translated to :class:`gcite.errors.LLMError` in
:meth:`OpenAIBackend.stream`, the one boundary; cancellation closes the HTTP response
(so the provider stops generating).

Reasoning models: providers stream the reasoning in a separate delta field —
``reasoning_content`` (DeepSeek-R1, Qwen3 on DashScope, vLLM before the rename) or
``reasoning`` (vLLM now, Ollama, OpenRouter) — with ``content`` ``null`` or ``""`` beside
it. Those pieces are yielded as :class:`~gcite.generate.backends.Reasoning`, never as
answer text; the Dify wire puts them where Dify's ``reasoning_format: tagged`` does (a
``<think>`` block at the start of the answer). Models that write the ``<think>`` tags into
``content`` themselves pass through unchanged (the stream parsers keep that block apart).
Estimated usage counts reasoning deltas too.

Broken Unicode: a provider that cuts a character outside the BMP between two chunks
sends each half as a lone JSON surrogate escape; the halves are joined again, and a
surrogate that stays alone becomes U+FFFD, so every yielded delta is valid Unicode.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from gcite.config import Settings
from gcite.errors import ConfigError, LLMError
from gcite.generate.backends import BackendLifecycle, Reasoning, Usage, estimate_tokens
from gcite.generate.limits import capped_lines
from gcite.stream.surrogates import SurrogateJoiner

if TYPE_CHECKING:
    import openai

HTTP_POOL: dict[str, Any] = {
    "max_connections": None,
    "max_keepalive_connections": 2048,
    "keepalive_expiry": 30.0,
}
"""The model endpoint's connection pool (httpx ``Limits``): no cap on concurrent streams,
every idle connection kept for reuse."""


_STREAMED: Any = {"headers": {"X-Stainless-Raw-Response": "stream"}}
"""Request options that make the SDK's ``post`` return the response unread: the header
``with_streaming_response`` sets (the SDK's ``RAW_RESPONSE_HEADER``; sent along, as there,
and ignored by providers)."""


class OpenAIBackend(BackendLifecycle):
    """Streams ``/chat/completions`` deltas (``choices[0].delta.content``) as text and the
    reasoning fields (``reasoning_content`` / ``reasoning``) as :class:`Reasoning` pieces.

    ``base_url``: e.g. ``https://api.deepseek.com/v1``; ``api_key`` may be empty for local
    servers (a placeholder is sent); ``timeout_s``: connect/read timeout in seconds.
    Usage is read from the final chunk when the provider supports
    ``stream_options.include_usage``, else estimated.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout_s: float = 60.0,
        temperature: float | None = None,
        max_line_bytes: int = 1_000_000,
    ) -> None:
        if not model:
            raise ConfigError("已设置 llm_base_url，但缺少 llm_model（模型名称）")
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.max_line_bytes = max_line_bytes  # one SSE line, bytes
        self.name = f"openai:{model}"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client: openai.AsyncOpenAI | None = None
        self._client_lock = threading.Lock()

    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, built (and the SDK imported: a large share of a bare start-up's
        CPU) on first use: by :meth:`warm_up` in the background after start-up, or by the
        first answer. One long-lived client per endpoint for the backend's life (never per
        request), on one HTTP connection pool whose idle connections are all kept: the
        SDK's default keeps 100, so beyond 100 concurrent streams each new stream paid a
        TCP connect. Thread-safe (the warm-up runs in a worker thread)."""
        with self._client_lock:
            if self._client is None:
                import httpx2
                import openai

                self._client = openai.AsyncOpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key or "not-needed",
                    timeout=self._timeout_s,
                    max_retries=0,
                    http_client=openai.DefaultAsyncHttpxClient(
                        timeout=self._timeout_s, limits=httpx2.Limits(**HTTP_POOL)
                    ),
                )
            return self._client

    def warm_up(self) -> None:
        """Import the SDK and build the client (:meth:`client`)."""
        self.client()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIBackend:
        """Build from ``llm_base_url`` / ``llm_api_key`` / ``llm_model`` / ``llm_timeout_s``."""
        return cls(
            base_url=settings.llm.base_url,
            model=settings.llm.model,
            api_key=settings.llm.api_key,
            timeout_s=settings.llm.timeout_s,
            max_line_bytes=settings.llm.max_stream_line_bytes,
        )

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]] = (),
        query: str = "",
        usage: Usage | None = None,
    ) -> AsyncIterator[str | Reasoning]:
        """Yield answer-text deltas and :class:`Reasoning` pieces, valid Unicode both; raise
        :class:`LLMError` on any provider/transport failure."""
        import httpx2
        import openai

        client = self.client()
        usage = usage if usage is not None else Usage()
        usage.prompt_tokens = estimate_tokens(messages)
        usage.completion_tokens = 0
        usage.estimated = True
        try:
            # The SDK builds, authenticates and sends the request and maps HTTP errors. The
            # body goes through ``post`` as it is: ``chat.completions.create`` first walks it
            # against the SDK's TypedDicts (``async_maybe_transform``), a large share of a chat
            # worker's CPU under load, to no effect on a body of plain strings. The chunks
            # are decoded here with json.loads instead of one pydantic model per chunk (that
            # costs far more CPU per delta: see docs/benchmarks.md, "Chat service").
            ended = _End()
            joiner = _PieceJoiner()
            response = await client.post(
                "/chat/completions",
                cast_to=httpx2.Response,
                body=self._body(messages),
                options=_STREAMED,
            )
            try:
                async for line in capped_lines(response.aiter_bytes(), self.max_line_bytes):
                    piece = _delta(line, usage, ended)
                    if piece is _DONE:
                        break
                    if not isinstance(piece, _Piece) or not (piece.content or piece.reasoning):
                        continue
                    if usage.estimated:
                        usage.completion_tokens += 1
                    for out in joiner.feed(piece):
                        yield out
            finally:
                await response.aclose()
            for out in joiner.flush():
                yield out
            if not ended.done and not ended.finish_reason:
                # the body ended without [DONE] and without a finish_reason: a proxy or the
                # provider cut the answer off; a truncated answer must not look complete
                raise LLMError("模型服务的流在回答结束前中断（没有 finish_reason，也没有 [DONE]）")
        except openai.APIStatusError as exc:
            raise LLMError(f"模型服务返回错误 HTTP {exc.status_code}: {_message(exc)}") from exc
        except openai.APITimeoutError as exc:
            raise LLMError("模型服务响应超时") from exc
        except (openai.APIError, httpx.HTTPError, httpx2.HTTPError) as exc:
            raise LLMError(f"模型服务连接中断: {type(exc).__name__}") from exc

    def _body(self, messages: Sequence[dict[str, str]]) -> dict[str, Any]:
        """The chat-completions request body: a streamed answer with usage."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    async def aclose(self) -> None:
        """Close the HTTP connection pool (when the client was built)."""
        if self._client is not None:
            await self._client.close()


_DONE = object()


@dataclass(frozen=True)
class _Piece:
    """What one chunk carries: reasoning text and answer text (either may be empty)."""

    reasoning: str = ""
    content: str = ""


class _PieceJoiner:
    """Reasoning and answer text of the pieces as they go on: a surrogate pair split
    across two chunks is joined; a half left alone (also when the other kind of text
    comes next) is U+FFFD."""

    def __init__(self) -> None:
        self._thought, self._said = SurrogateJoiner(), SurrogateJoiner()

    def feed(self, piece: _Piece) -> list[str | Reasoning]:
        """What ``piece`` makes final, in order."""
        out: list[str | Reasoning] = []
        reasoning = self._thought.feed(piece.reasoning) if piece.reasoning else ""
        if piece.content:
            reasoning += self._thought.flush()
        elif piece.reasoning:
            said_tail = self._said.flush()
            if said_tail:
                out.append(said_tail)
        if reasoning:
            out.append(Reasoning(reasoning))
        text = self._said.feed(piece.content) if piece.content else ""
        if text:
            out.append(text)
        return out

    def flush(self) -> list[str | Reasoning]:
        """What is left at the end of the stream."""
        out: list[str | Reasoning] = []
        tail = self._thought.flush()
        if tail:
            out.append(Reasoning(tail))
        tail = self._said.flush()
        if tail:
            out.append(tail)
        return out


@dataclass
class _End:
    """How a stream said it ended: ``data: [DONE]`` seen, the last ``finish_reason``."""

    done: bool = False
    finish_reason: str | None = None


def _chunk(data: str) -> dict[str, Any]:
    """One chunk's JSON object; :class:`LLMError` when it is malformed or an ``error``."""
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise LLMError(f"模型服务返回了无法解析的数据: {data[:80]!r}") from exc
    if not isinstance(chunk, dict):
        raise LLMError(f"模型服务返回了无法解析的数据: {data[:80]!r}")
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise LLMError(f"模型服务在流中返回错误: {message}")
    return chunk


def _record_usage(chunk: dict[str, Any], usage: Usage) -> None:
    """The token counts of a chunk that reports them, into ``usage`` (no longer estimated)."""
    reported = chunk.get("usage")
    if isinstance(reported, dict):
        prompt, completion = reported.get("prompt_tokens"), reported.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            usage.prompt_tokens, usage.completion_tokens = prompt, completion
            usage.estimated = False


def _delta(line: str, usage: Usage, ended: _End | None = None) -> object:
    """Decode one SSE line of a chat-completions stream (OpenAI API reference, "Streaming").

    Returns a :class:`_Piece` (reasoning from ``delta.reasoning_content`` or
    ``delta.reasoning``, answer text from ``delta.content``; both may be empty),
    ``_DONE`` at ``data: [DONE]``, or ``""`` for lines that carry no chunk (comments,
    ``event:``, usage-only chunks).
    Records usage when the chunk has it, and ``[DONE]`` / ``finish_reason`` in ``ended``.
    Raises :class:`LLMError` for a malformed chunk
    or an ``error`` object sent in the stream.
    """
    if not line.startswith("data:"):
        return ""
    data = line[5:].strip()
    if data == "[DONE]":
        if ended is not None:
            ended.done = True
        return _DONE
    if not data:
        return ""
    chunk = _chunk(data)
    _record_usage(chunk, usage)
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    finish = choices[0].get("finish_reason")
    if ended is not None and isinstance(finish, str) and finish:
        ended.finish_reason = finish
    delta = choices[0].get("delta")
    if not isinstance(delta, dict):
        return _Piece()
    content = delta.get("content")
    reasoning = delta.get("reasoning_content")
    if not isinstance(reasoning, str) or not reasoning:
        reasoning = delta.get("reasoning")
    return _Piece(
        reasoning=reasoning if isinstance(reasoning, str) else "",
        content=content if isinstance(content, str) else "",
    )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(exc.message)


__all__ = ["OpenAIBackend"]
