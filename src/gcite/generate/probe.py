"""Is the configured model reachable? One cheap request to ``GET {llm_base_url}/models``.

Used at start-up (``gcite serve`` prints a clear warning when the model cannot be reached)
and by ``GET /ready``. Any answer below 500 other than 401/403 counts as reachable (some
OpenAI-compatible servers have no ``/models``: a 404 still proves the server is there);
401/403 means the key is refused; 5xx, a timeout or no connection means unreachable.
Without ``llm_base_url`` the offline extractive backend answers: always reachable.

A plain ``http://`` model reached without a proxy is probed without building a TLS
certificate store (httpx loads the whole CA bundle for every client it makes, which
costs more CPU than the probe itself, twice at start-up: ``gcite serve``'s check and the
first ``/ready``); an ``https://`` model, or any proxy in the environment, is verified as
usual. Redirects are not followed, so a plain-HTTP probe never reaches a TLS server.
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass

import httpx

from gcite.config import Settings

PROBE_TIMEOUT_S = 3.0
CACHE_S = 10.0


@dataclass(frozen=True)
class ProbeResult:
    """``ok`` and a short Chinese reason (empty when ok)."""

    ok: bool
    reason: str = ""


def _judge(status: int) -> ProbeResult:
    if status in (401, 403):
        return ProbeResult(False, f"模型服务拒绝了密钥（HTTP {status}）")
    if status >= 500:
        return ProbeResult(False, f"模型服务出错（HTTP {status}）")
    return ProbeResult(True)


def _request(settings: Settings) -> tuple[str, dict[str, str]]:
    url = settings.llm.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {settings.llm.api_key or 'not-needed'}"}
    return url, headers


def _verify(url: str) -> bool:
    """Whether the probe of ``url`` may use TLS and so needs its certificate checks: an
    ``https://`` URL, or any proxy configured in the environment (which httpx follows)."""
    return not url.lower().startswith("http://") or bool(urllib.request.getproxies())


def probe_model(settings: Settings, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Probe the model of ``settings`` (blocking)."""
    if not settings.llm.base_url:
        return ProbeResult(True)
    url, headers = _request(settings)
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s, verify=_verify(url))
    except httpx.HTTPError as exc:
        return ProbeResult(False, f"无法连接模型服务 {settings.llm.base_url}: {type(exc).__name__}")
    return _judge(response.status_code)


class ModelProbe:
    """An async probe whose result is cached for :data:`CACHE_S` seconds."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._result: ProbeResult | None = None
        self._at = 0.0

    async def check(self) -> ProbeResult:
        """The cached or a fresh probe result."""
        if not self.settings.llm.base_url:
            return ProbeResult(True)
        now = time.monotonic()
        if self._result is not None and now - self._at < CACHE_S:
            return self._result
        url, headers = _request(self.settings)
        try:
            async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S, verify=_verify(url)) as client:
                response = await client.get(url, headers=headers)
            result = _judge(response.status_code)
        except httpx.HTTPError as exc:
            result = ProbeResult(False, f"无法连接模型服务: {type(exc).__name__}")
        self._result, self._at = result, time.monotonic()
        return result


__all__ = ["ModelProbe", "ProbeResult", "probe_model"]
