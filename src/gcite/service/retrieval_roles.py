"""Role narrowing for the External Knowledge API: pure functions, no I/O.

The seeds (platform design document §2.1.1) name the role filter as the risk to
solve first: Dify's metadata filter cannot intersect a document's
``access_roles`` array with the user's roles, cannot treat "no roles" as
"visible to all", and has no nested groups. gcite answers Dify's External
Knowledge API (``POST /retrieval``, ``../shared/reference/dify-ecosystem.md``
§1) and applies the knowledge base's role rule itself. This module decides,
from the API key and the request's ``metadata_condition``, *which roles* the
caller has and *which other conditions* go to the knowledge-base filter.

The rule, safe by construction
------------------------------
Every API key is bound (configuration) to a maximum role set ``K``. The roles
passed to the knowledge base are always a subset of ``K`` and never ``None``
(``None`` would mean "no role filter"). A condition on ``access_roles``
(:data:`ROLE_FIELD`) can only narrow ``K``:

* ``in`` / ``contains`` / ``is`` with a value (a list of strings, a
  comma-separated string, or a JSON array written as a string) asks for roles
  ``R``; the caller then has ``K ∩ R``. Roles outside ``K`` are dropped, so a
  condition made only of foreign roles leaves the caller with no roles (only
  documents without ``access_roles`` are visible).
* ``empty`` asks for "no roles": only documents without roles.
* A value that is missing, ``null``, ``""`` or ``[]`` also means "no roles"
  (fail closed: an unassigned chatflow variable, Dify issue #18365, must not
  fall back to the key's full role set). An unresolved template such as
  ``"{{#conversation.user_roles#}}"`` is a role name no key has: no roles.
* Several role conditions joined by ``and`` intersect; role conditions joined
  by ``or`` *where every condition of the group is a role condition* unite
  (each part is already a subset of ``K``, so the union is too).
* Anything else touching ``access_roles`` is rejected with :class:`FilterError`
  (HTTP 400): the operators ``not in``, ``is not``, ``not contains``,
  ``start with``, ``end with``, ``not empty`` and the numeric/time ones; a role
  condition inside an ``or`` group that also holds other conditions; a role
  condition inside a nested group or a ``not`` group. These could only be read as "open up" or
  are ambiguous, so gcite refuses them instead of guessing.
* Without any role condition, the caller has ``K``.

Every other condition is passed unchanged (same ``logical_operator``, nested
groups kept) to the knowledge-base filter, which ANDs it with the role rule;
it can therefore never widen visibility either.

Shapes follow Dify's ``MetadataCondition``: ``{"logical_operator": "and"|"or",
"conditions": [{"name", "comparison_operator", "value"?}]}``
(``../shared/reference/dify-protocol.md`` §3). A nested group is an item that
itself has ``conditions``, a negation is ``{"not": <group or condition>}``
(gcite extensions shared with :mod:`gcite.knowledge.filters`; Dify only sends
flat lists). Role conditions are only read at the top level.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gcite.errors import FilterError

ROLE_FIELD = "access_roles"
"""Document metadata field holding the roles allowed to see a document."""

DIFY_OPERATORS: frozenset[str] = frozenset(
    {
        "contains",
        "not contains",
        "start with",
        "end with",
        "is",
        "is not",
        "empty",
        "not empty",
        "in",
        "not in",
        "=",
        "≠",
        ">",
        "<",
        "≥",
        "≤",
        "before",
        "after",
    }
)
"""Dify's ``SupportedComparisonOperator`` values (dify-ecosystem.md §1.2)."""

OPERATOR_ALIASES: dict[str, str] = {"!=": "≠", ">=": "≥", "<=": "≤", "==": "="}
"""ASCII spellings accepted as well (the knowledge-base filter accepts them too)."""

VALUELESS_OPERATORS: frozenset[str] = frozenset({"empty", "not empty"})
"""Operators that take no ``value``."""

NARROWING_OPERATORS: frozenset[str] = frozenset({"in", "contains", "is"})
"""Operators on ``access_roles`` that name roles the caller asks for."""

LOGICAL_OPERATORS: frozenset[str] = frozenset({"and", "or"})

MAX_CONDITIONS = 64
"""Most conditions (all levels together) one ``metadata_condition`` may hold."""

MAX_DEPTH = 4
"""Deepest nesting of groups accepted (the top level is depth 1)."""

MAX_ROLE_NAME_CHARS = 200


@dataclass(frozen=True)
class RoleDecision:
    """Outcome of :func:`narrow_roles`.

    ``roles``: the roles to pass to ``KnowledgeStore.search`` — always a subset
    of the key's roles, in the key's order; ``()`` means a user with no roles.
    ``condition``: what is left of ``metadata_condition`` for the knowledge-base
    filter, or ``None`` when nothing is left. ``narrowed``: whether a role
    condition was present.
    """

    roles: tuple[str, ...]
    condition: dict[str, Any] | None
    narrowed: bool


