"""Qdrant Edge's dense index exists after ``gcite ingest`` (and after updates).

Nothing builds Qdrant Edge's HNSW index by itself: ingestion ends with the shard's
optimizers (``HybridStore.optimize``). With Qdrant's default indexing threshold the small
test corpus would stay below it (searched by a scan, the faster plan there), so these
tests lower the threshold to 1 KB: every vector must then be in the index. Qdrant counts
indexed vectors per vector name: each point has a dense vector and a BM25 one (the sparse
index is always built), so a fully indexed shard has twice as many as points.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.stores import edge
from gcite.testing.corpus import MANIFEST, write_mixed


def _indexed(settings: Settings) -> tuple[int, int]:
    with open_store(settings) as store:
        info = store._handle.index.shard.info()
        return int(info.indexed_vectors_count), int(info.points_count)


def test_ingest_builds_the_dense_index_and_keeps_it_after_updates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(edge, "INDEXING_THRESHOLD_KB", 1)
    write_mixed(tmp_path / "docs")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([tmp_path / "docs"], settings=settings, dataset="库", manifest=manifest)
    indexed, points = _indexed(settings)
    assert points > 0 and indexed == 2 * points

    # an update (a changed document, a new one) leaves every vector indexed again
    (tmp_path / "docs" / "elevator.txt").write_text(
        "电梯维保规程\n\n电梯每周至少检查一次。\n" * 3, encoding="utf-8"
    )
    (tmp_path / "docs" / "new.md").write_text("# 新规定\n\n垃圾分类每日清运。\n", encoding="utf-8")
    report = ingest_paths([tmp_path / "docs"], settings=settings, dataset="库", manifest=manifest)
    assert report.updated == 1 and report.added == 1
    indexed, points2 = _indexed(settings)
    assert points2 > points and indexed == 2 * points2
    with open_store(settings) as store:
        assert "垃圾" in store.search("垃圾多久清运一次", roles=None)[0]["content"]


def test_below_the_default_threshold_the_dense_vectors_are_scanned(tmp_path: Path) -> None:
    """The counterpart: with Qdrant's default threshold the small corpus has only its BM25
    vectors indexed (a dense search scans the one small segment)."""
    write_mixed(tmp_path / "docs")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([tmp_path / "docs"], settings=settings, dataset="库")
    indexed, points = _indexed(settings)
    assert points > 0 and indexed == points
