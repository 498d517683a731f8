"""``gcite eval --url``: the real chat service on loopback, over Dify's streaming API."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.conftest import run_gcite


@pytest.fixture(scope="module")
def service(eval_demo_dir: Path) -> Iterator[str]:
    """The demo's chat service (offline answerer, demo keys) served by uvicorn on 127.0.0.1."""
    import uvicorn

    from gcite.cli.demo import demo_settings
    from gcite.service import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    app = create_app(demo_settings(eval_demo_dir, port=port))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="gcite-eval-service", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # a hang guard, not a speed check
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the chat service did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def test_eval_against_a_running_service(service: str, demo_questions: Path, tmp_path: Path) -> None:
    out_json = tmp_path / "out.json"
    proc = run_gcite(
        "eval", str(demo_questions), "--url", service, "--key", "demo-security",
        "--json", str(out_json), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # --quiet: no progress lines
    document = json.loads(out_json.read_text("utf-8"))
    assert document["target"] == {"mode": "remote", "url": service}
    verdicts = {v["id"]: v for v in document["verdicts"]}
    assert all(v["error"] is None for v in verdicts.values())
    assert verdicts["readme"]["outcome"] == "right"
    # the key decides the roles, not the question's "roles": both key questions see the key
    assert verdicts["key-visitor"]["outcome"] == "right"
    assert verdicts["key-security"]["outcome"] == "right"
    assert verdicts["canteen"]["outcome"] == "refused"
    # message_end.metadata.gcite_verification reached the client
    assert verdicts["readme"]["verifier_checked"]
    # without a probe the rank comes from the run's own chunks
    assert verdicts["readme"]["gold_rank"] == 1
    assert document["summary"]["errors"] == 0


def test_the_key_decides_the_roles(service: str, demo_questions: Path, tmp_path: Path) -> None:
    out_json = tmp_path / "out.json"
    proc = run_gcite(
        "eval", str(demo_questions), "--url", service, "--key", "demo-visitor",
        "--json", str(out_json), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    verdicts = {v["id"]: v for v in json.loads(out_json.read_text("utf-8"))["verdicts"]}
    # a visitor's key: the control-room document is not retrieved, whatever the row says
    for key in ("key-visitor", "key-security"):
        assert verdicts[key]["outcome"] == "false_refusal" and verdicts[key]["gold_rank"] is None
    assert verdicts["readme"]["outcome"] == "right"


def test_http_errors_are_one_line(service: str, demo_questions: Path) -> None:
    proc = run_gcite("eval", str(demo_questions), "--url", service + "/nowhere")
    assert proc.returncode == 1, proc.stdout
    assert proc.stderr.splitlines()[-1].startswith("错误: 服务返回 HTTP 404")
    assert "Traceback" not in proc.stderr


def test_eval_when_no_service_listens(demo_questions: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = run_gcite("eval", str(demo_questions), "--url", f"http://127.0.0.1:{port}")
    assert proc.returncode == 1 and "无法连接服务" in proc.stderr
