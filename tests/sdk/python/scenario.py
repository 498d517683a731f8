"""The conversation every Dify client driver plays against gcite (run inside the SDK's venv).

A driver implements :class:`Client` with one third-party SDK and calls :func:`play`.
Each step prints one JSON line ``{"step", "ok", "error", "data"}`` on stdout; a step
that raises is reported (``ok: false``, ``error: "Type: message"``) and the next
steps still run. The pytest side (``tests/sdk/test_python_sdks.py``) asserts on the
``data`` of each step. Standard library only: it runs under every SDK's own Python.

Environment: ``GCITE_SDK_URL`` (``http://127.0.0.1:PORT/v1``), ``GCITE_SDK_KEY``,
``GCITE_SDK_USER``. The questions are the ones ``tests/sdk/conftest.py`` scripts the
model stand-in for: ``CITE_QUERY`` gets an answer citing a knowledge-base chunk and
a web chunk, ``SLOW_QUERY`` a slow one (to stop it).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

CITE_QUERY = "访客登记在哪里办理？"
FOLLOW_QUERY = "临时门禁卡什么时候归还？"
SLOW_QUERY = "请慢慢介绍访客停车规定"


class Client:
    """What a driver provides; every method returns plain JSON-able data."""

    def parameters(self, user: str) -> dict[str, Any]:
        raise NotImplementedError

    def chat_stream(self, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
        """Stream an answer: ``events`` (names in order), ``answer``, ``conversation_id``,
        ``message_id``, ``task_id``, ``retriever_resources``, ``usage``."""
        raise NotImplementedError

    def chat_blocking(self, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
        """The blocking answer: ``answer``, ``conversation_id``, ``message_id``,
        ``retriever_resources``, ``usage``."""
        raise NotImplementedError

    def chat_and_stop(self, query: str, user: str) -> dict[str, Any]:
        """Stream, stop at the first answer delta; ``stop`` (the stop response), ``events``
        and ``conversation_id``."""
        raise NotImplementedError

    def conversations(self, user: str) -> dict[str, Any]:
        raise NotImplementedError

    def messages(self, user: str, conversation_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def feedback(self, message_id: str, rating: str, user: str) -> dict[str, Any]:
        raise NotImplementedError

    def suggested(self, message_id: str, user: str) -> dict[str, Any]:
        raise NotImplementedError

    def rename(
        self, conversation_id: str, name: str, user: str, auto_generate: bool = False
    ) -> dict[str, Any]:
        raise NotImplementedError

    def delete(self, conversation_id: str, user: str) -> dict[str, Any]:
        raise NotImplementedError

    def upload(self, user: str) -> dict[str, Any]:
        """Upload a small text file; ``status`` and the error body (or the result)."""
        raise NotImplementedError


def emit(step: str, ok: bool, data: Any = None, error: str = "") -> None:
    line = {"step": step, "ok": ok, "error": error, "data": data}
    sys.stdout.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def run(step: str, action: Callable[[], Any]) -> Any:
    try:
        data = action()
    except NotImplementedError:
        emit(step, False, error="NotImplementedError: the SDK has no call for this")
        return None
    except Exception as exc:  # a step's failure is data for the test
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        emit(step, False, error=f"{type(exc).__name__}: {detail[:2000]}")
        return None
    emit(step, True, data)
    return data


def play(client: Client) -> None:
    user = os.environ.get("GCITE_SDK_USER", "sdk-user")
    run("parameters", lambda: client.parameters(user))
    first = run("chat_stream", lambda: client.chat_stream(CITE_QUERY, user))
    conversation = (first or {}).get("conversation_id", "")
    message = (first or {}).get("message_id", "")
    run("follow_up", lambda: client.chat_stream(FOLLOW_QUERY, user, conversation))
    run("chat_blocking", lambda: client.chat_blocking(CITE_QUERY, user))
    stopped = run("stop", lambda: client.chat_and_stop(SLOW_QUERY, user))
    run("conversations", lambda: client.conversations(user))
    run("messages", lambda: client.messages(user, conversation))
    run("feedback", lambda: client.feedback(message, "like", user))
    run("messages_after_feedback", lambda: client.messages(user, conversation))
    run("suggested", lambda: client.suggested(message, user))
    run("rename", lambda: client.rename(conversation, "访客问答", user))
    run("rename_auto", lambda: client.rename(conversation, "", user, auto_generate=True))
    other = (stopped or {}).get("conversation_id", "")
    run("delete", lambda: client.delete(other, user))
    run("conversations_after_delete", lambda: client.conversations(user))
    run("upload", lambda: client.upload(user))
