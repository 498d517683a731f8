"""The H5 page's server side: ``mount_pages`` on a real uvicorn server on loopback."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.service.pages import DEFAULT_TITLE, STATIC_DIR, mount_pages, parse_page_config
from gcite.testing import live_service

PAGE = {
    "title": "明湖大厦物业助手",
    "suggestions": ["夜间巡更要打卡多少个点位？"],
    "identities": [{"label": "访客", "key": "demo-visitor"}],
}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("pages")
    (data_dir / "page.json").write_text(json.dumps(PAGE, ensure_ascii=False), encoding="utf-8")
    app = FastAPI()
    mount_pages(app, Settings.from_keys(data_dir=data_dir))
    with live_service(app) as url:
        yield url


def test_index_and_assets(base: str) -> None:
    with httpx.Client(base_url=base) as client:
        index = client.get("/")
        assert index.status_code == 200
        assert index.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="/static/app.js"></script>' in index.text
        for path, kind in [
            ("/static/app.js", "javascript"),
            ("/static/app.css", "text/css"),
            ("/static/client/index.js", "javascript"),
        ]:
            response = client.get(path)
            assert response.status_code == 200, path
            assert kind in response.headers["content-type"], path
        assert client.get("/static/../pages.py").status_code == 404
        assert client.get("/static/nothing.js").status_code == 404


def test_every_client_module_the_page_imports_is_served(base: str) -> None:
    """Follow the ES module graph from app.js over HTTP: every import resolves."""
    seen: set[str] = set()
    todo = ["/static/app.js"]
    with httpx.Client(base_url=base) as client:
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            response = client.get(path)
            assert response.status_code == 200, path
            for spec in re.findall(
                r"""(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]""", response.text
            ):
                target = httpx.URL(base + path).join(spec).path
                todo.append(target)
    assert "/static/client/index.js" in seen and len(seen) > 3


def test_page_config(base: str) -> None:
    response = httpx.get(base + "/page-config.json")
    assert response.json() == {**PAGE, "identities": [{"label": "访客", "key": "demo-visitor"}]}


def test_default_page_config_publishes_no_keys(tmp_path: Path) -> None:
    app = FastAPI()
    mount_pages(app, Settings.from_keys(data_dir=tmp_path, allow_any_key=True))
    with live_service(app) as url:
        assert httpx.get(url + "/page-config.json").json() == {
            "title": DEFAULT_TITLE,
            "suggestions": [],
            "identities": [],
        }


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {"title": ""},
        {"title": 3},
        {"colour": "red"},
        {"suggestions": "问题"},
        {"suggestions": ["问"] * 7},
        {"identities": [{"label": "访客"}]},
        {"identities": ["demo"]},
        {"title": "长" * 201},
    ],
)
def test_bad_page_config_is_rejected(raw: object) -> None:
    with pytest.raises(ConfigError):
        parse_page_config(raw)


def test_bad_page_json_fails_at_start(tmp_path: Path) -> None:
    (tmp_path / "page.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="无法读取页面配置"):
        mount_pages(FastAPI(), Settings.from_keys(data_dir=tmp_path))


def test_static_files_load_nothing_from_outside_and_never_use_inner_html() -> None:
    texts = {p.name: p.read_text(encoding="utf-8") for p in STATIC_DIR.glob("*.*")}
    assert set(texts) >= {"index.html", "app.css", "app.js"}
    for name, text in texts.items():
        urls = re.findall(r"https?://[^\s\"')]+", text)
        assert urls == [] or set(urls) == {"http://www.w3.org/2000/svg"}, (name, urls)
    app_js = texts["app.js"]
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in app_js, sink
    assert "?." not in app_js and "??" not in app_js  # ES2017, like the client


def test_page_responses_carry_security_headers(base: str) -> None:
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    inline = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    assert inline  # the load-failure notice: allowed by its hash, nothing else inline
    with httpx.Client(base_url=base) as client:
        for path in ("/", "/page-config.json", "/static/app.js", "/static/app.css"):
            response = client.get(path)
            assert response.status_code == 200, path
            headers = response.headers
            assert headers["x-content-type-options"] == "nosniff", path
            assert headers["referrer-policy"] == "no-referrer", path
            assert headers["x-frame-options"] == "DENY", path
            policy: dict[str, str] = {}
            for part in headers["content-security-policy"].split(";"):
                name, _, value = part.strip().partition(" ")
                policy[name] = value
            assert policy["default-src"] == "'self'"
            assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
            assert policy["style-src"] == "'self'"  # no 'unsafe-inline'
            scripts = policy["script-src"].split()
            assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
            for body in inline:
                digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
                assert f"'sha256-{digest}'" in scripts
        head = client.head("/")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["x-frame-options"] == "DENY"
