"""Every command that embeds runs BLAS on one thread (as `gcite serve` does); the others
leave the process's BLAS as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gcite.config import BLAS_THREAD_VARS

_PROBE = """
import json, os, sys
from gcite.cli import main
try:
    main([sys.argv[1], "--help"])
except SystemExit:
    pass
from threadpoolctl import threadpool_info
blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"env": {k: os.environ.get(k) for k in sys.argv[2:]}, "blas": blas}))
"""


def _probe(command: str, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, command, *BLAS_THREAD_VARS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _clean_env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    return {k: v for k, v in keep.items() if k not in BLAS_THREAD_VARS}


@pytest.mark.parametrize("command", ["ingest", "search", "ask", "eval", "serve"])
def test_embedding_commands_run_blas_on_one_thread(command: str) -> None:
    found = _probe(command, _clean_env())
    assert found["env"] == dict.fromkeys(BLAS_THREAD_VARS, "1")
    assert found["blas"] and set(found["blas"]) == {1}  # type: ignore[arg-type]


def test_the_users_own_thread_count_is_kept_and_other_commands_are_left_alone() -> None:
    env = {**_clean_env(), "OMP_NUM_THREADS": "3"}
    assert _probe("ingest", env)["env"] == {
        "OMP_NUM_THREADS": "3",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    assert _probe("status", _clean_env())["env"] == dict.fromkeys(BLAS_THREAD_VARS)
