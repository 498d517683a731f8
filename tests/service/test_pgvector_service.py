"""The running service on the pgvector knowledge store (``store = "pgvector"``): a document
created through the Knowledge API is found by the External Knowledge API (``/retrieval``),
with its roles applied, on a real PostgreSQL with pgvector (``pgvector_url``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.testing.indexing import indexed
from support.pg import fresh_database

ADMIN = {"Authorization": "Bearer admin-secret"}
DATASET = "物业手册"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, pgvector_url: str) -> Iterator[LiveServer]:
    base: Path = tmp_path_factory.mktemp("pgvector-service")
    settings = Settings.from_keys(
        data_dir=base / "data",
        embed_backend="use",
        store="pgvector",
        knowledge_database_url=fresh_database(pgvector_url, "svc"),
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        retrieval_keys=[
            ApiKey("kb-guard", ("安保主管",)),
            ApiKey("kb-public", (), name="public"),
        ],
        admin_keys=[ApiKey("admin-secret", name="ops")],
    )
    with run_service(settings) as server:
        yield server


def _retrieve(live: LiveServer, key: str, query: str) -> list[str]:
    body = {
        "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
        "query": query,
        "knowledge_id": DATASET,
    }
    response = httpx.post(
        live.base_url + "/retrieval",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return [r["content"] for r in response.json()["records"]]


def _indexed(client: httpx.Client, document: str) -> None:
    """Wait until an accepted document's batch completed (a hang guard bounds it)."""
    item = indexed(client, f"{document}/indexing-status")
    assert item["indexing_status"] == "completed", item


def test_documents_created_through_the_api_are_retrieved_with_roles(live: LiveServer) -> None:
    with httpx.Client(base_url=live.base_url, timeout=120, headers=ADMIN) as client:
        made = client.post("/v1/datasets", json={"name": DATASET})
        assert made.status_code == 200, made.text
        dataset_id = made.json()["id"]
        for name, text, roles in (
            ("访客", "# 访客登记\n\n访客进入大厦须在一层大堂登记并出示身份证件。", None),
            ("钥匙", "# 钥匙管理\n\n监控中心的备用钥匙存放在三号保险柜。", ["安保主管"]),
        ):
            payload: dict[str, object] = {"name": name, "text": text}
            if roles is not None:
                payload["doc_metadata"] = {"access_roles": roles}
            created = client.post(
                f"/v1/datasets/{dataset_id}/document/create-by-text", json=payload
            )
            assert created.status_code == 200, created.text
            _indexed(client, f"/v1/datasets/{dataset_id}/documents/{created.json()['batch']}")
        listed = client.get(f"/v1/datasets/{dataset_id}/documents").json()
        assert sorted(d["name"] for d in listed["data"]) == ["访客.md", "钥匙.md"]
    guard = _retrieve(live, "kb-guard", "备用钥匙放在哪里")
    assert guard and "三号保险柜" in guard[0]
    public = _retrieve(live, "kb-public", "备用钥匙放在哪里")
    assert all("三号保险柜" not in text for text in public)
    assert any("一层大堂" in text for text in public)


def test_a_datasets_own_fields_are_stored_in_postgresql(tmp_path: Path, pgvector_url: str) -> None:
    """Description, creation time and declared metadata fields survive a restart."""
    url = fresh_database(pgvector_url, "info")
    settings = Settings.from_keys(
        data_dir=tmp_path / "data",
        embed_backend="use",
        store="pgvector",
        knowledge_database_url=url,
        database_url=f"sqlite:///{tmp_path / 'chat.sqlite3'}",
        admin_keys=[ApiKey("admin-secret", name="ops")],
    )
    with (
        run_service(settings) as server,
        httpx.Client(base_url=server.base_url, timeout=120, headers=ADMIN) as client,
    ):
        made = client.post("/v1/datasets", json={"name": "说明库", "description": "物业资料"})
        assert made.status_code == 200, made.text
        field = client.post(f"/v1/datasets/{made.json()['id']}/metadata", json={"name": "负责人"})
        assert field.status_code == 201, field.text
    with (
        run_service(settings) as server,
        httpx.Client(base_url=server.base_url, timeout=120, headers=ADMIN) as client,
    ):
        again = client.get(f"/v1/datasets/{made.json()['id']}").json()
        assert again["description"] == "物业资料"
        assert again["created_at"] == made.json()["created_at"] > 0
        fields = client.get(f"/v1/datasets/{made.json()['id']}/metadata").json()["doc_metadata"]
        assert [f["name"] for f in fields] == ["负责人"]
