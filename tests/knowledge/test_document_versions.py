"""Document writes: versions swap in one step on both stores, a killed process leaves one
complete version and nothing stray, and metadata (roles above all) follows the document
through every write path of the store layer and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gcite.cli import cli
from gcite.config import Settings
from gcite.knowledge import ingest as ingest_module
from gcite.knowledge.access import KnowledgeAccess
from gcite.knowledge.faults import FAULT_ENV
from gcite.knowledge.manage import LocalAdmin
from gcite.knowledge.store import HybridStore
from support.pg import fresh_database

DATASET = "巡更手册"
QUERY = "夜间巡更规定每隔多久巡查一次"


def _text(version: str, paragraphs: int = 10) -> str:
    lines = [
        f"夜间巡更第{i}段：{version}规定每隔一段时间巡查{i}号楼一次。" for i in range(paragraphs)
    ]
    return "# 巡更\n\n" + "\n\n".join(lines)


OLD, NEW = _text("旧版"), _text("新版")


def _versions(store: Any, roles: list[str] | None = None) -> set[str]:
    """Which versions of the document a search shows: ``旧版`` / ``新版``."""
    found = set()
    for item in store.search(QUERY, roles=roles, top_k=50):
        for version in ("旧版", "新版"):
            if version in item["content"]:
                found.add(version)
    return found


def _agree(store: Any) -> None:
    """The catalog and the store agree: every stored chunk is one of a listed document's
    current version."""
    with store.lock:
        segments = sum(
            int(d.get("segments", 0))
            for entry in store.catalog.datasets.values()
            for d in entry.get("documents", {}).values()
        )
    assert store.count() == segments


SMALL = {"chunk_size": 40, "chunk_overlap": 0}  # a chunk per paragraph
HANG_GUARD_S = 600.0  # waits that end at once unless the code under test hangs


def _edge(base: Path) -> Settings:
    return Settings.from_keys(data_dir=base / "data", embed_backend="use", dataset="", **SMALL)


@pytest.fixture(params=["qdrant_edge", "pgvector"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "qdrant_edge":
        return _edge(tmp_path)
    url = fresh_database(request.getfixturevalue("pgvector_url"))
    return Settings.from_keys(
        data_dir=tmp_path / "data",
        embed_backend="use",
        dataset="",
        store="pgvector",
        knowledge_database_url=url,
        **SMALL,
    )


@pytest.fixture
def access(settings: Settings) -> Iterator[KnowledgeAccess]:
    with KnowledgeAccess(settings) as opened:
        yield opened


def test_readers_see_the_old_version_until_the_swap_then_only_the_new(
    access: KnowledgeAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = access.admin()
    assert isinstance(admin, LocalAdmin)
    admin.create_dataset(DATASET)
    doc = admin.upsert_document(DATASET, name="patrol.md", data=OLD.encode()).document
    store = access.store()
    assert _versions(store) == {"旧版"}
    # the update writes two chunks at a time; a reader searches after every write
    monkeypatch.setattr(ingest_module, "EMBED_BATCH", 2)
    monkeypatch.setattr(ingest_module, "WRITE_BATCH", 2)
    seen: list[set[str]] = []
    add_points = HybridStore.add_points

    def add_then_read(self: HybridStore, points: Any) -> None:
        add_points(self, points)
        seen.append(_versions(store))

    monkeypatch.setattr(HybridStore, "add_points", add_then_read)
    updated = admin.upsert_document(DATASET, name="", data=NEW.encode(), replace=doc.id)
    assert len(seen) >= 3  # the new version was written in several steps, read after each
    assert all(s == {"旧版"} for s in seen), seen
    assert _versions(store) == {"新版"}
    assert updated.document.id == doc.id
    _agree(store)
    admin.delete_document(DATASET, doc.id)
    assert _versions(store) == set()
    _agree(store)


def test_a_failed_update_keeps_the_old_version_and_leaves_nothing(
    access: KnowledgeAccess,
) -> None:
    admin = access.admin()
    admin.create_dataset(DATASET)
    admin.upsert_document(DATASET, name="patrol.md", data=OLD.encode())
    with pytest.raises(Exception, match=r"未能导入|doc"):
        admin.upsert_document(DATASET, name="patrol.docx", data=b"PK\x03\x04 not a docx")
    store = access.store()
    assert _versions(store) == {"旧版"}
    _agree(store)
    uploads = Path(access.settings.data_dir) / "uploads"
    assert len([p for p in uploads.rglob("*") if p.is_file()]) == 2  # the file and its manifest


# --------------------------------------------------------------------------- metadata


def test_every_store_write_path_keeps_the_roles(tmp_path: Path) -> None:
    """Update by id, create with the same name, and a replacement by another name
    (``original_document_id``) without metadata: a user without roles sees nothing."""
    with KnowledgeAccess(_edge(tmp_path)) as access:
        admin, store = access.admin(), None
        admin.create_dataset(DATASET)
        made = admin.upsert_document(
            DATASET, name="patrol.md", data=OLD.encode(), metadata={"access_roles": ["法务"]}
        )
        store = access.store()
        assert _versions(store, []) == set() and _versions(store, ["法务"]) == {"旧版"}
        writes = [
            {"name": "", "replace": made.document.id},
            {"name": "patrol.md"},
            {"name": "patrol.md", "metadata": {}},
            {"name": "renamed.md", "replace": made.document.id},
        ]
        for number, write in enumerate(writes):
            version = "新版" if number % 2 == 0 else "旧版"
            result = admin.upsert_document(DATASET, data=_text(version).encode(), **write)
            assert result.roles_change is None and not result.created
            assert result.document.metadata["access_roles"] == ["法务"], write
            assert _versions(store, []) == set(), write
            assert _versions(store, ["法务"]) == {version}, write
        opened = admin.upsert_document(
            DATASET,
            name="",
            data=NEW.encode(),
            metadata={"access_roles": []},
            replace=made.document.id,
        )
        assert opened.roles_change == (("法务",), ())
        assert _versions(store, []) == {"新版"}
        _agree(store)


def test_a_cli_reingest_without_the_manifest_keeps_the_roles(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "patrol.md").write_text(OLD, encoding="utf-8")
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps({"documents": {"patrol.md": {"access_roles": ["法务"]}}}, ensure_ascii=False),
        encoding="utf-8",
    )
    data = tmp_path / "data"
    common = ["--dataset", DATASET, "--data-dir", str(data), "--quiet", "--chunk-size", "40"]
    common += ["--chunk-overlap", "0"]
    runner = CliRunner()
    env = {"GCITE_EMBED_BACKEND": "use"}
    first = runner.invoke(cli, ["ingest", str(docs), "--manifest", str(manifest), *common], env=env)
    assert first.exit_code == 0, first.output
    (docs / "patrol.md").write_text(NEW, encoding="utf-8")
    again = runner.invoke(cli, ["ingest", str(docs), *common], env=env)
    assert again.exit_code == 0, again.output
    with KnowledgeAccess(_edge(tmp_path)) as access:
        store = access.store()
        assert _versions(store, []) == set()
        assert _versions(store, ["法务"]) == {"新版"}


# --------------------------------------------------------------------------- SIGKILL


def _ingest(docs: Path, data: Path, fault: str) -> subprocess.CompletedProcess[bytes]:
    """The real ``gcite ingest`` in a subprocess, killing itself at checkpoint ``fault``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    env.update({"GCITE_EMBED_BACKEND": "use", FAULT_ENV: fault})
    gcite = Path(sys.executable).parent / "gcite"
    command = [str(gcite), "ingest", str(docs), "--dataset", DATASET, "--data-dir", str(data)]
    sizes = ["--chunk-size", "40", "--chunk-overlap", "0", "--quiet"]
    return subprocess.run([*command, *sizes], env=env, capture_output=True, timeout=600)