def parse_role_value(value: Any) -> set[str]:
    """Turn a role condition's ``value`` into a set of role names.

    Accepts a list of strings, a comma-separated string (ASCII ``,`` or
    full-width ``，``), or a JSON array of strings written as a string (what a
    Dify template ``{{#conversation.user_roles#}}`` may render an array
    variable to). ``None``, ``""`` and ``[]`` give the empty set. Names are
    stripped; blanks are dropped.

    Raises :class:`FilterError` for any other type (numbers, objects, lists
    holding non-strings).
    """
    if value is None:
        return set()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if isinstance(decoded, list):
                return parse_role_value(decoded)
        parts = text.replace("，", ",").split(",")
        return {_role_name(p) for p in parts if p.strip()}
    if isinstance(value, list):
        roles: set[str] = set()
        for item in value:
            if not isinstance(item, str):
                raise FilterError(
                    f"{ROLE_FIELD} 条件的 value 列表只能包含字符串，收到 {type(item).__name__}"
                )
            if item.strip():
                roles.add(_role_name(item))
        return roles
    raise FilterError(
        f"{ROLE_FIELD} 条件的 value 必须是字符串或字符串列表，收到 {type(value).__name__}"
    )


def _role_name(raw: str) -> str:
    name = raw.strip().strip('"').strip()
    if len(name) > MAX_ROLE_NAME_CHARS:
        raise FilterError(f"角色名过长（超过 {MAX_ROLE_NAME_CHARS} 个字符）")
    return name


def validate_condition(condition: Any) -> dict[str, Any] | None:
    """Check the shape of a ``metadata_condition`` and return it normalised.

    ``None`` gives ``None``. A group must be an object with an optional
    ``logical_operator`` (``"and"``/``"or"``, case-insensitive, default
    ``"and"``) and a list ``conditions`` (``null`` counts as empty); each item is
    either a condition ``{name: non-empty str, comparison_operator: one of
    DIFY_OPERATORS (or an ASCII alias), value?: str | number | list[str] |
    null}``, a nested group, or ``{"not": <group or condition>}`` (the
    knowledge-base filter's extensions). The result has ``logical_operator``
    lower-cased and filled in, and aliases replaced by Dify's operators.

    Raises :class:`FilterError` naming the offending path (e.g.
    ``metadata_condition.conditions[1].comparison_operator``) for a wrong type,
    a missing field, an unknown operator, more than :data:`MAX_CONDITIONS`
    conditions or more than :data:`MAX_DEPTH` levels.
    """
    if condition is None:
        return None
    counter = [0]
    return _validate_group(condition, "metadata_condition", 1, counter)


