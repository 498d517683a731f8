"""The client-rule vectors (tests/vectors/*.v1.json), the same files the JavaScript client
runs (clients/js/test/rules.test.js): error sentences, source rows and sheets, the
verification display, the notice under an answer that may not answer, the copy text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gcite.stream.messages import ERROR_SENTENCES, error_text
from gcite.stream.panel import source_rows, source_sheet
from gcite.stream.render import copy_text
from gcite.verify.terminal import (
    NOT_ANSWERED_TEXT,
    answer_notice,
    notice_line,
    notice_text,
    support_display,
    support_line,
    support_lines,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def _source_rows(case: dict[str, Any]) -> Any:
    panel = case["panel"]
    return {
        "rows": source_rows(panel, case["weak"]),
        "sheets": [source_sheet(entry) for entry in panel],
    }


def _verification(case: dict[str, Any]) -> Any:
    return [dict(view, line=support_line(view)) for view in support_display(case["report"])]


RULES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "error-text": lambda case: error_text(case["error"]),
    "source-rows": _source_rows,
    "verification-display": _verification,
    "answer-notice": lambda case: dict(
        answer_notice(case["report"]), text=notice_text(case["report"])
    ),
    "copy-text": lambda case: copy_text(case["segments"], case["panel"]),
}


def _cases() -> list[Any]:
    out = []
    for kind in RULES:
        doc = json.loads((VECTORS / f"{kind}.v1.json").read_text(encoding="utf-8"))
        assert doc["kind"] == kind and len(doc["cases"]) >= 4
        out.extend(pytest.param(kind, case, id=f"{kind}:{case['name']}") for case in doc["cases"])
    return out


@pytest.mark.parametrize(("kind", "case"), _cases())
def test_client_rule_vector(kind: str, case: dict[str, Any]) -> None:
    assert RULES[kind](case) == case["expect"]


def test_provider_text_is_never_shown() -> None:
    doc = json.loads((VECTORS / "error-text.v1.json").read_text(encoding="utf-8"))
    for case in doc["cases"]:
        message = (case["error"] or {}).get("message") if isinstance(case["error"], dict) else None
        if isinstance(message, str) and message:
            assert message not in case["expect"]
        assert not any("a" <= ch.lower() <= "z" for ch in case["expect"].replace("API Key", ""))


def test_every_error_code_has_its_case() -> None:
    doc = json.loads((VECTORS / "error-text.v1.json").read_text(encoding="utf-8"))
    codes = {case["error"].get("code") for case in doc["cases"] if isinstance(case["error"], dict)}
    assert set(ERROR_SENTENCES) <= codes, set(ERROR_SENTENCES) - codes


def test_malformed_reports_do_not_raise() -> None:
    assert support_lines({"sentences": ["x"]}) == {}
    assert support_lines({"sentences": [{"citations": ["2", None, 3]}]}) == {}
    assert support_lines(["not", "a", "report"]) == {}


def test_the_terminal_notice_names_the_unanswered_parts() -> None:
    report = {
        "answers_question": False,
        "answering": {"parts": [{"text": "巡检终端\x1b[31m多少钱", "answered": False}]},
    }
    assert notice_line(report) == f"⚠ {NOT_ANSWERED_TEXT}：“巡检终端 [31m多少钱”"
    assert notice_text(report) == f"{NOT_ANSWERED_TEXT}：“巡检终端\x1b[31m多少钱”"
    assert notice_line({"answers_question": False}) == f"⚠ {NOT_ANSWERED_TEXT}"
    assert notice_line({"answers_question": True}) is None and notice_line(None) is None
