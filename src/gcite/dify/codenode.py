"""Export the merge node as ONE self-contained Python file for a Dify Code node.

The file is built from the sources of :mod:`gcite.chunks`,
:mod:`gcite.envelopes` and :mod:`gcite.merge` (standard library only), with
their ``from __future__`` / ``from gcite...`` imports, docstrings and
``__all__`` removed (no ``from __future__`` in the file: a sandbox may run it
after a prelude of its own, and the annotations are valid on Python 3.10+),
followed by a ``main(rag_chunks=None, web_chunks=None) -> dict`` (either input
may be deleted from the node) that returns exactly
the node's three declared outputs (Dify rejects extra or missing keys:
dify-protocol.md §4). What ``main`` returns equals
:func:`gcite.merge.code_node_outputs` with the same settings; the parity test
runs the file in a bare interpreter to prove it.

Seeds: platform design document §3 and Appendix A (the node the user pastes),
dify-protocol.md §4 (Code node runner, validation and limits).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from gcite import __version__, chunks, envelopes, merge

#: Modules inlined into the exported file, in dependency order.
INLINED_MODULES: tuple[ModuleType, ...] = (chunks, envelopes, merge)
#: Names the generated part of the file defines; inlined modules must not define them.
NODE_NAMES = frozenset({"MAX_WEB_RESULTS", "MAX_OBJECTS", "MAX_STRING_LENGTH", "main"})
#: Smallest ``max_string_length`` that still holds one ``[C:N]`` header and some text.
MIN_STRING_LENGTH = 100

_HEADER = """\
# G-Cite 合并节点（Chunk编号）—— Dify 代码节点，由 gcite {version} 生成，请勿手工修改逻辑。
# 生成命令: gcite export dify-node{options}
# 来源: QA_G-Cite_Dify平台功能设计 §3「合并代码节点设计」、附录 A；Python 3.10+，仅用标准库。
#
# 在 Dify 中的配置（代码节点，语言选 Python3，把本文件全部内容粘贴进去）:
#
#   输入变量（Input Variables）:
#     rag_chunks   ← 知识检索节点 / result          (Array[Object])
#     web_chunks   ← 网页搜索工具节点 / json         (Array[Object]；百度搜索节点的 result、
#                                                    Tavily / 博查 原始响应、普通列表均可)
#     只用其中一个来源时，直接删除另一个输入变量（Dify 不允许发布未赋值的输入），
#     节点照常输出；两个都删除时输出空结果。
#
#   输出变量（Output Variables，名字和类型必须完全一致，不能多也不能少）:
#     formatted_chunks   String          → LLM 节点上下文（{{{{#context#}}}}）
#     chunk_count        Number
#     chunk_metadata     Array[Object]   → 通过 node_finished 事件下发给客户端
#
# Dify 限制: Array[Object] 最多 {max_objects} 项；字符串最长 {max_string_length} 字符
# （CODE_MAX_STRING_LENGTH，Dify 1.x 默认 400000，较旧的部署为 80000，可用
#  --max-string-length 80000 重新生成）。超出时按排序从末尾丢弃 chunk、截断正文，
# formatted_chunks 只引用 chunk_metadata 中存在的 chunk。

# Web 结果最多保留条数（按排序取前 N 条）；None 表示不限制。
# 附录 A 的做法：搜索工具的 Top-K 不生效时设为 2 等小值。
MAX_WEB_RESULTS = {max_web_results}
# chunk_metadata 最多项数（Dify CODE_MAX_OBJECT_ARRAY_LENGTH）。
MAX_OBJECTS = {max_objects}
# 输出字符串最大长度（Dify CODE_MAX_STRING_LENGTH；旧部署为 80000）。
MAX_STRING_LENGTH = {max_string_length}
"""

_MAIN = '''

def main(rag_chunks: list = None, web_chunks: list = None) -> dict:
    """Dify 代码节点入口：合并知识库与网页检索结果，全局编号，输出三个变量。

    两个输入都有默认值：只接知识库（或只接网页搜索）的工作流可以删掉另一个输入变量。
    """
    result = code_node_outputs(
        rag_chunks,
        web_chunks,
        max_web_results=MAX_WEB_RESULTS,
        max_objects=MAX_OBJECTS,
        max_string_length=MAX_STRING_LENGTH,
    )
    return {
        "formatted_chunks": result["formatted_chunks"],
        "chunk_count": result["chunk_count"],
        "chunk_metadata": result["chunk_metadata"],
    }
'''


def _top_level_names(nodes: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _is_removed(node: ast.stmt, index: int) -> bool:
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return isinstance(node.value.value, str)  # module docstring
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return module == "__future__" or module == "gcite" or module.startswith("gcite.")
    if isinstance(node, ast.Import):
        return any(a.name == "gcite" or a.name.startswith("gcite.") for a in node.names)
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    return False


def inline_source(source: str) -> tuple[str, set[str]]:
    """Strip one module's source for inlining; return it and its top-level names.

    Removes the module docstring, ``from __future__`` and ``gcite`` imports and
    ``__all__``; keeps everything else (comments included) line for line.
    Raises :class:`SyntaxError` if ``source`` does not parse.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    drop: set[int] = set()
    kept_nodes: list[ast.stmt] = []
    for index, node in enumerate(tree.body):
        if _is_removed(node, index):
            drop.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
        else:
            kept_nodes.append(node)
    kept = [line for number, line in enumerate(lines) if number not in drop]
    text = re.sub(r"\n{3,}", "\n\n\n", "\n".join(kept)).strip("\n")
    return text, _top_level_names(kept_nodes)


