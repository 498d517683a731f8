"""The retrieval query of a turn, built from the conversation.

A follow-up such as "那白天呢？" after "夜间巡更多久一次？" has no subject of its own;
searching it alone finds nothing (or something unrelated). Two ways to give it one:

* offline (:func:`carry_subject`, pure): when the new message looks like a follow-up
  (:func:`looks_like_followup`), the earlier turn's retrieval query is put in front of
  it: "夜间巡更多久一次？ 那白天呢？". A standalone question is searched as it is. A
  follow-up is recognised by

  - *reference*: it opens with 那/那么/还有/另外/如果..., a clause ends in 呢
    ("大会议室呢，要提前多久订"), or it points back (它/这个/上述/刚才/前面说的...);
  - *ellipsis*: it is short (:data:`SHORT_FOLLOWUP` characters), or its content words
    (:func:`gcite.knowledge.sparse.terms`, IDF-weighted) weigh less than
    :data:`SUBJECT_WEIGHT` - it names no subject of its own, only a predicate or a
    question ("要提前多久订", "能用几天", "收费吗").
* with a model (:func:`condense_question`): the condense-question step of Dify and
  LlamaIndex - one short model call rewrites the follow-up into a standalone Chinese
  question from the last turns, with its own timeout (``condense_timeout_s``); a
  timeout, an error, or an answer that is not a plausible question (empty, too long,
  holding citation markers) falls back to the offline rewrite.

The first turn of a conversation is always searched as it is.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

from gcite.chatflow.seams import LLMBackend, Usage
from gcite.config import Settings
from gcite.generate.backends import aclose_stream
from gcite.knowledge.sparse import terms

log = logging.getLogger("gcite.chatflow")

SHORT_FOLLOWUP = 5
"""A message of at most this many characters (punctuation left out) counts as a follow-up."""
SUBJECT_WEIGHT = 16.0
"""A message whose content words' IDF weights sum to less than this has no subject of its
own (about two ordinary words; one specific term such as 巡更 or 二维码 weighs 10-12)."""
MAX_TURNS = 3
"""How many earlier turns the condense prompt shows."""

_OPENERS = (
    "那",
    "那么",
    "还有",
    "另外",
    "此外",
    "如果",
    "要是",
    "假如",
    "然后",
    "而且",
    "并且",
    "同样",
    "也",
    "再",
    "那如果",
    "换成",
)
_POINTERS = (
    "它",
    "它们",
    "这个",
    "那个",
    "这些",
    "那些",
    "这种",
    "那种",
    "这样",
    "上述",
    "上面",
    "刚才",
    "刚刚",
    "前面说",
    "你说的",
    "同样",
    "该",
    "此",
    "其",
)
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)
_CLAUSE_NE = re.compile(r"呢\s*(?:[，,。？?！!；;：:]|$)")

CONDENSE_PROMPT = (
    "根据下面的对话历史，把用户的追问改写成一个独立、完整的中文问题，"
    "补全被省略的主语和对象，使它不看历史也能被理解。"
    "只输出改写后的问题，不要回答，不要解释。\n\n"
    "对话历史：\n{history}\n\n追问：{question}\n独立问题："
)


def looks_like_followup(message: str) -> bool:
    """True when ``message`` likely leans on the earlier turn (see the module docstring)."""
    text = message.strip()
    bare = _PUNCT.sub("", text)
    if not bare:
        return False
    if len(bare) <= SHORT_FOLLOWUP or bare.startswith(_OPENERS):
        return True
    if _CLAUSE_NE.search(text) or any(p in text for p in _POINTERS):
        return True
    return sum(terms(text, search=False).values()) < SUBJECT_WEIGHT


def carry_subject(message: str, earlier: Sequence[str]) -> str:
    """The offline retrieval query: ``message``, with the last earlier retrieval query in
    front when ``message`` looks like a follow-up. ``earlier``: earlier turns' retrieval
    queries (or questions), oldest first. Pure."""
    text = message.strip()
    if not earlier or not looks_like_followup(text):
        return text
    subject = earlier[-1].strip()
    return f"{subject} {text}" if subject else text


def earlier_queries(questions: Sequence[str]) -> list[str]:
    """The offline retrieval queries of earlier turns, oldest first: each question with the
    subject carried from the one before (so "周末呢？" after "那白天呢？" still has the first
    turn's subject). Pure."""
    queries: list[str] = []
    for question in questions:
        queries.append(carry_subject(question, queries))
    return queries


async def search_query(
    message: str, history: Sequence[dict[str, Any]], backend: LLMBackend, settings: Settings
) -> str:
    """The retrieval query of a turn: :func:`condense_question` when a model is configured
    (``settings.llm.base_url``), else :func:`carry_subject`. ``history``: the visible
    earlier turns (``{"query", "answer"?}``, oldest first)."""
    earlier = earlier_queries([str(t.get("query") or "") for t in history])
    if settings.llm.base_url:
        return await condense_question(
            backend, message, history, earlier, timeout_s=settings.llm.condense_timeout_s
        )
    return carry_subject(message, earlier)


def _plausible(rewrite: str, message: str, earlier: Sequence[str]) -> bool:
    if not rewrite or "[C:" in rewrite or "\n\n" in rewrite:
        return False
    limit = 2 * (len(message) + (len(earlier[-1]) if earlier else 0)) + 40
    return len(rewrite) <= limit


async def condense_question(
    backend: LLMBackend,
    message: str,
    history: Sequence[dict[str, Any]],
    earlier: Sequence[str],
    *,
    timeout_s: float,
) -> str:
    """The retrieval query for ``message`` rewritten by the model, or the offline rewrite.

    ``history``: the prompt history turns (``{"query", "answer"?}``, oldest first);
    ``earlier``: the earlier retrieval queries (for the fallback). Only follow-up-like
    messages are sent to the model (a standalone question is searched as it is). Never
    raises but on cancellation; failures are logged and fall back to :func:`carry_subject`.
    """
    fallback = carry_subject(message, earlier)
    if not history or not looks_like_followup(message):
        return fallback
    lines = []
    for turn in history[-MAX_TURNS:]:
        lines.append(f"用户：{turn.get('query', '')}")
        answer = re.sub(r"\[C:[^\]]*\]", "", str(turn.get("answer") or ""))[:300]
        if answer:
            lines.append(f"助手：{answer}")
    prompt = CONDENSE_PROMPT.format(history="\n".join(lines), question=message.strip())

    async def ask() -> str:
        parts: list[str] = []
        stream = backend.stream(
            [{"role": "user", "content": prompt}], chunks=[], query="", usage=Usage()
        )
        try:
            async for delta in stream:
                if isinstance(delta, str):  # Reasoning pieces are not the rewrite
                    parts.append(delta)
        finally:
            await aclose_stream(stream)
        return "".join(parts).strip().strip("\"'“”「」")

    try:
        rewrite = await asyncio.wait_for(ask(), timeout=timeout_s)
    except TimeoutError:
        log.warning("condense-question call timed out after %ss; subject carried", timeout_s)
        return fallback
    except Exception as exc:  # the answer must not fail because the rewrite did
        log.warning("condense-question call failed (%s); subject carried", exc)
        return fallback
    rewrite = rewrite.removeprefix("独立问题：").strip()
    if not _plausible(rewrite, message, earlier):
        log.info("condense-question answer not a question (%r); subject carried", rewrite[:80])
        return fallback
    return rewrite


__all__ = [
    "CONDENSE_PROMPT",
    "MAX_TURNS",
    "SHORT_FOLLOWUP",
    "SUBJECT_WEIGHT",
    "carry_subject",
    "condense_question",
    "earlier_queries",
    "looks_like_followup",
    "search_query",
]
