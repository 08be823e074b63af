"""``lexmem mcp``: lexmem as an MCP server over stdio, for any agent that speaks MCP.

Tools search, read, save, confirm, correct and forget memories; resources serve the
projects' context digests. The server is a reader like any other process, and a
producer like the CLI: every change is an inbox event for the single writer (the
capture service). When no service runs, the server drains the inbox on the spot, as
the CLI does; when one runs, it waits a moment (:data:`WAIT_S`) for the change to be
committed and otherwise says, truthfully, that it is queued.

Constraints:

- Start fast: an agent spawns this process when a session starts and waits for
  ``initialize``. Nothing here imports LanceDB or loads the model at import time; the
  core is opened by the first call that needs it.
- stdout is the protocol. Logging goes to stderr and, once the data folder exists,
  to ``logs/lexmem.log`` (the SDK also points fd 1 at stderr while it serves, so a
  stray ``print`` cannot corrupt the stream).
- A missing data folder is not an error for a reader: searches come back empty and
  nothing is created until something is saved.
- Every failure an agent can cause comes back as a tool error with one line of text;
  the server keeps serving.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    CallToolResult,
    InputRequiredResult,
    ToolAnnotations,
)
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field, ValidationError

from lexmem import __version__
from lexmem.agents import hookcall
from lexmem.capture.policy import is_opted_out, optout_rules, project_opted_out, project_root
from lexmem.config import Paths, digest_path, resolve_paths
from lexmem.errors import InvalidInputError, LexmemError

if TYPE_CHECKING:
    from lexmem.api import Lexmem
    from lexmem.models import Memory
    from lexmem.store.search import SearchHit

__all__ = [
    "WAIT_S",
    "McpMemory",
    "MemoryOut",
    "MemoryTools",
    "build_server",
    "run_stdio",
    "serve_connection",
]

log = logging.getLogger("lexmem.mcp")

WAIT_S = 3.0  # how long a write waits for a running service before answering "queued"
MAX_LIMIT = 100
TYPES = ("semantic", "episodic", "procedural")
T = TypeVar("T")

INSTRUCTIONS = """\
lexmem is the user's local long-term memory: decisions, fixes, constraints, preferences \
and procedures kept across sessions. Search it (search_memory) before answering \
questions about past decisions or how this project does things; save durable facts the \
user states or that you establish (save_memory), not chit-chat. When a search result \
helped, call confirm_memory on it; when one is wrong or outdated, call correct_memory \
with the right text. Memory ids may be shortened to their first 8 characters. The \
resource lexmem://digest is this project's context digest."""


# -- what the tools return -------------------------------------------------------------


class MemoryOut(BaseModel):
    """One memory, as an agent needs it."""

    id: str = Field(description="The memory's id (a unique prefix of 8+ characters works too).")
    title: str
    content: str
    type: str = Field(description="semantic (a fact), episodic (an event) or procedural (how to).")
    status: str = Field(description="active, archived or superseded.")
    project: str | None = Field(description="A repository root or project name; null: general.")
    pinned: bool
    created: str = Field(description="When it was stored (ISO 8601, UTC).")
    source: str = Field(description="How it was learned (explicit, correction, agent_response, …).")
    salience: float
    session_id: str | None
    superseded_by: str | None = Field(description="The memory that replaced this one, if any.")


class SearchHitOut(MemoryOut):
    score: float = Field(
        description="The final rank score (relevance blended with salience, recency, pin)."
    )
    relevance: float = Field(description="How well it matches the query, 0 to 1.")
    keyword_rank: int | None = Field(description="Rank by keywords (BM25), if it matched them.")
    similarity: float | None = Field(
        description="Cosine similarity by meaning, if found by meaning."
    )


class SearchOut(BaseModel):
    query: str
    results: list[SearchHitOut] = Field(description="Best first; empty when nothing matches.")


class MemoriesOut(BaseModel):
    memories: list[MemoryOut]


class SaveOut(BaseModel):
    status: Literal["saved", "queued"] = Field(
        description="saved: stored and searchable now; queued: the running lexmem service "
        "has it and will store it shortly under `id`."
    )
    id: str = Field(description="The memory's id (the first chunk's, when a long text was split).")
    ids: list[str] = Field(description="Every memory stored (one per chunk); empty while queued.")
    type: str | None = Field(description="The type it was stored as; null while queued.")
    project: str | None


class TimelineItem(MemoryOut):
    position: Literal["before", "anchor", "after"]


class TimelineOut(BaseModel):
    anchor: str = Field(description="The anchor: a memory id, or a time (ISO 8601).")
    memories: list[TimelineItem] = Field(description="Oldest first.")


class ChangeOut(BaseModel):
    status: Literal["applied", "queued"] = Field(
        description="applied: committed; queued: the running lexmem service will apply it shortly."
    )
    memory_id: str = Field(description="The memory the change was about (full id).")
    new_id: str | None = Field(default=None, description="The replacement memory (correct_memory).")


def _out(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id, "title": m.title, "content": m.content, "type": str(m.type), "status": str(m.status),
        "project": m.project, "pinned": m.pinned, "created": m.created_at.isoformat(),
        "source": str(m.source), "salience": round(m.salience, 4), "session_id": m.session_id,
        "superseded_by": m.superseded_by,
    }  # fmt: skip


def _hit(h: SearchHit) -> dict[str, Any]:
    sim = None if h.similarity is None else round(h.similarity, 6)
    return {**_out(h.memory), "score": round(h.score, 6), "relevance": round(h.relevance, 6),
            "keyword_rank": h.bm25_rank, "similarity": sim}  # fmt: skip


def _one_line(message: str) -> str:
    """A message folded onto one line (every error an agent sees is one line)."""
    return " ".join(message.split())


# -- the tools, as plain Python --------------------------------------------------------


class MemoryTools:
    """What the MCP tools do, on one data folder, independent of the protocol.

    Calls arrive on the SDK's worker threads; one lock serialises them, since one
    core (one store handle, one model) serves them all.
    """

    def __init__(
        self, home: str | Path | None = None, *, cwd: str | None = None,
        core: Lexmem | None = None, lock: threading.RLock | None = None,
    ) -> None:  # fmt: skip
        """``core``: an open core to share (the service's, warm), which :meth:`close`
        leaves open; ``lock``: the lock its users share."""
        if core is not None:
            home = core.paths.home
        self.paths = Paths(Path(home).expanduser().absolute()) if home else resolve_paths()
        self.cwd = cwd or os.getcwd()
        self.project = project_root(self.cwd)
        self._lm: Lexmem | None = core
        self._shared = core is not None
        self._lock = lock or threading.RLock()
        self.wait = WAIT_S

    # -- the core, opened when first needed -------------------------------------------

    def core(self, *, create: bool) -> Lexmem | None:
        """The opened core; ``None`` for a reader when there is no data folder (yet)."""
        if self._lm is None:
            if not create and not self.paths.store.is_dir():
                return None  # a reader never creates the data folder
            from lexmem.api import Lexmem

            t0 = time.perf_counter()
            self._lm = Lexmem.open(self.paths.home)
            _log_to_file(self.paths.logs / "lexmem.log")
            log.info(
                "[MEM:MCP] opened %s in %.0f ms", self.paths.home, (time.perf_counter() - t0) * 1e3
            )
        elif not self._shared:  # the service's own core sees its commits
            self._lm.refresh()  # another process (the service, the CLI) may have committed
        return self._lm

    def _writer_core(self) -> Lexmem:
        lm = self.core(create=True)
        assert lm is not None  # create=True always opens
        return lm

    # -- what an agent is never served ---------------------------------------------------

    def _hidden(self, lm: Lexmem) -> tuple[str, ...]:
        """The opted-out projects, read now: ``lexmem optout add`` or a marker file may
        have come since the last call. Their memories stay the person's (the CLI and
        the browser show them until purged); an agent is served none of them."""
        from lexmem.service.digest import opted_out_projects

        return opted_out_projects(lm)

    def _visible(self, lm: Lexmem, ident: str) -> str:
        """The full id of a memory an agent may see; an opted-out one is not there for it."""
        mid = lm.resolve(ident)
        memory = lm.store.get_optional(mid, with_embedding=False)
        if memory is not None and memory.project in self._hidden(lm):
            raise InvalidInputError(f"no memory with id {ident.strip()}")
        return mid

    def close(self) -> None:
        with self._lock:
            if self._lm is not None and not self._shared:
                self._lm.close()
            self._lm = None

    # -- reading ----------------------------------------------------------------------------

    def search(
        self, query: str, *, project: str | None = None, type: str | None = None, limit: int = 10
    ) -> dict[str, Any]:
        from lexmem.models import MemoryType
        from lexmem.store.protocol import MemoryFilter

        if not query.strip():
            raise InvalidInputError("the search query is empty")
        _check_limit(limit)
        with self._lock:
            lm = self.core(create=False)
            if lm is None:
                return {"query": _echo(query), "results": []}
            flt = MemoryFilter(
                project=project or None, type=MemoryType(type) if type else None,
                exclude_projects=self._hidden(lm),
            )  # fmt: skip
            result = lm.search(query, flt, limit=limit)
        return {"query": _echo(query), "results": [_hit(h) for h in result.hits]}

    def get(self, ids: str | Sequence[str]) -> dict[str, Any]:
        wanted = [ids] if isinstance(ids, str) else list(ids)
        wanted = [i.strip() for i in wanted]
        if not wanted or not all(wanted):
            raise InvalidInputError("give at least one memory id")
        if len(wanted) > MAX_LIMIT:
            raise InvalidInputError(f"at most {MAX_LIMIT} ids at a time, not {len(wanted)}")
        with self._lock:
            lm = self._reader_or_unknown(wanted[0])
            full = [lm.resolve(i) for i in wanted]
            hidden = self._hidden(lm)
            found = {m.id: m for m in lm.memories_for(full) if m.project not in hidden}
        missing = [i for i, f in zip(wanted, full, strict=True) if f not in found]
        if missing:
            raise InvalidInputError(f"no memory with id {missing[0]}")
        return {"memories": [_out(found[f]) for f in full]}

    def recent(self, *, project: str | None = None, limit: int = 10) -> dict[str, Any]:
        from lexmem.store.protocol import MemoryFilter

        _check_limit(limit)
        with self._lock:
            lm = self.core(create=False)
            if lm is None:
                return {"memories": []}
            flt = MemoryFilter(project=project or None, exclude_projects=self._hidden(lm))
            memories = lm.list_memories(flt, limit=limit)
        return {"memories": [_out(m) for m in memories]}

    def timeline(
        self,
        *,
        anchor: str | None = None,
        session_id: str | None = None,
        project: str | None = None,
        before: int = 5,
        after: int = 5,
    ) -> dict[str, Any]:
        """Active memories around an anchor, oldest first.

        The anchor is a memory id, or a time. Without one, a session's timeline starts
        at its first memory (it reads the session from the start), and any other
        timeline ends now (the latest memories).
        """
        from lexmem.store.protocol import MemoryFilter

        for name, n in (("before", before), ("after", after)):
            if not 0 <= n <= 50:
                raise InvalidInputError(f"{name} must be between 0 and 50, not {n}")
        flt = MemoryFilter(project=project or None, session_id=session_id or None)
        with self._lock:
            lm = self.core(create=False)
            if lm is None:
                if anchor and not _looks_like_time(anchor):
                    raise InvalidInputError(f"no memory with id {anchor.strip()}")
                return {"anchor": anchor or "now", "memories": []}
            flt = _with(flt, exclude_projects=self._hidden(lm))
            centre: Memory | None = None
            if anchor and not _looks_like_time(anchor):
                centre = lm.get(self._visible(lm, anchor.strip()))
                when = centre.created_at
            elif anchor:
                when = _parse_time(anchor)
            elif session_id:
                first = lm.list_ids(flt)[-1:]  # newest first: the last is the session's first
                if not first:
                    raise InvalidInputError(f"no memories in session {session_id}")
                centre = lm.get(first[0])
                when = centre.created_at
            else:
                when = datetime.now(UTC)
            older = lm.list_ids(_with(flt, created_before=when))[:before][::-1]
            newer_all = [
                i
                for i in lm.list_ids(_with(flt, created_after=when))
                if centre is None or i != centre.id
            ]
            newer = newer_all[-after:][::-1] if after else []
            items: list[dict[str, Any]] = []
            for m in lm.memories_for(older):
                items.append({**_out(m), "position": "before"})
            if centre is not None:
                items.append({**_out(centre), "position": "anchor"})
            for m in lm.memories_for(newer):
                items.append({**_out(m), "position": "after"})
        return {"anchor": centre.id if centre is not None else when.isoformat(), "memories": items}

    def _reader_or_unknown(self, ident: str) -> Lexmem:
        """The core for a call that names a memory: with no data folder, no memory exists."""
        lm = self.core(create=False)
        if lm is None:
            raise InvalidInputError(f"no memory with id {ident.strip()}")
        return lm

    # -- writing, through the inbox -----------------------------------------------------------

    def save(
        self,
        text: str,
        *,
        type: str | None = None,
        project: str | None = None,
        title: str | None = None,
        pin: bool = False,
    ) -> dict[str, Any]:
        from lexmem.capture.inbox import derived_id
        from lexmem.capture.policy import refuse_opted_out
        from lexmem.service.client import remember_through_inbox

        if not text.strip():
            raise InvalidInputError("nothing to remember: the text is empty")
        if title is not None and not title.strip():
            raise InvalidInputError("the title is empty (leave it out to use the first sentence)")
        if type not in (None, "auto", *TYPES):
            raise InvalidInputError(f"unknown type {type!r} (use auto, {', '.join(TYPES)})")
        where = self.project if project is None else (project.strip() or None)
        # Before the data folder is opened (or created): a refused save writes nothing.
        # A server running inside an opted-out repository saves nothing at all, general
        # memories included: what its agent learns there is that repository's.
        refuse_opted_out(self.paths, None, where, cwd=self.cwd)
        with self._lock:
            done = remember_through_inbox(
                self._writer_core(), text, mtype=None if type in (None, "auto") else type,
                project=where, title=title.strip() if title else None, pin=pin, agent="mcp",
                wait=self.wait,
            )  # fmt: skip
        if done.queued:
            return {
                "status": "queued", "id": derived_id("explicit", done.event_id), "ids": [],
                "type": None, "project": where,
            }  # fmt: skip
        first = done.memories[0]
        return {
            "status": "saved", "id": first.id, "ids": [m.id for m in done.memories],
            "type": str(first.type), "project": first.project,
        }  # fmt: skip

    def confirm(self, memory_id: str, query: str | None = None) -> dict[str, Any]:
        """Seed 000's search confirmation: the memory answered a search, so it is reinforced."""
        with self._lock:
            lm = self._reader_or_unknown(memory_id)
            mid = self._visible(lm, memory_id)
            meta = {"memory_id": mid, "query": (query or "").strip()}
            status, _ = self._send("search_confirmation", meta, acked_by="processed")
        log.info("[MEM:CAPTURE] Search confirmation for memory %s (%s)", mid, status)
        return {"status": status, "memory_id": mid}

    def correct(self, memory_id: str, corrected_text: str) -> dict[str, Any]:
        """Supersede a memory by a corrected text: the old one leaves active results."""
        from lexmem.capture.inbox import derived_id

        if not corrected_text.strip():
            raise InvalidInputError("the corrected text is empty (use forget_memory to delete)")
        with self._lock:
            lm = self._reader_or_unknown(memory_id)
            mid = self._visible(lm, memory_id)
            status_now = lm.get(mid).status
            if status_now != "active":
                raise InvalidInputError(f"memory {mid[:8]} is not active (it is {status_now})")
            op = {
                "op": "supersede",
                "kwargs": {"old": mid, "by": None, "with_text": _scrub(corrected_text)},
            }
            status, event_id = self._send("memory_op", op, acked_by="audit")
        return {"status": status, "memory_id": mid, "new_id": derived_id("op", event_id, "memory")}

    def forget(self, memory_id: str) -> dict[str, Any]:
        """Delete a memory for good (its links and history too)."""
        with self._lock:
            mid = self._reader_or_unknown(memory_id).resolve(memory_id)
            status, _ = self._send(
                "memory_op", {"op": "forget", "kwargs": {"ident": mid}}, acked_by="audit"
            )
        return {"status": status, "memory_id": mid}

    def _send(
        self, event_type: str, metadata: dict[str, Any], *, acked_by: Literal["audit", "processed"]
    ) -> tuple[Literal["applied", "queued"], str]:
        """Write one event for the single writer and wait (briefly) until it is committed.

        A memory operation is acknowledged by its audit entry (which also says whether it
        failed); a search confirmation by the journal's record of the event.
        """
        from lexmem.capture.inbox import derived_id, make_event
        from lexmem.service.client import drain_if_no_service, enqueue

        lm = self._writer_core()
        event = make_event(event_type, "", session_id="mcp-ops", agent="mcp", metadata=metadata)
        enqueue(lm, event)  # redacted on the way: a confirmed search's query is text too
        drain_if_no_service(lm)
        event_id: str = event["event_id"]
        entry_id = derived_id("op", event_id)
        deadline = time.monotonic() + self.wait
        while True:
            lm.refresh()
            if acked_by == "processed":
                if lm.journal.seen([event_id]):
                    return "applied", event_id
            else:
                found = lm.journal.audit_entry(entry_id)
                if found is not None:
                    if found.decision == "failed":
                        raise LexmemError(found.reason)
                    return "applied", event_id
            if time.monotonic() >= deadline:
                return "queued", event_id
            time.sleep(0.05)

    # -- hook events --------------------------------------------------------------------------

    def record_hook(self, fields: dict[str, Any]) -> str:
        """A Claude Code hook event, as its ``mcp_tool`` hook hands it over: recorded as
        ``lexmem-hook claude`` would record it. Answers ``{}``: a hook's output that asks
        for nothing, so nothing of it reaches the model."""
        payload = hookcall.payload_from_fields(fields)
        ids = hookcall.record_payload(self.paths, payload)
        log.debug(
            "[MEM:CAPTURE] hook event %s: %d event(s)", payload.get("hook_event_name"), len(ids)
        )
        return "{}"

    # -- the context digest -----------------------------------------------------------------

    def digest(self, project: str | None, *, cwd: str | None = None) -> str:
        """A project's context digest: the file the service keeps, else rendered now.

        As the SessionStart hook does, a project with no digest of its own gets the
        general one (memories kept with no project); and as the hook does, an opted-out
        project gets nothing at all (a digest file written before the opt-out included).
        """
        rules = optout_rules(self.paths)
        if project_opted_out(project, rules) or (cwd and is_opted_out(cwd, rules)):
            return (
                f"# lexmem\n{project or cwd} is opted out: lexmem keeps and serves nothing of it.\n"
            )
        for key in (project, None) if project else (None,):
            try:
                text = digest_path(self.paths, key).read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            if text.strip():
                return text
        with self._lock:
            lm = self.core(create=False)
            if lm is not None:
                from lexmem.service.digest import render_digest

                for key in (project, None) if project else (None,):
                    text = render_digest(lm, key)
                    if text.strip():
                        return text
        where = f"project {project}" if project else "any project"
        return f"# lexmem\nNo memories for {where} yet: save_memory keeps one.\n"


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")


