"""/retrieval fails closed (issue 16 items 2 and 5): every metadata_condition it does not
fully understand is a 400 in Dify's External Knowledge error shape; a narrowing never
widens or silently keeps the key's roles; no body gives a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from service_streams import LiveServer, run_service

from gcite.config import ApiKey, Settings
from gcite.knowledge import ingest_paths

DATASET = "角色库"
KEY = "kb-both"  # may see 甲 and 乙
QUERY = "仓库钥匙存放位置"
DOCS = {
    "public.md": ("[]", "公开：仓库钥匙存放位置见前台公告。"),
    "a.md": ("[甲]", "甲组：仓库钥匙存放位置是一号柜。"),
    "b.md": ("[乙]", "乙组：仓库钥匙存放位置是二号柜。"),
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("strict")
    docs = base / "docs"
    docs.mkdir()
    for name, (roles, text) in DOCS.items():
        title = name.removesuffix(".md")
        (docs / name).write_text(
            f"---\ndocument_title: {title}\naccess_roles: {roles}\n---\n# {title}\n\n{text}\n",
            encoding="utf-8",
        )
    data = base / "data"
    assert ingest_paths([docs], settings=Settings.from_keys(data_dir=data), dataset=DATASET).ok
    settings = Settings.from_keys(
        data_dir=data,
        database_url=f"sqlite:///{base / 'chat.sqlite3'}",
        retrieval_keys=[ApiKey(KEY, ("甲", "乙"))],
    )
    with run_service(settings) as server:
        yield server


@pytest.fixture(scope="module")
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.base_url, timeout=30) as client:
        yield client


def _post(http: httpx.Client, condition: Any, **extra: Any) -> httpx.Response:
    body: dict[str, Any] = {
        "retrieval_setting": {"top_k": 10, "score_threshold": 0.0},
        "query": QUERY,
        "knowledge_id": DATASET,
        **extra,
    }
    if condition is not None:
        body["metadata_condition"] = condition
    return http.post(
        "/retrieval",
        content=json.dumps(body, ensure_ascii=False),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )


def _titles(response: httpx.Response) -> set[str]:
    return {r["title"] for r in response.json()["records"]}


def _is_dify_error(response: httpx.Response) -> bool:
    body = response.json()
    return (
        set(body) == {"error_code", "error_msg"}
        and isinstance(body["error_code"], int)
        and isinstance(body["error_msg"], str)
    )


ONLY_A = {"name": "access_roles", "comparison_operator": "in", "value": ["甲"]}

# The attack inputs of issue 16 item 2: each answered with the key's full role set.
NOT_UNDERSTOOD = [
    pytest.param({"logical_operator": "and", "condition": [ONLY_A]}, id="condition"),
    pytest.param({"logical_operator": "and", "Conditions": [ONLY_A]}, id="Conditions"),
    pytest.param({"not": {"logical_operator": "and", "conditions": [ONLY_A]}}, id="top-not"),
    pytest.param(
        {"logical_operator": "and", "conditions": [ONLY_A], "condition": [ONLY_A]},
        id="extra-group-key",
    ),
    pytest.param(
        {"logical_operator": "and", "conditions": [{**ONLY_A, "values": ["甲"]}]},
        id="extra-leaf-key",
    ),
    pytest.param({"logical_operator": "xor", "conditions": [ONLY_A]}, id="bad-operator"),
    pytest.param({"conditions": {"0": ONLY_A}}, id="conditions-object"),
    pytest.param([ONLY_A], id="list"),
    pytest.param("access_roles in 甲", id="string"),
    pytest.param(
        {"conditions": [{"name": "accessRoles", "comparison_operator": "not in", "value": ["乙"]}]},
        id="lookalike-name",
    ),
    pytest.param(
        {"conditions": [{"name": "roles", "comparison_operator": "in", "value": ["甲"]}]},
        id="lookalike-roles",
    ),
    pytest.param(
        {"conditions": [{"name": "access-roles", "comparison_operator": "in", "value": ["甲"]}]},
        id="dash-name",
    ),
    pytest.param(
        {"conditions": [{**ONLY_A, "comparison_operator": "not in", "value": ["乙"]}]},
        id="not-in",
    ),
]


@pytest.mark.parametrize("condition", NOT_UNDERSTOOD)
def test_conditions_not_fully_understood_are_400(http: httpx.Client, condition: Any) -> None:
    response = _post(http, condition)
    assert response.status_code == 400, response.text
    assert _is_dify_error(response)
    assert response.json()["error_code"] == 3002


@pytest.mark.parametrize(
    "condition",
    [
        pytest.param({"logical_operator": "and", "conditions": [ONLY_A]}, id="group"),
        pytest.param(ONLY_A, id="bare-leaf"),
        pytest.param(
            {"conditions": [{**ONLY_A, "name": "Access_Roles", "value": " 甲 "}]}, id="case"
        ),
        pytest.param({"conditions": [{**ONLY_A, "value": "甲，丙"}]}, id="full-width-comma"),
        pytest.param({"conditions": [{**ONLY_A, "value": "甲、丙"}]}, id="ideographic-comma"),
        pytest.param({"conditions": [{**ONLY_A, "value": ["ＡＢ", "甲"]}]}, id="nfkc"),
    ],
)
def test_understood_narrowing_narrows(http: httpx.Client, condition: Any) -> None:
    response = _post(http, condition)
    assert response.status_code == 200, response.text
    assert _titles(response) == {"public", "a"}


def test_without_condition_the_key_sees_both(http: httpx.Client) -> None:
    assert _titles(_post(http, None)) == {"public", "a", "b"}


HUGE = 10**400


@pytest.mark.parametrize(
    "condition",
    [
        {"conditions": [{"name": "year", "comparison_operator": ">", "value": HUGE}]},
        {"conditions": [{"name": "year", "comparison_operator": "is", "value": HUGE}]},
        {"conditions": [{"name": "year", "comparison_operator": "before", "value": HUGE}]},
        {"conditions": [{"name": "year", "comparison_operator": "in", "value": [HUGE]}]},
        {"conditions": [{"name": "year", "comparison_operator": "=", "value": -HUGE}]},
    ],
)
def test_huge_numbers_are_400_not_500(http: httpx.Client, condition: Any) -> None:
    response = _post(http, condition)
    assert response.status_code == 400, response.text
    assert _is_dify_error(response)


@pytest.mark.parametrize(
    "setting",
    [
        {"top_k": HUGE, "score_threshold": 0},
        {"top_k": 3, "score_threshold": HUGE},
        {"top_k": 3, "score_threshold": -HUGE},
    ],
)
def test_huge_settings_are_400(http: httpx.Client, setting: dict[str, Any]) -> None:
    response = _post(http, None, retrieval_setting=setting)
    assert response.status_code == 400, response.text
    assert _is_dify_error(response)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_wrong_method_uses_the_external_knowledge_shape(http: httpx.Client, method: str) -> None:
    response = http.request(method, "/retrieval", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 405
    assert _is_dify_error(response)


# --------------------------------------------------------------------------- fuzzing

_names = st.sampled_from(
    [
        "access_roles",
        "Access_Roles",
        "ACCESS_ROLES",
        " access_roles ",
        "accessRoles",
        "access_role",
        "roles",
        "access-roles",
        "document_title",
        "year",
        "acces_roles",
    ]
)
_ops = st.sampled_from(
    [
        "in",
        "is",
        "contains",
        "not in",
        "is not",
        "not contains",
        "empty",
        "not empty",
        "start with",
        "=",
        "≠",
        ">",
        "after",
        "bogus",
        "IN",
        " in ",
    ]
)
_role_values = st.one_of(
    st.just(["甲"]),
    st.just("甲"),
    st.just("甲，乙"),
    st.just(["乙"]),
    st.just(["甲", "乙"]),
    st.just([]),
    st.just(None),
    st.just(""),
    st.just(["丙"]),
    st.just([None]),
    st.just([["甲"]]),
    st.just({"甲": True}),
    st.just(7),
    st.just(HUGE),
    st.just('["甲"]'),
)
_leaf = st.fixed_dictionaries(
    {"name": _names, "comparison_operator": _ops, "value": _role_values},
    optional={"values": _role_values, "extra": st.just(1)},
)
_group_keys = st.sampled_from(["conditions", "condition", "Conditions", "conditons", "items"])
_logic = st.sampled_from(["and", "or", "AND", "Or", None, "xor", "", 1])


def _groups(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    group = st.builds(
        lambda key, logic, items: {"logical_operator": logic, key: items},
        _group_keys,
        _logic,
        st.lists(children, max_size=3),
    )
    negated = st.builds(lambda child: {"not": child}, children)
    return st.one_of(group, negated, st.lists(children, max_size=2))


_conditions = st.recursive(_leaf, _groups, max_leaves=6)


def _asks_to_narrow(node: Any) -> bool:
    """Whether the body mentions the role field anywhere (a narrowing was asked)."""
    return "role" in json.dumps(node, ensure_ascii=False).lower()


@given(condition=_conditions)
@hypothesis_settings(
    max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
def test_fuzz_no_body_widens_or_silently_keeps_the_key_roles(
    http: httpx.Client, condition: Any
) -> None:
    response = _post(http, condition)
    assert response.status_code < 500, response.text
    if response.status_code != 200:
        assert response.status_code == 400 and _is_dify_error(response)
        return
    titles = _titles(response)
    assert titles <= {"public", "a", "b"}
    if _asks_to_narrow(condition):
        # a narrowing that was understood never yields both groups' documents
        assert not {"a", "b"} <= titles, (condition, titles)


@given(
    body=st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(10**500), max_value=10**500),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=20),
        ),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(
                st.sampled_from(
                    [
                        "query",
                        "knowledge_id",
                        "retrieval_setting",
                        "top_k",
                        "score_threshold",
                        "metadata_condition",
                        "conditions",
                        "name",
                        "comparison_operator",
                        "value",
                        "logical_operator",
                        "not",
                        "x",
                    ]
                ),
                children,
                max_size=5,
            ),
        ),
        max_leaves=12,
    )
)
@hypothesis_settings(
    max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
def test_fuzz_no_body_gives_a_5xx(http: httpx.Client, body: Any) -> None:
    response = http.post(
        "/retrieval",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    assert response.status_code < 500, response.text
    if response.status_code != 200:
        assert _is_dify_error(response), response.text


def test_huge_integer_in_any_position_is_not_a_5xx(http: httpx.Client, tmp_path: Path) -> None:
    for body in (
        {"query": QUERY, "knowledge_id": DATASET, "retrieval_setting": {"top_k": 1.5e308 * 10}},
        {"query": HUGE, "knowledge_id": DATASET},
        {"query": QUERY, "knowledge_id": HUGE},
    ):
        response = http.post(
            "/retrieval",
            content=json.dumps(body),
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        )
        assert response.status_code == 400, response.text
