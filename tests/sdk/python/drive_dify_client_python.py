"""Play the scenario with PyPI ``dify-client-python`` (strict pydantic models).

Run by ``tests/sdk/test_python_sdks.py`` in ``.venv-sdk/dify-client-python``. Chat,
stop, feedback, suggested questions and upload go through the SDK's typed calls
(their response models validate what gcite sends); the SDK has no typed call for
parameters, conversations and messages, so those use its generic ``Client.request``
(its auth, its error mapping).
"""

from __future__ import annotations

import io
import os
from typing import Any

from dify_client import Client as DifyClient
from dify_client import models
from scenario import Client, play


class Driver(Client):
    def __init__(self) -> None:
        self.sdk = DifyClient(
            api_key=os.environ["GCITE_SDK_KEY"], api_base=os.environ["GCITE_SDK_URL"]
        )

    def _get(self, path: str, **params: Any) -> Any:
        response = self.sdk.request(self.sdk._prepare_url(path), "GET", params=params, timeout=30)
        return response.json()

    def parameters(self, user: str) -> dict[str, Any]:
        data: dict[str, Any] = self._get("/parameters", user=user)
        return data

    def _request(
        self, query: str, user: str, mode: str, conversation_id: str
    ) -> models.ChatRequest:
        return models.ChatRequest(
            query=query,
            inputs={},
            response_mode=mode,
            user=user,
            conversation_id=conversation_id,
        )

    def chat_stream(self, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
        request = self._request(query, user, models.ResponseMode.STREAMING, conversation_id)
        out: dict[str, Any] = {"events": [], "answer": "", "typed": True}
        for event in self.sdk.chat_messages(request, timeout=60):
            name = str(event.event)
            out["events"].append(name)
            if isinstance(event, models.MessageStreamResponse):
                out["answer"] += event.answer
            if isinstance(event, models.MessageEndStreamResponse):
                assert event.metadata is not None
                out["retriever_resources"] = [
                    r.model_dump() for r in event.metadata.retriever_resources
                ]
                out["usage"] = event.metadata.usage.model_dump()
                out["message_id"] = event.message_id
                out["conversation_id"] = event.conversation_id
            out["task_id"] = out.get("task_id") or event.task_id
        return out

    def chat_blocking(self, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
        request = self._request(query, user, models.ResponseMode.BLOCKING, conversation_id)
        response = self.sdk.chat_messages(request, timeout=60)
        assert isinstance(response, models.ChatResponse)
        return {
            "typed": True,
            "answer": response.answer,
            "message_id": response.message_id,
            "conversation_id": getattr(response, "conversation_id", None),
            "mode": str(response.mode),
            "retriever_resources": [r.model_dump() for r in response.metadata.retriever_resources],
            "usage": response.metadata.usage.model_dump(),
        }

    def chat_and_stop(self, query: str, user: str) -> dict[str, Any]:
        request = self._request(query, user, models.ResponseMode.STREAMING, "")
        out: dict[str, Any] = {"events": []}
        for event in self.sdk.chat_messages(request, timeout=60):
            out["events"].append(str(event.event))
            if isinstance(event, models.MessageStreamResponse) and "stop" not in out:
                out["conversation_id"] = event.conversation_id
                stopped = self.sdk.stop_chat_messages(
                    event.task_id or "", models.StopRequest(user=user)
                )
                out["stop"] = stopped.model_dump()
        return out

    def conversations(self, user: str) -> dict[str, Any]:
        data: dict[str, Any] = self._get("/conversations", user=user, limit=100)
        return data

    def messages(self, user: str, conversation_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._get("/messages", user=user, conversation_id=conversation_id)
        return data

    def feedback(self, message_id: str, rating: str, user: str) -> dict[str, Any]:
        request = models.FeedbackRequest(rating=rating, user=user, content="引用准确")
        return self.sdk.feedback_messages(message_id, request).model_dump()

    def suggested(self, message_id: str, user: str) -> dict[str, Any]:
        return self.sdk.suggest_messages(
            message_id, models.ChatSuggestRequest(user=user)
        ).model_dump()

    def rename(
        self, conversation_id: str, name: str, user: str, auto_generate: bool = False
    ) -> dict[str, Any]:
        body = {"name": name, "user": user, "auto_generate": auto_generate}
        url = self.sdk._prepare_url(f"/conversations/{conversation_id}/name")
        data: dict[str, Any] = self.sdk.request(url, "POST", json=body).json()
        return data

    def delete(self, conversation_id: str, user: str) -> dict[str, Any]:
        url = self.sdk._prepare_url(f"/conversations/{conversation_id}")
        response = self.sdk.request(url, "DELETE", json={"user": user})
        return {"status": response.status_code, "body": response.text}

    def upload(self, user: str) -> dict[str, Any]:
        file = ("notes.txt", io.BytesIO("访客须知".encode()), "text/plain")
        try:
            result = self.sdk.upload_files(file, models.UploadFileRequest(user=user))
        except Exception as exc:  # the SDK maps Dify's error body to an exception
            return {
                "raised": type(exc).__name__,
                "status": getattr(exc, "status", None),
                "code": getattr(exc, "code", None),
                "message": getattr(exc, "message", str(exc)),
            }
        return {"raised": None, "result": result.model_dump()}


if __name__ == "__main__":
    play(Driver())
