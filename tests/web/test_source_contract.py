"""Every web source passes the one WebSource contract: Bocha, Tavily and Baidu against the
loopback stand-in of their APIs, and the offline source on the bundled saved pages."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import gcite
from gcite.testing.web_contract import WebSourceContract
from gcite.web import BaiduSearch, BochaWebSearch, OfflineWebSource, TavilySearch
from gcite.web.http import RetryPolicy
from support.web_standin import WebStandin, web_standin

KEY = "sk-contract"
FAST_RETRY = RetryPolicy(attempts=2, backoff_s=0.01, backoff_max_s=0.02, retry_after_max_s=0.05)
SAMPLE_WEB = Path(gcite.__file__).parent / "sample_data" / "web"
GUARD_S = 120.0  # hang guard only: a search is never cut short on a busy machine


@pytest.fixture(scope="module")
def server() -> Iterator[WebStandin]:
    with web_standin(api_key=KEY, results=10) as standin:
        yield standin


@pytest.fixture
def query() -> str:
    return "物业巡检流程"


class _HttpContract(WebSourceContract):
    cls: Any

    @pytest.fixture
    async def source(self, server: WebStandin) -> AsyncIterator[Any]:
        server.reset()
        source = self.cls(KEY, base_url=server.base_url, timeout_s=GUARD_S, retry=FAST_RETRY)
        yield source
        await source.aclose()


class TestBocha(_HttpContract):
    cls = BochaWebSearch


class TestTavily(_HttpContract):
    cls = TavilySearch


class TestBaidu(_HttpContract):
    cls = BaiduSearch


class TestOffline(WebSourceContract):
    @pytest.fixture
    def query(self) -> str:
        return "灭火器 使用"

    @pytest.fixture
    async def source(self, tmp_path: Path) -> AsyncIterator[Any]:
        shutil.copytree(SAMPLE_WEB, tmp_path / "web")
        source = OfflineWebSource(tmp_path / "web", index="bm25")
        yield source
        await source.aclose()
