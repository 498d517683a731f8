"""The LLM node's prompt: seed §5.2 system prompt, ``{#context#}`` and multi-turn history.

Source: platform design document §5 (LLM node: context cleared, system prompt
§5.2 with the merge node's ``formatted_chunks`` as ``{{#context#}}``, user prompt
``{{#sys.query#}}``) and §6 (multi-turn: earlier answers may rely on chunks cited
before, so "Prompt 中保留已引用 [C:N] 列表").

Pure functions, no I/O except :func:`load_template` (reads a template file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gcite.errors import ConfigError

CONTEXT_SLOT = "{#context#}"
"""Where ``formatted_chunks`` goes in a template (also accepted: ``{{#context#}}``)."""

DEFAULT_PERSONA = """# 角色设定
你是欧爪宝，一栋智能写字楼的 AI 助理，为楼内员工和访客提供帮助。

# 个性特征
1. 回答简洁精准，不啰嗦，不绕弯子。
2. 友好亲切，但保持职业感，不过度热情。
3. 知道就是知道，不知道就老实说不知道，绝不编造。
4. 当用户有多个问题时，逐一回答，条理清晰。

# 能力边界
1. ✅ 你可以回答关于这栋楼的问题：会议室、设备用途、服务流程、规章制度、运营指南等。
2. ✅ 你可以聊一些通用话题：技术原理、行业知识、日常常识。
3. ❌ 你不能操控任何设备（如开关灯、调空调）。
4. ❌ 你不能预定会议室、不能查询能耗等业务数据。
5. ❌ 如果用户要求以上操作，礼貌告知请他们通过业务指令来完成。"""

DEFAULT_RULES = """# 检索片段来源说明（多源时启用）
下方检索片段可能来自两种信息源：
1. **知识库（rag）**：本楼宇内部知识库，包含规章制度、巡检流程、设备说明等
2. **公网（web）**：来自第三方网站（知乎、CSDN、官方文档站等）的公开信息
两种来源同等重要，根据用户问题选择最合适的片段回答。

# 回答规则（重要）
1. 回答时严格基于下方编号的检索片段。
2. 当你引用某个片段的**具体内容**来回答时，在句末标注 [C:N]（例如 [C:1]）。
3. 如果某个片段与用户问题无关，忽略它，不要用它，也不要标注它。
4. 涉及楼宇流程、规章制度、设备参数、操作步骤时，**优先**标注知识库来源。
5. 涉及通用技术、行业知识、跨楼宇参考时，**优先**标注公网来源。
6. 如果所有片段都无法回答问题，直接说"根据现有资料无法确定"，
   不要编造，此时不需要任何 [C:N] 标注。"""

DEFAULT_TEMPLATE = (
    DEFAULT_PERSONA + "\n\n" + DEFAULT_RULES + "\n\n---\n\n检索片段：\n" + CONTEXT_SLOT + "\n"
)
"""The seed §5.2 system prompt, verbatim, with ``{#context#}`` as the context slot."""

NO_ANSWER = "根据现有资料无法确定"
"""The fixed answer of seed §5.2 rule 6 when no chunk answers the question."""

CITED_BEFORE_HEADER = "# 前几轮已引用的资料（仅供理解上下文；本轮引用只能使用上方检索片段的编号）"

_EXCERPT_CHARS = 80


def load_template(path: str | Path) -> str:
    """Read a system-prompt template file (UTF-8).

    The template should contain ``{#context#}`` (or Dify's ``{{#context#}}``); when
    it does not, the context is appended after a ``检索片段：`` heading.
    Raises :class:`ConfigError` when the file cannot be read or is empty.
    """
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"无法读取系统提示词文件 {path}: {exc}") from exc
    if not text.strip():
        raise ConfigError(f"系统提示词文件 {path} 为空")
    return text


def strip_answer_markers(text: str) -> str:
    """Remove every ``[C:N]`` marker (all grammar variants) from an earlier answer.

    Uses :func:`gcite.stream.strip_markers`, the project's one marker grammar
    (``../shared/spec/citation-markers.md``).
    """
    from gcite.stream import strip_markers

    result: str = strip_markers(text)
    return result


def strip_reasoning(text: str) -> str:
    """An earlier answer without its leading reasoning block (``<think>…</think>``,
    citation-markers.md §4a): reasoning is shown apart and never goes back into a prompt.
    Markers are kept (as ``[C:id]``); ``text`` unchanged when it has no reasoning."""
    from gcite.stream import parse_all

    result = parse_all(text)
    if not result.reasoning:
        return text
    return "".join(
        seg["text"] if "text" in seg else f"[C:{seg['cite']}]"
        for seg in result.segments
        if "text" in seg or "cite" in seg
    )


def render_system_prompt(
    formatted_chunks: str,
    cited_before: Sequence[Mapping[str, Any]] = (),
    template: str | None = None,
) -> str:
    """Fill the template's context slot with ``formatted_chunks``; add the cited-before list.

    ``formatted_chunks`` is the merge node's output (``"[C:1]\\n...\\n\\n[C:2]\\n..."``).
    ``cited_before`` are UnifiedChunk-like dicts cited in earlier turns (seed §6); they are
    listed by title with a short excerpt, without ``[C:N]`` numbers (ids are renumbered each
    turn, so old numbers would mislead the model).
    """
    tpl = template if template is not None else DEFAULT_TEMPLATE
    context = formatted_chunks.strip() or "（无检索片段）"
    if "{{#context#}}" in tpl:
        prompt = tpl.replace("{{#context#}}", context)
    elif CONTEXT_SLOT in tpl:
        prompt = tpl.replace(CONTEXT_SLOT, context)
    else:
        prompt = tpl.rstrip() + "\n\n检索片段：\n" + context + "\n"
    listed = _cited_before_lines(cited_before)
    if listed:
        prompt = prompt.rstrip() + "\n\n" + CITED_BEFORE_HEADER + "\n" + "\n".join(listed) + "\n"
    return prompt


def _cited_before_lines(cited_before: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for chunk in cited_before:
        title = str(chunk.get("document_title") or chunk.get("document_name") or "").strip()
        content = " ".join(str(chunk.get("content") or "").split())
        key = (title, content[:_EXCERPT_CHARS])
        if key in seen or not (title or content):
            continue
        seen.add(key)
        source = "公网" if chunk.get("source_type") == "web" else "知识库"
        excerpt = content[:_EXCERPT_CHARS] + ("…" if len(content) > _EXCERPT_CHARS else "")
        lines.append(f"- 《{title or '未命名'}》（{source}）：{excerpt}")
    return lines


def build_messages(
    query: str,
    formatted_chunks: str,
    history: Sequence[Mapping[str, Any]] = (),
    cited_before: Sequence[Mapping[str, Any]] = (),
    template: str | None = None,
) -> list[dict[str, str]]:
    """Build the chat-completions ``messages`` for one turn (seed §5.1/§5.2/§6).

    - ``query``: the user's question (``{{#sys.query#}}``), sent as the last user message.
    - ``formatted_chunks``: merge-node output, put into the system prompt's context slot.
    - ``history``: earlier turns, oldest first, as ``{"role": "user"|"assistant", "content"}``
      or as ``{"query", "answer"}`` pairs; assistant answers have their markers stripped
      (they referred to chunk numbers of another turn). Items with other roles or empty
      content are skipped.
    - ``cited_before``: chunks cited in earlier turns (UnifiedChunk dicts), listed in the
      system prompt per seed §6.
    - ``template``: a system prompt template (default :data:`DEFAULT_TEMPLATE`).

    Returns ``[{"role": "system", ...}, *history, {"role": "user", "content": query}]``.
    """
    system = render_system_prompt(formatted_chunks, cited_before, template)
    messages: list[dict[str, str]] = [{"role": "system", "content": system}]
    for turn in history:
        for role, content in _turn_messages(turn):
            if role == "assistant":
                content = strip_answer_markers(strip_reasoning(content)).strip()
            if content:
                messages.append({"role": role, "content": content})
    messages.append({"role": "user", "content": query})
    return messages


def _turn_messages(turn: Mapping[str, Any]) -> list[tuple[str, str]]:
    if "role" in turn:
        role = turn.get("role")
        content = turn.get("content")
        if role in ("user", "assistant") and isinstance(content, str):
            return [(str(role), content)]
        return []
    pairs: list[tuple[str, str]] = []
    if isinstance(turn.get("query"), str):
        pairs.append(("user", turn["query"]))
    if isinstance(turn.get("answer"), str):
        pairs.append(("assistant", turn["answer"]))
    return pairs


__all__ = [
    "CONTEXT_SLOT",
    "DEFAULT_TEMPLATE",
    "NO_ANSWER",
    "build_messages",
    "load_template",
    "render_system_prompt",
    "strip_answer_markers",
    "strip_reasoning",
]
