"""What the client conformance tests configure: the app key, its app settings, the usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DATASET = "访客手册"
KEY = "app-sdk-key"
#: An app key with ``citation_style = "numbers"``: answers for stock clients, no raw markers.
NUMBERS_KEY = "app-sdk-numbers"
WEB_KEY = "sdk-web-key"
#: External Knowledge API keys (roles 安保主管); the second one exposes access_roles.
RETRIEVAL_KEY = "kb-sdk-key"
RETRIEVAL_EXPOSE_KEY = "kb-sdk-expose"
APP_NAME = "访客助手"
OPENING = "您好，我是访客助手，可以回答登记、门禁和停车的问题。"
SUGGESTED = ("访客登记在哪里办理？", "访客车辆停在哪里？")
#: Token usage the model stand-in reports for every answer (prompt, completion).
USAGE = (321, 17)
#: A question containing this gets a slow answer (to stop it).
SLOW_MARK = "慢慢"


@dataclass
class SdkService:
    """The service the clients talk to: ``base_url`` (no ``/v1``), its settings, the model
    stand-in (``support.openai_standin.OpenAIStandin``)."""

    base_url: str
    settings: Any
    llm: Any
