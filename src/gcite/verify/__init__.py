"""Citation verification: does the cited chunk support the sentence, and where.

Offline and deterministic by default (:class:`SupportModel`: lexical evidence, the
numbers a sentence states, and optionally the bundled embedding model); an optional
judge through an OpenAI-compatible endpoint (:mod:`gcite.verify.judge`) when configured.
:func:`verify_answer` turns a finished answer and its chunks into the
``gcite_verification`` report. Source: platform design §6.
"""

from __future__ import annotations

from gcite.verify.support import Support, SupportModel, spans, support_model
from gcite.verify.verifier import (
    DEFAULT_THRESHOLD,
    Claim,
    answer_claims,
    best_support_by_chunk,
    make_verifier,
    verify_answer,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "Claim",
    "Support",
    "SupportModel",
    "answer_claims",
    "best_support_by_chunk",
    "make_verifier",
    "spans",
    "support_model",
    "verify_answer",
]