def _with(flt: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(flt, **changes)


def _looks_like_time(text: str) -> bool:
    """A time starts with a four-digit year and a dash; an id prefix never has a dash there."""
    t = text.strip()
    return len(t) >= 10 and t[:4].isdigit() and t[4] == "-" and t[7] == "-"


def _parse_time(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInputError(
            f"the anchor must be a memory id or a time like 2026-01-31T09:00, not {text!r}"
        ) from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _echo(query: str) -> str:
    """A query as an answer shows it: secrets redacted, never echoed back to the agent
    (whose transcript is kept on disk)."""
    from lexmem.capture.redact import redact

    return redact(query).text


def _scrub(text: str) -> str:
    """Secrets never reach the inbox, whoever writes the event."""
    from lexmem.capture.policy import scrub

    return scrub(text)


def _log_to_file(path: Path) -> None:
    """The [MEM:…] lines go to the data folder's log too (once it exists)."""
    from logging.handlers import RotatingFileHandler

    root = logging.getLogger("lexmem")
    if any(getattr(h, "baseFilename", None) == str(path) for h in root.handlers):
        return
    try:
        handler = RotatingFileHandler(path, maxBytes=5_000_000, backupCount=2, encoding="utf-8")
    except OSError as exc:
        log.warning("[MEM:MCP] cannot write %s: %s", path, exc)
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(handler)


# -- the protocol ------------------------------------------------------------------------


class McpMemory(MCPServer[Any]):
    """The SDK's server, with every tool failure reported as one line an agent can act on.

    The SDK reports an argument that fails the schema with pydantic's multi-line
    message; this folds it into ``name: problem`` pairs on one line.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                    for err in cause.errors()
                )
                raise ToolError(_one_line(f"{name}: bad arguments: {problems}")) from cause
            # "Error executing tool X: why" becomes "X: why", like the argument errors above.
            why = str(exc).removeprefix(f"Error executing tool {name}: ")
            raise ToolError(_one_line(f"{name}: {why}")) from cause

    async def run_streams(self, read_stream: Any, write_stream: Any) -> None:
        """One session over the given streams (a reader socket's connection): what
        ``run_stdio_async`` does over the process's own stdin and stdout."""
        lowlevel = self._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def _call(fn: Callable[[], T]) -> T:
    """Run one tool body: lexmem's errors become tool errors; a crash becomes one line too."""
    try:
        return fn()
    except LexmemError as exc:
        raise ToolError(_one_line(str(exc))) from exc
    except ValueError as exc:  # a value the core could not convert (a bad type name)
        raise ToolError(_one_line(str(exc))) from exc
    except Exception as exc:
        log.exception("[MEM:MCP] tool failed")
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ToolError(f"internal error: {type(exc).__name__}: {first}") from exc


Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"How many, 1 to {MAX_LIMIT}.")]
MemoryId = Annotated[
    str, Field(min_length=1, description="A memory id, or a unique prefix of 8 or more characters.")
]
ProjectFilter = Annotated[
    str | None,
    Field(description="Only this project's memories (a repository root path or a project name)."),
]
TypeName = Literal["semantic", "episodic", "procedural"]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
HOOK = ToolAnnotations(
    title="lexmem's hook events", read_only_hint=False, destructive_hint=False,
    idempotent_hint=False, open_world_hint=False,
)  # fmt: skip
# The tool Claude Code's hooks call instead of running ``lexmem-hook`` (``"type":
# "mcp_tool"``), and the payload fields it takes. ``lexmem mcp`` (the relay) answers it
# itself when it relays; this is the tool for a session served in-process.
HOOK_TOOL = hookcall.HOOK_TOOL
HOOK_FIELDS = hookcall.HOOK_FIELDS


def build_server(tools: MemoryTools) -> McpMemory:
    """The MCP server over ``tools``: eight tools, the hooks' tool and the context-digest
    resources."""
    server = McpMemory(
        "lexmem", title="lexmem memory", version=__version__, instructions=INSTRUCTIONS
    )

    @server.tool(annotations=READ)
    def search_memory(
        query: Annotated[str, Field(min_length=1, description="What to look for, in words.")],
        project: ProjectFilter = None,
        type: Annotated[TypeName | None, Field(description="Only memories of this type.")] = None,
        limit: Limit = 10,
    ) -> SearchOut:
        """Search the user's memories by keywords and meaning (hybrid), best first.

        Use before answering questions about past decisions, fixes, preferences or how
        this project does things. Only active memories are searched (superseded and
        archived ones are left out). Without `project`, every project's memories and the
        general ones are searched.
        """
        return SearchOut.model_validate(
            _call(lambda: tools.search(query, project=project, type=type, limit=limit))
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def save_memory(
        text: Annotated[str, Field(min_length=1, description="The fact, decision or procedure to keep.")],
        type: Annotated[
            Literal["auto", "semantic", "episodic", "procedural"],
            Field(description="auto (classified from the text), semantic (a fact or decision), "
                  "episodic (an event) or procedural (steps to do something)."),
        ] = "auto",
        project: Annotated[
            str | None,
            Field(description="The project it belongs to; default: the current project "
                  "(the repository this server runs in); \"\" for a general memory."),
        ] = None,
        title: Annotated[str | None, Field(description="A short title; default: the first sentence.")] = None,
        pin: Annotated[bool, Field(description="Pin it: never decays, leads the project's digest.")] = False,
    ) -> SaveOut:  # fmt: skip
        """Remember something durable for later sessions; returns the new memory's id.

        Save what the user asks to keep and facts worth knowing next time (decisions,
        fixes and their causes, constraints, preferences, procedures), one fact per call.
        Secrets are redacted before anything is stored. status "queued" means the running
        lexmem service has it and will store it within moments under the returned id.
        """
        return SaveOut.model_validate(
            _call(lambda: tools.save(text, type=type, project=project, title=title, pin=pin))
        )

    @server.tool(annotations=READ)
    def get_memory(
        ids: Annotated[
            str | list[str],
            Field(description="One memory id or a list of them (unique prefixes of 8+ characters work)."),
        ],
    ) -> MemoriesOut:  # fmt: skip
        """Read whole memories by id (search results and digests show ids), in the order given."""
        return MemoriesOut.model_validate(_call(lambda: tools.get(ids)))

    @server.tool(annotations=READ)
    def recent_memories(project: ProjectFilter = None, limit: Limit = 10) -> MemoriesOut:
        """The most recently stored active memories, newest first."""
        return MemoriesOut.model_validate(_call(lambda: tools.recent(project=project, limit=limit)))

    @server.tool(annotations=READ)
    def timeline(
        anchor: Annotated[
            str | None,
            Field(description="A memory id, or a time (ISO 8601, e.g. 2026-01-31T09:00, UTC "
                  "unless it says otherwise). Default: a session's first memory, else now."),
        ] = None,
        session_id: Annotated[str | None, Field(description="Only this agent session's memories.")] = None,
        project: ProjectFilter = None,
        before: Annotated[int, Field(ge=0, le=50, description="How many memories before the anchor.")] = 5,
        after: Annotated[int, Field(ge=0, le=50, description="How many memories after the anchor.")] = 5,
    ) -> TimelineOut:  # fmt: skip
        """Active memories around a moment, oldest first: what was learned just before and
        after a memory, a time, or in one agent session. Each item says whether it is
        before, at (the anchor memory) or after the anchor."""
        return TimelineOut.model_validate(
            _call(lambda: tools.timeline(
                anchor=anchor, session_id=session_id, project=project, before=before, after=after
            ))
        )  # fmt: skip

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        )
    )
    def confirm_memory(
        memory_id: MemoryId,
        query: Annotated[
            str | None, Field(description="The search it answered (optional).")
        ] = None,
    ) -> ChangeOut:
        """Tell lexmem a memory was right and useful (it answered your search): it is
        reinforced, so it ranks higher and decays slower."""
        return ChangeOut.model_validate(_call(lambda: tools.confirm(memory_id, query)))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def correct_memory(
        memory_id: MemoryId,
        corrected_text: Annotated[
            str, Field(min_length=1, description="The whole corrected text.")
        ],
    ) -> ChangeOut:
        """Replace a wrong or outdated memory by a corrected text: a new memory (same type,
        project and pin) supersedes it, and the old one leaves search results. Returns the
        new memory's id."""
        return ChangeOut.model_validate(_call(lambda: tools.correct(memory_id, corrected_text)))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def forget_memory(memory_id: MemoryId) -> ChangeOut:
        """Delete a memory for good, with its links and history. Prefer correct_memory when
        it is only wrong; forget what must not be kept at all."""
        return ChangeOut.model_validate(_call(lambda: tools.forget(memory_id)))

    @server.tool(annotations=HOOK)
    def record_hook_event(
        hook_event_name: Annotated[str, Field(min_length=1, description="The hook's event.")],
        session_id: str = "", cwd: str = "", transcript_path: str = "", permission_mode: str = "",
        prompt: str = "", tool_name: str = "", tool_use_id: str = "",
        tool_input: Annotated[Any, Field(description="JSON text or an object.")] = None,
        tool_response: Annotated[Any, Field(description="JSON text, an object or text.")] = None,
        error: Any = None, is_interrupt: Any = None, last_assistant_message: str = "",
        stop_hook_active: Any = None, source: str = "", reason: str = "", trigger: str = "",
        custom_instructions: str = "", agent_id: str = "", agent_type: str = "",
        agent_transcript_path: str = "", model: str = "", turn_id: str = "",
    ) -> str:  # fmt: skip
        """For lexmem's own Claude Code hooks only, which call it with each hook event's
        fields; never call it yourself. Records the event as the lexmem-hook command would."""
        fields = {k: v for k, v in locals().items() if k in HOOK_FIELDS}
        return _call(lambda: tools.record_hook(fields))

    @server.resource(
        "lexmem://digest",
        name="context-digest",
        title="This project's context digest",
        description="The pinned and most useful memories of the project this server runs in "
        "(Markdown, size-capped), as an agent session starts with it.",
        mime_type="text/markdown",
    )
    def current_digest() -> str:
        return _read(lambda: tools.digest(tools.project, cwd=tools.cwd))

    @server.resource(
        "lexmem://digest/{+project}",
        name="project-context-digest",
        title="A project's context digest",
        description="The context digest of a named project: a project name, or a repository "
        "root path (lexmem://digest//home/me/repo, or percent-encoded).",
        mime_type="text/markdown",
        # The project is a key (hashed to a file name), never a path that is opened.
        security=ResourceSecurity(exempt_params={"project"}),
    )
    def project_digest(project: str) -> str:
        return _read(lambda: tools.digest(project.strip() or None))

    return server


