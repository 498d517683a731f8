"""The shared citation vectors, and the ``gcite vectors`` conformance runner (issue 3 item 5)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gcite.cli.vectors import vectors
from gcite.stream.vectors import WAYS, run_vectors, vectors_problem


@pytest.fixture(scope="module", params=["citation-stream.v2.json", "citation-stream.json"])
def vectors_file(shared_dir: Path, request: pytest.FixtureRequest) -> Path:
    # version 2 is the contract; version 1's cases still hold (the runner takes any file)
    path = shared_dir / "vectors" / str(request.param)
    if not path.is_file():
        pytest.skip(f"vectors file not found at {path}")
    return path


@pytest.fixture(scope="module")
def doc(vectors_file: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(vectors_file.read_text(encoding="utf-8"))
    return loaded


def test_every_vector_passes_all_three_ways(doc: dict[str, Any]) -> None:
    assert vectors_problem(doc) is None
    results = run_vectors(doc)
    assert len(results) == len(doc["cases"]) > 0
    assert [(r.name, r.failures) for r in results if not r.ok] == []
    assert [way for way, _ in WAYS] == ["as given", "one delta", "one character per delta"]


def test_cli_passes_the_shared_file(vectors_file: Path, doc: dict[str, Any]) -> None:
    result = CliRunner().invoke(vectors, [str(vectors_file)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"{len(doc['cases'])} passed, 0 failed"]


def test_console_script_runs_the_shared_file(vectors_file: Path, doc: dict[str, Any]) -> None:
    script = Path(sys.executable).with_name("gcite")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "gcite.cli"]
    proc = subprocess.run([*cmd, "vectors", str(vectors_file)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"{len(doc['cases'])} passed, 0 failed"


def test_cli_reports_each_failing_case_and_exits_1(tmp_path: Path, doc: dict[str, Any]) -> None:
    broken = copy.deepcopy(doc)
    broken["cases"][0]["expect"]["citations"] = [["999", 1]]
    broken["cases"][1]["expect"]["segments"] = []
    path = tmp_path / "v.json"
    path.write_text(json.dumps(broken, ensure_ascii=False), encoding="utf-8")
    result = CliRunner().invoke(vectors, [str(path)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    n = len(doc["cases"])
    assert lines[-1] == f"{n - 2} passed, 2 failed"
    assert len(lines) == 3
    name = doc["cases"][0]["name"]
    assert lines[0].startswith(f"失败 {name} [as given, one delta, one character per delta]：")
    assert '"999"' in lines[0]


def test_cli_counts_passed_and_failed_cases(tmp_path: Path) -> None:
    doc = {"version": 1, "cases": [
        {"name": "ok", "known_ids": None, "deltas": ["a[C:1]"],
         "expect": {"segments": [{"text": "a"}, {"cite": "1", "idx": 1}],
                    "citations": [["1", 1]], "invalid": []}},
        {"name": "wrong", "known_ids": ["1"], "deltas": ["a"],
         "expect": {"segments": [{"text": "b"}], "citations": [], "invalid": []}},
    ]}  # fmt: skip
    path = tmp_path / "v.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(vectors, [str(path)])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "1 passed, 1 failed"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "JSON"),
        (b'{"cases": 3}', "cases"),
        (b'{"cases": [{"deltas": "abc", "expect": {}}]}', "deltas"),
        (b'{"cases": [{"deltas": [], "known_ids": "1", "expect": {}}]}', "known_ids"),
        (b'{"cases": [{"deltas": []}]}', "expect"),
        (b'{"cases": [{"deltas": [], "expect": {"segments": {}}}]}', "segments"),
        (b"\xff\xfe\x00", "无法读取"),
    ],
)
def test_cli_malformed_file_exits_2_with_one_line(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    path = tmp_path / "v.json"
    path.write_bytes(content)
    result = CliRunner().invoke(vectors, [str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and needle in result.stderr


def test_cli_missing_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(vectors, [str(tmp_path / "absent.json")])
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and "无法读取" in result.stderr


def test_lone_surrogates_in_a_vectors_file_never_crash_the_runner(tmp_path: Path) -> None:
    # A vectors file may hold lone surrogates as JSON escapes (a pair split across two
    # model deltas). The parser joins the pair and replaces a lone half with U+FFFD;
    # a failing case with such text in its expectation is reported, not a traceback.
    case = {"name": "split", "known_ids": None, "deltas": ["a\ud83d", "\ude00b", "c\udc00"]}
    good = {**case, "expect": {"segments": [{"text": "a😀bc\ufffd"}]}}
    bad = {**case, "name": "bad", "expect": {"segments": [{"text": "a😀bc\udc00"}]}}
    path = tmp_path / "surrogates.json"
    path.write_text(json.dumps({"version": 2, "cases": [good, bad]}), "utf-8")  # ASCII escapes
    script = Path(sys.executable).with_name("gcite")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "gcite.cli"]
    proc = subprocess.run([*cmd, "vectors", str(path)], capture_output=True, text=True)
    assert (proc.returncode, proc.stderr) == (1, "")
    lines = proc.stdout.splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert lines[0].startswith("失败 bad") and "\\udc00" in lines[0]
