"""CLI messages: every gcite error line starts with `错误: `, Click's usage errors are in
Chinese (exit 2), runtime errors exit 1; `gcite ingest` of nothing, or of a broken PDF,
says so in one line (no pypdf noise, nothing created for a path that does not exist)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cli.conftest import run_gcite
from gcite.testing import busy_port

ENGLISH = re.compile(r"\b(Error|Usage|Missing|No such|Try|invalid|Aborted)\b")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["foo"],
            "错误: 没有这个命令: foo（可用的命令: ask, datasets, demo, documents, eval, export",
        ),
        (["serach", "x"], "错误: 没有这个命令: serach（是不是要用 search？）"),
        (["ask", "-i", "问题"], "错误: 对话模式（-i）不带问题参数"),
        (["search"], "错误: 缺少参数 QUERY"),
        (["ask", "问题", "--bogus"], "错误: 没有这个选项: --bogus"),
        (["ask", "问题", "--url"], "错误: 选项 --url 需要一个值"),
        (["demo", "--port", "abc"], "错误: 选项 --port 的值无效: 'abc' 不是有效的整数"),
        (["demo", "--port", "70000"], "错误: 选项 --port 的值无效: 70000 不在范围"),
        (["ask", "问题", "多余"], "错误: 多余的参数: 多余"),
        (["vectors", "/"], "错误: 参数 FILE 的值无效: '/' 是目录，需要文件"),
        (["demo", "--json"], "错误: --role 和 --json 只能与 --once 一起使用"),
    ],
)
def test_usage_errors_are_chinese_with_status_2(args: list[str], line: str) -> None:
    proc = run_gcite(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(line), proc.stderr
    assert "--help" in lines[1] and len(lines) == 2, proc.stderr
    assert not ENGLISH.search(proc.stderr), proc.stderr
    assert proc.stdout == ""


def test_no_arguments_still_shows_the_help() -> None:
    proc = run_gcite()
    assert proc.returncode == 2
    assert "ingest" in proc.stdout + proc.stderr and "错误" not in proc.stderr


def test_export_to_a_missing_folder_is_one_chinese_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "node.py"
    proc = run_gcite("export", "dify-node", "-o", str(target))
    assert proc.returncode == 1
    assert proc.stderr == f"错误: 无法写入 {target}: 文件或目录不存在\n"


def test_vectors_missing_file_has_the_prefix_and_status_2(tmp_path: Path) -> None:
    missing = tmp_path / "vectors.json"
    proc = run_gcite("vectors", str(missing))
    assert proc.returncode == 2
    assert proc.stderr == f"错误: 无法读取测试向量文件 {missing}：文件或目录不存在\n"
    assert proc.stdout == ""


def test_serve_on_a_busy_port_has_the_prefix(tmp_path: Path) -> None:
    with busy_port() as port:
        proc = run_gcite("serve", "--port", str(port), "--data-dir", str(tmp_path), env=_env())
    assert proc.returncode == 1
    assert proc.stderr == f"错误: 端口 {port} 已被占用，请用 --port 换一个端口\n"


def test_ingest_of_a_missing_path_creates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = run_gcite("ingest", str(tmp_path / "nope"), "--data-dir", str(data), env=_env())
    assert proc.returncode == 1
    assert proc.stderr == f"错误: 路径不存在: {tmp_path / 'nope'}\n"
    assert proc.stdout == ""
    assert not data.exists()


def test_ingest_of_an_empty_folder_warns(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / ".hidden.md").write_text("# 隐藏\n", encoding="utf-8")
    (folder / "image.png").write_bytes(b"\x89PNG")
    data = tmp_path / "data"
    proc = run_gcite("ingest", str(folder), "--data-dir", str(data), env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"提示: 没有可导入的文件: {folder}")
    assert len(proc.stderr.splitlines()) == 1
    assert not data.exists()


def test_ingest_of_a_broken_pdf_names_it_without_pypdf_noise(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\nxx\n")
    (folder / "good.md").write_text("# 好文档\n\n这是一段正文内容。\n", encoding="utf-8")
    data = tmp_path / "data"
    proc = run_gcite("ingest", str(folder), "--data-dir", str(data), "--quiet", env=_env())
    assert proc.returncode == 1
    assert "EOF marker" not in proc.stderr
    assert proc.stderr.splitlines() == [
        line for line in proc.stderr.splitlines() if line.startswith("失败: ")
    ]
    assert f"失败: {folder / 'broken.pdf'}: PDF 无法解析" in proc.stderr
    assert "新增 1" in proc.stdout
