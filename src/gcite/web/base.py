"""What the three HTTP web search clients share: query and count rules, the call skeleton.

A web search source of the seeds' chatflow (platform design document §2.2,
§3.2.2) takes the user's query and a result count and returns the provider's
raw payload, which the merge node turns into web chunks. The seeds' Baidu tool
ignored Top-K and always returned 10 results (platform design document,
appendix A), so the count is enforced on our side too: every client truncates
the result list inside the payload to ``count``.

Input rules, identical for every provider (documented fallbacks, no request sent):

* ``count < 1`` or a blank query: the provider's empty payload.
* a query longer than :data:`MAX_QUERY_CHARS` characters is cut to that length
  (after collapsing whitespace); the providers reject or silently cut long
  queries anyway.
* ``count`` above the provider's maximum is lowered to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from gcite.config import Settings
from gcite.errors import ConfigError, SourceUnavailable
from gcite.registry import WEB_PROVIDERS
from gcite.web.http import JsonClient, RetryPolicy

if TYPE_CHECKING:
    from gcite.knowledge.store import StoreHandles

#: Longest query sent to a provider, characters.
MAX_QUERY_CHARS = 400


def clean_query(query: str) -> str:
    """``query`` with whitespace collapsed, cut to :data:`MAX_QUERY_CHARS` characters.

    Raises :class:`TypeError` when ``query`` is not a string (a caller's bug).
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be str, not {type(query).__name__}")
    return " ".join(query.split())[:MAX_QUERY_CHARS]


def clamp_count(count: int, maximum: int) -> int:
    """``count`` limited to ``[0, maximum]``; :class:`TypeError` unless an int."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be int, not {type(count).__name__}")
    return max(0, min(count, maximum))


def require_dict(payload: Any, *, source: str) -> dict[str, Any]:
    """``payload`` if it is a JSON object, else :class:`SourceUnavailable`."""
    if not isinstance(payload, dict):
        raise SourceUnavailable(
            f"{source}返回了无法识别的数据（应为 JSON 对象，实际为 {type(payload).__name__}）"
        )
    return payload


def truncate_list(container: dict[str, Any], key: str, count: int, *, source: str) -> None:
    """Cut ``container[key]`` to ``count`` items in place.

    A missing or ``null`` key is left alone (the provider found nothing); any
    other non-list value raises :class:`SourceUnavailable`.
    """
    value = container.get(key)
    if value is None:
        return
    if not isinstance(value, list):
        raise SourceUnavailable(f"{source}返回的 {key} 字段不是列表: {type(value).__name__}")
    container[key] = value[:count]


class HttpWebSource:
    """Base of the Bocha, Tavily and Baidu clients (one JSON POST per search).

    ``api_key`` is sent as ``Authorization: Bearer <key>`` (surrounding
    whitespace removed); an empty key or one with inner whitespace or control
    characters is a :class:`ConfigError`. Subclasses set :attr:`name`,
    :attr:`display_name`, :attr:`default_base_url`,
    :attr:`path` and :attr:`max_count`, and implement :meth:`build_body`,
    :meth:`empty_payload` and :meth:`enforce` (check the payload's shape and cut
    its result list to ``count``). Their constructors take ``(api_key, *, base_url,
    timeout_s, freshness, retry)`` (what :meth:`from_settings` passes; the
    freshness values each provider accepts: see the subclasses).
    """

    name: str = ""
    display_name: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    path: ClassVar[str] = ""
    max_count: ClassVar[int] = 50

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "",
        timeout_s: float = 8.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        key = api_key.strip() if isinstance(api_key, str) else ""
        if not key:
            raise ConfigError(f"{self.display_name}的 API 密钥为空")
        if any(ch.isspace() or not ch.isprintable() for ch in key):
            raise ConfigError(
                f"{self.display_name}的 API 密钥含有空白或控制字符，请检查是否复制完整"
            )
        self._client = JsonClient(
            source=self.display_name,
            base_url=base_url or self.default_base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout_s=timeout_s,
            retry=retry,
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        retry: RetryPolicy | None = None,
        handles: StoreHandles | None = None,
    ) -> Self:
        """The client ``settings.web`` describes (``base_url``, ``timeout_s``,
        ``freshness``) with the provider's key (``handles`` is not used: nothing is
        embedded here). Raises :class:`ConfigError` when the key
        is missing (naming the setting and the variables it may come from)."""
        key = settings.web.api_key(cls.name)
        if not key:
            variables = (f"GCITE_{cls.name.upper()}_API_KEY", *WEB_PROVIDERS[cls.name].key_env)
            raise ConfigError(
                f"联网搜索提供方 {cls.name} 缺少 API 密钥：请在配置文件中设置 "
                f"{cls.name}_api_key，或设置环境变量 {'、'.join(variables)}"
            )
        web = settings.web
        return cls(
            key,
            base_url=web.base_url,
            timeout_s=web.timeout_s,
            freshness=web.freshness,  # type: ignore[call-arg]  # each provider reads it its way
            retry=retry,
        )

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """Raise :class:`ConfigError` where :meth:`from_settings` would (the client it
        makes opens no connection before the first search: it is dropped)."""
        cls.from_settings(settings)

    @property
    def base_url(self) -> str:
        """The API root requests go to (no trailing slash)."""
        return self._client.base_url

    def build_body(self, query: str, count: int) -> dict[str, Any]:
        """The JSON body for a cleaned, non-empty ``query`` and ``1 <= count <= max_count``."""
        raise NotImplementedError

    def empty_payload(self, query: str) -> dict[str, Any]:
        """The provider's payload for "no results"."""
        raise NotImplementedError

    def enforce(self, payload: Any, count: int) -> dict[str, Any]:
        """Check ``payload``'s shape and cut its result list to ``count`` (may mutate it)."""
        raise NotImplementedError

    async def search(self, query: str, *, count: int) -> Any:
        """Search the web for ``query``; the provider's raw payload with at most ``count`` results.

        Raises :class:`~gcite.errors.SourceTimeout`,
        :class:`~gcite.errors.SourceAuthError` or
        :class:`~gcite.errors.SourceUnavailable`; see :mod:`gcite.web.http`.
        """
        text = clean_query(query)
        wanted = clamp_count(count, self.max_count)
        if not text or wanted == 0:
            return self.empty_payload(text)
        payload = await self._client.post_json(self.path, self.build_body(text, wanted))
        return self.enforce(payload, wanted)

    async def aclose(self) -> None:
        """Release the connection pool. Safe to call twice."""
        await self._client.aclose()

    async def __aenter__(self) -> HttpWebSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"


def pick_freshness(
    value: str | None, table: Mapping[str, str | None], *, source: str
) -> str | None:
    """Translate a freshness setting to the provider's own value.

    ``table`` maps accepted inputs (the common vocabulary ``""``, ``"day"``,
    ``"week"``, ``"month"``, ``"year"`` where the provider supports it, plus its
    native values) to what is sent; ``None`` means "send no filter". Raises
    :class:`~gcite.errors.ConfigError` for anything else.
    """
    key = (value or "").strip()
    if key in table:
        return table[key]
    allowed = "、".join(k for k in table if k)
    raise ConfigError(f"{source}不支持时效参数 {value!r}，可选: {allowed}")


__all__ = [
    "MAX_QUERY_CHARS",
    "HttpWebSource",
    "clamp_count",
    "clean_query",
    "pick_freshness",
    "require_dict",
    "truncate_list",
]
