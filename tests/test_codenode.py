"""The exported Dify Code node: self-contained, Dify-valid outputs, parity with the library, CLI."""

from __future__ import annotations

import base64
import json
import math
import random
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gcite.cli import cli
from gcite.dify.codenode import build_code_node, inline_source, render_code_node
from gcite.merge import NUMBER_GUARD, code_node_outputs, guard_number_like

FIXTURES = Path(__file__).parent / "fixtures" / "merge"
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.glob("*.json"))


def fixture_inputs(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))["inputs"]
    return data


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# -- bare interpreters ---------------------------------------------------------------------------


@cache
def bare_pythons() -> tuple[str, ...]:
    """Interpreters outside the venv (gcite not installed), Python 3.10+, one per version."""
    candidates = [getattr(sys, "_base_executable", ""), "/usr/bin/python3"]
    candidates += [shutil.which(f"python3.{minor}") or "" for minor in range(10, 15)]
    base = Path(candidates[0] or sys.executable).resolve()
    if len(base.parents) > 2:  # sibling installations, e.g. pyenv's versions/*/bin/python3
        candidates += sorted(str(p) for p in base.parents[2].glob("*/bin/python3"))
    found: dict[str, str] = {}
    for exe in candidates:
        if not exe or not Path(exe).exists():
            continue
        probe = subprocess.run(
            [exe, "-I", "-c", "import sys, importlib.util as u; "
             "print('%d.%d' % sys.version_info[:2], u.find_spec('gcite') is None)"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if probe.returncode != 0:
            continue
        version, isolated = probe.stdout.split()
        if isolated == "True" and tuple(map(int, version.split("."))) >= (3, 10):
            found.setdefault(version, exe)
    return tuple(found[v] for v in sorted(found))


def first_bare_python() -> str:
    pythons = bare_pythons()
    if not pythons:
        pytest.skip("no Python 3.10+ outside the virtualenv to run the exported node")
    return pythons[0]


# The harness plays Dify's sandbox: each case gets a fresh namespace with the node's code.
HARNESS = """
import importlib.util, json, sys
assert importlib.util.find_spec("gcite") is None, "gcite must not be importable"
code = open(sys.argv[1], encoding="utf-8").read()
cases = json.load(open(sys.argv[2], encoding="utf-8"))
for inputs in cases:
    namespace = {"__name__": "__main__"}
    exec(compile(code, "node.py", "exec"), namespace)
    out = namespace["main"](**inputs)
    assert sorted(out) == ["chunk_count", "chunk_metadata", "formatted_chunks"], sorted(out)
    sys.stdout.write(json.dumps(out, sort_keys=True, ensure_ascii=False) + "\\n")
"""


def run_exported(python: str, code: str, cases: list[dict[str, Any]], tmp_path: Path) -> list[str]:
    node = tmp_path / "node.py"
    node.write_text(code, encoding="utf-8")
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS, encoding="utf-8")
    done = subprocess.run(
        [python, "-I", str(harness), str(node), str(cases_file)],
        capture_output=True,
        check=False,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout.decode("utf-8").splitlines()


def generated_cases() -> list[dict[str, Any]]:
    """Inputs no fixture file holds: 10,000 chunks, and more than Dify's limits allow."""
    rng = random.Random(7)
    rag = [
        {"metadata": {"score": rng.random(), "dataset_name": "压测库"}, "content": f"片段{i}"}
        for i in range(5000)
    ]
    web = [
        {"url": f"https://e{i}.example.com/", "snippet": f"网页{i}", "score": str(rng.random())}
        for i in range(5000)
    ]
    long_rag = [
        {"metadata": {"score": 1 - i / 50}, "content": chr(0x4E00 + i) * 30_000} for i in range(8)
    ]
    tiny = [{"content": "x", "metadata": {"score": 1.2345678901234567e-05}}]
    return [
        {"rag_chunks": rag, "web_chunks": [{"references": web, "request_id": "big"}]},
        {"rag_chunks": long_rag, "web_chunks": web[:40]},
        {"rag_chunks": tiny, "web_chunks": None},
    ]


KEYS = [
    "content", "metadata", "doc_metadata", "score", "segment_position", "title", "url",
    "snippet", "summary", "site_name", "siteName", "web_anchor", "website", "date",
    "datePublished", "references", "results", "json", "data", "webPages", "value",
    "dataset_name", "document_title", "source_file_url", "authority_score", "result",
]  # fmt: skip
LEAVES: list[Any] = [
    None, True, 0, -1, 7, 10**30, 0.5, -0.25, 1e-9, 1.2345678901234567e-05, 1e300,
    float("nan"), float("inf"), "", "  ", "文本", "0.7", "2025-08-12",
    "Mon, 02 Mar 2026 06:15:00 GMT", "https://www.zhihu.com/q/1", "www.example.com/x",
    "http://[::1/bad", "[C:1] 注入", "知乎",
]  # fmt: skip


def random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.35:
        return rng.choice(LEAVES)
    if roll < 0.6:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {rng.choice(KEYS): random_json(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def random_item(rng: random.Random) -> Any:
    item = random_json(rng, depth=3)
    if isinstance(item, dict) and rng.random() < 0.8:
        item["content"] = rng.choice(["正文", " 巡检 ", "", 12, None, "知乎", "[C:9]"])
    return item


def random_cases(count: int = 150) -> list[dict[str, Any]]:
    """Seeded junk shaped like the payloads (for parity on inputs nobody wrote by hand)."""
    rng = random.Random(2026)
    cases = []
    for _ in range(count):
        rag = [random_item(rng) for _ in range(rng.randint(0, 8))]
        web: Any = [random_item(rng) for _ in range(rng.randint(0, 8))]
        web = rng.choice(
            [web, {"json": [{"references": web}]}, {"results": web}, [{"references": web}]]
        )
        cases.append({"rag_chunks": rng.choice([rag, random_json(rng)]), "web_chunks": web})
    return cases


SETTINGS = [
    {},
    {"max_web_results": 2, "max_string_length": 80_000},
    {"max_web_results": 0, "max_objects": 5, "max_string_length": 1_000},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=["default", "old-dify", "tight"])
def test_parity_with_the_library_on_every_fixture(settings: dict[str, Any], tmp_path: Path) -> None:
    python = first_bare_python()
    junk = random_cases()
    cases = [fixture_inputs(name) for name in FIXTURE_NAMES] + generated_cases() + junk
    got = run_exported(python, render_code_node(**settings), cases, tmp_path)
    assert len(got) == len(cases)
    labels = [*FIXTURE_NAMES, "10k", "over", "tiny"] + [f"random {i}" for i in range(len(junk))]
    for label, line, inputs in zip(labels, got, cases, strict=True):
        expected = canonical(code_node_outputs(**inputs, **settings))
        assert line == expected, label


def test_every_available_python_gives_the_same_bytes(tmp_path: Path) -> None:
    pythons = bare_pythons()
    if len(pythons) < 2:
        pytest.skip("only one Python 3.10+ interpreter outside the virtualenv")
    cases = [fixture_inputs(name) for name in FIXTURE_NAMES]
    code = render_code_node(max_web_results=3)
    expected = [canonical(code_node_outputs(**c, max_web_results=3)) for c in cases]
    for index, python in enumerate(pythons):
        folder = tmp_path / str(index)
        folder.mkdir()
        assert run_exported(python, code, cases, folder) == expected, python


# -- Dify's own runner and validation -------------------------------------------------------------


def dify_runner_script(code: str, inputs: dict[str, Any]) -> str:
    """What Dify's python3 transformer sends to the sandbox (dify-protocol.md §4)."""
    encoded = base64.b64encode(json.dumps(inputs, ensure_ascii=False).encode("utf-8")).decode()
    return (
        f"{code}\n\nimport json\nfrom base64 import b64decode\n\n"
        f"inputs_obj = json.loads(b64decode('{encoded}').decode('utf-8'))\n\n"
        "output_obj = main(**inputs_obj)\n\n"
        "output_json = json.dumps(output_obj, indent=4)\n"
        "result = f'''<<RESULT>>{output_json}<<RESULT>>'''\n"
        "print(result)\n"
    )


DIFY_MAX_NUMBER = 9223372036854775807
DIFY_MAX_PRECISION = 20


def precision_ok_old(value: float) -> bool:
    """Dify 0.x / early 1.x: ``len(str(value).split(".")[1]) <= CODE_MAX_PRECISION``.

    ``str(1e-05)`` has no ".", so Dify's check raises ``IndexError`` (the run fails).
    """
    parts = str(value).split(".")
    return len(parts) > 1 and len(parts[1]) <= DIFY_MAX_PRECISION


def precision_ok_new(value: float) -> bool:
    """Current Dify: decimals of ``Decimal(str(value)).normalize()`` (NaN raises ``TypeError``)."""
    exponent = Decimal(str(value)).normalize().as_tuple().exponent
    if not isinstance(exponent, int):
        return False
    return (-exponent if exponent < 0 else 0) <= DIFY_MAX_PRECISION


PRECISION_RULES = {"old": precision_ok_old, "new": precision_ok_new}


def dify_validate(outputs: dict[str, Any], max_string_length: int, rule: str = "new") -> None:
    """Dify's ``CodeNode._transform_result`` for our declared outputs (dify-protocol.md §4).

    ``chunk_metadata`` is declared ``Array[Object]`` without children, so each item
    is checked by the schema-less branch: numbers (range, then the precision rule
    ``rule``: "old" for Dify 0.x / early 1.x, "new" for current Dify), strings
    (length), lists (one element type), nested objects (depth).
    """
    precision_ok = PRECISION_RULES[rule]
    declared = {"formatted_chunks": str, "chunk_count": int, "chunk_metadata": list}
    for name in declared:
        assert name in outputs, f"Output {name} is missing."
    assert len(outputs) == len(declared), "Not all output parameters are validated."

    def check_number(value: Any, where: str) -> None:
        assert -DIFY_MAX_NUMBER <= value <= DIFY_MAX_NUMBER, f"{where} is out of range"
        if isinstance(value, float):
            assert precision_ok(value), f"{where} = {value!r} fails the {rule} precision rule"

    def check_object(value: dict[str, Any], depth: int, where: str) -> None:
        assert depth <= 5, "Depth limit 5 reached, object too deep."
        for key, item in value.items():
            check_value(item, depth, f"{where}.{key}")

    def check_value(item: Any, depth: int, where: str) -> None:
        if isinstance(item, dict):
            check_object(item, depth + 1, where)
        elif isinstance(item, bool) or item is None:
            pass
        elif isinstance(item, int | float):
            check_number(item, where)
        elif isinstance(item, str):
            assert len(item) <= max_string_length, f"{where} too long"
        elif isinstance(item, list):
            # Dify checks a list only by its first element's type; every element must share it
            # (a list of lists is refused by old Dify and crashes the current one).
            if not item or item[0] is None:
                return
            kind = next((k for k in (dict, str) if isinstance(item[0], k)), None)
            if kind is None and isinstance(item[0], int | float):
                kind = int | float  # type: ignore[assignment]
            assert kind is not None, f"{where} is not a valid array"
            assert all(v is None or isinstance(v, kind) for v in item), f"{where} mixed list"
            for index, element in enumerate(item):
                if element is not None:
                    check_value(element, depth, f"{where}[{index}]")
        else:
            raise AssertionError(f"{where}: unsupported output type {type(item)}")

    for name, kind in declared.items():
        assert isinstance(outputs[name], kind), name
    assert len(outputs["formatted_chunks"]) <= max_string_length
    assert not isinstance(outputs["chunk_count"], bool)
    check_number(outputs["chunk_count"], "chunk_count")
    assert len(outputs["chunk_metadata"]) <= 30
    for index, item in enumerate(outputs["chunk_metadata"]):
        assert isinstance(item, dict), f"chunk_metadata[{index}] is not an object"
        check_object(item, 2, f"chunk_metadata[{index}]")


# Dify's template transformer, after parsing the runner's JSON result (``_post_process_result``
# in api/core/helper/code_executor/template_transformer.py): every string, nested ones included,
# that re.match-es this pattern (case-insensitive) is replaced by float(string).
DIFY_SCIENTIFIC = r"^-?\d+\.?\d*e[+-]\d+$"


def dify_post_process(value: Any) -> Any:
    """What Dify makes of the runner's parsed result before the node's output checks."""
    if isinstance(value, str):
        if re.match(DIFY_SCIENTIFIC, value, re.IGNORECASE):
            try:
                return float(value)
            except ValueError:
                return value
        return value
    if isinstance(value, dict):
        return {k: dify_post_process(v) for k, v in value.items()}
    if isinstance(value, list):
        return [dify_post_process(v) for v in value]
    return value


def test_dify_post_process_is_the_rule_dify_applies() -> None:
    """The rule itself, as Dify's source states it: exponent forms with a signed exponent."""
    converted = dify_post_process(
        {"a": "2e-3", "b": ["1E+5", "-3.5e-02"], "c": {"d": "7.e+1\n"}, "e": "12", "f": "2e3"}
    )
    assert converted == {
        "a": 0.002,
        "b": [100000.0, -0.035],
        "c": {"d": 70.0},
        "e": "12",
        "f": "2e3",
    }
    assert dify_post_process("2e-3" + NUMBER_GUARD) == "2e-3" + NUMBER_GUARD
    for text in ("2e-3", "7.e+1\n", "１２E-3", "12", "2e3", "e-3", "2e-3 ", "标题"):
        guarded = guard_number_like(text)
        assert dify_post_process(guarded) == guarded  # every guarded string stays a string
        assert guarded == text or guarded == text + NUMBER_GUARD
        assert (guarded != text) == isinstance(dify_post_process(text), float)  # only if needed


NUMBER_LIKE_TEXTS = ("2e-3", "1E+5", "-3.5e-02", "7.e+1", "１２e-3")


def test_number_like_strings_leave_the_node_as_strings(tmp_path: Path) -> None:
    """A title, a site name or a whole chunk that reads as ``2e-3`` is not turned into a float by
    Dify's runner: the node guards it with an invisible character; other strings are untouched."""
    rag = [
        {"content": text, "metadata": {"score": 0.9 - i / 10, "document_name": text}}
        for i, text in enumerate(NUMBER_LIKE_TEXTS)
    ]
    rag.append({"content": "12", "metadata": {"score": 0.1, "document_name": "12"}})
    web = [{"url": "https://e.example.com/", "snippet": "网页", "name": "2e-3", "siteName": "1e+5"}]
    outputs = run_in_dify(render_code_node(), {"rag_chunks": rag, "web_chunks": web}, tmp_path)
    dify_validate(outputs, 400_000)
    assert canonical(outputs) == canonical(code_node_outputs(rag, web))
    items = outputs["chunk_metadata"]
    for item, text in zip(items, NUMBER_LIKE_TEXTS, strict=False):
        assert item["document_name"] == item["document_title"] == text + NUMBER_GUARD
        assert item["content"] == text + NUMBER_GUARD
    plain = items[len(NUMBER_LIKE_TEXTS)]
    assert plain["content"] == plain["document_name"] == "12"
    assert items[-1]["document_title"] == "2e-3" + NUMBER_GUARD
    assert items[-1]["site_name"] == "1e+5" + NUMBER_GUARD
    strings = [v for item in items for v in item.values() if isinstance(v, str)]
    assert all(not re.match(DIFY_SCIENTIFIC, v, re.IGNORECASE) for v in strings)
    # the LLM context keeps the text as it is
    assert "[C:1]\n2e-3\n\n" in outputs["formatted_chunks"]
    assert NUMBER_GUARD not in outputs["formatted_chunks"]


def run_in_dify(code: str, inputs: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Run the node as Dify's sandbox does (``main(**inputs)``), parse its ``<<RESULT>>`` and
    post-process it as Dify does (:func:`dify_post_process`)."""
    python = first_bare_python()
    script = tmp_path / "runner.py"
    # A prelude before the code, as a sandbox may add, must not break it (no __future__ import).
    script.write_text("import os\n" + dify_runner_script(code, inputs), encoding="utf-8")
    done = subprocess.run(
        [python, "-I", str(script)], capture_output=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    parsed = json.loads(done.stdout.decode("utf-8").split("<<RESULT>>")[1])
    outputs: dict[str, Any] = dify_post_process(parsed)
    return outputs


@pytest.mark.parametrize("rule", ["old", "new"])
@pytest.mark.parametrize(
    ("case", "max_string_length"),
    [("mobile_2_1.json", 400_000), ("over", 80_000), ("10k", 400_000), ("tiny", 400_000)],
)
def test_dify_runner_accepts_the_outputs(
    case: str, max_string_length: int, rule: str, tmp_path: Path
) -> None:
    generated = dict(zip(["10k", "over", "tiny"], generated_cases(), strict=True))
    inputs = generated[case] if case in generated else fixture_inputs(case)
    code = render_code_node(max_string_length=max_string_length)
    outputs = run_in_dify(code, inputs, tmp_path)
    dify_validate(outputs, max_string_length, rule)
    expected = code_node_outputs(**inputs, max_string_length=max_string_length)
    assert canonical(outputs) == canonical(expected)


#: Scores of every magnitude a retriever or a search API may send (as numbers or text).
SCORES: list[Any] = [
    1e-05, -1e-05, 2e-07, 1e-300, 5e-324, -5e-324, 1e-19, 1.5e-19, 1e-20, 1e-16,
    1.2345678901234567e-05, 9.999999999999999e-06, 0.0001, 0.00012345678901234567,
    0.98457545, 1 / 3, -0.0, 0.0, 0, 7, 123456789.12345679, 9.9e15, 1e16, 1e300, -1e300,
    10**30, float("nan"), float("inf"), float("-inf"), "1e-05", "-0.0", "3e-300",
]  # fmt: skip


@pytest.mark.parametrize("rule", ["old", "new"])
def test_scores_of_every_magnitude_pass_both_precision_rules(rule: str, tmp_path: Path) -> None:
    rag = [
        {"content": f"片段{i}", "metadata": {"score": score, "dataset_name": "库"}}
        for i, score in enumerate(SCORES)
    ]
    web = [{"url": f"https://e{i}.example.com/", "snippet": f"网页{i}", "score": score}
           for i, score in enumerate(SCORES)]  # fmt: skip
    code = render_code_node(max_objects=30)
    for part in (rag[:15], rag[15:], web[:15], web[15:]):
        inputs = {"rag_chunks": part, "web_chunks": []}
        if "url" in part[0]:
            inputs = {"rag_chunks": [], "web_chunks": part}
        outputs = run_in_dify(code, inputs, tmp_path)
        dify_validate(outputs, 400_000, rule)
        assert outputs["chunk_count"] == len(part)
        for chunk in outputs["chunk_metadata"]:
            index = int(chunk["content"][2:])
            sent = SCORES[index]
            number = float(sent) if not isinstance(sent, float) else sent
            got = chunk["score"]
            if not math.isfinite(number) or abs(number) <= 1e-19:
                assert got == 0.0 or abs(got) < 1e-18, (sent, got)
            elif abs(number) > 1e15:
                assert got == math.copysign(1e15, number), (sent, got)
            else:  # Dify allows 20 decimal places: the tiniest scores move by up to 1e-20
                assert abs(got - number) <= max(1e-13 * abs(number), 1e-20), (sent, got)


@pytest.mark.parametrize(
    "inputs",
    [
        {"rag_chunks": [{"content": "巡检每两小时一次", "metadata": {"score": 0.9}}]},
        {"web_chunks": [{"url": "https://e.example.com/", "snippet": "网页", "score": 1e-05}]},
        {},
    ],
    ids=["only-rag_chunks", "only-web_chunks", "none"],
)
def test_main_runs_with_an_input_variable_deleted(inputs: dict[str, Any], tmp_path: Path) -> None:
    """Dify will not publish a declared input without a value, so users delete the unused one."""
    outputs = run_in_dify(render_code_node(), inputs, tmp_path)
    for rule in PRECISION_RULES:
        dify_validate(outputs, 400_000, rule)
    expected = code_node_outputs(inputs.get("rag_chunks"), inputs.get("web_chunks"))
    assert canonical(outputs) == canonical(expected)
    assert outputs["chunk_count"] == len(inputs)


# -- the file itself ------------------------------------------------------------------------------


def test_header_states_the_declarations_and_settings() -> None:
    code = render_code_node(max_string_length=80_000, max_web_results=2)
    header = code.split("def ", 1)[0]
    for line in (
        "rag_chunks   ← 知识检索节点 / result",
        "web_chunks   ← 网页搜索工具节点 / json",
        "formatted_chunks   String",
        "chunk_count        Number",
        "chunk_metadata     Array[Object]",
        "gcite export dify-node --max-string-length 80000 --max-web-results 2",
        "MAX_WEB_RESULTS = 2\n",
        "MAX_OBJECTS = 30\n",
        "MAX_STRING_LENGTH = 80000\n",
    ):
        assert line in header, line
    assert "def main(rag_chunks: list = None, web_chunks: list = None) -> dict:" in code
    assert "MAX_WEB_RESULTS = None\n" in render_code_node()


def test_file_is_self_contained_and_deterministic() -> None:
    code = render_code_node()
    assert code == render_code_node()
    assert code.endswith("\n")
    assert "from gcite" not in code and "import gcite" not in code
    assert "__future__" not in code
    imported = {
        line.split()[1].split(".")[0]
        for line in code.splitlines()
        if line.startswith(("import ", "from "))
    }
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_editing_the_constant_in_the_file_changes_the_cap(tmp_path: Path) -> None:
    python = first_bare_python()
    code = render_code_node().replace("MAX_WEB_RESULTS = None\n", "MAX_WEB_RESULTS = 1\n")
    inputs = fixture_inputs("mobile_2_1.json")
    (line,) = run_exported(python, code, [inputs], tmp_path)
    assert line == canonical(code_node_outputs(**inputs, max_web_results=1))
    assert json.loads(line)["chunk_count"] == 6


@pytest.mark.parametrize(
    "settings",
    [
        {"max_string_length": 99},
        {"max_objects": 0},
        {"max_web_results": -1},
        {"max_string_length": True},
    ],
)
def test_out_of_range_settings_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        render_code_node(**settings)


def test_inline_source_strips_gcite_imports_docstring_and_all() -> None:
    source = '''"""Doc."""

from __future__ import annotations

import re
from gcite.chunks import (
    as_text,
    extract_host,
)
import gcite.envelopes

# a comment that stays
VALUE = re.compile("x")  # stays


def helper() -> str:
    """Kept."""
    return "ok"


__all__ = ["VALUE", "helper"]
'''
    text, names = inline_source(source)
    assert names == {"VALUE", "helper"}
    assert "gcite" not in text and "__future__" not in text and "__all__" not in text
    assert "Doc." not in text and '"""Kept."""' in text
    assert "# a comment that stays" in text and "import re" in text


def test_clashing_names_are_refused() -> None:
    sources = [("gcite.a", "def helper():\n    return 1\n"), ("gcite.b", "helper = 2\n")]
    with pytest.raises(RuntimeError, match="helper"):
        build_code_node(sources)
    with pytest.raises(RuntimeError, match="main"):
        build_code_node([("gcite.a", "def main():\n    pass\n")])


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_prints_the_node_to_stdout() -> None:
    result = CliRunner().invoke(cli, ["export", "dify-node", "--max-web-results", "2"])
    assert result.exit_code == 0, result.output
    assert result.stdout == render_code_node(max_web_results=2)


def test_cli_writes_the_file(tmp_path: Path) -> None:
    target = tmp_path / "merge_node.py"
    result = CliRunner().invoke(
        cli, ["export", "dify-node", "-o", str(target), "--max-string-length", "80000"]
    )
    assert result.exit_code == 0, result.output
    assert target.read_text(encoding="utf-8") == render_code_node(max_string_length=80_000)
    assert "已写入" in result.stderr
    assert result.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["merge_node.py"]  # no temporary left


@pytest.mark.parametrize(
    "args",
    [
        ["--max-string-length", "50"],
        ["--max-string-length", "lots"],
        ["--max-web-results", "-1"],
        ["--max-objects", "0"],
    ],
)
def test_cli_rejects_bad_options(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["export", "dify-node", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("错误: 选项 --max-"), result.stderr


def test_cli_reports_an_unwritable_path(tmp_path: Path) -> None:
    target = tmp_path / "missing-folder" / "node.py"
    result = CliRunner().invoke(cli, ["export", "dify-node", "--output", str(target)])
    assert result.exit_code == 1
    assert "无法写入" in result.stderr
    assert not target.exists()
