"""``gcite export dify-dsl``: the seeds' chatflow as an app Dify imports and can run.

The DSL is read back with PyYAML (as Dify reads it) and checked with Dify's import rules
(``dify_import_rules.py``, restated from Dify's source); its Code node is run the way Dify's
Python runner runs it (``main(**inputs)`` in a fresh interpreter, the result's keys equal to
the declared outputs); the guide's recipe is compared with the DSL's nodes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import dify_import_rules as rules
import pytest
import yaml
from click.testing import CliRunner

from gcite.cli import cli
from gcite.dify.dsl import ChatflowOptions, build_chatflow, render_chatflow
from gcite.errors import ConfigError
from gcite.generate.prompt import DEFAULT_RULES

KB = "6f1c1e8d-0b5e-4c43-9a57-2f0f5b3a9e11"
ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "dify-external-knowledge.md"


def options(**kw: Any) -> ChatflowOptions:
    return ChatflowOptions(
        knowledge_id=KB, model_provider="langgenius/openai/openai", model_name="gpt-4o-mini", **kw
    )


def node(data: dict[str, Any], node_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        n for n in data["workflow"]["graph"]["nodes"] if n["id"] == node_id
    )
    return found


@pytest.mark.parametrize("web", [True, False])
def test_the_dsl_passes_difys_import_checks(web: bool) -> None:
    data = yaml.safe_load(render_chatflow(options(web_search=web)))
    assert rules.top_level_problems(data) == []
    assert rules.graph_problems(data) == []
    assert rules.reference_problems(data) == []
    for item in data["workflow"]["graph"]["nodes"]:
        assert rules.node_problems(item) == []
    types = [n["data"]["type"] for n in data["workflow"]["graph"]["nodes"]]
    expected = ["start", "knowledge-retrieval", "code", "llm", "answer"]
    assert sorted(types) == sorted(expected + (["tool"] if web else []))
    assert data["app"]["mode"] == "advanced-chat"


def test_the_checks_catch_what_dify_refuses() -> None:
    """The rules are not vacuous: each broken variant is reported."""
    good = build_chatflow(options())
    broken = json.loads(json.dumps(good))
    node(broken, "knowledge")["data"]["dataset_ids"] = ["楼宇法规库"]
    assert any("not a UUID" in p for p in rules.node_problems(node(broken, "knowledge")))
    broken = json.loads(json.dumps(good))
    node(broken, "merge")["data"]["variables"][0]["value_selector"] = ["llm", "text"]
    assert rules.reference_problems(broken)  # the LLM runs after the merge node
    broken = json.loads(json.dumps(good))
    node(broken, "start")["data"]["variables"][0].pop("default")
    assert rules.node_problems(node(broken, "start"))
    broken = json.loads(json.dumps(good))
    broken["workflow"]["graph"]["edges"].pop()
    assert rules.graph_problems(broken) == ["a node is not reachable from start"]
    broken = json.loads(json.dumps(good))
    broken["version"] = 0.5
    assert rules.top_level_problems(broken)


@pytest.mark.parametrize(
    ("current", "status"),
    [("0.5.0", rules.COMPLETED), ("0.6.0", rules.WITH_WARNINGS), ("0.7.0", rules.WITH_WARNINGS)],
)
def test_the_default_version_imports_without_confirmation(current: str, status: str) -> None:
    data = build_chatflow(options())
    assert rules.version_status(data["version"], current) == status
    assert rules.version_status("0.8.0", current) == rules.PENDING


def test_the_role_filter_reads_the_start_variable_with_an_empty_default() -> None:
    data = build_chatflow(options(roles_variable="roles"))
    start = node(data, "start")["data"]["variables"]
    assert start == [
        {
            "variable": "roles",
            "label": "用户角色（逗号分隔）",
            "type": "text-input",
            "required": False,
            "default": "",
            "max_length": 256,
            "options": [],
        }
    ]
    knowledge = node(data, "knowledge")["data"]
    assert knowledge["metadata_filtering_mode"] == "manual"
    assert knowledge["metadata_filtering_conditions"]["conditions"] == [
        {
            "id": "access-roles",
            "name": "access_roles",
            "comparison_operator": "in",
            "value": "{{#start.roles#}}",
        }
    ]
    assert knowledge["dataset_ids"] == [KB]


def test_the_llm_node_carries_the_seed_prompt_and_the_merge_output() -> None:
    data = build_chatflow(options())
    llm = node(data, "llm")["data"]
    system = llm["prompt_template"][0]["text"]
    assert DEFAULT_RULES in system and system.rstrip().endswith("{{#context#}}")
    assert llm["context"] == {"enabled": True, "variable_selector": ["merge", "formatted_chunks"]}
    assert node(data, "answer")["data"]["answer"] == "{{#llm.text#}}"


RUNNER = """
import json, sys
namespace = {}
exec(open(sys.argv[1], encoding="utf-8").read(), namespace)
inputs = json.loads(open(sys.argv[2], encoding="utf-8").read())
print(json.dumps(namespace["main"](**inputs), ensure_ascii=False))
"""


def test_the_code_node_runs_as_difys_runner_runs_it(tmp_path: Path) -> None:
    data = build_chatflow(options())
    merge = node(data, "merge")["data"]
    (tmp_path / "node.py").write_text(merge["code"], encoding="utf-8")
    (tmp_path / "runner.py").write_text(RUNNER, encoding="utf-8")
    inputs = {
        "rag_chunks": [
            {
                "content": "夜间巡更共 24 个点位。",
                "title": "巡更制度",
                "metadata": {"score": 0.8, "document_title": "巡更制度", "dataset_name": "楼宇"},
            }
        ],
        "web_chunks": [
            {"results": [{"url": "https://e.example.com/", "content": "网页内容", "score": 0.5}]}
        ],
    }
    assert {v["variable"] for v in merge["variables"]} == set(inputs)
    (tmp_path / "inputs.json").write_text(json.dumps(inputs, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", "runner.py", "node.py", "inputs.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == set(merge["outputs"])  # Dify refuses missing and extra keys
    assert result["chunk_count"] == 2
    assert "[C:1]" in result["formatted_chunks"] and "24 个点位" in result["formatted_chunks"]


def test_bad_options_are_refused_in_chinese() -> None:
    with pytest.raises(ConfigError, match="UUID"):
        build_chatflow(ChatflowOptions("楼宇法规库", "langgenius/openai/openai", "gpt-4o-mini"))
    with pytest.raises(ConfigError, match="DSL 版本"):
        build_chatflow(options(dsl_version="latest"))
    with pytest.raises(ConfigError, match="模型"):
        build_chatflow(ChatflowOptions(KB, "", "gpt-4o-mini"))


def test_the_cli_writes_the_file_and_refuses_a_name_for_an_id(tmp_path: Path) -> None:
    target = tmp_path / "gcite.yml"
    runner = CliRunner()
    done = runner.invoke(
        cli, ["export", "dify-dsl", "--knowledge-id", KB, "--model", "qwen-plus", "-o", str(target)]
    )
    assert done.exit_code == 0, done.output
    data = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert node(data, "llm")["data"]["model"]["name"] == "qwen-plus"
    assert "导入" in done.stderr
    done = runner.invoke(cli, ["export", "dify-dsl", "--knowledge-id", "楼宇法规库", "--no-web"])
    assert done.exit_code == 2 and "UUID" in done.output
    done = runner.invoke(cli, ["export", "dify-dsl", "--knowledge-id", KB, "--no-web"])
    assert done.exit_code == 0
    assert "tool" not in {
        n["data"]["type"] for n in yaml.safe_load(done.stdout)["workflow"]["graph"]["nodes"]
    }


def _guide_yaml(marker: str) -> Any:
    text = GUIDE.read_text(encoding="utf-8")
    match = re.search(rf"<!-- dsl:{marker} -->\s*```yaml\n(.*?)```", text, re.S)
    assert match, f"the guide has no block marked dsl:{marker}"
    return yaml.safe_load(match.group(1))


def test_the_guides_recipe_is_the_dsls() -> None:
    """The Start variable and the Knowledge Retrieval filter shown in the guide are the ones
    ``gcite export dify-dsl`` writes (same keys and values)."""
    data = build_chatflow(options())
    assert _guide_yaml("start-variable") == node(data, "start")["data"]["variables"]
    shown = _guide_yaml("role-filter")
    knowledge = node(data, "knowledge")["data"]
    assert shown["metadata_filtering_mode"] == knowledge["metadata_filtering_mode"]
    assert shown["metadata_filtering_conditions"] == knowledge["metadata_filtering_conditions"]
