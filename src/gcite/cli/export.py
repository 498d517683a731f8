"""``gcite export``: artefacts to paste into or import in Dify.

``gcite export dify-node [--output FILE] [--max-string-length N] [--max-web-results N]
[--max-objects N]`` writes the file of :func:`gcite.dify.codenode.render_code_node`
to stdout, or to FILE (written atomically; a one-line note goes to stderr).

``gcite export dify-dsl --knowledge-id UUID [--model-provider P] [--model M] [--no-web]
[--top-k N] [--roles-variable NAME] [--dsl-version X.Y.Z] [--output FILE]`` writes the
seeds' chatflow as an importable app (:func:`gcite.dify.dsl.render_chatflow`) the same way.
"""

from __future__ import annotations

from pathlib import Path

import click

from gcite.dify.codenode import MIN_STRING_LENGTH, render_code_node
from gcite.dify.dsl import DEFAULT_DSL_VERSION, ChatflowOptions, render_chatflow
from gcite.errors import ConfigError
from gcite.files import write_atomically


@click.group("export", help="导出 Dify Code 节点等")
def export() -> None:
    """Export artefacts for Dify."""


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
    _emit(
        output,
        code,
        "在 Dify 中新建代码节点（Python3），粘贴文件内容，并按文件开头的注释声明输入输出变量。",
    )


def _emit(output: Path | None, text: str, hint: str) -> None:
    """Write ``text`` to stdout, or atomically to ``output`` with a one-line note on stderr."""
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        write_atomically(output, text)
    except OSError as exc:
        from gcite.cli import os_error_reason

        raise click.ClickException(f"无法写入 {output}: {os_error_reason(exc)}") from exc
    click.echo(f"已写入 {output}（{len(text.splitlines())} 行）。{hint}", err=True)


@export.command("dify-dsl")
@click.option(
    "--knowledge-id",
    required=True,
    help="Dify 中连接 gcite 的外部知识库 id（UUID，见知识库页面地址）",
)
@click.option(
    "--model-provider",
    default="langgenius/openai/openai",
    show_default=True,
    help="LLM 节点的模型供应商（Dify 插件的 provider 名）",
)
@click.option("--model", "model_name", default="gpt-4o-mini", show_default=True, help="模型名称")
@click.option("--no-web", is_flag=True, help="不加 Web 搜索（Tavily）工具节点")
@click.option(
    "--top-k",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="知识检索节点的 Top K（Dify 先按知识库的召回设置请求 gcite，再按它截断）",
)
@click.option(
    "--roles-variable",
    default="user_roles",
    show_default=True,
    help="开始节点中携带用户角色的变量名（客户端通过 inputs 传入）",
)
@click.option(
    "--dsl-version",
    default=DEFAULT_DSL_VERSION,
    show_default=True,
    help="写入的 DSL 版本（不能高于目标 Dify 的 CURRENT_APP_DSL_VERSION）",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="写入的文件（默认输出到标准输出）",
)
def dify_dsl(output: Path | None, **options: object) -> None:
    """生成 G-Cite 完整 chatflow 的 Dify DSL（可在 Dify「导入 DSL 文件」中导入）。"""
    web = not options.pop("no_web")
    try:
        text = render_chatflow(ChatflowOptions(web_search=web, **options))  # type: ignore[arg-type]
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    _emit(
        output,
        text,
        "在 Dify「工作室 → 导入 DSL 文件」中导入；先安装模型供应商插件"
        + ("和 Tavily 插件" if web else "")
        + "（见 docs/dify-external-knowledge.md）。",
    )


__all__ = ["export"]
