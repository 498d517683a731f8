"""Dify's wire: the ONLY place that knows how the chatflow looks to a Dify client.

Chatflow events (:mod:`gcite.chatflow.events`) become Dify Service API JSON objects
(chatflow / ``advanced-chat`` shapes) and SSE frames here, and nowhere else: execution
ids, node indexes and predecessors, node ids / types / titles, int timestamps,
``retriever_resources``, ``usage``, the blocking body and the ``data:`` / ping frames.

Sources: ``../shared/reference/dify-protocol.md`` §1.2 (SSE framing: one ``data: <json>``
frame per event, raw UTF-8, a bare ``event: ping`` keep-alive), §1.3 (envelope:
``event``, ``task_id``, ``message_id``, ``conversation_id``, ``created_at`` on every
event, no ``task_id`` on ``error``), §1.4-§1.6 (per-event fields,
``RetrievalSourceMetadata``, ``LLMUsage``), §1.9 (blocking response), §1.10
(``text_chunk`` with ``data.text``).

Stream order (one run)::

    workflow_started
    node_started(knowledge-retrieval) [node_started(tool)] node_finished(...) ...
    node_started(code "Chunk编号") node_finished(code)      chunk_metadata before any text
    node_started(llm) message|text_chunk ... node_finished(llm)
    workflow_finished message_end                          (succeeded, stopped)
    | node_finished(llm, failed) workflow_finished(failed) error

Reasoning (``ReasoningDelta``) travels the way Dify's ``reasoning_format: tagged`` sends
it: inside ``<think>\n…\n</think>`` at the start of the answer text, in the same
``message`` / ``text_chunk`` events (the stream clients show it apart and never count
its markers, ``citation-markers.md`` §4a). Reasoning that comes after the answer text
started cannot go at its start and stays off the wire. ``retriever_resources`` and the
cited ids come from the answer only (``RunSummary``), whatever the reasoning cites.

Citation style (``Envelope.citation_style``, from the app key): ``markers`` sends the answer
as the model wrote it; ``numbers`` renders the markers as display numbers
(:mod:`gcite.stream.styles`) in every answer text a client receives - the ``message`` /
``text_chunk`` deltas (a possible marker is held back until it resolves and the held rest is
sent before the LLM node finishes), the LLM node's ``outputs.text``, ``workflow_finished``'s
``outputs.answer`` and the blocking body's ``answer``; ``retriever_resources`` are numbered
alike in both styles (display order, ``position`` 1..n), so in ``numbers`` the text's numbers
are their positions.

Changing what Dify clients see (event order, field names) means changing this module only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gcite.chatflow.events import (
    AnswerDelta,
    Event,
    NodeFinished,
    NodeName,
    NodeStarted,
    ReasoningDelta,
    RunEnded,
    RunFailed,
    RunSummary,
    UsageReport,
)
from gcite.chatflow.run import new_id
from gcite.dify.service_api import resource_items
from gcite.stream.styles import NumberedText, styled_answer
from gcite.stream.surrogates import fix_surrogates

WORKFLOW_ID = "gcite-chatflow"
START_NODE_ID = "start"
MEDIA_TYPE = "text/event-stream"
PING_FRAME = b"event: ping\n\n"
"""Dify's keep-alive frame, sent every ``settings.service.ping_interval_s`` seconds of silence."""
THINK_OPEN = "<think>\n"
THINK_CLOSE = "\n</think>"
"""Dify's tagged reasoning: opened before the first reasoning delta, closed before the
first answer delta after it (the plugin SDK's ``_wrap_thinking_by_reasoning_content``)."""


@dataclass(frozen=True)
class WireNode:
    """How one chatflow node appears in Dify: ``node_id``, ``node_type``, ``title``."""

    node_id: str
    node_type: str
    title: str


NODES: dict[NodeName, WireNode] = {
    "knowledge_retrieval": WireNode("knowledge_retrieval", "knowledge-retrieval", "知识检索"),
    "web_search": WireNode("web_search", "tool", "Web Search"),
    "merge": WireNode("chunk_numbering", "code", "Chunk编号"),
    "llm": WireNode("llm", "llm", "LLM"),
}

PREDECESSORS: dict[NodeName, tuple[NodeName, ...]] = {
    "knowledge_retrieval": (),
    "web_search": (),
    "merge": ("web_search", "knowledge_retrieval"),
    "llm": ("merge",),
}
"""A node's predecessor is the first of these that started in this run, else ``start``."""

ERROR_CODES: dict[str, tuple[str, int]] = {
    "llm": ("completion_request_error", 400),
    "internal": ("internal_server_error", 500),
}
"""``RunFailed.kind`` -> Dify's in-stream / blocking error ``(code, status)``."""


