"""Drive gcite's Knowledge API with PyPI ``dify-dataset-sdk`` (strict pydantic models).

Run by ``tests/sdk/test_knowledge_sdks.py`` in ``.venv-sdk/dify-knowledge``: datasets,
documents (text and file), indexing status, segments, metadata, retrieve, tags, each
through the SDK's own typed call, so its models validate what gcite answers. Each step
prints one JSON line (``scenario.run``).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from dify_dataset_sdk import DifyDatasetClient
from scenario import run

FACT = "紫藤花园东侧的自行车棚夜间二十二点后上锁。"


def dump(value: Any) -> Any:
    """A model (or a list of them) as plain data."""
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def indexed(sdk: DifyDatasetClient, ds: str, answer: Any) -> Any:
    """``answer`` (a create/update result) once its batch is indexed, polling the SDK's
    indexing status as Dify's clients do (a hang guard of two minutes)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        [status] = sdk.documents.get_indexing_status(ds, answer.batch).data
        if status.indexing_status in ("completed", "error"):
            return dump(answer)
        time.sleep(0.05)
    raise TimeoutError(f"batch {answer.batch} not indexed")


def main() -> None:
    base = os.environ["GCITE_SDK_URL"].removesuffix("/v1")
    sdk = DifyDatasetClient(api_key=os.environ["GCITE_SDK_KEY"], base_url=base, timeout=120)
    name = os.environ.get("GCITE_SDK_DATASET", "SDK 数据集")
    made = run("create_dataset", lambda: dump(sdk.datasets.create(name=name, description="SDK")))
    ds = (made or {}).get("id", "")
    run("list_datasets", lambda: dump(sdk.datasets.list(page=1, limit=20)))
    run("get_dataset", lambda: dump(sdk.datasets.get(ds)))
    run("update_dataset", lambda: dump(sdk.datasets.update(ds, description="SDK 改")))
    text = run(
        "create_by_text",
        lambda: indexed(
            sdk, ds, sdk.documents.create_by_text(ds, name="bikes", text=f"# 车棚\n\n{FACT}")
        ),
    )
    doc = ((text or {}).get("document") or {}).get("id", "")
    batch = (text or {}).get("batch", "")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "visitor.md"
        path.write_text("# 访客\n\n访客须在一层大堂登记。", encoding="utf-8")
        run("create_by_file", lambda: indexed(sdk, ds, sdk.documents.create_by_file(ds, path)))
        path.write_text("# 访客\n\n访客须在一层大堂服务台登记。", encoding="utf-8")
        listed = run("list_documents", lambda: dump(sdk.documents.list(ds)))
        file_doc = next(
            (d["id"] for d in (listed or {}).get("data", []) if d["name"] == "visitor.md"), ""
        )
        run(
            "update_by_file",
            lambda: indexed(sdk, ds, sdk.documents.update_by_file(ds, file_doc, path)),
        )
    run("get_document", lambda: dump(sdk.documents.get(ds, doc)))
    run("indexing_status", lambda: dump(sdk.documents.get_indexing_status(ds, batch)))
    run(
        "update_by_text",
        lambda: indexed(
            sdk, ds, sdk.documents.update_by_text(ds, doc, text=f"# 车棚\n\n{FACT}更新。")
        ),
    )
    run("status_enable", lambda: sdk.documents.batch_update_status(ds, "enable", [doc]))
    run("upload_file", lambda: sdk.documents.get_upload_file(ds, doc))
    segments = run("list_segments", lambda: dump(sdk.segments.list(ds, doc)))
    first = ((segments or {}).get("data") or [{}])[0].get("id", "")
    made_segments = run(
        "create_segment",
        lambda: dump(sdk.segments.create(ds, doc, [{"content": "车棚旁边设有充电桩。"}])),
    )
    new = ((made_segments or {}).get("data") or [{}])[0].get("id", "")
    run("get_segment", lambda: sdk.segments.get(ds, doc, first))
    run(
        "update_segment",
        lambda: sdk.segments.update(ds, doc, new, {"content": "车棚旁边设有两个充电桩。"}),
    )
    run("child_chunks", lambda: dump(sdk.segments.list_child_chunks(ds, doc, first)))
    run("delete_segment", lambda: sdk.segments.delete(ds, doc, new))
    field = run("create_metadata", lambda: dump(sdk.metadata.create(ds, "string", "负责人")))
    field_id = (field or {}).get("id", "")
    run("rename_metadata", lambda: dump(sdk.metadata.update(ds, field_id, "值班人")))
    run("list_metadata", lambda: dump(sdk.metadata.list(ds)))
    operation = {
        "document_id": doc,
        "metadata_list": [{"id": field_id, "name": "值班人", "value": "张三"}],
    }
    run("document_metadata", lambda: sdk.metadata.update_document_metadata(ds, [operation]))
    run("metadata_after", lambda: dump(sdk.metadata.list(ds)))
    run("built_in_disable", lambda: sdk.metadata.toggle_built_in(ds, "disable"))
    run("retrieve", lambda: dump(sdk.datasets.retrieve(ds, "自行车棚几点上锁")))
    tags(sdk, ds)
    run("delete_document", lambda: sdk.documents.delete(ds, doc))
    run("delete_dataset", lambda: sdk.datasets.delete(ds))


def tags(sdk: DifyDatasetClient, ds: str) -> None:
    """Every tag call of the SDK, each step reading back what the one before wrote."""
    first = run("create_tag", lambda: dump(sdk.tags.create("安防")))
    second = run("create_tag_2", lambda: dump(sdk.tags.create("访客")))
    one, two = (first or {}).get("id", ""), (second or {}).get("id", "")
    run("update_tag", lambda: dump(sdk.tags.update(one, "安防巡逻")))
    run("bind_tags", lambda: sdk.tags.bind_to_dataset(ds, [one, two]))
    run("dataset_tags", lambda: dump(sdk.tags.get_dataset_tags(ds, return_detail=True)))
    run("dataset_with_tags", lambda: dump(sdk.datasets.get(ds)))
    run("list_tags", lambda: dump(sdk.tags.list()))
    run("unbind_tag", lambda: sdk.tags.unbind_from_dataset(ds, two))
    run("dataset_tags_after", lambda: dump(sdk.tags.get_dataset_tags(ds)))
    run("delete_tag", lambda: sdk.tags.delete(two))
    run("list_tags_after", lambda: dump(sdk.tags.list()))
    run("delete_last_tag", lambda: sdk.tags.delete(one))


if __name__ == "__main__":
    main()
