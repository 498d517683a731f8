"""The LLM node's prompt: seed §5.2 template, context slot, history without markers, §6 list."""

from __future__ import annotations

from pathlib import Path

import pytest

from gcite.errors import ConfigError
from gcite.generate.prompt import (
    CITED_BEFORE_HEADER,
    DEFAULT_TEMPLATE,
    build_messages,
    load_template,
    render_system_prompt,
)

CHUNKS = "[C:1]\n巡更人员执行巡检计划时，需先进入巡更功能项。\n\n[C:2]\n异常可在终端上报。"


def test_default_template_is_the_seed_prompt_with_the_context() -> None:
    messages = build_messages("巡更怎么做？", CHUNKS)
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert system.startswith("# 角色设定\n你是欧爪宝")
    assert "在句末标注 [C:N]（例如 [C:1]）" in system
    assert '直接说"根据现有资料无法确定"' in system
    assert system.rstrip().endswith("检索片段：\n" + CHUNKS)
    assert "{#context#}" not in system and "{#context#}" in DEFAULT_TEMPLATE
    assert messages[1] == {"role": "user", "content": "巡更怎么做？"}


def test_custom_templates_dify_slot_and_missing_slot(tmp_path: Path) -> None:
    assert (
        render_system_prompt(CHUNKS, template="你是助手。\n{{#context#}}")
        == "你是助手。\n" + CHUNKS
    )
    no_slot = render_system_prompt(CHUNKS, template="你是助手。")
    assert no_slot == "你是助手。\n\n检索片段：\n" + CHUNKS + "\n"
    assert "（无检索片段）" in render_system_prompt("", template="{#context#}")
    path = tmp_path / "prompt.txt"
    path.write_text("# 角色\n你是小明。\n{#context#}", encoding="utf-8")
    assert build_messages("q", CHUNKS, template=load_template(path))[0]["content"].startswith(
        "# 角色\n你是小明。\n[C:1]"
    )


def test_template_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_template(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_template(empty)


def test_history_answers_lose_their_markers_in_both_shapes() -> None:
    history = [
        {"query": "第一问", "answer": "答案一[C:1]，还有【C：2】。"},
        {"role": "user", "content": "第二问"},
        {"role": "assistant", "content": "答案二[C:1, C:3]。`[C:9]` 是代码"},
        {"role": "tool", "content": "ignored"},
        {"query": "没有回答"},
    ]
    messages = build_messages("第三问", CHUNKS, history)
    assert messages[1:] == [
        {"role": "user", "content": "第一问"},
        {"role": "assistant", "content": "答案一，还有。"},
        {"role": "user", "content": "第二问"},
        {"role": "assistant", "content": "答案二。`[C:9]` 是代码"},
        {"role": "user", "content": "没有回答"},
        {"role": "user", "content": "第三问"},
    ]


def test_cited_before_listed_once_without_numbers() -> None:
    cited = [
        {
            "id": "3",
            "document_title": "巡更指南",
            "content": "巡更人员需先登录。",
            "source_type": "rag",
        },
        {
            "id": "5",
            "document_title": "巡更指南",
            "content": "巡更人员需先登录。",
            "source_type": "rag",
        },
        {
            "id": "7",
            "document_title": "物业巡检 - 知乎",
            "content": "长" * 200,
            "source_type": "web",
        },
    ]
    system = build_messages("q", CHUNKS, cited_before=cited)[0]["content"]
    section = system.split(CITED_BEFORE_HEADER, 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    assert lines[0] == "- 《巡更指南》（知识库）：巡更人员需先登录。"
    assert lines[1].startswith("- 《物业巡检 - 知乎》（公网）：") and lines[1].endswith("…")
    assert len(lines) == 2 and "[C:3]" not in section
    assert CITED_BEFORE_HEADER not in build_messages("q", CHUNKS)[0]["content"]