@dataclass(frozen=True)
class Envelope:
    """The ids every event of one message carries.

    ``created_at``: the message creation time, int seconds (same on every event).
    ``stream_event``: ``"message"`` (Dify chatflow) or ``"text_chunk"`` (the seeds' §2.3).
    ``inputs``, ``user``: echoed in ``workflow_started`` (with ``sys.query``, ...).
    ``citation_style``: ``"markers"`` or ``"numbers"`` (:mod:`gcite.stream.styles`).
    """

    task_id: str
    message_id: str
    conversation_id: str
    created_at: int
    workflow_run_id: str = field(default_factory=new_id)
    stream_event: str = "message"
    user: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    citation_style: str = "markers"

    def head(self, event: str) -> dict[str, Any]:
        """The envelope fields for ``event`` (``task_id`` included)."""
        return {
            "event": event,
            "task_id": self.task_id,
            "message_id": self.message_id,
            "conversation_id": self.conversation_id,
            "created_at": self.created_at,
        }


# --------------------------------------------------------------------------- pieces


def usage_json(usage: UsageReport) -> dict[str, Any]:
    """Dify's ``LLMUsage`` (prices are decimal strings; times in seconds, 3 decimals)."""
    ttft, gen = usage.time_to_first_token, usage.time_to_generate
    return {
        "prompt_tokens": usage.prompt_tokens,
        "prompt_unit_price": "0",
        "prompt_price_unit": "0",
        "prompt_price": "0",
        "completion_tokens": usage.completion_tokens,
        "completion_unit_price": "0",
        "completion_price_unit": "0",
        "completion_price": "0",
        "total_tokens": usage.total_tokens,
        "total_price": "0",
        "currency": "USD",
        "latency": round(usage.latency, 3),
        "time_to_first_token": round(ttft, 3) if ttft is not None else None,
        "time_to_generate": round(gen, 3) if gen is not None else None,
    }


def retriever_resource(chunk: dict[str, Any], position: int) -> dict[str, Any]:
    """One cited UnifiedChunk in Dify's ``RetrievalSourceMetadata`` shape (dify-protocol §1.6).

    Knowledge-base chunks map their dataset/document/segment ids; web chunks use
    ``document_name`` = title, ``document_id`` = url, ``dataset_name`` = site name (or
    host), ``data_source_type`` = ``"web"``. ``doc_metadata`` carries the G-Cite fields
    (``chunk_id``, ``source_type``, ``document_title``, ``display_subtitle``, ``url``, ...).
    """
    content = str(chunk.get("content") or "")
    is_web = chunk.get("source_type") == "web"
    title = str(chunk.get("document_title") or chunk.get("document_name") or "")
    doc_metadata: dict[str, Any] = {
        "chunk_id": str(chunk.get("id") or ""),
        "source_type": "web" if is_web else "rag",
        "document_title": title,
        "display_subtitle": chunk.get("display_subtitle") or "",
        "url": chunk.get("url") or "",
        "source_file_url": chunk.get("source_file_url") or "",
    }
    if is_web:
        doc_metadata.update(
            {
                "site_name": chunk.get("site_name") or "",
                "site_host": chunk.get("site_host") or "",
                "published_date": chunk.get("published_date") or "",
            }
        )
    return {
        "position": position,
        "dataset_id": None if is_web else (chunk.get("dataset_id") or None),
        "dataset_name": (chunk.get("site_name") or chunk.get("site_host") or "")
        if is_web
        else (chunk.get("dataset_name") or ""),
        "document_id": (chunk.get("url") or None) if is_web else (chunk.get("document_id") or None),
        "document_name": title if is_web else (chunk.get("document_name") or title),
        "data_source_type": "web" if is_web else "upload_file",
        "segment_id": None if is_web else (chunk.get("segment_id") or None),
        "retriever_from": "workflow",
        "score": chunk.get("score"),
        "hit_count": None,
        "word_count": len(content),
        "segment_position": None if is_web else chunk.get("segment_position"),
        "index_node_hash": None,
        "content": content,
        "page": None,
        "doc_metadata": doc_metadata,
        "title": title,
        "files": None,
    }


