"""Request bodies: size limits while reading, JSON nesting depth and text that can be stored.

Every JSON body the service accepts (chat, stop, External Knowledge API) goes through
:func:`read_limited` and :func:`load_json`, so what is stored is always serialisable:

- :func:`read_limited` rejects a body whose ``Content-Length`` exceeds the limit before
  reading anything, and stops reading a body without one (chunked) as soon as it grows
  past the limit;
- :func:`load_json` rejects, before :func:`json.loads` runs, a document nested deeper than
  :data:`MAX_JSON_DEPTH` (a deep document would otherwise break recursive encoders later,
  or ``json.loads`` itself with ``RecursionError``), and after parsing any string (value or
  key) holding a lone UTF-16 surrogate (``"\\ud800"``), which cannot be encoded as UTF-8;
  ``NaN`` / ``Infinity`` are refused as invalid JSON (they cannot be sent back as JSON).

Both raise :class:`BodyError`; each endpoint turns it into its own error shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays/objects accepted in a request body (the top level is 1)."""

_SPECIAL = re.compile(rb'[\[\]{}"\\]')
_SURROGATE = re.compile("[\ud800-\udfff]")


class BodyError(Exception):
    """A request body the service refuses.

    ``kind``: ``too_large`` (size limit), ``invalid`` (not UTF-8 JSON), ``too_deep``
    (nesting), ``bad_text`` (a lone surrogate); ``message``: English, one line.
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


async def read_limited(
    headers: Mapping[str, str], stream: AsyncIterator[bytes], limit: int
) -> bytes:
    """The body from ``stream``, at most ``limit`` bytes; :class:`BodyError` (too_large) beyond.

    ``headers``: the request headers; a ``Content-Length`` above ``limit`` is refused
    before the body is read.
    """
    declared = headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise BodyError(f"Request body exceeds {limit} bytes.", "too_large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise BodyError(f"Request body exceeds {limit} bytes.", "too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def json_depth(raw: bytes) -> int:
    """The deepest array/object nesting of the JSON text ``raw`` (strings skipped).

    Works on malformed text too (it only counts brackets outside strings), in one linear
    pass without recursion, so it can run before :func:`json.loads`.
    """
    depth = deepest = 0
    in_string = escaped = False
    last = -1
    for match in _SPECIAL.finditer(raw):
        char, at = match.group(), match.start()
        if in_string:
            if escaped and at == last + 1:
                escaped = False
            elif char == b"\\":
                escaped = True
            elif char == b'"':
                in_string = False
            last = at
            continue
        escaped = False
        if char == b'"':
            in_string = True
        elif char in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif char in (b"]", b"}"):
            depth -= 1
        last = at
    return deepest


def value_depth(value: Any) -> int:
    """The nesting depth of a decoded JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def bad_text(value: Any) -> str | None:
    """The first string (value or key) in ``value`` with a lone surrogate, else None."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


def _no_constant(name: str) -> Any:
    """``NaN``, ``Infinity``, ``-Infinity`` are not JSON (and cannot be sent back as JSON)."""
    raise ValueError(f"{name} is not valid JSON")


def load_json(raw: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode a UTF-8 JSON body; :class:`BodyError` for invalid JSON, too deep, bad text."""
    if json_depth(raw) > max_depth:
        raise BodyError(f"Request body is nested too deeply (max depth {max_depth}).", "too_deep")
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BodyError("Request body is not valid JSON.", "invalid") from exc
    if bad_text(value) is not None:
        raise BodyError(
            "Request body contains a lone UTF-16 surrogate (invalid Unicode text).", "bad_text"
        )
    return value


def storable(value: Any, fallback: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``value`` when it can be sent as JSON (depth, UTF-8 text), else ``fallback``.

    For data read back from the store: whatever a request stored in the past, a listing
    must not fail because of it.
    """
    if value_depth(value) > max_depth or bad_text(value) is not None:
        return fallback
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
        return fallback
    return value


__all__ = [
    "MAX_JSON_DEPTH",
    "BodyError",
    "bad_text",
    "json_depth",
    "load_json",
    "read_limited",
    "storable",
    "value_depth",
]
