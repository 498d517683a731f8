"""Browser end-to-end fixtures: the real chat service on loopback, the OpenAI stand-in
scripted per question, and Debian's Chromium driven by Playwright (one per session).

- ``chromium_path``: ``/usr/bin/chromium`` (or ``GCITE_CHROMIUM``); skipped with a clear
  message when missing, except in CI (``CI=true``), where a missing browser fails.
- ``live``: a :class:`Live` bundle — the service's base URL (uvicorn in a thread on a
  free port), the stand-in, the data dir. The knowledge base is the bundled sample
  handbook plus one hostile document (title ``<img src=x onerror=alert(1)>``, URL
  ``javascript:alert(1)``); the offline web folder is the bundled one plus a hostile
  page. Keys as in the demo (``demo-visitor`` / ``demo-ops`` / ``demo-security``).
- ``browser`` / ``page``: one Chromium per session; a fresh 390x844 context per test,
  with a recorder of every state the answers go through (:data:`RECORDER_JS`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser.scenarios import (
    HANG_GUARD_MS,
    RECORDER_JS,
    VIEWPORT,
    XSS_DOC,
    XSS_WEB,
    Live,
    Scenarios,
)
from gcite.testing import live_service
from support.openai_standin import OpenAIStandin

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of the system Chromium; skip (fail in CI) when it is not installed."""
    path = os.environ.get("GCITE_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        message = f"Chromium not found at {path}: run `make browser` (apt-get install chromium)"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message + " — required in CI")
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The chat service (real app, uvicorn on 127.0.0.1) over the sample data + hostile docs."""
    from gcite.cli.demo import SAMPLE_DIR, page_config
    from gcite.config import ApiKey, load_settings
    from gcite.knowledge import ingest_paths
    from gcite.service import create_app

    root = tmp_path_factory.mktemp("browser")
    kb = root / "kb"
    web = root / "web"
    shutil.copytree(SAMPLE_DIR / "handbook", kb)
    shutil.copytree(SAMPLE_DIR / "web", web)
    (kb / "99-injection.md").write_text(XSS_DOC, encoding="utf-8")
    (web / "injection.md").write_text(XSS_WEB, encoding="utf-8")

    scenarios = Scenarios()
    standin = OpenAIStandin(responder=scenarios).start()
    data_dir = root / "data"
    data_dir.mkdir()
    (data_dir / "page.json").write_text(json.dumps(page_config(), ensure_ascii=False))
    config: dict[str, Any] = {
        "data_dir": str(data_dir),
        "dataset": "明湖大厦物业手册",
        "llm_base_url": standin.base_url,
        "llm_api_key": "sk-standin",
        "llm_model": "standin",
        "web_provider": "offline",
        "web_dir": str(web),
        "web_count": 3,
        "top_k": 5,
        "embed_backend": "use",
        "qdrant_url": "",
        "ping_interval_s": 30.0,
        # hang guards only: on a busy machine a search can pass the 10 s (knowledge) and
        # 8 s (web) defaults - the first web search waits for the offline web index the
        # app builds in the background - and the scenarios need the chunks both find
        "kb_timeout_s": 120.0,
        "web_timeout_s": 120.0,
        "app_keys": [
            ApiKey("demo-visitor", ()),
            ApiKey("demo-ops", ("运维工程师",)),
            ApiKey("demo-security", ("安保主管",)),
        ],
        "allow_any_key": True,
    }
    settings = load_settings(config, environ={})
    ingest_paths(sorted(kb.glob("*.md")), settings=settings, dataset=settings.knowledge.dataset)
    app = create_app(settings)
    # A second app on the same data, created without page.json: no identities published,
    # so the page asks for an API key. Without a web source: its questions need none, and
    # a second offline web index on the same folder would be built (staged, embedded)
    # beside the first one's, which the first question waits for.
    page_json = data_dir / "page.json"
    page_json.rename(data_dir / "page.json.off")
    try:
        plain_app = create_app(load_settings({**config, "web_provider": "none"}, environ={}))
    finally:
        (data_dir / "page.json.off").rename(page_json)
    try:
        with live_service(app) as url, live_service(plain_app) as plain_url:
            yield Live(
                url=url,
                plain_url=plain_url,
                standin=standin,
                scenarios=scenarios,
                data_dir=data_dir,
            )
    finally:
        standin.stop()


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    """One headless Chromium for the browser test module.

    Module scope on purpose: while Playwright's sync API is active, its event loop counts
    as running in the main thread, so ``asyncio.run`` and pytest-asyncio tests in later
    modules would fail; the browser (and that loop) is closed when the module ends.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture()
def page(browser: Any, live: Live) -> Iterator[Any]:
    """A fresh phone-sized page on the live service, with the frame recorder installed."""
    context = browser.new_context(
        viewport=VIEWPORT, device_scale_factor=2, is_mobile=True, has_touch=True, locale="zh-CN"
    )
    context.add_init_script(RECORDER_JS)
    pg = context.new_page()
    pg.set_default_timeout(HANG_GUARD_MS)
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    pg.goto(live.url + "/")
    pg.wait_for_selector("body[data-ready='true']")
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """``test-artifacts/`` (gitignored): screenshots of the page."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
