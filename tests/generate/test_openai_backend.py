"""The OpenAI-compatible backend against the local streaming stand-in (a real HTTP server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gcite.config import Settings
from gcite.errors import ConfigError, LLMError
from gcite.generate.backends import Usage, make_backend
from gcite.generate.limits import LimitedBackend
from gcite.generate.openai_backend import OpenAIBackend
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "system", "content": "系统"}, {"role": "user", "content": "问题"}]


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


def _backend(standin: OpenAIStandin, timeout_s: float = 10.0) -> OpenAIBackend:
    settings = Settings(
        llm_base_url=standin.base_url, llm_model="m1", llm_api_key="sk-1", llm_timeout_s=timeout_s
    )
    backend = make_backend(settings)
    assert isinstance(backend, LimitedBackend) and backend.name == "openai:m1"
    assert isinstance(backend.inner, OpenAIBackend)
    return backend.inner


async def _run(backend: OpenAIBackend, usage: Usage | None = None) -> list[str]:
    return [d async for d in backend.stream(MESSAGES, chunks=[], query="问题", usage=usage)]


async def test_streams_deltas_and_reads_usage(standin: OpenAIStandin) -> None:
    standin.push(Script.text("答案[C:1]。", size=2, usage=(40, 3)))
    usage = Usage()
    backend = _backend(standin)
    assert await _run(backend, usage) == ["答案", "[C", ":1", "]。"]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.estimated) == (40, 3, False)
    request = standin.requests[-1]
    assert request["model"] == "m1" and request["stream"] is True
    assert request["messages"] == MESSAGES
    assert standin.request_headers[-1]["authorization"] == "Bearer sk-1"
    await backend.aclose()


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        (Script(status=401, error={"message": "invalid key", "type": "auth"}), "401"),
        (Script(status=500), "500"),
        (Script.text("一二三四", size=1, drop_after=2), "中断"),
    ],
)
async def test_failures_become_llm_errors(
    standin: OpenAIStandin, script: Script, fragment: str
) -> None:
    standin.push(script)
    backend = _backend(standin)
    received: list[str] = []
    with pytest.raises(LLMError, match=fragment):
        async for delta in backend.stream(MESSAGES, chunks=[], query="q"):
            received.append(delta)
    assert "".join(received) in ("", "一二")
    await backend.aclose()


@pytest.mark.parametrize(
    ("frames", "fragment"),
    [
        (
            [b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n', b"data: {not json\n\n"],
            "无法解析",
        ),
        ([b'data: {"error": {"message": "overloaded"}}\n\n'], "overloaded"),
        ([b"data: [1, 2]\n\n"], "无法解析"),
    ],
)
async def test_malformed_stream_chunks_become_llm_errors(
    standin: OpenAIStandin, frames: list[bytes], fragment: str
) -> None:
    standin.push(Script(raw=frames))
    backend = _backend(standin)
    with pytest.raises(LLMError, match=fragment):
        await _run(backend)
    await backend.aclose()


async def test_stream_without_done_and_odd_lines(standin: OpenAIStandin) -> None:
    frames = [
        b": keep-alive comment\n\n",
        b'data: {"choices": []}\n\n',
        b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\n',
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n',
    ]
    standin.push(Script(raw=frames))  # a finish_reason without [DONE] is a complete answer
    usage = Usage()
    backend = _backend(standin)
    assert await _run(backend, usage) == ["ok"]
    assert usage.completion_tokens == 1 and usage.estimated
    await backend.aclose()


async def test_stream_ending_without_done_or_finish_reason_is_truncated(
    standin: OpenAIStandin,
) -> None:
    frames = [
        b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "\xe4\xb8\x80\xe4\xba\x8c"}}]}\n\n',
    ]
    standin.push(Script(raw=frames))  # the body ends cleanly, but the answer never finished
    backend = _backend(standin)
    received: list[str] = []
    with pytest.raises(LLMError, match="中断"):
        async for delta in backend.stream(MESSAGES, chunks=[], query="q"):
            received.append(delta)
    assert received == ["一二"]
    await backend.aclose()


async def test_timeout_becomes_llm_error(standin: OpenAIStandin) -> None:
    standin.push(Script(hang=True))
    backend = _backend(standin, timeout_s=0.3)
    with pytest.raises(LLMError):
        await _run(backend)
    await backend.aclose()


def test_model_is_required() -> None:
    with pytest.raises(ConfigError):
        make_backend(Settings(llm_base_url="http://127.0.0.1:9/v1"))
