"""Dify's error answers: ``{"code", "message", "status"}`` with the HTTP status.

Codes used (dify-protocol.md §1.7): 400 ``invalid_param``, 401 ``unauthorized``, 403
``forbidden``, 404 ``not_found``, 409 ``dataset_name_duplicate``, 413
``request_too_large``, 499 ``client_disconnected``, 500 ``internal_server_error``, 503
``store_unavailable``; a failed run answers its own code (``completion_request_error``).

:func:`api_error` is the one status table for gcite's own exceptions: 4xx when the
caller asked for something wrong, 5xx when we failed (a busy or unreachable knowledge
store, an embedding endpoint that is down, a bad server configuration). The app installs
it as the handler of every :class:`~gcite.errors.GciteError`, so handlers just raise.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse

from gcite.errors import ConfigError, FilterError, GciteError, StoreError
from gcite.knowledge.admin import ManageError


class ApiError(Exception):
    """An error answered as Dify's JSON error object with an HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> JSONResponse:
        """This error as Dify's JSON body."""
        return error_response(self.status, self.code, self.message)


_TABLE: tuple[tuple[type[GciteError], int, str, str], ...] = (
    (FilterError, 400, "invalid_param", ""),
    (StoreError, 503, "store_unavailable", "知识库暂时不可用: "),
    (ConfigError, 500, "internal_server_error", "服务配置错误: "),
)
"""``(exception type, status, code, message prefix)``, first match wins; a
:class:`ManageError` carries its own status and code; any other GciteError is a 500 with
:data:`INTERNAL_MESSAGE` (its own message may name internal hosts: it goes to the log)."""

INTERNAL_MESSAGE = "Internal Server Error, please contact support."


def api_error(exc: GciteError) -> ApiError:
    """The HTTP answer of one of gcite's exceptions (module docstring)."""
    if isinstance(exc, ManageError):
        return ApiError(exc.status, "not_found" if exc.status == 404 else exc.code, str(exc))
    for kind, status, code, prefix in _TABLE:
        if isinstance(exc, kind):
            return ApiError(status, code, f"{prefix}{exc}")
    return ApiError(500, "internal_server_error", INTERNAL_MESSAGE)


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """Dify's error body: ``{"code", "message", "status"}``."""
    return JSONResponse({"code": code, "message": message, "status": status}, status_code=status)


__all__ = ["INTERNAL_MESSAGE", "ApiError", "api_error", "error_response"]
