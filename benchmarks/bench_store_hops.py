"""The conversation store's calls of one answer, CPU per answer, two codes side by side.

Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_store_hops.py --baseline REV [--answers 300]
        [--polls 4] [--rounds 3] [--follow] [--stores sqlite,postgresql]

Per answer, through :meth:`ConversationStore.call` on uvloop, as the service makes them: the
turn's start (a follow-up's history with ``--follow``), the Plan B write, ``--polls`` stop
polls that find nothing, the outcome (six chunks of 200 characters, the metadata the
service stores). Each code runs in its own process (``PYTHONPATH`` its ``src``: ``REV``'s
exported by ``git archive``, and the working tree's), the codes alternating each round;
20 answers warm up, then ``--answers`` are timed: CPU ms per answer of the process
(``time.process_time``: the calls, the thread hand-offs, the event loop) and, on
PostgreSQL, of the server (a throwaway cluster of Debian's binaries,
``tests/support/pg.py``; the postmaster and its backends, from ``/proc``), a fresh
database per process. CPU time is what a busy machine distorts least; the load average is
printed before and after. Deterministic counts of the same calls:
``tests/service/test_store_hops.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHUNKS = [
    {"id": str(i), "content": "内容" * 100, "document_title": "标题", "score": 0.5}
    for i in range(6)
]


def server_cpu(postmaster: int) -> float:
    """CPU seconds of ``postmaster`` and its children (exited ones included)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == postmaster or int(fields[1]) == postmaster:
            total += sum(int(v) for v in fields[11:15]) / tick
    return total


async def answers(url: str, count: int, polls: int, follow: bool, postmaster: int) -> str:
    """Run 20 + ``count`` answers' store calls; ``"<client ms> <server ms>"`` per answer."""
    from gcite.service.store import ConversationStore

    store = ConversationStore(url)
    metadata = {"usage": {"prompt_tokens": 100}, "retriever_resources": CHUNKS[:2]}
    conversation: str | None = None

    async def one() -> None:
        nonlocal conversation
        if hasattr(store, "start_turn"):
            record, _ = await store.call(
                store.start_turn,
                user="u",
                query="问题",
                inputs={},
                conversation_id=conversation,
                history=10,
            )
        else:  # a code before start_turn: the row, then the history

            def start() -> Any:
                row = store.start_message(
                    user="u", query="问题", inputs={}, conversation_id=conversation
                )
                if conversation:
                    store.history(row.conversation_id, limit=10)
                return row

            record = await store.call(start)
        if follow:
            conversation = record.conversation_id
        await store.call(store.set_chunks, record.id, CHUNKS)
        for _ in range(polls):
            await store.call(store.take_stops, ["task"])
        await store.call(
            store.finish_message,
            record.id,
            answer="答" * 40,
            status="normal",
            cited_ids=["1"],
            metadata=metadata,
        )

    for _ in range(20):
        await one()
    server = server_cpu(postmaster) if postmaster else 0.0
    start = time.process_time()
    for _ in range(count):
        await one()
    client = (time.process_time() - start) / count * 1000
    server = (server_cpu(postmaster) - server) / count * 1000 if postmaster else 0.0
    store.close()
    return f"{client:.3f} {server:.3f}"


def child(args: argparse.Namespace) -> None:
    import uvloop

    postmaster = int(os.environ.get("BENCH_POSTMASTER", "0"))
    print(uvloop.run(answers(args.url, args.answers, args.polls, args.follow, postmaster)))


def postmaster_of(port: str) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_text()
            except OSError:
                continue
            if f"port={port}" in command and "postgres" in command and "pg_ctl" not in command:
                return int(entry.name)
    raise RuntimeError("the PostgreSQL server's postmaster was not found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="")
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("--polls", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--follow", action="store_true", help="every answer a follow-up")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if not args.baseline:
        parser.error("--baseline REV is required")
    sys.path.insert(0, str(REPO / "tests"))
    from support.pg import _serve, fresh_database, pg_bin_dir

    work = Path(tempfile.mkdtemp(prefix="bench-store-hops-"))
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", args.baseline, "src"],
        check=True,
        capture_output=True,
    ).stdout
    (work / "baseline.tar").write_bytes(archive)
    with tarfile.open(work / "baseline.tar") as tar:
        tar.extractall(work / "baseline", filter="data")
    codes = {args.baseline: work / "baseline" / "src", "current": REPO / "src"}
    print("load before", Path("/proc/loadavg").read_text().strip(), flush=True)
    server = _serve(pg_bin_dir()) if "postgresql" in args.stores else None
    pg_url = next(server) if server is not None else ""
    postmaster = postmaster_of(pg_url.rsplit(":", 1)[1].split("/")[0]) if pg_url else 0
    try:
        for store in args.stores.split(","):
            for round_ in range(args.rounds):
                names = list(codes) if round_ % 2 == 0 else list(reversed(codes))
                for name in names:
                    url = (
                        fresh_database(pg_url, "hops")
                        if store == "postgresql"
                        else f"sqlite:///{work / f'{name}-{round_}.sqlite3'}"
                    )
                    command = [sys.executable, __file__, "--child", "--url", url]
                    command += ["--answers", str(args.answers), "--polls", str(args.polls)]
                    command += ["--follow"] if args.follow else []
                    env = {
                        **os.environ,
                        "PYTHONPATH": str(codes[name]),
                        "BENCH_POSTMASTER": str(postmaster),
                    }
                    out = subprocess.run(command, env=env, capture_output=True, text=True)
                    client, server_ms = (out.stdout.split() or ["?", "?"])[:2]
                    print(
                        f"{store} round {round_ + 1} {name}: client {client} ms, "
                        f"server {server_ms} ms per answer {out.stderr[-300:]}",
                        flush=True,
                    )
    finally:
        if server is not None:
            next(server, None)
    print("load after", Path("/proc/loadavg").read_text().strip())


if __name__ == "__main__":
    main()
