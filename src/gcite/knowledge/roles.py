"""Role values and the role field name, validated so that a document fails closed.

A document's ``access_roles`` (seed §2.1.1) decides who may see it. A value gcite
does not understand must never make a document public, so ingest accepts only:

* absent, ``null``, ``[]`` or a blank string: no roles (visible to everyone);
* a role string, or a comma-separated string of roles (ASCII or full-width comma);
* a list of role strings (each may itself be comma-separated).

Anything else - a mapping (``{安保主管: true}``, ``{"roles": [...]}``), a nested
list, a list of objects, ``[null]``, ``[""]``, a number, a boolean - raises
:class:`RoleValueError`; ingest then reports that document by name and leaves it
out (the rest is ingested). A metadata field whose name looks like a misspelt role
field (case and dash/underscore variants such as ``Access_Roles``, ``access-roles``,
``accessRoles``; ``access_role``; ``roles``; anything within edit distance 2 of
``accessroles`` once case and separators are dropped) is an error too, unless it is
listed in the ``allowed_role_lookalikes`` setting.

Role names are normalised the same way everywhere (documents, API keys, conditions):
NFKC, full-width comma split, trimmed (:func:`normalise_roles`).

Source: platform design document §2.1.1.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gcite.errors import GciteError

if TYPE_CHECKING:
    from gcite.config import Settings

ROLE_FIELD = "access_roles"
_CANONICAL = "accessroles"
# Names that mean "roles" to a human but are not the role field.
_SYNONYMS = frozenset({"roles", "role", "accessrole", "accessroles", "allowedroles", "acl"})
MAX_ROLE_CHARS = 128


class RoleValueError(GciteError):
    """A document's role value or role field name is not understood (message in Chinese)."""


def normalise_role(name: str) -> str:
    """One role name: NFKC, trimmed. ``""`` when nothing is left."""
    return unicodedata.normalize("NFKC", name).strip()


def _split(text: str) -> list[str]:
    # NFKC turns the full-width comma (U+FF0C) into ","; the ideographic comma stays.
    folded = unicodedata.normalize("NFKC", text).replace("、", ",")
    return [part.strip() for part in folded.split(",")]


def normalise_roles(value: str | Iterable[str]) -> list[str]:
    """Role names from a comma-separated string or a list of strings, normalised.

    Empty parts are dropped, order kept, duplicates removed. No type checks: callers
    that take untrusted values use :func:`parse_role_value`.
    """
    items = [value] if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        for part in _split(item):
            if part and part not in out:
                out.append(part)
    return out


def parse_role_value(value: Any, *, document: str = "") -> list[str]:
    """Validate and normalise one ``access_roles`` value (see the module docstring).

    Returns the role list (``[]`` = no roles). Raises :class:`RoleValueError`
    naming ``document`` for any other shape.
    """
    where = f"文档 {document} 的 " if document else ""
    if value is None:
        return []
    if isinstance(value, str):
        if not value.strip():
            return []
        roles = normalise_roles(value)
        if not roles:
            raise RoleValueError(f"{where}{ROLE_FIELD} 没有有效的角色名: {value!r}")
        return _checked(roles, where)
    if isinstance(value, list):
        found: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise RoleValueError(
                    f"{where}{ROLE_FIELD} 只能是角色名字符串或字符串列表，"
                    f"列表中出现了 {type(item).__name__}: {item!r}"
                )
            parts = normalise_roles(item)
            if not parts:
                raise RoleValueError(f"{where}{ROLE_FIELD} 中有空的角色名: {value!r}")
            found.extend(p for p in parts if p not in found)
        return _checked(found, where)
    raise RoleValueError(
        f"{where}{ROLE_FIELD} 只能是角色名字符串或字符串列表，不能是 {type(value).__name__}: "
        f"{value!r}"
    )


def _checked(roles: list[str], where: str) -> list[str]:
    for role in roles:
        if len(role) > MAX_ROLE_CHARS:
            raise RoleValueError(f"{where}{ROLE_FIELD} 中的角色名过长（>{MAX_ROLE_CHARS} 字）")
    return roles


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def is_role_lookalike(name: str) -> bool:
    """True when ``name`` is not ``access_roles`` but looks like a misspelling of it."""
    if name == ROLE_FIELD:
        return False
    folded = "".join(
        ch for ch in unicodedata.normalize("NFKC", name).casefold() if ch not in "-_ ."
    )
    return folded in _SYNONYMS or _edit_distance(folded, _CANONICAL) <= 2


def lookalikes(settings: Settings) -> list[str]:
    """The field names ``settings.allowed_role_lookalikes`` (comma-separated) permits."""
    return [n.strip() for n in settings.allowed_role_lookalikes.split(",") if n.strip()]


def validate_metadata(
    meta: Mapping[str, Any], *, document: str = "", allowed_lookalikes: Iterable[str] = ()
) -> dict[str, Any]:
    """A copy of ``meta`` with ``access_roles`` validated and normalised.

    Raises :class:`RoleValueError` for a malformed role value or a field name that
    looks like a misspelt role field (unless listed in ``allowed_lookalikes``).
    An absent or ``null`` role value is kept as given.
    """
    where = f"文档 {document} 的 " if document else ""
    allowed = set(allowed_lookalikes)
    for name in meta:
        if isinstance(name, str) and name not in allowed and is_role_lookalike(name):
            raise RoleValueError(
                f"{where}元数据字段 {name} 疑似拼错的 {ROLE_FIELD}（角色字段名必须是 "
                f"{ROLE_FIELD}；若确为其他字段，请在配置 allowed_role_lookalikes 中列出）"
            )
    out = dict(meta)
    if out.get(ROLE_FIELD) is not None:
        out[ROLE_FIELD] = parse_role_value(out[ROLE_FIELD], document=document)
    return out


__all__ = [
    "ROLE_FIELD",
    "RoleValueError",
    "is_role_lookalike",
    "lookalikes",
    "normalise_role",
    "normalise_roles",
    "parse_role_value",
    "validate_metadata",
]
