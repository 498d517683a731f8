"""Document writes through the Knowledge API: accepted at once and indexed off the request
path (Dify's ``batch`` and indexing statuses), metadata and roles follow the document on
every write path, ``original_document_id`` replaces a document with exactly one version
searchable at every moment, and a ``gcite serve`` killed mid-write leaves one complete
version and no stray upload after its restart."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.knowledge.faults import FAULT_ENV
from gcite.testing import free_port
from gcite.testing.indexing import indexed, status_url

SAMPLE_WEB = Path(__file__).resolve().parents[2] / "src" / "gcite" / "sample_data" / "web"
DATASET = "巡更手册"
ADMIN = {"Authorization": "Bearer admin-secret"}
NO_ROLES = {"Authorization": "Bearer kb-none"}
LEGAL = {"Authorization": "Bearer kb-legal"}
QUERY = "夜间巡更规定每隔多久巡查一次"
ROLES = {"access_roles": ["法务"]}


def _text(version: str, paragraphs: int = 6) -> str:
    lines = [
        f"夜间巡更第{i}段：{version}规定每隔一段时间巡查{i}号楼一次。" for i in range(paragraphs)
    ]
    return "# 巡更\n\n" + "\n\n".join(lines)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("writes")
    settings = Settings.from_keys(
        data_dir=base / "data",
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        embed_backend="use",
        chunk_size=40,
        chunk_overlap=0,
        retrieval_keys=[ApiKey("kb-none", ()), ApiKey("kb-legal", ("法务",))],
        admin_keys=[ApiKey("admin-secret", name="ops")],
    )
    with run_service(settings) as server:
        with httpx.Client(base_url=server.base_url, headers=ADMIN, timeout=60) as http:
            assert http.post("/v1/datasets", json={"name": DATASET}).status_code == 200
        yield server


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.base_url, headers=ADMIN, timeout=60) as client:
        yield client


def _write(http: httpx.Client, path: str, **kwargs: Any) -> dict[str, Any]:
    """POST a create/update; the answer (Dify's shape) once its batch completed."""
    answer = http.post(f"/v1/datasets/{DATASET}{path}", **kwargs)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) >= {"document", "batch"}
    assert body["document"]["indexing_status"] in {"waiting", "completed"}
    done = indexed(http, status_url("", DATASET, body["batch"]))
    assert done["indexing_status"] == "completed", done
    return dict(body)


def _seen(http: httpx.Client, key: dict[str, str]) -> set[str]:
    """Which versions a /retrieval search with ``key`` shows."""
    query = {
        "knowledge_id": DATASET,
        "query": QUERY,
        "retrieval_setting": {"top_k": 20, "score_threshold": 0},
    }
    deadline = time.monotonic() + 300  # a hang guard
    # /retrieval answers 504 past its 4.5 s bound (Dify's read timeout), which the first
    # search of a process just started can take on a busy machine (the embedding model
    # loading): asked again, as Dify's user would, until the search answers
    while (answer := http.post("/retrieval", json=query, headers=key)).status_code == 504:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.5)
    assert answer.status_code == 200, answer.text
    text = " ".join(r["content"] for r in answer.json()["records"])
    return {v for v in ("旧版", "新版", "三版") if v in text}


def _create(http: httpx.Client, name: str) -> str:
    body = _write(
        http,
        "/document/create-by-text",
        json={"name": name, "text": _text("旧版"), "doc_metadata": ROLES},
    )
    assert _seen(http, NO_ROLES) == set() and _seen(http, LEGAL) == {"旧版"}
    return str(body["document"]["id"])


def _file(version: str) -> dict[str, Any]:
    return {"file": ("patrol.md", _text(version).encode(), "text/markdown")}


@pytest.mark.parametrize("path", ["update-by-text", "update-by-file", "same-name", "original"])
def test_a_write_without_metadata_keeps_the_roles(http: httpx.Client, path: str) -> None:
    doc = _create(http, "patrol")
    if path == "update-by-text":
        _write(http, f"/documents/{doc}/update-by-text", json={"text": _text("新版")})
    elif path == "update-by-file":
        _write(http, f"/documents/{doc}/update-by-file", files=_file("新版"), data={"data": "{}"})
    elif path == "same-name":
        _write(http, "/document/create-by-text", json={"name": "patrol", "text": _text("新版")})
    else:  # Dify's original_document_id, under another name
        fields = {"name": "patrol-2", "text": _text("新版"), "original_document_id": doc}
        body = _write(http, "/document/create-by-text", json=fields)
        assert body["document"]["id"] == doc
    assert _seen(http, NO_ROLES) == set()
    assert _seen(http, LEGAL) == {"新版"}
    assert http.delete(f"/v1/datasets/{DATASET}/documents/{doc}").status_code == 204


def test_an_update_that_changes_the_roles_says_so(http: httpx.Client) -> None:
    doc = _create(http, "patrol")
    body = _write(
        http,
        f"/documents/{doc}/update-by-text",
        json={"text": _text("新版"), "doc_metadata": {"access_roles": []}},
    )
    assert body["access_roles_changed"] == {"before": ["法务"], "after": []}
    assert _seen(http, NO_ROLES) == {"新版"}
    same = _write(http, f"/documents/{doc}/update-by-text", json={"text": _text("三版")})
    assert "access_roles_changed" not in same
    assert http.delete(f"/v1/datasets/{DATASET}/documents/{doc}").status_code == 204


