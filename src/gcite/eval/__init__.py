"""Evaluation of answers on a question set (``gcite eval``; ``docs/eval.md``).

:mod:`~gcite.eval.questions` reads the JSONL question file, :mod:`~gcite.eval.runner`
asks each question in process or through a running service, :mod:`~gcite.eval.scoring`
judges each answer and totals the figures, :mod:`~gcite.eval.report` writes the JSON and
the HTML report.
"""

from __future__ import annotations

from gcite.eval.questions import EvalQuestion, GoldArticle, PriorTurn, load_questions, parse_lines
from gcite.eval.report import render_html, report_document
from gcite.eval.scoring import Observation, Verdict, aggregate, judge

__all__ = [
    "EvalQuestion",
    "GoldArticle",
    "Observation",
    "PriorTurn",
    "Verdict",
    "aggregate",
    "judge",
    "load_questions",
    "parse_lines",
    "render_html",
    "report_document",
]
