"""``gcite serve --workers N``: a knowledge process and N chat workers, real processes.

The law of the store contract (``tests.knowledge.docs``) is ingested into a temp data dir;
``gcite serve --workers 2`` runs offline (extractive backend) on a free port. Every worker
answers from the knowledge process's ``/retrieval`` and keeps the caller's roles.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from gcite.config import Settings
from gcite.knowledge import ingest_paths
from support.serve_workers import ServeWorkers

from .docs import MANIFEST, write_mixed

DATASET = "园区制度库"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ingest(base: Path) -> Path:
    data = base / "data"
    write_mixed(base / "docs")
    manifest = base / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    settings = Settings(data_dir=data, embed_backend="use")
    ingest_paths([base / "docs"], settings=settings, dataset=DATASET, manifest=manifest)
    (data / "gcite.toml").write_text(
        '[[app_keys]]\nkey = "ops"\nroles = ["运维工程师"]\n\n'
        '[[app_keys]]\nkey = "pub"\nroles = []\npublic_only = true\n',
        encoding="utf-8",
    )
    return data


def _titles(answer: dict[str, object]) -> set[str]:
    meta = answer["metadata"]
    assert isinstance(meta, dict)
    return {str(r.get("document_name", "")) for r in meta.get("retriever_resources") or []}


def _children(pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return [int(x) for x in out.split()]


def test_two_workers_answer_through_the_knowledge_process(tmp_path: Path) -> None:
    data = _ingest(tmp_path)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    gcite = Path(sys.executable).parent / "gcite"
    proc = subprocess.Popen(
        [str(gcite), "serve", "--port", str(port), "--data-dir", str(data), "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1/chat-messages"
        payload = {"query": "电梯维保多久一次？", "user": "u", "response_mode": "blocking"}
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.post(
                    url, json=payload, headers={"Authorization": "Bearer ops"}, timeout=60
                )
                break
            except httpx.ConnectError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, "gcite serve --workers 2 did not start"
                time.sleep(0.3)
        assert len(_children(proc.pid)) == 2
        seen_ops: set[str] = set()
        seen_pub: set[str] = set()
        for _ in range(4):  # several requests: both workers answer some
            for key, seen in (("ops", seen_ops), ("pub", seen_pub)):
                r = httpx.post(
                    url, json=payload, headers={"Authorization": f"Bearer {key}"}, timeout=60
                )
                assert r.status_code == 200, r.text
                seen |= _titles(r.json())
        assert response.status_code == 200, response.text
        assert any("elevator" in t or "电梯" in t for t in seen_ops), seen_ops
        assert not any("elevator" in t or "电梯" in t for t in seen_pub), seen_pub
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert proc.returncode is not None


PUBLIC_ONLY = '[[app_keys]]\nkey = "ops"\nroles = []\npublic_only = true\n'
OPERATOR = '[[app_keys]]\nkey = "ops"\nroles = ["运维工程师"]\n'


def test_a_role_change_in_the_config_is_seen_by_every_worker_at_its_next_request(
    tmp_path: Path,
) -> None:
    """The key starts public-only, so the knowledge process's internal key holds no role at
    all; granting 运维工程师 in the config file must show the elevator rules at the next
    request of each worker (worker and knowledge process both re-read the key tables), and
    taking it back must hide them again at the next request of each worker."""
    data = _ingest(tmp_path)
    config = data / "gcite.toml"
    config.write_text(PUBLIC_ONLY, encoding="utf-8")
    with ServeWorkers(data, 2, tmp_path / "serve.log") as served:
        url = f"{served.base}/v1/chat-messages"
        payload = {"query": "电梯维保多久一次？", "user": "u", "response_mode": "blocking"}

        def ask() -> tuple[bool, int]:
            request_id = uuid.uuid4().hex
            r = httpx.post(
                url,
                json=payload,
                headers={"Authorization": "Bearer ops", "X-Request-Id": request_id},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            elevator = any("elevator" in t or "电梯" in t for t in _titles(r.json()))
            return elevator, served.pid_of(request_id)

        def every_worker_sees(expected: bool) -> None:
            pids: set[int] = set()
            for _ in range(40):  # new connections: the kernel spreads them over the workers
                elevator, pid = ask()
                assert elevator is expected, (expected, pid)
                pids.add(pid)
                if pids == served.worker_pids:
                    return
            raise AssertionError(f"only workers {pids} of {served.worker_pids} answered")

        every_worker_sees(False)
        config.write_text(OPERATOR, encoding="utf-8")
        every_worker_sees(True)
        config.write_text(PUBLIC_ONLY, encoding="utf-8")
        every_worker_sees(False)
