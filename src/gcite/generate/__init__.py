"""The LLM node: seed §5.2 prompt, multi-turn history (§6) and streaming backends.

``build_messages`` builds the chat messages; ``make_backend(settings)`` returns an
OpenAI-compatible backend when ``llm_base_url`` is set, else the offline extractive one.
"""

from __future__ import annotations

from gcite.generate.backends import LLMBackend, Usage
from gcite.generate.factory import make_backend
from gcite.generate.prompt import DEFAULT_TEMPLATE, NO_ANSWER, build_messages, load_template

__all__ = [
    "DEFAULT_TEMPLATE",
    "NO_ANSWER",
    "LLMBackend",
    "Usage",
    "build_messages",
    "load_template",
    "make_backend",
]
