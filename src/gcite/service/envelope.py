"""Typed events -> Dify Service API JSON objects (chatflow / ``advanced-chat`` shapes).

Source: ``../shared/reference/dify-protocol.md`` §1.3 (envelope ``event``, ``task_id``,
``message_id``, ``conversation_id``, ``created_at`` on every event, no ``task_id`` on
``error``), §1.4-§1.6 (per-event fields), §1.9 (blocking response) and §1.10
(``text_chunk`` with ``data.text``). Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gcite.dify.service_api import resource_items
from gcite.service.events import (
    AnswerDelta,
    ErrorEvent,
    Event,
    MessageEnd,
    NodeFinished,
    NodeStarted,
    WorkflowFinished,
    WorkflowStarted,
)

WORKFLOW_ID = "gcite-chatflow"


@dataclass(frozen=True)
class Envelope:
    """The ids every event of one message carries.

    ``created_at``: the message creation time, int seconds (same on every event).
    ``stream_event``: ``"message"`` (Dify chatflow) or ``"text_chunk"`` (the seeds' §2.3).
    """

    task_id: str
    message_id: str
    conversation_id: str
    created_at: int
    workflow_run_id: str
    stream_event: str = "message"

    def head(self, event: str) -> dict[str, Any]:
        """The envelope fields for ``event`` (``task_id`` included)."""
        return {
            "event": event,
            "task_id": self.task_id,
            "message_id": self.message_id,
            "conversation_id": self.conversation_id,
            "created_at": self.created_at,
        }


def _node_common(ev: NodeStarted | NodeFinished) -> dict[str, Any]:
    return {
        "id": ev.execution_id,
        "node_id": ev.node_id,
        "node_type": ev.node_type,
        "title": ev.title,
        "index": ev.index,
        "predecessor_node_id": ev.predecessor_node_id,
        "inputs": ev.inputs,
        "inputs_truncated": False,
        "created_at": ev.created_at,
        "iteration_id": None,
        "loop_id": None,
    }


def to_wire(event: Event, env: Envelope) -> dict[str, Any]:
    """One event as the Dify JSON object sent in a ``data:`` frame."""
    if isinstance(event, AnswerDelta):
        selector = [event.node_id, "text"]
        if env.stream_event == "text_chunk":
            out = env.head("text_chunk")
            out["workflow_run_id"] = env.workflow_run_id
            out["data"] = {"text": event.text, "from_variable_selector": selector}
            return out
        out = env.head("message")
        out.update({"id": env.message_id, "answer": event.text, "from_variable_selector": selector})
        return out
    if isinstance(event, NodeStarted):
        out = env.head("node_started")
        data = _node_common(event)
        data["extras"] = {}
        out.update({"workflow_run_id": event.workflow_run_id, "data": data})
        return out
    if isinstance(event, NodeFinished):
        out = env.head("node_finished")
        data = _node_common(event)
        data.update(
            {
                "process_data": event.process_data,
                "process_data_truncated": False,
                "outputs": event.outputs,
                "outputs_truncated": False,
                "status": event.status,
                "error": event.error,
                "elapsed_time": round(event.elapsed_time, 4),
                "execution_metadata": event.execution_metadata,
                "finished_at": event.finished_at,
                "files": [],
            }
        )
        out.update({"workflow_run_id": event.workflow_run_id, "data": data})
        return out
    if isinstance(event, WorkflowStarted):
        out = env.head("workflow_started")
        out["workflow_run_id"] = event.workflow_run_id
        out["data"] = {
            "id": event.workflow_run_id,
            "workflow_id": WORKFLOW_ID,
            "inputs": event.inputs,
            "created_at": event.created_at,
        }
        return out
    if isinstance(event, MessageEnd):
        out = env.head("message_end")
        out.update(
            {"id": env.message_id, "metadata": spec_metadata(env, event.metadata), "files": []}
        )
        return out
    if isinstance(event, WorkflowFinished):
        out = env.head("workflow_finished")
        out["workflow_run_id"] = event.workflow_run_id
        out["data"] = {
            "id": event.workflow_run_id,
            "workflow_id": WORKFLOW_ID,
            "status": event.status,
            "outputs": event.outputs,
            "error": event.error,
            "elapsed_time": round(event.elapsed_time, 4),
            "total_tokens": event.total_tokens,
            "total_steps": event.total_steps,
            "created_by": {},
            "created_at": event.created_at,
            "finished_at": event.finished_at,
            "exceptions_count": 0,
            "files": [],
        }
        return out
    if isinstance(event, ErrorEvent):
        return {
            "event": "error",
            "message_id": env.message_id,
            "conversation_id": env.conversation_id,
            "created_at": env.created_at,
            "code": event.code,
            "status": event.status,
            "message": event.message,
        }
    raise TypeError(f"not an event: {event!r}")


def spec_metadata(env: Envelope, metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with its ``retriever_resources`` as the spec's ``RetrieverResource``
    items of this message (:func:`gcite.dify.service_api.resource_items`)."""
    resources = metadata.get("retriever_resources")
    if not isinstance(resources, list):
        return metadata
    items = resource_items(resources, message_id=env.message_id, created_at=env.created_at)
    return {**metadata, "retriever_resources": items}


def blocking_response(env: Envelope, answer: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The Dify blocking-mode chat response (§1.9): the whole answer plus metadata."""
    return {
        "event": "message",
        "task_id": env.task_id,
        "id": env.message_id,
        "message_id": env.message_id,
        "conversation_id": env.conversation_id,
        "mode": "advanced-chat",
        "answer": answer,
        "metadata": spec_metadata(env, metadata),
        "created_at": env.created_at,
    }


__all__ = ["WORKFLOW_ID", "Envelope", "blocking_response", "spec_metadata", "to_wire"]
