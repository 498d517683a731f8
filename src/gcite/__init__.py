"""gcite: generation-time citations (G-Cite) for RAG chat assistants.

The public surface is re-exported here; everything else lives in modules
that mirror the data flow: sources (``gcite.knowledge``, ``gcite.web``) ->
``gcite.merge`` (the seeds' merge node) -> ``gcite.generate`` ->
``gcite.service`` (Dify-compatible SSE) -> ``gcite.stream`` (the client-side
parser, idMap and renderers). Heavy subsystems (the knowledge store, the
service) are imported from their own packages, not from here.
"""

from __future__ import annotations

from gcite.chunks import UnifiedChunk, WebChunk, display_subtitle
from gcite.config import ApiKey, Settings, load_settings
from gcite.errors import (
    ConfigError,
    FilterError,
    GciteError,
    LLMError,
    SourceAuthError,
    SourceError,
    SourceTimeout,
    SourceUnavailable,
    StoreError,
    StreamError,
)
from gcite.merge import MergeResult, fit_dify_limits, merge_chunks
from gcite.stream import (
    CitationParser,
    build_panel,
    cited_ids,
    parse_all,
    render_html,
    render_markdown,
    render_terminal,
    strip_markers,
)

__version__ = "0.1.0"

__all__ = [
    "ApiKey",
    "CitationParser",
    "ConfigError",
    "FilterError",
    "GciteError",
    "LLMError",
    "MergeResult",
    "Settings",
    "SourceAuthError",
    "SourceError",
    "SourceTimeout",
    "SourceUnavailable",
    "StoreError",
    "StreamError",
    "UnifiedChunk",
    "WebChunk",
    "__version__",
    "build_panel",
    "cited_ids",
    "display_subtitle",
    "fit_dify_limits",
    "load_settings",
    "merge_chunks",
    "parse_all",
    "render_html",
    "render_markdown",
    "render_terminal",
    "strip_markers",
]
