"""gcite: generation-time citations (G-Cite) for RAG chat assistants.

The public surface is re-exported here; everything else lives in modules
that mirror the data flow: sources (``knowledge``, ``web``) -> ``merge`` ->
``generate`` -> ``service`` (Dify-compatible SSE) -> ``stream`` (client parser
and renderers).
"""

from __future__ import annotations

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

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "FilterError",
    "GciteError",
    "LLMError",
    "SourceAuthError",
    "SourceError",
    "SourceTimeout",
    "SourceUnavailable",
    "StoreError",
    "StreamError",
    "__version__",
]
