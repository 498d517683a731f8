"""The OpenAI-compatible backend against the local streaming stand-in (a real HTTP server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gcite.config import Settings
from gcite.errors import ConfigError, LLMError
from gcite.generate.backends import Reasoning, Usage
from gcite.generate.factory import make_backend
from gcite.generate.limits import LimitedBackend
from gcite.generate.openai_backend import OpenAIBackend
from gcite.stream.parser import parse_all
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "system", "content": "系统"}, {"role": "user", "content": "问题"}]


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


def _backend(standin: OpenAIStandin, timeout_s: float = 10.0) -> OpenAIBackend:
    settings = Settings.from_keys(
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
    # the body as the chat-completions API defines it, sent as built (no SDK transform)
    assert standin.requests[-1] == {
        "model": "m1",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = standin.request_headers[-1]
    assert headers["authorization"] == "Bearer sk-1"
    assert headers["content-type"] == "application/json"
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
        make_backend(Settings.from_keys(llm_base_url="http://127.0.0.1:9/v1"))


# -- reasoning models and broken Unicode (issue: citation contract v2) ----------------


async def _split(backend: OpenAIBackend, usage: Usage | None = None) -> tuple[str, str]:
    """(reasoning, answer) of one streamed call; checks every piece is valid Unicode."""
    reasoning, answer = [], []
    async for piece in backend.stream(MESSAGES, chunks=[], query="q", usage=usage):
        text = piece.text if isinstance(piece, Reasoning) else piece
        text.encode("utf-8")  # raises on a lone surrogate
        (reasoning if isinstance(piece, Reasoning) else answer).append(text)
    return "".join(reasoning), "".join(answer)


@pytest.mark.parametrize(
    ("field", "placeholder"),
    [
        ("reasoning_content", None),  # DeepSeek-R1 (content: null), Qwen3 on DashScope
        ("reasoning_content", ""),  # vLLM before the rename
        ("reasoning", ""),  # vLLM now, Ollama (content: "")
        ("reasoning", None),
    ],
)
async def test_reasoning_fields_become_reasoning_pieces(
    standin: OpenAIStandin, field: str, placeholder: str | None
) -> None:
    standin.push(
        Script(
            reasoning=["先看片段", "[C:3]，再想"],
            deltas=["\n\n", "答案[C:1]", "。"],
            reasoning_field=field,
            reasoning_placeholder=placeholder,
        )
    )
    usage = Usage()
    backend = _backend(standin)
    assert await _split(backend, usage) == ("先看片段[C:3]，再想", "\n\n答案[C:1]。")
    assert usage.completion_tokens == 5  # the stand-in reports reasoning + answer deltas
    await backend.aclose()


async def test_estimated_usage_counts_reasoning_deltas(standin: OpenAIStandin) -> None:
    frames = [
        b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": null, "reasoning_content": "r1"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "", "reasoning": "r2"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n',
    ]
    standin.push(Script(raw=frames))
    usage = Usage()
    backend = _backend(standin)
    assert await _split(backend, usage) == ("r1r2", "a")
    assert usage.estimated and usage.completion_tokens == 3
    await backend.aclose()


async def test_model_written_think_tags_pass_through_as_answer_text(
    standin: OpenAIStandin,
) -> None:
    answer = "<think>\n推理[C:2]\n</think>\n\n结论[C:1]。"
    standin.push(Script.text(answer, size=3))
    backend = _backend(standin)
    assert await _split(backend) == ("", answer)
    result = parse_all(answer, ["1", "2"])  # the parsers keep that block apart
    assert result.text == "结论。" and result.citations == [("1", 1)]
    await backend.aclose()


async def test_split_surrogate_pairs_are_joined_and_lone_ones_replaced(
    standin: OpenAIStandin,
) -> None:
    # "🚪" (U+1F6AA) cut between two chunks: JSON escapes \ud83d then \udeaa
    standin.push(Script(deltas=["门\ud83d", "\udeaa开", "孤\udc00", "尾\ud83d"], ascii_json=True))
    backend = _backend(standin)
    assert await _split(backend) == ("", "门🚪开孤\ufffd尾\ufffd")
    await backend.aclose()


async def test_split_surrogates_in_reasoning_and_at_the_switch(standin: OpenAIStandin) -> None:
    standin.push(
        Script(reasoning=["想\ud83d", "\ude00", "半\ud83d"], deltas=["好"], ascii_json=True)
    )
    backend = _backend(standin)
    assert await _split(backend) == ("想😀半\ufffd", "好")
    await backend.aclose()
