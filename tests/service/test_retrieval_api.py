"""The External Knowledge API (``POST /retrieval``) against the real service.

The gcite service (``create_app``) runs under uvicorn on 127.0.0.1 with the law corpus ingested
(``law_store``); every request is shaped exactly as Dify sends it
(``ExternalDatasetService``: ``data=json.dumps(params)`` in the key order
``retrieval_setting, query, knowledge_id[, metadata_condition]``,
``Content-Type: application/json``, ``Authorization: Bearer <key>``; the
registration probe has the header only). Contract: dify-ecosystem.md §1;
role rule: platform design document §2.1.1.

Visibility is checked against ``laws.meta.json`` (the ground truth): a record
may only come from a document whose ``access_roles`` is absent, null or empty,
or intersects the caller's effective roles.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gcite.config import ApiKey, Settings
from gcite.service.app import create_app
from gcite.service.retrieval import MAX_BODY_BYTES, warm_up
from gcite.testing import live_service

pytestmark = pytest.mark.corpus

PREFIX = "/dify"
KEYS = {
    "kb-ops": ("物业经理", "运维工程师"),
    "kb-guard": ("安保主管",),
    "kb-legal": ("法务", "人事"),
    "kb-public": (),
}


@pytest.fixture(scope="module")
def meta(corpus_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((corpus_dir / "laws.meta.json").read_text("utf-8"))
    return data


@pytest.fixture(scope="module")
def dataset(law_store: Any) -> str:
    return str(law_store.dataset)


@pytest.fixture(scope="module")
def roles_by_title(meta: dict[str, Any]) -> dict[str, set[str]]:
    """document_title -> access_roles (absent / null / [] all give the empty set)."""
    return {
        doc["document_title"]: set(doc.get("access_roles") or [])
        for doc in meta["documents"].values()
    }


def build_app(settings: Settings) -> FastAPI:
    """The gcite service app, with the External Knowledge API under ``retrieval_prefix``."""
    return create_app(settings)


@pytest.fixture(scope="module")
def base_url(law_store: Any) -> Iterator[str]:
    settings = law_store.settings.with_keys(
        retrieval_prefix=PREFIX,
        retrieval_keys=[ApiKey(key=k, roles=r) for k, r in KEYS.items()],
    )
    with live_service(build_app(settings)) as base:
        yield f"{base}{PREFIX}"


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as c:
        yield c


def dify_body(
    query: str,
    knowledge_id: str,
    *,
    top_k: int = 5,
    score_threshold: float = 0.0,
    metadata_condition: dict[str, Any] | None = None,
) -> str:
    """The body exactly as Dify serialises it (key order, json.dumps defaults)."""
    params: dict[str, Any] = {
        "retrieval_setting": {"top_k": top_k, "score_threshold": score_threshold},
        "query": query,
        "knowledge_id": knowledge_id,
    }
    if metadata_condition is not None:
        params["metadata_condition"] = metadata_condition
    return json.dumps(params)


def dify_headers(key: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}


def retrieve(client: httpx.Client, key: str, body: str) -> httpx.Response:
    return client.post("/retrieval", content=body, headers=dify_headers(key))


def records_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    payload = response.json()
    assert set(payload) == {"records"}
    records: list[dict[str, Any]] = payload["records"]
    return records


def roles_cond(op: str, value: Any = None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": "access_roles", "comparison_operator": op}
    if value is not None or extra.get("explicit_null"):
        item["value"] = value
    return {"logical_operator": extra.get("logical", "and"), "conditions": [item]}


def assert_visible(
    records: list[dict[str, Any]], roles: set[str], roles_by_title: dict[str, set[str]]
) -> None:
    for record in records:
        title = record["metadata"]["document_title"]
        assert title in roles_by_title, title
        doc_roles = roles_by_title[title]
        assert not doc_roles or doc_roles & roles, (title, doc_roles, roles)


def titles(records: list[dict[str, Any]]) -> set[str]:
    return {r["metadata"]["document_title"] for r in records}


# --- registration probe -------------------------------------------------------------


def test_probe_without_body_answers_200(base_url: str) -> None:
    # Exactly Dify's check_endpoint_and_api_key: httpx.post(endpoint, headers={Authorization})
    response = httpx.post(f"{base_url}/retrieval", headers={"Authorization": "Bearer kb-ops"})
    assert response.status_code == 200
    assert response.json() == {"records": []}


def test_probe_with_json_content_type_and_empty_body_answers_200(client: httpx.Client) -> None:
    response = client.post("/retrieval", content=b"", headers=dify_headers("kb-public"))
    assert response.status_code == 200


def test_probe_with_wrong_key_fails_registration(base_url: str) -> None:
    response = httpx.post(f"{base_url}/retrieval", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 403
    assert response.json()["error_code"] == 1002


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/json"},
        {"Content-Type": "application/json", "Authorization": ""},
        {"Content-Type": "application/json", "Authorization": "kb-ops"},
        {"Content-Type": "application/json", "Authorization": "Basic kb-ops"},
        {"Content-Type": "application/json", "Authorization": "Bearer"},
        {"Content-Type": "application/json", "Authorization": "Bearer kb-ops extra"},
    ],
    ids=["missing", "empty", "no-scheme", "basic", "no-key", "two-tokens"],
)
def test_missing_or_malformed_authorization_is_1001(
    client: httpx.Client, dataset: str, headers: dict[str, str]
) -> None:
    response = client.post("/retrieval", content=dify_body("消防", dataset), headers=headers)
    assert response.status_code == 403
    body = response.json()
    assert body["error_code"] == 1001
    assert "Authorization" in body["error_msg"]


def test_wrong_key_is_1002(client: httpx.Client, dataset: str) -> None:
    response = retrieve(client, "kb-opsx", dify_body("消防", dataset))
    assert response.status_code == 403
    assert response.json()["error_code"] == 1002


def test_bearer_scheme_is_case_insensitive(client: httpx.Client, dataset: str) -> None:
    response = client.post(
        "/retrieval",
        content=dify_body("消防", dataset),
        headers={"Content-Type": "application/json", "Authorization": "bearer kb-public"},
    )
    assert response.status_code == 200


def test_unknown_knowledge_id_is_2001(client: httpx.Client) -> None:
    response = retrieve(client, "kb-ops", dify_body("消防", "no-such-dataset"))
    assert response.status_code == 404
    assert response.json()["error_code"] == 2001
    assert "no-such-dataset" in response.json()["error_msg"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            '{"retrieval_setting": {"top_k": 3, "score_threshold": 0.0}, "knowledge_id": "K"}',
            "query",
        ),
        ('{"retrieval_setting": {"top_k": 3}, "query": null, "knowledge_id": "K"}', "query"),
        ('{"retrieval_setting": {"top_k": 3}, "query": 12, "knowledge_id": "K"}', "query"),
        ('{"retrieval_setting": {"top_k": 3}, "query": "  ", "knowledge_id": "K"}', "query"),
        ('{"retrieval_setting": {"top_k": 3}, "query": "消防"}', "knowledge_id"),
        ('{"retrieval_setting": {"top_k": "3"}, "query": "消防", "knowledge_id": "K"}', "top_k"),
        ('{"retrieval_setting": {"top_k": 0}, "query": "消防", "knowledge_id": "K"}', "top_k"),
        ('{"retrieval_setting": {"top_k": 101}, "query": "消防", "knowledge_id": "K"}', "top_k"),
        ('{"retrieval_setting": {"top_k": 2.5}, "query": "消防", "knowledge_id": "K"}', "top_k"),
        ('{"retrieval_setting": {"top_k": true}, "query": "消防", "knowledge_id": "K"}', "top_k"),
        (
            '{"retrieval_setting": {"top_k": 3, "score_threshold": 1.5}, "query": "消防", '
            '"knowledge_id": "K"}',
            "score_threshold",
        ),
        (
            '{"retrieval_setting": {"top_k": 3, "score_threshold": "0.5"}, "query": "消防", '
            '"knowledge_id": "K"}',
            "score_threshold",
        ),
        ('{"retrieval_setting": [3], "query": "消防", "knowledge_id": "K"}', "retrieval_setting"),
        ("[1, 2]", "JSON 对象"),
        ('"text"', "JSON 对象"),
        ("{not json", "JSON"),
        (b"\xff\xfe{}", "JSON"),
    ],
    ids=[
        "no-query",
        "null-query",
        "number-query",
        "blank-query",
        "no-knowledge-id",
        "string-top-k",
        "zero-top-k",
        "huge-top-k",
        "fraction-top-k",
        "bool-top-k",
        "threshold-above-1",
        "string-threshold",
        "setting-not-object",
        "array-body",
        "string-body",
        "broken-json",
        "not-utf8",
    ],
)
def test_bad_bodies_are_400_3001(
    client: httpx.Client, dataset: str, body: str | bytes, fragment: str
) -> None:
    raw = body.replace('"K"', json.dumps(dataset)) if isinstance(body, str) else body
    response = client.post("/retrieval", content=raw, headers=dify_headers("kb-ops"))
    assert response.status_code == 400, response.text
    payload = response.json()
    assert payload["error_code"] == 3001
    assert fragment in payload["error_msg"]


def test_overlong_query_is_400(client: httpx.Client, dataset: str) -> None:
    response = retrieve(client, "kb-ops", dify_body("消" * 10_000, dataset))
    assert response.status_code == 400
    assert "query 过长" in response.json()["error_msg"]


def test_oversized_body_is_413(client: httpx.Client, dataset: str) -> None:
    padding = "x" * (MAX_BODY_BYTES + 10)
    body = json.dumps({"retrieval_setting": {"top_k": 3}, "query": "消防", "pad": padding})
    response = retrieve(client, "kb-ops", body)
    assert response.status_code == 413
    assert response.json()["error_code"] == 3003


@pytest.mark.parametrize(
    "condition",
    [
        {"logical_operator": "and", "conditions": {"name": "x"}},
        {"logical_operator": "xor", "conditions": []},
        {"logical_operator": "and", "conditions": [{"name": "document_title"}]},
        {"logical_operator": "and", "conditions": [{"comparison_operator": "is", "value": "x"}]},
        {
            "logical_operator": "and",
            "conditions": [{"name": "document_title", "comparison_operator": "is", "value": {}}],
        },
        "access_roles in 法务",
    ],
    ids=["conditions-not-list", "bad-logical", "no-operator", "no-name", "object-value", "string"],
)
def test_malformed_metadata_condition_is_400_3002(
    client: httpx.Client, dataset: str, condition: Any
) -> None:
    body = json.dumps(
        {
            "retrieval_setting": {"top_k": 3, "score_threshold": 0.0},
            "query": "消防",
            "knowledge_id": dataset,
            "metadata_condition": condition,
        }
    )
    response = retrieve(client, "kb-ops", body)
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == 3002
    assert "metadata_condition" in response.json()["error_msg"]


@pytest.mark.parametrize("op", ["like", "<>", "between", "IN"])
def test_unknown_operator_is_400(client: httpx.Client, dataset: str, op: str) -> None:
    condition = {
        "logical_operator": "and",
        "conditions": [{"name": "document_title", "comparison_operator": op, "value": "消防"}],
    }
    response = retrieve(client, "kb-ops", dify_body("消防", dataset, metadata_condition=condition))
    assert response.status_code == 400
    assert response.json()["error_code"] == 3002
    assert "未知" in response.json()["error_msg"]


def test_null_metadata_condition_is_no_filter(client: httpx.Client, dataset: str) -> None:
    # Dify before the #21070 fix sent "metadata_condition": null.
    body = json.dumps(
        {
            "retrieval_setting": {"top_k": 3, "score_threshold": 0.0},
            "query": "消防安全责任",
            "knowledge_id": dataset,
            "metadata_condition": None,
        }
    )
    assert records_of(retrieve(client, "kb-public", body))


def test_json_body_without_content_type_is_accepted(client: httpx.Client, dataset: str) -> None:
    response = client.post(
        "/retrieval",
        content=dify_body("消防安全责任", dataset, top_k=2),
        headers={"Authorization": "Bearer kb-public"},
    )
    assert 0 < len(records_of(response)) <= 2


def test_get_is_not_allowed(client: httpx.Client) -> None:
    response = client.get("/retrieval", headers=dify_headers("kb-ops"))
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error_code"] == 3004


def test_every_retrieval_request_gets_one_access_line_with_the_route_template(
    client: httpx.Client, dataset: str, caplog: pytest.LogCaptureFixture
) -> None:
    """POST /retrieval (taken straight to its endpoint) and the other methods (routed) are
    logged alike: the router's route template (``/retrieval``, as before the fast path),
    the status, the request id echoed."""
    caplog.set_level(logging.INFO, logger="gcite.access")
    ok = client.post(
        "/retrieval",
        content=dify_body("消防安全责任", dataset, top_k=2),
        headers={**dify_headers("kb-ops"), "X-Request-Id": "kb-fast-1"},
    )
    bad = client.post("/retrieval", content=b"[1]", headers=dify_headers("kb-ops"))
    wrong = client.put("/retrieval", headers={**dify_headers("kb-ops"), "X-Request-Id": "kb-put"})
    assert (ok.status_code, bad.status_code, wrong.status_code) == (200, 400, 405)
    assert ok.headers["x-request-id"] == "kb-fast-1" and ok.headers["content-type"] == (
        "application/json"
    )
    assert int(ok.headers["content-length"]) == len(ok.content)
    deadline = time.monotonic() + 120  # a hang guard: a line follows its response
    while time.monotonic() < deadline:
        lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gcite.access"]
        if len(lines) >= 3:
            break
        time.sleep(0.05)
    assert [(x["route"], x["status"], x["method"]) for x in lines[-3:]] == [
        ("/retrieval", 200, "POST"),
        ("/retrieval", 400, "POST"),
        ("/retrieval", 405, "PUT"),
    ]
    assert lines[-3]["request_id"] == "kb-fast-1" and lines[-1]["request_id"] == "kb-put"


# --- response shape, top_k and threshold ----------------------------------------------


def test_record_shape(client: httpx.Client, dataset: str, meta: dict[str, Any]) -> None:
    records = records_of(retrieve(client, "kb-ops", dify_body("物业服务企业的义务", dataset)))
    assert records
    known = {doc["document_title"] for doc in meta["documents"].values()}
    for record in records:
        assert set(record) == {"content", "score", "title", "metadata"}
        assert isinstance(record["content"], str) and record["content"]
        assert isinstance(record["score"], float) and 0.0 <= record["score"] <= 1.0
        assert isinstance(record["title"], str) and record["title"]
        md = record["metadata"]
        assert isinstance(md, dict)
        for key in ("document_id", "document_title", "source_file_url", "segment_position"):
            assert key in md, key
        assert isinstance(md["document_id"], str) and md["document_id"]
        assert md["document_title"] in known
        assert record["title"] == md["document_title"]
        assert not {"score", "title", "dataset_id", "dataset_name"} & set(md)
    scores = [r["score"] for r in records]
    assert scores == sorted(scores, reverse=True)


def test_record_carries_the_documents_own_fields(
    client: httpx.Client, dataset: str, meta: dict[str, Any]
) -> None:
    condition = {
        "logical_operator": "and",
        "conditions": [
            {"name": "document_title", "comparison_operator": "is", "value": "北京市消防条例"}
        ],
    }
    body = dify_body("消火栓维修费用", dataset, metadata_condition=condition)
    records = records_of(retrieve(client, "kb-guard", body))
    assert records
    expected = meta["documents"]["北京市消防条例.md"]
    for record in records:
        md = record["metadata"]
        assert md["source_file_url"] == expected["source_file_url"]
        assert "access_roles" not in md  # role names stay server side (expose_roles off)


@pytest.mark.parametrize("top_k", [1, 3, 7])
def test_top_k_is_respected(client: httpx.Client, dataset: str, top_k: int) -> None:
    records = records_of(retrieve(client, "kb-public", dify_body("消防安全", dataset, top_k=top_k)))
    assert len(records) == top_k


def test_score_threshold_is_respected(client: httpx.Client, dataset: str) -> None:
    query = "电梯的定期检验"
    unfiltered = records_of(retrieve(client, "kb-ops", dify_body(query, dataset, top_k=10)))
    assert len(unfiltered) == 10
    scores = [r["score"] for r in unfiltered]
    cut = (scores[0] + scores[-1]) / 2
    assert scores[0] > cut > scores[-1]
    filtered = records_of(
        retrieve(client, "kb-ops", dify_body(query, dataset, top_k=10, score_threshold=cut))
    )
    assert filtered
    assert all(r["score"] >= cut for r in filtered)
    assert len(filtered) == sum(1 for s in scores if s >= cut)


def test_threshold_zero_means_off(client: httpx.Client, dataset: str) -> None:
    body_zero = dify_body("电梯的定期检验", dataset, top_k=10, score_threshold=0.0)
    assert len(records_of(retrieve(client, "kb-ops", body_zero))) == 10


def test_threshold_above_every_score_returns_empty_records(
    client: httpx.Client, dataset: str
) -> None:
    query = "物业服务企业 公共秩序维护"
    scores = [
        r["score"]
        for r in records_of(retrieve(client, "kb-ops", dify_body(query, dataset, top_k=10)))
    ]
    assert scores
    above = min(1.0, scores[0] + 1e-4)  # above every score unless the best is exactly 1.0
    body = dify_body(query, dataset, top_k=10, score_threshold=above)
    filtered = records_of(retrieve(client, "kb-ops", body))
    assert len(filtered) == sum(1 for s in scores if s >= above)
    assert all(r["score"] >= above for r in filtered)


# --- roles ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(KEYS))
def test_key_roles_apply_without_condition(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]], key: str
) -> None:
    for query in ("物业管理区域内的公共设施", "消防设施维护", "个人信息处理", "特种设备检验"):
        records = records_of(retrieve(client, key, dify_body(query, dataset, top_k=10)))
        assert records
        assert_visible(records, set(KEYS[key]), roles_by_title)


def test_key_roles_open_their_documents(client: httpx.Client, dataset: str) -> None:
    body = dify_body("处理敏感个人信息应当取得个人的单独同意", dataset, top_k=10)
    assert "中华人民共和国个人信息保护法" in titles(records_of(retrieve(client, "kb-legal", body)))
    assert "中华人民共和国个人信息保护法" not in titles(
        records_of(retrieve(client, "kb-ops", body))
    )


@pytest.mark.parametrize(
    ("title", "note"),
    [
        ("物业管理条例", "access_roles absent"),
        ("上海市消防条例", "access_roles null"),
        ("中华人民共和国消防法（2021年修正）", "access_roles []"),
    ],
)
def test_documents_without_roles_are_visible_to_a_key_without_roles(
    client: httpx.Client, dataset: str, title: str, note: str
) -> None:
    condition = {
        "logical_operator": "and",
        "conditions": [{"name": "document_title", "comparison_operator": "is", "value": title}],
    }
    body = dify_body("的规定", dataset, top_k=3, metadata_condition=condition)
    records = records_of(retrieve(client, "kb-public", body))
    assert records, note
    assert titles(records) == {title}


@pytest.mark.parametrize("op", ["in", "contains", "is"])
def test_role_condition_narrows(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]], op: str
) -> None:
    # 上海市住宅物业管理规定 is for 物业经理 only: narrowing kb-ops to 运维工程师 hides it.
    query = "上海市住宅物业 业主大会 物业服务企业"
    wide = records_of(retrieve(client, "kb-ops", dify_body(query, dataset, top_k=10)))
    assert "上海市住宅物业管理规定" in titles(wide)
    narrowed = records_of(
        retrieve(
            client,
            "kb-ops",
            dify_body(query, dataset, top_k=10, metadata_condition=roles_cond(op, "运维工程师")),
        )
    )
    assert narrowed
    assert "上海市住宅物业管理规定" not in titles(narrowed)
    assert_visible(narrowed, {"运维工程师"}, roles_by_title)


def test_several_roles_as_list_and_as_string(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]]
) -> None:
    query = "个人信息 处理者 义务"
    for value in (["法务", "人事"], "法务,人事", "人事"):
        body = dify_body(query, dataset, top_k=10, metadata_condition=roles_cond("in", value))
        records = records_of(retrieve(client, "kb-legal", body))
        assert "中华人民共和国个人信息保护法" in titles(records), value
        assert_visible(records, {"法务", "人事"}, roles_by_title)


def test_condition_cannot_widen_the_key(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]]
) -> None:
    # kb-guard (安保主管) asks for 法务 too: 物权编 (法务 only) must stay hidden.
    query = "业主的建筑物区分所有权 共有部分"
    legal = records_of(retrieve(client, "kb-legal", dify_body(query, dataset, top_k=10)))
    assert "中华人民共和国民法典·物权编" in titles(legal)
    for value in (["安保主管", "法务"], "法务", "安保主管,法务,人事,物业经理,运维工程师"):
        body = dify_body(query, dataset, top_k=10, metadata_condition=roles_cond("in", value))
        records = records_of(retrieve(client, "kb-guard", body))
        assert "中华人民共和国民法典·物权编" not in titles(records)
        assert_visible(records, {"安保主管"}, roles_by_title)


def test_only_foreign_roles_leave_public_documents(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]]
) -> None:
    body = dify_body("消防设施", dataset, top_k=10, metadata_condition=roles_cond("in", "法务"))
    records = records_of(retrieve(client, "kb-guard", body))
    assert records
    assert_visible(records, set(), roles_by_title)


@pytest.mark.parametrize(
    "item",
    [
        {"name": "access_roles", "comparison_operator": "in"},
        {"name": "access_roles", "comparison_operator": "in", "value": None},
        {"name": "access_roles", "comparison_operator": "in", "value": ""},
        {"name": "access_roles", "comparison_operator": "in", "value": []},
        {"name": "access_roles", "comparison_operator": "empty"},
    ],
    ids=["value-absent", "value-null", "value-empty-string", "value-empty-list", "empty-op"],
)
def test_empty_role_values_mean_no_roles(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]], item: dict[str, Any]
) -> None:
    condition = {"logical_operator": "and", "conditions": [item]}
    query = "北京市消防条例 消火栓"
    body = dify_body(query, dataset, top_k=10, metadata_condition=condition)
    records = records_of(retrieve(client, "kb-guard", body))
    assert records
    assert "北京市消防条例" not in titles(records)
    assert_visible(records, set(), roles_by_title)


def test_or_of_role_conditions_is_a_union_within_the_key(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]]
) -> None:
    condition = {
        "logical_operator": "or",
        "conditions": [
            {"name": "access_roles", "comparison_operator": "contains", "value": "人事"},
            {"name": "access_roles", "comparison_operator": "contains", "value": "运维工程师"},
        ],
    }
    body = dify_body("个人信息 处理", dataset, top_k=10, metadata_condition=condition)
    records = records_of(retrieve(client, "kb-legal", body))
    assert "中华人民共和国个人信息保护法" in titles(records)
    assert_visible(records, {"人事"}, roles_by_title)


@pytest.mark.parametrize(
    "condition",
    [
        roles_cond("not in", "法务"),
        roles_cond("is not", "法务"),
        roles_cond("not contains", "法务"),
        roles_cond("not empty"),
        roles_cond("start with", "法"),
        {
            "logical_operator": "or",
            "conditions": [
                {"name": "access_roles", "comparison_operator": "in", "value": "安保主管"},
                {"name": "document_title", "comparison_operator": "contains", "value": "物权"},
            ],
        },
        {
            "logical_operator": "and",
            "conditions": [
                {
                    "logical_operator": "or",
                    "conditions": [
                        {"name": "access_roles", "comparison_operator": "in", "value": "法务"}
                    ],
                }
            ],
        },
    ],
    ids=["not-in", "is-not", "not-contains", "not-empty", "start-with", "mixed-or", "nested"],
)
def test_role_conditions_that_could_widen_are_refused(
    client: httpx.Client, dataset: str, condition: dict[str, Any]
) -> None:
    body = dify_body("物权", dataset, metadata_condition=condition)
    response = retrieve(client, "kb-guard", body)
    assert response.status_code == 400
    assert response.json()["error_code"] == 3002
    assert "access_roles" in response.json()["error_msg"]


def test_unassigned_template_variable_is_literal_role(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]]
) -> None:
    # Dify issue #18365: a chatflow variable can arrive unresolved.
    condition = roles_cond("in", "{{#conversation.user_roles#}}")
    body = dify_body("消防设施", dataset, top_k=10, metadata_condition=condition)
    records = records_of(retrieve(client, "kb-guard", body))
    assert_visible(records, set(), roles_by_title)


# --- other metadata conditions: every operator family, through to the knowledge base ----


def leaf(name: str, op: str, value: Any = None) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, "comparison_operator": op}
    if value is not None:
        item["value"] = value
    return item


def search_titles(
    client: httpx.Client,
    dataset: str,
    query: str,
    condition: dict[str, Any],
    key: str = "kb-ops",
    top_k: int = 10,
) -> list[dict[str, Any]]:
    body = dify_body(query, dataset, top_k=top_k, metadata_condition=condition)
    return records_of(retrieve(client, key, body))


@pytest.mark.parametrize(
    ("item", "holds"),
    [
        (leaf("document_title", "is", "上海市消防条例"), lambda t, u: t == "上海市消防条例"),
        (leaf("document_title", "is not", "上海市消防条例"), lambda t, u: t != "上海市消防条例"),
        (leaf("document_title", "contains", "消防"), lambda t, u: "消防" in t),
        (leaf("document_title", "not contains", "消防"), lambda t, u: "消防" not in t),
        (leaf("document_title", "start with", "中华人民共和国"), lambda t, u: t.startswith("中华")),
        (leaf("document_title", "end with", "条例"), lambda t, u: t.endswith("条例")),
        (
            leaf("document_title", "in", ["上海市消防条例", "物业管理条例"]),
            lambda t, u: t in {"上海市消防条例", "物业管理条例"},
        ),
        (
            leaf("document_title", "in", "上海市消防条例,物业管理条例"),
            lambda t, u: t in {"上海市消防条例", "物业管理条例"},
        ),
        (
            leaf("document_title", "not in", "上海市消防条例,物业管理条例"),
            lambda t, u: t not in {"上海市消防条例", "物业管理条例"},
        ),
        (leaf("source_file_url", "empty"), lambda t, u: u == ""),
        (leaf("source_file_url", "not empty"), lambda t, u: u != ""),
        (leaf("source_file_url", "start with", "https://"), lambda t, u: u.startswith("https://")),
    ],
    ids=lambda v: (
        v["comparison_operator"] + ":" + str(v.get("value", "")) if isinstance(v, dict) else ""
    ),
)
def test_string_operators_filter_as_the_knowledge_base(
    client: httpx.Client,
    dataset: str,
    meta: dict[str, Any],
    roles_by_title: dict[str, set[str]],
    item: dict[str, Any],
    holds: Any,
) -> None:
    urls = {d["document_title"]: d.get("source_file_url", "") for d in meta["documents"].values()}
    condition = {"logical_operator": "and", "conditions": [item]}
    records = search_titles(client, dataset, "消防设施 物业管理 安全", condition, key="kb-public")
    assert records
    for record in records:
        title = record["metadata"]["document_title"]
        assert holds(title, urls[title]), title
        assert record["metadata"]["source_file_url"] == urls[title]
    assert_visible(records, set(), roles_by_title)


def test_or_of_other_conditions_is_a_union(client: httpx.Client, dataset: str) -> None:
    condition = {
        "logical_operator": "or",
        "conditions": [
            leaf("document_title", "is", "上海市消防条例"),
            leaf("document_title", "is", "物业管理条例"),
        ],
    }
    # top_k 100 reaches past every chunk of the two documents
    records = search_titles(client, dataset, "消防 物业", condition, key="kb-public", top_k=100)
    assert titles(records) == {"上海市消防条例", "物业管理条例"}


def test_nested_groups_and_not(client: httpx.Client, dataset: str) -> None:
    condition = {
        "logical_operator": "and",
        "conditions": [
            {
                "logical_operator": "or",
                "conditions": [
                    leaf("document_title", "contains", "消防"),
                    leaf("document_title", "contains", "物业"),
                ],
            },
            {"not": leaf("document_title", "start with", "中华人民共和国")},
        ],
    }
    records = search_titles(client, dataset, "消防设施 物业服务", condition)
    assert records
    for title in titles(records):
        assert ("消防" in title or "物业" in title) and not title.startswith("中华人民共和国")


def test_role_narrowing_combines_with_other_conditions(
    client: httpx.Client, dataset: str, roles_by_title: dict[str, set[str]]
) -> None:
    condition = {
        "logical_operator": "and",
        "conditions": [
            leaf("access_roles", "in", "运维工程师"),
            leaf("document_title", "contains", "物业"),
        ],
    }
    records = search_titles(client, dataset, "物业服务企业 业主大会", condition)
    found = titles(records)
    assert found
    assert all("物业" in t for t in found)
    assert "上海市住宅物业管理规定" not in found
    assert_visible(records, {"运维工程师"}, roles_by_title)


@pytest.mark.parametrize(
    ("item", "expect_records"),
    [
        (leaf("year", ">", 2000), False),
        (leaf("year", "<", 2000), False),
        (leaf("year", "≥", 2000), False),
        (leaf("year", "≤", 2000), False),
        (leaf("year", "=", 2000), False),
        (leaf("year", "≠", 2000), True),
        (leaf("year", ">=", 2000), False),
        (leaf("effective_date", "before", "2030-01-01"), False),
        (leaf("effective_date", "after", "2000-01-01"), False),
    ],
    ids=["gt", "lt", "ge", "le", "eq", "ne", "ascii-ge", "before", "after"],
)
def test_number_and_time_operators_reach_the_knowledge_base(
    client: httpx.Client, dataset: str, item: dict[str, Any], expect_records: bool
) -> None:
    # The law corpus has no number or time metadata: a comparison matches no
    # document, its negation (≠) every document.
    condition = {"logical_operator": "and", "conditions": [item]}
    records = search_titles(client, dataset, "消防设施", condition, key="kb-public")
    assert bool(records) is expect_records


@pytest.mark.parametrize(
    "item",
    [
        leaf("year", ">", "abc"),
        leaf("effective_date", "after", "soon"),
        leaf("document_title", "contains"),
        leaf("document_title", "is", ""),
        leaf("bad name!", "is", "x"),
    ],
    ids=["number-not-numeric", "time-not-a-date", "missing-value", "empty-string", "bad-name"],
)
def test_conditions_the_knowledge_base_rejects_are_400(
    client: httpx.Client, dataset: str, item: dict[str, Any]
) -> None:
    condition = {"logical_operator": "and", "conditions": [item]}
    body = dify_body("消防", dataset, metadata_condition=condition)
    response = retrieve(client, "kb-ops", body)
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == 3002


# --- failures of the service side: timeout, store unavailable, broken streams ---------


def serve_with(law_store: Any, **changes: Any) -> AbstractContextManager[str]:
    settings = law_store.settings.with_keys(
        retrieval_prefix=PREFIX,
        retrieval_keys=[ApiKey(key="kb-ops", roles=KEYS["kb-ops"])],
        **changes,
    )
    return live_service(build_app(settings))


def test_search_over_the_timeout_is_504(law_store: Any) -> None:
    # kb_timeout_s bounds the search (capped at 4.5 s); no real search ends in 1 µs.
    with serve_with(law_store, kb_timeout_s=0.000001) as base:
        url = f"{base}{PREFIX}/retrieval"
        body = dify_body("消防设施的维护保养", law_store.dataset)
        response = httpx.post(url, content=body, headers=dify_headers("kb-ops"), timeout=30)
        assert response.status_code == 504
        assert response.json()["error_code"] == 5002
        assert "超时" in response.json()["error_msg"]
        probe = httpx.post(url, headers={"Authorization": "Bearer kb-ops"}, timeout=30)
        assert probe.status_code == 200


def test_unavailable_store_is_503(law_store: Any, tmp_path: Path) -> None:
    missing = tmp_path / "no-knowledge-base"
    with serve_with(law_store, data_dir=missing) as base:
        url = f"{base}{PREFIX}/retrieval"
        body = dify_body("消防", law_store.dataset)
        response = httpx.post(url, content=body, headers=dify_headers("kb-ops"), timeout=30)
        assert response.status_code == 503
        assert response.json()["error_code"] == 5001
        assert str(missing.name) in response.json()["error_msg"]
        # the registration probe does not need the store
        probe = httpx.post(url, headers={"Authorization": "Bearer kb-ops"}, timeout=30)
        assert probe.status_code == 200


def test_broken_request_stream_does_not_harm_the_service(
    base_url: str, client: httpx.Client, dataset: str
) -> None:
    url = httpx.URL(base_url)
    head = (
        f"POST {url.path}/retrieval HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nAuthorization: Bearer kb-ops\r\n"
        "Content-Length: 500\r\n\r\n"
    ).encode()
    for _ in range(3):
        with socket.create_connection((url.host, url.port), timeout=10) as sock:
            sock.sendall(head + dify_body("消防", dataset).encode()[:40])
    assert records_of(retrieve(client, "kb-ops", dify_body("消防设施", dataset)))


def test_demo_mode_accepts_any_key_without_roles(
    law_store: Any, roles_by_title: dict[str, set[str]]
) -> None:
    with serve_with(law_store, allow_any_key=True) as base:
        url = f"{base}{PREFIX}/retrieval"
        body = dify_body("消防设施 物业", law_store.dataset, top_k=10)
        response = httpx.post(url, content=body, headers=dify_headers("anything"), timeout=30)
        records = records_of(response)
        assert records
        assert_visible(records, set(), roles_by_title)
        # a configured key keeps its roles; a malformed header is still refused
        legal = httpx.post(url, content=body, headers=dify_headers("kb-ops"), timeout=30)
        assert records_of(legal)
        bad = httpx.post(url, content=body, headers={"Authorization": "Token x"}, timeout=30)
        assert bad.json()["error_code"] == 1001


def test_warm_up_reports_whether_the_store_answers(law_store: Any, tmp_path: Path) -> None:
    from gcite.knowledge import open_store

    assert warm_up(lambda: law_store.store) is True
    missing = dataclasses.replace(law_store.settings, data_dir=tmp_path / "missing")
    assert warm_up(lambda: open_store(missing)) is False


# --- no input gives a 5xx ---------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
CONDITION_ITEMS = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["access_roles", "document_title", "year", "", " Access_Roles"]),
        "comparison_operator": st.sampled_from(["in", "is", "not in", "≥", "before", "empty", "?"]),
    },
    optional={"value": JSON_VALUES},
)
BODIES = st.fixed_dictionaries(
    {},
    optional={
        "retrieval_setting": st.fixed_dictionaries(
            {}, optional={"top_k": JSON_VALUES, "score_threshold": JSON_VALUES}
        )
        | JSON_VALUES,
        "query": st.text(max_size=20) | JSON_VALUES,
        "knowledge_id": st.just("楼宇法规库") | JSON_VALUES,
        "metadata_condition": st.fixed_dictionaries(
            {},
            optional={
                "logical_operator": st.sampled_from(["and", "or", "xor"]) | JSON_VALUES,
                "conditions": st.lists(CONDITION_ITEMS | JSON_VALUES, max_size=3) | JSON_VALUES,
            },
        )
        | JSON_VALUES,
    },
)


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=BODIES)
def test_arbitrary_bodies_never_answer_5xx(client: httpx.Client, body: dict[str, Any]) -> None:
    response = client.post("/retrieval", content=json.dumps(body), headers=dify_headers("kb-ops"))
    assert response.status_code in {200, 400, 404}, response.text
    payload = response.json()
    if response.status_code == 200:
        assert isinstance(payload["records"], list)
    else:
        assert isinstance(payload["error_code"], int) and payload["error_msg"]
