"""The chat service: the G-Cite chatflow (:mod:`gcite.chatflow`) behind Dify's Service API.

``create_app(settings) -> FastAPI`` is the entry point (``gcite serve`` runs it).
Modules: ``app`` (the factory), ``resources`` (what requests share), ``chat`` and
``conversations`` (routers), ``runs`` (the run handle: one streamed run's lifetime),
``store`` + ``migrations`` (conversations, SQLAlchemy + Alembic), ``auth`` (app keys ->
roles), ``retrieval`` + ``retrieval_roles`` (External Knowledge API), ``pages`` (H5 page).
Dify's wire format lives in :mod:`gcite.dify.wire`. Imported lazily so that
``gcite.service.retrieval`` does not pull in the whole app.
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
