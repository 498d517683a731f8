"""Role-based access on the real law corpus (issue 4 item 6), filtered inside Qdrant.

Visibility is recomputed here from laws.meta.json with plain Python, independently
of gcite's filter code, and compared with what the store returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.errors import FilterError

pytestmark = pytest.mark.corpus

QUERIES = [
    "消防设施每年检测",
    "物业服务企业的职责",
    "个人信息处理者应当履行的义务",
    "特种设备使用单位的安全责任",
    "业主大会的决定",
    "单位内部治安保卫工作",
    "建筑工程施工许可",
    "节约能源管理",
]


def _documents(corpus: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((corpus / "laws.meta.json").read_text(encoding="utf-8"))
    docs: dict[str, dict[str, Any]] = data["documents"]
    return docs


def _visible(docs: dict[str, dict[str, Any]], roles: list[str]) -> set[str]:
    out = set()
    for name, meta in docs.items():
        doc_roles = meta.get("access_roles")
        if not doc_roles or set(doc_roles) & set(roles):
            out.add(name)
    return out


def _names(law_store: Any, query: str, roles: list[str] | None, top_k: int = 20) -> list[str]:
    items = law_store.store.search(query, roles=roles, top_k=top_k)
    return [item["metadata"]["document_name"] for item in items]


@pytest.mark.parametrize(
    "roles",
    [[], ["物业经理"], ["运维工程师"], ["安保主管"], ["法务"], ["法务", "工程部"], ["未知角色"]],
)
def test_every_hit_is_visible_to_the_roles(law_store: Any, roles: list[str]) -> None:
    docs = _documents(law_store.corpus_dir)
    allowed = _visible(docs, roles)
    seen: set[str] = set()
    for query in QUERIES:
        names = _names(law_store, query, roles)
        assert names, query
        assert set(names) <= allowed, (roles, query, set(names) - allowed)
        seen.update(names)
    # documents without roles (absent, null and empty list) are reached by everyone
    assert {"物业管理条例(2018-03-19).md", "消防法(2021-04-29).md"} <= seen | allowed


def test_role_sees_its_document_and_others_do_not(law_store: Any) -> None:
    query = "个人信息处理者应当履行哪些义务"
    assert "个人信息保护法(2021-08-20).md" in _names(law_store, query, ["法务"], 5)
    assert "个人信息保护法(2021-08-20).md" in _names(law_store, query, ["人事"], 5)
    assert "个人信息保护法(2021-08-20).md" not in _names(law_store, query, ["运维工程师"], 50)
    assert "个人信息保护法(2021-08-20).md" not in _names(law_store, query, [], 50)


def test_documents_without_roles_in_all_three_forms_are_visible_to_no_role_user(
    law_store: Any,
) -> None:
    cases = {
        "上海市消防条例(2020-03-19).md": "上海市消防安全重点单位消防安全评估报告备案",  # null
        "消防法(2021-04-29).md": "建筑消防设施每年至少进行一次全面检测",  # []
        "物业管理条例(2018-03-19).md": "业主大会 业主委员会 物业服务企业 国务院",  # absent
    }
    for name, query in cases.items():
        assert name in _names(law_store, query, [], 10), name


def test_several_roles_see_the_union(law_store: Any) -> None:
    both = _names(law_store, "建筑工程施工许可证 个人信息", ["法务", "工程部"], 40)
    assert "建筑法(2019-04-23).md" in both
    assert "个人信息保护法(2021-08-20).md" in both
    only_legal = _names(law_store, "建筑工程施工许可证", ["法务"], 40)
    assert "建筑法(2019-04-23).md" not in only_legal


def test_no_role_filter_for_trusted_callers_sees_everything(law_store: Any) -> None:
    names = _names(law_store, "个人信息处理者应当履行哪些义务", None, 5)
    assert "个人信息保护法(2021-08-20).md" in names


def test_roles_must_be_a_list_of_strings(law_store: Any) -> None:
    with pytest.raises(FilterError):
        law_store.store.search("消防", roles="法务")
    with pytest.raises(FilterError):
        law_store.store.search("消防", roles=["法务", 3])