def _module_source(module: ModuleType) -> str:
    path = module.__file__
    if path is None:  # pragma: no cover - only for namespace packages
        raise RuntimeError(f"no source file for {module.__name__}")
    return Path(path).read_text(encoding="utf-8")


def _check_settings(max_string_length: int, max_web_results: int | None, max_objects: int) -> None:
    if isinstance(max_string_length, bool) or max_string_length < MIN_STRING_LENGTH:
        raise ValueError(f"max_string_length must be >= {MIN_STRING_LENGTH}")
    if isinstance(max_objects, bool) or max_objects < 1:
        raise ValueError("max_objects must be >= 1")
    if max_web_results is not None and (isinstance(max_web_results, bool) or max_web_results < 0):
        raise ValueError("max_web_results must be None or >= 0")


def build_code_node(
    sources: Sequence[tuple[str, str]],
    *,
    max_string_length: int = 400_000,
    max_web_results: int | None = None,
    max_objects: int = 30,
) -> str:
    """Assemble the Code-node file from ``(module name, source)`` pairs, in order.

    The pure core of :func:`render_code_node` (same settings and errors); each
    source is stripped by :func:`inline_source`. Raises :class:`RuntimeError`
    when two sources (or a source and the generated part) define the same
    top-level name, and :class:`SyntaxError` if the result does not compile.
    """
    _check_settings(max_string_length, max_web_results, max_objects)
    options = ""
    if max_string_length != 400_000:
        options += f" --max-string-length {max_string_length}"
    if max_web_results is not None:
        options += f" --max-web-results {max_web_results}"
    if max_objects != 30:
        options += f" --max-objects {max_objects}"
    parts = [
        _HEADER.format(
            version=__version__,
            options=options,
            max_web_results=repr(max_web_results),
            max_objects=max_objects,
            max_string_length=max_string_length,
        )
    ]
    defined: dict[str, str] = dict.fromkeys(NODE_NAMES, "main")
    for module_name, source in sources:
        text, names = inline_source(source)
        for name in sorted(names):
            if name in defined:
                raise RuntimeError(
                    f"{module_name} and {defined[name]} both define {name!r}: "
                    "inlined modules need distinct top-level names"
                )
            defined[name] = module_name
        parts.append(f"\n\n# ---- {module_name} " + "-" * max(4, 60 - len(module_name)))
        parts.append("\n" + text + "\n")
    parts.append(_MAIN)
    code = "".join(parts)
    compile(code, "<dify code node>", "exec")
    return code


def render_code_node(
    *,
    max_string_length: int = 400_000,
    max_web_results: int | None = None,
    max_objects: int = 30,
) -> str:
    """The Dify Code-node file: a header with the node's declarations, then the merge node.

    ``max_string_length``: Dify's ``CODE_MAX_STRING_LENGTH`` (400,000 on 1.x,
    80,000 on older deployments), at least :data:`MIN_STRING_LENGTH`;
    ``max_web_results``: the editable ``MAX_WEB_RESULTS`` constant (``None``:
    no cap; seed Appendix A used 2); ``max_objects``: Dify's
    ``CODE_MAX_OBJECT_ARRAY_LENGTH`` (30), at least 1.

    Returns the file's text (UTF-8, ends with a newline, deterministic):
    ``def main(rag_chunks: list = None, web_chunks: list = None) -> dict`` returning exactly
    ``formatted_chunks``, ``chunk_count`` and ``chunk_metadata``, equal to
    :func:`gcite.merge.code_node_outputs` with the same settings.
    Raises :class:`ValueError` for a setting out of range.
    """
    sources = [(module.__name__, _module_source(module)) for module in INLINED_MODULES]
    return build_code_node(
        sources,
        max_string_length=max_string_length,
        max_web_results=max_web_results,
        max_objects=max_objects,
    )


__all__ = [
    "INLINED_MODULES",
    "MIN_STRING_LENGTH",
    "build_code_node",
    "inline_source",
    "render_code_node",
]
