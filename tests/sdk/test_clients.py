"""Dify clients users already run, unchanged, against gcite's service (issue 13).

Three clients play the same conversation (``tests/sdk/python/scenario.py``,
``tests/sdk/js/drive.mjs``): PyPI ``dify-client-python`` 1.0.3 (strict pydantic
models), PyPI ``dify-client`` 0.1.10 (Dify's official Python SDK) and npm
``dify-client`` 2.3.2 (Dify's official Node SDK); the npm ``dify-ai-provider`` 1.1.1
with the Vercel AI SDK (``ai`` 5) adds ``streamText`` / ``generateText``. Every answer
cites a knowledge-base chunk and a web chunk. Each step's result is checked here
against Dify's OpenAPI spec and Dify's behaviour (dify-protocol.md §1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sdk_setup import OPENING, SUGGESTED, USAGE

CLIENTS = ("dify-client-python", "dify-client", "js")
Step = dict[str, Any]
Steps = dict[str, Step]

#: Every property of the spec's ``RetrieverResource`` with its type (none may be null
#: except ``summary``), plus Dify's ``RetrievalSourceMetadata`` extras.
RESOURCE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "message_id": str, "position": int, "dataset_id": str, "dataset_name": str,
    "document_id": str, "document_name": str, "data_source_type": str, "segment_id": str,
    "score": (int, float), "hit_count": int, "word_count": int, "segment_position": int,
    "index_node_hash": str, "content": str, "created_at": int, "retriever_from": str,
}  # fmt: skip
MESSAGE_USAGE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "message_tokens": int, "answer_tokens": int, "total_tokens": int,
    "provider_response_latency": (int, float), "total_price": str, "currency": str,
}  # fmt: skip


def ok(step: Step) -> Any:
    assert step["ok"], step["error"]
    return step["data"]


#: The fields dify-client-python's ``RetrieverResource`` model keeps (it validated them).
TYPED_FIELDS = ("position", "dataset_id", "dataset_name", "document_id", "document_name",
                "segment_id", "score", "content")  # fmt: skip


def check_resources(resources: list[dict[str, Any]], typed: bool = False) -> None:
    """Cited chunks of one answer: a knowledge-base one and a web one, spec-typed.

    ``typed``: the dump of a strict SDK model, which keeps only :data:`TYPED_FIELDS`.
    """
    assert [r["position"] for r in resources] == [1, 2]
    if typed:
        for resource in resources:
            assert set(resource) == set(TYPED_FIELDS)
            assert all(resource[name] is not None for name in TYPED_FIELDS)
        return
    assert {r["data_source_type"] for r in resources} == {"upload_file", "web"}
    for resource in resources:
        for name, kind in RESOURCE_FIELDS.items():
            assert isinstance(resource.get(name), kind), (name, resource.get(name))
            assert not isinstance(resource[name], bool), name
        assert resource["summary"] is None or isinstance(resource["summary"], str)
        for name in ("id", "message_id", "dataset_id", "document_id", "segment_id"):
            assert resource[name], name


def check_usage(usage: dict[str, Any]) -> None:
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == USAGE
    assert usage["total_tokens"] == sum(USAGE)
    assert isinstance(usage["total_price"], str) and isinstance(usage["latency"], float)


def terminal_order(events: list[str]) -> list[str]:
    return [e for e in events if e in ("message_end", "workflow_finished")]


def check_stream(data: dict[str, Any]) -> None:
    assert "[C:1]" in data["answer"] and "[C:2]" in data["answer"]
    assert data["events"][0] == "workflow_started"
    # Dify's advanced-chat pipeline: workflow_finished, then message_end, which ends the stream.
    assert terminal_order(data["events"]) == ["workflow_finished", "message_end"]
    assert data["events"][-1] == "message_end"
    check_resources(data["retriever_resources"], data.get("typed", False))
    check_usage(data["usage"])


def check_parameters(steps: Steps) -> None:
    data = ok(steps["parameters"])
    assert data["opening_statement"] == OPENING
    assert data["suggested_questions"] == list(SUGGESTED)
    assert data["user_input_form"] == []
    assert data["file_upload"]["enabled"] is False
    assert data["file_upload"]["image"]["enabled"] is False
    assert data["retriever_resource"] == {"enabled": True}
    assert data["suggested_questions_after_answer"] == {"enabled": False}
    for feature in ("speech_to_text", "text_to_speech", "annotation_reply", "more_like_this"):
        assert data[feature] == {"enabled": False}, feature
    assert data["sensitive_word_avoidance"]["enabled"] is False
    limits = data["system_parameters"]
    for name in ("file_size_limit", "image_file_size_limit", "audio_file_size_limit",
                 "video_file_size_limit", "workflow_file_upload_limit"):  # fmt: skip
        assert isinstance(limits[name], int), name


def check_chat_stream(steps: Steps) -> None:
    check_stream(ok(steps["chat_stream"]))


def check_follow_up(steps: Steps) -> None:
    first, data = ok(steps["chat_stream"]), ok(steps["follow_up"])
    assert data["conversation_id"] == first["conversation_id"]
    assert data["message_id"] != first["message_id"]
    check_stream(data)


def check_chat_blocking(steps: Steps) -> None:
    data = ok(steps["chat_blocking"])
    assert data["mode"] == "advanced-chat"
    assert "[C:1]" in data["answer"] and "[C:2]" in data["answer"]
    check_resources(data["retriever_resources"], data.get("typed", False))
    check_usage(data["usage"])


def check_stop(steps: Steps) -> None:
    data = ok(steps["stop"])
    assert data["stop"] == {"result": "success"}
    # A stop ends the run like Dify's: workflow_finished (stopped), then message_end.
    assert terminal_order(data["events"]) == ["workflow_finished", "message_end"]
    assert data["events"][-1] == "message_end"


def check_conversations(steps: Steps) -> None:
    ids = [c["id"] for c in ok(steps["conversations"])["data"]]
    assert len(ids) == 3  # the streamed (and followed-up), the blocking and the stopped one
    assert ok(steps["chat_stream"])["conversation_id"] in ids
    assert ok(steps["stop"])["conversation_id"] in ids


def check_messages(steps: Steps) -> None:
    messages = ok(steps["messages"])["data"]
    assert [m["query"] for m in messages] == ["访客登记在哪里办理？", "临时门禁卡什么时候归还？"]
    for message in messages:
        check_resources(message["retriever_resources"])
        for resource in message["retriever_resources"]:
            assert resource["message_id"] == message["id"]
        for name, kind in MESSAGE_USAGE_FIELDS.items():
            assert isinstance(message.get(name), kind), (name, message.get(name))
        assert (message["message_tokens"], message["answer_tokens"]) == USAGE


def check_feedback(steps: Steps) -> None:
    assert ok(steps["feedback"]) == {"result": "success"}
    first = ok(steps["messages_after_feedback"])["data"][0]
    assert first["feedback"] == {"rating": "like"}


def check_suggested(steps: Steps) -> None:
    # Dify with "follow-up questions" off: 400 bad_request "Suggested Questions Is Disabled."
    step = steps["suggested"]
    assert not step["ok"]
    assert "Suggested Questions Is Disabled." in step["error"]
    assert "400" in step["error"] or "bad_request" in step["error"]


def check_rename(steps: Steps) -> None:
    data = ok(steps["rename"])
    assert data["id"] == ok(steps["chat_stream"])["conversation_id"]
    assert data["name"] == "访客问答"
    assert {"inputs", "status", "introduction", "created_at", "updated_at"} <= set(data)
    # auto_generate names it from its first question, as gcite names new conversations.
    assert ok(steps["rename_auto"])["name"] == "访客登记在哪里办理？"


def check_delete(steps: Steps) -> None:
    assert ok(steps["delete"])["status"] == 204
    ids = [c["id"] for c in ok(steps["conversations_after_delete"])["data"]]
    assert ok(steps["stop"])["conversation_id"] not in ids
    assert ok(steps["chat_stream"])["conversation_id"] in ids
    assert len(ids) == 2


def check_upload(steps: Steps) -> None:
    # File upload is off for a gcite app: Dify's 415 unsupported_file_type error body.
    data = ok(steps["upload"])
    if "raised" in data:  # dify-client-python maps the body to its DifyUnsupportedFileType
        assert (data["raised"], data["status"], data["code"]) == (
            "DifyUnsupportedFileType",
            415,
            "unsupported_file_type",
        )
    else:
        assert data["status"] == 415
        assert data["body"] == {
            "code": "unsupported_file_type",
            "message": "File type not allowed.",
            "status": 415,
        }


def check_ai_usage(step: Step) -> None:
    data = ok(step)
    assert "[C:1]" in data["text"]
    usage = data["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == USAGE
    assert usage["totalTokens"] == sum(USAGE)


CHECKS: dict[str, Callable[[Steps], None]] = {
    "parameters": check_parameters,
    "chat_stream": check_chat_stream,
    "follow_up": check_follow_up,
    "chat_blocking": check_chat_blocking,
    "stop": check_stop,
    "conversations": check_conversations,
    "messages": check_messages,
    "feedback": check_feedback,
    "suggested": check_suggested,
    "rename": check_rename,
    "delete": check_delete,
    "upload": check_upload,
}

#: What gcite got wrong when the suite was written, by issue 13 item (marks removed as fixed).
XFAIL: dict[tuple[str, str], str] = {}


def cases() -> list[Any]:
    out = []
    for client in CLIENTS:
        for check in CHECKS:
            reason = XFAIL.get((check, client))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(client, check, marks=marks, id=f"{client}-{check}"))
    return out


@pytest.mark.parametrize(("client", "check"), cases())
def test_client_step(client: str, check: str, sdk_run: Callable[[str], Steps]) -> None:
    CHECKS[check](sdk_run(client))


def test_ai_sdk_generate_text_reports_the_usage(sdk_run: Callable[[str], Steps]) -> None:
    check_ai_usage(sdk_run("js")["ai_generate_text"])


def test_ai_sdk_stream_text_reports_the_usage(sdk_run: Callable[[str], Steps]) -> None:
    check_ai_usage(sdk_run("js")["ai_stream_text"])


# --------------------------------------------------------------------------- numbers style

#: What the stand-in's answer ("…登记[C:first]。…说明[C:last]。") looks like to a stock client.
NUMBERED = "访客须在一层大堂服务台登记¹。网页资料也有说明²。"


@pytest.mark.parametrize("step", ["chat_stream", "follow_up", "chat_blocking"])
def test_dify_client_on_a_numbers_key_gets_display_numbers(
    step: str, sdk_run: Callable[[str], Steps]
) -> None:
    """npm dify-client on a ``citation_style = "numbers"`` key: the text it receives has no
    raw marker, and its numbers are the ``position`` of the ``retriever_resources``."""
    data = ok(sdk_run("js-numbers")[step])
    assert data["answer"] == NUMBERED
    check_resources(data["retriever_resources"])  # positions 1 and 2, as the text numbers them
    check_usage(data["usage"])


def test_dify_client_history_on_a_numbers_key_has_no_raw_markers(
    sdk_run: Callable[[str], Steps],
) -> None:
    messages = ok(sdk_run("js-numbers")["messages"])["data"]
    assert [m["answer"] for m in messages] == [NUMBERED, NUMBERED]
    for message in messages:
        check_resources(message["retriever_resources"])


@pytest.mark.parametrize("step", ["ai_stream_text", "ai_generate_text"])
def test_ai_sdk_on_a_numbers_key_gets_display_numbers(
    step: str, sdk_run: Callable[[str], Steps]
) -> None:
    """dify-ai-provider with the Vercel AI SDK: ``streamText`` joins the text deltas itself."""
    data = ok(sdk_run("js-numbers")[step])
    assert data["text"] == NUMBERED and "[C:" not in data["text"]
    usage = data["usage"]
    assert (usage["inputTokens"], usage["outputTokens"]) == USAGE
