"""Knowledge-base result items -> External Knowledge API records (pure functions).

Contract: dify-ecosystem.md §1.3–1.4 — ``score`` 0–1, ``title`` always set,
``metadata`` always an object without the keys Dify overwrites.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gcite.config import ApiKey
from gcite.dify.external_knowledge import DIFY_OVERWRITTEN_KEYS, build_records, to_record
from gcite.knowledge.filters import Group
from gcite.service.retrieval import (
    RetrievalAPIError,
    authenticate,
    decode_body,
    parse_request,
)


def kr_item(score: Any = 0.5, **doc: Any) -> dict[str, Any]:
    """A Knowledge Retrieval result item in the 1.x shape the store returns."""
    return {
        "metadata": {
            "_source": "knowledge",
            "dataset_id": "ds-1",
            "dataset_name": "楼宇法规库",
            "document_id": "doc-1",
            "document_name": "消防法(2021-04-29).md",
            "segment_id": "seg-1",
            "score": score,
            "segment_position": 3,
            "doc_metadata": doc,
            "position": 1,
        },
        "title": "消防法(2021-04-29).md",
        "files": None,
        "content": "第一条 为了预防火灾……",
    }


def test_record_from_a_full_item() -> None:
    record = to_record(
        kr_item(
            0.82,
            document_title="中华人民共和国消防法",
            source_file_url="https://kb.example.com/a.pdf",
            access_roles=[],
            category="fire",
        )
    )
    assert record == {
        "content": "第一条 为了预防火灾……",
        "score": 0.82,
        "title": "中华人民共和国消防法",
        "metadata": {
            "document_title": "中华人民共和国消防法",
            "source_file_url": "https://kb.example.com/a.pdf",
            "access_roles": [],
            "category": "fire",
            "document_id": "doc-1",
            "document_name": "消防法(2021-04-29).md",
            "segment_position": 3,
            "segment_id": "seg-1",
        },
    }


def test_keys_dify_overwrites_are_dropped_even_from_document_fields() -> None:
    record = to_record(kr_item(score=0.4, score_x=1, title="x", dataset_id="y", dataset_name="z"))
    assert not DIFY_OVERWRITTEN_KEYS & set(record["metadata"])
    assert record["metadata"]["score_x"] == 1


def test_title_falls_back_to_document_name() -> None:
    record = to_record(kr_item(document_title="  "))
    assert record["title"] == "消防法(2021-04-29).md"
    assert record["metadata"]["document_title"] == "消防法(2021-04-29).md"
    assert record["metadata"]["source_file_url"] == ""


def test_malformed_items_still_give_a_valid_record() -> None:
    for item in ({}, {"metadata": None}, {"metadata": {"doc_metadata": "x"}}, {"content": 5}):
        record = to_record(item)
        assert isinstance(record["metadata"], dict)
        assert isinstance(record["title"], str) and record["title"]
        assert isinstance(record["content"], str)
        assert record["score"] == 0.0
        assert record["metadata"]["document_id"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (0.3, 0.3),
        (1.7, 1.0),
        (-2, 0.0),
        (math.nan, 0.0),
        (math.inf, 0.0),
        ("0.9", 0.0),
        (None, 0.0),
    ],
)
def test_score_is_clamped_to_0_1(raw: Any, expected: float) -> None:
    assert to_record(kr_item(raw))["score"] == expected


def test_build_records_sorts_thresholds_and_cuts() -> None:
    items = [kr_item(s) for s in (0.2, 0.9, 0.5, 0.7)]
    assert [r["score"] for r in build_records(items, top_k=3, score_threshold=0.0)] == [
        0.9,
        0.7,
        0.5,
    ]
    assert [r["score"] for r in build_records(items, top_k=10, score_threshold=0.5)] == [
        0.9,
        0.7,
        0.5,
    ]
    assert build_records([*items, "junk"], top_k=10, score_threshold=0.95) == []  # type: ignore[list-item]


KEYS = [ApiKey(key="kb-a", roles=("法务",)), ApiKey(key="kb-b", roles=())]


def test_authenticate() -> None:
    assert authenticate("Bearer kb-a", KEYS).roles == ("法务",)
    assert authenticate("  bearer   kb-b ", KEYS).key == "kb-b"
    assert authenticate("Bearer other", KEYS, allow_any_key=True).roles == ()
    for header, code in [(None, 1001), ("", 1001), ("kb-a", 1001), ("Bearer other", 1002)]:
        with pytest.raises(RetrievalAPIError) as info:
            authenticate(header, KEYS)
        assert (info.value.status, info.value.code) == (403, code)


def test_decode_body() -> None:
    assert decode_body(b"") is None
    assert decode_body(b" \r\n") is None
    assert decode_body(b'{"a": 1}') == {"a": 1}
    for raw in (b"[]", b"null", b"{", b"\xff"):
        with pytest.raises(RetrievalAPIError) as info:
            decode_body(raw)
        assert (info.value.status, info.value.code) == (400, 3001)


def test_parse_request_defaults_and_normalisation() -> None:
    parsed = parse_request({"query": "q", "knowledge_id": " kb "}, default_top_k=4)
    assert (parsed.knowledge_id, parsed.top_k, parsed.score_threshold) == ("kb", 4, 0.0)
    assert parsed.metadata_condition is None
    parsed = parse_request(
        {
            "retrieval_setting": {"top_k": 4.0, "score_threshold": None},
            "query": "q",
            "knowledge_id": "kb",
            "metadata_condition": {"conditions": []},
        }
    )
    assert (parsed.top_k, parsed.score_threshold) == (4, 0.0)
    assert parsed.metadata_condition == Group("and", ())  # parsed by the one grammar


def test_role_names_leave_only_for_a_key_that_exposes_them() -> None:
    items = [kr_item(0.9, access_roles=["安保主管"], document_title="值守规程"), kr_item(0.5)]
    hidden = build_records(items, top_k=5, score_threshold=0.0)
    assert all("access_roles" not in r["metadata"] for r in hidden)
    assert hidden[0]["metadata"]["document_title"] == "值守规程"
    shown = build_records(items, top_k=5, score_threshold=0.0, expose_roles=True)
    assert shown[0]["metadata"]["access_roles"] == ["安保主管"]
    assert to_record(items[0])["metadata"]["access_roles"] == ["安保主管"]  # the mapping keeps it


@pytest.mark.parametrize("setting", [{"top_k": None}, {"top_k": None, "score_threshold": None}])
def test_null_top_k_means_the_default(setting: dict[str, Any]) -> None:
    body = {"knowledge_id": "K", "query": "消防", "retrieval_setting": setting}
    assert parse_request(body, default_top_k=4).top_k == 4
