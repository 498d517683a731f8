"""Typed FastAPI dependencies on what the app's lifespan owns (``request.state``).

Route handlers are module-level functions that declare what they need:

- :data:`CallerDep` - the caller of the request (an ``[[app_keys]]`` key and its roles;
  401 ``unauthorized`` otherwise, :func:`gcite.service.auth.authenticate`);
- :data:`ConversationsDep` - the conversation store;
- :data:`ResourcesDep` - the service's shared :class:`~gcite.service.resources.Resources`.

``create_app`` sets ``app.state.settings``; its lifespan state holds ``resources``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gcite.config import Settings
from gcite.service.auth import AuthError, Caller, authenticate
from gcite.service.errors import ApiError
from gcite.service.resources import Resources
from gcite.service.store import ConversationStore


def settings_of(request: Request) -> Settings:
    """The app's settings (their key tables follow the config file)."""
    settings: Settings = request.app.state.settings
    return settings


def resources_of(request: Request) -> Resources:
    """The app's shared resources."""
    resources: Resources = request.state.resources
    return resources


def conversations_of(resources: Annotated[Resources, Depends(resources_of)]) -> ConversationStore:
    """The app's conversation store."""
    return resources.conversations


def caller_of(request: Request) -> Caller:
    """The caller of ``request``; :class:`~gcite.service.errors.ApiError` 401 otherwise."""
    try:
        return authenticate(settings_of(request), request.headers.get("authorization"))
    except AuthError as exc:
        raise ApiError(401, "unauthorized", exc.message) from exc


CallerDep = Annotated[Caller, Depends(caller_of)]
ConversationsDep = Annotated[ConversationStore, Depends(conversations_of)]
ResourcesDep = Annotated[Resources, Depends(resources_of)]

__all__ = [
    "CallerDep",
    "ConversationsDep",
    "ResourcesDep",
    "caller_of",
    "conversations_of",
    "resources_of",
    "settings_of",
]
