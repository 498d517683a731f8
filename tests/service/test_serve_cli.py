"""``gcite serve``: the real command in a subprocess, offline, with no API key."""

from __future__ import annotations

import contextlib
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
from gcite.testing import busy_port, free_port

SAMPLE_WEB = Path(__file__).resolve().parents[2] / "src" / "gcite" / "sample_data" / "web"


def _start_serve(port: int, data_dir: Path, output: int | None) -> subprocess.Popen[bytes]:
    """The real ``gcite serve`` offline (no ``GCITE_*`` from the caller, any key, the
    bundled web pages), stdout and stderr to ``output`` (``subprocess.PIPE`` or
    ``subprocess.DEVNULL``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    env.update(
        {
            "GCITE_ALLOW_ANY_KEY": "true",
            "GCITE_WEB_PROVIDER": "offline",
            "GCITE_WEB_DIR": str(SAMPLE_WEB),
        }
    )
    gcite = Path(sys.executable).parent / "gcite"
    return subprocess.Popen(
        [str(gcite), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        env=env,
        stdout=output,
        stderr=output,
    )


def test_serve_answers_offline_without_any_key(tmp_path: Path) -> None:
    port = free_port()
    proc = _start_serve(port, tmp_path / "data", subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}/v1/chat-messages"
        payload = {"query": "干粉灭火器怎么用？", "user": "u", "response_mode": "blocking"}
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            try:
                response = httpx.post(url, json=payload, timeout=120)
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
    with busy_port() as port:
        result = CliRunner().invoke(
            cli, ["serve", "--port", str(port), "--data-dir", str(tmp_path)], env={}
        )
    assert result.exit_code == 1
    assert f"端口 {port} 已被占用" in result.output


def _exchange(port: int, request: bytes) -> bytes:
    """``request`` sent on one connection; what came back until the server closed it or
    went quiet for a second."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        with contextlib.suppress(ConnectionError):
            sock.sendall(request)
        sock.settimeout(1)
        with contextlib.suppress(TimeoutError, ConnectionError):
            while chunk := sock.recv(65536):
                got += chunk
    return got


def test_serve_refuses_an_oversized_request_head(tmp_path: Path) -> None:
    """uvicorn parses with httptools, which takes a head of any size (h11, before, refused
    one past 16 KiB): gcite serve refuses it as h11 did, bodies and keep-alive unaffected."""
    port = free_port()
    proc = _start_serve(port, tmp_path / "data", subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=60)
                break
            except httpx.ConnectError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        huge = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (4 << 20) + b"\r\n\r\n"
        reply = _exchange(port, huge)
        assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
        assert reply.endswith(b"Invalid HTTP request received.")
        assert b'{"status":"ok"}' not in reply
        # two requests on one connection, each with a 10 KiB header: both answered
        fine = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Ok: " + b"b" * 10240 + b"\r\n\r\n"
        assert _exchange(port, fine * 2).count(b'{"status":"ok"}') == 2
        # a large body is not a head
        body = json.dumps({"query": "x" * 300_000, "user": "u"}).encode()
        post = (
            b"POST /v1/chat-messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        reply = _exchange(port, post)
        assert b"x-request-id:" in reply  # answered by the app (whatever it thinks of it)
        assert b"Invalid HTTP request received." not in reply
    finally:
        proc.terminate()
        proc.wait(timeout=60)
