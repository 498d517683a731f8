"""``gcite serve``: the real command in a subprocess, offline, with no API key."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from gcite.cli import cli

SAMPLE_WEB = Path(__file__).resolve().parents[2] / "src" / "gcite" / "sample_data" / "web"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_answers_offline_without_any_key(tmp_path: Path) -> None:
    port = _free_port()
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("GCITE_"):
            del env[name]
    env.update(
        {
            "GCITE_ALLOW_ANY_KEY": "true",
            "GCITE_WEB_PROVIDER": "offline",
            "GCITE_WEB_DIR": str(SAMPLE_WEB),
        }
    )
    gcite = Path(sys.executable).parent / "gcite"
    proc = subprocess.Popen(
        [str(gcite), "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1/chat-messages"
        payload = {"query": "干粉灭火器怎么用？", "user": "u", "response_mode": "blocking"}
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.post(url, json=payload, timeout=30)
                break
            except httpx.ConnectError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, "gcite serve did not start"
                time.sleep(0.2)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["metadata"]["gcite"]["backend"] == "extractive"
        assert "拔掉保险销" in answer["answer"] and "[C:" in answer["answer"]  # the steps
        resources = answer["metadata"]["retriever_resources"]
        assert resources and {r["data_source_type"] for r in resources} == {"web"}
        assert json.dumps(resources, ensure_ascii=False).count("灭火") >= 1
    finally:
        proc.terminate()
        try:
            out, _err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _err = proc.communicate()
    assert "对话服务已启动" in out.decode()


def test_serve_reports_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["serve", "--port", str(port), "--data-dir", str(tmp_path)], env={}
        )
    assert result.exit_code == 1
    assert f"端口 {port} 已被占用" in result.output
