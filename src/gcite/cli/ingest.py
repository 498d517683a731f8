"""``gcite ingest PATH... --dataset NAME``: import documents into the knowledge base.

Flags override ``GCITE_*`` environment variables, which override the config
file (:func:`gcite.config.load_settings`). Per-file failures are listed and
make the exit status 1; everything else is still ingested.

Before anything is opened: when none of the given paths exists the command fails
with one line (exit 1) and creates nothing; when they hold no file of a supported
type it says ``没有可导入的文件`` (exit 0) and only touches an existing knowledge base
(to drop documents whose files were removed from the folder). pypdf's own log lines
about a broken PDF (e.g. ``EOF marker not found``) are silenced: the failure is
reported by file name with its reason.

With ``knowledge_url`` configured (another service's knowledge base) the files are
uploaded to that service's Knowledge API with ``knowledge_admin_key`` (or
``knowledge_key``), as ``--url URL --key KEY`` uploads to any running service: nothing is
written in the local data dir.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from gcite.config import load_settings
from gcite.errors import GciteError

if TYPE_CHECKING:
    from gcite.config import Settings
    from gcite.knowledge.ingest import IngestReport

DEFAULT_DATASET = "default"
"""Dataset used when neither ``--dataset``, a manifest nor the ``dataset`` setting names one."""


@dataclass(frozen=True)
class IngestFlags:
    """The options of ``gcite ingest`` (click passes them by name; ``None``: not given)."""

    dataset: str | None
    manifest: Path | None
    data_dir: Path | None
    chunk_size: int | None
    chunk_overlap: int | None
    config_file: Path | None
    quiet: bool
    url: str | None
    key: str | None


def _fail(message: str) -> NoReturn:
    """One clear Chinese line on stderr, exit status 1, no traceback."""
    click.echo(f"错误: {message}", err=True)
    raise SystemExit(1)


def _has_files(path: Path, suffixes: frozenset[str]) -> bool:
    """True when ``path`` is a file, or a folder holding a non-hidden file of a
    supported type (the files :func:`gcite.knowledge.ingest_paths` would read)."""
    if path.is_file():
        return True
    for file in path.rglob("*"):
        rel = file.relative_to(path)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if file.suffix.lower() in suffixes and file.is_file():
            return True
    return False


def _quiet_pypdf() -> None:
    """Silence pypdf's warnings about broken files (logged, or warnings.warn): the
    conversion failure is reported per file with its reason."""
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"pypdf(\.|$)")


def _check_paths(paths: Sequence[Path], data_dir: Path) -> bool:
    """Fail when no path exists; warn and return False when there is nothing to import."""
    from gcite.knowledge.convert import SUPPORTED_SUFFIXES

    existing = [p for p in paths if p.expanduser().exists()]
    if not existing:
        _fail("路径不存在: " + "、".join(str(p) for p in paths))
    if any(_has_files(p.expanduser(), SUPPORTED_SUFFIXES) for p in existing):
        return True
    kinds = " ".join(sorted(SUPPORTED_SUFFIXES))
    click.echo(
        f"提示: 没有可导入的文件: {'、'.join(str(p) for p in existing)}（支持的格式: {kinds}）",
        err=True,
    )
    # An existing knowledge base still syncs (documents whose files are gone are removed).
    return (Path(data_dir).expanduser() / "catalog.json").is_file()


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--dataset",
    "dataset",
    default=None,
    help="数据集名称（默认取清单的 dataset_name）",
)
@click.option(
    "--manifest", type=click.Path(path_type=Path), default=None, help="元数据清单 (JSON/YAML)"
)
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="知识库数据目录")
@click.option("--chunk-size", type=click.IntRange(min=1), default=None, help="分块大小（字符）")
@click.option("--chunk-overlap", type=click.IntRange(min=0), default=None, help="分块重叠（字符）")
@click.option(
    "--config", "config_file", type=click.Path(path_type=Path), default=None, help="配置文件"
)
@click.option("--quiet", is_flag=True, help="不显示进度条")
@click.option("--url", default=None, help="导入到正在运行的服务（如 http://127.0.0.1:8000）")
@click.option("--key", envvar="GCITE_ADMIN_KEY", default=None, help="服务的管理密钥（admin_keys）")
def ingest(paths: tuple[Path, ...], **flags: Any) -> None:
    """把文档导入知识库（Markdown、TXT、HTML、PDF、DOCX、XLSX、CSV）。"""
    options = IngestFlags(**flags)
    if options.url is not None:
        _ingest_remote(paths, options)
        return
    report, settings = _ingest_local(paths, options)
    if report is None:
        return
    click.echo(f"数据目录: {settings.data_dir.resolve()}")
    click.echo(
        f"数据集 {report.dataset}: 新增 {report.added}，更新 {report.updated}，"
        f"未变 {report.unchanged}，删除 {report.deleted}，写入分块 {report.chunks}，"
        f"失败 {len(report.failed)}，跳过 {len(report.skipped)}"
    )
    for path, reason in report.skipped:
        click.echo(f"跳过: {path}: {reason}", err=True)
    for path, reason in report.failed:
        click.echo(f"失败: {path}: {reason}", err=True)
    if report.failed:
        raise SystemExit(1)


def _ingest_local(
    paths: Sequence[Path], options: IngestFlags
) -> tuple[IngestReport | None, Settings]:
    """Ingest into the data dir (or, with ``knowledge_url`` configured, upload there:
    ``None``); exits with one line on a :class:`GciteError`."""
    from gcite.knowledge import ingest_paths
    from gcite.knowledge.convert import load_manifest

    try:
        settings = load_settings(
            {
                "data_dir": options.data_dir,
                "chunk_size": options.chunk_size,
                "chunk_overlap": options.chunk_overlap,
            },
            config_file=options.config_file,
        )
        if settings.knowledge.url.strip():  # another service's knowledge base: upload there
            _ingest_remote(paths, options)
            return None, settings
        name = options.dataset
        if name is None and options.manifest is not None:
            name = load_manifest(options.manifest).dataset_name
        name = name or settings.knowledge.dataset or DEFAULT_DATASET
        if not _check_paths(paths, settings.data_dir):
            return None, settings
        _quiet_pypdf()
        report = ingest_paths(
            list(paths),
            settings=settings,
            dataset=name,
            manifest=options.manifest,
            progress=not options.quiet,
        )
    except GciteError as exc:
        _fail(str(exc))
    return report, settings


def _ingest_remote(paths: Sequence[Path], options: IngestFlags) -> None:
    """Upload through a service's Knowledge API: ``--url`` with ``--key``, or (no
    ``--url``) the ``knowledge_url`` service of the configuration, with its admin key."""
    from gcite.cli.remote_ingest import ingest_remote, upload
    from gcite.knowledge.access import KnowledgeAccess
    from gcite.knowledge.convert import load_manifest

    url, key, dataset, manifest = options.url, options.key, options.dataset, options.manifest
    if url is not None and not key:
        _fail("使用 --url 时需要 --key（服务配置中 [[admin_keys]] 的管理密钥）")
    try:
        data_dir = None if url is not None else options.data_dir
        settings = load_settings({"data_dir": data_dir}, config_file=options.config_file)
        man = load_manifest(manifest) if manifest is not None else None
        name = dataset or (man.dataset_name if man is not None else None)
        name = name or settings.knowledge.dataset or DEFAULT_DATASET
        existing = [p for p in paths if p.expanduser().exists()]
        if not existing:
            _fail("路径不存在: " + "、".join(str(p) for p in paths))
        if url is not None:
            where = url.rstrip("/")
            report = ingest_remote(existing, url=url, key=str(key), dataset=name, manifest=man)
        else:
            where = settings.knowledge.url.rstrip("/")
            with KnowledgeAccess(settings) as knowledge:
                report = upload(
                    knowledge.admin(), existing, dataset=name, manifest=man, where=where
                )
    except GciteError as exc:
        _fail(str(exc))
    click.echo(f"已写入服务: {where}（由服务写入它的数据目录）")
    click.echo(
        f"数据集 {report.dataset}: 新增 {report.added}，更新 {report.updated}，"
        f"写入分块 {report.chunks}，失败 {len(report.failed)}"
    )
    for path, reason in report.failed:
        click.echo(f"失败: {path}: {reason}", err=True)
    if report.failed:
        raise SystemExit(1)


__all__ = ["ingest"]
