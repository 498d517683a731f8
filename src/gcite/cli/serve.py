"""``gcite serve``: run the Dify-compatible chat service with uvicorn.

Settings come from ``--config`` / ``GCITE_CONFIG`` / ``<data_dir>/gcite.toml``, ``GCITE_*``
environment variables and the flags below (flags win). Without ``llm_base_url`` the
offline extractive backend answers; set ``GCITE_LLM_BASE_URL``, ``GCITE_LLM_MODEL`` and
``GCITE_LLM_API_KEY`` for an OpenAI-compatible model. The API is described in
``docs/api.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gcite.config import Settings, load_settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from gcite.knowledge.store import StoreHandles


@click.command("serve")
@click.option("--host", default=None, help="监听地址（默认 127.0.0.1）")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="监听端口（默认 8000）")
@click.option(
    "--data-dir", type=click.Path(path_type=Path), default=None, help="数据目录（知识库与会话）"
)
@click.option(
    "--config", "config_file", type=click.Path(path_type=Path), default=None, help="配置文件"
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    help="对话工作进程数（>1 时退出的工作进程会被替换；嵌入式知识库由一个知识库进程提供检索）",
)
@click.option("--fd", type=int, default=None, hidden=True)
@click.option("--ready-fd", type=int, default=None, hidden=True)
@click.option("--knowledge-fd", type=int, default=None, hidden=True)
def serve(
    host: str | None,
    port: int | None,
    data_dir: Path | None,
    config_file: Path | None,
    workers: int,
    fd: int | None,
    ready_fd: int | None,
    knowledge_fd: int | None,
) -> None:
    """启动 Dify 兼容的对话服务（POST /v1/chat-messages，流式 SSE）。"""
    from gcite.service import create_app
    from gcite.service.server import serve_app

    settings = load_settings(
        {"host": host, "port": port, "data_dir": data_dir}, config_file=config_file
    )
    if knowledge_fd is not None:  # the knowledge process of `--workers N`
        _serve_knowledge(settings, knowledge_fd)
        return
    if fd is not None:  # one chat worker of `--workers N`, on the socket its parent bound
        from gcite.cli.workers import exit_with_parent, ready_notice

        app = create_app(settings)
        _access_log()
        exit_with_parent()
        serve_app(app, fd=fd, on_ready=ready_notice(ready_fd))
        return
    from gcite.cli.startup import check_port, check_service
    from gcite.web import check_web_source

    check_port(settings.service.host, settings.service.port)
    # each process's app builds its web source at start-up: a bad setting is one line here
    check_web_source(settings)
    if workers > 1:
        from gcite.cli.workers import run_workers

        check_service(settings)  # the conversation database migrated once, before the workers
        run_workers(settings, workers, config_file)
        return
    from gcite.cli.startup import open_serve_store
    from gcite.knowledge.store import StoreHandles

    # The service opens the store on the first question, where a failure would only be
    # logged; check (and hold) it now so a busy or missing knowledge base is one line.
    handles = StoreHandles()  # the service's: it shares the handle held here
    store = open_serve_store(settings, handles)
    backend = check_service(settings)
    app = create_app(settings, handles)
    service = settings.service
    click.echo(f"对话服务已启动: http://{service.host}:{service.port}/  （回答后端: {backend}）")
    click.echo(f"数据目录: {settings.data_dir.resolve()}", err=True)
    _check_model(settings)
    _access_log()
    if not settings.app_keys and not settings.service.allow_any_key:
        click.echo("提示: 未配置 app_keys，所有请求都会被拒绝（401）", err=True)
    try:
        serve_app(app, host=settings.service.host, port=settings.service.port)
    finally:
        if store is not None:
            store.close()


def _serve_knowledge(settings: Settings, fd: int) -> None:
    """The knowledge process of ``gcite serve --workers N`` (:mod:`gcite.cli.workers`):
    the internal key arrives on stdin; the store is opened now, so a knowledge base held
    by another process stops the set with one line (a data dir without one yet is fine:
    the Knowledge API creates it)."""
    from gcite.cli.startup import translate_in_use
    from gcite.cli.workers import exit_with_parent
    from gcite.errors import StoreError
    from gcite.knowledge.access import KnowledgeAccess
    from gcite.knowledge.store import StoreHandles
    from gcite.service.server import serve_app

    key = sys.stdin.readline().strip()
    if not key:
        raise click.ClickException("知识库进程没有收到内部密钥（须由 gcite serve --workers 启动）")
    handles = StoreHandles()
    knowledge, app = knowledge_app(settings, key, handles)
    # held open for the life of the process: the app's own access shares the handle
    access = KnowledgeAccess(knowledge, handles)
    try:
        access.store()
    except StoreError as exc:
        translated = translate_in_use(exc, settings)
        if translated is not exc:
            raise translated from exc
    exit_with_parent()
    serve_app(app, fd=fd)


def knowledge_app(settings: Settings, key: str, handles: StoreHandles) -> tuple[Settings, FastAPI]:
    """The knowledge process's settings (``/retrieval`` under
    :data:`gcite.cli.workers.INTERNAL_PREFIX`, the internal ``key``) and app: one that
    answers no chat (``create_app(answers=False)``: the chat workers answer, they ask it
    for searches and knowledge-base management), so its warm-up loads no verifier nor
    answering backend and it builds no web source."""
    import dataclasses

    from gcite.cli.workers import INTERNAL_PREFIX
    from gcite.config import with_internal_key
    from gcite.service import create_app

    service = dataclasses.replace(settings.service, retrieval_prefix=INTERNAL_PREFIX)
    knowledge = dataclasses.replace(settings, service=service, internal_key=key)
    # The internal key's roles follow the config file: re-derived when the key tables are
    # re-read (gcite.config.KeyTables, at each request of the knowledge process).
    with_internal_key(knowledge)
    return knowledge, create_app(knowledge, handles, answers=False)


def _check_model(settings: Settings) -> None:
    """Warn (one line) when the configured model cannot be reached at start-up."""
    from gcite.generate.probe import probe_model

    result = probe_model(settings)
    if result.ok:
        return
    then = (
        "将改用离线抽取式回答（on_model_error = extractive）"
        if settings.llm.on_model_error == "extractive"
        else "提问会失败，直到它恢复（可设置 on_model_error = extractive 改用离线回答）"
    )
    click.echo(f"警告: {result.reason}；{then}", err=True)


def _access_log() -> None:
    """One JSON line per request on stderr (logger ``gcite.access``)."""
    import logging
    import sys

    logger = logging.getLogger("gcite.access")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


__all__ = ["knowledge_app", "serve"]
