"""Fixtures of the third-party client conformance tests: the real service, the real SDKs.

- ``sdk_service``: gcite's chat service under uvicorn on a free loopback port, with a
  knowledge base ingested into a tmp dir (real Qdrant Edge shard), the OpenAI
  stand-in scripted to cite one knowledge-base chunk and one web chunk in every
  answer (known token usage), and the Bocha stand-in as the web source;
- ``sdk_run(name)``: runs one client driver against it once per session (a PyPI SDK
  in its own venv under ``.venv-sdk/``, or ``node tests/sdk/js/drive.mjs``) and gives
  ``{step: {"ok", "error", "data"}}``.

The SDKs are installed by ``make sdk`` (part of ``make test``) at the versions pinned
in ``tests/sdk/python/*.lock`` and ``tests/sdk/js/package-lock.json``; the tests run
offline. Without them the tests skip, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sdk_setup import (
    APP_NAME,
    DATASET,
    KEY,
    NUMBERS_KEY,
    OPENING,
    RETRIEVAL_EXPOSE_KEY,
    RETRIEVAL_KEY,
    SLOW_MARK,
    SUGGESTED,
    USAGE,
    WEB_KEY,
    SdkService,
)

from gcite.config import ApiKey, Settings
from gcite.service import create_app
from gcite.testing import live_service
from support.openai_standin import OpenAIStandin, Script
from support.web_standin import web_standin

REPO = Path(__file__).resolve().parents[2]
SDK_DIR = Path(__file__).resolve().parent
VENVS = REPO / ".venv-sdk"
JS_DIR = SDK_DIR / "js"
PYTHON_SDKS = ("dify-client-python", "dify-client")
#: Knowledge-base SDKs: driver name -> their venv under ``.venv-sdk`` (one for both).
KNOWLEDGE_SDKS = {"dify-dataset-sdk": "dify-knowledge", "dify-oapi2": "dify-knowledge"}
JS_SDKS = ("js",)
#: Driver runs by name: the client and the app key it uses (``js-numbers``: the npm clients
#: on a ``citation_style = "numbers"`` key, as a stock Dify client is configured).
RUNS: dict[str, tuple[str, str]] = {
    **{name: (name, KEY) for name in (*PYTHON_SDKS, *JS_SDKS)},
    "js-numbers": ("js", NUMBERS_KEY),
}


VISITOR_DOC = """---
document_title: 访客登记办法
source_file_url: https://kb.example.com/visitor.pdf
---

# 访客登记办法

访客进入大厦须在一层大堂服务台出示身份证件并登记。登记后领取临时门禁卡，离开时归还。
访客车辆请停放在地下二层访客车位，凭登记单免费停车两小时。
"""

GUARD_DOC = """---
document_title: 监控中心值守规程（安保内部）
source_file_url: oss://kb-raw/control-room.pdf
access_roles: ["安保主管"]
---

# 监控中心值守规程

