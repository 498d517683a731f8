"""The External Knowledge API adapter passes the one store contract against a real service.

A gcite service (``create_app``, uvicorn on a free 127.0.0.1 port) owns the embedded store
holding :func:`gcite.testing.corpus.write_mixed`; :class:`gcite.knowledge.remote.RemoteStore`
reaches it through ``POST /retrieval`` with one key holding every role and narrows each
request to the caller's roles.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gcite.config import ApiKey, Settings
from gcite.errors import FilterError, StoreError
from gcite.knowledge import ingest_paths
from gcite.knowledge.remote import RemoteStore
from gcite.service.app import create_app
from gcite.testing import free_port, live_service
from gcite.testing.corpus import MANIFEST, write_mixed
from gcite.testing.indexing import indexed
from gcite.testing.store_contract import DATASET, KnowledgeStoreContract

PREFIX = "/dify"
INTERNAL = "internal-every-role"
ALL_ROLES = ("运维工程师", "安保主管")


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("remote-contract")
    settings = Settings.from_keys(data_dir=base / "data", embed_backend="use")
    write_mixed(base / "docs")
    manifest = base / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    report = ingest_paths([base / "docs"], settings=settings, dataset=DATASET, manifest=manifest)
    assert report.added == 5
    settings = settings.with_keys(
        retrieval_prefix=PREFIX,
        retrieval_keys=[ApiKey(key=INTERNAL, roles=ALL_ROLES)],
        admin_keys=[ApiKey(key=INTERNAL)],
    )
    with live_service(create_app(settings)) as base_url:
        yield f"{base_url}{PREFIX}"


class TestRemoteStore(KnowledgeStoreContract):
    @pytest.fixture
    def store(self, endpoint: str) -> Iterator[Any]:
        with RemoteStore(endpoint, INTERNAL) as store:
            yield store

    @pytest.fixture
    def reopen(self, endpoint: str) -> Callable[[], Any]:
        return lambda: RemoteStore(endpoint, INTERNAL)


def test_a_wrong_key_is_a_store_error(endpoint: str) -> None:
    with RemoteStore(endpoint, "not-a-key") as store, pytest.raises(StoreError):
        store.search("停车", dataset=DATASET, roles=[])


def test_an_unreachable_endpoint_is_a_store_error() -> None:
    with (
        RemoteStore(f"http://127.0.0.1:{free_port()}", INTERNAL) as store,
        pytest.raises(StoreError),
    ):
        store.search("停车", dataset=DATASET, roles=[])


def test_a_role_condition_in_the_callers_condition_cannot_widen(endpoint: str) -> None:
    """The caller's own access_roles condition is ANDed with its roles: never wider."""
    with RemoteStore(endpoint, INTERNAL) as store:
        cond = {"name": "access_roles", "comparison_operator": "in", "value": ["运维工程师"]}
        try:
            items = store.search("电梯 维保", dataset=DATASET, roles=[], condition=cond, top_k=50)
        except FilterError:
            return  # refused outright: also closed
        titles = {i["metadata"]["doc_metadata"].get("document_title") for i in items}
        assert "电梯维保规程" not in titles


def test_a_service_without_a_store_answers_through_the_knowledge_service(
    endpoint: str, tmp_path: Path
) -> None:
    """A chat-side service with ``knowledge_url`` set and no local store: its own
    ``/retrieval`` keys keep their (smaller) role sets, the knowledge service's key does not
    leak through."""
    settings = Settings.from_keys(
        data_dir=tmp_path / "no-store",
        knowledge_url=endpoint,
        knowledge_key=INTERNAL,
        retrieval_prefix=PREFIX,
        retrieval_keys=[ApiKey(key="ops", roles=("运维工程师",)), ApiKey(key="none", roles=())],
    )
    with live_service(create_app(settings)) as base_url:
        url = f"{base_url}{PREFIX}/retrieval"
        body = {
            "knowledge_id": DATASET,
            "query": "电梯 巡查 停车 水箱",
            "retrieval_setting": {"top_k": 50, "score_threshold": 0.0},
        }
        found = {}
        for key in ("ops", "none"):
            r = httpx.post(url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
            assert r.status_code == 200, r.text
            found[key] = {rec["title"] for rec in r.json()["records"]}
        assert "电梯维保规程" in found["ops"]
        assert "园区消防巡查制度" not in found["ops"]
        assert not found["none"] & {"电梯维保规程", "园区消防巡查制度"}
        assert "停车场管理办法" in found["none"]


def _indexed(url: str, headers: dict[str, str]) -> None:
    """Wait until a batch completed (a hang guard bounds it)."""
    with httpx.Client(headers=headers, timeout=60) as client:
        item = indexed(client, url)
    assert item["indexing_status"] == "completed", item


def test_a_role_change_is_seen_by_every_worker_at_its_next_request(endpoint: str) -> None:
    """Two workers (two RemoteStores); a document re-ingested through the management API
    with tightened roles is hidden from both at their next search."""
    origin = endpoint.removesuffix(PREFIX)
    admin = {"Authorization": f"Bearer {INTERNAL}"}
    base = f"{origin}/v1/datasets/{DATASET}"
    text = "# 金库管理\n\n金库钥匙由值班主管保管，每日交接登记。"
    created = httpx.post(
        f"{base}/document/create-by-text",
        json={"name": "金库管理", "text": text},
        headers=admin,
        timeout=60,
    )
    assert created.status_code == 200, created.text
    doc_id = created.json()["document"]["id"]
    _indexed(f"{base}/documents/{created.json()['batch']}/indexing-status", admin)
    workers = [RemoteStore(endpoint, INTERNAL), RemoteStore(endpoint, INTERNAL)]

    def seen(store: RemoteStore, roles: list[str]) -> bool:
        items = store.search("金库钥匙 交接", dataset=DATASET, roles=roles, top_k=20)
        return any("金库" in i["content"] for i in items)

    try:
        assert all(seen(w, []) for w in workers)
        updated = httpx.post(
            f"{base}/documents/{doc_id}/update-by-text",
            json={"name": "金库管理", "text": text, "doc_metadata": {"access_roles": ["安保主管"]}},
            headers=admin,
            timeout=60,
        )
        assert updated.status_code == 200, updated.text
        # indexing runs after the answer (as in Dify): the old version answers until then
        _indexed(f"{base}/documents/{updated.json()['batch']}/indexing-status", admin)
        assert not any(seen(w, []) for w in workers)
        assert not any(seen(w, ["运维工程师"]) for w in workers)
        assert all(seen(w, ["安保主管"]) for w in workers)
    finally:
        for w in workers:
            w.close()
        httpx.delete(f"{base}/documents/{doc_id}", headers=admin, timeout=60)