def test_original_document_id_keeps_exactly_one_version_searchable(http: httpx.Client) -> None:
    doc = _create(http, "patrol")
    reads: list[set[str]] = []
    done = threading.Event()

    def reader() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=60) as other:
            while not done.is_set():
                reads.append(_seen(other, LEGAL))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        while len(reads) < 2:  # the reader runs before the replacement is sent
            time.sleep(0.01)
        fields = {"name": "patrol-new", "text": _text("新版", 30), "original_document_id": doc}
        _write(http, "/document/create-by-text", json=fields)
        seen_before = len(reads)
        while len(reads) < seen_before + 2:  # and after it completed
            time.sleep(0.01)
    finally:
        done.set()
        thread.join(timeout=120)
    assert all(len(r) == 1 for r in reads), [r for r in reads if len(r) != 1]
    assert reads[0] == {"旧版"} and reads[-1] == {"新版"}
    listed = http.get(f"/v1/datasets/{DATASET}/documents").json()["data"]
    assert [d["name"] for d in listed] == ["patrol-new.md"]
    assert http.delete(f"/v1/datasets/{DATASET}/documents/{doc}").status_code == 204


def test_a_file_that_cannot_be_converted_ends_in_error_and_nothing_shows(
    http: httpx.Client,
) -> None:
    answer = http.post(
        f"/v1/datasets/{DATASET}/document/create-by-file",
        files={
            "file": ("broken.docx", b"PK\x03\x04 not a docx at all", "application/octet-stream")
        },
        data={"data": "{}"},
    )
    assert answer.status_code == 200, answer.text
    failed = indexed(http, status_url("", DATASET, answer.json()["batch"]))
    assert failed["indexing_status"] == "error"
    assert "未能导入" in failed["error"] and failed["completed_at"] is None
    listed = http.get(f"/v1/datasets/{DATASET}/documents").json()["data"]
    assert "broken.docx" not in {d["name"] for d in listed}


# --------------------------------------------------------------------------- SIGKILL


def _serve(data: Path, port: int, fault: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    env.update({"GCITE_EMBED_BACKEND": "use", FAULT_ENV: fault})
    env.update({"GCITE_WEB_PROVIDER": "offline", "GCITE_WEB_DIR": str(SAMPLE_WEB)})
    gcite = Path(sys.executable).parent / "gcite"
    command = [str(gcite), "serve", "--port", str(port), "--data-dir", str(data)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _started(proc: subprocess.Popen[bytes], url: str) -> httpx.Client:
    deadline = time.monotonic() + 120  # a hang guard
    while True:
        try:
            httpx.get(url + "/health", timeout=10)
            return httpx.Client(base_url=url, headers=ADMIN, timeout=60)
        except httpx.TransportError:
            if proc.poll() is not None:
                output = proc.stderr.read() if proc.stderr else b""
                raise AssertionError(output.decode()) from None
            assert time.monotonic() < deadline, "gcite serve did not start"
            time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("change", "fault", "expected"),
    [
        ("create", "upload-written", set()),
        ("create", "version-staged", set()),
        ("update", "version-staged", {"旧版"}),
        ("update", "version-swapped", {"新版"}),
        ("delete", "document-unlisted", set()),
    ],
)
def test_a_killed_serve_leaves_one_version_and_no_stray_upload(
    tmp_path: Path, change: str, fault: str, expected: set[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "gcite.toml").write_text(
        '[[admin_keys]]\nkey = "admin-secret"\n\n'
        '[[retrieval_keys]]\nkey = "kb-legal"\nroles = ["法务"]\n',
        encoding="utf-8",
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    setup = _serve(data, port, "")
    with _started(setup, url) as http:
        assert http.post("/v1/datasets", json={"name": DATASET}).status_code == 200
        other = {"name": "other", "text": "# 其他\n\n电梯每十五日维保一次。"}
        _write(http, "/document/create-by-text", json=other)
        if change != "create":
            _write(http, "/document/create-by-text", json={"name": "patrol", "text": _text("旧版")})
    _stop(setup)
    proc = _serve(data, port, fault)
    with _started(proc, url) as http, contextlib.suppress(httpx.TransportError):
        # the process may die before it answers (the indexer runs beside the request)
        if change == "delete":
            http.delete(f"/v1/datasets/{DATASET}/documents/patrol.md")
        else:
            http.post(
                f"/v1/datasets/{DATASET}/document/create-by-text",
                json={"name": "patrol", "text": _text("新版")},
            )
    assert proc.wait(timeout=300) == -9  # killed itself at the checkpoint
    restarted = _serve(data, port, "")
    try:
        with _started(restarted, url) as http:
            assert _seen(http, LEGAL) == expected
            listed = http.get(f"/v1/datasets/{DATASET}/documents").json()["data"]
            names = sorted(d["name"] for d in listed)
            assert names == (["other.md", "patrol.md"] if expected else ["other.md"])
            uploads = [p for p in (data / "uploads").rglob("*") if p.is_file()]
            assert len(uploads) == 2 * len(names), uploads  # each file and its manifest
            [dataset] = http.get("/v1/datasets").json()["data"]
            assert dataset["segment_count"] == sum(d["segment_count"] for d in listed)
    finally:
        _stop(restarted)
