"""Server-sent-event framing of Dify's stream (``../shared/reference/dify-protocol.md`` §1.2).

Each event object is one ``data: <json>\\n\\n`` frame, UTF-8 JSON with raw (not
``\\uXXXX``-escaped) characters as new Dify versions send; a keep-alive is a bare
``event: ping\\n\\n`` frame with no data line.
"""

from __future__ import annotations

import json
from typing import Any

PING_FRAME = b"event: ping\n\n"
"""Dify's keep-alive frame, sent every ``settings.ping_interval_s`` seconds of silence."""

MEDIA_TYPE = "text/event-stream"


def data_frame(obj: dict[str, Any]) -> bytes:
    """``data: <json>\\n\\n`` as UTF-8 bytes (``ensure_ascii=False``, compact separators)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + text.encode("utf-8") + b"\n\n"


__all__ = ["MEDIA_TYPE", "PING_FRAME", "data_frame"]
