"""The one status table of gcite's exceptions, and the one key matcher."""

from __future__ import annotations

import pytest

from gcite.config import ApiKey, Settings
from gcite.errors import ConfigError, FilterError, GciteError, LLMError, StoreError
from gcite.knowledge.admin import ManageError
from gcite.knowledge.embed import EmbeddingError
from gcite.knowledge.remote_admin import KeyRefused
from gcite.service.auth import authorise_admin, find_key
from gcite.service.errors import INTERNAL_MESSAGE, ApiError, api_error


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (
            ManageError("重复", status=409, code="dataset_name_duplicate"),
            409,
            "dataset_name_duplicate",
        ),
        (ManageError("没有", status=404, code="document_not_found"), 404, "not_found"),
        (ManageError("名称无效"), 400, "invalid_param"),
        (FilterError("条件无效"), 400, "invalid_param"),
        # our faults: a busy or unreachable store, an embedding endpoint that is down
        (StoreError("知识库正被另一个进程使用"), 503, "store_unavailable"),
        (EmbeddingError("嵌入服务请求失败"), 503, "store_unavailable"),
        (KeyRefused("拒绝了管理请求"), 503, "store_unavailable"),
        (ConfigError("embed_base_url 未配置"), 500, "internal_server_error"),
    ],
)
def test_status_table(exc: GciteError, status: int, code: str) -> None:
    error = api_error(exc)
    assert (error.status, error.code) == (status, code)
    assert str(exc) in error.message


def test_other_errors_are_500_without_their_message() -> None:
    error = api_error(LLMError("connect to http://10.0.0.7:8080 failed"))
    assert (error.status, error.message) == (500, INTERNAL_MESSAGE)


def test_find_key_matches_whole_keys_only() -> None:
    keys = [ApiKey("alpha", name="a"), ApiKey("beta", name="b")]
    assert find_key(keys, "beta") is keys[1]
    for token in ("bet", "betaa", "", "ALPHA"):
        assert find_key(keys, token) is None


def test_admin_keys_only_manage() -> None:
    settings = Settings.from_keys(
        app_keys=[ApiKey("chat", ("r",))],
        retrieval_keys=[ApiKey("kb", ("r",))],
        admin_keys=[ApiKey("admin", name="ops")],
        allow_any_key=True,
    )
    assert authorise_admin(settings, "Bearer admin").name == "ops"
    for header, status in [
        (None, 401),
        ("Basic admin", 401),
        ("Bearer nope", 401),
        ("Bearer chat", 403),
        ("Bearer kb", 403),
    ]:
        with pytest.raises(ApiError) as refused:
            authorise_admin(settings, header)
        assert refused.value.status == status
