"""Role narrowing of the External Knowledge API (gcite.service.retrieval_roles).

The pure core: the key's roles are a maximum; ``access_roles`` conditions only
narrow them (platform design document §2.1.1; dify-ecosystem.md §1.2). The condition
is parsed by the one grammar (gcite.knowledge.filters.parse_condition); narrowing reads
its tree.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gcite.errors import FilterError
from gcite.knowledge.filters import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    OPERATORS,
    Node,
    parse_condition,
    role_names,
)
from gcite.service.retrieval_roles import narrow_roles

KEY = ("物业经理", "运维工程师")


def validate_condition(raw: Any) -> Node:
    return parse_condition(raw, root="metadata_condition")


def cond(*items: dict[str, Any], op: str = "and") -> Node:
    return validate_condition({"logical_operator": op, "conditions": list(items)})


def parse_role_value(value: Any) -> set[str]:
    return set(role_names(value))


def role(op: str, value: Any = None, *, with_value: bool = True) -> dict[str, Any]:
    item: dict[str, Any] = {"name": "access_roles", "comparison_operator": op}
    if with_value:
        item["value"] = value
    return item


CATEGORY = {"name": "document_title", "comparison_operator": "contains", "value": "消防"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("物业经理,运维工程师", {"物业经理", "运维工程师"}),
        (" 物业经理 ， 运维工程师 ", {"物业经理", "运维工程师"}),
        (["物业经理", " 法务 "], {"物业经理", "法务"}),
        ('["物业经理","运维工程师"]', {"物业经理", "运维工程师"}),
        ("[不是JSON", {"[不是JSON"}),
        ("", set()),
        ("  ,  ", set()),
        ([], set()),
        (None, set()),
    ],
)
def test_parse_role_value_forms(value: Any, expected: set[str]) -> None:
    assert parse_role_value(value) == expected


@pytest.mark.parametrize("value", [3, 1.5, {"a": 1}, ["ok", 2], True])
def test_parse_role_value_rejects_other_types(value: Any) -> None:
    with pytest.raises(FilterError):
        parse_role_value(value)


def test_no_condition_gives_key_roles() -> None:
    decision = narrow_roles(KEY, None)
    assert decision.roles == KEY
    assert decision.condition is None
    assert not decision.narrowed


def test_other_conditions_pass_through_unchanged() -> None:
    condition = cond(CATEGORY)
    decision = narrow_roles(KEY, condition)
    assert decision.roles == KEY
    assert decision.condition == condition


@pytest.mark.parametrize("op", ["in", "contains", "is"])
def test_narrowing_operators_intersect(op: str) -> None:
    decision = narrow_roles(KEY, cond(role(op, "运维工程师")))
    assert decision.roles == ("运维工程师",)
    assert decision.narrowed
    assert decision.condition is None


def test_widening_attempt_keeps_only_key_roles() -> None:
    decision = narrow_roles(KEY, cond(role("in", ["运维工程师", "法务", "人事"])))
    assert decision.roles == ("运维工程师",)


def test_only_foreign_roles_gives_no_roles() -> None:
    decision = narrow_roles(KEY, cond(role("in", "法务,人事")))
    assert decision.roles == ()


@pytest.mark.parametrize(
    "item",
    [role("in", None), role("in", ""), role("in", []), role("in", with_value=False)],
    ids=["null", "empty-string", "empty-list", "absent"],
)
def test_missing_role_value_fails_closed(item: dict[str, Any]) -> None:
    assert narrow_roles(KEY, cond(item)).roles == ()


def test_empty_operator_means_no_roles() -> None:
    assert narrow_roles(KEY, cond(role("empty", with_value=False))).roles == ()


def test_and_of_role_conditions_intersects() -> None:
    decision = narrow_roles(KEY, cond(role("in", list(KEY)), role("contains", "物业经理")))
    assert decision.roles == ("物业经理",)


def test_or_of_role_conditions_unites_within_key() -> None:
    decision = narrow_roles(
        KEY, cond(role("contains", "物业经理"), role("contains", "法务"), op="or")
    )
    assert decision.roles == ("物业经理",)


def test_role_and_other_condition_split() -> None:
    decision = narrow_roles(KEY, cond(role("is", "物业经理"), CATEGORY))
    assert decision.roles == ("物业经理",)
    assert decision.condition == cond(CATEGORY)


def test_role_or_other_condition_is_refused() -> None:
    with pytest.raises(FilterError, match="or"):
        narrow_roles(KEY, cond(role("in", "物业经理"), CATEGORY, op="or"))


@pytest.mark.parametrize(
    "op", sorted(OPERATORS - {"in", "contains", "is", "empty"}), ids=lambda o: o
)
def test_other_operators_on_roles_are_refused(op: str) -> None:
    with pytest.raises(FilterError, match="access_roles"):
        narrow_roles(KEY, cond(role(op, "法务")))


def test_role_condition_in_nested_group_is_refused() -> None:
    nested = {"logical_operator": "or", "conditions": [role("in", "法务"), CATEGORY]}
    with pytest.raises(FilterError, match="嵌套"):
        narrow_roles(KEY, cond(CATEGORY, nested))


def test_disguised_role_field_name_is_still_a_role_condition() -> None:
    with pytest.raises(FilterError):
        narrow_roles(KEY, cond({"name": " Access_Roles ", "comparison_operator": "not in"}))


def test_nested_group_without_roles_passes_through() -> None:
    nested = {"logical_operator": "or", "conditions": [CATEGORY, CATEGORY]}
    condition = cond(role("in", "物业经理"), nested)
    decision = narrow_roles(KEY, condition)
    assert decision.roles == ("物业经理",)
    assert decision.condition == cond(nested)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "应为对象"),
        ({"logical_operator": "xor", "conditions": []}, "logical_operator"),
        ({"conditions": {}}, "conditions 必须是列表"),
        ({"conditions": ["x"]}, "conditions[0]): 应为对象"),
        ({"conditions": None}, "conditions 必须是列表"),
        ({"conditions": [{"name": "a-b", "comparison_operator": "is", "value": "x"}]}, "name"),
        ({"conditions": [{"comparison_operator": "is"}]}, "name"),
        ({"conditions": [{"name": "a"}]}, "comparison_operator"),
        ({"conditions": [{"name": "a", "comparison_operator": "like"}]}, "未知"),
        ({"conditions": [{"name": "a", "comparison_operator": "is", "value": {}}]}, "value"),
        ({"conditions": [{"name": "a", "comparison_operator": "in", "value": [1]}]}, "value"),
        ({"conditions": [{"name": "a", "comparison_operator": "is", "value": True}]}, "value"),
    ],
)
def test_malformed_conditions_name_the_path(raw: Any, fragment: str) -> None:
    with pytest.raises(FilterError, match="metadata_condition") as info:
        validate_condition(raw)
    assert fragment in str(info.value)


def test_condition_limits() -> None:
    many = {"conditions": [CATEGORY] * (MAX_CONDITIONS + 1)}
    with pytest.raises(FilterError, match="条件数量"):
        validate_condition(many)
    validate_condition({"conditions": [CATEGORY] * MAX_CONDITIONS})
    deep: dict[str, Any] = {"conditions": [CATEGORY]}
    for _ in range(MAX_DEPTH):
        deep = {"conditions": [deep]}
    with pytest.raises(FilterError, match="嵌套"):
        validate_condition(deep)


def test_validate_normalises_operator_and_nulls() -> None:
    assert validate_condition({"logical_operator": "OR", "conditions": []}) == cond(op="or")
    assert validate_condition({"logical_operator": None, "conditions": []}) == cond()


ROLE_NAMES = st.sampled_from(["物业经理", "运维工程师", "安保主管", "法务", "人事", "工程部"])
VALUES = st.one_of(
    st.none(),
    st.lists(ROLE_NAMES, max_size=4),
    st.lists(ROLE_NAMES, max_size=4).map(",".join),
)
ROLE_ITEMS = st.builds(
    lambda op, value: role(op, value), st.sampled_from(["in", "contains", "is"]), VALUES
)


@settings(max_examples=200, deadline=None)
@given(
    key=st.lists(ROLE_NAMES, max_size=4, unique=True),
    items=st.lists(st.one_of(ROLE_ITEMS, st.just(CATEGORY)), max_size=5),
    op=st.sampled_from(["and", "or"]),
)
def test_roles_never_exceed_the_key(key: list[str], items: list[dict[str, Any]], op: str) -> None:
    condition = cond(*items, op=op)
    try:
        decision = narrow_roles(key, condition)
    except FilterError:
        return  # refused outright: nothing is opened up
    assert set(decision.roles) <= set(key)
    if decision.condition is not None:
        assert "access_roles" not in repr(decision.condition)


def test_not_groups_and_aliases_are_validated() -> None:
    raw = {
        "conditions": [
            {"not": {"name": "year", "comparison_operator": "!=", "value": 2019}},
            {"not": {"conditions": [CATEGORY]}},
        ]
    }
    validated = validate_condition(raw)
    assert validated == cond(
        {"not": {"name": "year", "comparison_operator": "≠", "value": 2019}},
        {"not": {"conditions": [CATEGORY]}},
    )
    assert "'≠'" in repr(validated)
    decision = narrow_roles(KEY, validated)
    assert decision.roles == KEY
    assert decision.condition == validated
    with pytest.raises(FilterError, match="not"):
        validate_condition({"conditions": [{"not": CATEGORY, "extra": 1}]})
    with pytest.raises(FilterError, match="数字"):  # ≠ compares numbers (one grammar)
        validate_condition({"conditions": [leaf_ne_text]})


leaf_ne_text = {"name": "document_title", "comparison_operator": "!=", "value": "x"}


def test_role_condition_under_not_is_refused() -> None:
    with pytest.raises(FilterError, match="嵌套"):
        narrow_roles(KEY, cond({"not": role("in", "法务")}))
