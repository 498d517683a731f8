"""Recall@5 on the law development questions: the pgvector store against Qdrant Edge.

The same corpus (``../shared/corpus/laws`` with ``laws.meta.json``) ingested with
``gcite ingest``'s code path into both stores, the same questions asked through
``HybridStore.hits`` with default settings, in the same run. Skips without the corpus.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from support.pg import fresh_database


def _recall_at_5(store: Any, rows: list[dict[str, Any]]) -> float:
    recalls = []
    for row in rows:
        hits = store.hits(row["question"], top_k=5)
        got = {(h.payload["document_name"], a) for h in hits for a in h.payload.get("articles", [])}
        gold = [(g["doc"], g["article"]) for g in row["gold"]]
        alts = [(g["doc"], g["article"]) for g in row.get("alt_gold", [])]
        found = sum(g in got for g in gold)
        found += min(len(gold) - found, sum(a in got for a in alts))
        recalls.append(found / len(gold))
    return sum(recalls) / len(recalls)


@pytest.mark.corpus
def test_recall_at_5_on_pgvector_is_within_two_points_of_qdrant_edge(
    law_store: Any, pgvector_url: str, tmp_path: Path
) -> None:
    corpus = law_store.corpus_dir
    with (corpus / "laws-qa.dev.jsonl").open(encoding="utf-8") as fh:
        rows = [r for r in (json.loads(line) for line in fh if line.strip()) if r["gold"]]
    assert len(rows) >= 20
    settings = Settings.from_keys(
        data_dir=tmp_path / "data",
        embed_backend=law_store.settings.embed.backend,
        store="pgvector",
        knowledge_database_url=fresh_database(pgvector_url, "laws"),
    )
    report = ingest_paths(
        [corpus / "laws"],
        settings=settings,
        dataset=law_store.dataset,
        manifest=corpus / "laws.meta.json",
    )
    assert report.ok and report.chunks == law_store.store.count()
    with open_store(settings) as pg:
        assert pg.count() == law_store.store.count()
        edge = _recall_at_5(law_store.store, rows)
        ours = _recall_at_5(pg, rows)
    assert edge >= 0.85
    assert abs(ours - edge) <= 0.02, (ours, edge)
