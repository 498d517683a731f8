"""Test kit for gcite and for third-party implementations of its seams.

What is here (none of it imports pytest except the contract suites):

- contract suites, as mixin classes for pytest (pytest-asyncio in auto mode for the
  async ones): :mod:`gcite.testing.store_contract` (``KnowledgeStore``),
  :mod:`gcite.testing.web_contract` (``WebSource``), :mod:`gcite.testing.llm_contract`
  (``LLMBackend``), :mod:`gcite.testing.admin_contract` (``KnowledgeAdmin``); each
  module's docstring names the fixtures a subclass provides;
- :mod:`gcite.testing.corpus`: the documents the store contract searches;
- :class:`MemoryStore` (:mod:`gcite.testing.memory`): an in-memory ``KnowledgeStore``
  (lexical scoring, no embeddings) for tests of what sits above the store;
- :func:`live_service`, :func:`free_port` and :func:`busy_port` (:mod:`gcite.testing.server`):
  a real ASGI app under uvicorn on a free loopback port, a port, a port held taken;
- :mod:`gcite.testing.indexing`: waiting for a Knowledge API batch to be indexed
  (``indexing-status`` polled until ``completed`` or ``error``, a hang guard only);
- :mod:`gcite.testing.clock`: :class:`ManualClock`, a clock the test moves, and
  ``until``, a wait for a condition bounded by a hang guard;
- :mod:`gcite.testing.archdoc`: the module tree of ``docs/architecture.md``, generated
  from the module docstrings.

Running a contract suite against your own implementation (``pip install gcite[testing]``)::

    # test_my_store.py
    import pytest
    from gcite.testing.corpus import DATASET, MANIFEST, write_mixed
    from gcite.testing.store_contract import KnowledgeStoreContract

    @pytest.fixture(scope="module")
    def my_kb(tmp_path_factory):
        docs = tmp_path_factory.mktemp("kb")
        write_mixed(docs)
        return build_my_store(docs, manifest=MANIFEST, dataset=DATASET)  # yours

    class TestMyStore(KnowledgeStoreContract):
        @pytest.fixture
        def store(self, my_kb):
            with open_my_store(my_kb) as store:
                yield store

        @pytest.fixture
        def reopen(self, my_kb):
            return lambda: open_my_store(my_kb)

then ``pytest test_my_store.py``. docs/testing.md has the same for web sources, model
backends and knowledge admins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gcite.testing.memory import MemoryStore
    from gcite.testing.server import busy_port, free_port, live_service

_LAZY = {
    "MemoryStore": "gcite.testing.memory",
    "busy_port": "gcite.testing.server",
    "free_port": "gcite.testing.server",
    "live_service": "gcite.testing.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gcite.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["MemoryStore", "busy_port", "free_port", "live_service"]
