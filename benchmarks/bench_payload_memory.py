"""Qdrant Edge payload placement: search latency and RSS with ``Memory.Cold`` vs ``Cached``.

Run on demand (never in CI)::

    .venv/bin/python benchmarks/bench_payload_memory.py [--embedder use] [--passes 5]

Ingests ``../shared/corpus/laws`` (with ``laws.meta.json``) into two fresh embedded stores
in one process, one with each payload placement (the shard config is the only
difference), then runs the questions of ``laws-qa.dev.jsonl`` through ``HybridStore.hits``
(top 10, query embedding included) alternately on the two stores, pass after pass, so both
see the same machine load; and the same with a role filter (``roles=["法务"]``). Prints
wall and CPU p50 / p95 per placement (CPU time of the process, all threads: on a shared
machine less disturbed by other jobs than wall time), the results' agreement (the same
segment ids in the same order) and the process RSS after each ingest. The placement is
fixed when a shard is created.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")) / "corpus"


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="use")
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    import json

    import qdrant_edge

    from gcite.config import Settings
    from gcite.knowledge import ingest_paths, open_store

    questions = [
        json.loads(line)["question"]
        for line in (CORPUS / "laws-qa.dev.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    print(
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"load average before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    original = qdrant_edge.EdgeConfig
    stores: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for placement in ("Cached", "Cold"):

            def config(*a: Any, _p: str = placement, **kw: Any) -> Any:
                kw["payload_memory"] = getattr(qdrant_edge.Memory, _p)
                return original(*a, **kw)

            qdrant_edge.EdgeConfig = config  # type: ignore[misc]
            settings = Settings.from_keys(
                data_dir=Path(tmp) / placement, embed_backend=args.embedder
            )
            before = _rss_mib()
            report = ingest_paths(
                [CORPUS / "laws"],
                settings=settings,
                dataset="laws",
                manifest=CORPUS / "laws.meta.json",
            )
            stores[placement] = open_store(settings)
            print(
                f"{placement}: {report.chunks} chunks, RSS {before:.0f} -> {_rss_mib():.0f} MiB "
                "over the ingest (shard kept open)"
            )
        qdrant_edge.EdgeConfig = original  # type: ignore[misc]
        times: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        agree = total = 0
        for _ in range(args.passes):
            for question in questions:
                for roles in (None, ["法务"]):
                    ids = {}
                    for placement, store in stores.items():
                        t0, c0 = time.perf_counter(), time.process_time()
                        hits = store.hits(question, top_k=10, roles=roles, score_threshold=0.0)
                        elapsed = (time.perf_counter() - t0) * 1000
                        cpu = (time.process_time() - c0) * 1000
                        key = (placement, "no filter" if roles is None else "role filter")
                        times.setdefault(key, []).append(elapsed)
                        cpus.setdefault(key, []).append(cpu)
                        ids[placement] = [h.payload["segment_id"] for h in hits]
                    total += 1
                    agree += ids["Cached"] == ids["Cold"]
        print(
            "\n| payload placement | query | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms |"
            "\n|---|---|---|---|---|---|"
        )
        for key, values in sorted(times.items(), key=lambda kv: kv[0][1]):
            placement, kind = key
            print(
                f"| {placement} | {kind} | {statistics.median(values):.1f} "
                f"| {_pct(values, 0.95):.1f} | {statistics.median(cpus[key]):.1f} "
                f"| {_pct(cpus[key], 0.95):.1f} |"
            )
        print(f"\nsame results (ids and order): {agree}/{total}")
        for store in stores.values():
            store.close()
    print(f"load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
