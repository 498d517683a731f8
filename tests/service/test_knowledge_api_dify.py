"""The Knowledge API field by field and endpoint by endpoint as Dify 1.12/1.13 has it
(``api/fields/dataset_fields.py``, ``document_fields.py``, ``segment_fields.py``,
``api/controllers/service_api/dataset/*.py``), against the real service on loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.knowledge import ingest_paths
from gcite.testing.indexing import indexed

DATASET = "物业手册"
ADMIN = {"Authorization": "Bearer admin-secret"}
KB = {"Authorization": "Bearer kb-guard"}
GUARDED = """---
document_title: 监控中心值守规程
access_roles: ["安保主管"]
楼栋: 3
---

# 监控中心值守规程

监控中心备用钥匙存放在三号保险柜内，紫藤花园的夜间巡逻每两小时一次。
"""

#: Dify's ``DatasetDetailResponse`` fields (the Service API excludes ``permission_keys``).
DATASET_FIELDS = {
    "id", "name", "description", "provider", "permission", "data_source_type",
    "indexing_technique", "app_count", "document_count", "word_count", "created_by",
    "author_name", "created_at", "updated_by", "updated_at", "embedding_model",
    "embedding_model_provider", "embedding_available", "retrieval_model_dict",
    "summary_index_setting", "tags", "doc_form", "external_knowledge_info",
    "external_retrieval_model", "doc_metadata", "built_in_field_enabled", "pipeline_id",
    "runtime_mode", "chunk_structure", "icon_info", "is_published", "total_documents",
    "total_available_documents", "enable_api", "is_multimodal",
}  # fmt: skip
#: Dify's ``DocumentResponse`` fields.
DOCUMENT_FIELDS = {
    "id", "position", "data_source_type", "data_source_info", "data_source_detail_dict",
    "dataset_process_rule_id", "name", "created_from", "created_by", "created_at", "tokens",
    "indexing_status", "error", "enabled", "disabled_at", "disabled_by", "archived",
    "display_status", "word_count", "hit_count", "doc_form", "doc_metadata",
    "summary_index_status", "need_summary",
}  # fmt: skip
#: Dify's ``SegmentResponse`` fields.
SEGMENT_FIELDS = {
    "id", "position", "document_id", "content", "sign_content", "answer", "word_count",
    "tokens", "keywords", "index_node_id", "index_node_hash", "hit_count", "enabled",
    "disabled_at", "disabled_by", "status", "created_by", "created_at", "updated_at",
    "updated_by", "indexing_at", "completed_at", "error", "stopped_at", "child_chunks",
    "attachments", "summary",
}  # fmt: skip
RETRIEVAL_MODEL_FIELDS = {
    "search_method", "reranking_enable", "reranking_mode", "reranking_model", "weights",
    "top_k", "score_threshold_enabled", "score_threshold",
}  # fmt: skip


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("kapi")
    docs = base / "docs"
    docs.mkdir()
    (docs / "visitor.md").write_text(
        "# 访客登记\n\n访客进入大厦须在一层大堂登记并出示身份证件。", encoding="utf-8"
    )
    (docs / "guard.md").write_text(GUARDED, encoding="utf-8")
    data = base / "data"
    assert ingest_paths([docs], settings=Settings.from_keys(data_dir=data), dataset=DATASET).ok
    settings = Settings.from_keys(
        data_dir=data,
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        dataset=DATASET,
        retrieval_keys=[ApiKey("kb-guard", ("安保主管",)), ApiKey("kb-visitor", ())],
        admin_keys=[ApiKey("admin-secret", name="ops")],
        score_threshold=0.0,
    )
    with run_service(settings) as server:
        yield server


@pytest.fixture(scope="module")
def api(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.base_url + "/v1", headers=ADMIN, timeout=120) as client:
        yield client


def _dataset(api: httpx.Client, name: str = DATASET) -> dict[str, Any]:
    return next(d for d in api.get("/datasets").json()["data"] if d["name"] == name)


def _indexed(api: httpx.Client, dataset_id: str, answer: httpx.Response) -> dict[str, Any]:
    """The document (as listed) of a create/update ``answer`` once its batch is indexed
    (as Dify's clients poll ``indexing-status``)."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    status = indexed(api, f"/datasets/{dataset_id}/documents/{body['batch']}/indexing-status")
    assert status["indexing_status"] == "completed", status
    listed = api.get(f"/datasets/{dataset_id}/documents", params={"limit": 100})
    return next(d for d in listed.json()["data"] if d["id"] == body["document"]["id"])


def _docs(api: httpx.Client, dataset_id: str) -> dict[str, dict[str, Any]]:
    page = api.get(f"/datasets/{dataset_id}/documents")
    assert page.status_code == 200, page.text
    return {d["name"]: d for d in page.json()["data"]}


def test_dataset_objects_have_every_dify_field_with_real_values(api: httpx.Client) -> None:
    listed = _dataset(api)
    assert set(listed) >= DATASET_FIELDS
    assert {m["name"] for m in listed["doc_metadata"]} >= {"access_roles", "楼栋"}
    one = api.get(f"/datasets/{listed['id']}").json()
    assert set(one) >= DATASET_FIELDS
    assert one["created_by"] and one["author_name"] and one["updated_by"]
    assert 0 < one["created_at"] <= one["updated_at"] <= time.time() + 1
    assert one["document_count"] == one["total_documents"] == 2
    assert one["total_available_documents"] == 2
    assert one["word_count"] > 40  # characters of both documents
    assert set(one["retrieval_model_dict"]) >= RETRIEVAL_MODEL_FIELDS
    assert one["retrieval_model_dict"]["search_method"] == "hybrid_search"
    assert one["retrieval_model_dict"]["top_k"] >= 1
    names = {m["name"]: m for m in one["doc_metadata"]}
    assert {"access_roles", "document_title", "楼栋"} <= set(names)
    assert names["楼栋"]["type"] == "number" and set(names["楼栋"]) == {"id", "name", "type"}


def test_document_objects_have_every_dify_field_with_real_values(api: httpx.Client) -> None:
    dataset_id = _dataset(api)["id"]
    docs = _docs(api, dataset_id)
    assert set(docs) == {"visitor.md", "guard.md"}
    for doc in docs.values():
        assert set(doc) >= DOCUMENT_FIELDS
        assert doc["created_by"] and 0 < doc["created_at"] <= time.time() + 1  # CLI-ingested
        assert doc["word_count"] > 10 and doc["tokens"] > 3
        assert doc["indexing_status"] == "completed" and doc["display_status"] == "available"
    assert sorted(d["position"] for d in docs.values()) == [1, 2]
    guard = {m["name"]: m for m in docs["guard.md"]["doc_metadata"]}
    assert guard["access_roles"]["value"] == ["安保主管"]
    assert guard["楼栋"] == {
        "id": guard["楼栋"]["id"],
        "name": "楼栋",
        "type": "number",
        "value": 3,
    }
    one = api.get(f"/datasets/{dataset_id}/documents/{docs['guard.md']['id']}").json()
    assert one["doc_metadata"] == docs["guard.md"]["doc_metadata"]


def test_created_at_is_kept_and_position_grows_on_create_and_update(api: httpx.Client) -> None:
    made = api.post("/datasets", json={"name": "位置库", "description": "测试用"})
    assert made.status_code == 200, made.text
    dataset = made.json()
    assert dataset["description"] == "测试用" and set(dataset) >= DATASET_FIELDS
    url = f"/datasets/{dataset['id']}/document/create-by-text"
    first = _indexed(
        api, dataset["id"], api.post(url, json={"name": "a", "text": "# 甲\n\n第一份文件的内容。"})
    )
    second = _indexed(
        api, dataset["id"], api.post(url, json={"name": "b", "text": "# 乙\n\n第二份文件的内容。"})
    )
    assert (first["position"], second["position"]) == (1, 2)
    assert first["word_count"] > 0 and first["tokens"] > 0
    updated = _indexed(
        api,
        dataset["id"],
        api.post(
            f"/datasets/{dataset['id']}/documents/{first['id']}/update-by-text",
            json={"text": "# 甲\n\n第一份文件改过的内容，更长一些。"},
        ),
    )
    assert updated["created_at"] == first["created_at"]
    assert updated["position"] == 1
    assert updated["word_count"] > first["word_count"]
    assert api.delete(f"/datasets/{dataset['id']}").status_code == 204


def test_patch_keeps_a_description_and_refuses_a_rename(api: httpx.Client) -> None:
    dataset_id = _dataset(api)["id"]
    patched = api.patch(
        f"/datasets/{dataset_id}", json={"description": "物业资料", "name": DATASET}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["description"] == "物业资料"
    assert api.get(f"/datasets/{dataset_id}").json()["description"] == "物业资料"
    renamed = api.patch(f"/datasets/{dataset_id}", json={"name": "别的名字"})
    assert renamed.status_code == 400 and renamed.json()["code"] == "invalid_param"
    assert "重命名" in renamed.json()["message"]
    missing = api.patch("/datasets/no-such-dataset", json={"description": "x"})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


@pytest.mark.parametrize("path", ["retrieve", "hit-testing"])
def test_retrieve_answers_dify_records_without_a_role_filter(api: httpx.Client, path: str) -> None:
    dataset_id = _dataset(api)["id"]
    answer = api.post(
        f"/datasets/{dataset_id}/{path}",
        json={"query": "备用钥匙放在哪里", "retrieval_model": {"top_k": 1}},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["query"] == {"content": "备用钥匙放在哪里"}
    [record] = body["records"]
    assert {"segment", "child_chunks", "score", "tsne_position", "files", "summary"} <= set(record)
    assert set(record["segment"]) >= SEGMENT_FIELDS
    assert "三号保险柜" in record["segment"]["content"]  # a guarded document: admins see it
    assert record["segment"]["document"]["name"] == "guard.md"
    assert 0 < record["score"] <= 1
    for bad, status in [({"query": ""}, 400), ({"query": "x" * 251}, 400)]:
        refused = api.post(f"/datasets/{dataset_id}/{path}", json=bad)
        assert refused.status_code == status and refused.json()["code"] == "invalid_param"
    missing = api.post(f"/datasets/{'0' * 8}/{path}", json={"query": "钥匙"})
    assert missing.status_code == 404


def test_segments_are_listed_added_changed_and_removed_keeping_roles(
    api: httpx.Client, live: LiveServer
) -> None:
    dataset_id = _dataset(api)["id"]
    guard = _docs(api, dataset_id)["guard.md"]
    url = f"/datasets/{dataset_id}/documents/{guard['id']}/segments"
    listed = api.get(url).json()
    assert listed["doc_form"] == "text_model" and listed["total"] == guard["segment_count"]
    first = listed["data"][0]
    assert set(first) >= SEGMENT_FIELDS and first["position"] == 1
    assert api.get(f"{url}/{first['id']}").json()["data"]["id"] == first["id"]

    made = api.post(url, json={"segments": [{"content": "地下车库的消防通道禁止停车。"}]})
    assert made.status_code == 200, made.text
    [new] = made.json()["data"]
    assert new["position"] == listed["total"] + 1 and new["word_count"] > 0
    assert api.get(url).json()["total"] == listed["total"] + 1

    def found(key: dict[str, str], query: str) -> list[str]:
        body = {"knowledge_id": DATASET, "query": query, "retrieval_setting": {"top_k": 3}}
        answer = httpx.post(live.base_url + "/retrieval", json=body, headers=key, timeout=60)
        assert answer.status_code == 200, answer.text
        return [r["content"] for r in answer.json()["records"]]

    visitor = {"Authorization": "Bearer kb-visitor"}
    assert any("消防通道" in c for c in found(KB, "消防通道能停车吗"))
    assert not any("消防通道" in c for c in found(visitor, "消防通道能停车吗"))  # roles kept

    changed = api.post(
        f"{url}/{new['id']}", json={"segment": {"content": "消防通道全天禁止停放车辆。"}}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["content"] == "消防通道全天禁止停放车辆。"
    assert any("全天禁止" in c for c in found(KB, "消防通道能停车吗"))

    assert api.delete(f"{url}/{new['id']}").status_code == 204
    assert api.get(url).json()["total"] == listed["total"]
    assert not any("消防通道" in c for c in found(KB, "消防通道能停车吗"))
    assert any("三号保险柜" in c for c in found(KB, "备用钥匙放在哪里"))
    assert api.get(f"{url}/{new['id']}").status_code == 404
    empty = api.post(url, json={"segments": [{"content": " "}]})
    assert empty.status_code == 400

    chunks = api.get(f"{url}/{first['id']}/child_chunks").json()
    assert chunks == {"data": [], "total": 0, "total_pages": 0, "page": 1, "limit": 20}
    child = api.post(f"{url}/{first['id']}/child_chunks", json={"content": "x"})
    assert child.status_code == 400


def test_metadata_fields_and_document_metadata_keep_roles(
    api: httpx.Client, live: LiveServer
) -> None:
    dataset_id = _dataset(api)["id"]
    url = f"/datasets/{dataset_id}/metadata"
    before = api.get(url).json()
    assert before["built_in_field_enabled"] is False
    counts = {m["name"]: m["count"] for m in before["doc_metadata"]}
    assert counts["access_roles"] == 1 and counts["楼栋"] == 1

    made = api.post(url, json={"type": "string", "name": "负责人"})
    assert made.status_code == 201, made.text
    field = made.json()
    assert set(field) == {"id", "type", "name"} and field["name"] == "负责人"
    assert api.post(url, json={"type": "string", "name": "负责人"}).status_code == 400
    renamed = api.patch(f"{url}/{field['id']}", json={"name": "值班人"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "值班人"
    carried = next(m for m in before["doc_metadata"] if m["name"] == "access_roles")
    refused = api.delete(f"{url}/{carried['id']}")
    assert refused.status_code == 400  # documents carry it: their roles would go

    guard = _docs(api, dataset_id)["guard.md"]
    operation = {
        "document_id": guard["id"],
        "metadata_list": [{"id": renamed.json()["id"], "name": "值班人", "value": "张三"}],
    }
    done = api.post(
        f"/datasets/{dataset_id}/documents/metadata", json={"operation_data": [operation]}
    )
    assert done.status_code == 200 and done.json() == {"result": "success"}, done.text
    now = {m["name"]: m["value"] for m in _docs(api, dataset_id)["guard.md"]["doc_metadata"]}
    assert now["值班人"] == "张三" and now["access_roles"] == ["安保主管"]
    body = {"knowledge_id": DATASET, "query": "备用钥匙放在哪里", "retrieval_setting": {"top_k": 3}}
    visitor = httpx.post(
        live.base_url + "/retrieval",
        json=body,
        headers={"Authorization": "Bearer kb-visitor"},
        timeout=60,
    )
    assert not any("三号保险柜" in r["content"] for r in visitor.json()["records"])
    unknown = {"operation_data": [{"document_id": "nope", "metadata_list": []}]}
    assert api.post(f"/datasets/{dataset_id}/documents/metadata", json=unknown).status_code == 404
    assert api.post(f"{url}/built-in/disable").json() == {"result": "success"}
    assert {f["name"] for f in api.get(f"{url}/built-in").json()["fields"]} >= {"document_name"}


def test_status_actions_and_upload_file(api: httpx.Client) -> None:
    dataset_id = _dataset(api)["id"]
    doc = _docs(api, dataset_id)["visitor.md"]
    url = f"/datasets/{dataset_id}/documents/status"
    enabled = api.patch(f"{url}/enable", json={"document_ids": [doc["id"]]})
    assert enabled.status_code == 200 and enabled.json() == {"result": "success"}
    for action in ("disable", "archive", "frobnicate"):
        refused = api.patch(f"{url}/{action}", json={"document_ids": [doc["id"]]})
        assert refused.status_code == 400 and refused.json()["code"] == "invalid_action"
    unknown = api.patch(f"{url}/enable", json={"document_ids": ["nope"]})
    assert unknown.status_code == 404

    upload = api.get(f"/datasets/{dataset_id}/documents/{doc['id']}/upload-file").json()
    assert upload["id"] == doc["id"] and upload["name"] == "visitor.md"
    assert upload["extension"] == "md" and upload["size"] > 0 and upload["created_at"] > 0


def _error(answer: httpx.Response, status: int, code: str, message: str | None = None) -> None:
    """``answer`` is Dify's error body ``{"code", "message", "status"}``."""
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert (body["code"], body["status"]) == (code, status), body
    if message is not None:
        assert body["message"] == message


def test_tags_are_created_bound_listed_renamed_and_deleted(api: httpx.Client) -> None:
    dataset_id = _dataset(api)["id"]
    made = api.post("/datasets/tags", json={"name": "安防"})
    assert made.status_code == 200, made.text
    tag = made.json()
    assert set(tag) == {"id", "name", "type", "binding_count"}
    assert (tag["name"], tag["type"], tag["binding_count"]) == ("安防", "knowledge", "0")
    other = api.post("/datasets/tags", json={"name": "访客"}).json()
    listed = {t["id"]: t for t in api.get("/datasets/tags").json()}
    assert listed[tag["id"]] == tag and listed[other["id"]]["name"] == "访客"

    bound = api.post(
        "/datasets/tags/binding",
        json={"tag_ids": [tag["id"], other["id"]], "target_id": dataset_id},
    )
    assert bound.status_code == 204 and bound.content == b""
    on_dataset = api.get(f"/datasets/{dataset_id}/tags").json()
    assert on_dataset["total"] == 2
    assert {(t["id"], t["name"]) for t in on_dataset["data"]} == {
        (tag["id"], "安防"),
        (other["id"], "访客"),
    }
    assert all(set(t) == {"id", "name"} for t in on_dataset["data"])
    tags = api.get(f"/datasets/{dataset_id}").json()["tags"]
    assert {(t["name"], t["type"]) for t in tags} == {("安防", "knowledge"), ("访客", "knowledge")}
    assert set(tags[0]) == {"id", "name", "type"}
    assert _dataset(api)["tags"] == tags  # the list shows them too
    filtered = api.get("/datasets", params={"tag_ids": [other["id"], "x"]}).json()["data"]
    assert [d["id"] for d in filtered] == [dataset_id]
    assert api.get("/datasets", params={"tag_ids": "x"}).json()["data"] == []

    renamed = api.patch("/datasets/tags", json={"tag_id": tag["id"], "name": "安防巡逻"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json() == {**tag, "name": "安防巡逻", "binding_count": "1"}

    # Dify's legacy unbinding body: one tag_id
    unbound = api.post(
        "/datasets/tags/unbinding", json={"tag_id": other["id"], "target_id": dataset_id}
    )
    assert unbound.status_code == 204
    assert [t["name"] for t in api.get(f"/datasets/{dataset_id}/tags").json()["data"]] == [
        "安防巡逻"
    ]
    gone = api.request("DELETE", "/datasets/tags", json={"tag_id": tag["id"]})
    assert gone.status_code == 204
    assert api.get(f"/datasets/{dataset_id}").json()["tags"] == []
    assert {t["id"] for t in api.get("/datasets/tags").json()} == {other["id"]}
    api.request("DELETE", "/datasets/tags", json={"tag_id": other["id"]})
    assert api.get("/datasets/tags").json() == []


def test_tag_errors_are_difys(api: httpx.Client) -> None:
    dataset_id = _dataset(api)["id"]
    tag = api.post("/datasets/tags", json={"name": "重复"}).json()
    _error(
        api.post("/datasets/tags", json={"name": "重复"}),
        400,
        "invalid_param",
        "Tag name already exists",
    )
    for bad in ({}, {"name": ""}, {"name": "x" * 51}, {"name": 3}):
        _error(api.post("/datasets/tags", json=bad), 400, "invalid_param")
    assert api.post("/datasets/tags", json={"name": "x" * 50}).status_code == 200
    long = next(t for t in api.get("/datasets/tags").json() if t["name"] == "x" * 50)
    _error(
        api.patch("/datasets/tags", json={"tag_id": long["id"], "name": "重复"}),
        400,
        "invalid_param",
        "Tag name already exists",
    )
    missing = "00000000-0000-0000-0000-000000000000"
    _error(
        api.patch("/datasets/tags", json={"tag_id": missing, "name": "新"}),
        404,
        "not_found",
        "Tag not found",
    )
    _error(
        api.request("DELETE", "/datasets/tags", json={"tag_id": missing}),
        404,
        "not_found",
        "Tag not found",
    )
    binding = {"tag_ids": [], "target_id": dataset_id}
    _error(
        api.post("/datasets/tags/binding", json=binding),
        400,
        "invalid_param",
        "Tag IDs is required.",
    )
    _error(
        api.post("/datasets/tags/unbinding", json=binding),
        400,
        "invalid_param",
        "Tag IDs is required.",
    )
    binding = {"tag_ids": [tag["id"]], "target_id": missing}
    _error(api.post("/datasets/tags/binding", json=binding), 404, "not_found")
    binding = {"tag_ids": [tag["id"], missing], "target_id": dataset_id}
    _error(api.post("/datasets/tags/binding", json=binding), 404, "not_found", "Tag not found")
    assert api.get(f"/datasets/{dataset_id}/tags").json() == {"data": [], "total": 0}
    _error(api.get(f"/datasets/{missing}/tags"), 404, "not_found")
    _error(api.post("/datasets/tags", content=b"[1]"), 400, "invalid_param")
    chat_key = {"Authorization": "Bearer kb-guard"}
    assert api.post("/datasets/tags", json={"name": "密钥"}, headers=chat_key).status_code == 403
    for t in (tag, long):
        assert api.request("DELETE", "/datasets/tags", json={"tag_id": t["id"]}).status_code == 204


#: Dify's ``DocumentApi.get`` keys (``metadata=all``).
DETAIL_FIELDS = {
    "id", "position", "data_source_type", "data_source_info", "dataset_process_rule_id",
    "dataset_process_rule", "document_process_rule", "name", "created_from", "created_by",
    "created_at", "tokens", "indexing_status", "completed_at", "updated_at",
    "indexing_latency", "error", "enabled", "disabled_at", "disabled_by", "archived",
    "doc_type", "doc_metadata", "segment_count", "average_segment_length", "hit_count",
    "display_status", "doc_form", "doc_language", "summary_index_status", "need_summary",
}  # fmt: skip


def test_a_document_is_read_with_all_only_or_without_metadata(api: httpx.Client) -> None:
    dataset_id = _dataset(api)["id"]
    guard = _docs(api, dataset_id)["guard.md"]
    url = f"/datasets/{dataset_id}/documents/{guard['id']}"
    full = api.get(url).json()
    assert set(full) == DETAIL_FIELDS
    assert api.get(url, params={"metadata": "all"}).json() == full
    assert full["doc_metadata"] == guard["doc_metadata"]
    assert (full["name"], full["segment_count"], full["tokens"]) == (
        "guard.md",
        guard["segment_count"],
        guard["tokens"],
    )
    assert full["average_segment_length"] > 0
    only = api.get(url, params={"metadata": "only"}).json()
    assert only == {"id": guard["id"], "doc_type": None, "doc_metadata": guard["doc_metadata"]}
    without = api.get(url, params={"metadata": "without"}).json()
    assert without == {k: v for k, v in full.items() if k not in ("doc_type", "doc_metadata")}
    _error(
        api.get(url, params={"metadata": "some"}),
        400,
        "invalid_metadata",
        "Invalid metadata value: some",
    )
    _error(
        api.get(f"/datasets/{dataset_id}/documents/nope", params={"metadata": "some"}),
        404,
        "not_found",
    )


def test_external_knowledge_accepts_the_dataset_id(api: httpx.Client, live: LiveServer) -> None:
    dataset_id = _dataset(api)["id"]
    body = {
        "knowledge_id": dataset_id,
        "query": "访客在哪里登记",
        "retrieval_setting": {"top_k": 2},
    }
    answer = httpx.post(live.base_url + "/retrieval", json=body, headers=KB, timeout=60)
    assert answer.status_code == 200, answer.text
    assert any("一层大堂" in r["content"] for r in answer.json()["records"])
    body["knowledge_id"] = "00000000-0000-0000-0000-000000000000"
    missing = httpx.post(live.base_url + "/retrieval", json=body, headers=KB, timeout=60)
    assert missing.status_code == 404 and missing.json()["error_code"] == 2001
