"""G-Cite stream client: marker grammar, incremental parser with idMap, panel, renderers, SSE.

Mobile design document §3–§5 and ``citation-markers.md`` (version 2). The pure core
(:mod:`~gcite.stream.grammar`, :mod:`~gcite.stream.parser`, :mod:`~gcite.stream.panel`,
:mod:`~gcite.stream.render`) does no I/O; :mod:`gcite.stream.sse` adds the Dify SSE
consumer and its httpx edge.
"""

from __future__ import annotations

from gcite.stream.grammar import MARKER_RE, MarkerMatcher, Step, marker_ids, normalise_id
from gcite.stream.panel import (
    PanelEntry,
    build_panel,
    chunk_map,
    chunks_from_retriever_resources,
)
from gcite.stream.parser import (
    CitationParser,
    CiteSegment,
    ParseResult,
    ReasoningSegment,
    Segment,
    TextSegment,
    cited_ids,
    merge_segments,
    parse_all,
    strip_markers,
)
from gcite.stream.render import (
    render_html,
    render_markdown,
    render_panel_html,
    render_sources_terminal,
    render_terminal,
    superscript,
)
from gcite.stream.sse import (
    AnswerFinished,
    AnswerResult,
    DifyStreamConsumer,
    MetadataReceived,
    SegmentsReceived,
    StreamFailed,
    StreamUpdate,
    consume_chat_stream,
)
from gcite.stream.surrogates import SurrogateJoiner, fix_surrogates

__all__ = [
    "MARKER_RE",
    "AnswerFinished",
    "AnswerResult",
    "CitationParser",
    "CiteSegment",
    "DifyStreamConsumer",
    "MarkerMatcher",
    "MetadataReceived",
    "PanelEntry",
    "ParseResult",
    "ReasoningSegment",
    "Segment",
    "SegmentsReceived",
    "Step",
    "StreamFailed",
    "StreamUpdate",
    "SurrogateJoiner",
    "TextSegment",
    "build_panel",
    "chunk_map",
    "chunks_from_retriever_resources",
    "cited_ids",
    "consume_chat_stream",
    "fix_surrogates",
    "marker_ids",
    "merge_segments",
    "normalise_id",
    "parse_all",
    "render_html",
    "render_markdown",
    "render_panel_html",
    "render_sources_terminal",
    "render_terminal",
    "strip_markers",
    "superscript",
]
