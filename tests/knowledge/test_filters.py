"""Condition parsing and compilation (pure), and nested filters on the real corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.errors import FilterError
from gcite.knowledge.filters import (
    Cond,
    Group,
    Not,
    build_filter,
    filter_payload,
    parse_condition,
    role_condition,
    role_visibility,
    to_timestamp,
)
from gcite.knowledge.stores.edge import EdgeModels
from gcite.knowledge.stores.qdrant import ClientModels


def leaf(name: str, op: str, value: Any = None) -> dict[str, Any]:
    return {"name": name, "comparison_operator": op, "value": value}


# --------------------------------------------------------------------------- parsing


def test_nested_groups_and_not_parse_into_a_tree() -> None:
    tree = parse_condition(
        {
            "logical_operator": "or",
            "conditions": [
                {
                    "logical_operator": "and",
                    "conditions": [leaf("a", "is", "x"), leaf("b", ">=", 3)],
                },
                {"not": leaf("c", "in", "p, q")},
            ],
        }
    )
    assert tree == Group(
        "or",
        (
            Group("and", (Cond("a", "is", "x"), Cond("b", "≥", 3.0))),
            Not(Cond("c", "in", ("p", "q"))),
        ),
    )


def test_aliases_and_defaults() -> None:
    assert parse_condition(leaf("n", "!=", "5")) == Cond("n", "≠", 5.0)
    assert parse_condition(leaf("n", "<=", 1)) == Cond("n", "≤", 1.0)
    assert parse_condition({"conditions": [leaf("a", "empty")]}) == Group(
        "and", (Cond("a", "empty", None),)
    )
    assert parse_condition(leaf("d", "before", "2021-01-01")) == Cond(
        "d", "before", to_timestamp("2021-01-01")
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (leaf("a", "like", "x"), "未知的比较运算符 'like'"),
        (leaf("a", "is"), "缺少 value"),
        (leaf("a", ">", "abc"), "必须是数字"),
        (leaf("a", "before", "yesterday"), "ISO 日期"),
        (leaf("a", "contains", ["x"]), "必须是字符串"),
        (leaf("a", "contains", ""), "不能为空字符串"),
        (leaf("a", "in", 5), "列表或逗号分隔"),
        (leaf("a", "in", [{"x": 1}]), "列表元素"),
        (leaf("a b", "is", "x"), "name"),
        (leaf("", "is", "x"), "name"),
        ({"logical_operator": "xor", "conditions": []}, "logical_operator"),
        ({"conditions": "nope"}, "conditions 必须是列表"),
        ({"not": leaf("a", "is", "x"), "extra": 1}, "not 组不能带其他键"),
        ({"foo": 1}, "既不是条件"),
        ([leaf("a", "is", "x")], "应为对象"),
        ({"conditions": [{"conditions": [leaf("a", "oops", 1)]}]}, "$.conditions[0].conditions[0]"),
    ],
)
def test_malformed_conditions_raise_filter_error_with_a_clear_message(
    raw: Any, message: str
) -> None:
    with pytest.raises(FilterError) as info:
        parse_condition(raw)
    assert message in str(info.value)


def test_depth_and_size_limits() -> None:
    deep: dict[str, Any] = leaf("a", "is", "x")
    for _ in range(40):
        deep = {"not": deep}
    with pytest.raises(FilterError, match="嵌套层数"):
        parse_condition(deep)
    wide = {"conditions": [leaf("a", "is", str(i)) for i in range(300)]}
    with pytest.raises(FilterError, match="条件数量"):
        parse_condition(wide)


def test_role_condition_semantics() -> None:
    assert role_condition([]) == {
        "logical_operator": "or",
        "conditions": [{"name": "access_roles", "comparison_operator": "empty", "value": None}],
    }
    cond = role_condition(["法务", "人事"])
    assert cond["conditions"][0] == {
        "name": "access_roles",
        "comparison_operator": "in",
        "value": ["法务", "人事"],
    }
    with pytest.raises(FilterError):
        role_condition("法务")


def test_filter_payload_lookup_fields() -> None:
    payload = filter_payload(
        {
            "access_roles": ["法务", "人事"],
            "source_file_url": "",
            "year": 2021,
            "effective": "2021-04-29",
            "nothing": None,
            "bad key": "x",
        }
    )
    assert payload["m_str"] == {
        "access_roles": ["法务", "人事"],
        "year": "2021",
        "effective": "2021-04-29",
    }
    assert payload["m_rev"]["effective"] == "92-40-1202"
    assert payload["m_num"] == {"year": 2021.0, "effective": to_timestamp("2021-04-29")}


@pytest.mark.parametrize("models", [EdgeModels, ClientModels])
def test_both_qdrant_apis_build_a_filter(models: Any) -> None:
    flt = build_filter(
        models(),
        dataset="d",
        roles=["法务"],
        condition={"not": {"logical_operator": "or", "conditions": [leaf("a", "end with", "z")]}},
    )
    assert flt is not None
    assert build_filter(models()) is None


# --------------------------------------------------------------------------- on the corpus


def _reference(meta: dict[str, Any], node: dict[str, Any]) -> bool:
    """An independent evaluator of the string operators used below."""
    if "not" in node:
        return not _reference(meta, node["not"])
    if "conditions" in node:
        results = [_reference(meta, c) for c in node["conditions"]]
        return all(results) if node.get("logical_operator", "and") == "and" else any(results)
    value = meta.get(node["name"])
    values = (
        [str(v) for v in value]
        if isinstance(value, list)
        else ([] if value in (None, "") else [str(value)])
    )
    op, want = node["comparison_operator"], node.get("value")
    if op in {"in", "not in"} and isinstance(want, str):
        want = [w.strip() for w in want.split(",")]
    is_array = isinstance(value, list) or node["name"] == "access_roles"
    if op == "empty":
        return not values
    if op == "not empty":
        return bool(values)
    if op == "is":
        return want in values
    if op == "is not":
        return want not in values
    if op == "contains":
        return want in values if is_array else any(want in v for v in values)
    if op == "not contains":
        return not (want in values if is_array else any(want in v for v in values))
    if op == "start with":
        return any(v.startswith(want) for v in values)
    if op == "end with":
        return any(v.endswith(want) for v in values)
    if op == "in":
        return bool(set(values) & set(want))
    if op == "not in":
        return not set(values) & set(want)
    raise AssertionError(op)


NESTED = [
    # (title contains 消防 AND has roles) OR (url starts with oss:// AND NOT 运维工程师)
    {
        "logical_operator": "or",
        "conditions": [
            {
                "logical_operator": "and",
                "conditions": [
                    leaf("document_title", "contains", "消防"),
                    leaf("access_roles", "not empty"),
                ],
            },
            {
                "logical_operator": "and",
                "conditions": [
                    leaf("source_file_url", "start with", "oss://"),
                    {"not": leaf("access_roles", "contains", "运维工程师")},
                ],
            },
        ],
    },
    {
        "not": {
            "logical_operator": "or",
            "conditions": [
                leaf("access_roles", "empty"),
                leaf("document_title", "end with", "条例"),
            ],
        }
    },
    {
        "conditions": [
            leaf("source_file_url", "end with", ".pdf"),
            leaf("access_roles", "in", "运维工程师,法务"),
        ]
    },
    {
        "conditions": [
            leaf("source_file_url", "empty"),
            leaf("document_title", "is not", "上海市消防条例"),
        ]
    },
    {
        "conditions": [
            leaf("document_title", "start with", "中华人民共和国"),
            leaf("access_roles", "not in", ["法务"]),
        ]
    },
]


@pytest.mark.corpus
@pytest.mark.parametrize("condition", NESTED)
def test_nested_filters_match_an_independent_evaluation(
    law_store: Any, condition: dict[str, Any]
) -> None:
    corpus: Path = law_store.corpus_dir
    docs = json.loads((corpus / "laws.meta.json").read_text(encoding="utf-8"))["documents"]
    expected = {name for name, meta in docs.items() if _reference(meta, condition)}
    assert expected, "each case must select something"
    got: set[str] = set()
    for query in ("法律责任 罚款", "管理 职责 规定", "安全 设施 检查"):
        items = law_store.store.search(query, condition=condition, top_k=100)
        names = {i["metadata"]["document_name"] for i in items}
        assert names <= expected, (condition, names - expected)
        got |= names
    if len(expected) <= 3:
        assert got == expected
    else:
        assert got


@pytest.mark.corpus
def test_condition_and_roles_combine(law_store: Any) -> None:
    cond = leaf("document_title", "contains", "消防")
    items = law_store.store.search("消防安全", roles=[], condition=cond, top_k=50)
    names = {i["metadata"]["document_name"] for i in items}
    assert names == {"消防法(2021-04-29).md", "上海市消防条例(2020-03-19).md"}


@pytest.mark.corpus
def test_malformed_condition_in_search_is_an_error_not_empty_results(law_store: Any) -> None:
    with pytest.raises(FilterError, match="未知的比较运算符"):
        law_store.store.search("消防", condition=leaf("document_title", "resembles", "x"))
    with pytest.raises(FilterError):
        law_store.store.search("消防", condition="document_title=消防")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the role field


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ({"comparison_operator": "contains", "value": "法务，人事"}, ("人事", "法务")),
        ({"comparison_operator": "is", "value": '["法务"]'}, ("法务",)),
        ({"comparison_operator": "in", "value": None}, ()),
        ({"comparison_operator": "in", "value": ""}, ()),
        ({"comparison_operator": "in"}, ()),
    ],
)
def test_role_field_takes_role_names_and_fails_closed(raw: dict[str, Any], names: Any) -> None:
    """One grammar for the role field: narrowing operators become ``in`` with role names;
    a missing value means no role at all (never "no filter")."""
    for name in ("access_roles", " Access_Roles "):
        assert parse_condition({"name": name, **raw}) == Cond("access_roles", "in", names)


def test_role_field_negations_need_a_name_and_lists_need_strings() -> None:
    assert parse_condition(leaf("access_roles", "is not", "法务")) == Cond(
        "access_roles", "not in", ("法务",)
    )
    with pytest.raises(FilterError, match="至少一个角色名"):
        parse_condition(leaf("access_roles", "not in", []))
    with pytest.raises(FilterError, match="只能包含字符串"):
        parse_condition(leaf("access_roles", "in", ["法务", 2]))
    with pytest.raises(FilterError, match="非空字符串"):
        parse_condition(leaf("year", "in", [2019, 2021]))


def test_role_visibility_is_the_role_filter_over_a_documents_roles() -> None:
    for value in (None, [], ""):  # no roles: visible to everyone
        assert all(role_visibility(r)(value) for r in (None, [], ["物业经理"]))
    assert role_visibility(["物业经理"])(["物业经理", "安保主管"])
    assert role_visibility([" 物业经理 "])(["物业经理"])  # role names normalised alike
    assert role_visibility(["安保主管,物业经理"])(["物业经理"])
    assert not role_visibility([])(["物业经理"])
    assert not role_visibility(["运维工程师"])(["物业经理"])
    assert role_visibility(None)(["物业经理"])
    # a value ingestion never writes (it validates roles) is visible to no role set
    for odd in ({"roles": ["物业经理"]}, [None], 5, [["物业经理"]]):
        assert not role_visibility([])(odd) and not role_visibility(["物业经理"])(odd)
    with pytest.raises(FilterError):
        role_visibility("物业经理")
