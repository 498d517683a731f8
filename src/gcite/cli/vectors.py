"""``gcite vectors FILE``: check the Python parser against a citation-marker vectors file.

Every case is fed three ways (as given, one delta, one character per delta); one line
per failing case, then ``N passed, N failed`` alone on the last line. Exit status 0
when all pass, 1 when a case fails, 2 (one line on stderr) when the file cannot be
read or is not in the vectors format (``citation-markers.md`` §7).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gcite.stream.vectors import run_vectors, vectors_problem


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@click.command("vectors")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def vectors(file: Path) -> None:
    """运行引用标记测试向量（一致性检查）：每个用例按原样、整段、逐字三种方式输入。"""
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        from gcite.cli import os_error_reason

        click.echo(f"错误: 无法读取测试向量文件 {file}：{os_error_reason(exc)}", err=True)
        sys.exit(2)
    except UnicodeDecodeError as exc:
        click.echo(f"错误: 无法读取测试向量文件 {file}：不是 UTF-8 文本（{exc.reason}）", err=True)
        sys.exit(2)
    except ValueError as exc:
        click.echo(f"错误: 测试向量文件不是有效的 JSON {file}：{exc}", err=True)
        sys.exit(2)
    problem = vectors_problem(doc)
    if problem is not None:
        click.echo(f"错误: 测试向量文件格式不符 {file}：{problem}", err=True)
        sys.exit(2)
    passed = failed = 0
    for result in run_vectors(doc):
        if result.ok:
            passed += 1
            continue
        failed += 1
        ways = ", ".join(way for way, _ in result.failures)
        got = result.failures[0][1]
        click.echo(
            f"失败 {result.name} [{ways}]：期望 {_compact(result.expect)}，实际 {_compact(got)}"
        )
    click.echo(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


__all__ = ["vectors"]
