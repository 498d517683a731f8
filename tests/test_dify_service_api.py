"""Dify Service API bodies (gcite.dify.service_api): shapes from Dify's OpenAPI spec."""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest

from gcite.config import ApiKey
from gcite.dify.service_api import (
    WEB_DATASET_ID,
    info_body,
    message_usage_fields,
    parameters_body,
    parse_sort_by,
    resource_item,
    site_body,
)

KEY = ApiKey(
    "k", app_name="物业助手", opening_statement="您好", suggested_questions=("问一", "问二")
)


def web_resource(**extra: Any) -> dict[str, Any]:
    return {
        "position": 2, "dataset_id": None, "dataset_name": "知乎", "document_id": None,
        "document_name": "巡检", "data_source_type": "web", "segment_id": None,
        "retriever_from": "workflow", "score": 0.5, "hit_count": None, "word_count": 4,
        "segment_position": None, "index_node_hash": None, "content": "网页正文",
        "page": None, "doc_metadata": {"url": "https://zhihu.com/q/1"}, "title": "巡检",
        "files": None, **extra,
    }  # fmt: skip


def test_parameters_carry_the_keys_app_settings_and_features_off() -> None:
    body = parameters_body(KEY)
    assert body["opening_statement"] == "您好"
    assert body["suggested_questions"] == ["问一", "问二"]
    assert body["user_input_form"] == []
    assert body["retriever_resource"] == {"enabled": True}
    assert body["file_upload"]["enabled"] is False
    assert body["file_upload"]["image"]["enabled"] is False
    assert all(isinstance(v, int) for v in body["system_parameters"].values())
    assert parameters_body(None)["opening_statement"] == ""
    body["suggested_questions"].append("x")  # a copy, not the key's
    assert parameters_body(KEY)["suggested_questions"] == ["问一", "问二"]


def test_info_and_site_name_the_app() -> None:
    assert info_body(KEY)["name"] == site_body(KEY)["title"] == "物业助手"
    assert info_body(None)["name"] == "gcite"
    assert info_body(KEY)["mode"] == "advanced-chat"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, ("updated_at", True)),
        ("", ("updated_at", True)),
        ("created_at", ("created_at", False)),
        ("-created_at", ("created_at", True)),
        ("updated_at", ("updated_at", False)),
    ],
)
def test_sort_by(raw: str | None, expected: tuple[str, bool]) -> None:
    assert parse_sort_by(raw) == expected


@pytest.mark.parametrize("raw", ["name", "created", "+created_at", "-"])
def test_bad_sort_by_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="sort_by"):
        parse_sort_by(raw)


def test_web_resource_gets_spec_typed_ids() -> None:
    item = resource_item(web_resource(), message_id="m1", created_at=1796000000)
    for name in ("id", "dataset_id", "document_id", "segment_id"):
        assert isinstance(item[name], str) and uuid.UUID(item[name]), name
    assert item["dataset_id"] == WEB_DATASET_ID
    assert (item["hit_count"], item["segment_position"], item["position"]) == (0, 1, 2)
    assert len(item["index_node_hash"]) == 64
    assert (item["message_id"], item["created_at"], item["summary"]) == ("m1", 1796000000, None)
    again = resource_item(web_resource(), message_id="m1", created_at=1796000000)
    assert again == item  # stable: the same message lists the same ids every time
    other = resource_item(web_resource(), message_id="m2", created_at=1796000000)
    assert other["id"] != item["id"] and other["document_id"] == item["document_id"]
    moved = web_resource(doc_metadata={"url": "https://zhihu.com/q/2"})
    assert resource_item(moved, message_id="m1", created_at=0)["document_id"] != item["document_id"]


def test_knowledge_base_resource_keeps_its_ids() -> None:
    kb = web_resource(
        data_source_type="upload_file", dataset_id="d", document_id="doc", segment_id="s",
        segment_position=3, hit_count=2, index_node_hash="h",
    )  # fmt: skip
    item = resource_item(kb, message_id="m", created_at=5)
    assert (item["dataset_id"], item["document_id"], item["segment_id"]) == ("d", "doc", "s")
    assert (item["segment_position"], item["hit_count"], item["index_node_hash"]) == (3, 2, "h")


def test_bad_numbers_in_a_stored_resource_become_defaults() -> None:
    item = resource_item(
        web_resource(score=math.nan, word_count=True, position="x"), message_id="m", created_at=1
    )
    assert item["position"] == 1 and item["word_count"] == 4
    assert item["score"] == 0.0


def test_message_usage_fields() -> None:
    metadata = {"usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                          "latency": 1.25, "total_price": "0.01", "currency": "CNY"}}  # fmt: skip
    assert message_usage_fields(metadata) == {
        "message_tokens": 10, "answer_tokens": 3, "total_tokens": 13,
        "provider_response_latency": 1.25, "total_price": "0.01", "currency": "CNY",
    }  # fmt: skip
    assert message_usage_fields({}) == {
        "message_tokens": 0, "answer_tokens": 0, "total_tokens": 0,
        "provider_response_latency": 0.0, "total_price": "0", "currency": "USD",
    }  # fmt: skip
