"""The ``gcite`` command line (Click).

Subcommands live in their own modules under :mod:`gcite.cli` and are loaded
lazily, so ``gcite --help`` stays fast and one broken optional dependency does
not take the whole CLI down. User mistakes end as one clear line on stderr and
exit status 2 (usage) or 1 (runtime), never as a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from gcite.errors import GciteError

# command name -> (module, attribute, one-line help)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": ("gcite.cli.ingest", "ingest", "把文档导入知识库 (Markdown/TXT/HTML/PDF/DOCX)"),
    "search": ("gcite.cli.search", "search", "在知识库中检索（按角色过滤）"),
    "serve": ("gcite.cli.serve", "serve", "启动 Dify 兼容的对话服务"),
    "ask": ("gcite.cli.ask", "ask", "在终端提问，流式显示带引用的回答"),
    "demo": ("gcite.cli.demo", "demo", "离线演示：导入示例数据并启动服务"),
    "export": ("gcite.cli.export", "export", "导出 Dify Code 节点等"),
    "vectors": ("gcite.cli.vectors", "vectors", "运行引用标记测试向量（一致性检查）"),
}


class LazyGroup(click.Group):
    """A Click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module_name, attr, help_text = spec
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise

            @click.command(cmd_name, help=help_text + "（尚未实现）")
            def _missing() -> None:
                raise click.ClickException(f"命令 {cmd_name} 尚未实现")

            return _missing
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gcite")
def cli() -> None:
    """gcite — 生成时引用（G-Cite）：回答中的每句话都标注实际使用的来源。"""


# Commands that serve requests: one BLAS thread per process keeps query latency
# predictable (multi-threaded BLAS stalls single searches on small machines; see
# docs/dify-external-knowledge.md). Set before numpy is imported; the user's own
# values win.
_SERVING_COMMANDS = frozenset({"serve", "demo"})
_BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: runs the CLI, turning gcite errors into one line and exit 1."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in _SERVING_COMMANDS:
        for name in _BLAS_THREAD_VARS:
            os.environ.setdefault(name, "1")
    try:
        return cli.main(args=argv, prog_name="gcite", standalone_mode=True)
    except GciteError as exc:
        click.echo(f"错误: {exc}", err=True)
        sys.exit(1)


__all__ = ["cli", "main"]
