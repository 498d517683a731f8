"""Start-up warm-up (service/resources.py): what the first answer of a fresh process would
load - the citation verifier's tables and model - is loaded by ``Resources.warm_up`` (a
fresh worker's first request had cost ~1.5 s of CPU on the event loop under load); then
the objects alive are frozen, out of the garbage collector's full passes. Fresh
interpreter, real modules."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from gcite.config import Settings
from gcite.service import create_app
from gcite.service.resources import Resources
from gcite.testing import live_service
from support.openai_standin import OpenAIStandin

SCRIPT = """
import gc, json, sys
from gcite.config import Settings
from gcite.service.resources import Resources
from gcite.knowledge import sparse
settings = Settings.from_keys(
    data_dir=sys.argv[1], database_url="sqlite:///" + sys.argv[1] + "/chat.sqlite3",
    llm_base_url="http://127.0.0.1:9/v1", llm_model="m", embed_backend=sys.argv[2],
)
resources = Resources(settings)
before = {
    "idf": sparse._idf_table.cache_info().currsize,
    "frozen": gc.get_freeze_count() > 0,
}
resources.warm_up()
after = {
    "idf": sparse._idf_table.cache_info().currsize,
    "frozen": gc.get_freeze_count() > 0,
}
print(json.dumps({"before": before, "after": after}))
"""


def test_warm_up_loads_the_verifier_and_freezes_what_is_loaded(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), "use"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] == {"idf": 0, "frozen": False}
    # and what is loaded is moved out of the garbage collector's way (service/heap.py)
    assert seen["after"] == {"idf": 1, "frozen": True}


MODULES_SCRIPT = """
import json, sys
from gcite.config import Settings
from gcite.service.resources import Resources
model = {"llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "m"} if sys.argv[2] else {}
settings = Settings.from_keys(
    data_dir=sys.argv[1], database_url="sqlite:///" + sys.argv[1] + "/chat.sqlite3",
    embed_backend="use", **model,
)
Resources(settings).warm_up()
loaded = {name: name in sys.modules for name in ("openai", "jieba.analyse")}
from gcite.knowledge import sparse
import jieba.analyse
extractor = jieba.analyse.default_tfidf
same = sparse._idf_table() == (extractor.idf_freq, extractor.median_idf)
print(json.dumps({"loaded": loaded, "same_idf": same}))
"""


@pytest.mark.parametrize("model", [False, True])
def test_the_warm_up_imports_no_model_sdk_without_a_model_nor_jiebas_extractors(
    tmp_path: Path, model: bool
) -> None:
    """Without ``llm_base_url`` (the offline answerer) the warm-up never imports the
    ``openai`` SDK (with one it does: the first answer needs it); the verifier's IDF table
    is jieba's, read without importing jieba's keyword extractors (``jieba.analyse``,
    whose import loads the same table again). Fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", MODULES_SCRIPT, str(tmp_path), "model" if model else ""],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == {"openai": model, "jieba.analyse": False}
    assert seen["same_idf"] is True


JUDGE_SCRIPT = """
import sys
from gcite.config import Settings
from gcite.service.resources import Resources
settings = Settings.from_keys(
    data_dir=sys.argv[1], database_url="sqlite:///" + sys.argv[1] + "/chat.sqlite3",
    llm_base_url=sys.argv[2], llm_model="m", embed_backend="use",
    verify_judge_base_url=sys.argv[2], verify_judge_model="judge",
)
resources = Resources(settings)
resources.warm_up()
print("warmed")
"""


def test_warm_up_never_calls_the_model_nor_the_verifier_judge(tmp_path: Path) -> None:
    """The verifier's warm-up runs its offline part only: no request reaches the judge
    (nor the answer model) at start-up. Judge and model: the OpenAI stand-in."""
    with OpenAIStandin() as judge:
        out = subprocess.run(
            [sys.executable, "-c", JUDGE_SCRIPT, str(tmp_path), judge.base_url],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        assert out.stdout.strip().splitlines()[-1] == "warmed"
        assert "warming up the citation verifier failed" not in out.stderr
        assert judge.requests == []


def _served(data_dir: Path, llm: OpenAIStandin, tmp_path: Path) -> Settings:
    """A service on ``data_dir`` answering with the stand-in model, any key, no web."""
    return Settings.from_keys(
        data_dir=data_dir,
        database_url=f"sqlite:///{tmp_path / 'chat.sqlite3'}",
        llm_base_url=llm.base_url,
        llm_model="standin-model",
        allow_any_key=True,
        web_provider="none",
    )


def test_ready_does_not_wait_for_the_warm_up_and_answers_come_after_it(
    role_kb: Path, llm: OpenAIStandin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up runs in the background: with it blocked (an injected warm-up that waits
    for the test), the server listens and ``/ready`` answers 200; a question asked
    meanwhile is answered once the warm-up has returned (what it loads, an answer needs)."""
    settings = _served(role_kb, llm, tmp_path)
    app = create_app(settings)
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def blocked_warm_up(_resources: Resources) -> None:
        started.set()
        release.wait(120)  # a hang guard
        finished.set()

    # the lifespan builds the app's Resources: their warm-up is replaced on the class
    monkeypatch.setattr(Resources, "warm_up", blocked_warm_up)
    answers: list[httpx.Response] = []
    try:
        with live_service(app) as url:
            assert started.wait(120)  # a hang guard
            ready = httpx.get(f"{url}/ready", timeout=60)
            assert ready.status_code == 200, ready.text
            assert not finished.is_set()

            def ask() -> None:
                answers.append(
                    httpx.post(
                        f"{url}/v1/chat-messages",
                        json={"query": "访客怎么登记？", "user": "u1", "response_mode": "blocking"},
                        headers={"Authorization": "Bearer any"},
                        timeout=120,
                    )
                )

            asking = threading.Thread(target=ask)
            asking.start()
            asking.join(0.5)
            assert not answers  # waiting for the warm-up
            release.set()
            asking.join(120)
            assert answers and answers[0].status_code == 200, answers
            assert answers[0].json()["answer"]
    finally:
        release.set()
    assert finished.is_set()


READY_SCRIPT = """
import json, sys, time
from starlette.testclient import TestClient
from gcite.generate.probe import CACHE_S
from gcite.config import Settings
from gcite.service import create_app
from gcite.service.warmup import WarmUp
begun = []

async def held_back(self):  # /ready's answer would begin the warm-up: recorded instead
    begun.append(True)

WarmUp.after_ready = held_back
settings = Settings.from_keys(
    data_dir=sys.argv[1], database_url="sqlite:///" + sys.argv[2] + "/chat.sqlite3",
    llm_base_url=sys.argv[3], llm_model="m", web_provider="none", allow_any_key=True,
)
modules = ("gcite.verify", "gcite.generate.extractive", "gcite.web.offline")
with TestClient(create_app(settings)) as client:
    # /ready checks live (the model's address among them): on a busy machine the model
    # check may miss its timeout, and its result is kept for CACHE_S: ask again after that,
    # as a load balancer would
    for _ in range(5):
        ready = client.get("/ready")
        if ready.status_code == 200:
            break
        time.sleep(CACHE_S + 0.5)
    at_ready = {name: name in sys.modules for name in modules}
    client.app_state["resources"].warm_up()
    warmed = {name: name in sys.modules for name in modules}
print(json.dumps({"ready": ready.status_code, "checks": ready.json(), "begun": begun,
                  "at_ready": at_ready, "warmed": warmed}))
"""


def test_ready_needs_neither_the_verifier_nor_the_offline_answerer_the_warm_up_loads_them(
    role_kb: Path, llm: OpenAIStandin, tmp_path: Path
) -> None:
    """What ``/ready`` needs (the app, the stores, the model check) loads neither the
    citation verifier's modules, the offline answerer (a model is configured) nor a web
    provider (none is): the verifier is made by the warm-up, which ``/ready``'s answer
    begins. Fresh interpreter."""
    # its own copy: the session's knowledge base may be held open by this test process
    # (an embedded store is opened by one process at a time)
    data_dir = tmp_path / "data"
    shutil.copytree(role_kb, data_dir)
    out = subprocess.run(
        [sys.executable, "-c", READY_SCRIPT, str(data_dir), str(tmp_path), llm.base_url],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["ready"] == 200, seen["checks"]
    assert seen["begun"] and all(seen["begun"])
    assert seen["at_ready"] == {
        "gcite.verify": False,
        "gcite.generate.extractive": False,
        "gcite.web.offline": False,
    }
    # the verifier (and, behind it, the offline answerer's shared modules) by the warm-up
    assert seen["warmed"]["gcite.verify"] is True


def test_the_verifier_is_made_once_under_concurrent_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up thread and the first answers may ask for the verifier at once: it is
    made once, and all get the same one."""
    import gcite.verify

    made: list[object] = []
    real = gcite.verify.make_verifier

    def counting(*args: object, **kwargs: object) -> object:
        made.append(True)
        threading.Event().wait(0.05)  # widens the window for a second maker
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gcite.verify, "make_verifier", counting)
    settings = Settings.from_keys(
        data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'chat.sqlite3'}"
    )
    resources = Resources(settings)
    together = threading.Barrier(8)
    got: list[object] = []

    def first_use() -> None:
        together.wait(60)
        got.append(resources.verifier)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        assert made == [True]
        assert len(got) == 8 and all(v is got[0] for v in got)
    finally:
        resources.conversations.close()


def test_a_question_before_ready_begins_the_warm_up_and_is_answered_with_its_verification(
    role_kb: Path, llm: OpenAIStandin, tmp_path: Path
) -> None:
    """No ``/ready`` and no server saying it listens: the first question begins the
    warm-up, waits for it, and its answer is whole (the verifier made by the warm-up)."""
    from starlette.testclient import TestClient

    settings = _served(role_kb, llm, tmp_path)
    with TestClient(create_app(settings)) as client:
        warming = client.app_state["warming"]
        assert not warming.begun
        answer = client.post(
            "/v1/chat-messages",
            json={"query": "访客怎么登记？", "user": "u1", "response_mode": "blocking"},
            headers={"Authorization": "Bearer any"},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["answer"]
        assert answer.json()["metadata"]["gcite_verification"]["version"] == 1
        assert warming.done


PROCESS_SCRIPT = """
import json, sys, time
from starlette.testclient import TestClient
from gcite.config import Settings
from gcite.knowledge.store import StoreHandles
data_dir, tmp, llm_url, pages, kind = sys.argv[1:6]
settings = Settings.from_keys(
    data_dir=data_dir, database_url="sqlite:///" + tmp + "/chat.sqlite3",
    llm_base_url=llm_url, llm_model="m", allow_any_key=True,
    web_provider="offline", web_dir=pages, web_offline_index="bm25",
)
if kind == "knowledge":  # as `gcite serve --knowledge-fd` makes it
    from gcite.cli.serve import knowledge_app
    _, app = knowledge_app(settings, "internal-key", StoreHandles())
else:  # a chat worker (`gcite serve --fd`), or the single process
    from gcite.service import create_app
    app = create_app(settings)
with TestClient(app) as client:
    client.get("/ready")  # its answer begins the warm-up (ready or not: the model check)
    state = client.app_state
    deadline = time.monotonic() + 120
    while not state["warming"].done and time.monotonic() < deadline:
        time.sleep(0.02)
    resources = state["resources"]
    model = resources.backend
    while hasattr(model, "inner"):
        model = model.inner
    print(json.dumps({
        "warmed": state["warming"].done,
        "verifier": resources._verifier is not None,
        "verifier_module": "gcite.verify" in sys.modules,
        "model_client": model._client is not None,
        "model_sdk": "openai" in sys.modules,
        "web_source": resources.web_source is not None,
        "retrieval": state["retrieval"].warm,
    }))
"""


@pytest.mark.parametrize(
    ("kind", "answering"), [("worker", True), ("knowledge", False)], ids=["worker", "knowledge"]
)
def test_each_process_warms_up_only_what_it_uses(
    role_kb: Path, llm: OpenAIStandin, tmp_path: Path, kind: str, answering: bool
) -> None:
    """A chat worker's warm-up makes the citation verifier and the model's SDK client (and
    it has its web source); the knowledge process of ``gcite serve --workers N`` answers
    no chat (the workers ask it for searches and knowledge-base management): its warm-up
    loads neither the verifier nor the model's SDK, and it builds no web source (the
    offline one would index its folder at once); both warm up the store's search. Fresh
    interpreter each, the apps as ``gcite serve`` makes them."""
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "a.md").write_text("# 页面\n\n巡检记录。", encoding="utf-8")
    args = [str(role_kb), str(tmp_path), llm.base_url, str(pages), kind]
    out = subprocess.run(
        [sys.executable, "-c", PROCESS_SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "warmed": True,
        "verifier": answering,
        "verifier_module": answering,
        "model_client": answering,
        "model_sdk": answering,
        "web_source": answering,
        "retrieval": True,
    }