@pytest.mark.parametrize(
    ("change", "fault", "expected"),
    [
        ("update", "version-staged", {"旧版"}),
        ("update", "version-swapped", {"新版"}),
        ("create", "version-staged", set()),
        ("create", "version-swapped", {"新版"}),
        ("delete", "document-unlisted", set()),
    ],
)
def test_a_killed_ingest_leaves_one_complete_version(
    tmp_path: Path, change: str, fault: str, expected: set[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "other.md").write_text("# 其他\n\n电梯每十五日维保一次。", encoding="utf-8")
    if change != "create":
        (docs / "patrol.md").write_text(OLD, encoding="utf-8")
    assert _ingest(docs, tmp_path / "data", "").returncode == 0
    if change == "delete":
        (docs / "patrol.md").unlink()
    else:
        (docs / "patrol.md").write_text(NEW, encoding="utf-8")
    killed = _ingest(docs, tmp_path / "data", fault)
    assert killed.returncode == -9, killed.stderr.decode()
    with KnowledgeAccess(_edge(tmp_path)) as access:  # the restart
        store = access.store()
        assert _versions(store) == expected
        _agree(store)
        names = {d.name for d in access.admin().list_documents(DATASET)}
        assert ("patrol.md" in names) == bool(expected)


# --------------------------------------------------------------------------- concurrency


def test_a_long_write_does_not_hold_up_another_dataset(
    access: KnowledgeAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write to one dataset held mid-version (inside its chunk writes) does not stop a
    write to another dataset from completing (per-dataset locks only; on pgvector each
    writing thread has its own transaction), and the held version stays invisible."""
    admin = access.admin()
    admin.create_dataset(DATASET)
    admin.create_dataset("其他库")
    held, release = threading.Event(), threading.Event()
    add_points = HybridStore.add_points

    def hold(self: HybridStore, points: Any) -> None:
        add_points(self, points)
        if threading.current_thread().name == "long-write":
            held.set()
            assert release.wait(HANG_GUARD_S)

    monkeypatch.setattr(HybridStore, "add_points", hold)
    long_write = threading.Thread(
        target=admin.upsert_document,
        args=(DATASET,),
        kwargs={"name": "patrol.md", "data": OLD.encode()},
        name="long-write",
    )
    results: list[Any] = []
    other = threading.Thread(
        target=lambda: results.append(
            admin.upsert_document("其他库", name="lift.md", data=NEW.encode())
        )
    )
    long_write.start()
    try:
        assert held.wait(HANG_GUARD_S)
        other.start()
        other.join(HANG_GUARD_S)  # a hang guard: a write waiting for the held one never ends
        assert results and results[0].created, "the other dataset's write waited"
        assert long_write.is_alive()
        assert _versions(access.store()) == {"新版"}  # the held version is not searchable
    finally:
        release.set()
        long_write.join(HANG_GUARD_S)
        other.join(HANG_GUARD_S)
    assert _versions(access.store()) == {"旧版", "新版"}
    _agree(access.store())


def test_concurrent_writes_to_two_datasets_both_land(access: KnowledgeAccess) -> None:
    admin = access.admin()
    admin.create_dataset(DATASET)
    admin.create_dataset("其他库")
    errors: list[BaseException] = []

    def write(dataset: str, text: str) -> None:
        try:
            for number in range(3):
                admin.upsert_document(dataset, name=f"d{number}.md", data=text.encode())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(DATASET, OLD)),
        threading.Thread(target=write, args=("其他库", NEW)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not errors, errors
    assert {len(admin.list_documents(d)) for d in (DATASET, "其他库")} == {3}
    assert _versions(access.store()) == {"旧版", "新版"}
    _agree(access.store())
