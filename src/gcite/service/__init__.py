"""The chat service: the G-Cite chatflow behind Dify's Service API (FastAPI + uvicorn).

``create_app(settings) -> FastAPI`` is the entry point (``gcite serve`` runs it).
Modules: ``events`` (typed events), ``pipeline`` (the chatflow), ``envelope`` / ``sse``
(Dify wire format), ``store`` (conversations, SQLAlchemy), ``auth`` (app keys -> roles),
``app`` (endpoints); ``retrieval`` (External Knowledge API) and ``pages`` (H5 page).
Imported lazily so that ``gcite.service.retrieval`` does not pull in the whole app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gcite.service.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from gcite.service.app import create_app

        return create_app
    raise AttributeError(name)
