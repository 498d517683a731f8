"""The seeds' chatflow without HTTP and without SQL (platform design §2.2).

``seams`` (the :class:`~typing.Protocol` of each dependency: KnowledgeStore, WebSource,
LLMBackend, Scheduler), ``events`` (what a run yields), ``nodes`` (one async function per
node), ``history`` (earlier turns and their visibility re-check), ``run`` (:class:`ChatRun`,
the nodes wired), ``scheduler`` (first text first: the one object per process that orders
runs, paces and coalesces answers and runs the search and verification threads). The
service (:mod:`gcite.service`), ``gcite ask`` and the tests consume
the same events; :mod:`gcite.dify.wire` serialises them into Dify's stream.
"""

from __future__ import annotations

from gcite.chatflow.events import (
    AnswerDelta,
    Event,
    NodeFinished,
    NodeStarted,
    ReasoningDelta,
    RunEnded,
    RunFailed,
    RunSummary,
    UsageReport,
)
from gcite.chatflow.history import History, PastTurn, earlier_turns
from gcite.chatflow.run import ChatRun, Deps, Turn, new_id
from gcite.chatflow.seams import KnowledgeStore, LLMBackend, WebSource

__all__ = [
    "AnswerDelta",
    "ChatRun",
    "Deps",
    "Event",
    "History",
    "KnowledgeStore",
    "LLMBackend",
    "NodeFinished",
    "NodeStarted",
    "PastTurn",
    "ReasoningDelta",
    "RunEnded",
    "RunFailed",
    "RunSummary",
    "Turn",
    "UsageReport",
    "WebSource",
    "earlier_turns",
    "new_id",
]
