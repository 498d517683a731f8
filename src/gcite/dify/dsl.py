"""The seeds' whole chatflow as an importable Dify app DSL (``advanced-chat`` YAML).

``build_chatflow(options)`` returns the DSL as a mapping, ``render_chatflow(options)``
as YAML text. The graph is the platform design document's §2.2 chatflow::

    Start (user_roles, default "") ─┬─▶ 知识检索 (external KB, access_roles in user_roles) ─┐
                                    └─▶ Web 搜索 (Tavily tool, optional) ──────────────────┴─▶
    Chunk编号 (merge node as Code node) ─▶ LLM (seed §5.2 prompt) ─▶ Answer

Facts about the format come from Dify's source (``api/services/app_dsl_service.py``
``import_app``, ``api/services/dsl_version.py``, the node entities of
``knowledge_retrieval``, ``code``, ``llm``, ``tool``; see docs/dify-external-knowledge.md):

* ``version`` is a string compared with the importing Dify's ``CURRENT_APP_DSL_VERSION``:
  newer → the import waits for a confirmation; an older minor → "completed with warnings";
  so the default, 0.5.0, imports on every Dify whose current DSL version is 0.5 or later
  (Dify 1.10 and newer);
* a knowledge-retrieval node's ``dataset_ids`` that are not plain UUIDs (nor encrypted with
  the importing workspace's key) are dropped silently at import, so the id is checked here;
* a Start variable that the request leaves out takes its ``default``; without one it is
  ``None`` and the Knowledge Retrieval node's metadata filter fails the run ("Invalid
  expected metadata value type"). The default ``""`` makes a missing role list mean "no
  roles", which gcite answers with documents without roles only (fail closed).

Errors: :class:`gcite.errors.ConfigError` (Chinese message) for an id that is not a UUID,
an empty model name, or a DSL version that is not ``X.Y.Z``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import yaml

from gcite.dify.codenode import render_code_node
from gcite.errors import ConfigError
from gcite.generate.prompt import CONTEXT_SLOT, DEFAULT_TEMPLATE

DEFAULT_DSL_VERSION = "0.5.0"
"""The DSL version written by default (Dify 1.10 and newer import it; see the module doc)."""

ROLE_OPERATOR = "in"
"""The comparison operator of the role condition (one of Dify's metadata operators)."""

TAVILY_PROVIDER = "langgenius/tavily/tavily"
"""The Tavily plugin's tool provider id in Dify (``langgenius/dify-official-plugins``)."""

CODE_OUTPUTS: dict[str, str] = {
    "formatted_chunks": "string",
    "chunk_count": "number",
    "chunk_metadata": "array[object]",
}
"""The merge node's outputs and their Dify Code-node types (platform design document §3)."""

_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_X_STEP = 320


@dataclass(frozen=True)
class ChatflowOptions:
    """What the exported chatflow is parametrised by.

    ``knowledge_id`` is the id (a UUID) of the Dify knowledge base connected to gcite
    through the External Knowledge API; ``model_provider`` / ``model_name`` the LLM
    node's model as Dify names it (``langgenius/openai/openai`` / ``gpt-4o-mini``);
    ``web_search`` adds the Tavily tool node; ``top_k`` is the node's Top K (Dify sends
    the knowledge base's own Top K and threshold to gcite and truncates to this
    afterwards); ``roles_variable`` the Start variable carrying the user's roles.
    """

    knowledge_id: str
    model_provider: str
    model_name: str
    web_search: bool = True
    top_k: int = 5
    roles_variable: str = "user_roles"
    app_name: str = "G-Cite 问答"
    dsl_version: str = DEFAULT_DSL_VERSION
    max_string_length: int = 400_000


def check_options(options: ChatflowOptions) -> None:
    """Raise :class:`ConfigError` (Chinese) when an option would not survive the import."""
    try:
        uuid.UUID(options.knowledge_id)
    except ValueError as exc:
        raise ConfigError(
            f"知识库 id 必须是 Dify 知识库的 UUID（在 Dify 知识库页面的地址里），"
            f"收到 {options.knowledge_id!r}；Dify 导入时会静默丢弃不是 UUID 的 id"
        ) from exc
    if not options.model_provider.strip() or not options.model_name.strip():
        raise ConfigError(
            "模型供应商和模型名称不能为空，例如 langgenius/openai/openai 和 gpt-4o-mini"
        )
    if not _VERSION.match(options.dsl_version):
        raise ConfigError(f"DSL 版本必须形如 0.5.0，收到 {options.dsl_version!r}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,29}", options.roles_variable):
        raise ConfigError(
            f"角色变量名不合法: {options.roles_variable!r}（字母、数字、下划线，至多 30 个字符）"
        )


def _node(node_id: str, column: int, row: int, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": node_id,
        "type": "custom",
        "position": {"x": 80 + column * _X_STEP, "y": 280 + row * 160},
        "data": {"desc": "", "selected": False, **data},
    }


def _edge(source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{source['id']}-source-{target['id']}-target",
        "source": source["id"],
        "sourceHandle": "source",
        "target": target["id"],
        "targetHandle": "target",
        "type": "custom",
        "data": {
            "sourceType": source["data"]["type"],
            "targetType": target["data"]["type"],
            "isInIteration": False,
            "isInLoop": False,
        },
    }


def start_node(options: ChatflowOptions) -> dict[str, Any]:
    """The Start node: one optional text variable with the user's roles, default ``""``."""
    variable = {
        "variable": options.roles_variable,
        "label": "用户角色（逗号分隔）",
        "type": "text-input",
        "required": False,
        "default": "",
        "max_length": 256,
        "options": [],
    }
    return _node("start", 0, 0, {"type": "start", "title": "开始", "variables": [variable]})


def role_condition(options: ChatflowOptions) -> dict[str, Any]:
    """The Knowledge Retrieval node's manual metadata filter: ``access_roles in <roles>``."""
    return {
        "logical_operator": "and",
        "conditions": [
            {
                "id": "access-roles",
                "name": "access_roles",
                "comparison_operator": ROLE_OPERATOR,
                "value": "{{#start." + options.roles_variable + "#}}",
            }
        ],
    }


def retrieval_node(options: ChatflowOptions) -> dict[str, Any]:
    """The Knowledge Retrieval node on the external knowledge base, with the role filter."""
    data = {
        "type": "knowledge-retrieval",
        "title": "知识检索",
        "query_variable_selector": ["sys", "query"],
        "dataset_ids": [options.knowledge_id],
        "retrieval_mode": "multiple",
        "multiple_retrieval_config": {
            "top_k": options.top_k,
            "score_threshold": None,
            "reranking_enable": False,
            "reranking_mode": "reranking_model",
        },
        "metadata_filtering_mode": "manual",
        "metadata_filtering_conditions": role_condition(options),
    }
    return _node("knowledge", 1, 0, data)


def web_node() -> dict[str, Any]:
    """The Tavily search tool node (its ``json`` output is the raw Tavily response)."""
    data = {
        "type": "tool",
        "title": "Web 搜索",
        "provider_id": TAVILY_PROVIDER,
        "provider_type": "builtin",
        "provider_name": TAVILY_PROVIDER,
        "tool_name": "tavily_search",
        "tool_label": "Tavily Search",
        "tool_node_version": "2",
        "tool_configurations": {"search_depth": "basic", "max_results": 5},
        "tool_parameters": {"query": {"type": "mixed", "value": "{{#sys.query#}}"}},
    }
    return _node("web", 1, 1, data)


def merge_node(options: ChatflowOptions) -> dict[str, Any]:
    """The merge node (``gcite export dify-node``) as a Python Code node."""
    variables = [{"variable": "rag_chunks", "value_selector": ["knowledge", "result"]}]
    if options.web_search:
        variables.append({"variable": "web_chunks", "value_selector": ["web", "json"]})
    data = {
        "type": "code",
        "title": "Chunk编号",
        "code_language": "python3",
        "code": render_code_node(max_string_length=options.max_string_length),
        "variables": variables,
        "outputs": {name: {"type": kind, "children": None} for name, kind in CODE_OUTPUTS.items()},
    }
    return _node("merge", 2, 0, data)


def llm_node(options: ChatflowOptions) -> dict[str, Any]:
    """The LLM node: the seeds' §5.2 system prompt with ``formatted_chunks`` as context."""
    data = {
        "type": "llm",
        "title": "LLM",
        "model": {
            "provider": options.model_provider,
            "name": options.model_name,
            "mode": "chat",
            "completion_params": {"temperature": 0.3},
        },
        "context": {"enabled": True, "variable_selector": ["merge", "formatted_chunks"]},
        "prompt_template": [
            {"role": "system", "text": DEFAULT_TEMPLATE.replace(CONTEXT_SLOT, "{{#context#}}")}
        ],
        "memory": {
            "window": {"enabled": True, "size": 10},
            "query_prompt_template": "{{#sys.query#}}",
        },
        "vision": {"enabled": False},
        "variables": [],
    }
    return _node("llm", 3, 0, data)


def answer_node() -> dict[str, Any]:
    """The Answer node: the LLM's text, markers and all (the client renders them)."""
    return _node(
        "answer",
        4,
        0,
        {"type": "answer", "title": "直接回复", "answer": "{{#llm.text#}}", "variables": []},
    )


def _features() -> dict[str, Any]:
    return {
        "file_upload": {"enabled": False},
        "opening_statement": "",
        "retriever_resource": {"enabled": True},
        "sensitive_word_avoidance": {"enabled": False},
        "speech_to_text": {"enabled": False},
        "suggested_questions": [],
        "suggested_questions_after_answer": {"enabled": False},
        "text_to_speech": {"enabled": False},
    }


def build_chatflow(options: ChatflowOptions) -> dict[str, Any]:
    """The whole app DSL as a mapping (``version``, ``kind``, ``app``, ``dependencies``,
    ``workflow``). Raises :class:`ConfigError` for options Dify would not import."""
    check_options(options)
    start, knowledge = start_node(options), retrieval_node(options)
    merge, llm, answer = merge_node(options), llm_node(options), answer_node()
    nodes = [start, knowledge]
    edges = [_edge(start, knowledge), _edge(knowledge, merge)]
    if options.web_search:
        web = web_node()
        nodes.append(web)
        edges += [_edge(start, web), _edge(web, merge)]
    nodes += [merge, llm, answer]
    edges += [_edge(merge, llm), _edge(llm, answer)]
    return {
        "version": options.dsl_version,
        "kind": "app",
        "app": {
            "name": options.app_name,
            "mode": "advanced-chat",
            "icon": "📚",
            "icon_type": "emoji",
            "icon_background": "#E0F2FE",
            "description": "G-Cite：gcite 外部知识库（按角色过滤）+ Web 搜索，生成时引用 [C:N]",
            "use_icon_as_answer_icon": False,
        },
        "dependencies": [],
        "workflow": {
            "conversation_variables": [],
            "environment_variables": [],
            "features": _features(),
            "graph": {"nodes": nodes, "edges": edges, "viewport": {"x": 0, "y": 0, "zoom": 0.8}},
        },
    }


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings (the Code node's code, the prompt) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not value.endswith((" ", "\t")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_chatflow(options: ChatflowOptions) -> str:
    """:func:`build_chatflow` as YAML text (UTF-8 characters kept, key order kept)."""
    return yaml.dump(
        build_chatflow(options), Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=100
    )


__all__ = [
    "CODE_OUTPUTS",
    "DEFAULT_DSL_VERSION",
    "ROLE_OPERATOR",
    "TAVILY_PROVIDER",
    "ChatflowOptions",
    "build_chatflow",
    "check_options",
    "render_chatflow",
    "role_condition",
]
