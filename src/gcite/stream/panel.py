"""The citation panel model: the cited chunks, in display order, each once.

Mobile design document §4.3 and §5.1: the panel (摘要栏) is built by walking the
idMap in insertion order and looking each raw id up in ``chunkMetadataMap``
(``chunk_metadata`` indexed by ``id``) — never by listing all of ``chunk_metadata``.
Also the fallback of §3.4: when no ``chunk_metadata`` arrived, the chunks are rebuilt
from ``message_end.metadata.retriever_resources`` and the cited ids looked up in them
(a cited id with no matching resource gets ``chunk=None``). The rules, shared with the
JavaScript client (``clients/js/src/panel.js``), are ``docs/stream-contract.md`` §6–§7:
which chunks are usable, the row's title, subtitle and link, and the URL rule
(:func:`safe_url`). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypedDict

_URL_FORBIDDEN: Final = re.compile(
    "[\x00-\x20\x7f-\x9f\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff\\\\]"
)
_URL_RE: Final = re.compile(
    r"(?i:https?)://(?P<host>[^/?#@:\[\]]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?(?:[/?#].*)?",
    re.DOTALL,
)
_URL_TRIM: Final = " \t\n\r\f"


class PanelEntry(TypedDict):
    """One panel row: display index (from 1), raw chunk id, and the chunk's metadata.

    ``chunk`` is the ``UnifiedChunk`` dict from ``chunk_metadata`` (fields such as
    ``source_type``, ``document_title``, ``display_subtitle``, ``url``), or ``None``
    when no metadata is known for that id.
    """

    idx: int
    raw_id: str
    chunk: dict[str, Any] | None


def chunk_id(chunk: Any) -> str | None:
    """The id of a ``chunk_metadata`` item as a string, or ``None`` when it has none.

    An id is a non-empty string, or an integer (not a boolean) written in decimal.
    """
    if not isinstance(chunk, dict):
        return None
    value = chunk.get("id")
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def usable_chunk(chunk: Any) -> bool:
    """Whether a ``chunk_metadata`` item can be cited: an object with an id (:func:`chunk_id`)."""
    return chunk_id(chunk) is not None


def chunk_map(
    chunk_metadata: Sequence[Any] | Mapping[str, Any] | None,
) -> dict[str, dict[str, Any]]:
    """``chunkMetadataMap`` (mobile §3.3): chunk dicts keyed by ``str(chunk["id"])``.

    Accepts the ``chunk_metadata`` list, or an already keyed dict. Items that are not
    dicts, or list items without an id (:func:`chunk_id`), are skipped; for a repeated id
    the first wins.
    """
    out: dict[str, dict[str, Any]] = {}
    if chunk_metadata is None:
        return out
    if isinstance(chunk_metadata, Mapping):
        for key, chunk in chunk_metadata.items():
            if isinstance(chunk, dict):
                out.setdefault(str(key), chunk)
        return out
    for chunk in chunk_metadata:
        own = chunk_id(chunk)
        if own is not None:
            out.setdefault(own, chunk)
    return out


def build_panel(
    citations: Iterable[tuple[str, int]] | Iterable[Sequence[Any]],
    chunk_metadata: list[dict[str, Any]] | dict[str, dict[str, Any]],
) -> list[PanelEntry]:
    """Panel rows for ``citations`` (``[(raw_id, idx), ...]`` from the parser).

    Sorted by display index, one row per raw id (the first pair wins), each with its
    chunk from ``chunk_metadata`` (a list of ``UnifiedChunk`` dicts or a dict keyed by
    id), or ``None`` when the id has no metadata.
    """
    chunks = chunk_map(chunk_metadata)
    rows: dict[str, int] = {}
    for pair in citations:
        raw_id, idx = str(pair[0]), int(pair[1])
        rows.setdefault(raw_id, idx)
    ordered = sorted(rows.items(), key=lambda item: item[1])
    return [{"idx": idx, "raw_id": raw_id, "chunk": chunks.get(raw_id)} for raw_id, idx in ordered]


def chunk_from_retriever_resource(resource: Mapping[str, Any], position: int) -> dict[str, Any]:
    """A ``UnifiedChunk``-shaped dict from one ``retriever_resources`` item.

    Dify's ``RetrievalSourceMetadata`` (dify-protocol.md §1.6) knows only knowledge-base
    hits: ``source_type`` ``"rag"``, ``document_title`` from ``document_name`` / ``title``,
    ``display_subtitle`` from ``dataset_name``, and ``id`` = ``position`` when it is a
    positive integer (else ``position`` given here: the 1-based place in the list). When
    ``doc_metadata`` carries G-Cite fields (as the gcite service writes them: ``chunk_id``,
    ``source_type``, ``document_title``, ``display_subtitle``, ``url``), those win, so the
    raw ids of the answer's markers match. Only string values are taken as text
    (``docs/stream-contract.md`` §6).
    """
    meta = resource.get("doc_metadata")
    if not isinstance(meta, dict):
        meta = {}
    raw_position = resource.get("position")
    if isinstance(raw_position, int) and not isinstance(raw_position, bool) and raw_position > 0:
        position = raw_position
    own_id = chunk_id({"id": meta.get("chunk_id")})
    source_type = meta.get("source_type")
    subtitle = meta.get("display_subtitle")
    title = _text(meta, "document_title") or _text(resource, "document_name")
    return {
        "id": own_id if own_id is not None else str(position),
        "source_type": "web" if source_type == "web" else "rag",
        "document_title": title or _text(resource, "title"),
        "display_subtitle": subtitle
        if isinstance(subtitle, str)
        else _text(resource, "dataset_name"),
        "content": _text(resource, "content"),
        "score": resource.get("score"),
        "url": _text(meta, "url") or _text(meta, "source_file_url"),
        "source_file_url": _text(meta, "source_file_url"),
        "document_name": _text(resource, "document_name"),
        "dataset_name": _text(resource, "dataset_name"),
    }


def _text(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping.get(key)
    return value if isinstance(value, str) else ""


def chunks_from_retriever_resources(resources: Any) -> list[dict[str, Any]]:
    """``chunk_metadata`` rebuilt from ``message_end.metadata.retriever_resources``.

    The mobile §3.4 fallback when no ``node_finished`` carried ``chunk_metadata``:
    :func:`build_panel` then looks the cited ids up in these chunks. Anything that is not
    a list gives ``[]``; non-dict items are skipped.
    """
    if not isinstance(resources, list):
        return []
    return [
        chunk_from_retriever_resource(resource, k + 1)
        for k, resource in enumerate(resources)
        if isinstance(resource, dict)
    ]


# -- the row's view and the URL rule (docs/stream-contract.md §6, §7) -------------------


def safe_url(url: Any) -> str | None:
    """``url`` when it may become a link, else ``None`` (the URL rule; fails closed).

    Leading and trailing ASCII whitespace is trimmed. Accepted: an absolute ``http`` or
    ``https`` URL (scheme in any case) followed by ``//`` and a host, optionally a port
    of 1–5 digits, then optionally a path, query or fragment. Refused: other schemes
    (``javascript:``, ``data:``, ``oss://``), relative URLs, user info (any ``@`` in the
    authority: ``https://good.example@evil.example``, ``https://@evil.example``), an
    empty host, backslashes anywhere, and control, space, invisible formatting or
    bidirectional characters anywhere. Returns the trimmed URL.
    """
    if not isinstance(url, str):
        return None
    text = url.strip(_URL_TRIM)
    if not text or _URL_FORBIDDEN.search(text) or _URL_RE.fullmatch(text) is None:
        return None
    return text


def entry_title(entry: PanelEntry) -> str:
    """The row's title: the first non-blank string of the chunk's ``document_title``,
    ``document_name``, ``title``; else ``来源 <raw id>``."""
    chunk = entry["chunk"]
    if chunk is not None:
        for key in ("document_title", "document_name", "title"):
            value = chunk.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return f"来源 {entry['raw_id']}"


def entry_subtitle(entry: PanelEntry) -> str:
    """The row's subtitle: ``display_subtitle`` trimmed (mobile §5.4: no fallback chain);
    ``""`` means no subtitle line."""
    chunk = entry["chunk"]
    value = None if chunk is None else chunk.get("display_subtitle")
    return value.strip() if isinstance(value, str) else ""


def entry_url(entry: PanelEntry) -> str | None:
    """The row's link: :func:`safe_url` of ``url``, else of ``source_file_url``, else ``None``."""
    chunk = entry["chunk"]
    if chunk is None:
        return None
    return safe_url(chunk.get("url")) or safe_url(chunk.get("source_file_url"))


def entry_source_type(entry: PanelEntry) -> str:
    """The row's ``source_type`` (``"rag"``, ``"web"``, or ``""`` without a chunk)."""
    chunk = entry["chunk"]
    value = None if chunk is None else chunk.get("source_type")
    return value if isinstance(value, str) else ""


# -- what the panel rows and the sheet show (tests/vectors/source-rows.v1.json) -------

_PREVIEW_CHARS: Final = 28
_SPACE: Final = re.compile("[\\s\u3000]+")


def _preview(content: Any) -> str:
    if not isinstance(content, str):
        return ""
    flat = " ".join(part for part in _SPACE.split(content) if part)
    return flat[:_PREVIEW_CHARS] + "…" if len(flat) > _PREVIEW_CHARS else flat


def segment_hint(entry: PanelEntry) -> str:
    """The hint of a row that looks like another one (same title and subtitle):
    ``第 N 段`` when the chunk has a ``segment_position`` (an integer 1 … 999999), then
    the start of its text in quotes (28 characters), joined by `` · ``; else
    ``来源编号 <raw id>``."""
    chunk = entry["chunk"]
    parts: list[str] = []
    if chunk is not None:
        pos = chunk.get("segment_position")
        number = pos if isinstance(pos, int | float) and not isinstance(pos, bool) else 0
        if 0 < number < 1_000_000 and number == int(number):
            parts.append(f"第 {int(number)} 段")
        text = _preview(chunk.get("content"))
        if text:
            parts.append(f"“{text}”")
    return " · ".join(parts) if parts else f"来源编号 {entry['raw_id']}"


def source_rows(panel: Sequence[PanelEntry], weak: Iterable[str] = ()) -> list[dict[str, Any]]:
    """What each panel row shows: ``{idx, raw_id, type, title, subtitle, hint, url, weak,
    label}``; ``hint`` is ``""`` unless another row has the same title and subtitle
    (:func:`segment_hint`); ``label`` is the row's accessible name. The rule of
    ``sourceRows`` in ``clients/js/src/sources.js``."""
    weak_ids = {str(raw) for raw in weak}
    keys = [(entry_title(e), entry_subtitle(e)) for e in panel]
    counts: dict[tuple[str, str], int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    rows: list[dict[str, Any]] = []
    for entry, (title, subtitle) in zip(panel, keys, strict=True):
        hint = segment_hint(entry) if counts[(title, subtitle)] > 1 else ""
        label = f"来源 {entry['idx']}：{title}" + (f"，{subtitle}" if subtitle else "")
        rows.append(
            {
                "idx": entry["idx"],
                "raw_id": entry["raw_id"],
                "type": "web" if entry_source_type(entry) == "web" else "rag",
                "title": title,
                "subtitle": subtitle,
                "hint": hint,
                "url": entry_url(entry),
                "weak": entry["raw_id"] in weak_ids,
                "label": label + (f"，{hint}" if hint else ""),
            }
        )
    return rows


def is_office_url(url: Any) -> bool:
    """Whether the URL's path ends in ``.doc``, ``.docx`` or ``.pdf`` (query and fragment
    ignored, any case)."""
    if not isinstance(url, str):
        return False
    path = url.strip().split("#")[0].split("?")[0].lower()
    return path.endswith((".doc", ".docx", ".pdf"))


def source_sheet(entry: PanelEntry) -> dict[str, Any]:
    """The sheet of one row: ``{type, tag, title, subtitle, url, office, notice, link_hint,
    content}`` (``sourceSheet`` in ``clients/js/src/sources.js``): ``url`` the link
    "完整原文" opens or ``None``; ``office`` for a knowledge-base Office/PDF link (then the
    Office ``notice``); ``link_hint`` why there is no link; ``content`` the chunk text or
    a placeholder when it is blank."""
    from gcite.stream.messages import TEXT

    chunk = entry["chunk"]
    kind = "web" if entry_source_type(entry) == "web" else "rag"
    url = entry_url(entry)
    given = ""
    if chunk is not None:
        first = chunk.get("url")
        second = chunk.get("source_file_url")
        if isinstance(first, str) and first.strip():
            given = first.strip()
        elif isinstance(second, str):
            given = second.strip()
    office = kind == "rag" and url is not None and is_office_url(url)
    content = chunk.get("content") if chunk is not None else None
    text = content if isinstance(content, str) else ""
    return {
        "type": kind,
        "tag": TEXT[kind],
        "title": entry_title(entry),
        "subtitle": entry_subtitle(entry),
        "url": url,
        "office": office,
        "notice": TEXT["office_notice"] if office else "",
        "link_hint": "" if url is not None else TEXT["bad_link"] if given else TEXT["no_link"],
        "content": text if text.strip() else TEXT["no_content"],
    }


def panel_view(panel: Sequence[PanelEntry]) -> list[dict[str, Any]]:
    """What a client shows for each row: ``{idx, raw_id, source_type, title, subtitle, url}``
    (the stream contract's panel output, compared by the vectors)."""
    return [
        {
            "idx": entry["idx"],
            "raw_id": entry["raw_id"],
            "source_type": entry_source_type(entry),
            "title": entry_title(entry),
            "subtitle": entry_subtitle(entry),
            "url": entry_url(entry),
        }
        for entry in panel
    ]
