"""Retrieval quality per configuration: recall@5/@10, off-topic share, query latency.

Run on demand (never in CI)::

    .venv/bin/python benchmarks/bench_recall.py [--embedder use]

Ingests ``../shared/corpus/laws`` (with ``laws.meta.json``) twice - chunks indexed with
their bounded document title (the default) and without it - and the sample handbook,
each into a fresh embedded store; then, in the same run, for every configuration:

* recall over the answerable questions of ``laws-qa.dev.jsonl``: ``hit@5`` (a gold or
  alternative-gold article among the first 5 chunks), article recall ``@5`` / ``@10``
  (share of a question's gold articles found; an alternative stands in for a missing
  one), and ``r1@5`` (the round-1 definition: hit@5 over all 30 questions, unanswerable
  ones included, so at most 24/30 = 0.80);
* off-topic share: questions of ``benchmarks/data/offtopic.dev.jsonl`` (40; ``fit`` and
  ``holdout`` halves, only ``fit`` was used for the calibration) with no chunk at or above
  the default threshold, on the law store and on the handbook store; and the share of the
  6 unanswerable law questions with none;
* query latency p50 / p95 (ms, one query embedding included), 3 passes over the questions.

Configurations: BM25 alone (the baseline), dense alone, the round-1 RRF fusion, the
relevance fusion (default: ``cos + 1.0 * coverage``) and variants of it - ratio 0.5 and
2.0, no title in the indexed chunk text, and the dense query built from the query's
keywords (query-side processing). Prints Markdown.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from calibrate_relevance import OFFTOPIC, article_recall, load_rows  # noqa: E402

CORPUS = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")) / "corpus"
HANDBOOK = REPO / "src" / "gcite" / "sample_data" / "handbook"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def ratio(embedder: str, value: float) -> Iterator[None]:
    """Temporarily rank by ``cos + value * coverage`` (same scale as the calibration)."""
    from gcite.knowledge import relevance

    saved = relevance.CALIBRATIONS[embedder]
    relevance.CALIBRATIONS[embedder] = dataclasses.replace(saved, w_lexical=saved.w_dense * value)
    try:
        yield
    finally:
        relevance.CALIBRATIONS[embedder] = saved


@contextmanager
def keyword_query(store: Any) -> Iterator[None]:
    """Temporarily embed the query's BM25 keywords instead of the question as asked."""
    from gcite.knowledge.sparse import tokenize

    model = store.embedder()

    class Keywords:
        name, dim = model.name, model.dim

        def embed_documents(self, texts: Any) -> Any:
            return model.embed_documents(texts)

        def embed_query(self, text: str) -> Any:
            return model.embed_query(" ".join(dict.fromkeys(tokenize(text))) or text)

    original = store.embedder
    store.embedder = lambda **kw: Keywords()
    try:
        yield
    finally:
        store.embedder = original


