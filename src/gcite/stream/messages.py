"""What a client says to its user: one Chinese sentence per error, and the sheet's texts.

The error rule is the JavaScript client's (``clients/js/src/messages.js``), shared through
``tests/vectors/error-text.v1.json``: an error ``(code, status, message)`` becomes one
Chinese sentence chosen by its code, else by its HTTP status; the message (the server's or
the model provider's text, often English) is never shown. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

TEXT: Final[Mapping[str, str]] = {
    "rag": "知识库",
    "web": "公网",
    "no_content": "（该来源没有可显示的正文片段）",
    "no_link": "该来源没有原文链接",
    "bad_link": "原文链接不是网页地址，无法打开",
    "office_notice": (
        "原文是 Office / PDF 文件，将下载后打开；如无法预览，可复制链接后在浏览器中查看。"
    ),
    "sources": "来源",
}
"""The texts of the sheet and the source list (the same strings as ``TEXT`` in messages.js)."""

ERROR_SENTENCES: Final[Mapping[str, str]] = {
    "aborted": "已停止生成",
    "network_error": "无法连接服务，请检查网络后重试",
    "stream_interrupted": "回答中断，请检查网络后重试",
    "timeout": "请求超时，请稍后重试",
    "request_timeout": "请求超时，请稍后重试",
    "not_event_stream": "服务返回的内容无法识别，请稍后重试",
    "frame_too_large": "服务返回的数据异常，请稍后重试",
    "stream_error": "回答数据异常，请稍后重试",
    "invalid_param": "请求参数有误，请刷新页面后重试",
    "bad_request": "请求有误，请刷新页面后重试",
    "request_too_large": "问题太长了，请精简后再试",
    "unauthorized": "API Key 无效或无权访问，请检查身份设置",
    "forbidden": "API Key 无效或无权访问，请检查身份设置",
    "not_found": "对话不存在或已过期，请开始新对话",
    "conversation_not_exists": "对话不存在或已过期，请开始新对话",
    "method_not_allowed": "服务不支持此请求，请刷新页面后重试",
    "too_many_requests": "请求过于频繁，请稍后再试",
    "completion_request_error": "模型服务暂时不可用，请稍后重试",
    "provider_not_initialize": "模型服务未配置，请联系管理员",
    "provider_quota_exceeded": "模型服务额度已用完，请联系管理员",
    "model_currently_not_support": "当前模型不可用，请联系管理员",
    "internal_server_error": "服务内部错误，请稍后重试",
    "config": "未配置服务地址，请联系管理员",
}
"""The sentence of each error code (Dify's, the service's and the transports' own)."""

UNKNOWN_ERROR: Final = "出错了，请稍后重试"


def error_text(error: Mapping[str, Any] | None) -> str:
    """One Chinese sentence for ``error`` (``{"code", "status", "message"}``, or ``None``).

    Order: status 401/403, 429, the code's sentence (:data:`ERROR_SENTENCES`), then the
    status (5xx, other 4xx), else :data:`UNKNOWN_ERROR`. ``message`` is never shown.
    """
    if not isinstance(error, Mapping):
        return UNKNOWN_ERROR
    raw_status = error.get("status")
    status = (
        raw_status
        if isinstance(raw_status, int | float)
        and not isinstance(raw_status, bool)
        and raw_status == raw_status
        and abs(raw_status) != float("inf")
        else 0
    )
    raw_code = error.get("code")
    code = raw_code if isinstance(raw_code, str) else ""
    if code == "aborted":
        return ERROR_SENTENCES["aborted"]
    if status in (401, 403):
        return ERROR_SENTENCES["unauthorized"]
    if status == 429:
        return ERROR_SENTENCES["too_many_requests"]
    if code in ERROR_SENTENCES:
        return ERROR_SENTENCES[code]
    if 500 <= status < 600:
        return "服务暂时不可用，请稍后重试"
    if 400 <= status < 500:
        return "请求未被接受，请稍后重试"
    return UNKNOWN_ERROR


__all__ = ["ERROR_SENTENCES", "TEXT", "UNKNOWN_ERROR", "error_text"]
