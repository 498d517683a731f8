"""The chatflow's own events: what one run yields, in the seeds' terms, before any wire format.

A run yields, in order (see :mod:`gcite.chatflow.run`)::

    NodeStarted(knowledge_retrieval) [NodeStarted(web_search)]    branches run in parallel
    NodeFinished(knowledge_retrieval) [NodeFinished(web_search)]  status succeeded | failed
    NodeStarted(merge) NodeFinished(merge)                        before any answer text
    NodeStarted(llm) (AnswerDelta | ReasoningDelta)* NodeFinished(llm)
    RunEnded(succeeded | stopped)  |  RunFailed

Times are ``time.time()`` seconds (floats) and elapsed times seconds. Nothing here
knows Dify's envelope: :mod:`gcite.dify.wire` serialises these events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

NodeName = Literal["knowledge_retrieval", "web_search", "merge", "llm"]
"""The seeds' chatflow nodes (platform design §2.2): two retrieval branches, the merge
node (“Chunk编号”, §3) and the LLM node (§5)."""

Status = Literal["succeeded", "failed", "stopped"]

KNOWLEDGE: NodeName = "knowledge_retrieval"
WEB: NodeName = "web_search"
MERGE: NodeName = "merge"
LLM: NodeName = "llm"


@dataclass(frozen=True)
class NodeStarted:
    """A node began. ``inputs``: what it works on (``query``, ``count``, ...); ``at``: s."""

    node: NodeName
    inputs: dict[str, Any]
    at: float


@dataclass(frozen=True)
class NodeFinished:
    """A node ended with ``status``; ``error`` when it failed.

    ``outputs`` per node: knowledge_retrieval ``{"result": [Dify KR items]}``; web_search
    ``{"payload": <provider payload>}``; merge ``{"formatted_chunks", "chunk_count",
    "chunk_metadata"}`` (seed §2.3); llm ``{"text": answer}``. ``elapsed``: seconds.
    ``usage``: the LLM node's usage report (None for the other nodes).
    """

    node: NodeName
    status: Status
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: str | None
    elapsed: float
    at: float
    usage: UsageReport | None = None


@dataclass(frozen=True)
class UsageReport:
    """Tokens and times of one generation, at one moment.

    Tokens as the backend reported (or estimated, ``estimated``); ``latency``: seconds since
    the run started; ``time_to_first_token``: seconds from the run's start to the first
    answer delta; ``time_to_generate``: seconds since that delta (None before it).
    """

    prompt_tokens: int
    completion_tokens: int
    estimated: bool
    latency: float
    time_to_first_token: float | None
    time_to_generate: float | None

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class AnswerDelta:
    """A piece of answer text, ``[C:N]`` markers included."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning (never part of the answer)."""

    text: str


@dataclass(frozen=True)
class RunSummary:
    """What a run produced, complete at its end (also for a stopped or failed run).

    ``answer``: text with markers; ``cited_ids`` raw chunk ids in display order;
    ``invalid_ids`` cited ids that name no chunk; ``chunk_metadata`` the merge node's
    UnifiedChunk list; ``backend`` the LLM backend's name; ``usage`` tokens and times;
    ``elapsed`` seconds since the run started; ``steps`` nodes started; ``error`` the
    failure (failed runs); ``reasoning`` the model's reasoning, if it gave any; ``at``
    ``time.time()`` at the summary; ``timings`` seconds of the ``retrieval``, ``web`` and
    ``merge`` nodes; ``fallback`` ``{"backend", "reason"}`` when the offline answerer
    replaced a model that was down; ``verification`` the citation verifier's report
    (:func:`gcite.verify.verify_answer`) of a succeeded run, when one is configured.
    """

    status: Literal["running", "succeeded", "failed", "stopped"]
    answer: str
    cited_ids: list[str]
    invalid_ids: list[str]
    chunk_metadata: list[dict[str, Any]]
    backend: str
    usage: UsageReport
    elapsed: float
    steps: int
    at: float
    error: str | None = None
    reasoning: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    fallback: dict[str, str] | None = None
    verification: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunEnded:
    """The run ended (``summary.status``: ``succeeded`` or ``stopped``)."""

    summary: RunSummary


@dataclass(frozen=True)
class RunFailed:
    """The run failed after it started. ``error``: one line; ``kind``: ``llm`` (the model
    call failed), ``internal`` (a bug) or ``interrupted`` (the serving process stopped
    before the answer ended); ``summary`` holds what was produced before."""

    error: str
    kind: Literal["llm", "internal", "interrupted"]
    summary: RunSummary


Event = NodeStarted | NodeFinished | AnswerDelta | ReasoningDelta | RunEnded | RunFailed

__all__ = [
    "KNOWLEDGE",
    "LLM",
    "MERGE",
    "WEB",
    "AnswerDelta",
    "Event",
    "NodeFinished",
    "NodeName",
    "NodeStarted",
    "ReasoningDelta",
    "RunEnded",
    "RunFailed",
    "RunSummary",
    "Status",
    "UsageReport",
]
