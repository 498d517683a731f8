"""The WebSource contract: one suite every web source passes (haystack style).

Subclass :class:`WebSourceContract` in a pytest module (pytest-asyncio in auto mode) and
provide two fixtures: ``source`` (a fresh source, closed by the fixture) and ``query``
(a question the source can answer). Nothing here knows the provider: the payload is
only ever read by the merge node, exactly as the chatflow does. Needs pytest (the
``testing`` extra).
"""

from __future__ import annotations

from typing import Any

from gcite.chatflow.seams import WebSource
from gcite.merge import merge_chunks


def web_chunks(payload: Any) -> list[dict[str, Any]]:
    """The web UnifiedChunks the merge node makes of ``payload``."""
    return [dict(c) for c in merge_chunks([], payload)["chunk_metadata"]]


class WebSourceContract:
    """Behaviour of :class:`gcite.chatflow.seams.WebSource`, whatever the provider."""

    def test_satisfies_the_protocol(self, source: Any) -> None:
        assert isinstance(source, WebSource)
        assert isinstance(source.name, str) and source.name

    async def test_payload_feeds_the_merge_node_with_at_most_count_results(
        self, source: Any, query: str
    ) -> None:
        chunks = web_chunks(await source.search(query, count=2))
        assert 1 <= len(chunks) <= 2
        for chunk in chunks:
            assert chunk["source_type"] == "web"
            assert chunk["document_title"] and chunk["content"]
            assert str(chunk["url"]).startswith(("http://", "https://"))

    async def test_count_zero_and_a_blank_query_find_nothing(self, source: Any, query: str) -> None:
        assert web_chunks(await source.search(query, count=0)) == []
        assert web_chunks(await source.search("   ", count=3)) == []

    async def test_aclose_is_idempotent(self, source: Any) -> None:
        await source.aclose()
        await source.aclose()


__all__ = ["WebSourceContract", "web_chunks"]