def _validate_group(raw: Any, path: str, depth: int, counter: list[int]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise FilterError(f"{path} 必须是对象，收到 {type(raw).__name__}")
    if depth > MAX_DEPTH:
        raise FilterError(f"{path} 嵌套层数超过 {MAX_DEPTH} 层")
    op = raw.get("logical_operator", "and")
    if op is None:
        op = "and"
    if not isinstance(op, str) or op.lower() not in LOGICAL_OPERATORS:
        raise FilterError(f"{path}.logical_operator 只能是 and 或 or，收到 {op!r}")
    items = raw.get("conditions")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise FilterError(f"{path}.conditions 必须是数组，收到 {type(items).__name__}")
    out = [
        _validate_item(item, f"{path}.conditions[{index}]", depth, counter)
        for index, item in enumerate(items)
    ]
    return {"logical_operator": op.lower(), "conditions": out}


def _validate_item(raw: Any, path: str, depth: int, counter: list[int]) -> dict[str, Any]:
    """One member of a group: a nested group, a ``not`` group or a condition."""
    if isinstance(raw, dict) and "name" not in raw:
        if "conditions" in raw:
            return _validate_group(raw, path, depth + 1, counter)
        if "not" in raw:
            if set(raw) != {"not"}:
                raise FilterError(f"{path}: not 组不能带其他键")
            if depth + 1 > MAX_DEPTH:
                raise FilterError(f"{path} 嵌套层数超过 {MAX_DEPTH} 层")
            return {"not": _validate_item(raw["not"], f"{path}.not", depth, counter)}
    counter[0] += 1
    if counter[0] > MAX_CONDITIONS:
        raise FilterError(f"metadata_condition 的条件数超过上限 {MAX_CONDITIONS}")
    return _validate_leaf(raw, path)


def _validate_leaf(raw: Any, path: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise FilterError(f"{path} 必须是对象，收到 {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise FilterError(f"{path}.name 必须是非空字符串")
    op_raw = raw.get("comparison_operator")
    if not isinstance(op_raw, str):
        raise FilterError(f"{path}.comparison_operator 缺失或不是字符串")
    op = OPERATOR_ALIASES.get(op_raw.strip(), op_raw.strip())
    if op not in DIFY_OPERATORS:
        allowed = "、".join(sorted(DIFY_OPERATORS))
        raise FilterError(f"{path}.comparison_operator 未知: {op_raw!r}（支持: {allowed}）")
    leaf: dict[str, Any] = {"name": name, "comparison_operator": op}
    if "value" in raw:
        value = raw["value"]
        ok = (
            value is None
            or (isinstance(value, str | int | float) and not isinstance(value, bool))
            or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        )
        if not ok:
            raise FilterError(
                f"{path}.value 必须是字符串、数字或字符串列表，收到 {type(value).__name__}"
            )
        leaf["value"] = value
    return leaf


def is_role_condition(item: dict[str, Any]) -> bool:
    """Whether a validated condition item addresses :data:`ROLE_FIELD`.

    The name is compared after stripping and case folding, so ``" Access_Roles"``
    cannot slip past the role rule.
    """
    name = item.get("name")
    return isinstance(name, str) and name.strip().casefold() == ROLE_FIELD


def _requested_roles(item: dict[str, Any], path: str) -> set[str]:
    """Roles asked for by one role condition (see the module rule)."""
    op = item["comparison_operator"]
    if op == "empty":
        return set()
    if op not in NARROWING_OPERATORS:
        raise FilterError(
            f"{path}: {ROLE_FIELD} 只支持 in、contains、is（收窄角色）和 empty；"
            f"不支持 {op!r}，因为它可能放宽可见范围"
        )
    return parse_role_value(item.get("value"))


def _is_group(item: dict[str, Any]) -> bool:
    return "conditions" in item or "not" in item


def _contains_role_condition(item: dict[str, Any]) -> bool:
    if "not" in item:
        return _contains_role_condition(item["not"])
    if "conditions" in item:
        return any(_contains_role_condition(child) for child in item["conditions"])
    return is_role_condition(item)


def narrow_roles(key_roles: Sequence[str], condition: dict[str, Any] | None) -> RoleDecision:
    """Split a validated ``metadata_condition`` into the caller's roles and the rest.

    ``key_roles``: the API key's maximum role set (configuration).
    ``condition``: the output of :func:`validate_condition` (or ``None``).

    Returns a :class:`RoleDecision` whose ``roles`` ⊆ ``key_roles`` always
    holds (property-tested). Raises :class:`FilterError` for a role condition
    gcite refuses (see the module docstring for the rule).
    """
    allowed = tuple(dict.fromkeys(r for r in key_roles))
    if condition is None:
        return RoleDecision(roles=allowed, condition=None, narrowed=False)

    top = condition["conditions"]
    logical = condition["logical_operator"]
    role_items: list[tuple[int, dict[str, Any]]] = []
    other_items: list[dict[str, Any]] = []
    for index, item in enumerate(top):
        path = f"metadata_condition.conditions[{index}]"
        if _is_group(item):
            if _contains_role_condition(item):
                raise FilterError(f"{path}: {ROLE_FIELD} 条件不能放在嵌套条件组里，请放在最外层")
            other_items.append(item)
        elif is_role_condition(item):
            role_items.append((index, item))
        else:
            other_items.append(item)

    if not role_items:
        rest = condition if other_items else None
        return RoleDecision(roles=allowed, condition=rest, narrowed=False)

    if logical == "or" and other_items:
        raise FilterError(
            f"metadata_condition: {ROLE_FIELD} 条件不能与其他条件用 or 组合"
            f"（那样会放宽可见范围）；请改用 and，或把角色条件单独作为一组"
        )

    requested: set[str] | None = None
    for index, item in role_items:
        asked = _requested_roles(item, f"metadata_condition.conditions[{index}]")
        if requested is None:
            requested = asked
        elif logical == "and":
            requested &= asked
        else:
            requested |= asked
    assert requested is not None
    roles = tuple(r for r in allowed if r in requested)
    rest = {"logical_operator": logical, "conditions": other_items} if other_items else None
    return RoleDecision(roles=roles, condition=rest, narrowed=True)


__all__ = [
    "DIFY_OPERATORS",
    "LOGICAL_OPERATORS",
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "NARROWING_OPERATORS",
    "OPERATOR_ALIASES",
    "ROLE_FIELD",
    "VALUELESS_OPERATORS",
    "RoleDecision",
    "is_role_condition",
    "narrow_roles",
    "parse_role_value",
    "validate_condition",
]
