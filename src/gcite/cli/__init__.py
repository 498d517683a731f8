"""The ``gcite`` command line (Click).

Subcommands live in their own modules under :mod:`gcite.cli` and are loaded
lazily, so ``gcite --help`` stays fast (everything ships in one wheel: a missing
command module is a broken install and raises). User mistakes end as one clear line on stderr and
exit status 2 (usage) or 1 (runtime), never as a traceback.

Every error line gcite prints starts with ``错误: ``: :meth:`LazyGroup.main` runs Click
in non-standalone mode and reports :class:`click.ClickException`,
:class:`~gcite.errors.GciteError` and Click's usage errors itself, the common usage
errors (no such command or option, missing argument or option, invalid value, extra
argument) translated to Chinese by :func:`usage_error_message`, followed by one line
pointing to ``--help``.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from click.exceptions import NoArgsIsHelpError, NoSuchCommand

from gcite.errors import GciteError

# command name -> (module, attribute)
_COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("gcite.cli.ingest", "ingest"),
    "search": ("gcite.cli.search", "search"),
    "datasets": ("gcite.cli.manage", "datasets"),
    "documents": ("gcite.cli.manage", "documents"),
    "status": ("gcite.cli.manage", "status"),
    "serve": ("gcite.cli.serve", "serve"),
    "ask": ("gcite.cli.ask", "ask"),
    "demo": ("gcite.cli.demo", "demo"),
    "export": ("gcite.cli.export", "export"),
    "vectors": ("gcite.cli.vectors", "vectors"),
    "eval": ("gcite.cli.eval", "eval_command"),
}


# Click's English details of an invalid value (click.types), as (pattern, Chinese).
_VALUE_DETAILS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(?P<v>.*) is not a valid integer( range)?\.$"), "{v} 不是有效的整数"),
    (re.compile(r"^(?P<v>.*) is not a valid float( range)?\.$"), "{v} 不是有效的数字"),
    (re.compile(r"^(?P<v>.*) is not a valid boolean\..*$"), "{v} 不是有效的布尔值"),
    (re.compile(r"^(?P<v>.*) is not in the range (?P<r>.*)\.$"), "{v} 不在范围 {r} 内"),
    (re.compile(r"^(?P<v>.*) is not one of (?P<r>.*)\.$"), "{v} 不是可选值 {r} 之一"),
    (re.compile(r"^(?P<v>.*) is not (?P<r>'[^']*')\.$"), "{v} 不是 {r}"),
    (re.compile(r"^\w+ (?P<v>.*) does not exist\.$"), "{v} 不存在"),
    (re.compile(r"^\w+ (?P<v>.*) is a file\.$"), "{v} 是文件，需要目录"),
    (re.compile(r"^\w+ (?P<v>.*) is a directory\.$"), "{v} 是目录，需要文件"),
    (re.compile(r"^\w+ (?P<v>.*) is not readable\.$"), "{v} 不可读"),
    (re.compile(r"^\w+ (?P<v>.*) is not writable\.$"), "{v} 不可写"),
)
_EXTRA_ARGS = re.compile(r"^Got unexpected extra arguments? \((?P<a>.*)\)$")
_NEEDS_VALUE = re.compile(r"^Option '.*' requires (an argument|\d+ arguments)\.$")
_NO_VALUE = re.compile(r"^Option '.*' does not take a value\.$")


def _param_label(param: click.Parameter | None) -> str:
    if isinstance(param, click.Option):
        return "选项 " + " / ".join(param.opts)
    if param is not None:
        return f"参数 {param.human_readable_name}"
    return "参数"


def _value_detail(message: str) -> str:
    for pattern, chinese in _VALUE_DETAILS:
        match = pattern.match(message.strip())
        if match:
            return chinese.format(**match.groupdict())
    return message


def usage_error_message(exc: click.UsageError) -> str:
    """The message of a usage error in Chinese (Click's common ones translated; gcite's
    own, already Chinese, unchanged). Without the ``错误: `` prefix."""
    if isinstance(exc, NoSuchCommand):
        return _no_such_command(exc)
    if isinstance(exc, click.MissingParameter):  # before BadParameter, its base class
        return _missing_parameter(exc)
    if isinstance(exc, click.NoSuchOption):
        return _no_such_option(exc)
    if isinstance(exc, click.BadParameter):
        return f"{_param_label(exc.param)} 的值无效: {_value_detail(exc.message)}"
    if isinstance(exc, click.BadOptionUsage):
        return _bad_option_usage(exc)
    extra = _EXTRA_ARGS.match(exc.message)
    if extra:
        return f"多余的参数: {extra.group('a')}"
    return exc.format_message()


def _no_such_command(exc: NoSuchCommand) -> str:
    text = f"没有这个命令: {exc.command_name}"
    # the lazy group has no `commands` dict for Click to suggest from
    close = exc.possibilities or difflib.get_close_matches(exc.command_name, list(_COMMANDS))
    if close:
        return text + f"（是不是要用 {' / '.join(close)}？）"
    return text + f"（可用的命令: {', '.join(sorted(_COMMANDS))}）"


def _missing_parameter(exc: click.MissingParameter) -> str:
    param = exc.param
    if isinstance(param, click.Option):
        return f"缺少选项 {' / '.join(param.opts)}"
    if param is not None:
        return f"缺少参数 {param.human_readable_name}"
    return "缺少参数"


def _no_such_option(exc: click.NoSuchOption) -> str:
    text = f"没有这个选项: {exc.option_name}"
    if exc.possibilities:
        return text + f"（是不是要用 {' / '.join(sorted(exc.possibilities))}？）"
    return text


def _bad_option_usage(exc: click.BadOptionUsage) -> str:
    if _NEEDS_VALUE.match(exc.message):
        return f"选项 {exc.option_name} 需要一个值"
    if _NO_VALUE.match(exc.message):
        return f"选项 {exc.option_name} 不接受值"
    return exc.format_message()


_OS_REASONS = {
    errno.ENOENT: "文件或目录不存在",
    errno.EACCES: "没有权限",
    errno.EPERM: "没有权限",
    errno.EISDIR: "是目录",
    errno.ENOTDIR: "路径中有一段不是目录",
    errno.ENOSPC: "磁盘空间不足",
    errno.EROFS: "只读文件系统",
}


def os_error_reason(exc: OSError) -> str:
    """A short Chinese reason for ``exc`` (the system's text when it is an unusual one)."""
    if exc.errno in _OS_REASONS:
        return _OS_REASONS[exc.errno]
    return exc.strerror or str(exc)


def _show_usage_error(exc: click.UsageError) -> None:
    command = exc.ctx.command_path if exc.ctx is not None else "gcite"
    click.echo(f"错误: {usage_error_message(exc)}", err=True)
    click.echo(f"运行 {command} --help 查看用法", err=True)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null (its reader went away: a flush at exit must not fail)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


# Click's own English in help pages (headings, metavars, the help and version options,
# defaults), in Chinese: the help formatter of every gcite command.
_HEADINGS = {"Options": "选项", "Commands": "命令", "Arguments": "参数"}
_HELP_TEXTS = {
    "Show this message and exit.": "显示此帮助并退出。",
    "Show the version and exit.": "显示版本并退出。",
}
_METAVARS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bINTEGER RANGE\b"), "整数"),
    (re.compile(r"\bFLOAT RANGE\b"), "数字"),
    (re.compile(r"\bINTEGER\b"), "整数"),
    (re.compile(r"\bFLOAT\b"), "数字"),
    (re.compile(r"\bTEXT\b"), "文本"),
    (re.compile(r"\bDIRECTORY\b"), "目录"),
    (re.compile(r"\bFILE\b"), "文件"),
    (re.compile(r"\bPATH\b"), "路径"),
    (re.compile(r"\bBOOLEAN\b"), "布尔值"),
    (re.compile(r"\[OPTIONS\]"), "[选项]"),
    (re.compile(r"\bCOMMAND \[ARGS\]\.\.\."), "命令 [参数]..."),
    (re.compile(r"\[COMMAND\] \[ARGS\]\.\.\."), "[命令] [参数]..."),
)
_BRACKETS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\[default: ([^\]]*)\]"), r"[默认：\1]"),
    (re.compile(r"\[required\]"), "[必填]"),
    (re.compile(r"\[env var: ([^\]]*)\]"), r"[环境变量：\1]"),
)


