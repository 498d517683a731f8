"""The gcite exception tree.

All errors gcite raises on purpose derive from :class:`GciteError`::

    GciteError
    ├── ConfigError          bad or missing configuration (user mistake, reported as one line)
    ├── FilterError          a malformed metadata / role filter condition
    ├── StoreError           a knowledge store that is missing, corrupt or unreachable
    ├── SourceError          a retrieval source failed while answering
    │   ├── SourceTimeout    ... because it did not answer in time
    │   ├── SourceAuthError  ... because it rejected our credentials (401/403, never retried)
    │   └── SourceUnavailable ... for any other reason (5xx after retries, bad payload, network)
    ├── LLMError             the language model backend failed
    └── StreamError          a citation / SSE stream was malformed or broke off

Third-party exceptions (httpx, openai, qdrant) are translated into these at one
boundary per adapter, so callers only ever catch gcite errors.
"""

from __future__ import annotations


class GciteError(Exception):
    """Base class of every error gcite raises on purpose."""


class ConfigError(GciteError):
    """Configuration is missing or invalid (a file, an env var or a flag)."""


class FilterError(GciteError):
    """A metadata or role filter condition is malformed (unknown operator, wrong value type)."""


class StoreError(GciteError):
    """A knowledge store is missing, corrupt or unreachable."""


class SourceError(GciteError):
    """A retrieval source (knowledge base or web search) failed."""


class SourceTimeout(SourceError):
    """A retrieval source did not answer within its timeout."""


class SourceAuthError(SourceError):
    """A retrieval source rejected the credentials (HTTP 401/403). Never retried."""


class SourceUnavailable(SourceError):
    """A retrieval source failed for another reason (5xx after retries, bad payload, network)."""


class LLMError(GciteError):
    """The language-model backend failed (connection, protocol or provider error)."""


class StreamError(GciteError):
    """A citation or SSE stream was malformed or ended abnormally.

    ``code`` / ``status``: what a client shows the user (``gcite.stream.messages``):
    Dify's error code or the transport's (``network_error``, ``timeout``,
    ``not_event_stream``) and the HTTP status (0 without one).
    """

    def __init__(self, message: str = "", *, code: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


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
]
