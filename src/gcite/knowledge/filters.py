"""Metadata and role filters: Dify conditions (nested AND / OR / NOT) -> Qdrant filters.

Condition format (Dify's ``metadata_filtering_conditions``, extended with nesting)::

    {"logical_operator": "and" | "or",            # default "and"
     "conditions": [ <condition> | <group> , ...]}
    <condition> = {"name": str, "comparison_operator": str, "value": ...}
    <group>     = {"logical_operator": ..., "conditions": [...]}
                | {"not": <group or condition>}

Operators (Dify ``SupportedComparisonOperator``, dify-protocol.md §3): ``is``,
``is not``, ``contains``, ``not contains``, ``start with``, ``end with``,
``empty``, ``not empty``, ``in``, ``not in``, ``=``, ``≠``, ``>``, ``<``, ``≥``,
``≤``, ``before``, ``after``; ASCII aliases ``!=``, ``>=``, ``<=``. A malformed
condition raises :class:`FilterError` - it is never dropped (Dify silently skips
a ``None`` value; we do not). This is the ONE grammar of conditions: the knowledge
store compiles its tree (:func:`compile_node`), and the External Knowledge API narrows
roles on the same tree (:mod:`gcite.service.retrieval_roles`). Limits: at most
:data:`MAX_DEPTH` levels of nesting below the top and :data:`MAX_CONDITIONS` leaves;
``in`` / ``not in`` take strings only (a list, or one comma-separated string).

The role field (:data:`ROLE_FIELD`, matched after stripping and case folding, so
``" Access_Roles"`` is the role field too) takes role names
(:func:`role_names`): ``is`` / ``contains`` / ``in`` become ``in`` with a tuple of
names, where a missing, ``null``, ``""`` or ``[]`` value is the empty tuple (no
role: fail closed); ``is not`` / ``not contains`` / ``not in`` become ``not in`` and
need at least one name.

Evaluation happens inside Qdrant. At ingest :func:`filter_payload` derives
three lookup objects from ``doc_metadata`` that the compiled filters address:

* ``m_str.<name>``: the value(s) as non-empty strings (lists stay lists, so
  ``is`` / ``in`` / ``contains`` on an array field match an element);
* ``m_rev.<name>``: the same strings reversed (``end with`` = prefix match);
* ``m_num.<name>``: numbers, numeric strings and ISO dates (as UTC epoch
  seconds), for ``= ≠ > < ≥ ≤ before after``.

``empty`` is true when the field is absent, null, ``""`` or ``[]``. Negations
(``is not``, ``not contains``, ``not in``, ``≠``, ``not``) are plain logical
negations, so they also match documents without the field.

Source: platform design document §2.1.1 (the role rule Dify
cannot express).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gcite.errors import FilterError
from gcite.roles import is_role_lookalike, normalise_role, normalise_roles

STRING_OPS = frozenset({"is", "is not", "contains", "not contains", "start with", "end with"})
NUMBER_OPS = frozenset({"=", "≠", ">", "<", "≥", "≤"})
TIME_OPS = frozenset({"before", "after"})
SET_OPS = frozenset({"in", "not in"})
EMPTY_OPS = frozenset({"empty", "not empty"})
OPERATORS = STRING_OPS | NUMBER_OPS | TIME_OPS | SET_OPS | EMPTY_OPS
ALIASES = {"!=": "≠", ">=": "≥", "<=": "≤", "==": "="}
ROLE_FIELD = "access_roles"
MAX_DEPTH = 4
MAX_CONDITIONS = 64
MAX_IN_VALUES = 1000
MAX_ROLE_NAME_CHARS = 200
# The keys a group and a leaf may have (Dify's MetadataCondition / Condition); anything
# else is refused so that a misspelt key is never silently ignored.
GROUP_KEYS = frozenset({"logical_operator", "conditions"})
LEAF_KEYS = frozenset({"name", "comparison_operator", "value"})
NARROWING_OPS = frozenset({"is", "contains", "in"})
NEGATED_ROLE_OPS = frozenset({"is not", "not contains", "not in"})
NAME_RE = re.compile(r"^[\w]{1,64}$")
# Every point carries ``segment_id``, so "segment_id is empty" never matches.
NEVER_KEY = "segment_id"


@dataclass(frozen=True)
class Cond:
    """One validated leaf condition (``op`` is canonical, ``value`` normalised)."""

    name: str
    op: str
    value: Any


@dataclass(frozen=True)
class Group:
    """``and`` / ``or`` over children."""

    op: str
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """Logical negation of a child."""

    child: Node


Node = Cond | Group | Not


DOCUMENT_ID_FIELD = "document_id"
"""Condition name matching the stored document id (``is`` / ``in``), not a metadata field."""


def role_condition(roles: Sequence[str]) -> dict[str, Any]:
    """The condition a user with ``roles`` must meet (seed §2.1.1 business rule).

    Visible iff the document's ``access_roles`` intersects ``roles``, or the
    document has no roles (field absent, null or empty list). ``roles=[]`` sees
    only documents without roles. Returns a Dify-shaped condition group.
    """
    if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
        raise FilterError("roles 必须是字符串列表")
    conditions: list[dict[str, Any]] = [
        {"name": ROLE_FIELD, "comparison_operator": "empty", "value": None}
    ]
    wanted = normalise_roles(roles)
    if wanted:
        conditions.insert(
            0, {"name": ROLE_FIELD, "comparison_operator": "in", "value": list(wanted)}
        )
    return {"logical_operator": "or", "conditions": conditions}


def to_timestamp(value: Any) -> float | None:
    """Epoch seconds (UTC) of a number, ISO date or ISO datetime string; else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _to_number(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return None
    try:
        parsed = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed.timestamp()


def _to_number(value: Any) -> float | None:
    """A finite float, or ``None`` (also for integers beyond the float range)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return to_timestamp(value)
        return number if math.isfinite(number) else None
    return None


def _as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        text = str(value)
        return text if text != "" else None
    return None


def filter_payload(metadata: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``m_str`` / ``m_rev`` / ``m_num`` payload objects for ``metadata``.

    Fields whose names are not filterable (see ``NAME_RE``) or whose values are
    objects are left out (they stay in ``doc_metadata`` for display).
    """
    m_str: dict[str, Any] = {}
    m_rev: dict[str, Any] = {}
    m_num: dict[str, Any] = {}
    for name, raw in metadata.items():
        if not NAME_RE.match(name):
            continue
        values = raw if isinstance(raw, list) else [raw]
        strings = [s for s in (_as_str(v) for v in values) if s is not None]
        numbers = [n for n in (_to_number(v) for v in values) if n is not None]
        if strings:
            m_str[name] = strings if isinstance(raw, list) else strings[0]
            m_rev[name] = [s[::-1] for s in strings] if isinstance(raw, list) else strings[0][::-1]
        if numbers:
            m_num[name] = numbers if isinstance(raw, list) else numbers[0]
    return {"m_str": m_str, "m_rev": m_rev, "m_num": m_num}


# --------------------------------------------------------------------------- parsing


def _fail(path: str, message: str) -> FilterError:
    return FilterError(f"过滤条件无效 ({path}): {message}")


def parse_condition(raw: Any, *, root: str = "$") -> Node:
    """Validate a condition (group, ``not`` or leaf) and return its tree.

    ``root``: the name of ``raw`` in error messages (``"metadata_condition"`` for the
    External Knowledge API). Raises :class:`FilterError` with the JSON path of the
    offending part (e.g. ``metadata_condition.conditions[1]``).
    """
    counter = [0]
    return _parse(raw, root, 0, counter)


def is_role_name(name: Any) -> bool:
    """Whether a condition's ``name`` addresses :data:`ROLE_FIELD` (stripped, case-folded)."""
    return isinstance(name, str) and name.strip().casefold() == ROLE_FIELD


def role_names(value: Any, where: str = "$") -> tuple[str, ...]:
    """The role names of a role condition's ``value``, sorted, without duplicates.

    Accepts a list of strings, one string of names separated by ``,`` or ``，``, or a JSON
    array of strings written as a string (what a Dify template such as
    ``{{#conversation.user_roles#}}`` renders an array variable to). ``None``, ``""`` and
    ``[]`` give ``()``. Names are stripped (and of surrounding quotes); blanks dropped.
    Raises :class:`FilterError` for any other type (numbers, objects, lists holding
    non-strings) and names longer than :data:`MAX_ROLE_NAME_CHARS`.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if isinstance(decoded, list):
                return role_names(decoded, where)
        items: list[Any] = text.replace("，", ",").replace("、", ",").split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise _fail(
            where, f"{ROLE_FIELD} 的 value 必须是字符串或字符串列表，得到 {type(value).__name__}"
        )
    names: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise _fail(
                where, f"{ROLE_FIELD} 的 value 列表只能包含字符串，得到 {type(item).__name__}"
            )
        name = normalise_role(item.strip().strip('"'))
        if len(name) > MAX_ROLE_NAME_CHARS:
            raise _fail(where, f"角色名过长（超过 {MAX_ROLE_NAME_CHARS} 个字符）")
        if name:
            names.add(name)
    return tuple(sorted(names))


def _parse(raw: Any, path: str, depth: int, counter: list[int]) -> Node:
    if depth > MAX_DEPTH:
        raise _fail(path, f"嵌套层数超过 {MAX_DEPTH}")
    if not isinstance(raw, Mapping):
        raise _fail(path, f"应为对象，得到 {type(raw).__name__}")
    if "not" in raw:
        extra = set(raw) - {"not"}
        if extra:
            raise _fail(path, f"not 组不能带其他键: {sorted(extra)}")
        return Not(_parse(raw["not"], f"{path}.not", depth + 1, counter))
    if "conditions" in raw:
        extra = set(raw) - GROUP_KEYS
        if extra:
            raise _fail(path, f"条件组中有无法识别的键: {sorted(map(str, extra))}")
        op = raw.get("logical_operator")
        op = "and" if op is None else op
        if not isinstance(op, str) or op.lower() not in {"and", "or"}:
            raise _fail(path, f"logical_operator 只能是 and 或 or，得到 {op!r}")
        items = raw["conditions"]
        if not isinstance(items, list):
            raise _fail(path, "conditions 必须是列表")
        children = tuple(
            _parse(item, f"{path}.conditions[{i}]", depth + 1, counter)
            for i, item in enumerate(items)
        )
        return Group(op.lower(), children)
    if "name" in raw or "comparison_operator" in raw:
        extra = set(raw) - LEAF_KEYS
        if extra:
            raise _fail(path, f"条件中有无法识别的键: {sorted(map(str, extra))}")
        counter[0] += 1
        if counter[0] > MAX_CONDITIONS:
            raise _fail(path, f"条件数量超过 {MAX_CONDITIONS}")
        return _parse_leaf(raw, path)
    raise _fail(path, "既不是条件 (name/comparison_operator/value) 也不是条件组 (conditions / not)")


def _parse_leaf(raw: Mapping[str, Any], path: str, *, role: bool = False) -> Cond:
    name = raw.get("name")
    if is_role_name(name) and not role:
        return _parse_role_leaf(raw, path)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _fail(path, f"name 必须是由字母、数字、下划线或汉字组成的字符串，得到 {name!r}")
    if not role and is_role_lookalike(name):
        raise _fail(path, f"name {name!r} 疑似拼错的 {ROLE_FIELD}（角色字段名必须是 {ROLE_FIELD}）")
    op_raw = raw.get("comparison_operator")
    if not isinstance(op_raw, str):
        raise _fail(path, f"comparison_operator 必须是字符串，得到 {op_raw!r}")
    op = ALIASES.get(op_raw.strip(), op_raw.strip())
    if op not in OPERATORS:
        raise _fail(path, f"未知的比较运算符 {op_raw!r}，可用: {', '.join(sorted(OPERATORS))}")
    value = raw.get("value")
    where = f"{path} {name} {op}"
    if op in EMPTY_OPS:
        return Cond(name, op, None)
    if value is None:
        raise _fail(where, "缺少 value")
    return Cond(name, op, _leaf_value(op, value, where))


def _leaf_value(op: str, value: Any, where: str) -> Any:
    """The checked value of a leaf with operator ``op`` (not an empty-test); errors name
    ``where``."""
    if op in SET_OPS:
        return tuple(_set_values(value, where))
    if op in NUMBER_OPS:
        number = _to_number(value)
        if number is None:
            raise _fail(where, f"value 必须是数字，得到 {value!r}")
        return number
    if op in TIME_OPS:
        stamp = to_timestamp(value)
        if stamp is None:
            raise _fail(where, f"value 必须是时间戳或 ISO 日期 (YYYY-MM-DD)，得到 {value!r}")
        return stamp
    # string operators
    if op in {"is", "is not"} and isinstance(value, int | float) and not isinstance(value, bool):
        if _to_number(value) is None:
            raise _fail(where, "value 不能是 NaN 或无穷大")
        return float(value)
    if not isinstance(value, str):
        raise _fail(where, f"value 必须是字符串，得到 {type(value).__name__}")
    if value == "":
        raise _fail(where, "value 不能为空字符串（判断为空请用 empty）")
    return value


def _parse_role_leaf(raw: Mapping[str, Any], path: str) -> Cond:
    """A leaf on :data:`ROLE_FIELD` (see the module docstring)."""
    op_raw = raw.get("comparison_operator")
    if not isinstance(op_raw, str):
        raise _fail(path, f"comparison_operator 必须是字符串，得到 {op_raw!r}")
    op = ALIASES.get(op_raw.strip(), op_raw.strip())
    where = f"{path} {ROLE_FIELD} {op}"
    if op in NARROWING_OPS:
        return Cond(ROLE_FIELD, "in", role_names(raw.get("value"), where))
    if op in NEGATED_ROLE_OPS:
        names = role_names(raw.get("value"), where)
        if not names:
            raise _fail(where, "缺少 value（至少一个角色名）")
        return Cond(ROLE_FIELD, "not in", names)
    return _parse_leaf({**raw, "name": ROLE_FIELD}, path, role=True)


def _set_values(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        items: list[Any] = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise _fail(where, f"value 必须是列表或逗号分隔的字符串，得到 {type(value).__name__}")
    if len(items) > MAX_IN_VALUES:
        raise _fail(where, f"value 的元素超过 {MAX_IN_VALUES} 个")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise _fail(where, f"value 的列表元素必须是非空字符串，得到 {item!r}")
        out.append(item)
    return out


# --------------------------------------------------------------------------- compiling


class FilterModels(Protocol):
    """Builds the filter objects of one Qdrant API; each store adapter has one
    (:class:`gcite.knowledge.stores.edge.EdgeModels`,
    :class:`gcite.knowledge.stores.qdrant.ClientModels`)."""

    def match_value(self, key: str, value: str) -> Any: ...
    def match_any(self, key: str, values: list[str]) -> Any: ...
    def substring(self, key: str, value: str) -> Any: ...
    def prefix(self, key: str, value: str) -> Any: ...
    def range(
        self,
        key: str,
        *,
        gt: float | None = None,
        gte: float | None = None,
        lt: float | None = None,
        lte: float | None = None,
    ) -> Any: ...
    def is_empty(self, key: str) -> Any: ...
    def filter(
        self,
        must: list[Any] | None = None,
        should: list[Any] | None = None,
        must_not: list[Any] | None = None,
    ) -> Any: ...


def compile_node(node: Node, models: FilterModels, *, array_fields: frozenset[str]) -> Any:
    """Translate a parsed tree into one Qdrant condition/filter object.

    ``array_fields``: metadata names holding lists (their ``contains`` is an
    element match, not a substring match).
    """
    if isinstance(node, Group):
        parts = [compile_node(c, models, array_fields=array_fields) for c in node.children]
        if not parts:
            return models.filter(must=[])
        return models.filter(must=parts) if node.op == "and" else models.filter(should=parts)
    if isinstance(node, Not):
        return models.filter(must_not=[compile_node(node.child, models, array_fields=array_fields)])
    return _compile_leaf(node, models, array_fields)


def _negate(models: FilterModels, condition: Any) -> Any:
    return models.filter(must_not=[condition])


def _compile_leaf(c: Cond, models: FilterModels, array_fields: frozenset[str]) -> Any:
    s_key, r_key, n_key = f"m_str.{c.name}", f"m_rev.{c.name}", f"m_num.{c.name}"
    op, v = c.op, c.value
    if c.name == DOCUMENT_ID_FIELD and op in {"is", "in"} and not isinstance(v, float):
        # The stored document id (what /retrieval records carry as metadata.document_id):
        # lets an External Knowledge API client ask whether a document is still visible.
        ids = [v] if op == "is" else list(v)
        return models.match_any(DOCUMENT_ID_FIELD, ids) if ids else models.is_empty(NEVER_KEY)
    if op in {"is", "is not"}:
        base = (
            models.range(n_key, gte=v, lte=v)
            if isinstance(v, float)
            else models.match_value(s_key, v)
        )
        return base if op == "is" else _negate(models, base)
    if op in {"contains", "not contains"}:
        base = (
            models.match_value(s_key, v) if c.name in array_fields else models.substring(s_key, v)
        )
        return base if op == "contains" else _negate(models, base)
    if op == "start with":
        return models.prefix(s_key, v)
    if op == "end with":
        return models.prefix(r_key, v[::-1])
    if op in EMPTY_OPS:
        base = models.is_empty(s_key)
        return base if op == "empty" else _negate(models, base)
    if op in SET_OPS:
        base = models.match_any(s_key, list(v)) if v else models.is_empty(NEVER_KEY)
        return base if op == "in" else _negate(models, base)
    ranges: dict[str, dict[str, float]] = {
        "=": {"gte": v, "lte": v},
        "≠": {"gte": v, "lte": v},
        ">": {"gt": v},
        "after": {"gt": v},
        "<": {"lt": v},
        "before": {"lt": v},
        "≥": {"gte": v},
        "≤": {"lte": v},
    }
    base = models.range(n_key, **ranges[op])
    return _negate(models, base) if op == "≠" else base


def _role_filter(roles: Sequence[str], models: FilterModels) -> Any:
    """:func:`role_condition` of ``roles`` compiled with ``models``: the one role rule of
    a search's filter and of :func:`role_visibility`."""
    return compile_node(
        parse_condition(role_condition(roles)), models, array_fields=frozenset({ROLE_FIELD})
    )


Payload = Mapping[str, Any]
Predicate = Callable[[Payload], bool]


def _values(payload: Payload, key: str) -> list[Any]:
    """The values at a dotted ``key`` (a list field gives its elements; absent: none)."""
    value: Any = payload
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return []
        value = value[part]
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


class PayloadModels:
    """:class:`FilterModels` building Python predicates over payloads, with Qdrant's
    semantics (a list field matches when one element does): the in-memory store's
    filters (:class:`gcite.testing.MemoryStore`) and :func:`role_visibility`."""

    def match_value(self, key: str, value: str) -> Predicate:
        return lambda p: value in _values(p, key)

    def match_any(self, key: str, values: list[str]) -> Predicate:
        wanted = set(values)
        return lambda p: any(v in wanted for v in _values(p, key))

    def substring(self, key: str, value: str) -> Predicate:
        return lambda p: any(isinstance(v, str) and value in v for v in _values(p, key))

    def prefix(self, key: str, value: str) -> Predicate:
        return lambda p: any(isinstance(v, str) and v.startswith(value) for v in _values(p, key))

    def range(
        self,
        key: str,
        *,
        gt: float | None = None,
        gte: float | None = None,
        lt: float | None = None,
        lte: float | None = None,
    ) -> Predicate:
        def inside(v: Any) -> bool:
            if isinstance(v, bool) or not isinstance(v, int | float):
                return False
            return (
                (gt is None or v > gt)
                and (gte is None or v >= gte)
                and (lt is None or v < lt)
                and (lte is None or v <= lte)
            )

        return lambda p: any(inside(v) for v in _values(p, key))

    def is_empty(self, key: str) -> Predicate:
        return lambda p: not _values(p, key)

    def filter(
        self,
        must: list[Any] | None = None,
        should: list[Any] | None = None,
        must_not: list[Any] | None = None,
    ) -> Predicate:
        def matches(p: Payload) -> bool:
            return (
                all(c(p) for c in must or [])
                and (not should or any(c(p) for c in should))
                and not any(c(p) for c in must_not or [])
            )

        return matches


def role_visibility(roles: Sequence[str] | None) -> Callable[[Any], bool]:
    """Whether a document is visible to a user with ``roles``, by its ``access_roles``
    value (as its validated metadata holds it: a list of role names, ``[]``, ``None``):
    the rule of :func:`role_condition`, compiled as a search's filter compiles it, over the
    lookups (:func:`filter_payload`) the document's chunks carry. ``roles=None``: every
    document (no role filter, as :func:`build_filter`). A value of another shape (never
    written by ingestion, which validates roles: :mod:`gcite.roles`) is visible to no
    role set. Raises :class:`FilterError` for malformed ``roles``."""
    if roles is None:
        return lambda _value: True
    visible = _role_filter(roles, PayloadModels())

    def sees(value: Any) -> bool:
        if not _role_value(value):  # not a value ingestion writes: fail closed
            return False
        return bool(visible(filter_payload({ROLE_FIELD: value})))

    return sees


def _role_value(value: Any) -> bool:
    """Whether ``value`` has the shape of a validated ``access_roles`` value (``None``, a
    string, a list of strings)."""
    if value is None or isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def build_filter(
    models: FilterModels,
    *,
    dataset: str | None = None,
    roles: Sequence[str] | None = None,
    condition: Mapping[str, Any] | Node | None = None,
    array_fields: frozenset[str] = frozenset({ROLE_FIELD}),
) -> Any | None:
    """The complete payload filter of one search, or ``None`` when nothing filters.

    ``dataset`` -> ``dataset_name`` match; ``roles`` -> :func:`role_condition`
    (``None`` = no role filter); ``condition`` -> the user's metadata condition, raw
    (parsed here) or already parsed by :func:`parse_condition`.
    Raises :class:`FilterError` for a malformed ``condition`` or ``roles``.
    """
    must: list[Any] = []
    if dataset is not None:
        must.append(models.match_value("dataset_name", dataset))
    fields = array_fields | {ROLE_FIELD}
    if roles is not None:
        must.append(_role_filter(roles, models))
    if isinstance(condition, Cond | Group | Not):
        must.append(compile_node(condition, models, array_fields=fields))
    elif condition is not None:
        if not isinstance(condition, Mapping):
            raise _fail("$", f"应为对象，得到 {type(condition).__name__}")
        if condition:
            must.append(compile_node(parse_condition(condition), models, array_fields=fields))
    return models.filter(must=must) if must else None


__all__ = [
    "ALIASES",
    "MAX_CONDITIONS",
    "MAX_DEPTH",
    "NARROWING_OPS",
    "OPERATORS",
    "ROLE_FIELD",
    "Cond",
    "FilterModels",
    "Group",
    "Node",
    "Not",
    "PayloadModels",
    "build_filter",
    "compile_node",
    "filter_payload",
    "is_role_name",
    "parse_condition",
    "role_condition",
    "role_names",
    "role_visibility",
    "to_timestamp",
]
