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

There is one grammar: the condition is parsed by
:func:`gcite.knowledge.filters.parse_condition` (shapes, operators, aliases, limits, the
role field's value forms), and this module only reads the typed tree it returns. Role
conditions are only read at the top level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gcite.errors import FilterError
from gcite.knowledge.filters import ROLE_FIELD, Cond, Group, Node, Not

MAX_CONDITION_PATH = "metadata_condition"
"""Name of the condition in error messages (the request field)."""


@dataclass(frozen=True)
class RoleDecision:
    """Outcome of :func:`narrow_roles`.

    ``roles``: the roles to pass to ``KnowledgeStore.search`` — always a subset
    of the key's roles, in the key's order; ``()`` means a user with no roles.
    ``condition``: what is left of ``metadata_condition`` for the knowledge-base
    filter (a parsed tree), or ``None`` when nothing is left. ``narrowed``: whether a
    role condition was present.
    """

    roles: tuple[str, ...]
    condition: Node | None
    narrowed: bool


def _contains_role(node: Node) -> bool:
    if isinstance(node, Not):
        return _contains_role(node.child)
    if isinstance(node, Group):
        return any(_contains_role(child) for child in node.children)
    return node.name == ROLE_FIELD


def _requested(cond: Cond, path: str) -> set[str]:
    """Roles asked for by one top-level role condition (see the module rule)."""
    if cond.op == "empty":
        return set()
    if cond.op != "in":
        raise FilterError(
            f"{path}: {ROLE_FIELD} 只支持 in、contains、is（收窄角色）和 empty；"
            f"不支持 {cond.op!r}，因为它可能放宽可见范围"
        )
    return set(cond.value)


def narrow_roles(key_roles: Sequence[str], condition: Node | None) -> RoleDecision:
    """Split a parsed ``metadata_condition`` into the caller's roles and the rest.

    ``key_roles``: the API key's maximum role set (configuration).
    ``condition``: the tree :func:`gcite.knowledge.filters.parse_condition` returned
    (or ``None``); a top-level leaf or ``not`` counts as an ``and`` group of one.

    Returns a :class:`RoleDecision` whose ``roles`` ⊆ ``key_roles`` always
    holds (property-tested). Raises :class:`FilterError` for a role condition
    gcite refuses (see the module docstring for the rule).
    """
    allowed = tuple(dict.fromkeys(r for r in key_roles))
    if condition is None:
        return RoleDecision(roles=allowed, condition=None, narrowed=False)
    top = condition if isinstance(condition, Group) else Group("and", (condition,))
    role_items: list[tuple[int, Cond]] = []
    other_items: list[Node] = []
    for index, item in enumerate(top.children):
        path = f"{MAX_CONDITION_PATH}.conditions[{index}]"
        if isinstance(item, Cond) and item.name == ROLE_FIELD:
            role_items.append((index, item))
        elif _contains_role(item):
            raise FilterError(f"{path}: {ROLE_FIELD} 条件不能放在嵌套条件组里，请放在最外层")
        else:
            other_items.append(item)

    if not role_items:
        rest = condition if other_items else None
        return RoleDecision(roles=allowed, condition=rest, narrowed=False)

    if top.op == "or" and other_items:
        raise FilterError(
            f"{MAX_CONDITION_PATH}: {ROLE_FIELD} 条件不能与其他条件用 or 组合"
            f"（那样会放宽可见范围）；请改用 and，或把角色条件单独作为一组"
        )

    requested: set[str] | None = None
    for index, item in role_items:
        asked = _requested(item, f"{MAX_CONDITION_PATH}.conditions[{index}]")
        if requested is None:
            requested = asked
        elif top.op == "and":
            requested &= asked
        else:
            requested |= asked
    assert requested is not None
    roles = tuple(r for r in allowed if r in requested)
    rest = Group(top.op, tuple(other_items)) if other_items else None
    return RoleDecision(roles=roles, condition=rest, narrowed=True)


__all__ = ["RoleDecision", "narrow_roles"]
