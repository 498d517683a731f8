"""Knowledge-base SDKs users already run, unchanged, against gcite's Knowledge API.

PyPI ``dify-dataset-sdk`` 0.6.3 (strict pydantic models) and ``dify-oapi2`` 1.1.2
(builder requests, pydantic responses) each run their dataset, document, segment,
metadata (where the SDK has it), retrieve and tag calls (create, rename, bind, list,
unbind, delete: each SDK leaves no tag behind) against the real service on
loopback (``tests/sdk/python/drive_dify_dataset_sdk.py``, ``drive_dify_oapi2.py``):
every step must succeed with no exception, and what the SDK read back is checked here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gcite.config import ApiKey, Settings
from gcite.service import create_app
from gcite.testing import live_service

ADMIN_KEY = "sdk-admin-key"
Steps = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def kb_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("sdk-kapi")
    settings = Settings.from_keys(
        data_dir=base / "data",
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        admin_keys=[ApiKey(ADMIN_KEY, name="sdk")],
        score_threshold=0.0,
    )
    with live_service(create_app(settings)) as base_url:
        yield base_url


Driver = Callable[..., Steps]


def _steps(driver: Driver, name: str, base_url: str) -> Steps:
    return driver(name, base_url, f"user-{name}", key=ADMIN_KEY)


def ok(steps: Steps, step: str) -> Any:
    assert step in steps, f"step {step} did not run"
    assert steps[step]["ok"], f"{step}: {steps[step]['error']}"
    return steps[step]["data"]


DATASET_SDK_STEPS = (
    "create_dataset", "list_datasets", "get_dataset", "update_dataset", "create_by_text",
    "create_by_file", "list_documents", "update_by_file", "get_document", "indexing_status",
    "update_by_text", "status_enable", "upload_file", "list_segments", "create_segment",
    "get_segment", "update_segment", "child_chunks", "delete_segment", "create_metadata",
    "rename_metadata", "list_metadata", "document_metadata", "metadata_after",
    "built_in_disable", "retrieve", "create_tag", "create_tag_2", "update_tag", "bind_tags",
    "dataset_tags", "dataset_with_tags", "list_tags", "unbind_tag", "dataset_tags_after",
    "delete_tag", "list_tags_after", "delete_last_tag", "delete_document", "delete_dataset",
)  # fmt: skip


def test_dify_dataset_sdk_runs_every_call(kb_service: str, sdk_driver: Driver) -> None:
    steps = _steps(sdk_driver, "dify-dataset-sdk", kb_service)
    for step in DATASET_SDK_STEPS:
        ok(steps, step)
    made = ok(steps, "create_dataset")
    assert made["description"] == "SDK" and made["created_by"] and made["created_at"] > 0
    assert ok(steps, "update_dataset")["description"] == "SDK 改"
    text = ok(steps, "create_by_text")
    assert text["batch"] and text["document"]["name"] == "bikes.md"
    # read once the batch is indexed; Dify's document detail has no word_count
    doc = ok(steps, "get_document")
    assert doc["tokens"] > 0 and doc["position"] == 1 and doc["name"] == "bikes.md"
    listed = ok(steps, "list_documents")
    assert sorted(d["position"] for d in listed["data"]) == [1, 2]
    [status] = ok(steps, "indexing_status")["data"]
    assert status["indexing_status"] == "completed"
    assert ok(steps, "create_segment")["data"][0]["content"] == "车棚旁边设有充电桩。"
    fields = {m["name"] for m in ok(steps, "metadata_after")["doc_metadata"]}
    assert "值班人" in fields
    records = ok(steps, "retrieve")["records"]
    assert records and "二十二点" in records[0]["segment"]["content"]
    _tags_read_back(steps)


def _tags_read_back(steps: Steps) -> None:
    """What the dataset SDK's tag calls wrote is what it reads back."""
    one, two = ok(steps, "create_tag"), ok(steps, "create_tag_2")
    assert (one["name"], one["binding_count"], two["name"]) == ("安防", 0, "访客")
    assert ok(steps, "update_tag")["name"] == "安防巡逻"
    bound = ok(steps, "dataset_tags")
    assert bound["total"] == 2
    assert {(t["id"], t["name"]) for t in bound["data"]} == {
        (one["id"], "安防巡逻"),
        (two["id"], "访客"),
    }
    # the SDK's Dataset model has no tags field: its get only has to validate
    assert ok(steps, "dataset_with_tags")["name"] == "SDK 数据集"
    counts = {t["name"]: t["binding_count"] for t in ok(steps, "list_tags")}
    assert counts == {"安防巡逻": 1, "访客": 1}
    assert [t["name"] for t in ok(steps, "dataset_tags_after")] == ["安防巡逻"]
    assert [t["id"] for t in ok(steps, "list_tags_after")] == [one["id"]]


OAPI2_STEPS = (
    "create_dataset", "list_datasets", "get_dataset", "update_dataset", "create_by_text",
    "create_by_file", "list_documents", "get_document", "indexing_status", "update_by_text",
    "status_enable", "upload_file", "list_segments", "create_segment", "get_segment",
    "update_segment", "child_chunks", "delete_segment", "retrieve", "create_tag",
    "create_tag_2", "update_tag", "bind_tags", "dataset_tags", "list_tags", "unbind_tag",
    "dataset_tags_after", "delete_tag", "list_tags_after", "delete_last_tag", "delete_document",
    "delete_dataset",
)  # fmt: skip


def test_dify_oapi2_runs_every_call(kb_service: str, sdk_driver: Driver) -> None:
    steps = _steps(sdk_driver, "dify-oapi2", kb_service)
    for step in OAPI2_STEPS:
        ok(steps, step)
    made = ok(steps, "create_dataset")
    assert made["description"] == "oapi" and made["created_by"] and made["created_at"] > 0
    text = ok(steps, "create_by_text")
    assert text["batch"] and text["document"]["name"] == "bikes.md"
    doc = ok(steps, "get_document")  # read once the batch is indexed
    assert doc["doc_metadata"] is None and doc["created_by"] and doc["tokens"] > 0
    listed = ok(steps, "list_documents")
    assert sorted(d["position"] for d in listed["data"]) == [1, 2]
    assert ok(steps, "update_segment")["data"]["content"] == "车棚旁边设有两个充电桩。"
    records = ok(steps, "retrieve")["records"]
    assert records and "二十二点" in records[0]["segment"]["content"]
    one, two = ok(steps, "create_tag"), ok(steps, "create_tag_2")
    assert (one["name"], one["type"], one["binding_count"]) == ("安防", "knowledge", 0)
    assert ok(steps, "update_tag")["name"] == "安防巡逻"
    bound = ok(steps, "dataset_tags")
    assert bound["total"] == 2
    assert {(t["id"], t["name"]) for t in bound["data"]} == {
        (one["id"], "安防巡逻"),
        (two["id"], "访客"),
    }
    counts = {t["name"]: t["binding_count"] for t in ok(steps, "list_tags")}
    assert counts == {"安防巡逻": "1", "访客": "1"}  # Dify answers the count as a string
    assert [t["name"] for t in ok(steps, "dataset_tags_after")["data"]] == ["安防巡逻"]
    assert [t["id"] for t in ok(steps, "list_tags_after")] == [one["id"]]
