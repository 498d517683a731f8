"""Every LLM backend passes the one LLMBackend contract: the OpenAI-compatible backend
against the loopback stand-in of the chat-completions API (its failures and cancellation
included), the extractive backend, and the fallback backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gcite.config import Settings
from gcite.generate.extractive import ExtractiveBackend
from gcite.generate.factory import make_backend
from gcite.generate.fallback import FallbackBackend
from gcite.generate.limits import LimitedBackend
from gcite.generate.openai_backend import OpenAIBackend
from gcite.testing import free_port
from gcite.testing.llm_contract import (
    ANSWER,
    FailingBackend,
    LLMBackendContract,
    UpstreamClosed,
)
from support.openai_standin import OpenAIStandin, Script


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin(default=Script.text(ANSWER, size=3)) as server:
        yield server


FAILING = {
    "auth_error": Script(status=401, error={"message": "invalid key", "type": "auth"}),
    "server_error": Script(status=503),
    "dropped": Script.text(ANSWER, size=2, drop_after=2),
    "malformed": Script(raw=[b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n', b"data: {"]),
    "timeout": Script(hang=True),
}


def _openai(base_url: str, **settings: Any) -> Any:
    backend = make_backend(
        Settings.from_keys(llm_base_url=base_url, llm_model="m1", llm_api_key="sk-1", **settings)
    )
    assert isinstance(backend, LimitedBackend) and isinstance(backend.inner, OpenAIBackend)
    return backend


def _stalled(standin: OpenAIStandin, backend: Any) -> tuple[Any, UpstreamClosed]:
    standin.reset()
    standin.push(Script.text(ANSWER, size=2, trickle=b": keep-alive\n\n", trickle_interval_s=1.0))
    return backend, lambda timeout_s: standin.wait_for_disconnect(1, timeout=timeout_s)


class TestOpenAIBackend(LLMBackendContract):
    @pytest.fixture
    async def backend(self, standin: OpenAIStandin) -> AsyncIterator[Any]:
        backend = _openai(standin.base_url)
        yield backend
        await backend.aclose()

    @pytest.fixture
    def failing_backend(self, standin: OpenAIStandin) -> FailingBackend:
        def make(failure: str) -> Any:
            if failure == "unreachable":
                return _openai(f"http://127.0.0.1:{free_port()}/v1")
            standin.reset()
            standin.push(FAILING[failure])
            return _openai(standin.base_url, llm_timeout_s=0.5)

        return make

    @pytest.fixture
    def stalled_backend(self, standin: OpenAIStandin) -> tuple[Any, UpstreamClosed]:
        return _stalled(standin, _openai(standin.base_url))


class TestExtractiveBackend(LLMBackendContract):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[Any]:
        backend = make_backend(Settings())
        assert isinstance(backend, LimitedBackend)
        assert isinstance(backend.inner, ExtractiveBackend)
        # load the support model as the service does at start-up, not inside the answer's
        # no-text deadline (a busy machine may take long for it)
        await asyncio.to_thread(backend.warm_up)
        yield backend
        await backend.aclose()


class TestFallbackBackend(LLMBackendContract):
    @pytest.fixture
    async def backend(self, standin: OpenAIStandin) -> AsyncIterator[Any]:
        settings = Settings.from_keys(
            llm_base_url=standin.base_url, llm_model="m1", on_model_error="extractive"
        )
        backend = make_backend(settings)
        assert isinstance(backend, FallbackBackend)
        yield backend
        await backend.aclose()

    @pytest.fixture
    def stalled_backend(self, standin: OpenAIStandin) -> tuple[Any, UpstreamClosed]:
        settings = Settings.from_keys(
            llm_base_url=standin.base_url, llm_model="m1", on_model_error="extractive"
        )
        return _stalled(standin, make_backend(settings))
