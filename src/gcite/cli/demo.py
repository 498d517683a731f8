"""``gcite demo``: the offline demo on the bundled sample data.

It needs no network and no API key: the extractive LLM backend (no ``llm_base_url``),
the bundled embedding model, an embedded Qdrant Edge shard and the offline web source
reading ``gcite/sample_data/web``. Steps:

1. :func:`demo_settings` — settings from ``sample_data/demo.toml`` (dataset name, identity
   keys bound to roles, ``allow_any_key``) plus the data dir and the forced offline choices;
2. :func:`prepare_demo` — ingests ``sample_data/handbook`` unless the data dir already holds
   exactly this sample data with this embedding backend (a stamp file records a digest of
   the files) and its catalog lists these files with what ingestion keeps now (their
   query vocabulary), and writes ``page.json`` (page title, suggested questions, identities);
3. serve the chat service with the H5 page on ``127.0.0.1:PORT``, or with ``--once``
   answer one question in the terminal (same output as ``gcite ask``) and exit.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from gcite.config import Settings, demo_data_dir, load_settings
from gcite.errors import ConfigError, StoreError

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_data"
"""The bundled sample data: ``handbook/`` (knowledge), ``web/`` (saved pages), ``demo.toml``."""

STAMP_FILE = "demo-ingested.json"
"""Name of the stamp file in the demo data dir recording what was ingested."""

DEMO_TITLE = "明湖大厦物业助手"
DEMO_SUGGESTIONS = (
    "夜间巡更要打卡多少个点位？",
    "干粉灭火器怎么用？",
    "监控中心的备用钥匙放在哪里？",
)
DEMO_IDENTITIES = (
    {"label": "访客", "key": "demo-visitor", "hint": "无角色：只能看到公开文档"},
    {"label": "运维工程师", "key": "demo-ops", "hint": "可看设备清单"},
    {"label": "安保主管", "key": "demo-security", "hint": "可看监控中心值守规程"},
)


def demo_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings of the offline demo rooted at ``data_dir``.

    ``sample_data/demo.toml`` gives the dataset, the identity keys and ``allow_any_key``;
    the offline choices are forced (they win over ``GCITE_*`` variables): no LLM endpoint
    (extractive backend), the ``use`` embedder, the embedded store, the offline web
    source on ``sample_data/web``. ``overrides`` (e.g. ``port``) are applied last.
    Raises :class:`ConfigError` if the bundled files are missing (broken install).
    """
    config = SAMPLE_DIR / "demo.toml"
    if not config.is_file() or not (SAMPLE_DIR / "handbook").is_dir():
        raise ConfigError(f"找不到内置示例数据: {SAMPLE_DIR}（安装不完整？）")
    forced: dict[str, Any] = {
        "data_dir": str(data_dir),
        "llm_base_url": "",
        "llm_api_key": "",
        "embed_backend": "use",
        "store": "qdrant",
        "qdrant_url": "",
        "database_url": "",
        "web_provider": "offline",
        "web_dir": str(SAMPLE_DIR / "web"),
        **overrides,
    }
    return load_settings(forced, config_file=config)


