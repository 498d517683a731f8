"""Registries of the pluggable backends by name: web providers, LLM protocols, store backends.

Adding a web search provider is one module with a class that has
``from_settings(settings) -> WebSource`` and ``check_settings(settings)`` (the same errors,
nothing built that runs) and one line in :data:`WEB_PROVIDERS`; an LLM
protocol is one module with a class that has ``from_settings(settings) -> LLMBackend``
and one line in :data:`LLM_PROTOCOLS`; a store backend is one module with an opener
``(settings, *, create, handles) -> HybridStore`` and one entry in :data:`STORE_BACKENDS`,
which also declares the backend's own settings (:class:`BackendSetting`).
Everything else follows from the entry: the accepted values of ``web_provider`` /
``llm_protocol`` / ``store``, the provider's key setting (``<name>_api_key``,
``GCITE_<NAME>_API_KEY``, ``[web.<name>] api_key``, then the entry's conventional
variables), a store backend's settings (its key, ``GCITE_<KEY>``, ``[knowledge] <name>``)
and the factories (:func:`gcite.web.make_web_source`,
:func:`gcite.generate.factory.make_backend`, :func:`gcite.knowledge.store.open_store`).
``tests/test_registry.py`` builds every web provider and LLM protocol and
``tests/knowledge/test_store_contract.py`` runs every store backend through its contract.

Entries name their class as ``"package.module:Class"`` and are imported when used, so
:mod:`gcite.config` reads the registry without importing any backend (no import cycle).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WebProvider:
    """One web search provider.

    ``name``: the ``web_provider`` value. ``source``: ``"module:Class"`` of its
    :class:`~gcite.web.WebSource`, whose ``from_settings(settings, *, retry, handles)``
    builds it (``handles``: the owner's open stores and embedders, for a source that
    searches a store) and whose ``check_settings(settings)`` raises the same
    ``ConfigError`` without building anything that runs (``gcite serve``'s start-up check,
    :func:`gcite.web.check_web_source`).
    ``key_env``: the provider's own environment variables for its API key, read in this
    order after the ``<name>_api_key`` setting. ``needs_key``: False for a provider
    without an API key (it has no ``<name>_api_key`` setting).
    """

    name: str
    source: str
    key_env: tuple[str, ...] = ()
    needs_key: bool = True


WEB_PROVIDERS: Mapping[str, WebProvider] = {
    p.name: p
    for p in (
        WebProvider("offline", "gcite.web.offline:OfflineWebSource", needs_key=False),
        WebProvider("bocha", "gcite.web.bocha:BochaWebSearch", ("BOCHA_API_KEY",)),
        WebProvider("tavily", "gcite.web.tavily:TavilySearch", ("TAVILY_API_KEY",)),
        WebProvider("baidu", "gcite.web.baidu:BaiduSearch", ("BAIDU_API_KEY", "QIANFAN_API_KEY")),
    )
}
"""Web search providers by ``web_provider`` name (``"none"``: no web branch)."""

LLM_PROTOCOLS: Mapping[str, str] = {
    "openai": "gcite.generate.openai_backend:OpenAIBackend",
}
"""LLM protocols by ``llm_protocol`` name: ``"module:Class"`` of an
:class:`~gcite.generate.backends.LLMBackend` with ``from_settings(settings)``, used when
``llm_base_url`` is set (without it the offline extractive backend answers)."""


@dataclass(frozen=True)
class BackendSetting:
    """One setting a store backend declares for itself.

    ``key``: its config key (the top-level file key, ``GCITE_<KEY>``, the flag name);
    ``name``: its key in the file's ``[knowledge]`` table and in the backend's table of
    :attr:`gcite.config.KnowledgeSettings.backends`; ``default``: its value when not
    configured (its type, ``str``, ``int``, ``float`` or ``bool``, is the setting's).
    """

    key: str
    name: str
    default: str | int | float | bool = ""


@dataclass(frozen=True)
class StoreBackend:
    """One knowledge-store backend.

    ``name``: the ``store`` value. ``opener``: ``"module:function"`` of its opener,
    ``(settings, *, create: bool, handles: StoreHandles) -> HybridStore``, opening through
    :meth:`gcite.knowledge.store.StoreHandles.open` (one handle per knowledge base and
    owner); it raises ``StoreError``. ``settings``: the settings of its own (a
    connection URL...), read as ``settings.knowledge.setting(name, setting_name)``.
    """

    name: str
    opener: str
    settings: tuple[BackendSetting, ...] = ()


STORE_BACKENDS: Mapping[str, StoreBackend] = {
    b.name: b
    for b in (
        # Qdrant Edge in the data dir, or a Qdrant server when ``qdrant_url`` is set
        StoreBackend("qdrant", "gcite.knowledge.store:open_qdrant"),
        # PostgreSQL + pgvector; its database (empty: the service's database_url)
        StoreBackend(
            "pgvector",
            "gcite.knowledge.store:open_pgvector",
            (BackendSetting("knowledge_database_url", "database_url"),),
        ),
    )
}
"""Knowledge-store backends by ``store`` name."""


def load(reference: str) -> Any:
    """The object a ``"package.module:name"`` reference names (imports the module).

    Raises :class:`ImportError` / :class:`AttributeError` for a broken entry (a bug of
    the registry, caught by its test).
    """
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "LLM_PROTOCOLS",
    "STORE_BACKENDS",
    "WEB_PROVIDERS",
    "BackendSetting",
    "StoreBackend",
    "WebProvider",
    "load",
]
