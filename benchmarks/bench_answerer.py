"""The offline extractive answerer on two question sets (issue 15, item 4).

1. **Handbook** (``benchmarks/data/handbook-qa.jsonl``): natural questions as building
   staff ask them - colloquial, with typos and follow-ups - over the demo's sample data
   (handbook in the knowledge base + the saved web pages, exactly as ``gcite demo``
   serves them, with the question's roles). A question is answered correctly when the
   answer holds every listed fact (each fact: any of its spellings, spaces ignored); an
   unanswerable one when the answer is exactly "根据现有资料无法确定". A follow-up is
   asked after its previous question, whose answer goes into the history.
2. **Law development questions** (``../shared/corpus/laws-qa.dev.jsonl``) on the law
   corpus (knowledge base only): share of answerable questions whose answer cites a
   chunk holding a gold (or alternative gold) article, citation precision (cited chunks
   holding one / all cited chunks), and share of unanswerable questions refused. The
   caller holds every role of ``laws.meta.json`` (every document is visible).
3. **Off-topic** (``benchmarks/data/offtopic.dev.jsonl``, issue 14): after each set, its
   40 questions on the same data; share answered exactly "根据现有资料无法确定".

Every question runs through the real chatflow (:class:`gcite.chatflow.run.ChatRun`):
hybrid retrieval, the merge node, the backend. Run:
``.venv/bin/python benchmarks/bench_answerer.py [--set handbook|laws|both] [-v]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

from lawset import CORPUS, gold_of, law_chunks, open_law_store, questions

HANDBOOK_QA = Path(__file__).resolve().parent / "data" / "handbook-qa.jsonl"
OFFTOPIC = Path(__file__).resolve().parent / "data" / "offtopic.dev.jsonl"


def _offtopic() -> list[str]:
    """The questions of the off-topic development set (issue 14)."""
    lines = OFFTOPIC.read_text("utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


async def _ask(deps: Any, query: str, roles: list[str], history: list[dict[str, Any]]) -> Any:
    from gcite.chatflow.history import History
    from gcite.chatflow.run import ChatRun, Turn

    run = ChatRun(Turn(query, tuple(roles), History(turns=history)), deps)
    async for _ in run.events():
        pass
    return run.summary()


def _norm(text: str) -> str:
    return "".join(text.split())


def handbook(verbose: bool) -> dict[str, Any]:
    """Run the handbook set; returns counts and the failures."""
    import tempfile

    from gcite.chatflow.run import Deps
    from gcite.cli.demo import demo_settings, prepare_demo
    from gcite.generate.factory import make_backend
    from gcite.generate.prompt import NO_ANSWER
    from gcite.knowledge import open_store
    from gcite.stream import strip_markers
    from gcite.web import make_web_source

    rows = [json.loads(line) for line in HANDBOOK_QA.read_text("utf-8").splitlines() if line]
    data_dir = Path(
        os.environ.get("GCITE_BENCH_DEMO", Path(tempfile.gettempdir()) / "gcite-bench-demo")
    )
    settings = demo_settings(data_dir)
    prepare_demo(settings)
    store = open_store(settings)
    backend = make_backend(settings, store.handles.embedders)  # one loaded model
    backend.warm_up()

    off: list[dict[str, Any]] = []

    async def run_all() -> list[dict[str, Any]]:
        web = make_web_source(settings)
        deps = Deps(settings=settings, backend=backend, get_store=lambda: store, web_source=web)
        out = []
        try:
            for row in rows:
                history: list[dict[str, Any]] = []
                for previous in row["history"]:
                    before = await _ask(deps, previous, row["roles"], [])
                    history.append({"query": previous, "answer": before.answer})
                t0 = time.perf_counter()
                summary = await _ask(deps, row["question"], row["roles"], history)
                answer = strip_markers(summary.answer)
                if row["answerable"]:
                    ok = all(any(_norm(v) in _norm(answer) for v in fact) for fact in row["facts"])
                else:
                    ok = answer.strip() == NO_ANSWER
                out.append(
                    {
                        **row,
                        "answer": answer,
                        "ok": ok,
                        "cited": len(set(summary.cited_ids)),
                        "ms": (time.perf_counter() - t0) * 1000,
                    }
                )
            for question in _offtopic():
                summary = await _ask(deps, question, [], [])
                answer = strip_markers(summary.answer).strip()
                off.append({"question": question, "answer": answer, "ok": answer == NO_ANSWER})
        finally:
            if web is not None:
                await web.aclose()
        return out

    results = asyncio.run(run_all())
    store.close()
    if verbose:
        for r in results:
            mark = "OK " if r["ok"] else "BAD"
            print(f"{mark} {r['id']} {r['question']} -> {r['answer'][:160]}", file=sys.stderr)
        for r in off:
            if not r["ok"]:
                print(f"OFF {r['question']} -> {r['answer'][:160]}", file=sys.stderr)
    answerable = [r for r in results if r["answerable"]]
    unanswerable = [r for r in results if not r["answerable"]]
    return {
        "total": len(results),
        "correct": sum(r["ok"] for r in results),
        "answerable": len(answerable),
        "answerable_ok": sum(r["ok"] for r in answerable),
        "unanswerable": len(unanswerable),
        "refused": sum(r["ok"] for r in unanswerable),
        "failures": [r for r in results if not r["ok"]],
        "median_ms": sorted(r["ms"] for r in results)[len(results) // 2],
        "offtopic": len(off),
        "offtopic_refused": sum(r["ok"] for r in off),
    }


def laws(verbose: bool) -> dict[str, Any]:
    """Run the law dev questions; returns the three shares."""
    from gcite.chatflow.run import Deps
    from gcite.generate.factory import make_backend
    from gcite.generate.prompt import NO_ANSWER
    from gcite.stream import strip_markers

    articles = {c.content: (c.doc, c.articles) for c in law_chunks()}
    store, settings = open_law_store()
    backend = make_backend(settings, store.handles.embedders)  # one loaded model
    backend.warm_up()
    deps = Deps(settings=settings, backend=backend, get_store=lambda: store, web_source=None)
    meta = json.loads((CORPUS / "laws.meta.json").read_text("utf-8"))["documents"]
    # a caller holding every role of the corpus: the answerer is measured, not access
    roles = sorted({r for d in meta.values() for r in (d.get("access_roles") or [])})
    rows = questions()
    hit = cited_total = cited_gold = refused = answerable = unanswerable = 0
    for row in rows:
        summary = asyncio.run(_ask(deps, row["question"], roles, []))
        by_id = {str(c["id"]): c for c in summary.chunk_metadata}
        cited = [by_id[i] for i in dict.fromkeys(summary.cited_ids) if i in by_id]
        gold = gold_of(row)
        holds = []
        for chunk in cited:
            doc, arts = articles.get(str(chunk.get("content")), ("", ()))
            holds.append(any((doc, a) in gold for a in arts))
        answer = strip_markers(summary.answer).strip()
        if gold:
            answerable += 1
            hit += any(holds)
            cited_total += len(holds)
            cited_gold += sum(holds)
        else:
            unanswerable += 1
            refused += answer == NO_ANSWER
        if verbose:
            mark = "REF" if answer == NO_ANSWER else ("HIT" if any(holds) else "MISS")
            line = f"{mark} {row['id']} {row['kind']} {row['question'][:30]}"
            print(f"{line} -> {holds} {answer[:120]}", file=sys.stderr)
    off_refused = 0
    for question in _offtopic():
        summary = asyncio.run(_ask(deps, question, roles, []))
        answer = strip_markers(summary.answer).strip()
        off_refused += answer == NO_ANSWER
        if verbose and answer != NO_ANSWER:
            print(f"OFF {question} -> {answer[:120]}", file=sys.stderr)
    store.close()
    return {
        "offtopic": len(_offtopic()),
        "offtopic_refused": off_refused,
        "answerable": answerable,
        "gold_cited": hit / max(1, answerable),
        "precision": cited_gold / max(1, cited_total),
        "cited": cited_total,
        "unanswerable": unanswerable,
        "refused": refused / max(1, unanswerable),
        "refused_n": refused,
        "hit_n": hit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", default="both", choices=["handbook", "laws", "both"])
    parser.add_argument("-v", "--verbose", action="store_true", help="every answer on stderr")
    args = parser.parse_args()
    load = os.getloadavg()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"Date: {now}. Machine: {platform.machine()}, nproc {os.cpu_count()}, Python ")
    print(
        f"{platform.python_version()}; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}."
    )
    print()
    if args.set in ("handbook", "both"):
        h = handbook(args.verbose)
        print(
            f"Handbook set: {h['correct']}/{h['total']} correct ({h['correct'] / h['total']:.0%}); "
            f"answerable {h['answerable_ok']}/{h['answerable']}, "
            f"unanswerable refused {h['refused']}/{h['unanswerable']}; "
            f"median {h['median_ms']:.0f} ms per question (retrieval + answer); "
            f"off-topic refused {h['offtopic_refused']}/{h['offtopic']}."
        )
        for r in h["failures"]:
            print(f"- {r['id']} {r['question']} -> {r['answer'][:100]}")
        print()
    if args.set in ("laws", "both"):
        if not (CORPUS / "laws").is_dir():
            print(f"Law questions skipped: no corpus under {CORPUS}")
            return
        w = laws(args.verbose)
        print(
            f"Law dev questions: gold-article chunk cited for {w['hit_n']}/{w['answerable']} "
            f"answerable ({w['gold_cited']:.2f}); citation precision {w['precision']:.2f} "
            f"({w['cited']} cited chunks); unanswerable refused {w['refused_n']}/"
            f"{w['unanswerable']} ({w['refused']:.2f}); "
            f"off-topic refused {w['offtopic_refused']}/{w['offtopic']}."
        )


if __name__ == "__main__":
    main()
