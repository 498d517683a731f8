"""Dify Service API bodies beyond chat events: app endpoints, history fields, features off.

Pure functions (no I/O) that the service's routers answer with, so that a client written
for Dify works unchanged. Facts come from Dify's OpenAPI spec
(``../shared/reference/dify-openapi-service.json``) and Dify's service-API code
(dify-protocol.md §1):

- ``GET /v1/parameters``: :func:`parameters_body` — Dify's
  ``get_parameters_from_feature_dict`` for a chatflow whose features are all off except
  "citations" (``retriever_resource``), with the app key's opening statement and
  suggested questions; ``user_input_form`` is empty (gcite's Start node has no inputs).
- ``GET /v1/info``, ``/v1/meta``, ``/v1/site``: :func:`info_body`, :func:`meta_body`,
  :func:`site_body`.
- ``GET /v1/conversations/{id}/variables``: :func:`variables_body` (always empty).
- history items: :func:`message_usage_fields` (``message_tokens`` ...) and
  :func:`resource_item` (every ``RetrieverResource`` property, spec-typed).
- conversation ordering: :func:`parse_sort_by`.
- features that are off: :data:`SUGGESTED_OFF`, :data:`UPLOAD_OFF`, :data:`SPEECH_OFF`,
  :data:`TTS_OFF` — ``(status, code, message)`` of Dify's error body.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from gcite.config import ApiKey

#: The end user Dify's service API uses when a request names no ``user``.
DEFAULT_USER = "DEFAULT-USER"
#: App name when the key configures none.
DEFAULT_APP_NAME = "gcite"
#: Dify's default upload limits in MB (``UPLOAD_*_FILE_SIZE_LIMIT``) and files per run.
SYSTEM_PARAMETERS: dict[str, int] = {
    "image_file_size_limit": 10,
    "video_file_size_limit": 100,
    "audio_file_size_limit": 50,
    "file_size_limit": 15,
    "workflow_file_upload_limit": 10,
}
#: Dify's ``DEFAULT_FILE_NUMBER_LIMITS``.
FILE_NUMBER_LIMITS = 3

ErrorSpec = tuple[int, str, str]
#: ``GET /v1/messages/{id}/suggested`` with follow-up suggestions off (Dify's BadRequest).
SUGGESTED_OFF: ErrorSpec = (400, "bad_request", "Suggested Questions Is Disabled.")
#: ``POST /v1/files/upload`` for an app whose upload settings allow no file type.
UPLOAD_OFF: ErrorSpec = (415, "unsupported_file_type", "File type not allowed.")
NO_FILE: ErrorSpec = (400, "no_file_uploaded", "Please upload your file.")
TOO_MANY_FILES: ErrorSpec = (400, "too_many_files", "Only one file is allowed.")
#: ``POST /v1/audio-to-text`` / ``/v1/text-to-audio`` with the feature off (Dify's ValueError).
SPEECH_OFF: ErrorSpec = (400, "invalid_param", "Speech to text is not enabled")
TTS_OFF: ErrorSpec = (400, "invalid_param", "TTS is not enabled")

SortField = Literal["created_at", "updated_at"]
#: ``sort_by`` values of ``GET /v1/conversations`` (default ``-updated_at``).
SORT_BY_VALUES = ("created_at", "-created_at", "updated_at", "-updated_at")

_OFF = {"enabled": False}
_IDS = uuid.UUID("6f1e0f3c-3b8e-5a57-9a51-5c1f7d0e9c11")
#: ``dataset_id`` of every web chunk: the web is one pseudo-dataset.
WEB_DATASET_ID = str(uuid.uuid5(_IDS, "web"))


def app_name(key: ApiKey | None) -> str:
    """The app's name: the key's ``app_name``, else :data:`DEFAULT_APP_NAME`."""
    return (key.app_name if key is not None else "") or DEFAULT_APP_NAME


def parameters_body(key: ApiKey | None) -> dict[str, Any]:
    """``GET /v1/parameters`` for the app behind ``key`` (``None``: a key not configured).

    Shape of Dify's ``AppParametersResponse``: ``opening_statement`` (str, "" when unset),
    ``suggested_questions`` (list[str]), every feature toggle ``{"enabled": bool}`` (only
    ``retriever_resource`` on), ``user_input_form: []``, ``file_upload`` off (also its
    ``image`` part), ``system_parameters`` (MB / count limits as Dify's defaults).
    """
    return {
        "opening_statement": key.opening_statement if key is not None else "",
        "suggested_questions": list(key.suggested_questions) if key is not None else [],
        "suggested_questions_after_answer": dict(_OFF),
        "speech_to_text": dict(_OFF),
        "text_to_speech": dict(_OFF),
        "retriever_resource": {"enabled": True},
        "annotation_reply": dict(_OFF),
        "more_like_this": dict(_OFF),
        "user_input_form": [],
        "sensitive_word_avoidance": {"enabled": False, "type": "", "configs": []},
        "file_upload": {
            "enabled": False,
            "allowed_file_types": [],
            "allowed_file_extensions": [],
            "allowed_file_upload_methods": [],
            "number_limits": FILE_NUMBER_LIMITS,
            "image": {
                "enabled": False,
                "number_limits": FILE_NUMBER_LIMITS,
                "detail": "high",
                "transfer_methods": ["remote_url", "local_file"],
            },
        },
        "system_parameters": dict(SYSTEM_PARAMETERS),
    }


def info_body(key: ApiKey | None) -> dict[str, Any]:
    """``GET /v1/info``: ``{"name", "description", "tags", "mode", "author_name"}``."""
    return {
        "name": app_name(key),
        "description": "",
        "tags": [],
        "mode": "advanced-chat",
        "author_name": "",
    }


def meta_body() -> dict[str, Any]:
    """``GET /v1/meta``: ``{"tool_icons": {}}`` — the chatflow uses no Dify tool."""
    return {"tool_icons": {}}


def site_body(key: ApiKey | None) -> dict[str, Any]:
    """``GET /v1/site``: Dify's ``WebAppSettingsResponse`` (title = app name, zh-Hans)."""
    return {
        "title": app_name(key),
        "chat_color_theme": "",
        "chat_color_theme_inverted": False,
        "icon_type": "emoji",
        "icon": "",
        "icon_background": "",
        "icon_url": None,
        "description": "",
        "copyright": "",
        "privacy_policy": "",
        "input_placeholder": None,
        "custom_disclaimer": "",
        "default_language": "zh-Hans",
        "show_workflow_steps": True,
        "use_icon_as_answer_icon": False,
    }


def variables_body(limit: int = 20) -> dict[str, Any]:
    """``GET /v1/conversations/{id}/variables``: gcite's chatflow declares none."""
    return {"limit": limit, "has_more": False, "data": []}


def parse_sort_by(raw: str | None) -> tuple[SortField, bool]:
    """``sort_by`` of ``GET /v1/conversations`` → ``(field, descending)``.

    ``None`` or "" gives Dify's default ``-updated_at``. Raises :class:`ValueError` for
    anything but :data:`SORT_BY_VALUES`.
    """
    value = raw or "-updated_at"
    if value not in SORT_BY_VALUES:
        raise ValueError(f"sort_by must be one of {', '.join(SORT_BY_VALUES)}")
    field: SortField = "created_at" if value.endswith("created_at") else "updated_at"
    return field, value.startswith("-")


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        return int(value)
    except (OverflowError, ValueError):  # inf, nan
        return default


def message_usage_fields(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The token, latency and price fields of a ``GET /v1/messages`` item.

    From the stored ``message_end.metadata.usage``: ``message_tokens`` (prompt),
    ``answer_tokens`` (completion), ``total_tokens``, ``provider_response_latency``
    (seconds), ``total_price`` (decimal string), ``currency``. A message without usage
    (failed before the model answered, or stored by an older gcite) gives zeros,
    ``"0"`` and ``"USD"``.
    """
    raw = metadata.get("usage") if isinstance(metadata, Mapping) else None
    usage: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    latency = usage.get("latency")
    price = usage.get("total_price")
    currency = usage.get("currency")
    return {
        "message_tokens": prompt,
        "answer_tokens": completion,
        "total_tokens": _int(usage.get("total_tokens"), prompt + completion),
        "provider_response_latency": _finite(latency),
        "total_price": price if isinstance(price, str) and price else "0",
        "currency": currency if isinstance(currency, str) and currency else "USD",
    }


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(_IDS, "\x1f".join(parts)))


def resource_item(
    resource: Mapping[str, Any], *, message_id: str, created_at: int
) -> dict[str, Any]:
    """One ``retriever_resources`` item with every property of the spec's ``RetrieverResource``.

    ``resource``: a ``RetrievalSourceMetadata`` dict as gcite builds it (dify-protocol.md
    §1.6; also items stored by older versions, with ``null`` ids on web chunks). Returns
    a new dict: the input's fields, then ``id`` (stable per message and position),
    ``message_id``, ``created_at`` (int seconds), ``summary: None`` and non-null,
    spec-typed ``dataset_id``, ``document_id``, ``segment_id`` (uuid strings: a web chunk
    belongs to the pseudo-dataset :data:`WEB_DATASET_ID`, its document id is derived from
    its URL, its segment id from URL and content), ``hit_count`` (int, 0 when unknown),
    ``segment_position`` (int; 1 for a web page), ``index_node_hash`` (sha256 of the
    content when unknown), ``word_count``, ``score``, ``position``.
    """
    item = dict(resource)
    doc_metadata = item.get("doc_metadata")
    doc: Mapping[str, Any] = doc_metadata if isinstance(doc_metadata, Mapping) else {}
    content = _text(item.get("content"))
    position = _int(item.get("position"), 1)
    is_web = item.get("data_source_type") == "web"
    if is_web:
        url = _text(doc.get("url")) or _text(item.get("document_id"))
        dataset_id = WEB_DATASET_ID
        document_id = _uuid("web", url)
        segment_id = _uuid("web", url, content)
        segment_position = 1
    else:
        dataset_id = _text(item.get("dataset_id")) or _uuid(
            "dataset", _text(item.get("dataset_name"))
        )
        document_id = _text(item.get("document_id")) or _uuid(
            "document", dataset_id, _text(item.get("document_name"))
        )
        segment_id = _text(item.get("segment_id")) or _uuid("segment", document_id, content)
        segment_position = _int(item.get("segment_position"))
    score = item.get("score")
    item.update(
        {
            "id": _uuid("resource", message_id, str(position)),
            "message_id": message_id,
            "position": position,
            "dataset_id": dataset_id,
            "dataset_name": _text(item.get("dataset_name")),
            "document_id": document_id,
            "document_name": _text(item.get("document_name")),
            "data_source_type": _text(item.get("data_source_type")) or "upload_file",
            "segment_id": segment_id,
            "retriever_from": _text(item.get("retriever_from")) or "workflow",
            "score": _finite(score),
            "hit_count": _int(item.get("hit_count")),
            "word_count": _int(item.get("word_count"), len(content)),
            "segment_position": segment_position,
            "index_node_hash": _text(item.get("index_node_hash"))
            or hashlib.sha256(content.encode("utf-8")).hexdigest(),
            "content": content,
            "summary": item.get("summary") if isinstance(item.get("summary"), str) else None,
            "created_at": _int(created_at),
        }
    )
    return item


def resource_items(
    resources: list[dict[str, Any]], *, message_id: str, created_at: int
) -> list[dict[str, Any]]:
    """:func:`resource_item` for every item of ``resources`` (non-dict items dropped)."""
    return [
        resource_item(r, message_id=message_id, created_at=created_at)
        for r in resources
        if isinstance(r, Mapping)
    ]


__all__ = [
    "DEFAULT_USER",
    "NO_FILE",
    "SORT_BY_VALUES",
    "SPEECH_OFF",
    "SUGGESTED_OFF",
    "SYSTEM_PARAMETERS",
    "TOO_MANY_FILES",
    "TTS_OFF",
    "UPLOAD_OFF",
    "WEB_DATASET_ID",
    "app_name",
    "info_body",
    "message_usage_fields",
    "meta_body",
    "parameters_body",
    "parse_sort_by",
    "resource_item",
    "resource_items",
    "site_body",
    "variables_body",
]
