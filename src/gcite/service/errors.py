"""Dify's error answers: ``{"code", "message", "status"}`` with the HTTP status.

Codes used (dify-protocol.md §1.7): 400 ``invalid_param``, 401 ``unauthorized``, 404
``not_found``, 413 ``request_too_large``, 499 ``client_disconnected``, 500
``internal_server_error``; a failed run answers its own code (``completion_request_error``).
"""

from __future__ import annotations

from fastapi.responses import JSONResponse


class ApiError(Exception):
    """An error answered as Dify's JSON error object with an HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """Dify's error body: ``{"code", "message", "status"}``."""
    return JSONResponse({"code": code, "message": message, "status": status}, status_code=status)


__all__ = ["ApiError", "error_response"]