访客登记信息由监控中心每日核对，监控中心备用钥匙存放在三号保险柜内。
"""

_CHUNK_HEADER = re.compile(r"^\[C:(\d+)\]$", re.MULTILINE)


def citing_responder(body: dict[str, Any]) -> Script:
    """Cite the first chunk (knowledge base, sorted first) and the last one (web)."""
    context = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    numbers = sorted({int(n) for n in _CHUNK_HEADER.findall(context)})
    last_user = next(
        (str(m.get("content")) for m in reversed(body.get("messages", [])) if m["role"] == "user"),
        "",
    )
    if not numbers:
        return Script.text("根据现有资料无法确定", usage=USAGE)
    first, last = numbers[0], numbers[-1]
    answer = f"访客须在一层大堂服务台登记[C:{first}]。网页资料也有说明[C:{last}]。"
    if SLOW_MARK in last_user:
        return Script.text(answer * 6, size=2, token_delay_s=0.15, usage=USAGE)
    return Script.text(answer, usage=USAGE)


def sdk_settings(data_dir: Path, db: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": f"sqlite:///{db}",
        "dataset": DATASET,
        "top_k": 2,
        "app_keys": [
            ApiKey(
                KEY,
                (),
                app_name=APP_NAME,
                opening_statement=OPENING,
                suggested_questions=SUGGESTED,
            ),
            ApiKey(NUMBERS_KEY, (), app_name=APP_NAME, citation_style="numbers"),
        ],
        "retrieval_keys": [
            ApiKey(RETRIEVAL_KEY, ("安保主管",)),
            ApiKey(RETRIEVAL_EXPOSE_KEY, ("安保主管",), expose_roles=True),
        ],
        "kb_timeout_s": 120.0,  # a hang guard: a search is never cut short on a busy machine
    }
    values.update(extra)
    return Settings.from_keys(**values)


@pytest.fixture(scope="session")
def sdk_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gcite.knowledge import ingest_paths

    docs = tmp_path_factory.mktemp("sdk-docs")
    (docs / "visitor.md").write_text(VISITOR_DOC, encoding="utf-8")
    (docs / "control-room.md").write_text(GUARD_DOC, encoding="utf-8")
    data_dir = tmp_path_factory.mktemp("sdk-kb") / "data"
    report = ingest_paths([docs], settings=Settings.from_keys(data_dir=data_dir), dataset=DATASET)
    assert report.added == 2 and not report.failed
    return data_dir


@pytest.fixture(scope="session")
def sdk_service(sdk_kb: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SdkService]:
    db = tmp_path_factory.mktemp("sdk-db") / "chat.sqlite3"
    with (
        OpenAIStandin(responder=citing_responder) as llm,
        web_standin(api_key=WEB_KEY, results=2) as web,
    ):
        settings = sdk_settings(
            sdk_kb,
            db,
            llm_base_url=llm.base_url,
            llm_model="standin-model",
            llm_api_key="sk-test",
            web_provider="bocha",
            bocha_api_key=WEB_KEY,
            web_base_url=web.base_url,
            web_count=2,
            max_web_results=1,
            web_timeout_s=120.0,  # a hang guard: a search is never cut short on a busy machine
        )
        with live_service(create_app(settings)) as base_url:
            yield SdkService(base_url, settings, llm)


def _missing(what: str) -> None:
    message = f"{what} not installed: run `make sdk`"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _command(name: str) -> list[str]:
    if name in PYTHON_SDKS or name in KNOWLEDGE_SDKS:
        venv = KNOWLEDGE_SDKS.get(name, name)
        python = VENVS / venv / "bin" / "python"
        if not (VENVS / venv / ".installed").exists():
            _missing(f"PyPI {name} ({python.parent.parent})")
        driver = SDK_DIR / "python" / f"drive_{name.replace('-', '_')}.py"
        return [str(python), str(driver)]
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / ".installed").exists():
        _missing("npm dify-client / dify-ai-provider (tests/sdk/js/node_modules)")
    return [str(node), str(JS_DIR / "drive.mjs")]


def run_driver(name: str, base_url: str, user: str, key: str = KEY) -> dict[str, dict[str, Any]]:
    """Run one driver with API ``key`` (an app key; an admin key for the knowledge-base
    SDKs) to the end; its steps by name."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "GCITE_SDK_URL": f"{base_url}/v1",
        "GCITE_SDK_KEY": key,
        "GCITE_SDK_USER": user,
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONPATH": str(SDK_DIR / "python"),
    }
    done = subprocess.run(
        _command(name), capture_output=True, env=env, timeout=300, check=False, cwd=SDK_DIR
    )
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, f"{name} driver exited {done.returncode}:\n{stderr[-4000:]}"
    steps: dict[str, dict[str, Any]] = {}
    for line in done.stdout.decode("utf-8").splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    assert steps, f"{name} driver reported nothing:\n{stderr[-4000:]}"
    return steps


@pytest.fixture(scope="session")
def sdk_driver() -> Callable[..., dict[str, dict[str, Any]]]:
    """:func:`run_driver` (``(name, base_url, user, key)``), for services of a test module."""
    return run_driver


@pytest.fixture(scope="session")
def sdk_run(sdk_service: SdkService) -> Callable[[str], dict[str, dict[str, Any]]]:
    """``sdk_run(name)``: the driver's steps, run once per session per run of :data:`RUNS`."""
    cache: dict[str, dict[str, dict[str, Any]]] = {}

    def get(name: str) -> dict[str, dict[str, Any]]:
        if name not in cache:
            client, key = RUNS[name]
            cache[name] = run_driver(client, sdk_service.base_url, f"user-{name}", key)
        return cache[name]

    return get
