"""Knowledge-base management (issue 16 items 8 and 9): datasets and documents listed,
created, updated from bytes, deleted; `gcite datasets`, `gcite documents`, `gcite status`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gcite.cli import cli
from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.manage import (
    LocalAdmin,
    ManageError,
    create_dataset,
    delete_dataset,
    delete_document,
    list_datasets,
    list_documents,
    upsert_document,
)


def _kb(base: Path) -> Settings:
    docs = base / "docs"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("# 电梯\n\n电梯每十五日维保一次。", encoding="utf-8")
    (docs / "b.md").write_text("# 消防\n\n消防通道禁止堆放杂物。", encoding="utf-8")
    settings = Settings.from_keys(data_dir=base / "data", embed_backend="use", dataset="")
    assert ingest_paths([docs], settings=settings, dataset="手册").ok
    return settings


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[tuple[Settings, Any]]:
    settings = _kb(tmp_path)
    store = open_store(settings)
    yield settings, store
    store.close()


def _names(store: Any, query: str, roles: list[str] | None = None) -> set[str]:
    return {i["metadata"]["document_name"] for i in store.search(query, roles=roles, top_k=10)}


def test_list_create_and_delete_datasets(kb: tuple[Settings, Any]) -> None:
    _, store = kb
    [info] = list_datasets(store)
    assert (info.name, info.documents) == ("手册", 2) and info.chunks >= 2
    created = create_dataset(store, "新库")
    assert created.documents == 0 and [d.name for d in list_datasets(store)] == ["手册", "新库"]
    with pytest.raises(ManageError) as dup:
        create_dataset(store, "新库")
    assert dup.value.status == 409
    for bad in ["", "  ", "a/b", "x" * 200, 3]:
        with pytest.raises(ManageError):
            create_dataset(store, bad)
    assert delete_dataset(store, created.id).name == "新库"
    with pytest.raises(ManageError) as gone:
        delete_dataset(store, "新库")
    assert gone.value.status == 404


def test_upsert_updates_in_place_and_search_sees_it(kb: tuple[Settings, Any]) -> None:
    _, store = kb
    text = "# 停车\n\n访客车位在B2层。"
    first = upsert_document(store, "手册", name="停车.md", data=text.encode())
    assert first.created and "停车.md" in _names(store, "访客车位在哪一层")
    second = upsert_document(
        store, "手册", name="停车.md", data="# 停车\n\n访客车位改到B3层东区。".encode()
    )
    assert not second.created and second.document.id == first.document.id
    hits = store.search("访客车位", top_k=10)
    contents = " ".join(i["content"] for i in hits if i["metadata"]["document_name"] == "停车.md")
    assert "B3层" in contents and "B2层" not in contents
    assert len([d for d in list_documents(store, "手册") if d.name == "停车.md"]) == 1


def test_upsert_with_roles_fails_closed(kb: tuple[Settings, Any]) -> None:
    _, store = kb
    secret = "# 金库\n\n金库密码每周更换。".encode()
    upsert_document(store, "手册", name="vault", data=secret, metadata={"access_roles": ["财务"]})
    assert "vault.md" not in _names(store, "金库密码", roles=[])
    assert "vault.md" in _names(store, "金库密码", roles=["财务"])
    before = [d.name for d in list_documents(store, "手册")]
    bad: list[dict[str, Any]] = [
        {"access_roles": {"财务": True}},
        {"accessRoles": ["财务"]},
        {"access_roles": [""]},
    ]
    for meta in bad:
        with pytest.raises(ManageError, match="access_roles"):
            upsert_document(store, "手册", name="leak.md", data=secret, metadata=meta)
    with pytest.raises(ManageError, match="access_roles"):
        upsert_document(store, "手册", name="vault.md", data=secret, metadata={"roles": "x"})
    assert [d.name for d in list_documents(store, "手册")] == before
    assert "vault.md" not in _names(store, "金库密码", roles=[])  # earlier version kept
    assert "leak.md" not in _names(store, "金库密码", roles=None)


def test_delete_document_by_name_or_id(kb: tuple[Settings, Any]) -> None:
    _, store = kb
    doc = delete_document(store, "手册", "a.md")
    assert "a.md" not in _names(store, "电梯维保")
    with pytest.raises(ManageError) as info:
        delete_document(store, "手册", doc.id)
    assert info.value.status == 404
    [b] = list_documents(store, "手册")
    delete_document(store, "手册", b.id)
    assert list_documents(store, "手册") == []
    assert sum(d.documents for d in LocalAdmin(store).status().datasets) == 0


def _run(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), env={"GCITE_DATASET": ""}, input=input)


def test_cli_datasets_documents_status(tmp_path: Path) -> None:
    settings = _kb(tmp_path)
    data = str(settings.data_dir)
    listed = _run("datasets", "--data-dir", data)
    assert listed.exit_code == 0, listed.output
    assert listed.output.startswith("手册\t") and "文档 2" in listed.output
    as_json = json.loads(_run("datasets", "list", "--json", "--data-dir", data).output)
    assert as_json[0]["name"] == "手册" and as_json[0]["documents"] == 2
    docs = _run("documents", "--data-dir", data)
    assert docs.exit_code == 0 and "a.md" in docs.output and "b.md" in docs.output
    shown = _run("status", "--data-dir", data)
    assert shown.exit_code == 0, shown.output
    assert f"数据目录: {settings.data_dir.resolve()}" in shown.output
    assert "Qdrant Edge" in shown.output and "嵌入模型: use" in shown.output
    assert "文档: 2" in shown.output
    info = json.loads(_run("status", "--json", "--data-dir", data).output)
    assert info["documents"] == 2 and info["stored_chunks"] == info["chunks"]

    deleted = _run("documents", "delete", "a.md", "--dataset", "手册", "--data-dir", data)
    assert deleted.exit_code == 0, deleted.output
    assert f"数据目录: {settings.data_dir.resolve()}" in deleted.output
    assert "a.md" not in _run("documents", "--data-dir", data).output
    missing = _run("documents", "delete", "zzz.md", "--dataset", "手册", "--data-dir", data)
    assert missing.exit_code == 1 and "错误: 数据集中没有文档 zzz.md" in missing.output
    # a missing dataset is said at once, without asking for a confirmation first
    unknown = _run("datasets", "delete", "没有这个", "--data-dir", data, input="")
    assert unknown.exit_code == 1 and "删除数据集" not in unknown.output
    assert "没有这个" in unknown.output and "错误" in unknown.output
    refused = _run("datasets", "delete", "手册", "--data-dir", data, input="n\n")
    assert refused.exit_code == 1 and "手册" in _run("datasets", "--data-dir", data).output
    gone = _run("datasets", "delete", "手册", "--yes", "--data-dir", data)
    assert gone.exit_code == 0 and "已删除数据集 手册" in gone.output
    assert "数据目录" in gone.output
    assert "没有数据集" in _run("datasets", "--data-dir", data).output


def test_cli_on_a_missing_data_dir_is_one_line(tmp_path: Path) -> None:
    result = _run("status", "--data-dir", str(tmp_path / "nothing"))
    assert result.exit_code == 1
    assert result.output.startswith("错误: 知识库数据目录不存在")