def _digest(settings: Settings) -> str:
    h = hashlib.sha256()
    h.update(
        f"{settings.embed.backend}|{settings.knowledge.chunk_size}|{settings.knowledge.chunk_overlap}".encode()
    )
    for path in sorted([*(SAMPLE_DIR / "handbook").rglob("*"), *(SAMPLE_DIR / "web").rglob("*")]):
        if path.is_file():
            h.update(path.relative_to(SAMPLE_DIR).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class DemoState:
    """What :func:`prepare_demo` did: ``ingested`` (False: the stamp matched) and ``documents``."""

    ingested: bool
    documents: int


def page_config() -> dict[str, Any]:
    """The demo's ``page.json`` (see :mod:`gcite.service.pages`)."""
    return {
        "title": DEMO_TITLE,
        "suggestions": list(DEMO_SUGGESTIONS),
        "identities": [dict(identity) for identity in DEMO_IDENTITIES],
    }


def prepare_demo(settings: Settings, *, progress: bool = False, force: bool = False) -> DemoState:
    """Ingest the bundled handbook into ``settings.data_dir`` unless already done; write
    ``page.json``. Idempotent: a second call with unchanged sample data only compares a
    digest. Raises :class:`ConfigError` when the data dir cannot be written, and the
    knowledge base's :class:`~gcite.errors.StoreError` when ingestion fails.
    """
    from gcite.knowledge import ingest_paths

    data_dir = Path(settings.data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "page.json").write_text(
            json.dumps(page_config(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )
    except OSError as exc:
        raise ConfigError(f"无法写入演示数据目录 {data_dir}: {exc.strerror or exc}") from exc
    stamp_path = data_dir / STAMP_FILE
    digest = _digest(settings)
    handbook = SAMPLE_DIR / "handbook"
    documents = sorted(handbook.glob("*.md"))
    if not force and stamp_path.is_file():
        try:
            stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stamp = {}
        if (
            isinstance(stamp, dict)
            and stamp.get("digest") == digest
            and _store_current(settings, documents)
        ):
            return DemoState(ingested=False, documents=len(documents))
    report = ingest_paths(
        [handbook], settings=settings, dataset=settings.knowledge.dataset, progress=progress
    )
    if not report.ok:
        failed = "；".join(f"{path.name}: {reason}" for path, reason in report.failed)
        raise ConfigError(f"示例数据导入失败：{failed}")
    _drop_foreign(settings, documents)
    warm_web_index(settings)
    stamp_path.write_text(
        json.dumps({"digest": digest, "dataset": settings.knowledge.dataset}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    return DemoState(ingested=True, documents=len(documents))


def _demo_entries(settings: Settings) -> dict[str, Any] | None:
    """The demo dataset's catalog entries ``{document_id: info}``; ``None`` when the data
    dir holds no readable catalog."""
    from gcite.knowledge.catalog import CATALOG_NAME, Catalog

    try:
        catalog = Catalog.load(Path(settings.data_dir) / CATALOG_NAME)
    except StoreError:
        return None
    entries = catalog.datasets.get(settings.knowledge.dataset, {}).get("documents", {})
    return entries if isinstance(entries, dict) else None


def _store_current(settings: Settings, documents: list[Path]) -> bool:
    """Whether the stamped knowledge base is what this gcite would ingest: the demo
    dataset lists exactly ``documents`` (the bundled files at this install's path), each
    with its query vocabulary. A data dir ingested by an older gcite (no vocabulary: query
    normalisation would silently do nothing) or from another install's copy is not."""
    from gcite.knowledge.vocabulary import CATALOG_KEY

    entries = _demo_entries(settings)
    if entries is None:
        return False
    paths = {str(info.get("path")) for info in entries.values() if isinstance(info, dict)}
    return paths == {str(path) for path in documents} and all(
        isinstance(info, dict) and CATALOG_KEY in info for info in entries.values()
    )


def _drop_foreign(settings: Settings, documents: list[Path]) -> None:
    """Remove the demo dataset's documents that are not ``documents`` (ingested from
    another install's copy of the sample data), so no answer cites a stale duplicate.
    Raises the store's :class:`StoreError` when it cannot be written."""
    from gcite.knowledge import open_store
    from gcite.knowledge.manage import delete_document

    current = {str(path) for path in documents}
    foreign = [
        document_id
        for document_id, info in (_demo_entries(settings) or {}).items()
        if not isinstance(info, dict) or str(info.get("path")) not in current
    ]
    if not foreign:
        return
    store = open_store(settings)
    try:
        for document_id in foreign:
            delete_document(store, settings.knowledge.dataset, document_id)
    finally:
        store.close()


def warm_web_index(settings: Settings) -> None:
    """Build the offline web source's index of ``settings.web.offline.dir`` now (embedding every
    saved page), so the demo's first questions get web results instead of a web-branch
    timeout while the index builds. Idempotent; raises the web source's
    :class:`~gcite.errors.SourceError` on failure."""
    from gcite.web.offline import OfflineWebSource

    async def build() -> None:
        source = OfflineWebSource(settings.web.offline.dir, settings=settings, timeout_s=600.0)
        try:
            await source.search("明湖大厦", count=1)
        finally:
            await source.aclose()

    asyncio.run(build())


@click.command(
    "demo",
    epilog="示例：\n\n  gcite demo                      # 浏览器打开打印出的地址\n\n"
    '  gcite demo --once "干粉灭火器怎么用？"\n\n'
    '  gcite demo --once "监控中心的备用钥匙放在哪里？" --role 安保主管',
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="监听端口"
)
@click.option("--once", "question", metavar="问题", help="不启动服务：在终端回答这个问题后退出")
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="角色",
    help="配合 --once：以这些角色提问（可重复；不给则为访客）",
)
@click.option("--json", "as_json", is_flag=True, help="配合 --once：每行输出一个 JSON 事件")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="演示数据目录（默认 $GCITE_DATA_DIR，否则 ~/.cache/gcite/demo）",
)
@click.option("--reingest", is_flag=True, help="即使已导入也重新导入示例数据")
def demo(
    port: int,
    question: str | None,
    roles: tuple[str, ...],
    as_json: bool,
    data_dir: Path | None,
    reingest: bool,
) -> None:
    """离线演示：导入示例数据，启动对话服务和移动端页面（或 --once 在终端回答）。

    示例数据是虚构的明湖科技大厦物业手册和几篇保存的网页，首次运行时导入，之后跳过。

    无需联网、无需 API Key：使用抽取式回答后端和离线网页来源。

    页面上可切换身份（访客 / 运维工程师 / 安保主管），身份对应的 Key 在服务端绑定角色。
    """
    if (roles or as_json) and question is None:
        raise click.UsageError("--role 和 --json 只能与 --once 一起使用")
    settings = demo_settings(data_dir or demo_data_dir(), port=port)
    if question is None:
        from gcite.cli.startup import check_port

        check_port(settings.service.host, port)
    click.echo(f"演示数据目录: {settings.data_dir.resolve()}", err=True)
    from gcite.cli.startup import open_demo_stores, translate_in_use
    from gcite.knowledge.store import StoreHandles

    handles = StoreHandles()  # the service's: it shares the handles held here
    try:
        state = prepare_demo(settings, progress=sys.stderr.isatty(), force=reingest)
        # The service opens the stores on the first question; a store held by another
        # process would only turn every answer into "无法确定". Check (and hold) them now.
        stores = open_demo_stores(settings, handles)
    except StoreError as exc:
        raise translate_in_use(exc, settings) from exc
    if state.ingested:
        click.echo(f"已导入示例数据: {state.documents} 篇文档", err=True)
    else:
        click.echo("示例数据已导入，跳过", err=True)

    if question is not None:
        from gcite.cli.ask import answer_in_terminal

        for store in stores:  # checked; the answer opens them as its own
            store.close()
        code = answer_in_terminal(settings, question, roles=list(roles), as_json=as_json)
        sys.exit(code)

    from gcite.service import create_app
    from gcite.service.server import serve_app

    app = create_app(settings, handles)
    url = f"http://{settings.service.host}:{port}/"
    click.echo(f"演示已启动: {url}", err=False)
    click.echo("用手机尺寸的浏览器窗口打开上面的地址；按 Ctrl+C 停止。", err=True)
    sys.stdout.flush()
    try:
        serve_app(app, host=settings.service.host, port=port)
    finally:
        for store in stores:
            store.close()


__all__ = ["SAMPLE_DIR", "DemoState", "demo", "demo_settings", "prepare_demo"]
