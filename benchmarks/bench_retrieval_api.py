"""Latency of the External Knowledge API (``POST /retrieval``) on the law corpus.

What it measures (issue 8, item 7): p50 / p99 latency of ``/retrieval`` with
requests shaped as Dify sends them, from an ``httpx.AsyncClient`` to uvicorn on
127.0.0.1, at 1 and at 20 concurrent requests. Baselines measured in the same
run: ``KnowledgeStore.search`` called directly (no HTTP, one at a time), and the
bodyless registration probe (HTTP + auth, no search).

The server runs in a child process (this script with ``--serve``), so client
and server do not share a GIL. Everything is measured twice: with the default
BLAS thread pools, and with one BLAS thread per process
(``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1``), since the query
embedding is numpy and thread pools fight over 2 shared cores. The corpus is
ingested once into a cache directory (``GCITE_BENCH_DATA``, default
``~/.cache/gcite/bench-laws-<embed backend>``);
ingestion is idempotent, so later runs skip it. Queries are the questions of
``../shared/corpus/laws-qa.dev.jsonl``.

Run: ``.venv/bin/python benchmarks/bench_retrieval_api.py [--requests 200]``.
Prints a Markdown block for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GCITE_SHARED_DIR", REPO.parent / "shared")).resolve()
CORPUS = SHARED / "corpus"
KEY = "bench-key"
KEY_ROLES = ("物业经理", "运维工程师", "安保主管")
PREFIX = "/dify"


def data_dir() -> Path:
    """The ingested corpus, one directory per embedding backend (the default's)."""
    from gcite.config import Settings

    default = Path.home() / ".cache" / "gcite" / f"bench-laws-{Settings().embed.backend}"
    return Path(os.environ.get("GCITE_BENCH_DATA", default)).expanduser()


def settings_for(path: Path) -> Any:
    from gcite.config import ApiKey, Settings

    return Settings.from_keys(
        data_dir=path,
        retrieval_prefix=PREFIX,
        retrieval_keys=[ApiKey(key=KEY, roles=KEY_ROLES)],
    )


def dataset_name() -> str:
    meta = json.loads((CORPUS / "laws.meta.json").read_text("utf-8"))
    return str(meta["dataset_name"])


def questions() -> list[str]:
    lines = (CORPUS / "laws-qa.dev.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def ingest(path: Path) -> None:
    from gcite.knowledge import ingest_paths

    started = time.perf_counter()
    report = ingest_paths(
        [CORPUS / "laws"],
        settings=settings_for(path),
        dataset=dataset_name(),
        manifest=CORPUS / "laws.meta.json",
    )
    print(f"# ingest: {time.perf_counter() - started:.1f} s, ok={report.ok}", file=sys.stderr)


def build_app(path: Path) -> Any:
    """The gcite service app (``create_app``) on the benchmark's data dir."""
    from gcite.service.app import create_app

    return create_app(settings_for(path))


def serve(port: int, path: Path) -> None:
    import uvicorn

    uvicorn.run(build_app(path), host="127.0.0.1", port=port, log_level="warning")


def body(query: str, dataset: str, *, narrowed: bool) -> str:
    params: dict[str, Any] = {
        "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
        "query": query,
        "knowledge_id": dataset,
    }
    if narrowed:
        params["metadata_condition"] = {
            "logical_operator": "and",
            "conditions": [
                {"name": "access_roles", "comparison_operator": "in", "value": "物业经理,法务"}
            ],
        }
    return json.dumps(params)


FAILURES: list[int] = []
"""Non-200 answers of each run, in run order (a 504 is the 4.5 s timeout)."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def run_load(
    url: str, bodies: Sequence[str | None], concurrency: int
) -> tuple[list[float], float]:
    """Send every body (None = probe) with ``concurrency`` workers; latencies in ms.

    Non-200 answers are counted in :data:`FAILURES` (their latency still counts).
    """
    headers_json = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    headers_probe = {"Authorization": f"Bearer {KEY}"}
    latencies: list[float] = []
    failures: list[int] = []
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    for item in bodies:
        queue.put_nowait(item)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def worker() -> None:
            while True:
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                started = time.perf_counter()
                if item is None:
                    response = await client.post(url, headers=headers_probe)
                else:
                    response = await client.post(url, content=item, headers=headers_json)
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    failures.append(response.status_code)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    if failures:
        counts = {code: failures.count(code) for code in sorted(set(failures))}
        print(f"# {len(failures)} non-200 answers: {counts}", file=sys.stderr)
    FAILURES.append(len(failures))
    return latencies, wall


def direct_baseline(path: Path, queries: list[str], dataset: str) -> list[float]:
    from gcite.knowledge import open_store

    out: list[float] = []
    with open_store(settings_for(path)) as store:
        store.search(queries[0], dataset=dataset, roles=list(KEY_ROLES), top_k=5)  # warm-up
        for query in queries:
            started = time.perf_counter()
            store.search(query, dataset=dataset, roles=list(KEY_ROLES), top_k=5)
            out.append((time.perf_counter() - started) * 1000)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            if httpx.post(url, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not start")


def machine(load_before: tuple[float, float, float]) -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next(
        (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if "Model name" in ln), "?"
    )
    load = ", ".join(f"{x:.1f}" for x in load_before)
    return (
        f"{os.cpu_count()} CPUs (nproc), {model}, Python {platform.python_version()}, "
        f"load average before the run {load} (the machine is shared)"
    )


def row(name: str, values: list[float], wall: float | None = None) -> str:
    rate = f"{len(values) / wall:.1f}" if wall else "–"
    return (
        f"| {name} | {len(values)} | {statistics.median(values):.1f} | "
        f"{pct(values, 0.99):.1f} | {max(values):.1f} | {rate} |"
    )


SINGLE_THREAD_BLAS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Environment of the second server variant: one BLAS thread per request."""


def direct_in_child(env: dict[str, str], n: int) -> list[float]:
    """The direct-search baseline, run in a child process with ``env``."""
    out = subprocess.run(
        [sys.executable, __file__, "--direct", str(n)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    values: list[float] = json.loads(out.strip().splitlines()[-1])
    return values


def measure(
    env: dict[str, str], dataset: str, queries: list[str]
) -> dict[str, tuple[list[float], float | None]]:
    """Every run of one server variant (server started with ``env``)."""
    results: dict[str, tuple[list[float], float | None]] = {
        "direct": (direct_in_child(env, min(len(queries), 100)), None)
    }
    errors = ERRORS.setdefault(json.dumps(env, sort_keys=True), {})
    port = free_port()
    url = f"http://127.0.0.1:{port}{PREFIX}/retrieval"
    cmd = [sys.executable, __file__, "--serve", str(port)]
    proc = subprocess.Popen(cmd, env={**os.environ, **env})
    try:
        wait_ready(url, proc)
        plain = [body(q, dataset, narrowed=False) for q in queries]
        narrowed = [body(q, dataset, narrowed=True) for q in queries]
        asyncio.run(run_load(url, plain[:20], 1))  # warm-up
        runs: dict[str, Sequence[str | None]] = {
            "probe": [None] * len(queries),
            "c1": plain,
            "c1n": narrowed,
            "c20": plain,
            "c20n": narrowed,
        }
        for key, bodies in runs.items():
            concurrency = 20 if key.startswith("c20") else 1
            results[key] = asyncio.run(run_load(url, bodies, concurrency))
            errors[key] = FAILURES[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return results


ERRORS: dict[str, dict[str, int]] = {}
"""Non-200 answers per server environment and run."""

LABELS = {
    "direct": "baseline: store.search direct, no HTTP",
    "probe": "baseline: registration probe (HTTP + auth)",
    "c1": "/retrieval, 1 concurrent",
    "c1n": "/retrieval + role condition, 1 concurrent",
    "c20": "/retrieval, 20 concurrent",
    "c20n": "/retrieval + role condition, 20 concurrent",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per measured run")
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--direct", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = data_dir()
    if args.serve:
        serve(args.serve, path)
        return
    if args.direct:
        qs = questions()
        picked = [qs[i % len(qs)] for i in range(args.direct)]
        print(json.dumps(direct_baseline(path, picked, dataset_name())))
        return
    from gcite.config import Settings

    if not (CORPUS / "laws").is_dir():
        print(f"corpus not found at {CORPUS}: benchmark skipped", file=sys.stderr)
        return
    ingest(path)
    load_before = os.getloadavg()
    dataset = dataset_name()
    qs = questions()
    n = args.requests
    queries = [qs[i % len(qs)] for i in range(n)]
    env_of: dict[str, dict[str, str]] = {
        "default BLAS threads": {},
        "OMP/OPENBLAS/MKL_NUM_THREADS=1": SINGLE_THREAD_BLAS,
    }
    variants = {name: measure(env, dataset, queries) for name, env in env_of.items()}

    print(f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Machine: {machine(load_before)}.")
    print(
        f"Corpus: {dataset} (16 laws), embedder {Settings().embed.backend}, top_k 5, "
        f"{n} requests per run, key roles {KEY_ROLES}."
    )
    for name, results in variants.items():
        print()
        print(f"Server environment: {name}")
        print()
        errors = ERRORS[json.dumps(env_of[name], sort_keys=True)]
        print("| run | requests | p50 ms | p99 ms | max ms | req/s | non-200 |")
        print("|---|---|---|---|---|---|---|")
        for key, label in LABELS.items():
            values, wall = results[key]
            print(row(label, values, wall) + f" {errors.get(key, 0)} |")
        base = statistics.median(results["direct"][0])
        print()
        print(
            f"p50 ratio to direct search: 1 concurrent "
            f"{statistics.median(results['c1'][0]) / base:.2f}x, 20 concurrent "
            f"{statistics.median(results['c20'][0]) / base:.2f}x"
        )


if __name__ == "__main__":
    main()