def _read(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except LexmemError as exc:
        raise ResourceError(_one_line(str(exc))) from exc


def run_stdio(home: str | None = None) -> None:
    """Serve MCP on stdin/stdout until the client closes the stream."""
    # Before the SDK configures logging (it only adds a handler when there is none):
    # plain lines on stderr, never stdout, which carries the protocol.
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
        )  # fmt: skip
    tools = MemoryTools(home)
    server = build_server(tools)
    log.info("[MEM:MCP] serving %s (project %s)", tools.paths.home, tools.project)
    try:
        server.run("stdio")
    finally:
        tools.close()


def serve_connection(
    core: Lexmem | None, request: dict[str, Any], conn: socket.socket, stream: BinaryIO,
    *, lock: threading.RLock | None = None, home: Path | None = None,
) -> None:  # fmt: skip
    """Serve one MCP session on a reader-socket connection, with the service's warm core.

    The relay (:mod:`lexmem.agents.relay`) has sent the request line; it gets ``{"ok":
    true}`` once the server is built, then the session runs until either side closes.
    """
    import anyio
    from mcp.server.stdio import stdio_server

    from lexmem import wire
    from lexmem.service.readers import keep_logging_off_stderr

    keep_logging_off_stderr()  # building the server would configure it
    cwd = request.get("cwd")
    tools = MemoryTools(
        home, cwd=cwd if isinstance(cwd, str) and cwd else None, core=core, lock=lock
    )
    server = build_server(tools)
    wire.send_json(conn, {"ok": True})
    reader = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="\n")
    writer = conn.makefile("w", encoding="utf-8", newline="\n")

    async def session() -> None:
        async with stdio_server(anyio.wrap_file(reader), anyio.wrap_file(writer)) as (r, w):
            await server.run_streams(r, w)

    try:
        anyio.run(session)
    finally:
        tools.close()
        with contextlib.suppress(OSError, ValueError):
            writer.close()


