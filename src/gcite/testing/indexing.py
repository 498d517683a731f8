"""Waiting for a Knowledge API batch to be indexed, as Dify's clients do.

A document created or updated through the Knowledge API is answered at once and indexed
afterwards; its batch's ``GET …/documents/{batch}/indexing-status`` says ``waiting`` or
``indexing`` until it is ``completed`` or ``error``. :func:`indexed` and
:func:`indexed_async` poll that URL until the batch has finished and return its status
item. Their bound is a hang guard (a broken indexer), never a limit on speed: a loaded
machine may take minutes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

HANG_GUARD_S = 300.0
"""How long a batch may stay unfinished before the wait fails (seconds)."""

STATUSES = frozenset({"waiting", "indexing", "completed", "error"})
FINISHED = frozenset({"completed", "error"})
_POLL_S = 0.05


def status_url(base: str, dataset: str, batch: str) -> str:
    """``{base}/v1/datasets/{dataset}/documents/{batch}/indexing-status`` (``base``: the
    service's URL without ``/v1``)."""
    return f"{base}/v1/datasets/{dataset}/documents/{batch}/indexing-status"


def _item(answer: httpx.Response) -> dict[str, Any]:
    """The one status item of an indexing-status answer (asserts its shape)."""
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert len(data) == 1, data
    item: dict[str, Any] = dict(data[0])
    assert item["indexing_status"] in STATUSES, item
    return item


def indexed(
    client: httpx.Client,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    guard_s: float = HANG_GUARD_S,
) -> dict[str, Any]:
    """Poll the indexing-status ``url`` with ``client`` until the batch is ``completed`` or
    ``error``; its status item. Raises :class:`AssertionError` on an answer other than 200
    or after ``guard_s`` seconds (a hang guard)."""
    deadline = time.monotonic() + guard_s
    while True:
        item = _item(client.get(url, headers=headers))
        if item["indexing_status"] in FINISHED:
            return item
        assert time.monotonic() < deadline, f"indexing never finished: {item}"
        time.sleep(_POLL_S)


async def indexed_async(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    guard_s: float = HANG_GUARD_S,
) -> dict[str, Any]:
    """:func:`indexed` with an :class:`httpx.AsyncClient` (sleeps without blocking the
    event loop)."""
    deadline = time.monotonic() + guard_s
    while True:
        item = _item(await client.get(url, headers=headers))
        if item["indexing_status"] in FINISHED:
            return item
        assert time.monotonic() < deadline, f"indexing never finished: {item}"
        await asyncio.sleep(_POLL_S)


__all__ = ["FINISHED", "HANG_GUARD_S", "STATUSES", "indexed", "indexed_async", "status_url"]
