"""Tags in the catalog file: counted and sorted as Dify lists them, kept across a save,
and a malformed tag table refused (never read as some other state)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gcite.errors import StoreError
from gcite.knowledge.catalog import Catalog
from gcite.knowledge.tags import bound_tags, tag_infos

TAGS = {
    "old": {"name": "旧", "created_at": 1},
    "new": {"name": "新", "created_at": 2},
}


def test_tags_are_listed_newest_first_with_their_binding_counts() -> None:
    datasets = {
        "甲": {"tag_ids": ["old", "new", "old"]},  # a repeated id counts once
        "乙": {"tag_ids": ["old", "gone"]},
        "丙": {},
    }
    infos = tag_infos(TAGS, datasets)
    assert [(t.id, t.name, t.binding_count) for t in infos] == [("new", "新", 1), ("old", "旧", 2)]
    assert [t.id for t in bound_tags(TAGS, datasets["乙"])] == ["old"]  # "gone" is skipped
    assert bound_tags(TAGS, datasets["丙"]) == ()


def test_the_catalog_file_keeps_tags_and_refuses_a_malformed_table(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    catalog = Catalog(path, tags=dict(TAGS))
    catalog.dataset("甲")["tag_ids"] = ["new"]
    catalog.save()
    again = Catalog.load(path)
    assert again.tags == TAGS and again.datasets["甲"]["tag_ids"] == ["new"]
    assert not path.with_suffix(".tmp").exists()  # written by rename
    raw = json.loads(path.read_text(encoding="utf-8"))
    del raw["tags"]
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert Catalog.load(path).tags == {}  # a catalog from before tags
    for bad in ([], {"t": "名"}):
        raw["tags"] = bad
        path.write_text(json.dumps(raw), encoding="utf-8")
        with pytest.raises(StoreError, match="知识库数据损坏"):
            Catalog.load(path)
