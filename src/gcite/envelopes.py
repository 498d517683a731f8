"""Web search payloads and Dify envelopes → standard web chunks (the merge node's ``web_chunks``).

A Dify workflow can hand the merge node web results in many wrappings
(seed platform design §3.2.2, §4, Appendix A ``_extract_web_items``;
dify-protocol.md §6):

- Baidu search node ``[{"references": [...], "request_id": ...}]``: ``[0].references``;
- Baidu AI search raw response ``{"references": [...], ...}``: ``references``;
- Tool node envelope ``{"json": [payload, ...]}`` or its ``json`` list bound
  directly ``[payload, ...]``: each payload, unwrapped again;
- Tavily raw response ``{"query": ..., "results": [...]}``: ``results``;
- Bocha raw response ``{"code": 200, "data": {"webPages": {"value": [...]}}}``:
  ``data.webPages.value`` (also its ``data`` or ``webPages`` object alone);
- a plain list of items: the list itself;
- a JSON string of any of the above: parsed, then as above.

Provider field names are then mapped to a :class:`gcite.chunks.WebChunk` by
:func:`to_web_chunk`. Nothing here raises: unknown shapes give ``[]``.

Standard library only (inlined into the exported Dify Code node).
"""

from __future__ import annotations

import json
from typing import Any

from gcite.chunks import WebChunk, as_score, as_text, extract_host, normalize_date

#: Keys under which an envelope holds its items or a nested envelope, in priority order.
ENVELOPE_KEYS = ("references", "results", "webPages", "value", "json", "data", "result")
#: Keys that mark a dict as one search result rather than an envelope.
ITEM_KEYS = ("url", "link", "title", "name", "content", "snippet", "summary")
_ITEM_KEY_SET = frozenset(ITEM_KEYS)
#: Envelopes nest at most this deep; anything deeper is ignored (guards against hostile input).
MAX_ENVELOPE_DEPTH = 8

# Provider field names, in priority order, for each WebChunk field (seed §4, dify-protocol.md §6).
TITLE_KEYS = ("title", "name")  # Bocha calls the title "name"
URL_KEYS = ("url", "link")
CONTENT_KEYS = ("content", "summary", "snippet")  # longest text first: Baidu/Tavily, Bocha
SITE_NAME_KEYS = ("site_name", "siteName", "web_anchor", "website")  # name before host
DATE_KEYS = ("datePublished", "published_date", "publishedDate", "date", "dateLastCrawled")
SCORE_KEYS = ("score", "authority_score", "rerank_score")


def _envelope_key(item: dict[Any, Any]) -> str | None:
    """The key holding this dict's items if it is an envelope, else ``None``."""
    if "url" in item or "link" in item:
        return None
    for key in ENVELOPE_KEYS:
        if isinstance(item.get(key), list | dict):
            return key
    return None


def _collect_web_items(raw: Any, depth: int, out: list[dict[str, Any]]) -> None:
    if depth > MAX_ENVELOPE_DEPTH:
        return
    if isinstance(raw, str):
        text = raw.strip()
        if text[:1] in ("[", "{"):
            try:
                raw = json.loads(text)
            except ValueError:
                return
            _collect_web_items(raw, depth + 1, out)
        return
    if isinstance(raw, list | tuple):
        _collect_from_list(raw, depth, out)
        return
    if isinstance(raw, dict):
        key = _envelope_key(raw)
        if key is not None:
            _collect_web_items(raw[key], depth + 1, out)
        elif not _ITEM_KEY_SET.isdisjoint(raw.keys()):
            out.append(raw)


def _collect_from_list(
    raw: list[Any] | tuple[Any, ...], depth: int, out: list[dict[str, Any]]
) -> None:
    """The items of a list: its item dicts, and what its envelopes and lists hold."""
    for element in raw:
        if isinstance(element, dict) and _envelope_key(element) is None:
            if not _ITEM_KEY_SET.isdisjoint(element.keys()):
                out.append(element)
        elif isinstance(element, dict | list | tuple):
            _collect_web_items(element, depth + 1, out)


def extract_web_items(raw: Any) -> list[dict[str, Any]]:
    """Unwrap any supported web payload into its result items, in provider order.

    ``raw`` is whatever the workflow bound to ``web_chunks`` (see the module
    table). Returns the provider's own item dicts, unchanged; items that are not
    dicts, and dicts with none of the item keys (``url``, ``title``, ``content``,
    ``snippet`` …), are skipped. ``None``, empty or unknown shapes give ``[]``.
    Several envelopes in one list are concatenated. Never raises.
    """
    out: list[dict[str, Any]] = []
    _collect_web_items(raw, 0, out)
    return out


def _first_text(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = item.get(key)
        if value is not None:
            text = (value if isinstance(value, str) else as_text(value)).strip()
            if text:
                return text
    return ""


def to_web_chunk(item: dict[str, Any]) -> WebChunk:
    """Map one provider item to the standard web chunk (seed §4 mapping table).

    - ``title`` ← ``title`` | ``name`` (Bocha);
    - ``url`` ← ``url`` | ``link``;
    - ``content`` ← ``content`` (Baidu, Tavily) | ``summary`` (Bocha with
      ``summary=true``) | ``snippet``;
    - ``site_name`` ← ``site_name`` | ``siteName`` (Bocha) | ``web_anchor``
      (Baidu's display name) | ``website`` (Baidu's host, ``www.`` removed);
    - ``published_date`` ← the first of ``datePublished`` | ``published_date``
      | ``publishedDate`` | ``date`` | ``dateLastCrawled`` that
      :func:`gcite.chunks.normalize_date` can read, as YYYY-MM-DD;
    - ``score`` ← the first finite number (or numeric string) of ``score`` |
      ``authority_score`` | ``rerank_score``, else ``0.0``.

    Values of the wrong type count as missing. Never raises.
    """
    site_name = _first_text(item, SITE_NAME_KEYS[:3])
    if not site_name:
        site_name = extract_host(as_text(item.get("website"))) or _first_text(item, ("website",))
    published_date = ""
    for key in DATE_KEYS:
        value = item.get(key)
        if value is not None:
            published_date = normalize_date(value)
            if published_date:
                break
    score = 0.0
    for key in SCORE_KEYS:
        value = item.get(key)
        parsed = None if value is None else as_score(value)
        if parsed is not None:
            score = parsed
            break
    return {
        "title": _first_text(item, TITLE_KEYS),
        "url": _first_text(item, URL_KEYS),
        "content": _first_text(item, CONTENT_KEYS),
        "site_name": site_name,
        "published_date": published_date,
        "score": score,
    }


def web_chunks_from(raw: Any) -> list[WebChunk]:
    """``extract_web_items`` then ``to_web_chunk`` on each item (items without content kept)."""
    return [to_web_chunk(item) for item in extract_web_items(raw)]


__all__ = [
    "CONTENT_KEYS",
    "DATE_KEYS",
    "ENVELOPE_KEYS",
    "ITEM_KEYS",
    "MAX_ENVELOPE_DEPTH",
    "SCORE_KEYS",
    "SITE_NAME_KEYS",
    "TITLE_KEYS",
    "URL_KEYS",
    "extract_web_items",
    "to_web_chunk",
    "web_chunks_from",
]
