"""The chatflow gives the offline answerer the knowledge-base chunks a little below the
relevance threshold, marked, and a language model none of them (real law corpus, real
store; skipped without ../shared/corpus)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from gcite.chatflow import ChatRun, Deps, Turn
from gcite.chatflow.run import mark_weak, weak_margin
from gcite.generate.backends import WEAK_KEY, Usage
from gcite.generate.extractive import ExtractiveBackend
from gcite.generate.prompt import NO_ANSWER
from gcite.stream.parser import strip_markers

#: Retrieves chunks between 0.3 and 0.5 only (development question q076, unanswerable).
QUESTION = "员工在上下班路上骑车摔伤了，能算工伤吗？"


class Seeing(ExtractiveBackend):
    """The extractive backend, keeping the chunks it was given."""

    def __init__(self, margin: float | None) -> None:
        super().__init__()
        if margin is not None:
            self.weak_margin = margin
        self.seen: list[dict[str, Any]] = []

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Usage | None = None,
    ) -> AsyncIterator[str]:
        self.seen = [dict(c) for c in chunks]
        async for delta in super().stream(messages, chunks=chunks, query=query, usage=usage):
            yield delta


def all_roles(law_store: Any) -> tuple[str, ...]:
    meta = json.loads((law_store.corpus_dir / "laws.meta.json").read_text("utf-8"))
    return tuple(
        sorted({r for d in meta["documents"].values() for r in d.get("access_roles") or []})
    )


async def ask(law_store: Any, backend: Seeing) -> str:
    # a generous retrieval timeout: this test is about what the answerer is given
    settings = law_store.settings.with_keys(kb_timeout_s=120.0)
    deps = Deps(settings=settings, backend=backend, get_store=lambda: law_store.store)
    run = ChatRun(Turn(QUESTION, all_roles(law_store)), deps)
    async for _ in run.events():
        pass
    return strip_markers(run.summary().answer).strip()


def test_margin_and_marking_rules() -> None:
    assert weak_margin(ExtractiveBackend()) == 0.2
    assert weak_margin(object()) == 0.0
    rag = {"id": "1", "source_type": "rag", "score": 0.4}
    assert mark_weak(rag, 0.5) == {**rag, WEAK_KEY: True}
    assert mark_weak({**rag, "score": 0.5}, 0.5) == {**rag, "score": 0.5}
    web = {"id": "2", "source_type": "web", "score": 0.1}
    assert mark_weak(web, 0.5) is web


async def test_weak_chunks_reach_the_answerer_marked_and_it_refuses(law_store: Any) -> None:
    threshold = law_store.settings.knowledge.score_threshold
    backend = Seeing(margin=None)
    answer = await ask(law_store, backend)
    weak = [c for c in backend.seen if c.get(WEAK_KEY)]
    assert weak, "the question retrieves chunks just below the threshold"
    assert all(threshold - 0.2 <= c["score"] < threshold for c in weak)
    assert all(c["score"] >= threshold for c in backend.seen if not c.get(WEAK_KEY))
    # one shared word ("工伤") is not strong evidence: refused
    assert answer == NO_ANSWER


async def test_a_backend_without_a_margin_sees_only_the_threshold(law_store: Any) -> None:
    threshold = law_store.settings.knowledge.score_threshold
    backend = Seeing(margin=0.0)
    assert await ask(law_store, backend) == NO_ANSWER
    assert all(c["score"] >= threshold and WEAK_KEY not in c for c in backend.seen)