# -- the relay's manifest ------------------------------------------------------------------
#
# While a service starts (seconds: the store, the SDK), the relay answers an agent's
# opening requests itself, from what this service answered to the same requests: so an
# agent that waits only briefly for its MCP servers still sees lexmem's tools. The rest
# of the session then runs in the service, which gets the agent's own ``initialize``.
#
# Two eras of the protocol are recorded. A handshake session (``initialize``, then
# requests) per version in ``sessions`` (an answer the same as an earlier version's is
# that version's name); ``"*"`` is a session opened at a version the
# SDK does not know (it answers with its own), and ``refusals`` the errors such a
# session gives to requests it does not serve. Per-request sessions (2026-07-28 on:
# ``server/discover``, then requests that each carry the protocol version in
# ``params._meta``) in ``modern``: each request's reply, result or error, and the
# acknowledgement that opens a ``subscriptions/listen`` stream.

# The opening requests answered from the manifest, and the protocol versions recorded.
MANIFEST_METHODS = (
    "initialize", "tools/list", "resources/list", "resources/templates/list", "prompts/list",
)  # fmt: skip
MANIFEST_VERSIONS = KNOWN_PROTOCOL_VERSIONS
# A version no SDK knows, to record the answer to an agent newer than this SDK.
UNKNOWN_VERSION = "lexmem-unknown-version"
# Requests a handshake session refuses that an agent may send before ``initialize``.
MANIFEST_REFUSED = ("server/discover",)
# What a per-request session is asked (``subscriptions/listen`` last: it stays open).
MODERN_METHODS = (
    "server/discover", "tools/list", "resources/list", "resources/templates/list",
    "prompts/list", "ping", "subscriptions/listen",
)  # fmt: skip
# How long recording waits for one answer (they take milliseconds; a guard, not a budget).
MANIFEST_WAIT_S = 60.0


