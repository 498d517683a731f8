"""An OpenAI-compatible chat-completions backend, streaming, through the official SDK.

Covers any endpoint speaking the OpenAI chat-completions protocol (OpenAI, DeepSeek,
Qwen/DashScope compatible mode, Ollama, vLLM, ...). Base URL, key and model come
from settings (``llm_base_url``, ``llm_api_key``, ``llm_model``; or ``GCITE_LLM_*``).

All SDK / transport exceptions are translated to :class:`gcite.errors.LLMError` in
:meth:`OpenAIBackend.stream`, the one boundary; cancellation closes the HTTP response
(so the provider stops generating).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import openai

from gcite.config import Settings
from gcite.errors import ConfigError, LLMError
from gcite.generate.backends import Usage, estimate_tokens


class OpenAIBackend:
    """Streams ``/chat/completions`` deltas (``choices[0].delta.content``).

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
    ) -> None:
        if not model:
            raise ConfigError("已设置 llm_base_url，但缺少 llm_model（模型名称）")
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.name = f"openai:{model}"
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout_s,
            max_retries=0,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIBackend:
        """Build from ``llm_base_url`` / ``llm_api_key`` / ``llm_model`` / ``llm_timeout_s``."""
        return cls(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=settings.llm_api_key,
            timeout_s=settings.llm_timeout_s,
        )

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]] = (),
        query: str = "",
        usage: Usage | None = None,
    ) -> AsyncIterator[str]:
        """Yield content deltas; raise :class:`LLMError` on any provider/transport failure."""
        usage = usage if usage is not None else Usage()
        usage.prompt_tokens = estimate_tokens(messages)
        usage.completion_tokens = 0
        usage.estimated = True
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        try:
            response = await self._client.chat.completions.create(**kwargs)
            async with response as stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage.prompt_tokens = chunk.usage.prompt_tokens
                        usage.completion_tokens = chunk.usage.completion_tokens
                        usage.estimated = False
                    if not chunk.choices:
                        continue
                    delta = chunk.choices[0].delta.content
                    if delta:
                        if usage.estimated:
                            usage.completion_tokens += 1
                        yield delta
        except openai.APIStatusError as exc:
            raise LLMError(f"模型服务返回错误 HTTP {exc.status_code}: {_message(exc)}") from exc
        except openai.APITimeoutError as exc:
            raise LLMError("模型服务响应超时") from exc
        except (openai.APIError, httpx.HTTPError) as exc:
            raise LLMError(f"模型服务连接中断: {type(exc).__name__}") from exc
        except (ValueError, KeyError, TypeError) as exc:  # malformed chunk payloads
            raise LLMError(f"模型服务返回了无法解析的数据: {exc}") from exc

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(exc.message)


__all__ = ["OpenAIBackend"]
