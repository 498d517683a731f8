"""Start-up checks of `gcite demo` / `gcite serve`: a knowledge store that another process
holds, or a data dir without a knowledge base, is one clear line and exit 1 (not a
service that answers every question with "根据现有资料无法确定")."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.conftest import run_gcite
from gcite.testing import free_port

_HOLD = """
import sys
from gcite.config import Settings
from gcite.knowledge import open_store
store = open_store(Settings.from_keys(data_dir=sys.argv[1]))
print("ready", flush=True)
sys.stdin.read()
store.close()
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}


@pytest.fixture
def data_dir(demo_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the ingested demo data dir (the session's copy stays untouched)."""
    target = tmp_path / "demo"
    shutil.copytree(demo_dir, target)
    return target


def _hold(store_dir: Path) -> Iterator[None]:
    """Keep the knowledge store in ``store_dir`` open in another process."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(store_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read() if proc.stderr else ""
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


@pytest.fixture
def held(data_dir: Path) -> Iterator[None]:
    """``data_dir`` with its knowledge base held open by another process."""
    yield from _hold(data_dir)


@pytest.fixture
def held_web(data_dir: Path) -> Iterator[None]:
    """``data_dir`` with only its offline web index held open by another process."""
    yield from _hold(data_dir / "web-offline")


def _one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("错误")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return errors[0]


@pytest.mark.parametrize(
    ("command", "started"), [("demo", "演示已启动"), ("serve", "对话服务已启动")]
)
def test_serving_on_a_busy_store_exits(
    command: str, started: str, data_dir: Path, held: None
) -> None:
    """A second ``gcite demo`` / ``gcite serve`` on a store another process holds."""
    result = run_gcite(command, "--data-dir", str(data_dir), "--port", str(free_port()), env=_env())
    assert result.returncode == 1, result.stdout + result.stderr
    line = _one_error_line(result.stderr)
    assert line.startswith(f"错误: 知识库 {data_dir} 正被另一个进程使用")
    assert "--data-dir" in line and "gcite ask --url http://127.0.0.1:8000" in line
    assert started not in result.stdout


def test_demo_once_on_a_busy_store_exits(data_dir: Path, held: None) -> None:
    result = run_gcite("demo", "--data-dir", str(data_dir), "--once", "干粉灭火器怎么用？")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "正被另一个进程使用" in _one_error_line(result.stderr)
    assert result.stdout == ""


def test_demo_on_a_busy_web_index_exits(data_dir: Path, held_web: None) -> None:
    result = run_gcite("demo", "--data-dir", str(data_dir), "--port", str(free_port()))
    assert result.returncode == 1, result.stdout + result.stderr
    line = _one_error_line(result.stderr)
    assert line.startswith(f"错误: 离线网页索引 {data_dir / 'web-offline'} 正被另一个进程使用")


def test_serve_on_a_missing_data_dir_exits(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    result = run_gcite("serve", "--data-dir", str(missing), "--port", str(free_port()), env=_env())
    assert result.returncode == 1, result.stdout + result.stderr
    line = _one_error_line(result.stderr)
    assert line.startswith(f"错误: 数据目录不存在: {missing}")
    assert "gcite ingest" in line
    assert not missing.exists()


def test_serve_on_a_folder_without_knowledge_base_exits(tmp_path: Path) -> None:
    result = run_gcite("serve", "--data-dir", str(tmp_path), "--port", str(free_port()), env=_env())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "中没有知识库" in _one_error_line(result.stderr)


def _serve_starts(data: Path, env: dict[str, str]) -> str:
    """Start ``gcite serve`` on ``data``; once it printed its start line, stop it. Its stderr."""
    code = "import sys; from gcite.cli import main; sys.argv[0] = 'gcite'; main()"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--data-dir", str(data), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"对话服务已启动: http://127.0.0.1:{port}/"), (
            proc.stderr.read() if proc.stderr else ""
        )
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    return stderr


def test_serve_web_only_warns_and_serves(tmp_path: Path) -> None:
    """Without a knowledge base but with a web provider, serving web-only is legitimate:
    one 提示 line on stderr, then the service starts."""
    web = tmp_path / "web"
    web.mkdir()
    (web / "page.md").write_text("# 页面\n\n正文。\n", encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    env = {**_env(), "GCITE_WEB_PROVIDER": "offline", "GCITE_WEB_DIR": str(web)}
    stderr = _serve_starts(data, env)
    assert f"提示: 数据目录 {data} 中没有知识库" in stderr
    assert "只用联网搜索" in stderr


def test_serve_workers_on_a_busy_store_exits_with_the_reason(data_dir: Path, held: None) -> None:
    """The knowledge process of ``--workers`` cannot open the store: the set does not
    start, one line says why and no worker is left behind."""
    port = free_port()
    result = run_gcite(
        "serve", "--data-dir", str(data_dir), "--port", str(port), "--workers", "2", env=_env()
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"知识库 {data_dir} 正被另一个进程使用" in result.stderr
    assert "知识库进程未能启动" in result.stderr
    assert "对话服务已启动" not in result.stdout
    with socket.socket() as sock:  # nothing holds the public port
        sock.bind(("127.0.0.1", port))


def test_serve_with_knowledge_url_needs_no_local_knowledge_base(tmp_path: Path) -> None:
    """The knowledge base is another service's: nothing is opened locally at start-up (the
    other service is reached at the first question; /ready says whether it answers)."""
    env = {**_env(), "GCITE_KNOWLEDGE_URL": f"http://127.0.0.1:{free_port()}"}
    _serve_starts(tmp_path, env)
    assert not (tmp_path / "catalog.json").exists()
