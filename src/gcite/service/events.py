"""The chatflow's typed event model: what the pipeline yields, before any wire format.

One event class per Dify chatflow stream event the service emits (Dify Service API,
``../shared/reference/dify-protocol.md`` §1.4): ``workflow_started``, ``node_started``,
``node_finished``, answer deltas (``message`` or ``text_chunk`` on the wire),
``message_end``, ``workflow_finished`` and ``error``. The pipeline yields these; the
service (:mod:`gcite.service.envelope`), the blocking mode and tests only serialise or
read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NODE_KNOWLEDGE = "knowledge-retrieval"
NODE_TOOL = "tool"
NODE_CODE = "code"
NODE_LLM = "llm"


@dataclass(frozen=True)
class WorkflowStarted:
    """The chatflow run began. ``inputs`` echo the request inputs plus ``sys.query``."""

    workflow_run_id: str
    inputs: dict[str, Any]
    created_at: int


@dataclass(frozen=True)
class NodeStarted:
    """A node began. ``node_type``: ``knowledge-retrieval`` | ``tool`` | ``code`` | ``llm``."""

    workflow_run_id: str
    execution_id: str
    node_id: str
    node_type: str
    title: str
    index: int
    predecessor_node_id: str | None
    inputs: dict[str, Any]
    created_at: int


@dataclass(frozen=True)
class NodeFinished:
    """A node ended. ``status``: ``succeeded`` | ``failed`` | ``stopped``; ``error`` when failed.

    ``outputs`` per node (Dify shapes): knowledge-retrieval ``{"result": [...]}``; tool
    ``{"text": "", "files": [], "json": [raw payload]}``; code ``{"formatted_chunks",
    "chunk_count", "chunk_metadata"}`` (seed §2.3); llm ``{"text": answer}``.
    ``elapsed_time`` in seconds.
    """

    workflow_run_id: str
    execution_id: str
    node_id: str
    node_type: str
    title: str
    index: int
    predecessor_node_id: str | None
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    status: str
    error: str | None
    elapsed_time: float
    created_at: int
    finished_at: int
    process_data: dict[str, Any] | None = None
    execution_metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerDelta:
    """A piece of answer text, ``[C:N]`` markers included (``message.answer`` / ``text_chunk``)."""

    text: str
    node_id: str = "llm"


@dataclass(frozen=True)
class MessageEnd:
    """The answer is complete (or stopped). ``metadata``: ``usage``, ``retriever_resources``
    (only the chunks the answer cited, in display order), ``gcite`` (backend, cited/invalid ids).
    """

    metadata: dict[str, Any]


@dataclass(frozen=True)
class WorkflowFinished:
    """The run ended. ``status``: ``succeeded`` | ``failed`` | ``stopped``."""

    workflow_run_id: str
    status: str
    outputs: dict[str, Any] | None
    error: str | None
    elapsed_time: float
    total_tokens: int
    total_steps: int
    created_at: int
    finished_at: int


@dataclass(frozen=True)
class ErrorEvent:
    """A failure after the stream opened (Dify's in-stream ``error``: code, status, message)."""

    code: str
    status: int
    message: str


Event = (
    WorkflowStarted
    | NodeStarted
    | NodeFinished
    | AnswerDelta
    | MessageEnd
    | WorkflowFinished
    | ErrorEvent
)

__all__ = [
    "NODE_CODE",
    "NODE_KNOWLEDGE",
    "NODE_LLM",
    "NODE_TOOL",
    "AnswerDelta",
    "ErrorEvent",
    "Event",
    "MessageEnd",
    "NodeFinished",
    "NodeStarted",
    "WorkflowFinished",
    "WorkflowStarted",
]
