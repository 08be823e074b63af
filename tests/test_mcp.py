"""``lexmem mcp`` end to end: the real server spawned over stdio, driven by the SDK's client.

One server serves the module (spawning one costs about a second, loading the model
another); the tests that need a data folder of their own (missing, or a service
holding the lock) start their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from lexmem.config import Paths, digest_path
from lexmem.locks import FileLock

pytestmark = pytest.mark.anyio

TOOLS = {
    "search_memory", "save_memory", "get_memory", "recent_memories", "timeline",
    "confirm_memory", "correct_memory", "forget_memory",
    "record_hook_event",  # Claude Code's hooks' (tests/test_mcp_hooks.py)
}  # fmt: skip
CALL_TIMEOUT = 60.0  # generous: the first call loads the model; a hang must not stall the suite


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def server_env(home: Path, user_home: Path) -> dict[str, str]:
    """The test's isolation (tests/conftest.py's _isolate) for a server that outlives one test."""
    env = dict(os.environ)
    for key in (
        "LEXMEM_LICENCE",
        "LEXMEM_LICENCE_FILE",
        "LEXMEM_DEBUG",
        "DISPLAY",
        "WAYLAND_DISPLAY",
    ):
        env.pop(key, None)
    user_home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(user_home), LEXMEM_HOME=str(home), XDG_DATA_HOME=str(user_home / ".local" / "share"),
        XDG_CONFIG_HOME=str(user_home / ".config"), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )  # fmt: skip
    return env


@asynccontextmanager
async def serve(env: dict[str, str], cwd: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lexmem", "mcp"], env=env, cwd=str(cwd)
    )
    # The server's stderr (its log lines) goes to a file beside the test, not the terminal.
    with open(cwd / "server.stderr", "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(CALL_TIMEOUT):
                await session.initialize()
            yield session


class Client:
    """The SDK's session plus the checks every call makes."""

    def __init__(self, session: ClientSession, home: Path, repo: Path) -> None:
        self.session, self.home, self.repo = session, home, repo

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        with anyio.fail_after(CALL_TIMEOUT):
            result = await self.session.call_tool(tool, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content

    async def error(self, tool: str, **arguments: Any) -> str:
        with anyio.fail_after(CALL_TIMEOUT):
            result = await self.session.call_tool(tool, arguments)
        assert result.is_error, result.structured_content
        text = result.content[0].text  # type: ignore[union-attr]
        assert "\n" not in text and "Traceback" not in text
        return text

    async def save(self, text: str, **arguments: Any) -> str:
        out = await self.call("save_memory", text=text, **arguments)
        assert out["status"] == "saved"
        return str(out["id"])

    async def search_ids(self, query: str, **arguments: Any) -> list[str]:
        out = await self.call("search_memory", query=query, **arguments)
        return [hit["id"] for hit in out["results"]]


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    base = tmp_path_factory.mktemp("mcp")
    repo = base / "repo"
    (repo / ".git").mkdir(parents=True)  # the server runs in a repository: its project
    home = base / "lexmem"
    async with serve(server_env(home, base / "userhome"), repo) as session:
        yield Client(session, home, repo)


async def test_it_lists_the_tools_an_agent_can_call(client: Client) -> None:
    tools = {t.name: t for t in (await client.session.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
    search = tools["search_memory"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["limit"]["maximum"] == 100
    assert set(tools["save_memory"].input_schema["properties"]["type"]["enum"]) == {
        "auto", "semantic", "episodic", "procedural",
    }  # fmt: skip
    assert tools["forget_memory"].annotations is not None
    assert tools["forget_memory"].annotations.destructive_hint is True
    assert tools["search_memory"].annotations is not None
    assert tools["search_memory"].annotations.read_only_hint is True


async def test_save_then_search_get_and_recent_find_it(client: Client) -> None:
    mid = await client.save(
        "The shop project uses PostgreSQL 16 for data storage",
        project="shop",
        title="Shop database",
    )
    hits = (await client.call("search_memory", query="which database does the shop use"))["results"]
    assert hits[0]["id"] == mid
    hit = hits[0]
    assert (
        hit["title"] == "Shop database" and hit["project"] == "shop" and hit["type"] == "semantic"
    )
    assert hit["score"] > 0 and hit["pinned"] is False and hit["created"].startswith("20")
    assert await client.search_ids("PostgreSQL", project="shop", type="semantic") == [mid]
    assert await client.search_ids("PostgreSQL", project="elsewhere") == []

    other = await client.save("To release, run make dist and then make upload", type="procedural")
    got = await client.call("get_memory", ids=[other[:8], mid])  # prefixes, in the order given
    assert [m["id"] for m in got["memories"]] == [other, mid]
    assert got["memories"][0]["type"] == "procedural"
    assert got["memories"][0]["project"] == str(client.repo)  # default: the server's project
    assert (await client.call("get_memory", ids=mid[:10]))["memories"][0]["id"] == mid
    recent = await client.call("recent_memories", limit=2)
    assert [m["id"] for m in recent["memories"]] == [other, mid]
    general = await client.save("I prefer tabs over spaces", project="")
    assert (await client.call("get_memory", ids=general))["memories"][0]["project"] is None


async def test_bad_arguments_are_one_line_tool_errors_and_it_keeps_serving(client: Client) -> None:
    mid = await client.save("The staging server is called kiwi", project="infra")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("search_memory", {"query": ""}, "query"),
        ("search_memory", {"query": "x", "limit": 0}, "limit"),
        ("search_memory", {"query": "x", "limit": 101}, "limit"),
        ("search_memory", {"query": "x", "limit": "many"}, "limit"),
        ("search_memory", {"query": "x", "type": "fact"}, "type"),
        ("search_memory", {}, "query"),
        ("save_memory", {"text": ""}, "text"),
        ("save_memory", {"text": "   "}, "empty"),
        ("save_memory", {"text": "x", "type": "opinion"}, "type"),
        ("save_memory", {"text": "x", "title": " "}, "title"),
        ("get_memory", {"ids": "0123abcd"}, "no memory with id 0123abcd"),
        ("get_memory", {"ids": []}, "at least one"),
        ("get_memory", {"ids": "ab"}, "too short"),
        ("get_memory", {"ids": "not an id"}, "not a memory id"),
        ("recent_memories", {"limit": 1000}, "limit"),
        ("timeline", {"before": 51}, "before"),
        ("timeline", {"anchor": "2026-13-45"}, "anchor"),
        ("timeline", {"anchor": "0123abcd"}, "no memory"),
        ("confirm_memory", {"memory_id": "0123abcd"}, "no memory"),
        ("correct_memory", {"memory_id": "0123abcd", "corrected_text": "y"}, "no memory"),
        ("correct_memory", {"memory_id": mid, "corrected_text": " "}, "empty"),
        ("forget_memory", {"memory_id": "0123abcd-0000-0000-0000-000000000000"}, "no memory"),
        ("no_such_tool", {}, "no_such_tool"),
    ]
    for tool, arguments, expected in cases:
        message = await client.error(tool, **arguments)
        assert message.startswith(f"{tool}: "), message
        assert expected in message, (tool, arguments, message)
    # Still serving, and nothing was changed by the failed calls.
    assert await client.search_ids("kiwi") == [mid]


async def test_correct_memory_supersedes_and_the_old_one_leaves_results(client: Client) -> None:
    old = await client.save("The API rate limit is 100 requests per minute", project="api")
    out = await client.call(
        "correct_memory",
        memory_id=old[:8],
        corrected_text="The API rate limit is 500 requests per minute",
    )
    assert out["status"] == "applied" and out["memory_id"] == old
    new = out["new_id"]
    ids = await client.search_ids("API rate limit requests per minute")
    assert new in ids and old not in ids
    before, after = (await client.call("get_memory", ids=[old, new]))["memories"]
    assert before["status"] == "superseded" and before["superseded_by"] == new
    assert after["status"] == "active" and after["project"] == "api" and "500" in after["content"]
    message = await client.error("correct_memory", memory_id=old, corrected_text="again")
    assert "not active" in message


async def test_forget_memory_removes_it(client: Client) -> None:
    mid = await client.save("The wifi password hint is the dog's name", project="home")
    assert await client.search_ids("wifi password hint") == [mid]
    out = await client.call("forget_memory", memory_id=mid)
    assert out == {"status": "applied", "memory_id": mid, "new_id": None}
    assert await client.search_ids("wifi password hint") == []
    assert "no memory" in await client.error("get_memory", ids=mid)


async def test_confirm_memory_reinforces_it(client: Client) -> None:
    mid = await client.save("Deploys go out on Tuesdays after the standup", project="ops")
    before = (await client.call("get_memory", ids=mid))["memories"][0]["salience"]
    out = await client.call("confirm_memory", memory_id=mid[:8], query="when do deploys go out")
    assert out["status"] == "applied" and out["memory_id"] == mid
    after = (await client.call("get_memory", ids=mid))["memories"][0]["salience"]
    assert after > before


async def test_timeline_lists_memories_around_an_anchor_in_created_order(client: Client) -> None:
    ids = [await client.save(f"Timeline step {n} of the migration", project="tl") for n in range(4)]
    out = await client.call("timeline", anchor=ids[1][:8], project="tl", before=1, after=2)
    assert out["anchor"] == ids[1]
    assert [m["id"] for m in out["memories"]] == ids
    assert [m["position"] for m in out["memories"]] == ["before", "anchor", "after", "after"]
    at = (await client.call("get_memory", ids=ids[2]))["memories"][0]["created"]
    by_time = await client.call("timeline", anchor=at, project="tl", before=2, after=1)
    assert [m["id"] for m in by_time["memories"]] == ids[:3]
    latest = await client.call("timeline", project="tl", before=2, after=0)
    assert [m["id"] for m in latest["memories"]] == ids[2:]
    session = await client.call("timeline", session_id="mcp-explicit", project="tl", after=1)
    assert [m["id"] for m in session["memories"]] == ids[:2]
    assert session["memories"][0]["position"] == "anchor"


async def test_digest_resources_serve_the_current_and_named_projects(client: Client) -> None:
    resources = {str(r.uri): r for r in (await client.session.list_resources()).resources}
    assert resources["lexmem://digest"].mime_type == "text/markdown"
    templates = (await client.session.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["lexmem://digest/{+project}"]

    mid = await client.save("Run the linters before every commit here", pin=True)
    text = (await client.session.read_resource("lexmem://digest")).contents[0].text  # type: ignore[union-attr]
    assert f"[{mid[:8]}]" in text and client.repo.name in text
    named = await client.save("The docs site is built with mkdocs", project="docs")
    text = (await client.session.read_resource("lexmem://digest/docs")).contents[0].text  # type: ignore[union-attr]
    assert f"[{named[:8]}]" in text
    # A repository root path, literally or percent-encoded, names its project too.
    for uri in (
        f"lexmem://digest/{client.repo}",
        "lexmem://digest/" + str(client.repo).replace("/", "%2F"),
    ):
        text = (await client.session.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
        assert f"[{mid[:8]}]" in text
    # The file the service keeps is what is served, when there is one.
    path = digest_path(Paths(client.home), "docs")
    path.write_text("# lexmem · docs\n- [deadbeef] kept by the service\n", encoding="utf-8")
    text = (await client.session.read_resource("lexmem://digest/docs")).contents[0].text  # type: ignore[union-attr]
    assert "kept by the service" in text


async def test_a_missing_data_folder_then_a_running_service(tmp_path: Path) -> None:
    """Two stories on one server (each spawn loads LanceDB and the model): a reader never
    creates the data folder and a save does; with a service holding the lock, a write
    waits a moment and then says it is queued, and lands once the inbox is drained."""
    home = Path(os.environ["LEXMEM_HOME"])
    assert not home.exists()
    async with serve(dict(os.environ), tmp_path) as session:
        c = Client(session, home, tmp_path)
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        assert (await c.call("search_memory", query="anything"))["results"] == []
        assert (await c.call("recent_memories"))["memories"] == []
        assert (await c.call("timeline"))["memories"] == []
        assert "no memory" in await c.error("get_memory", ids="0123abcd")
        text = (await session.read_resource("lexmem://digest")).contents[0].text  # type: ignore[union-attr]
        assert "No memories" in text
        assert not home.exists()  # reading created nothing
        kept = await c.save("The build cache lives in /var/cache/build", project="ci")
        assert home.is_dir()
        assert await c.search_ids("build cache") == [kept]

        service = FileLock(Paths(home).service_lock, timeout=0)
        service.acquire()  # another process is the service now (and it is not draining)
        try:
            t0 = time.monotonic()
            queued = await c.call(
                "save_memory", text="Nightly builds start at 02:00 UTC", project="ci"
            )
            waited = time.monotonic() - t0
            assert queued["status"] == "queued" and queued["ids"] == [] and queued["id"]
            assert 2.5 <= waited < 15
            gone = await c.call("forget_memory", memory_id=kept)
            assert gone == {"status": "queued", "memory_id": kept, "new_id": None}
            assert await c.search_ids("build cache") == [kept]  # not applied yet
            assert "no memory" in await c.error("get_memory", ids=queued["id"])
        finally:
            service.release()
        # No service now: the next write drains the inbox on the spot, queued events first.
        await c.save("The CI runners have 8 GB of memory", project="ci")
        got = await c.call("get_memory", ids=queued["id"])
        assert got["memories"][0]["content"] == "Nightly builds start at 02:00 UTC"
        assert kept not in await c.search_ids("build cache")


def test_the_server_starts_without_the_store_or_the_model() -> None:
    """Start-up cost is the SDK's: building the server opens no store and loads no model."""
    code = (
        "import sys, asyncio\n"
        "from lexmem.agents.mcp_server import MemoryTools, build_server\n"
        "server = build_server(MemoryTools('/nonexistent/lexmem'))\n"
        "tools = asyncio.run(server.list_tools())\n"
        "heavy = ('lancedb', 'pyarrow', 'fastembed', 'onnxruntime', 'duckdb')\n"
        "print(len(tools), ','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["9"]
