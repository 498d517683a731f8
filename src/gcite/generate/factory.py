"""The LLM backend the settings ask for: :func:`make_backend`.

The protocol of ``settings.llm.protocol`` comes from :data:`gcite.registry.LLM_PROTOCOLS`;
every backend gets the same wrappers here (per-answer limits, the optional offline
fallback), so a new protocol brings only its own class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.generate.backends import LLMBackend
from gcite.generate.fallback import FallbackBackend
from gcite.generate.limits import limited
from gcite.registry import LLM_PROTOCOLS, load

if TYPE_CHECKING:
    from gcite.knowledge.embed import Embedders


def make_backend(settings: Settings, embedders: Embedders | None = None) -> LLMBackend:
    """The backend the settings ask for.

    ``settings.llm.base_url`` set -> the class of ``settings.llm.protocol``
    (:data:`gcite.registry.LLM_PROTOCOLS`; ``"openai"``:
    :class:`~gcite.generate.openai_backend.OpenAIBackend`) built by its
    ``from_settings(settings)``; unset -> :class:`ExtractiveBackend` (offline, no key) on
    the support model of :func:`gcite.verify.support.support_model` (the bundled embedder,
    from ``embedders``: the owner's, shared with its knowledge store). Either is wrapped in
    :class:`gcite.generate.limits.LimitedBackend` (total and no-text deadlines, answer size
    cap from ``settings.llm``). With ``on_model_error = "extractive"`` the model is wrapped
    in :class:`gcite.generate.fallback.FallbackBackend` (offline answers when it is down).
    Raises :class:`ConfigError` for an unknown protocol or (from the protocol's class) a
    base URL without a model.
    """
    if not settings.llm.base_url:
        from gcite.generate.extractive import ExtractiveBackend
        from gcite.verify.support import support_model

        return limited(ExtractiveBackend(support=support_model(settings, embedders)), settings)
    reference = LLM_PROTOCOLS.get(settings.llm.protocol)
    if reference is None:
        raise ConfigError(
            f"未知的模型协议 llm_protocol={settings.llm.protocol!r}，"
            f"可选: {'、'.join(LLM_PROTOCOLS)}"
        )
    model: LLMBackend = limited(load(reference).from_settings(settings), settings)
    if settings.llm.on_model_error == "extractive":
        from gcite.generate.extractive import ExtractiveBackend
        from gcite.verify.support import support_model

        offline = ExtractiveBackend(support=support_model(settings, embedders))
        return FallbackBackend(model, limited(offline, settings))
    return model


__all__ = ["make_backend"]