def measure(
    store: Any, handbook: Any, laws: list[dict[str, Any]], off: list[dict[str, Any]], mode: str
) -> dict[str, Any]:
    """Recall, off-topic shares and latency of ``store.hits(mode=mode)``."""
    from gcite.knowledge.relevance import DEFAULT_THRESHOLD

    answerable = [r for r in laws if r["gold"]]
    rec5: list[float] = []
    rec10: list[float] = []
    times: list[float] = []
    for passno in range(3):
        for row in laws:
            t0 = time.perf_counter()
            hits = store.hits(row["question"], top_k=10, mode=mode, score_threshold=0.0)
            times.append((time.perf_counter() - t0) * 1000)
            if passno == 0 and row["gold"]:
                payloads = [h.payload for h in hits]
                rec5.append(article_recall(row, payloads, 5))
                rec10.append(article_recall(row, payloads, 10))

    def empty(s: Any, question: str) -> bool:
        hits = s.hits(question, top_k=5, mode=mode, score_threshold=DEFAULT_THRESHOLD)
        return not hits

    off_law = {
        split: [empty(store, r["question"]) for r in off if r["split"] == split]
        for split in ("fit", "holdout")
    }
    off_hb = [empty(handbook, r["question"]) for r in off] if handbook is not None else []
    unans = [empty(store, r["question"]) for r in laws if not r["gold"]]
    hits5 = sum(x > 0 for x in rec5)
    return {
        "hit5": hits5 / len(answerable),
        "art5": sum(rec5) / len(answerable),
        "art10": sum(rec10) / len(answerable),
        "r1_5": hits5 / len(laws),
        "off_law": sum(off_law["fit"] + off_law["holdout"]) / len(off),
        "off_law_holdout": sum(off_law["holdout"]) / max(len(off_law["holdout"]), 1),
        "off_hb": (sum(off_hb) / len(off_hb)) if off_hb else None,
        "unans": sum(unans) / max(len(unans), 1),
        "p50": statistics.median(times),
        "p95": _pct(times, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="use")
    args = parser.parse_args()
    if not (CORPUS / "laws-qa.dev.jsonl").is_file():
        sys.exit(f"skipped: no corpus at {CORPUS} (set GCITE_SHARED_DIR)")
    from gcite.config import Settings
    from gcite.knowledge import ingest, ingest_paths, open_store

    laws = load_rows(CORPUS / "laws-qa.dev.jsonl")
    off = load_rows(OFFTOPIC)
    cpu = platform.processor()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    print(
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: "
        f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}; embedder "
        f"{args.embedder}; load average before: "
        f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:

        def build(name: str, paths: list[Path], manifest: Path | None = None) -> Any:
            settings = Settings.from_keys(data_dir=Path(tmp) / name, embed_backend=args.embedder)
            ingest_paths(paths, settings=settings, dataset=name, manifest=manifest)
            return open_store(settings)

        store = build("laws", [CORPUS / "laws"], CORPUS / "laws.meta.json")
        handbook = build("handbook", [HANDBOOK])
        saved_title = ingest.MAX_TITLE_CHARS
        ingest.MAX_TITLE_CHARS = 0  # no title line in the indexed text
        try:
            untitled = build("laws-untitled", [CORPUS / "laws"], CORPUS / "laws.meta.json")
        finally:
            ingest.MAX_TITLE_CHARS = saved_title

        rows: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("BM25 only (baseline)", lambda: measure(store, handbook, laws, off, "sparse")),
            ("dense only", lambda: measure(store, handbook, laws, off, "dense")),
            ("RRF k=60 (round 1)", lambda: measure(store, handbook, laws, off, "rrf")),
            (
                "**relevance fusion, ratio 1.0 (default)**",
                lambda: measure(store, handbook, laws, off, "hybrid"),
            ),
        ]

        def with_ratio(value: float) -> dict[str, Any]:
            with ratio(args.embedder, value):
                return measure(store, None, laws, off, "hybrid")

        def with_keywords() -> dict[str, Any]:
            with keyword_query(store):
                return measure(store, None, laws, off, "hybrid")

        rows += [
            ("relevance fusion, ratio 0.5", lambda: with_ratio(0.5)),
            ("relevance fusion, ratio 2.0", lambda: with_ratio(2.0)),
            (
                "default, no title in the chunk text",
                lambda: measure(untitled, None, laws, off, "hybrid"),
            ),
            ("default, dense query = keywords", with_keywords),
        ]
        print(
            "| configuration | hit@5 | recall@5 | recall@10 | r1@5 | off-topic empty (law) "
            "| of which holdout | off-topic empty (handbook) | unanswerable empty "
            "| p50 ms | p95 ms | recall@5 vs BM25 |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        base = None
        for label, run in rows:
            r = run()
            base = base or r
            hb = "—" if r["off_hb"] is None else f"{r['off_hb']:.2f}"
            print(
                f"| {label} | {r['hit5']:.3f} | {r['art5']:.3f} | {r['art10']:.3f} "
                f"| {r['r1_5']:.3f} | {r['off_law']:.2f} | {r['off_law_holdout']:.2f} | {hb} "
                f"| {r['unans']:.2f} | {r['p50']:.1f} | {r['p95']:.1f} "
                f"| {r['art5'] / base['art5']:.2f} |",
                flush=True,
            )
        for s in (store, handbook, untitled):
            s.close()
    print(f"\nload average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
