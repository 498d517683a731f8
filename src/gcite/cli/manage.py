"""``gcite datasets``, ``gcite documents`` (list, delete) and ``gcite status``.

They work on the knowledge base of the data dir (``--data-dir`` / ``GCITE_DATA_DIR`` /
config file), through :mod:`gcite.knowledge.manage`. A knowledge base held by a running
``gcite serve`` cannot be opened (one Qdrant Edge process): the error says so; change
documents of a running service with ``gcite ingest --url URL --key KEY``. Every command
that deletes prints the data dir it wrote to. ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from gcite.config import Settings, load_settings
from gcite.errors import StoreError
from gcite.knowledge.admin import KnowledgeAdmin, ManageError

F = TypeVar("F", bound=Callable[..., Any])


def _common(fn: F) -> F:
    fn = click.option(
        "--config", "config_file", type=click.Path(path_type=Path), default=None, help="配置文件"
    )(fn)
    fn = click.option(
        "--data-dir", type=click.Path(path_type=Path), default=None, help="知识库数据目录"
    )(fn)
    return fn


def _settings(data_dir: Path | None, config_file: Path | None) -> Settings:
    return load_settings({"data_dir": data_dir}, config_file=config_file)


@contextmanager
def _admin(settings: Settings) -> Iterator[KnowledgeAdmin]:
    """The knowledge base's KnowledgeAdmin (another service's with ``knowledge_url``)."""
    from gcite.cli.startup import translate_in_use
    from gcite.knowledge.access import KnowledgeAccess

    with KnowledgeAccess(settings) as knowledge:
        if not knowledge.remote:
            try:
                knowledge.store()  # an existing knowledge base only: nothing is created
            except StoreError as exc:
                raise translate_in_use(exc, settings) from exc
        yield knowledge.admin()


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _wrote(settings: Settings) -> None:
    click.echo(f"数据目录: {Path(settings.data_dir).expanduser().resolve()}")


# --------------------------------------------------------------------------- datasets


@click.group("datasets", invoke_without_command=True)
@_common
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
@click.pass_context
def datasets(
    ctx: click.Context, data_dir: Path | None, config_file: Path | None, as_json: bool
) -> None:
    """列出知识库中的数据集（gcite datasets delete NAME 删除）。"""
    if ctx.invoked_subcommand is not None:
        return
    _list_datasets(_settings(data_dir, config_file), as_json)


@datasets.command("list")
@_common
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def datasets_list(data_dir: Path | None, config_file: Path | None, as_json: bool) -> None:
    """列出数据集：名称、id、文档数、分块数。"""
    _list_datasets(_settings(data_dir, config_file), as_json)


def _list_datasets(settings: Settings, as_json: bool) -> None:
    with _admin(settings) as admin:
        items = admin.list_datasets()
    if as_json:
        _echo_json([vars(i) for i in items])
        return
    if not items:
        click.echo("知识库中没有数据集")
    for i in items:
        click.echo(f"{i.name}\t{i.id}\t文档 {i.documents}\t分块 {i.chunks}")


@datasets.command("delete")
@click.argument("name")
@_common
@click.option("--yes", is_flag=True, help="不询问，直接删除")
def datasets_delete(name: str, data_dir: Path | None, config_file: Path | None, yes: bool) -> None:
    """删除数据集（名称或 id）及其全部文档。"""
    settings = _settings(data_dir, config_file)
    with _admin(settings) as admin:
        found = next((d.name for d in admin.list_datasets() if name in (d.name, d.id)), None)
        if found is None:  # a missing dataset is said before any question
            raise ManageError(f"没有数据集 {name}", status=404, code="dataset_not_found")
        if not yes:
            click.confirm(f"删除数据集 {found} 及其全部文档？", abort=True)
        info = admin.delete_dataset(found)
    click.echo(f"已删除数据集 {info.name}（文档 {info.documents}，分块 {info.chunks}）")
    _wrote(settings)


# --------------------------------------------------------------------------- documents


@click.group("documents", invoke_without_command=True)
@_common
@click.option("--dataset", default=None, help="数据集（名称或 id；默认为配置的 dataset）")
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
@click.pass_context
def documents(
    ctx: click.Context,
    data_dir: Path | None,
    config_file: Path | None,
    dataset: str | None,
    as_json: bool,
) -> None:
    """列出数据集中的文档（gcite documents delete DOC 删除）。"""
    if ctx.invoked_subcommand is not None:
        return
    _list_documents(_settings(data_dir, config_file), dataset, as_json)


@documents.command("list")
@_common
@click.option("--dataset", default=None, help="数据集（名称或 id；默认为配置的 dataset）")
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def documents_list(
    data_dir: Path | None, config_file: Path | None, dataset: str | None, as_json: bool
) -> None:
    """列出文档：文件名、id、分块数（不给 --dataset 时列出所有数据集）。"""
    _list_documents(_settings(data_dir, config_file), dataset, as_json)


def _list_documents(settings: Settings, dataset: str | None, as_json: bool) -> None:
    with _admin(settings) as admin:
        names = (
            [dataset or settings.knowledge.dataset]
            if dataset or settings.knowledge.dataset
            else [d.name for d in admin.list_datasets()]
        )
        docs = [d for name in names for d in admin.list_documents(name)]
    if as_json:
        _echo_json(
            [
                {"id": d.id, "name": d.name, "dataset": d.dataset, "segments": d.segments}
                for d in docs
            ]
        )
        return
    if not docs:
        click.echo("没有文档")
    for d in docs:
        click.echo(f"{d.dataset}\t{d.name}\t{d.id}\t分块 {d.segments}")


@documents.command("delete")
@click.argument("document")
@_common
@click.option("--dataset", default=None, help="数据集（名称或 id；默认为配置的 dataset）")
def documents_delete(
    document: str, data_dir: Path | None, config_file: Path | None, dataset: str | None
) -> None:
    """删除一篇文档（文件名或 id）。"""
    settings = _settings(data_dir, config_file)
    name = dataset or settings.knowledge.dataset
    if not name:
        raise click.UsageError("请用 --dataset 指定数据集")
    with _admin(settings) as admin:
        doc = admin.delete_document(name, document)
    click.echo(f"已删除文档 {doc.name}（{doc.id}，分块 {doc.segments}），数据集 {doc.dataset}")
    _wrote(settings)


# --------------------------------------------------------------------------- status


@click.command("status")
@_common
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def status(data_dir: Path | None, config_file: Path | None, as_json: bool) -> None:
    """显示数据目录、存储、嵌入模型、数据集、文档数和分块数。"""
    settings = _settings(data_dir, config_file)
    with _admin(settings) as admin:
        found = admin.status()
    info: dict[str, Any] = {
        "data_dir": str(Path(settings.data_dir).expanduser().resolve()),
        "store": found.location,
        "embedder": found.embedder,
        "dimensions": found.dimensions,
        "datasets": [
            {"id": d.id, "name": d.name, "documents": d.documents, "chunks": d.chunks}
            for d in found.datasets
        ],
        "documents": sum(d.documents for d in found.datasets),
        "chunks": sum(d.chunks for d in found.datasets),
        "stored_chunks": found.stored_chunks,
    }
    if as_json:
        _echo_json(info)
        return
    click.echo(f"数据目录: {info['data_dir']}")
    click.echo(f"向量存储: {info['store']}")
    click.echo(f"嵌入模型: {info['embedder']}（{info['dimensions']} 维）")
    counts = f"数据集: {len(info['datasets'])}，文档: {info['documents']}，分块: {info['chunks']}"
    click.echo(counts)
    for d in info["datasets"]:
        click.echo(f"  {d['name']}\t文档 {d['documents']}\t分块 {d['chunks']}")


__all__ = ["datasets", "documents", "status"]
