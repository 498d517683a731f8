"""``gcite eval`` on the shared law development questions (skips without the corpus).

The run is the CLI's own (questions file -> :class:`~gcite.eval.runner.LocalAsker` ->
verdicts -> report) on the session's ingested law corpus, by a caller holding every role
of ``laws.meta.json``. Gold articles are judged from the cited chunks' text.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gcite.eval import load_questions, render_html, report_document
from gcite.eval.runner import LocalAsker, run_questions

pytestmark = pytest.mark.corpus


def test_eval_runs_on_the_law_dev_questions(law_store: Any, corpus_dir: Path) -> None:
    questions = load_questions(corpus_dir / "laws-qa.dev.jsonl")
    meta = json.loads((corpus_dir / "laws.meta.json").read_text("utf-8"))["documents"]
    roles = sorted({r for d in meta.values() for r in (d.get("access_roles") or [])})
    asker = LocalAsker(law_store.settings, roles, store=law_store.store)
    verdicts = asyncio.run(run_questions(questions, asker))
    assert len(verdicts) == len(questions) and all(v.error is None for v in verdicts)
    by_id = {q.id: q for q in questions}
    for verdict in verdicts:
        question = by_id[verdict.id]
        assert verdict.answerable == bool(question.gold_articles)
        if question.answerable:
            assert verdict.gold_cited is not None
            # every cited gold chunk is from a gold file and holds a gold article
            gold = {(g.doc, g.article) for g in question.gold_articles}
            for source in verdict.sources:
                if source["gold"]:
                    assert any((source["document"], a) in gold for a in source["articles"])
        else:
            assert verdict.outcome in ("refused", "answered_unanswerable")
    summary = report_document(
        verdicts, target={"mode": "local"}, questions_file="dev", generated_at="t"
    )["summary"]
    # the articles of cited chunks are recognised: some answers cite a gold article
    assert summary["gold_cited"]["n"] > 0 and summary["citation_precision"]["of"] > 0
    assert summary["unanswerable_refused"]["of"] == sum(not q.answerable for q in questions)
    page = render_html(report_document(verdicts, target={}, questions_file="", generated_at=""))
    assert page.count("<tr class=") == len(questions)
