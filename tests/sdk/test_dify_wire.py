"""Dify Service API facts no SDK call covers, checked over HTTP against the real service.

Sources: Dify's OpenAPI spec (../shared/reference/dify-openapi-service.json) and Dify's
service API code (dify-protocol.md §1): ``user`` is optional on the lists (Dify then
uses its ``DEFAULT-USER`` end user), ``sort_by`` orders conversations, the app
endpoints ``/info``, ``/meta``, ``/site``, conversation variables, and the External
Knowledge API (dify-ecosystem.md §1: ``top_k`` may be null; records' metadata reaches
end users, so role names stay server side).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sdk_setup import APP_NAME, DATASET, KEY, RETRIEVAL_EXPOSE_KEY, RETRIEVAL_KEY, SdkService

AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def http(sdk_service: SdkService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{sdk_service.base_url}/v1", headers=AUTH, timeout=60) as client:
        yield client


def ask(http: httpx.Client, query: str, user: str, conversation_id: str = "") -> dict[str, Any]:
    body = {"query": query, "inputs": {}, "user": user, "response_mode": "blocking"}
    if conversation_id:
        body["conversation_id"] = conversation_id
    response = http.post("/chat-messages", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_lists_without_user_are_dify_default_users(http: httpx.Client) -> None:
    answer = ask(http, "访客登记在哪里办理？", "DEFAULT-USER")
    listed = http.get("/conversations")
    assert listed.status_code == 200, listed.text
    assert answer["conversation_id"] in [c["id"] for c in listed.json()["data"]]
    history = http.get("/messages", params={"conversation_id": answer["conversation_id"]})
    assert history.status_code == 200, history.text
    assert [m["id"] for m in history.json()["data"]] == [answer["message_id"]]
    other = http.get("/conversations", params={"user": "someone-else"}).json()["data"]
    assert answer["conversation_id"] not in [c["id"] for c in other]


def test_conversations_sort_by(http: httpx.Client) -> None:
    user = "sorting-user"
    first = ask(http, "访客登记在哪里办理？", user)["conversation_id"]
    time.sleep(1.1)  # created_at / updated_at are whole seconds
    second = ask(http, "访客车辆停在哪里？", user)["conversation_id"]
    time.sleep(1.1)
    ask(http, "临时门禁卡什么时候归还？", user, first)  # first is now the most recently updated

    def order(sort_by: str) -> list[str]:
        response = http.get("/conversations", params={"user": user, "sort_by": sort_by})
        assert response.status_code == 200, response.text
        return [c["id"] for c in response.json()["data"]]

    assert order("created_at") == [first, second]
    assert order("-created_at") == [second, first]
    assert order("updated_at") == [second, first]
    assert order("-updated_at") == [first, second]
    page = http.get("/conversations", params={"user": user, "sort_by": "created_at", "limit": 1})
    assert [c["id"] for c in page.json()["data"]] == [first] and page.json()["has_more"]
    rest = http.get(
        "/conversations",
        params={"user": user, "sort_by": "created_at", "last_id": first},
    )
    assert [c["id"] for c in rest.json()["data"]] == [second]
    bad = http.get("/conversations", params={"user": user, "sort_by": "name"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_param"


def test_app_info_meta_and_site(http: httpx.Client) -> None:
    info = http.get("/info")
    assert info.status_code == 200, info.text
    assert info.json() == {
        "name": APP_NAME,
        "description": "",
        "tags": [],
        "mode": "advanced-chat",
        "author_name": "",
    }
    meta = http.get("/meta")
    assert meta.status_code == 200 and meta.json() == {"tool_icons": {}}
    site = http.get("/site")
    assert site.status_code == 200, site.text
    assert site.json()["title"] == APP_NAME
    assert site.json()["default_language"] == "zh-Hans"
    assert http.get("/info", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_conversation_variables_are_an_empty_list(http: httpx.Client) -> None:
    conversation = ask(http, "访客登记在哪里办理？", "vars-user")["conversation_id"]
    response = http.get(f"/conversations/{conversation}/variables", params={"user": "vars-user"})
    assert response.status_code == 200, response.text
    assert response.json() == {"limit": 20, "has_more": False, "data": []}
    other = http.get(f"/conversations/{conversation}/variables", params={"user": "intruder"})
    assert other.status_code == 404
    assert other.json() == {
        "code": "not_found",
        "message": "Conversation Not Exists.",
        "status": 404,
    }


def retrieve(sdk_service: SdkService, key: str, setting: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{sdk_service.base_url}/retrieval",
        headers={"Authorization": f"Bearer {key}"},
        json={"knowledge_id": DATASET, "query": "监控中心备用钥匙", "retrieval_setting": setting},
        timeout=60,
    )


def test_external_knowledge_top_k_null_means_the_default(sdk_service: SdkService) -> None:
    response = retrieve(sdk_service, RETRIEVAL_KEY, {"top_k": None, "score_threshold": 0.0})
    assert response.status_code == 200, response.text
    records = response.json()["records"]
    assert 1 <= len(records) <= sdk_service.settings.knowledge.top_k


def test_external_knowledge_keeps_role_names_server_side(sdk_service: SdkService) -> None:
    setting = {"top_k": 5, "score_threshold": 0.0}
    records = retrieve(sdk_service, RETRIEVAL_KEY, setting).json()["records"]
    guarded = [r for r in records if "监控中心" in r["content"]]
    assert guarded, records  # the key's role sees the guarded document...
    for record in records:  # ...but the names of the roles never leave the server
        assert "access_roles" not in record["metadata"], record["metadata"]
        assert "安保主管" not in str(record)
    exposed = retrieve(sdk_service, RETRIEVAL_EXPOSE_KEY, setting).json()["records"]
    roles = [r["metadata"].get("access_roles") for r in exposed if "监控中心" in r["content"]]
    assert roles and all(r == ["安保主管"] for r in roles)


def dify_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message", "status"} and body["status"] == status
    assert body["code"] == code, body
    message: str = body["message"]
    return message


def test_feedback_checks_its_input_and_the_owner(http: httpx.Client) -> None:
    answer = ask(http, "访客登记在哪里办理？", "fb-user")
    url = f"/messages/{answer['message_id']}/feedbacks"
    dify_error(http.post(url, json={"rating": "like"}), 400, "invalid_param")  # user required
    dify_error(http.post(url, json={"rating": "great", "user": "fb-user"}), 400, "invalid_param")
    dify_error(http.post(url, content=b"[1]"), 400, "invalid_param")
    other = http.post(url, json={"rating": "like", "user": "intruder"})
    assert dify_error(other, 404, "not_found") == "Message Not Exists."
    assert http.post(url, json={"rating": "dislike", "user": "fb-user"}).json() == {
        "result": "success"
    }
    history = http.get("/messages", params={"conversation_id": answer["conversation_id"],
                                            "user": "fb-user"}).json()["data"]  # fmt: skip
    assert history[0]["feedback"] == {"rating": "dislike"}
    http.post(url, json={"rating": None, "user": "fb-user"})  # revoked
    history = http.get("/messages", params={"conversation_id": answer["conversation_id"],
                                            "user": "fb-user"}).json()["data"]  # fmt: skip
    assert history[0]["feedback"] is None


def test_rename_delete_and_suggested_errors(http: httpx.Client) -> None:
    answer = ask(http, "访客车辆停在哪里？", "conv-user")
    conv = answer["conversation_id"]
    dify_error(http.post(f"/conversations/{conv}/name", json={"user": "conv-user"}), 400,
               "invalid_param")  # fmt: skip
    missing = http.post(f"/conversations/{conv}/name", json={"name": "x", "user": "intruder"})
    assert dify_error(missing, 404, "not_found") == "Conversation Not Exists."
    unknown = http.get("/messages/not-a-message/suggested", params={"user": "conv-user"})
    assert dify_error(unknown, 404, "not_found") == "Message Not Exists."
    off = http.get(f"/messages/{answer['message_id']}/suggested", params={"user": "conv-user"})
    assert dify_error(off, 400, "bad_request") == "Suggested Questions Is Disabled."
    gone = http.request("DELETE", f"/conversations/{conv}", json={"user": "intruder"})
    dify_error(gone, 404, "not_found")
    done = http.request("DELETE", f"/conversations/{conv}", json={"user": "conv-user"})
    assert done.status_code == 204 and done.content == b""
    dify_error(http.get("/messages", params={"conversation_id": conv, "user": "conv-user"}), 404,
               "not_found")  # fmt: skip


def test_features_that_are_off_answer_as_dify(http: httpx.Client) -> None:
    one = {"file": ("a.txt", b"x", "text/plain")}
    assert dify_error(http.post("/files/upload", files=one, data={"user": "u"}), 415,
                      "unsupported_file_type") == "File type not allowed."  # fmt: skip
    dify_error(http.post("/files/upload", data={"user": "u"}, files={"other": ("a", b"x")}),
               400, "no_file_uploaded")  # fmt: skip
    dify_error(http.post("/files/upload", json={"user": "u"}), 400, "no_file_uploaded")
    two = [("file", ("a.txt", b"x", "text/plain")), ("file", ("b.txt", b"y", "text/plain"))]
    dify_error(http.post("/files/upload", files=two), 400, "too_many_files")
    speech = http.post("/audio-to-text", files={"file": ("a.mp3", b"x", "audio/mp3")})
    assert dify_error(speech, 400, "invalid_param") == "Speech to text is not enabled"
    tts = http.post("/text-to-audio", json={"text": "你好", "user": "u"})
    assert dify_error(tts, 400, "invalid_param") == "TTS is not enabled"
    for method, path in [("GET", "/parameters"), ("POST", "/files/upload"),
                         ("GET", "/meta"), ("POST", "/audio-to-text")]:  # fmt: skip
        denied = http.request(method, path, headers={"Authorization": "Bearer wrong"})
        dify_error(denied, 401, "unauthorized")
