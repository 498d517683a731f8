"""Live knowledge management under ``gcite serve --workers 2``, and the set dying together.

Real processes: ``gcite serve --workers 2`` (offline extractive backend) on a free port.
Through its public port only, a dataset is created, a document uploaded, answered by
each worker, updated, deleted, and ``gcite ingest --url`` uploads into it: the workers
forward the Knowledge API to the knowledge process. The same with ``knowledge_url``
pointing at another ``gcite serve``: it is written there, never in the workers' data dir.
Killing the knowledge process stops the whole service with status 1 and the reason, and
the service starts again on the same port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths
from gcite.testing import free_port
from support.serve_workers import ServeWorkers, children

ADMIN = {"Authorization": "Bearer admin-secret"}
CHAT = {"Authorization": "Bearer pub"}
CONFIG = (
    '[[app_keys]]\nkey = "pub"\nroles = []\npublic_only = true\n\n'
    '[[admin_keys]]\nkey = "admin-secret"\nname = "ops"\n'
)
DATASET = "车棚库"
QUESTION = "自行车棚什么时候上锁？"
INGESTED_QUESTION = "充电棚什么时候断电？"
FACT = "紫藤花园东侧的自行车棚夜间二十二点后上锁。"
NEW_FACT = "紫藤花园东侧的自行车棚改为夜间二十三点后上锁。"
INGESTED = "访客的电动车统一停放在紫藤花园西侧的充电棚，充电棚夜间二十一点后断电。"
TIMEOUT = 120  # a hang guard per request, never an assertion of speed


def _data_dir(base: Path, config: str = CONFIG) -> Path:
    data = base / "data"
    data.mkdir(parents=True)
    (data / "gcite.toml").write_text(config, encoding="utf-8")
    return data


def _ask(served: ServeWorkers, question: str) -> tuple[list[dict[str, Any]], int]:
    """One blocking chat through the public port: its cited sources and the worker."""
    request_id = uuid.uuid4().hex
    response = httpx.post(
        f"{served.base}/v1/chat-messages",
        json={"query": question, "user": "u", "response_mode": "blocking"},
        headers={**CHAT, "X-Request-Id": request_id},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text
    sources = response.json()["metadata"].get("retriever_resources") or []
    return sources, served.pid_of(request_id)


def _every_worker_answers(
    served: ServeWorkers, expect: str | None, absent: str = "", question: str = QUESTION
) -> None:
    """Ask until each worker answered: every answer cites a source holding ``expect``
    (or, for ``None``, none holding ``absent``)."""
    pids: set[int] = set()
    for _ in range(40):  # new connections: the kernel spreads them over the workers
        sources, pid = _ask(served, question)
        texts = " ".join(str(s.get("content", "")) for s in sources)
        if expect is not None:
            assert expect in texts, (pid, sources)
        else:
            assert absent not in texts, (pid, sources)
        pids.add(pid)
        if pids == served.worker_pids:
            return
    raise AssertionError(f"only workers {pids} of {served.worker_pids} answered")


def _manage_through_the_public_port(served: ServeWorkers, tmp_path: Path) -> None:
    base = served.base
    listed = httpx.get(f"{base}/v1/datasets", headers=ADMIN, timeout=TIMEOUT)
    assert listed.status_code == 200, listed.text
    made = httpx.post(f"{base}/v1/datasets", json={"name": DATASET}, headers=ADMIN, timeout=TIMEOUT)
    assert made.status_code == 200, made.text
    dataset_id = made.json()["id"]
    dup = httpx.post(f"{base}/v1/datasets", json={"name": DATASET}, headers=ADMIN, timeout=TIMEOUT)
    assert dup.status_code == 409 and dup.json()["code"] == "dataset_name_duplicate"

    created = httpx.post(
        f"{base}/v1/datasets/{dataset_id}/document/create-by-text",
        json={"name": "bikes", "text": f"# 自行车棚\n\n{FACT}"},
        headers=ADMIN,
        timeout=TIMEOUT,
    )
    assert created.status_code == 200, created.text
    document = created.json()["document"]
    assert document["name"] == "bikes.md" and document["indexing_status"] == "completed"
    batch = created.json()["batch"]
    status = httpx.get(
        f"{base}/v1/datasets/{dataset_id}/documents/{batch}/indexing-status",
        headers=ADMIN,
        timeout=TIMEOUT,
    )
    assert status.status_code == 200 and status.json()["data"][0]["id"] == document["id"]
    _every_worker_answers(served, "二十二点")

    updated = httpx.post(
        f"{base}/v1/datasets/{dataset_id}/documents/{document['id']}/update-by-text",
        json={"text": f"# 自行车棚\n\n{NEW_FACT}"},
        headers=ADMIN,
        timeout=TIMEOUT,
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["document"]["id"] == document["id"]
    _every_worker_answers(served, "二十三点")

    deleted = httpx.delete(
        f"{base}/v1/datasets/{dataset_id}/documents/{document['id']}",
        headers=ADMIN,
        timeout=TIMEOUT,
    )
    assert deleted.status_code == 204, deleted.text
    _every_worker_answers(served, None, absent="自行车棚")

    docs = tmp_path / "upload"
    docs.mkdir()
    (docs / "ebikes.md").write_text(f"# 电动车\n\n{INGESTED}", encoding="utf-8")
    gcite = Path(sys.executable).parent / "gcite"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    command = [str(gcite), "ingest", str(docs), "--dataset", DATASET, "--url", base]
    ingest = subprocess.run(
        [*command, "--key", "admin-secret"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        check=False,
    )
    assert ingest.returncode == 0, ingest.stderr
    assert "新增 1" in ingest.stdout
    names = httpx.get(
        f"{base}/v1/datasets/{dataset_id}/documents", headers=ADMIN, timeout=TIMEOUT
    ).json()["data"]
    assert [d["name"] for d in names] == ["ebikes.md"]
    _every_worker_answers(served, "充电棚", question=INGESTED_QUESTION)


def test_the_knowledge_api_works_through_the_public_port_of_two_workers(tmp_path: Path) -> None:
    data = _data_dir(tmp_path)
    with ServeWorkers(data, 2, tmp_path / "serve.log") as served:
        [knowledge] = children(served.proc.pid if served.proc else 0, "--knowledge-fd")
        log = served.log_path.read_text(encoding="utf-8", errors="replace")
        assert f"知识库进程 {knowledge}: http://127.0.0.1:" in log  # its port is printed
        _manage_through_the_public_port(served, tmp_path)
    assert (data / "catalog.json").is_file()  # the knowledge process wrote the data dir


def test_with_knowledge_url_the_workers_manage_the_other_gcite(tmp_path: Path) -> None:
    # the other gcite: a plain `gcite serve` with a retrieval key and an admin key
    other = tmp_path / "other"
    (other / "docs").mkdir(parents=True)
    (other / "docs" / "welcome.md").write_text("# 欢迎\n\n欢迎来到园区。", encoding="utf-8")
    assert ingest_paths(
        [other / "docs"], settings=Settings.from_keys(data_dir=other / "data"), dataset="欢迎"
    ).ok
    (other / "data" / "gcite.toml").write_text(
        '[[retrieval_keys]]\nkey = "kb-key"\nroles = []\npublic_only = true\n\n'
        '[[admin_keys]]\nkey = "kb-admin"\n',
        encoding="utf-8",
    )
    port = free_port()
    gcite = Path(sys.executable).parent / "gcite"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    log = (tmp_path / "other.log").open("wb")
    proc = subprocess.Popen(
        [str(gcite), "serve", "--port", str(port), "--data-dir", str(other / "data")],
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        other_base = f"http://127.0.0.1:{port}"
        data = _data_dir(tmp_path / "workers")
        knowledge = {
            "GCITE_KNOWLEDGE_URL": other_base,
            "GCITE_KNOWLEDGE_KEY": "kb-key",
            "GCITE_KNOWLEDGE_ADMIN_KEY": "kb-admin",
        }
        with ServeWorkers(data, 2, tmp_path / "serve.log", env=knowledge) as served:
            assert served.proc is not None
            assert children(served.proc.pid, "--knowledge-fd") == []  # no knowledge process
            _manage_through_the_public_port(served, tmp_path)
        there = httpx.get(
            f"{other_base}/v1/datasets",
            headers={"Authorization": "Bearer kb-admin"},
            timeout=TIMEOUT,
        ).json()["data"]
        assert DATASET in {d["name"] for d in there}  # written in the other gcite
        kept = {p.name for p in data.iterdir()}  # the config and the conversations only:
        assert not kept & {"catalog.json", "uploads", "qdrant"}, kept  # no knowledge base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_a_dead_knowledge_process_stops_the_service_and_it_restarts_on_the_port(
    tmp_path: Path,
) -> None:
    data = _data_dir(tmp_path)
    port = free_port()
    with ServeWorkers(data, 2, tmp_path / "first.log", port=port) as served:
        assert served.proc is not None
        [knowledge] = children(served.proc.pid, "--knowledge-fd")
        workers = set(served.worker_pids)
        os.kill(knowledge, signal.SIGKILL)
        code = served.proc.wait(timeout=TIMEOUT)  # a hang guard: it stops on its own
        assert code == 1
        log = served.log_path.read_text(encoding="utf-8", errors="replace")
        assert f"知识库进程 {knowledge} 意外退出" in log
        for pid in workers:  # the workers were stopped and reaped
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    with ServeWorkers(data, 2, tmp_path / "second.log", port=port) as again:
        ready = httpx.get(f"{again.base}/ready", timeout=TIMEOUT)
        assert ready.json()["checks"]["store"] is True, ready.text
        listed = httpx.get(f"{again.base}/v1/datasets", headers=ADMIN, timeout=TIMEOUT)
        assert listed.status_code == 200, listed.text


def test_children_stop_when_the_supervisor_is_killed_and_the_port_is_free_again(
    tmp_path: Path,
) -> None:
    data = _data_dir(tmp_path)
    port = free_port()
    with ServeWorkers(data, 2, tmp_path / "first.log", port=port) as served:
        assert served.proc is not None
        set_ = [*served.worker_pids, *children(served.proc.pid, "--knowledge-fd")]
        served.proc.kill()  # no chance to stop its children
        served.proc.wait(timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT  # a hang guard: they notice on their own
        while any(_alive(pid) for pid in set_):
            assert time.monotonic() < deadline, "children outlived the supervisor"
            time.sleep(0.2)
    with ServeWorkers(data, 2, tmp_path / "second.log", port=port) as again:
        assert httpx.get(f"{again.base}/health", timeout=TIMEOUT).status_code == 200


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
