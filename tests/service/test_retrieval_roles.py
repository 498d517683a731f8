"""Role narrowing of the External Knowledge API (gcite.service.retrieval_roles).

The pure core: the key's roles are a maximum; ``access_roles`` conditions only
narrow them (platform design document §2.1.1; dify-ecosystem.md §1.2).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gcite.errors import FilterError
from gcite.service.retrieval_roles import (
    DIFY_OPERATORS,
    MAX_CONDITIONS,
    MAX_DEPTH,
    narrow_roles,
    parse_role_value,
    validate_condition,
)

KEY = ("物业经理", "运维工程师")


def cond(*items: dict[str, Any], op: str = "and") -> dict[str, Any]:
    validated = validate_condition({"logical_operator": op, "conditions": list(items)})
    assert validated is not None
    return validated


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
    assert decision.condition == {"logical_operator": "and", "conditions": [CATEGORY]}


def test_role_or_other_condition_is_refused() -> None:
    with pytest.raises(FilterError, match="or"):
        narrow_roles(KEY, cond(role("in", "物业经理"), CATEGORY, op="or"))


@pytest.mark.parametrize(
    "op", sorted(DIFY_OPERATORS - {"in", "contains", "is", "empty"}), ids=lambda o: o
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
    assert decision.condition == {"logical_operator": "and", "conditions": [nested]}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "必须是对象"),
        ({"logical_operator": "xor", "conditions": []}, "logical_operator"),
        ({"conditions": {}}, "conditions 必须是数组"),
        ({"conditions": ["x"]}, "conditions[0] 必须是对象"),
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
    with pytest.raises(FilterError, match="上限"):
        validate_condition(many)
    deep: dict[str, Any] = {"conditions": [CATEGORY]}
    for _ in range(MAX_DEPTH):
        deep = {"conditions": [deep]}
    with pytest.raises(FilterError, match="嵌套"):
        validate_condition(deep)


def test_validate_normalises_operator_and_nulls() -> None:
    assert validate_condition({"logical_operator": "OR", "conditions": None}) == {
        "logical_operator": "or",
        "conditions": [],
    }
    assert validate_condition({"conditions": []}) == {"logical_operator": "and", "conditions": []}


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
        assert all(c.get("name") != "access_roles" for c in decision.condition["conditions"])


def test_not_groups_and_aliases_are_validated() -> None:
    raw = {
        "conditions": [
            {"not": {"name": "document_title", "comparison_operator": "!=", "value": "x"}},
            {"not": {"conditions": [CATEGORY]}},
        ]
    }
    validated = validate_condition(raw)
    assert validated is not None
    assert validated["conditions"][0] == {
        "not": {"name": "document_title", "comparison_operator": "≠", "value": "x"}
    }
    decision = narrow_roles(KEY, validated)
    assert decision.roles == KEY
    assert decision.condition == validated
    with pytest.raises(FilterError, match="not"):
        validate_condition({"conditions": [{"not": CATEGORY, "extra": 1}]})


def test_role_condition_under_not_is_refused() -> None:
    with pytest.raises(FilterError, match="嵌套"):
        narrow_roles(KEY, cond({"not": role("in", "法务")}))
