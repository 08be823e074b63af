"""A search's query, secret included, is never echoed back nor kept: MCP ``search_memory``
through the SDK's client (in its own process, and relayed to a real ``lexmem serve``),
``lexmem search --json`` as a subprocess (answered by the CLI itself, and by the service
over its reader socket); then a scan of the data folder that decodes every LanceDB
table version (``tests/diskscan.py``) finds the secret nowhere: not in the access
records the searches leave, the logs, or the tables.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from diskscan import find_markers
from faultkit import environment, lexmem_command
from test_mcp import Client, server_env
from test_optout_cwd import mcp_session
from test_readers import serving

# A GitHub token's documented shape; its tail is the marker looked for on disk.
TAIL = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
SECRET = f"ghp_{TAIL}"
QUERY = f"which token deploys the shop {SECRET}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def search_json(home: Path, *, cold: bool) -> dict[str, object]:
    env = environment(home)
    if cold:
        env["LEXMEM_NO_SERVICE"] = "1"
    done = subprocess.run(
        [*lexmem_command(), "search", QUERY, "--json"], capture_output=True, text=True,
        env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert TAIL not in done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert isinstance(answer, dict)
    return answer


@pytest.mark.anyio
async def test_a_secret_in_a_query_is_neither_echoed_nor_kept(tmp_path: Path) -> None:
    home = tmp_path / "lexmem"
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    env = server_env(home, tmp_path / "userhome")
    done = subprocess.run(
        [*lexmem_command(), "remember", "The shop deploys with the CI token in the vault."],
        env=environment(home), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    answer = search_json(home, cold=True)
    assert answer["query"] == "which token deploys the shop [REDACTED:github_token]"
    assert answer["hits"]  # the search itself ran as ever
    for relayed in (False, True):
        with serving(home) if relayed else open(os.devnull):
            async with mcp_session(env, repo, relayed=relayed) as session:
                out = await Client(session, home, repo).call("search_memory", query=QUERY)
                assert TAIL not in json.dumps(out)
                assert out["query"] == "which token deploys the shop [REDACTED:github_token]"
                assert out["results"]
            if relayed:
                assert search_json(home, cold=False)["query"] == answer["query"]
    assert find_markers(home, [TAIL]) == []
