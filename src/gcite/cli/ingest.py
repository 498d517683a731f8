"""``gcite ingest PATH... --dataset NAME``: import documents into the knowledge base.

Flags override ``GCITE_*`` environment variables, which override the config
file (:func:`gcite.config.load_settings`). Per-file failures are listed and
make the exit status 1; everything else is still ingested.
"""

from __future__ import annotations

from pathlib import Path

import click

from gcite.config import load_settings
from gcite.errors import GciteError

DEFAULT_DATASET = "default"
"""Dataset used when neither ``--dataset``, a manifest nor the ``dataset`` setting names one."""


def _fail(message: str) -> None:
    """One clear Chinese line on stderr, exit status 1, no traceback."""
    click.echo(f"错误: {message}", err=True)
    raise SystemExit(1)


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
def ingest(
    paths: tuple[Path, ...],
    dataset: str | None,
    manifest: Path | None,
    data_dir: Path | None,
    chunk_size: int | None,
    chunk_overlap: int | None,
    config_file: Path | None,
    quiet: bool,
) -> None:
    """把文档导入知识库（Markdown、TXT、HTML、PDF、DOCX）。"""
    from gcite.knowledge import ingest_paths
    from gcite.knowledge.convert import load_manifest

    try:
        settings = load_settings(
            {"data_dir": data_dir, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap},
            config_file=config_file,
        )
        name = dataset
        if name is None and manifest is not None:
            name = load_manifest(manifest).dataset_name
        name = name or settings.dataset or DEFAULT_DATASET
        report = ingest_paths(
            list(paths), settings=settings, dataset=name, manifest=manifest, progress=not quiet
        )
    except GciteError as exc:
        _fail(str(exc))
    click.echo(
        f"数据集 {report.dataset}: 新增 {report.added}，更新 {report.updated}，"
        f"未变 {report.unchanged}，删除 {report.deleted}，写入分块 {report.chunks}，"
        f"失败 {len(report.failed)}"
    )
    for path, reason in report.failed:
        click.echo(f"失败: {path}: {reason}", err=True)
    if report.failed:
        raise SystemExit(1)


__all__ = ["ingest"]
