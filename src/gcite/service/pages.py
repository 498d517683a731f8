"""The mobile H5 page: static files served by the chat service (mobile design document §4–§6).

:func:`mount_pages` adds to a FastAPI app:

- ``GET /`` (and ``HEAD /``) — ``static/index.html``, the chat page (Chinese UI, no CDN,
  inline SVG icons);
- ``GET /static/...`` — ``app.css``, ``app.js`` and, under ``/static/client/``, the
  JavaScript client (``clients/js/src``), reached through the symlink
  ``static/client`` so there is one copy of the client in the repository;
- ``GET /page-config.json`` — what the page shows besides the chat: its title, the
  suggested questions of the empty state and the identity picker's entries
  (``[{"label": "访客", "key": "demo-visitor"}]``). It is read from
  ``<data_dir>/page.json`` when that file exists (``gcite demo`` writes one for the
  bundled sample data); otherwise the page has no identities and asks for an API key.
  Keys are never derived from ``settings.app_keys``: only what an operator puts in
  ``page.json`` is published.

Every page response carries :func:`security_headers` (``nosniff``, ``no-referrer``,
``X-Frame-Options: DENY`` and a Content-Security-Policy allowing only the page's own
origin and its inline script, by hash).

The page talks to ``POST /v1/chat-messages`` on the same origin (Dify Service API,
streaming), so it needs nothing else from the server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gcite.config import Settings
from gcite.errors import ConfigError

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""Folder of the page's static files (``index.html``, ``app.css``, ``app.js``, ``client/``)."""

PAGE_CONFIG_FILE = "page.json"
"""Name of the optional page configuration file inside ``settings.data_dir``."""

DEFAULT_TITLE = "G-Cite 智能问答"

_NO_CACHE = {"Cache-Control": "no-cache"}
_INLINE_SCRIPT = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.DOTALL | re.IGNORECASE
)
_MAX_SUGGESTIONS = 6
_MAX_IDENTITIES = 12
_MAX_TEXT = 200


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"页面配置 {name} 必须是非空字符串")
    if len(value) > _MAX_TEXT:
        raise ConfigError(f"页面配置 {name} 过长（最多 {_MAX_TEXT} 个字符）")
    return value.strip()


def parse_page_config(raw: Any) -> dict[str, Any]:
    """Validate a page configuration object and return its normalised form.

    Input shape (every key optional)::

        {"title": str, "suggestions": [str, ...],
         "identities": [{"label": str, "key": str, "hint": str?}, ...]}

    Output: the same keys, all present (``title`` defaults to ``DEFAULT_TITLE``, lists
    to ``[]``); at most 6 suggestions and 12 identities, strings at most 200 characters.
    Raises :class:`ConfigError` (one Chinese line) on a wrong type or an unknown key.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("页面配置必须是 JSON 对象")
    unknown = set(raw) - {"title", "suggestions", "identities"}
    if unknown:
        raise ConfigError(f"页面配置中有未知字段: {', '.join(sorted(unknown))}")
    title = _text(raw.get("title", DEFAULT_TITLE), "title")
    suggestions_raw = raw.get("suggestions", [])
    if not isinstance(suggestions_raw, list) or len(suggestions_raw) > _MAX_SUGGESTIONS:
        raise ConfigError(f"页面配置 suggestions 必须是至多 {_MAX_SUGGESTIONS} 项的字符串列表")
    suggestions = [_text(s, "suggestions[]") for s in suggestions_raw]
    identities_raw = raw.get("identities", [])
    if not isinstance(identities_raw, list) or len(identities_raw) > _MAX_IDENTITIES:
        raise ConfigError(f"页面配置 identities 必须是至多 {_MAX_IDENTITIES} 项的列表")
    identities: list[dict[str, str]] = []
    for item in identities_raw:
        if not isinstance(item, dict):
            raise ConfigError("页面配置 identities 的每一项必须是对象 {label, key}")
        entry = {"label": _text(item.get("label"), "identities[].label")}
        entry["key"] = _text(item.get("key"), "identities[].key")
        if item.get("hint") is not None:
            entry["hint"] = _text(item.get("hint"), "identities[].hint")
        identities.append(entry)
    return {"title": title, "suggestions": suggestions, "identities": identities}


def load_page_config(settings: Settings) -> dict[str, Any]:
    """Read ``<data_dir>/page.json`` through :func:`parse_page_config`; defaults when absent.

    Raises :class:`ConfigError` when the file exists but is not valid JSON or not valid
    configuration, so ``gcite serve`` / ``gcite demo`` fail at start-up, not per request.
    """
    path = Path(settings.data_dir) / PAGE_CONFIG_FILE
    if not path.is_file():
        return parse_page_config(None)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"无法读取页面配置 {path}: {exc}") from exc
    return parse_page_config(raw)


def content_security_policy(html: str) -> str:
    """The page's Content-Security-Policy: only its own origin, plus its inline scripts by hash.

    Scripts and styles come from ``/static`` (``'self'``); each inline ``<script>`` of
    ``html`` (the load-failure notice) is allowed by its SHA-256, nothing else inline
    runs. Inline SVG icons are markup, not resources, so they need nothing; ``img-src``
    allows ``data:`` for the empty favicon. Fetches go to the same origin only; the page
    cannot be framed, and plugins, ``<base>`` and foreign form targets are off.
    """
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    ]
    return "; ".join(
        [
            "default-src 'self'",
            " ".join(["script-src 'self'", *hashes]),
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def security_headers(html: str) -> dict[str, str]:
    """Headers of every page response (``/``, ``/page-config.json``, ``/static/...``)."""
    return {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Content-Security-Policy": content_security_policy(html),
    }


class _WithHeaders:
    """An ASGI wrapper adding ``headers`` to every HTTP response of ``app`` (pure ASGI, so
    nothing about requests or streaming changes)."""

    def __init__(self, app: ASGIApp, headers: dict[str, str]) -> None:
        self.app = app
        self.raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.raw if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def mount_pages(app: FastAPI, settings: Settings) -> None:
    """Serve the H5 page at ``/``, its assets at ``/static/`` and ``/page-config.json``.

    Called by :func:`gcite.service.create_app`. Raises :class:`ConfigError` for a bad
    ``page.json`` and when ``index.html`` is missing (a broken install), so the problem
    shows at start-up. A missing JavaScript client is not fatal for the API: the page
    itself then reports that it cannot load (in Chinese).
    """
    index = STATIC_DIR / "index.html"
    if not index.is_file():
        raise ConfigError(f"页面静态文件缺失: {index}（安装不完整？）")
    page_config = load_page_config(settings)
    headers = security_headers(index.read_text(encoding="utf-8"))

    async def page() -> FileResponse:
        return FileResponse(
            index, media_type="text/html; charset=utf-8", headers={**_NO_CACHE, **headers}
        )

    async def config() -> JSONResponse:
        return JSONResponse(page_config, headers={**_NO_CACHE, **headers})

    app.add_api_route("/", page, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_api_route("/page-config.json", config, methods=["GET"], include_in_schema=False)
    static = StaticFiles(directory=STATIC_DIR, follow_symlink=True)
    app.mount("/static", _WithHeaders(static, headers), name="gcite-static")


__all__ = [
    "PAGE_CONFIG_FILE",
    "STATIC_DIR",
    "content_security_policy",
    "load_page_config",
    "mount_pages",
    "parse_page_config",
    "security_headers",
]
