"""Fixtures of the chat-service tests: real uvicorn servers on 127.0.0.1, real stand-ins.

- ``role_kb``: a small knowledge base ingested once per session into a tmp dir (a
  public document and one restricted to 安保主管), on the real embedded Qdrant Edge shard;
- ``llm``: the OpenAI streaming stand-in (:mod:`support.openai_standin`), reset per test;
- ``web``: the web-search provider stand-in (:mod:`support.web_standin`, Bocha API);
- ``service``: the chat service (LLM = stand-in, KB = ``role_kb``, web = stand-in) served
  by uvicorn on a free port; ``offline_service``: the same with the extractive backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from service_streams import WEB_KEY, LiveServer, run_service

from gcite.config import ApiKey, Settings
from support.openai_standin import OpenAIStandin
from support.web_standin import Reply, WebStandin, web_standin

DATASET = "服务测试库"

PUBLIC_DOC = """---
document_title: 访客登记办法
source_file_url: https://kb.example.com/visitor.pdf
access_roles: []
---

# 访客登记办法

访客进入大厦须在一层大堂服务台出示身份证件并登记。登记后领取临时门禁卡，离开时归还。
访客车辆请停放在地下二层访客车位，凭登记单免费停车两小时。
"""

SECRET_DOC = """---
document_title: 监控中心值守规程（安保内部）
source_file_url: oss://kb-raw/control-room.pdf
access_roles: ["安保主管"]
---

# 监控中心值守规程

监控中心备用钥匙存放在地下一层安保办公区的三号保险柜内，取用须两人在场并登记。
监控中心实行二十四小时双人值守，交接班时须核对录像存储状态。
"""

KEYS = [
    ApiKey("key-guard", ("安保主管",)),
    ApiKey("key-visitor", ()),
    ApiKey("key-text", ("安保主管",), stream_event="text_chunk"),
    ApiKey("key-stock", ("安保主管",), citation_style="numbers"),  # stock Dify clients
]


@pytest.fixture(scope="session")
def role_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Data dir of a two-document knowledge base (one document only for 安保主管)."""
    from gcite.knowledge import ingest_paths

    docs = tmp_path_factory.mktemp("kb-docs")
    (docs / "visitor.md").write_text(PUBLIC_DOC, encoding="utf-8")
    (docs / "control-room.md").write_text(SECRET_DOC, encoding="utf-8")
    data_dir = tmp_path_factory.mktemp("kb") / "data"
    report = ingest_paths([docs], settings=Settings.from_keys(data_dir=data_dir), dataset=DATASET)
    assert report.added == 2 and not report.failed
    return data_dir


@pytest.fixture(scope="session")
def llm_standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


@pytest.fixture
def llm(llm_standin: OpenAIStandin) -> Iterator[OpenAIStandin]:
    """The OpenAI stand-in with an empty queue and no responder."""
    llm_standin.reset()
    llm_standin.responder = None
    yield llm_standin
    llm_standin.reset()
    llm_standin.responder = None


@pytest.fixture(scope="session")
def web_standin_server() -> Iterator[WebStandin]:
    with web_standin(api_key=WEB_KEY, results=3) as server:
        yield server


@pytest.fixture
def web(web_standin_server: WebStandin) -> Iterator[WebStandin]:
    """The web-search stand-in answering normally (tests may script it)."""
    web_standin_server.default = Reply.auto()
    yield web_standin_server
    web_standin_server.default = Reply.auto()


def _settings(data_dir: Path, db: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": f"sqlite:///{db}",
        "dataset": DATASET,
        "top_k": 3,
        "app_keys": KEYS,
        "ping_interval_s": 0.05,
        "kb_timeout_s": 120.0,  # a hang guard: a search is never cut short on a busy machine
    }
    values.update(extra)
    return Settings.from_keys(**values)


@pytest.fixture(scope="session")
def service(
    role_kb: Path,
    llm_standin: OpenAIStandin,
    web_standin_server: WebStandin,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    """The chat service with the LLM stand-in, the role KB and the Bocha stand-in."""
    db = tmp_path_factory.mktemp("db") / "chat.sqlite3"
    settings = _settings(
        role_kb,
        db,
        llm_base_url=llm_standin.base_url,
        llm_model="standin-model",
        llm_api_key="sk-test",
        web_provider="bocha",
        bocha_api_key=WEB_KEY,
        web_base_url=web_standin_server.base_url,
        web_count=2,
        max_web_results=2,
        web_timeout_s=120.0,  # a hang guard: a search is never cut short on a busy machine
    )
    with run_service(settings) as live:
        yield live


@pytest.fixture(scope="session")
def offline_service(
    role_kb: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The chat service with the offline extractive backend and no web source."""
    db = tmp_path_factory.mktemp("db-offline") / "chat.sqlite3"
    with run_service(_settings(role_kb, db)) as live:
        yield live


@pytest_asyncio.fixture(loop_scope="session")
async def client() -> Any:
    async with httpx.AsyncClient(timeout=120) as http:  # a hang guard
        yield http
