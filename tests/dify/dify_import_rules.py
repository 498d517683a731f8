"""Dify's app-DSL import checks, restated from its source for tests.

What Dify 1.x does when a DSL is imported (``api/services/app_dsl_service.py``
``AppDslService.import_app`` and ``_create_or_update_app``, ``api/services/dsl_version.py``
``check_version_compatibility``) and what the graph must satisfy to run (node entities:
``knowledge_retrieval/entities.py`` ``KnowledgeRetrievalNodeData``, graphon's ``ToolNodeData``,
the Code node's ``_transform_result`` output types, the variable-pool selectors). Each
function returns the list of problems it finds (empty: Dify would accept that part).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from packaging.version import InvalidVersion, Version

#: ``ImportStatus`` values of ``check_version_compatibility``.
COMPLETED, WITH_WARNINGS, PENDING, FAILED = (
    "completed",
    "completed-with-warnings",
    "pending",
    "failed",
)
APP_MODES = {"advanced-chat", "workflow", "chat", "agent-chat", "completion"}
#: ``SupportedComparisonOperator`` of the knowledge-retrieval node (Dify 1.x).
METADATA_OPERATORS = {
    "contains", "not contains", "start with", "end with", "is", "is not", "empty",
    "not empty", "in", "not in", "=", "≠", ">", "<", "≥", "≤", "before", "after",
}  # fmt: skip
#: ``_ALLOWED_OUTPUT_FROM_CODE``.
CODE_OUTPUT_TYPES = {
    "string", "number", "object", "boolean", "array[string]", "array[number]",
    "array[object]", "array[boolean]",
}  # fmt: skip
#: Outputs a node of each type puts in the variable pool (Start: its variables).
NODE_OUTPUTS = {
    "knowledge-retrieval": {"result"},
    "tool": {"text", "files", "json"},
    "llm": {"text", "usage", "reasoning_content"},
    "answer": {"answer"},
}
START_VARIABLE_TYPES = {
    "text-input", "paragraph", "select", "number", "file", "file-list", "checkbox", "json_object",
}  # fmt: skip
SYSTEM_VARIABLES = {
    "query", "files", "conversation_id", "user_id", "dialogue_count", "app_id", "workflow_id",
    "workflow_run_id",
}  # fmt: skip
_REFERENCE = re.compile(r"\{\{#([a-zA-Z0-9_-]{1,50})((?:\.[a-zA-Z_]\w{0,29}){1,10})#\}\}")


def version_status(imported: str, current: str) -> str:
    """``check_version_compatibility``: newer or older major → pending, older minor → warnings."""
    try:
        have, want = Version(imported), Version(current)
    except InvalidVersion:
        return FAILED
    if have > want or have.major < want.major:
        return PENDING
    if have.minor < want.minor:
        return WITH_WARNINGS
    return COMPLETED


def top_level_problems(data: Any) -> list[str]:
    """What ``import_app`` / ``_create_or_update_app`` refuse before the graph is read."""
    if not isinstance(data, dict):
        return ["Invalid YAML format: content must be a mapping"]
    problems = []
    if not isinstance(data.get("version", "0.1.0"), str):
        problems.append("Invalid version type, expected str")
    if data.get("kind") != "app":
        problems.append("kind is not app (Dify silently forces it)")
    app = data.get("app")
    if not isinstance(app, dict) or not app:
        return [*problems, "Missing app data in YAML content"]
    if app.get("mode") not in APP_MODES:
        problems.append("loss app mode / Invalid app mode")
    workflow = data.get("workflow")
    if app.get("mode") in {"advanced-chat", "workflow"} and not isinstance(workflow, dict):
        problems.append("Missing workflow data for workflow/advanced chat app")
    if not isinstance(data.get("dependencies", []), list):
        problems.append("dependencies is not a list")
    return problems


def _nodes(data: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = data["workflow"]["graph"]["nodes"]
    return nodes


def graph_problems(data: dict[str, Any]) -> list[str]:
    """Structure: unique ids, one Start, an Answer (chatflow), edges between known nodes with
    matching ``sourceType`` / ``targetType``, no cycle, every node reachable from Start."""
    graph = data["workflow"]["graph"]
    nodes, edges = graph.get("nodes"), graph.get("edges")
    if not isinstance(nodes, list) or not isinstance(edges, list):
        return ["graph.nodes / graph.edges must be lists"]
    by_id = {n["id"]: n for n in nodes}
    problems = [] if len(by_id) == len(nodes) else ["duplicate node id"]
    types = [n["data"]["type"] for n in nodes]
    if types.count("start") != 1:
        problems.append("a chatflow needs exactly one start node")
    if "answer" not in types:
        problems.append("a chatflow needs an answer node")
    for edge in edges:
        problems += _edge_problems(edge, by_id)
    if not problems and _reachable(edges, "start") != set(by_id):
        problems.append("a node is not reachable from start")
    return problems


def _edge_problems(edge: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[str]:
    source, target = by_id.get(edge.get("source", "")), by_id.get(edge.get("target", ""))
    if source is None or target is None:
        return [f"edge {edge.get('id')} names an unknown node"]
    data = edge.get("data", {})
    if (data.get("sourceType"), data.get("targetType")) != (
        source["data"]["type"],
        target["data"]["type"],
    ):
        return [f"edge {edge['id']}: sourceType/targetType differ from the nodes' types"]
    return []


def _reachable(edges: list[dict[str, Any]], root: str) -> set[str]:
    seen, todo = {root}, [root]
    while todo:
        here = todo.pop()
        for edge in edges:
            if edge["source"] == here and edge["target"] not in seen:
                seen.add(edge["target"])
                todo.append(edge["target"])
    return seen


def ancestors(data: dict[str, Any], node_id: str) -> set[str]:
    """Ids of the nodes that run before ``node_id`` on every path to it (its upstream)."""
    edges = data["workflow"]["graph"]["edges"]
    seen: set[str] = set()
    todo = [node_id]
    while todo:
        here = todo.pop()
        for edge in edges:
            if edge["target"] == here and edge["source"] not in seen:
                seen.add(edge["source"])
                todo.append(edge["source"])
    return seen


def _outputs(node: dict[str, Any]) -> set[str]:
    data = node["data"]
    if data["type"] == "start":
        return {v["variable"] for v in data.get("variables", [])}
    if data["type"] == "code":
        return set(data.get("outputs", {}))
    return NODE_OUTPUTS.get(data["type"], set())


def _selectors(data: Any) -> Iterator[list[str]]:
    """Every variable selector in a node's data: ``value_selector`` / ``*_variable_selector``
    lists and the ``{{#node.var#}}`` references inside strings."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key.endswith("selector") and isinstance(value, list) and value:
                yield value
            else:
                yield from _selectors(value)
    elif isinstance(data, list):
        for item in data:
            yield from _selectors(item)
    elif isinstance(data, str):
        for node, path in _REFERENCE.findall(data):
            yield [node, *path.strip(".").split(".")]


def reference_problems(data: dict[str, Any]) -> list[str]:
    """Every selector names ``sys``/``conversation``/``env`` or an upstream node's output."""
    by_id = {n["id"]: n for n in _nodes(data)}
    conversation = {v["name"] for v in data["workflow"].get("conversation_variables", [])}
    problems = []
    for node in _nodes(data):
        upstream = ancestors(data, node["id"])
        for selector in _selectors(node["data"]):
            if not _resolves(selector, upstream, by_id, conversation):
                problems.append(f"{node['id']}: {'.'.join(selector)} does not resolve")
    return problems


def _resolves(
    selector: list[str], upstream: set[str], by_id: dict[str, Any], conversation: set[str]
) -> bool:
    head, name = selector[0], selector[1] if len(selector) > 1 else ""
    if head == "sys":
        return name in SYSTEM_VARIABLES
    if head == "conversation":
        return name in conversation
    return head in upstream and name in _outputs(by_id[head])


def node_problems(node: dict[str, Any]) -> list[str]:
    """The fields the node entities require, with their allowed values."""
    data = node["data"]
    check: Callable[[dict[str, Any]], list[str]] | None = {
        "start": _start_problems,
        "knowledge-retrieval": _retrieval_problems,
        "code": _code_problems,
        "tool": _tool_problems,
        "llm": _llm_problems,
        "answer": _answer_problems,
    }.get(data["type"])
    if check is None:
        return [f"{node['id']}: node type {data['type']} not checked here"]
    if node.get("type") != "custom" or not isinstance(data.get("title"), str):
        return [f"{node['id']}: a node is type custom with a title"]
    return [f"{node['id']}: {p}" for p in check(data)]


def _answer_problems(data: dict[str, Any]) -> list[str]:
    return [] if isinstance(data.get("answer"), str) else ["answer text missing"]


def _start_problems(data: dict[str, Any]) -> list[str]:
    problems = []
    for variable in data.get("variables", []):
        if variable.get("type") not in START_VARIABLE_TYPES:
            problems.append(f"variable type {variable.get('type')}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,29}", variable.get("variable", "")):
            problems.append("variable name")
        if not variable.get("required") and variable.get("default") is None:
            problems.append("an optional variable without default is None when left out")
    return problems


def _retrieval_problems(data: dict[str, Any]) -> list[str]:
    problems = []
    for dataset_id in data.get("dataset_ids", []):
        try:
            uuid.UUID(dataset_id)
        except ValueError:
            problems.append(f"dataset id {dataset_id!r} is dropped at import (not a UUID)")
    if not data.get("dataset_ids"):
        problems.append("no dataset_ids")
    if data.get("retrieval_mode") not in {"single", "multiple"}:
        problems.append("retrieval_mode")
    config = data.get("multiple_retrieval_config") or {}
    if data.get("retrieval_mode") == "multiple" and not isinstance(config.get("top_k"), int):
        problems.append("multiple_retrieval_config.top_k must be an int")
    if data.get("metadata_filtering_mode", "disabled") not in {"disabled", "automatic", "manual"}:
        problems.append("metadata_filtering_mode")
    conditions = (data.get("metadata_filtering_conditions") or {}).get("conditions") or []
    problems += [
        f"operator {c.get('comparison_operator')}"
        for c in conditions
        if c.get("comparison_operator") not in METADATA_OPERATORS
    ]
    return problems


def _code_problems(data: dict[str, Any]) -> list[str]:
    problems = [] if data.get("code_language") in {"python3", "javascript"} else ["language"]
    outputs = data.get("outputs", {})
    problems += [
        f"output type {o['type']}" for o in outputs.values() if o["type"] not in CODE_OUTPUT_TYPES
    ]
    if not all({"variable", "value_selector"} <= set(v) for v in data.get("variables", [])):
        problems.append("a variable lacks variable/value_selector")
    return problems


def _tool_problems(data: dict[str, Any]) -> list[str]:
    required = {"provider_id", "provider_type", "provider_name", "tool_name", "tool_label"}
    problems = [f"missing {k}" for k in sorted(required - set(data))]
    if data.get("provider_type") not in {"plugin", "builtin", "workflow", "api", "app", "mcp"}:
        problems.append("provider_type")
    if not isinstance(data.get("tool_configurations"), dict):
        problems.append("tool_configurations must be a dictionary")
    for name, given in data.get("tool_parameters", {}).items():
        if given.get("type") == "mixed" and not isinstance(given.get("value"), str):
            problems.append(f"tool parameter {name}: a mixed value must be a string")
    return problems


def _llm_problems(data: dict[str, Any]) -> list[str]:
    model = data.get("model") or {}
    problems = [f"model.{k}" for k in ("provider", "name", "mode") if not model.get(k)]
    context = data.get("context") or {}
    texts = " ".join(p.get("text", "") for p in data.get("prompt_template", []))
    if context.get("enabled") and "{{#context#}}" not in texts:
        problems.append("context enabled but the prompt has no {{#context#}}")
    return problems