def manifest_path(paths: Paths) -> Path:
    from lexmem.agents.relay import MANIFEST

    return paths.home / MANIFEST


def record_manifest(paths: Paths, core: Lexmem | None = None) -> Path:
    """Hold a session per protocol version (over a socket pair, as a relay would) and
    keep its answers to the opening requests for the relay. The opening opens no store:
    ``core`` (the service's) only serves what it would serve anyway."""
    import json

    from lexmem.base import atomic_write
    from lexmem.config import FILE_MODE

    sessions: dict[str, dict[str, Any]] = {}
    refusals: dict[str, Any] = {}
    for version in (*MANIFEST_VERSIONS, UNKNOWN_VERSION):
        with _recording(paths, core) as ask:
            answers: dict[str, Any] = {}
            for n, method in enumerate(MANIFEST_METHODS, 1):
                params: dict[str, Any] = {}
                if method == "initialize":
                    params = {"protocolVersion": version, "capabilities": {},
                              "clientInfo": {"name": "lexmem-relay", "version": __version__}}  # fmt: skip
                reply = ask({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
                if "result" not in reply:
                    continue  # not served: the relay leaves it to the service
                answers[method] = reply["result"]
                if method == "initialize":
                    ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
            if version == UNKNOWN_VERSION:
                for n, method in enumerate(MANIFEST_REFUSED, 100):
                    reply = ask({"jsonrpc": "2.0", "id": n, "method": method, "params": {}})
                    if "error" in reply:
                        refusals[method] = reply["error"]
        if "initialize" in answers and "tools/list" in answers:
            sessions["*" if version == UNKNOWN_VERSION else version] = answers
    modern: dict[str, dict[str, Any]] = {}
    for version in MODERN_PROTOCOL_VERSIONS:
        envelope = {PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {},
                    CLIENT_INFO_META_KEY: {"name": "lexmem-relay", "version": __version__}}  # fmt: skip
        with _recording(paths, core) as ask:
            replies: dict[str, Any] = {}
            for n, method in enumerate(MODERN_METHODS, 1):
                params = {"_meta": envelope}
                if method == "subscriptions/listen":
                    params["notifications"] = LISTEN_ALL
                reply = ask({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
                if reply.get("method") == "notifications/subscriptions/acknowledged":
                    replies[method] = {"ack": reply.get("params")}
                elif "result" in reply or "error" in reply:
                    replies[method] = {k: reply[k] for k in ("result", "error") if k in reply}
        if "result" in replies.get("server/discover", {}) and "result" in replies.get(
            "tools/list", {}
        ):
            modern[version] = replies
    # An answer the same as an earlier version's is written as that version's name (an
    # answer is never a string): the relay reads the file as the agent's session starts,
    # and the versions' tool lists are one list (~20 KB each).
    first: dict[str, tuple[str, Any]] = {}
    for version, answers in sessions.items():
        for method, result in answers.items():
            seen = first.setdefault(method, (version, result))
            if seen[0] != version and seen[1] == result:
                answers[method] = seen[0]
    target = manifest_path(paths)
    text = json.dumps(
        {"lexmem": __version__, "sessions": sessions, "refusals": refusals, "modern": modern},
        ensure_ascii=False,
    )
    atomic_write(target, text + "\n", mode=FILE_MODE, durable=False)
    return target


# What the recorded ``subscriptions/listen`` asks for: everything a stream can carry.
LISTEN_ALL = {
    "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
    "resourceSubscriptions": ["lexmem://digest"],
}  # fmt: skip


@contextlib.contextmanager
def _recording(
    paths: Paths, core: Lexmem | None
) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """A session of this server over a socket pair; yields ``ask(message)``, which sends
    a message and, for a request, returns its reply (or the first notification that
    answers it: a stream's acknowledgement)."""
    import json

    mine, theirs = socket.socketpair()
    # Why: a session that fails to start (the data folder deleted under the service,
    # so not even the working directory can be read) used to leave this side reading
    # forever, and the process outlived the service that started it. The server's
    # side is closed whatever becomes of it, and no answer is waited for long.
    failed: list[BaseException] = []

    def serve() -> None:
        with theirs, theirs.makefile("rb") as their_stream:
            try:
                serve_connection(core, {}, theirs, their_stream, home=paths.home)
            except Exception as exc:  # noqa: BLE001 - reported by the reading side
                failed.append(exc)  # before the socket closes: the reader then says why

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    mine.settimeout(MANIFEST_WAIT_S)
    with mine, mine.makefile("rb") as stream:
        _manifest_answer(stream, failed)  # {"ok": true}

        def ask(message: dict[str, Any]) -> dict[str, Any]:
            mine.sendall(json.dumps(message).encode() + b"\n")
            if "id" not in message:
                return {}
            while True:
                reply = _manifest_answer(stream, failed)
                if reply.get("id") == message["id"]:
                    return reply
                meta = (reply.get("params") or {}).get("_meta") or {}
                if meta.get(SUBSCRIPTION_ID_META_KEY) == message["id"]:
                    return reply

        yield ask
        mine.shutdown(socket.SHUT_WR)
    worker.join(timeout=10)


def _manifest_answer(stream: BinaryIO, failed: list[BaseException]) -> dict[str, Any]:
    """The next line the recording session answers, as JSON; a session that stopped
    (or answered nothing within :data:`MANIFEST_WAIT_S`) raises, saying why if it knows."""
    import json

    try:
        line = stream.readline()
    except TimeoutError:
        line = b""
    if not line:
        why = f" ({type(failed[0]).__name__}: {failed[0]})" if failed else ""
        raise LexmemError(f"the MCP session stopped before it answered{why}")
    reply: dict[str, Any] = json.loads(line)
    return reply


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lexmem.agents.mcp_server --record-manifest HOME``: what a long-lived
    service runs to record the manifest in a process of its own, so that the MCP SDK
    (about 30 MB resident once imported) enters the service only with an agent's first
    session."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "--record-manifest":
        print("usage: python -m lexmem.agents.mcp_server --record-manifest HOME", file=sys.stderr)
        return 2
    try:
        record_manifest(Paths(Path(args[1])))
    except (LexmemError, OSError) as exc:
        print(f"lexmem: error: recording the MCP manifest: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
