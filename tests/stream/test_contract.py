"""The Dify stream contract (docs/stream-contract.md): its vectors, fed every way."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gcite.cli.vectors import vectors
from gcite.stream.contract import (
    WAYS,
    case_bytes,
    run_consumer,
    run_stream_vectors,
    stream_vectors_problem,
)
from gcite.stream.panel import safe_url
from gcite.stream.sse import WARNING_KINDS

REPO = Path(__file__).resolve().parents[2]
FILE = REPO / "tests" / "vectors" / "dify-stream.v1.json"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FILE.read_text(encoding="utf-8"))
    return loaded


def test_every_case_passes_whole_byte_by_byte_and_in_random_cuts(doc: dict[str, Any]) -> None:
    assert stream_vectors_problem(doc) is None
    results = run_stream_vectors(doc)
    assert len(results) == len(doc["cases"]) >= 30
    assert [(r.name, r.failures[:1]) for r in results if not r.ok] == []
    assert [way for way, _ in WAYS][:2] == ["whole", "byte by byte"]
    assert len(WAYS) == 7


def test_the_vectors_cover_the_contract(doc: dict[str, Any]) -> None:
    """Every warning kind, every output kind, both panel sources and the measured
    differences between the two clients appear in some case."""
    results = [case["expect"]["result"] for case in doc["cases"]]
    outputs = [o for case in doc["cases"] for o in case["expect"]["outputs"]]
    assert {w for r in results for w in r["warnings"]} == set(WARNING_KINDS)
    assert {next(iter(o)) for o in outputs} == {"metadata", "segments", "replace", "error"}
    assert {r["panel_source"] for r in results} == {"chunk_metadata", "retriever_resources", "none"}
    by_name = {case["name"]: case["expect"] for case in doc["cases"]}
    assert by_name["frame_without_event"]["result"]["answer"] == "见"
    assert by_name["error_numeric_code"]["result"]["error"]["code"] == "500"
    assert by_name["url_rule_fails_closed"]["result"]["panel"][0]["url"] is None
    assert by_name["reasoning_block_never_cites"]["result"]["citations"] == [["2", 1]]
    assert any(r["reasoning"] for r in results)
    assert safe_url("https://@evil.example") is None


def test_a_wrong_expectation_fails_every_way(doc: dict[str, Any]) -> None:
    case = json.loads(json.dumps(doc["cases"][0]))
    case["expect"]["result"]["warnings"] = ["no_event"]
    result = run_stream_vectors({"cases": [case]})[0]
    assert not result.ok and len(result.failures) == len(WAYS)


def test_bytes_that_are_not_utf8_travel_as_base64(doc: dict[str, Any]) -> None:
    case = next(c for c in doc["cases"] if "sse_base64" in c)
    data = case_bytes(case)
    assert data.startswith(b"\xef\xbb\xbf") and b"\xff" in data
    assert run_consumer([data]) == case["expect"]


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"kind": "dify-stream"}, 'no "cases" array'),
        ({"cases": [{"sse": 1, "expect": {}}]}, '"sse" or "sse_base64" must be a string'),
        ({"cases": [{"sse_base64": "%%", "expect": {}}]}, '"sse_base64" is not base64'),
        ({"cases": [{"sse": "", "expect": {"outputs": []}}]}, '"expect.result" must be an object'),
    ],
)
def test_malformed_documents_are_described(doc: dict[str, Any], problem: str) -> None:
    assert problem in (stream_vectors_problem(doc) or "")


def test_cli_runs_the_stream_vectors(doc: dict[str, Any]) -> None:
    result = CliRunner().invoke(vectors, [str(FILE)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"{len(doc['cases'])} passed, 0 failed"


def test_javascript_runner_passes_the_same_file(doc: dict[str, Any]) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not available")
    runner = REPO / "clients" / "js" / "bin" / "vectors.mjs"
    proc = subprocess.run([node, str(runner), str(FILE)], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1:] == [f"{len(doc['cases'])} passed, 0 failed"], proc.stdout
    assert proc.returncode == 0
