"""Start-up checks of the serving commands (``gcite serve``, ``gcite demo``).

The service opens the knowledge store lazily, on the first question, and a store
that cannot be opened there only costs the knowledge branch (the answer becomes
"根据现有资料无法确定"). A Qdrant Edge shard allows one process at a time, so a second
``gcite demo`` / ``gcite serve`` on the same data dir would start and then answer
nothing. These checks open the stores before the server starts and turn the
failure into one Chinese line (exit status 1, via :class:`~gcite.errors.ConfigError`).

The stores opened here stay open for the life of the command: handles are shared
per data dir within a process, so the service reuses them and no other process can
take the shard between the check and the first question.
"""

from __future__ import annotations

import errno
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gcite.config import Settings
from gcite.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from gcite.knowledge.store import StoreHandles

CATALOG_NAME = "catalog.json"
"""The knowledge base's bookkeeping file (``gcite.knowledge.catalog.CATALOG_NAME``)."""

_IN_USE = "另一个进程"
"""Part of the store's message for a shard locked by another process."""

DEFAULT_URL = "http://127.0.0.1:8000"

SERVING_URL_NAME = "serving-url"
"""The file in a data dir where a serving command notes its URL (for the in-use hint)."""


def record_serving_url(settings: Settings) -> None:
    """Note ``http://host:port`` of the serving command in ``<data_dir>/serving-url``, so
    the in-use error of another command names the right port. Best effort."""
    host = (
        settings.service.host if settings.service.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    )
    if ":" in host:
        host = f"[{host}]"
    path = Path(settings.data_dir).expanduser() / SERVING_URL_NAME
    try:
        tmp = path.with_name(f".{SERVING_URL_NAME}.tmp")
        tmp.write_text(f"http://{host}:{settings.service.port}\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def serving_url(store_dir: Path | str) -> str:
    """The URL the process serving the store at ``store_dir`` noted (in it or in its
    parent: the demo's web index is a sub-folder of the data dir), else
    :data:`DEFAULT_URL`."""
    for folder in (Path(store_dir), Path(store_dir).parent):
        try:
            url = (folder / SERVING_URL_NAME).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if re.fullmatch(r"http://[\w.\[\]:-]+:\d{1,5}", url):
            return url
    return DEFAULT_URL


def check_service(settings: Settings) -> str:
    """Check what the service's lifespan will build, so a bad model setting or an unusable
    conversation database is one line (exit 1) rather than a failed start-up: the
    conversation database is opened and migrated (once, before any worker of ``serve
    --workers N`` starts) and the model backend built. Returns the backend's name (for the
    start line). Raises :class:`~gcite.errors.ConfigError` / ``StoreError``."""
    import asyncio

    from gcite.generate.factory import make_backend
    from gcite.service.resources import open_conversations

    open_conversations(settings).close()
    backend = make_backend(settings)
    asyncio.run(backend.aclose())
    return backend.name


def check_port(host: str, port: int) -> None:
    """Raise :class:`ConfigError` if ``host:port`` cannot be bound (in use, no permission).

    Binds as the server will (uvicorn sets ``SO_REUSEADDR``): connections of a stopped
    server still in ``TIME_WAIT`` (a browser had the page open) do not count as in use.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"端口 {port} 已被占用，请用 --port 换一个端口") from exc
            raise ConfigError(f"无法监听 {host}:{port}: {exc.strerror or exc}") from exc


def is_in_use(exc: StoreError) -> bool:
    """True when ``exc`` says the store is open in another process."""
    return _IN_USE in str(exc)


def in_use_error(what: str, path: Path | str) -> ConfigError:
    """The one-line error for a store held by another process."""
    return ConfigError(
        f"{what} {path} 正被另一个进程使用（Qdrant Edge 同一时间只允许一个进程打开）；"
        "请先停止正在运行的 gcite demo/serve，或用 --data-dir 指定另一个目录，"
        f"或用 gcite ask --url {serving_url(path)} 连接它"
    )


def _open(
    settings: Settings, what: str, *, create: bool = False, handles: StoreHandles | None = None
) -> Any:
    from gcite.knowledge import open_store

    try:
        return open_store(settings, create=create, handles=handles)
    except StoreError as exc:
        if is_in_use(exc):
            raise in_use_error(what, Path(settings.data_dir).expanduser()) from exc
        raise


def translate_in_use(exc: StoreError, settings: Settings) -> StoreError | ConfigError:
    """``exc`` with the in-use case reworded as :func:`in_use_error` (else ``exc`` itself)."""
    if is_in_use(exc):
        return in_use_error("知识库", Path(settings.data_dir).expanduser())
    return exc


def open_demo_stores(settings: Settings, handles: StoreHandles) -> list[Any]:
    """Open the demo's knowledge base and its offline web index (``<data_dir>/web-offline``)
    through ``handles`` (the service and ``--ask`` share them).

    Returns the open stores (keep them until the server stops). Raises
    :class:`ConfigError` when one is open in another process and
    :class:`StoreError` when one is missing or corrupt.
    """
    stores = [_open(settings, "知识库", handles=handles)]
    record_serving_url(settings)
    web_settings = settings.embedded_at(Path(settings.data_dir).expanduser() / "web-offline")
    try:
        stores.append(_open(web_settings, "离线网页索引", create=True, handles=handles))
    except Exception:
        stores[0].close()
        raise
    return stores


def open_serve_store(settings: Settings, handles: StoreHandles) -> Any:
    """Open the knowledge base ``gcite serve`` will answer from through ``handles`` (the
    service's, so it shares the handle) (``None`` with ``knowledge_url``: the other
    service's is reached at the first question).

    A store held by another process, or a corrupt one, raises (one line, exit 1).
    A data dir without a knowledge base (missing folder, no ``catalog.json``) is an
    error unless a web search provider is configured: serving web-only answers is a
    legitimate setup, so then one ``提示:`` line goes to stderr and ``None`` is returned.
    """
    if settings.knowledge.url.strip():
        return None  # another service's knowledge base: nothing to open here
    data_dir = Path(settings.data_dir).expanduser()
    missing = None
    if not data_dir.is_dir():
        missing = f"数据目录不存在: {data_dir}"
    elif not (data_dir / CATALOG_NAME).is_file():
        missing = f"数据目录 {data_dir} 中没有知识库（缺少 {CATALOG_NAME}）"
    if missing is not None:
        if settings.web.provider and settings.web.provider != "none":
            click.echo(
                f"提示: {missing}；只用联网搜索（{settings.web.provider}）回答。"
                "导入文档请运行 gcite ingest",
                err=True,
            )
            return None
        raise ConfigError(
            f"{missing}；请先运行 gcite ingest 导入文档，或用 --data-dir 指定已导入的目录"
            "（只用联网搜索时请配置 web_provider）"
        )
    store = _open(settings, "知识库", handles=handles)
    record_serving_url(settings)
    return store


__all__ = [
    "check_port",
    "check_service",
    "in_use_error",
    "is_in_use",
    "open_demo_stores",
    "open_serve_store",
    "record_serving_url",
    "serving_url",
    "translate_in_use",
]
