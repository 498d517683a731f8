"""An optional judge for citations: a model behind an OpenAI-compatible endpoint.

When ``verify_judge_base_url`` and ``verify_judge_model`` are configured, every
(answer sentence, cited chunk) pair the offline support model scored is also put to the
model as a yes/no question (an NLI-style check, platform design §6: "对关键场景可额外加
NLI 验证层"); its verdict decides ``supported``, and the offline score and supporting
sentence stay. ``POST {base_url}/chat/completions`` (non-streaming, temperature 0,
``max_tokens`` 4); the answer counts as "yes" when it starts with 是/支持/yes. A failed
call (HTTP error, timeout, unreadable body) leaves that pair to the offline score and is
counted in the report's ``judge_errors``; the judge never fails a run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

PROMPT = (
    "判断“片段”是否直接支持“句子”中陈述的事实（数字、时限、条件都要一致）。"
    "只回答“是”或“否”。\n\n句子：{claim}\n\n片段：{passage}"
)
_YES = ("是", "支持", "yes", "true")


class Judge:
    """Yes/no support verdicts from a chat-completions endpoint (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        *,
        timeout_s: float = 20.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )

    def supports(self, claim: str, passage: str) -> bool:
        """The model's verdict; raises ``httpx.HTTPError`` or ``ValueError`` on failure."""
        response = self._client.post(
            "/chat/completions",
            json={
                "model": self.model,
                "stream": False,
                "temperature": 0,
                "max_tokens": 4,
                "messages": [
                    {"role": "user", "content": PROMPT.format(claim=claim, passage=passage)}
                ],
            },
        )
        response.raise_for_status()
        try:
            text = str(response.json()["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"unreadable judge answer: {exc}") from exc
        return text.strip().lower().startswith(_YES)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def apply_judge(
    report: dict[str, Any],
    contents: Mapping[str, str],
    judge: Judge,
    *,
    deadline: float | None = None,
) -> dict[str, Any]:
    """``report`` with the judge's verdicts: per citation ``judge`` (``"yes"``, ``"no"``
    or ``"error"``), ``supported`` from the verdict, ``weak``/``supported`` recounted,
    ``judge`` = the model name and ``judge_errors`` = failed calls. ``deadline``
    (``time.monotonic()``): citations not reached by then are not put to the judge and
    keep the offline verdict (``judge: "error"``, counted in ``judge_errors``)."""
    errors = 0
    weak: list[dict[str, Any]] = []
    supported = 0
    for sentence in report.get("sentences") or []:
        for cite in sentence.get("citations") or []:
            passage = contents.get(str(cite.get("id")))
            if passage is not None and deadline is not None and time.monotonic() > deadline:
                errors += 1
                cite["judge"] = "error"
            elif passage is not None:
                try:
                    verdict = judge.supports(str(sentence.get("text")), passage)
                except (httpx.HTTPError, ValueError):
                    errors += 1
                    cite["judge"] = "error"
                else:
                    cite["judge"] = "yes" if verdict else "no"
                    cite["supported"] = verdict
            if cite.get("supported"):
                supported += 1
            else:
                weak.append({"sentence": sentence.get("index"), "id": cite.get("id")})
    report.update(judge=judge.model, judge_errors=errors, weak=weak, supported=supported)
    return report


__all__ = ["PROMPT", "Judge", "apply_judge"]
