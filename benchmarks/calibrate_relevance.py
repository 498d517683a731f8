"""Fit the relevance score's calibration (gcite.knowledge.relevance) on the development questions.

Run on demand::

    .venv/bin/python benchmarks/calibrate_relevance.py [--embedder use] [--data-dir DIR]

1. Ingests ``../shared/corpus/laws`` (or reuses ``--data-dir``) with the embedder.
2. For every question of ``laws-qa.dev.jsonl`` and ``benchmarks/data/offtopic.dev.jsonl``
   collects the candidates of both retrievers (the store's own query) with their two
   pieces of evidence: cosine similarity and lexical coverage.
3. Ranking: chooses the ratio ``r`` of ``cos + r * coverage`` that maximises article
   recall@5 (then @10) over the answerable questions (grid 0..3).
4. Scale: fits ``sigmoid(s * (cos + r * coverage) + c)`` by logistic regression, positives
   the best gold chunk of each answerable question, negatives the best chunk of each
   unanswerable law question and of each ``fit`` off-topic question (the ``holdout``
   half is only reported).

Prints the ``Calibration(...)`` line to paste into ``relevance.CALIBRATIONS`` and the
off-topic share with no chunk at or above 0.5 per split.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")) / "corpus"
OFFTOPIC = REPO / "benchmarks" / "data" / "offtopic.dev.jsonl"


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def article_recall(row: dict[str, Any], payloads: list[dict[str, Any]], k: int) -> float:
    """Share of the gold articles held by the first ``k`` chunks (an alternative gold
    article stands in for a missing gold one)."""
    got = {(p["document_name"], a) for p in payloads[:k] for a in p.get("articles", [])}
    gold = [(g["doc"], g["article"]) for g in row["gold"]]
    alts = [(g["doc"], g["article"]) for g in row.get("alt_gold", [])]
    found = sum(g in got for g in gold)
    found += min(len(gold) - found, sum(a in got for a in alts))
    return found / len(gold) if gold else 0.0


def features(store: Any, question: str) -> list[tuple[float, float, dict[str, Any]]]:
    """(cosine, coverage, payload) of every candidate of both retrievers for ``question``."""

    from gcite.knowledge.relevance import lexical_coverage
    from gcite.knowledge.sparse import query_vector, query_weights
    from gcite.knowledge.store import PREFETCH
    from gcite.knowledge.stores.base import DENSE, SPARSE, Stage

    dense = [float(x) for x in store.embedder().embed_query(question)]
    sparse = query_vector(question)
    stages = [Stage(DENSE, dense=dense)]
    if sparse.indices:
        stages.append(Stage(SPARSE, sparse=sparse))
    merged: dict[str, Any] = {}
    for stage in stages:
        for cand in store._handle.index.nearest(stage, None, PREFETCH):
            merged.setdefault(cand.id, cand)
    weights = query_weights(question)
    missing = [c.id for c in merged.values() if c.cosine is None]
    cosines = store._handle.index.cosines(dense, missing)
    return [
        (
            c.cosine if c.cosine is not None else cosines.get(c.id, 0.0),
            lexical_coverage(weights, c.tokens),
            c.payload,
        )
        for c in merged.values()
    ]


def fit_logistic(xs: list[float], ys: list[int]) -> tuple[float, float]:
    """Slope and intercept of a 1-d logistic regression (Newton, small L2 on the slope)."""
    s, c = 1.0, 0.0
    for _ in range(100):
        gs = gc = hss = hsc = hcc = 0.0
        for x, y in zip(xs, ys, strict=True):
            z = s * x + c
            p = 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))
            w = p * (1 - p)
            gs += (p - y) * x
            gc += p - y
            hss += w * x * x
            hsc += w * x
            hcc += w
        gs += 0.01 * s
        hss += 0.01
        det = hss * hcc - hsc * hsc
        if det <= 1e-12:
            break
        ds = (hcc * gs - hsc * gc) / det
        dc = (hss * gc - hsc * gs) / det
        s, c = s - ds, c - dc
        if abs(ds) + abs(dc) < 1e-9:
            break
    return s, c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="use")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    if not (CORPUS / "laws-qa.dev.jsonl").is_file():
        sys.exit(f"skipped: no corpus at {CORPUS} (set GCITE_SHARED_DIR)")
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data_dir or Path(tmp) / "data"
        settings = Settings.from_keys(data_dir=data, embed_backend=args.embedder)
        ingest_paths(
            [CORPUS / "laws"],
            settings=settings,
            dataset="楼宇法规库",
            manifest=CORPUS / "laws.meta.json",
        )
        store = open_store(settings)
        laws = load_rows(CORPUS / "laws-qa.dev.jsonl")
        off = load_rows(OFFTOPIC)
        law_feats = [features(store, r["question"]) for r in laws]
        off_feats = [features(store, r["question"]) for r in off]
        store.close()

    answerable = [(r, f) for r, f in zip(laws, law_feats, strict=True) if r["gold"]]

    def recall(ratio: float, k: int) -> float:
        total = 0.0
        for row, feats in answerable:
            ordered = sorted(feats, key=lambda f: -(f[0] + ratio * f[1]))
            total += article_recall(row, [f[2] for f in ordered], k)
        return total / len(answerable)

    grid = [i / 10 for i in range(31)]
    table = [(recall(r, 5), recall(r, 10), r) for r in grid]
    for r5, r10, r in table:
        print(f"ratio {r:.1f}: article recall@5 {r5:.3f} @10 {r10:.3f}")
    best5, best10, ratio = max(table, key=lambda t: (t[0], t[1], -abs(t[2] - 1)))
    print(f"chosen ratio {ratio:.1f} (recall@5 {best5:.3f}, @10 {best10:.3f})")

    def combined(f: tuple[float, float, Any]) -> float:
        return f[0] + ratio * f[1]

    xs: list[float] = []
    ys: list[int] = []
    for row, feats in zip(laws, law_feats, strict=True):
        if row["gold"]:
            gold = [f for f in feats if article_recall(row, [f[2]], 1) > 0]
            if gold:
                xs.append(max(combined(f) for f in gold))
                ys.append(1)
        elif feats:
            xs.append(max(combined(f) for f in feats))
            ys.append(0)
    for row, feats in zip(off, off_feats, strict=True):
        if row.get("split") == "fit" and feats:
            xs.append(max(combined(f) for f in feats))
            ys.append(0)
    scale, bias = fit_logistic(xs, ys)
    print(f"positives {sum(ys)}, negatives {len(ys) - sum(ys)}")
    print(
        f'"{args.embedder}": Calibration({scale:.3f}, {scale * ratio:.3f}, {bias:.3f}, '
        f'"laws-qa.dev + offtopic.dev (fit half), {args.embedder}"),'
    )
    for split in ("fit", "holdout"):
        tops = [
            max((1 / (1 + math.exp(-(scale * combined(f) + bias))) for f in feats), default=0)
            for row, feats in zip(off, off_feats, strict=True)
            if row.get("split") == split
        ]
        empty = sum(t < 0.5 for t in tops)
        print(f"off-topic {split}: {empty}/{len(tops)} with no chunk >= 0.5")


if __name__ == "__main__":
    main()