def retriever_resources(
    cited: Sequence[str], chunk_metadata: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``retriever_resources`` for the cited raw ids, in display order, positions 1..n."""
    by_id = {str(c.get("id")): c for c in chunk_metadata}
    out: list[dict[str, Any]] = []
    for raw in cited:
        chunk = by_id.get(raw)
        if chunk is not None:
            out.append(retriever_resource(chunk, len(out) + 1))
    return out


def message_metadata(summary: RunSummary, env: Envelope | None = None) -> dict[str, Any]:
    """``message_end.metadata`` (also the blocking body's): usage, the cited chunks as
    ``retriever_resources`` (only those, display order) and ``gcite`` (backend, ids, and
    ``fallback`` when the offline answerer replaced a model that was down), and
    ``gcite_verification`` - the citation verifier's report (:mod:`gcite.verify`: support
    score and supporting sentence per answer sentence and cited chunk) when there is one;
    Dify clients ignore both keys.

    With ``env`` (on the wire) every resource is the spec's ``RetrieverResource`` of that
    message (:func:`gcite.dify.service_api.resource_item`: ``id``, ``message_id``,
    ``created_at``, no null ids); without it (stored) the items are as built here, and
    the history endpoint completes them the same way.
    """
    gcite: dict[str, Any] = {
        "backend": summary.backend,
        "cited_ids": summary.cited_ids,
        "invalid_ids": summary.invalid_ids,
    }
    if summary.fallback is not None:
        gcite["fallback"] = dict(summary.fallback)
    resources = retriever_resources(summary.cited_ids, summary.chunk_metadata)
    if env is not None:
        resources = resource_items(resources, message_id=env.message_id, created_at=env.created_at)
    metadata: dict[str, Any] = {
        "annotation_reply": None,
        "usage": usage_json(summary.usage),
        "retriever_resources": resources,
        "gcite": gcite,
    }
    if summary.verification is not None:
        metadata["gcite_verification"] = summary.verification
    return metadata


def shown_answer(summary: RunSummary, style: str = "markers") -> str:
    """The run's answer as a client of citation ``style`` sees it (``markers``: as written)."""
    known = [str(c.get("id")) for c in summary.chunk_metadata]
    return styled_answer(summary.answer, known, style)


def tagged_answer(summary: RunSummary, style: str = "markers") -> str:
    """The answer (in citation ``style``) with the run's reasoning in front, as Dify's
    ``reasoning_format: tagged`` gives it: ``<think>\n{reasoning}\n</think>{answer}`` (just
    the answer without any)."""
    answer = shown_answer(summary, style)
    if not summary.reasoning:
        return answer
    return THINK_OPEN + summary.reasoning + THINK_CLOSE + answer


def blocking_body(env: Envelope, summary: RunSummary) -> dict[str, Any]:
    """The Dify blocking-mode chat response (§1.9): the whole answer (reasoning tagged in
    front, :func:`tagged_answer`; in the envelope's citation style) plus metadata."""
    return {
        "event": "message",
        "task_id": env.task_id,
        "id": env.message_id,
        "message_id": env.message_id,
        "conversation_id": env.conversation_id,
        "mode": "advanced-chat",
        "answer": tagged_answer(summary, env.citation_style),
        "metadata": message_metadata(summary, env),
        "created_at": env.created_at,
    }


def error_object(env: Envelope, code: str, status: int, message: str) -> dict[str, Any]:
    """Dify's in-stream ``error`` event (no ``task_id``)."""
    return {
        "event": "error",
        "message_id": env.message_id,
        "conversation_id": env.conversation_id,
        "created_at": env.created_at,
        "code": code,
        "status": status,
        "message": message,
    }


def error_of(event: RunFailed) -> tuple[str, int, str]:
    """``(code, status, message)`` of a failed run, for the stream and the blocking mode."""
    code, status = ERROR_CODES[event.kind]
    return code, status, event.error


def data_frame(obj: dict[str, Any]) -> bytes:
    """``data: <json>\\n\\n`` as UTF-8 bytes (``ensure_ascii=False``, compact separators).

    Never raises on text: a lone UTF-16 surrogate anywhere in ``obj`` (half of a pair a
    model API cut between two chunks) would not encode, so split pairs are joined and
    lone halves become U+FFFD (:func:`gcite.stream.surrogates.fix_surrogates`).
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = fix_surrogates(text).encode("utf-8")
    return b"data: " + data + b"\n\n"


# --------------------------------------------------------------------------- the stream


@dataclass
class _Started:
    execution_id: str
    index: int
    predecessor: str | None
    created_at: int


class DifyStream:
    """Serialises the events of ONE run into Dify's JSON objects, in order.

    Stateful (execution ids, node indexes, predecessors): one instance per run. Call
    :meth:`start` first (``workflow_started``), then :meth:`objects` for every chatflow
    event; :meth:`frames` gives the same as SSE bytes.
    """

    def __init__(self, env: Envelope) -> None:
        self.env = env
        self._started: dict[NodeName, _Started] = {}
        self._index = 0
        # the answer text on the wire: at its start, inside <think>, in the answer
        self._think: str = "start"
        self._frame_parts: tuple[bytes, bytes] | None = None
        # the ``numbers`` citation style: the answer rendered as it streams
        self._numbers = NumberedText() if env.citation_style == "numbers" else None

    def start(self, query: str) -> dict[str, Any]:
        """``workflow_started``; ``inputs`` echo the request inputs plus ``sys.*``."""
        env = self.env
        out = env.head("workflow_started")
        out["workflow_run_id"] = env.workflow_run_id
        out["data"] = {
            "id": env.workflow_run_id,
            "workflow_id": WORKFLOW_ID,
            "inputs": {
                **env.inputs,
                "sys.query": query,
                "sys.user_id": env.user,
                "sys.conversation_id": env.conversation_id,
            },
            "created_at": env.created_at,
        }
        return out

    def frames(self, event: Event) -> bytes:
        """The SSE bytes of one chatflow event (possibly empty, possibly several frames).

        Answer and reasoning deltas (nearly every frame of a stream) are written from the
        run's frame template (:meth:`_text_frame`): only the text is JSON-encoded per frame,
        the bytes are the same as :func:`data_frame` of :meth:`objects`."""
        if isinstance(event, AnswerDelta | ReasoningDelta):
            text = self._delta_text(event)
            return b"" if text is None else self._text_frame(text)
        return b"".join(data_frame(obj) for obj in self.objects(event))

    def _delta_text(self, event: AnswerDelta | ReasoningDelta) -> str | None:
        """The wire text of a delta (``<think>`` bookkeeping), or None when it stays off."""
        if isinstance(event, AnswerDelta):
            if self._numbers is None:
                return self._answer_text(event.text)
            return self._answer_text(self._numbers.feed(event.text)) or None
        if self._think == "answer":
            return None  # after answer text it cannot go at the start: off the wire
        text = event.text if self._think == "open" else THINK_OPEN + event.text
        self._think = "open"
        return text

    def _answer_text(self, text: str) -> str:
        """Answer text on the wire: the ``<think>`` block closed before the first of it."""
        if self._think == "open":
            text, self._think = THINK_CLOSE + text, "answer"
        elif self._think == "start" and text.strip(" \t\r\n"):
            self._think = "answer"  # leading white space may still precede <think>
        return text

    def _text_frame(self, text: str) -> bytes:
        """``data_frame(self._text(text))``, from a template made once per run."""
        if self._frame_parts is None:
            marker = "\x00gcite-text\x00"
            encoded = json.dumps(marker, ensure_ascii=False).encode("utf-8")
            prefix, _, suffix = data_frame(self._text(marker)).partition(encoded)
            self._frame_parts = (prefix, suffix)
        body = json.dumps(text, ensure_ascii=False)
        try:
            data = body.encode("utf-8")
        except UnicodeEncodeError:
            data = fix_surrogates(body).encode("utf-8")
        return self._frame_parts[0] + data + self._frame_parts[1]

    def objects(self, event: Event) -> list[dict[str, Any]]:
        """The Dify JSON objects of one chatflow event, in wire order."""
        env = self.env
        if isinstance(event, AnswerDelta | ReasoningDelta):
            text = self._delta_text(event)
            return [] if text is None else [self._text(text)]
        closes_llm = isinstance(event, NodeFinished) and event.node == "llm"
        ends_answer = closes_llm or isinstance(event, (RunEnded, RunFailed))
        if ends_answer and self._numbers is not None and not self._numbers.closed:
            held = self._numbers.close()  # the rest of the answer, before the node ends
            text = self._answer_text(held) if held else ""
            return ([self._text(text)] if text else []) + self.objects(event)
        if self._think == "open" and ends_answer:
            self._think = "answer"  # the model only reasoned: close the block first
            return [self._text(THINK_CLOSE), *self.objects(event)]
        if isinstance(event, NodeStarted):
            return [self._node_started(event)]
        if isinstance(event, NodeFinished):
            if event.node == "merge" and self._numbers is not None:
                chunks = (event.outputs or {}).get("chunk_metadata") or []
                self._numbers.set_known_ids([str(c.get("id")) for c in chunks])
            return [self._node_finished(event)]
        if isinstance(event, RunEnded):
            # Dify's advanced-chat pipeline order (also for a stop): workflow_finished, then
            # message_end, which ends the stream (clients that keep the last terminal
            # event's usage, e.g. dify-ai-provider, need it last).
            out = env.head("message_end")
            out.update({"id": env.message_id, "metadata": message_metadata(event.summary, env)})
            out["files"] = []
            return [self._workflow_finished(event.summary, None), out]
        if isinstance(event, RunFailed):
            code, status, message = error_of(event)
            return [
                self._workflow_finished(event.summary, message),
                error_object(env, code, status, message),
            ]
        raise TypeError(f"not a chatflow event: {event!r}")

    def _text(self, text: str) -> dict[str, Any]:
        """A piece of answer text: ``message`` (``answer``) or ``text_chunk`` (``data.text``)."""
        env = self.env
        selector = [NODES["llm"].node_id, "text"]
        if env.stream_event == "text_chunk":
            out = env.head("text_chunk")
            out["workflow_run_id"] = env.workflow_run_id
            out["data"] = {"text": text, "from_variable_selector": selector}
            return out
        out = env.head("message")
        out.update({"id": env.message_id, "answer": text, "from_variable_selector": selector})
        return out

    def _common(self, node: NodeName, inputs: dict[str, Any]) -> dict[str, Any]:
        started = self._started[node]
        wire = NODES[node]
        return {
            "id": started.execution_id,
            "node_id": wire.node_id,
            "node_type": wire.node_type,
            "title": wire.title,
            "index": started.index,
            "predecessor_node_id": started.predecessor,
            "inputs": inputs,
            "inputs_truncated": False,
            "created_at": started.created_at,
            "iteration_id": None,
            "loop_id": None,
        }

    def _node_started(self, event: NodeStarted) -> dict[str, Any]:
        self._index += 1
        before = [n for n in PREDECESSORS[event.node] if n in self._started]
        predecessor = NODES[before[0]].node_id if before else START_NODE_ID
        self._started[event.node] = _Started(new_id(), self._index, predecessor, int(event.at))
        data = self._common(event.node, event.inputs)
        data["extras"] = {}
        # Dify 1.12's NodeStartStreamResponse.Data has ``agent_strategy`` (``{name, icon}``
        # on Agent nodes), dumped as null for every other node type; none of ours is one.
        data["agent_strategy"] = None
        out = self.env.head("node_started")
        out.update({"workflow_run_id": self.env.workflow_run_id, "data": data})
        return out

    def _node_finished(self, event: NodeFinished) -> dict[str, Any]:
        outputs = event.outputs
        if event.node == "web_search" and outputs is not None:
            outputs = {"text": "", "files": [], "json": [outputs.get("payload")]}
        elif event.node == "llm" and outputs is not None and self._numbers is not None:
            known = self._numbers.known_ids
            outputs = {
                **outputs,
                "text": styled_answer(str(outputs.get("text", "")), known, "numbers"),
            }
        tokens = event.usage.total_tokens if event.usage is not None else 0
        data = self._common(event.node, event.inputs)
        data.update(
            {
                "process_data": None if event.usage is None else {"usage": usage_json(event.usage)},
                "process_data_truncated": False,
                "outputs": outputs,
                "outputs_truncated": False,
                "status": event.status,
                "error": event.error,
                "elapsed_time": round(event.elapsed, 4),
                "execution_metadata": {
                    "total_tokens": tokens,
                    "total_price": "0",
                    "currency": "USD",
                },
                "finished_at": int(event.at),
                "files": [],
            }
        )
        out = self.env.head("node_finished")
        out.update({"workflow_run_id": self.env.workflow_run_id, "data": data})
        return out

    def _workflow_finished(self, summary: RunSummary, error: str | None) -> dict[str, Any]:
        env = self.env
        out = env.head("workflow_finished")
        out["workflow_run_id"] = env.workflow_run_id
        out["data"] = {
            "id": env.workflow_run_id,
            "workflow_id": WORKFLOW_ID,
            "status": summary.status,
            "outputs": {"answer": shown_answer(summary, env.citation_style)}
            if summary.status != "failed"
            else None,
            "error": error,
            "elapsed_time": round(summary.elapsed, 4),
            "total_tokens": summary.usage.total_tokens,
            "total_steps": summary.steps,
            "created_by": {},
            "created_at": env.created_at,
            "finished_at": int(summary.at),
            "exceptions_count": 0,
            "files": [],
        }
        return out


__all__ = [
    "ERROR_CODES",
    "MEDIA_TYPE",
    "NODES",
    "PING_FRAME",
    "START_NODE_ID",
    "WORKFLOW_ID",
    "DifyStream",
    "Envelope",
    "WireNode",
    "blocking_body",
    "data_frame",
    "error_object",
    "error_of",
    "message_metadata",
    "retriever_resource",
    "retriever_resources",
    "shown_answer",
    "tagged_answer",
    "usage_json",
]