def _metavars(text: str) -> str:
    for pattern, chinese in _METAVARS:
        text = pattern.sub(chinese, text)
    return text


def _help_text(text: str) -> str:
    text = _HELP_TEXTS.get(text, text)
    for pattern, chinese in _BRACKETS:
        text = pattern.sub(chinese, text)
    return text


class ChineseHelpFormatter(click.HelpFormatter):
    """Click's help formatter with Click's own words in Chinese (用法、选项、命令, the
    metavars, the help option, defaults)."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, _metavars(args), "用法：" if prefix is None else prefix)

    def write_heading(self, heading: str) -> None:
        super().write_heading(_HEADINGS.get(heading, heading))

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        super().write_dl(
            [(_metavars(term), _help_text(text)) for term, text in rows], col_max, col_spacing
        )


class ChineseContext(click.Context):
    """The context of every gcite command: help pages through :class:`ChineseHelpFormatter`."""

    formatter_class = ChineseHelpFormatter


def _localise(command: click.Command) -> click.Command:
    """``command`` (and its subcommands) with :class:`ChineseContext`."""
    command.context_class = ChineseContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _localise(sub)
    return command


class LazyGroup(click.Group):
    """A Click group whose subcommands are imported on first use, and whose errors are
    reported in Chinese (see the module docstring)."""

    context_class = ChineseContext

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Click's ``main``; in standalone mode (the default) errors are reported here:
        ``错误: ...`` on stderr, exit 2 for usage errors, 1 (or the exception's own
        status) for the others."""
        if not standalone_mode:
            return super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        try:
            rv = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            _show_usage_error(exc)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("已中止", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            click.echo(f"错误: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except GciteError as exc:
            click.echo(f"错误: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _quiet_stdout()
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module_name, attr = spec
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return _localise(command)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="gcite", message="%(prog)s 版本 %(version)s", help="显示版本并退出。"
)
def cli() -> None:
    """gcite — 生成时引用（G-Cite）：回答中的每句话都标注实际使用的来源。"""


# Commands that embed (serving, ingesting, searching, answering locally): one BLAS thread
# per process. Multi-threaded BLAS stalls single searches on small machines (see
# docs/dify-external-knowledge.md) and, on a busy machine, spins for many times the CPU
# per ingested chunk and per query (docs/benchmarks.md). Set before numpy is imported;
# the environment variables keep the user's own values, the bundled models run on one
# thread (embed.py).
_EMBEDDING_COMMANDS = frozenset({"serve", "demo", "ingest", "search", "ask", "eval"})


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: runs the CLI (errors reported by :meth:`LazyGroup.main`)."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in _EMBEDDING_COMMANDS:
        from gcite.config import blas_thread_defaults

        os.environ.update(blas_thread_defaults())
        from gcite.knowledge.embed import server_blas_threads

        server_blas_threads(1)  # also the bundled models' own per-call thread count
    return cli.main(args=argv, prog_name="gcite", standalone_mode=True)


__all__ = [
    "ChineseContext",
    "ChineseHelpFormatter",
    "LazyGroup",
    "cli",
    "main",
    "os_error_reason",
    "usage_error_message",
]
