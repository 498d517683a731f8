"""``gcite vectors FILE``: check the Python client against a vectors file.

Two kinds of file: citation-marker vectors (``citation-markers.md`` §8; every case fed
to the parser three ways: as given, one delta, one character per delta) and Dify
stream-contract vectors (``"kind": "dify-stream"``, ``docs/stream-contract.md``; every
case's raw bytes fed to the consumer whole, byte by byte and in random cuts). One line
per failing case, then ``N passed, N failed`` alone on the last line. Exit status 0
when all pass, 1 when a case fails, 2 (one line on stderr) when the file cannot be
read or is in neither format.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from gcite.stream.contract import is_stream_vectors, run_stream_vectors, stream_vectors_problem
from gcite.stream.vectors import run_vectors, vectors_problem

_SURROGATE = re.compile("[\ud800-\udfff]")


def _compact(value: object) -> str:
    """Compact JSON for a report line; lone surrogates (a vectors file may hold them as
    escapes) stay escapes, as JSON.stringify writes them, so printing never fails."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@click.command("vectors")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def vectors(file: Path) -> None:
    """运行测试向量（一致性检查）：引用标记向量按原样、整段、逐字输入；事件流向量按整段、逐字节、随机切分输入。"""
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
    stream = is_stream_vectors(doc)
    problem = stream_vectors_problem(doc) if stream else vectors_problem(doc)
    if problem is not None:
        click.echo(f"错误: 测试向量文件格式不符 {file}：{problem}", err=True)
        sys.exit(2)
    passed = failed = 0
    results = run_stream_vectors(doc) if stream else run_vectors(doc)
    for result in results:
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
