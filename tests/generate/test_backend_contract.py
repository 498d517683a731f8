"""Both LLM backends pass the one LLMBackend contract: the OpenAI-compatible backend
against the loopback stand-in of the chat-completions API, and the extractive backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gcite.config import Settings
from gcite.generate.backends import make_backend
from gcite.generate.extractive import ExtractiveBackend
from gcite.generate.fallback import FallbackBackend
from gcite.generate.limits import LimitedBackend
from gcite.generate.openai_backend import OpenAIBackend
from support.llm_backend_contract import ANSWER, LLMBackendContract
from support.openai_standin import OpenAIStandin, Script


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin(default=Script.text(ANSWER, size=3)) as server:
        yield server


class TestOpenAIBackend(LLMBackendContract):
    @pytest.fixture
    async def backend(self, standin: OpenAIStandin) -> AsyncIterator[Any]:
        settings = Settings(llm_base_url=standin.base_url, llm_model="m1", llm_api_key="sk-1")
        backend = make_backend(settings)
        assert isinstance(backend, LimitedBackend) and isinstance(backend.inner, OpenAIBackend)
        yield backend
        await backend.aclose()


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
        settings = Settings(
            llm_base_url=standin.base_url, llm_model="m1", on_model_error="extractive"
        )
        backend = make_backend(settings)
        assert isinstance(backend, FallbackBackend)
        yield backend
        await backend.aclose()
