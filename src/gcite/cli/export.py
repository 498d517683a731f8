"""``gcite export``: artefacts to paste into Dify (the merge node as a Code node).

``gcite export dify-node [--output FILE] [--max-string-length N] [--max-web-results N]
[--max-objects N]`` writes the file of :func:`gcite.dify.codenode.render_code_node`
to stdout, or to FILE (written atomically; a one-line note goes to stderr).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from gcite.dify.codenode import MIN_STRING_LENGTH, render_code_node


@click.group("export", help="导出 Dify Code 节点等")
def export() -> None:
    """Export artefacts for Dify."""


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder, then rename."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@export.command("dify-node")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="写入的文件（默认输出到标准输出）",
)
@click.option(
    "--max-string-length",
    type=click.IntRange(min=MIN_STRING_LENGTH),
    default=400_000,
    show_default=True,
    help="Dify 的 CODE_MAX_STRING_LENGTH；较旧的部署（0.x / 早期 1.x）为 80000",
)
@click.option(
    "--max-web-results",
    type=click.IntRange(min=0),
    default=None,
    help="Web 结果最多保留条数（节点顶部的 MAX_WEB_RESULTS，可在 Dify 中再改）；默认不限制",
)
@click.option(
    "--max-objects",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Dify 的 CODE_MAX_OBJECT_ARRAY_LENGTH（chunk_metadata 最多项数）",
)
def dify_node(
    output: Path | None, max_string_length: int, max_web_results: int | None, max_objects: int
) -> None:
    """生成可直接粘贴到 Dify 代码节点的合并节点（Chunk编号）Python 文件。"""
    code = render_code_node(
        max_string_length=max_string_length,
        max_web_results=max_web_results,
        max_objects=max_objects,
    )
    if output is None:
        click.echo(code, nl=False)
        return
    try:
        _write_atomically(output, code)
    except OSError as exc:
        from gcite.cli import os_error_reason

        raise click.ClickException(f"无法写入 {output}: {os_error_reason(exc)}") from exc
    click.echo(
        f"已写入 {output}（{len(code.splitlines())} 行）。"
        "在 Dify 中新建代码节点（Python3），粘贴文件内容，并按文件开头的注释声明输入输出变量。",
        err=True,
    )


__all__ = ["export"]
