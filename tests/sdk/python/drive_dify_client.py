"""Play the scenario with PyPI ``dify-client``, Dify's official Python SDK (requests).

Run by ``tests/sdk/test_python_sdks.py`` in ``.venv-sdk/dify-client``. The SDK returns
``requests`` responses; streams are read line by line as its README shows. It has no
call for stop, delete and suggested questions: those use its ``_send_request``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import requests
from dify_client import ChatClient
from scenario import Client, play


def sse_events(response: requests.Response) -> Iterator[dict[str, Any]]:
    """``data:`` frames as dicts; a bare ``event: ping`` gives ``{"event": "ping"}``."""
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data:"):
            yield json.loads(line[5:].strip())
        elif line.startswith("event:"):
            yield {"event": line[6:].strip()}


class Driver(Client):
    def __init__(self) -> None:
        self.sdk = ChatClient(os.environ["GCITE_SDK_KEY"])
        self.sdk.base_url = os.environ["GCITE_SDK_URL"]

    @staticmethod
    def _json(response: requests.Response) -> dict[str, Any]:
        if response.status_code >= 400:  # the README's raise_for_status, with Dify's body
            raise requests.HTTPError(f"{response.status_code} {response.text}")
        data: dict[str, Any] = response.json()
        return data

    def parameters(self, user: str) -> dict[str, Any]:
        return self._json(self.sdk.get_application_parameters(user))

    def chat_stream(self, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
        response = self.sdk.create_chat_message(
            {}, query, user, response_mode="streaming", conversation_id=conversation_id or None
        )
        response.raise_for_status()
        out: dict[str, Any] = {"events": [], "answer": ""}
        for event in sse_events(response):
            out["events"].append(event["event"])
            if event["event"] == "message":
                out["answer"] += event["answer"]
            if event["event"] == "message_end":
                out["retriever_resources"] = event["metadata"]["retriever_resources"]
                out["usage"] = event["metadata"]["usage"]
                out["message_id"] = event["message_id"]
                out["conversation_id"] = event["conversation_id"]
            out["task_id"] = out.get("task_id") or event.get("task_id")
        return out

    def chat_blocking(self, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
        data = self._json(
            self.sdk.create_chat_message(
                {}, query, user, response_mode="blocking", conversation_id=conversation_id or None
            )
        )
        return {
            "answer": data["answer"],
            "message_id": data["message_id"],
            "conversation_id": data["conversation_id"],
            "mode": data["mode"],
            "retriever_resources": data["metadata"]["retriever_resources"],
            "usage": data["metadata"]["usage"],
        }

    def chat_and_stop(self, query: str, user: str) -> dict[str, Any]:
        response = self.sdk.create_chat_message({}, query, user, response_mode="streaming")
        response.raise_for_status()
        out: dict[str, Any] = {"events": []}
        for event in sse_events(response):
            out["events"].append(event["event"])
            if event["event"] == "message" and "stop" not in out:
                out["conversation_id"] = event["conversation_id"]
                stop = self.sdk._send_request(
                    "POST", f"/chat-messages/{event['task_id']}/stop", {"user": user}
                )
                out["stop"] = self._json(stop)
        return out

    def conversations(self, user: str) -> dict[str, Any]:
        return self._json(self.sdk.get_conversations(user, limit=100))

    def messages(self, user: str, conversation_id: str) -> dict[str, Any]:
        return self._json(self.sdk.get_conversation_messages(user, conversation_id))

    def feedback(self, message_id: str, rating: str, user: str) -> dict[str, Any]:
        return self._json(self.sdk.message_feedback(message_id, rating, user))

    def suggested(self, message_id: str, user: str) -> dict[str, Any]:
        response = self.sdk._send_request(
            "GET", f"/messages/{message_id}/suggested", params={"user": user}
        )
        return self._json(response)

    def rename(
        self, conversation_id: str, name: str, user: str, auto_generate: bool = False
    ) -> dict[str, Any]:
        if not auto_generate:
            return self._json(self.sdk.rename_conversation(conversation_id, name, user))
        body = {"name": name, "user": user, "auto_generate": True}
        return self._json(
            self.sdk._send_request("POST", f"/conversations/{conversation_id}/name", body)
        )

    def delete(self, conversation_id: str, user: str) -> dict[str, Any]:
        response = self.sdk._send_request(
            "DELETE", f"/conversations/{conversation_id}", {"user": user}
        )
        response.raise_for_status()
        return {"status": response.status_code, "body": response.text}

    def upload(self, user: str) -> dict[str, Any]:
        files = {"file": ("notes.txt", "访客须知".encode(), "text/plain")}
        response = self.sdk.file_upload(user, files)
        return {"status": response.status_code, "body": response.json()}


if __name__ == "__main__":
    play(Driver())
