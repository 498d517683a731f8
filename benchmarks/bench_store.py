"""CPU and latency of the conversation store's per-stream writes (issue 19).

Each message does the three writes a chat stream does: ``start_message`` (a new
conversation), ``set_chunks`` (five chunks of 400 characters, the merge node's
``chunk_metadata``) and ``finish_message`` (an answer, the same five chunks as retriever
resources, cited ids, metadata). Messages run in 1, 8 and 40 threads on one
``ConversationStore`` (the service calls it from worker threads); per level it reports the
process CPU time (user + system, ``getrusage``) and wall time per message, and the p50 /
p99 time of one message's three calls. On PostgreSQL the CPU is this process's only (the
server's is not counted).

Run: ``.venv/bin/python benchmarks/bench_store.py [--messages 800]
[--database-url postgresql://user:pw@host/db]`` (default: a SQLite file in a temporary
directory). Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from typing import Any

from gcite.service.store import ConversationStore

CHUNKS: list[dict[str, Any]] = [
    {"id": str(i), "content": "监控中心备用钥匙" * 50, "document_title": "值守规程", "score": 0.8}
    for i in range(1, 6)
]
WARM_UP = 20


def one_message(store: ConversationStore) -> float:
    """The three writes of one stream; returns their wall time (s)."""
    start = time.perf_counter()
    record = store.start_message(user="bench-user", query="监控中心的备用钥匙放在哪里？", inputs={})
    store.set_chunks(record.id, CHUNKS)
    store.finish_message(
        record.id,
        answer="备用钥匙在三号保险柜[C:1]。" * 10,
        status="normal",
        cited_ids=["1"],
        metadata={"retriever_resources": CHUNKS, "gcite": {"cited_ids": ["1"]}},
    )
    return time.perf_counter() - start


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_level(store: ConversationStore, threads: int, messages: int) -> dict[str, float]:
    per_thread = messages // threads
    latencies: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        mine = [one_message(store) for _ in range(per_thread)]
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    cpu, wall = cpu_seconds(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    done = per_thread * threads
    latencies.sort()
    return {
        "cpu_ms": cpu / done * 1000,
        "wall_ms": wall / done * 1000,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=800, help="messages per level")
    parser.add_argument("--threads", default="1,8,40", help="comma-separated thread counts")
    parser.add_argument("--database-url", default="", help="default: a temporary SQLite file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gcite-bench-store-") as tmp:
        url = args.database_url or f"sqlite:///{tmp}/conversations.sqlite3"
        store = ConversationStore(url)
        try:
            for _ in range(WARM_UP):
                one_message(store)
            database = store.engine.dialect.name
            print(
                f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {cpu_model()}"
                f" x{os.cpu_count()}, Python {platform.python_version()},"
                f" load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
            )
            print()
            print("| database | threads | CPU ms/message | wall ms/message | p50 ms | p99 ms |")
            print("|---|---|---|---|---|---|")
            for threads in (int(n) for n in args.threads.split(",")):
                row = run_level(store, threads, args.messages)
                print(
                    f"| {database} | {threads} | {row['cpu_ms']:.2f} | {row['wall_ms']:.2f}"
                    f" | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} |"
                )
        finally:
            store.close()


if __name__ == "__main__":
    main()
