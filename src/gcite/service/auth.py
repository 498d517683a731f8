"""Service API keys: ``Authorization: Bearer <app key>`` -> the caller's roles, server side.

Source: Dify Service API auth (``../shared/reference/dify-protocol.md`` §1.1, 401
``unauthorized``); platform design §2.1 (roles filter retrieval before the merge node).
The roles come ONLY from the key's entry in ``settings.app_keys``: request fields
(``inputs.roles``, ``user``) never widen them. With ``settings.service.allow_any_key`` (demo
mode) a listed key still gets its roles, and any other key, or none, is accepted with
no roles (sees only documents without ``access_roles``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from gcite.config import ApiKey, Settings
from gcite.service.errors import ApiError


@dataclass(frozen=True)
class Caller:
    """Who is calling: the matched key (None in demo mode without a listed key), its roles,
    the answer-delta event it wants (``message`` or ``text_chunk``) and its citation style
    (``markers`` or ``numbers``: :mod:`gcite.stream.styles`; ``markers`` without a key)."""

    key: ApiKey | None
    roles: tuple[str, ...]
    stream_event: str
    citation_style: str = "markers"

    @property
    def app_id(self) -> str:
        """A stable, non-secret id of the key (``anonymous`` without a listed key).

        Conversations are scoped by app id and ``user``, as Dify scopes them by app and
        user: a conversation answered under one key (and its roles) cannot be read or
        continued with another key.
        """
        if self.key is None:
            return "anonymous"
        return hashlib.sha256(self.key.key.encode()).hexdigest()[:16]

    def owner(self, user: str) -> str:
        """The stored owner of ``user``'s conversations under this key."""
        return f"{self.app_id}/{user}"


class AuthError(Exception):
    """Missing or unknown key; ``message`` is Dify's wording."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def find_key(keys: Iterable[ApiKey], token: str) -> ApiKey | None:
    """The configured key equal to ``token``, or None: the one key matcher of the service.

    Constant-time: every key is compared whole (``hmac.compare_digest`` on bytes), and the
    loop does not stop at a match, so the time does not tell which key, or how much of
    one, matched."""
    found: ApiKey | None = None
    secret = token.encode()
    for key in keys:
        if hmac.compare_digest(key.key.encode(), secret):
            found = key
    return found


def authorise_admin(settings: Settings, header: str | None) -> ApiKey:
    """The ``[[admin_keys]]`` entry of an ``Authorization`` header (the Knowledge API).

    Raises :class:`~gcite.service.errors.ApiError` 401 without a header or for an unknown
    key, 403 for a chat or retrieval key (``allow_any_key`` opens nothing here)."""
    token = bearer_token(header)
    if token is None:
        raise ApiError(
            401, "unauthorized", "Authorization header must be provided and start with 'Bearer'"
        )
    key = find_key(settings.admin_keys, token)
    if key is not None:
        return key
    if find_key([*settings.app_keys, *settings.retrieval_keys], token) is not None:
        raise ApiError(403, "forbidden", "这个密钥不能管理知识库（需要 admin_keys 中的管理密钥）")
    raise ApiError(401, "unauthorized", "Access token is invalid")


def authenticate(settings: Settings, header: str | None) -> Caller:
    """Resolve the caller of one request. Raises :class:`AuthError` (-> HTTP 401)."""
    token = bearer_token(header)
    key = find_key(settings.app_keys, token) if token else None
    if key is not None:
        return Caller(
            key=key,
            roles=tuple(key.roles),
            stream_event=key.stream_event,
            citation_style=key.citation_style,
        )
    if settings.service.allow_any_key:
        return Caller(key=None, roles=(), stream_event=settings.service.stream_event)
    if token is None:
        raise AuthError("Authorization header must be provided and start with 'Bearer'")
    raise AuthError("Access token is invalid")


__all__ = ["AuthError", "Caller", "authenticate", "authorise_admin", "bearer_token", "find_key"]
