"""Role values fail closed (issue 16 item 1): malformed access_roles never make a
document public; misspelt role field names are ingest errors; names are normalised
the same way in documents, keys and conditions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings, load_settings
from gcite.knowledge import ingest_paths, open_store, role_condition
from gcite.roles import (
    RoleValueError,
    is_role_lookalike,
    normalise_roles,
    parse_role_value,
    validate_metadata,
)

# The attack inputs of issue 16 item 1: each made a document public before.
MALFORMED_VALUES: list[Any] = [
    {"安保主管": True},
    {"roles": ["安保主管"]},
    [["安保主管"]],
    [{"name": "安保主管"}],
    [None],
    [""],
    ["  "],
    ["安保主管", 3],
    7,
    True,
    ",",
]
MISSPELT_FIELDS = [
    "Access_Roles",
    "access-roles",
    "accessRoles",
    "access_role",
    "roles",
    "ACCESS_ROLES",
    "acess_roles",
    "Roles",
]


@pytest.mark.parametrize("value", MALFORMED_VALUES, ids=repr)
def test_malformed_role_values_are_errors(value: Any) -> None:
    with pytest.raises(RoleValueError, match="access_roles"):
        parse_role_value(value, document="a.md")


@pytest.mark.parametrize(
    ("value", "roles"),
    [
        (None, []),
        ([], []),
        ("", []),
        ("安保主管", ["安保主管"]),
        (" 安保主管 , 法务 ", ["安保主管", "法务"]),
        ("安保主管，法务", ["安保主管", "法务"]),  # full-width comma
        ("安保主管、法务", ["安保主管", "法务"]),  # ideographic comma
        (["安保主管", " 法务"], ["安保主管", "法务"]),
        (["ＡＢ主管"], ["AB主管"]),  # NFKC
    ],
)
def test_accepted_role_values_are_normalised(value: Any, roles: list[str]) -> None:
    assert parse_role_value(value) == roles


@pytest.mark.parametrize("name", MISSPELT_FIELDS)
def test_misspelt_role_fields_are_lookalikes(name: str) -> None:
    assert is_role_lookalike(name)
    with pytest.raises(RoleValueError, match=name):
        validate_metadata({name: ["安保主管"]}, document="a.md")


@pytest.mark.parametrize(
    "name", ["access_roles", "department", "document_title", "year", "address", "source_file_url"]
)
def test_ordinary_fields_are_not_lookalikes(name: str) -> None:
    assert not is_role_lookalike(name)


def test_lookalike_allowed_by_configuration() -> None:
    meta = validate_metadata({"roles": "x"}, allowed_lookalikes=["roles"])
    assert meta == {"roles": "x"}


def test_keys_and_conditions_normalise_like_documents(tmp_path: Path) -> None:
    cfg = tmp_path / "gcite.toml"
    cfg.write_text('[[app_keys]]\nkey = "app-1"\nroles = [" 安保主管，法务 ", "ＡＢ"]\n', "utf-8")
    settings = load_settings(config_file=cfg, environ={})
    assert settings.app_keys[0].roles == ("安保主管", "法务", "AB")
    cond = role_condition([" 安保主管，法务"])
    assert cond["conditions"][0]["value"] == ["安保主管", "法务"]
    assert normalise_roles(["a", "a, b"]) == ["a", "b"]


def _doc(title: str, front: str) -> str:
    body = f"{title}的机密内容：金库密码每周更换。"
    return f"---\ndocument_title: {title}\n{front}\n---\n# {title}\n\n{body}\n"


def test_ingest_refuses_each_malformed_document_and_keeps_the_rest(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    cases: dict[str, str] = {}
    for i, value in enumerate(MALFORMED_VALUES):
        cases[f"bad-value-{i}.md"] = "access_roles: " + json.dumps(value, ensure_ascii=False)
    for i, name in enumerate(MISSPELT_FIELDS):
        cases[f"bad-field-{i}.md"] = f"{name}: [安保主管]"
    for name, front in cases.items():
        (docs / name).write_text(_doc(name, front), encoding="utf-8")
    (docs / "good.md").write_text(_doc("good", "access_roles: 安保主管，法务"), "utf-8")
    (docs / "public.md").write_text(_doc("public", "access_roles: []"), "utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    report = ingest_paths([docs], settings=settings, dataset="roles")
    failed = {path.name: reason for path, reason in report.failed}
    assert set(failed) == set(cases)
    for name, reason in failed.items():
        assert name in reason
    assert report.added == 2
    store = open_store(settings)
    try:
        public = {i["metadata"]["document_name"] for i in store.search("金库密码", roles=[])}
        assert public == {"public.md"}
        legal = {i["metadata"]["document_name"] for i in store.search("金库密码", roles=["法务"])}
        assert legal == {"public.md", "good.md"}
    finally:
        store.close()


def test_configured_lookalike_is_ingested(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(_doc("a", "roles: 读者"), "utf-8")
    settings = Settings.from_keys(
        data_dir=tmp_path / "data", embed_backend="use", allowed_role_lookalikes="roles"
    )
    report = ingest_paths([docs], settings=settings, dataset="roles")
    assert report.ok and report.added == 1
