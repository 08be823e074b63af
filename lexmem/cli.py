"""The ``lexmem`` command line.

Each command parses its arguments, calls one method of :class:`lexmem.api.Lexmem`
and prints the result: a readable table, or JSON with ``--json``. Errors become
one line on stderr and a non-zero exit code (2 for bad input, 3 for an unknown
id, 130 when interrupted, 1 otherwise); nothing is printed half-way. A closed output
pipe ends a command quietly with 141.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import textwrap
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from lexmem import __version__, wire
from lexmem.config import is_frozen, tighten_umask
from lexmem.errors import InvalidInputError, LexmemError

__all__ = ["Ctx", "cli", "has_display", "main"]

F = TypeVar("F", bound=Callable[..., Any])

TYPES = ["semantic", "episodic", "procedural"]
STATUSES = ["active", "archived", "superseded", "any"]
SOURCES = [
    "hook_event", "agent_response", "markdown_chunk", "conversation", "correction",
    "configuration", "workflow", "search_confirmation", "explicit",
]  # fmt: skip


class Ctx:
    """Per-invocation state: where the data lives, and the opened core (lazily)."""

    def __init__(self, home: str | None) -> None:
        self.home = home
        self._lm: Any = None

    def lm(self) -> Any:
        if self._lm is None:
            from lexmem.api import Lexmem

            lm = Lexmem.open(self.home)
            self._lm = lm
            if lm.store.needs_reembed:
                # The user changed embedding.model: bring every vector into the new
                # space now, visibly, rather than refuse or mix two spaces.
                n = lm.store.count()
                click.echo(
                    f"lexmem: the embedding model changed to {lm.embedder.model_name}; "
                    f"re-embedding {n} memories…",
                    err=True,
                )
                with progress("Re-embedding") as update:
                    lm.reembed(update)
        return self._lm

    def writer(self) -> Any:
        """The core's write methods, through the inbox to the single writer (the service)."""
        from lexmem.service.client import InboxWriter

        return InboxWriter(self.lm())

    def close(self) -> None:
        if self._lm is not None:
            self._lm.close()

    def cwd(self) -> str:
        """The folder the command was given in (a project's default)."""
        return os.getcwd()


def relative_project(c: Ctx, project: str | None) -> str | None:
    """``--project .`` (or ``..``, ``./x``, ``../x``) as the repository that folder is in,
    from where the command was given; any other value as typed (the writer reads names)."""
    if project is None or not (project in (".", "..") or project.startswith(("./", "../"))):
        return project
    from lexmem.capture.policy import project_root

    return project_root(os.path.normpath(os.path.join(c.cwd(), project)))


class WarmCtx(Ctx):
    """A read command run by the service for a reader: the service's open core, the
    reader's folder, and nothing closed at the end."""

    def __init__(self, lm: Any, cwd: str) -> None:
        super().__init__(str(lm.paths.home))
        self._lm = lm
        self._cwd = cwd

    def lm(self) -> Any:
        return self._lm

    def cwd(self) -> str:
        return self._cwd

    def close(self) -> None:
        pass  # the service's core stays open


pass_ctx = click.make_pass_decorator(Ctx)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def short(mid: str) -> str:
    return mid[:8]


# The reader's terminal width, while the service renders a command for it.
_COLUMNS: ContextVar[int | None] = ContextVar("lexmem_columns", default=None)


def _width() -> int:
    columns = _COLUMNS.get() or shutil.get_terminal_size((120, 24)).columns
    return max(60, min(columns, 160))


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes (wide characters such as 📌 take two)."""
    if text.isascii() and text.isprintable():
        return len(text)  # one column a character: the common case, without a lookup each
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


_CHUNK_SUFFIX = re.compile(r" \(\d+/\d+\)$")


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal columns, with one ellipsis when cut.

    A chunk's " (2/5)" survives the cut: it is what tells the chunks apart.
    """
    if cells(text) <= width:
        return text
    part = _CHUNK_SUFFIX.search(text)
    if part and width >= cells(part.group()) + 8:
        return clip(text[: part.start()], width - cells(part.group())) + part.group()
    out, used = "", 0
    for ch in text:
        w = cells(ch)
        if used + w > width - 1:
            break
        out += ch
        used += w
    return out.rstrip(" …") + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], flex: int = -1) -> None:
    """A plain aligned table; column ``flex`` absorbs what the terminal lacks."""
    if not rows:
        return
    cells_ = [[" ".join(("" if v is None else str(v)).split()) for v in r] for r in rows]
    widths = [max(cells(h), *(cells(r[i]) for r in cells_)) for i, h in enumerate(headers)]
    total = sum(widths) + 2 * (len(widths) - 1)
    flex = flex % len(widths)
    if total > _width():
        widths[flex] = max(10, widths[flex] - (total - _width()))

    def fmt(values: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(values):
            v = clip(v, widths[i])
            out.append(v + " " * (widths[i] - cells(v)))
        return "  ".join(out).rstrip()

    click.echo(click.style(fmt(list(headers)), bold=True))
    for r in cells_:
        click.echo(fmt(r))


def when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone().strftime("%Y-%m-%d %H:%M")


def times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def method_name(method: str) -> str:
    return str(method).replace("_", "-")


def parse_when(text: str | None, name: str) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInputError(
            f"{name} must be a date like 2026-01-31 or 2026-01-31T09:00, not {text!r}"
        ) from exc
    return value if value.tzinfo else value.astimezone(UTC)


def interactive() -> bool:
    """Whether a person may be at the keyboard (standard input is a terminal)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # closed or replaced standard input
        return False


def decoded(data: bytes, where: str) -> str:
    """``data`` as UTF-8 text, or one line naming the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{where} is not valid UTF-8 (byte {exc.start}: 0x{data[exc.start]:02x}); "
            "lexmem keeps text only"
        ) from None


def read_stdin() -> str:
    """Standard input as UTF-8 text, all of it; bytes that are not UTF-8 are refused
    with their offset (never carried on as surrogates to fail somewhere deeper)."""
    stream = sys.stdin
    raw = getattr(stream, "buffer", None)
    if raw is None:  # replaced by a text-only stream: it decoded already
        text = stream.read()
        return decoded(text.encode("utf-8", "surrogateescape"), "standard input")
    return decoded(raw.read(), "standard input")


def read_stdin_line() -> str:
    """One line of standard input as UTF-8 text, without its line ending (a password)."""
    stream = sys.stdin
    raw = getattr(stream, "buffer", None)
    if raw is None:
        line = stream.readline()
        data = line.encode("utf-8", "surrogateescape")
    else:
        data = raw.readline()
    return decoded(data, "standard input").rstrip("\r\n")


def text_param(value: str, where: str) -> str:
    """A command-line argument as UTF-8 text: the shell hands over bytes, and Python
    keeps those that are not UTF-8 as surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate no byte stands for
            raise InvalidInputError(f"{where} is not valid text (a lone surrogate)") from None
        return decoded(raw, where)
    return value


def scrub_query(query: str) -> str:
    """A search's query as an answer may show it: secrets redacted (never echoed back)."""
    from lexmem.capture.redact import redact

    return redact(query).text


def read_text_arg(parts: Sequence[str], what: str = "text") -> str:
    """The words of TEXT, or standard input for ``-`` (or when it is piped and TEXT is absent)."""
    text = " ".join(parts)
    if text == "-" or (not parts and not interactive()):
        text = read_stdin()
    elif not parts:
        raise InvalidInputError(f"give the {what}, or - to read it from standard input")
    return text


@contextmanager
def progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar that appears once the total is known (stderr, TTYs only)."""
    state: dict[str, Any] = {}
    shown = sys.stderr.isatty()

    def update(done: int, total: int) -> None:
        if not shown:
            return
        bar = state.get("bar")
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label=label, file=sys.stderr)
            bar.__enter__()
            state["bar"] = bar
        bar.update(done - state.get("done", 0))
        state["done"] = done

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)


# -- the group ---------------------------------------------------------------


def one_line(message: str) -> str:
    """A message folded onto one line (the promise: every error is one line)."""
    return re.sub(r"\s*\n\s*", " ", message.strip())


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"lexmem: error: {one_line(message)}", err=True)
    raise click.exceptions.Exit(code)


def usage_error(exc: click.ClickException) -> NoReturn:
    """Click's own errors (a bad option, a missing argument) as lexmem's one line."""
    message = one_line(exc.format_message()).rstrip(".")
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message += f" (see `{ctx.command_path} --help`)"
    fail(message, exc.exit_code)


def closed_pipe(ctx: click.Context | None = None) -> int:
    """The output's reader went away (``lexmem list | head -1``): end quietly with
    :data:`wire.CLOSED_PIPE`, as SIGPIPE ends other tools. What is still buffered for
    standard output goes nowhere (not to a traceback at exit)."""
    obj = ctx.find_object(Ctx) if ctx is not None else None
    if isinstance(obj, WarmCtx):  # the service renders into a buffer of its own
        return wire.CLOSED_PIPE
    return wire.closed_pipe(sys.stdout)


def check_text_params(command: click.Command, ctx: click.Context) -> None:
    """Every text a command was given as an argument or option is UTF-8; else one line
    naming it and the byte. Folder and file names too: what lexmem writes them into
    (settings, tables, JSON) holds text only."""
    for param in command.params:
        if param.name is None:
            continue
        value = ctx.params.get(param.name)
        where = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        for v in value if isinstance(value, tuple | list) else (value,):
            if isinstance(v, str):
                text_param(v, where)


class LexmemCommand(click.Command):
    """A command whose text arguments are checked before it runs (:func:`check_text_params`)."""

    def invoke(self, ctx: click.Context) -> Any:
        check_text_params(self, ctx)
        return super().invoke(ctx)


class LexmemSubGroup(click.Group):
    """A group of commands under ``lexmem`` (``optout``, ``watch``, …): the same checks."""

    command_class = LexmemCommand
    group_class = type


class LexmemGroup(click.Group):
    """Turns lexmem's errors, and click's, into one line and an exit code."""

    command_class = LexmemCommand
    group_class = LexmemSubGroup

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # Both spellings are the same command.
        return super().get_command(ctx, "licence" if cmd_name == "license" else cmd_name)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.ClickException as exc:
            usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LexmemError as exc:
            if exc.exit_code == 130:  # Ctrl-C, and what became of the write it cut short
                click.echo(f"lexmem: interrupted: {one_line(str(exc))}", err=True)
                ctx.exit(130)
            fail(str(exc), exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.NoArgsIsHelpError):
            raise
        except BrokenPipeError:
            ctx.exit(closed_pipe(ctx))
        except click.ClickException as exc:
            usage_error(exc)
        except click.exceptions.Abort:
            click.echo("lexmem: aborted", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("lexmem: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:
            client = sys.modules.get("lexmem.service.client")
            here = not isinstance(ctx.find_object(Ctx), WarmCtx)  # not the service's render
            if here and client is not None and client.interrupted(exc):
                # Ctrl-C that landed in an import or native code, and came out as this.
                click.echo("lexmem: interrupted", err=True)
                ctx.exit(130)
            if os.environ.get("LEXMEM_DEBUG"):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            click.echo(
                f"lexmem: internal error: {type(exc).__name__}: {first} (set LEXMEM_DEBUG=1 for the traceback)",
                err=True,
            )
            ctx.exit(70)
        finally:
            obj = ctx.find_object(Ctx)
            if obj is not None:
                obj.close()


@click.group(
    cls=LexmemGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--home",
    envvar="LEXMEM_HOME",
    type=click.Path(file_okay=False),
    help="Data folder (default: $LEXMEM_HOME or the platform's).",
)
@click.version_option(__version__, prog_name="lexmem")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """lexmem — local-first memory for AI agents and the people who work with them."""
    if not isinstance(ctx.obj, Ctx):  # a reader's command in the service brings its own
        ctx.obj = Ctx(home)
    if ctx.invoked_subcommand is None:
        # With a display, `lexmem` is the desktop app (registered by the desktop layer's
        # launcher, which the core never imports); on a terminal without one, a status.
        desktop = cli.get_command(ctx, "app")
        if desktop is not None and has_display():
            ctx.invoke(desktop)
        else:
            ctx.invoke(status)


def has_display(environ: Any = None, platform: str | None = None) -> bool:
    """Whether a window can be shown: macOS and Windows always; elsewhere X11 or Wayland."""
    env = os.environ if environ is None else environ
    if (platform or sys.platform) in ("darwin", "win32"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


@cli.command()
@json_option
@pass_ctx
def status(c: Ctx, as_json: bool) -> None:
    """Where the data lives, what it holds, and how to start."""
    lm = c.lm()
    counts = lm.status_counts()
    st = lm.licence.status()
    info = {
        "version": __version__,
        "data_folder": str(lm.paths.home),
        "memories": counts,
        "embedding_model": lm.embedder.model_name,
        "tier": st.tier,
        "llm": lm.llm_status(),
    }
    if as_json:
        emit_json(info)
        return
    click.echo(f"lexmem {__version__} — local-first memory")
    click.echo(f"  data folder   {lm.paths.home}")
    click.echo(
        f"  memories      {counts['active']} active, {counts['archived']} archived, {counts['superseded']} superseded"
    )
    click.echo(f"  model         {lm.embedder.model_name} (embedded, offline)")
    tier = st.tier_name + (
        f" (trial, {st.trial_days_left} days left)" if st.source == "trial" else ""
    )
    click.echo(f"  tier          {tier}   (lexmem licence show)")
    from lexmem.llm import status_line

    click.echo(f"  llm           {status_line(info['llm'])}")
    if st.notice:
        click.echo(st.notice, err=True)
        lm.licence.acknowledge_notice()
    click.echo("")
    click.echo("Try:")
    click.echo('  lexmem remember "The project uses PostgreSQL for data storage" --project demo')
    click.echo('  lexmem search "which database do we use"')
    click.echo("  lexmem list              lexmem stats              lexmem --help")
    click.echo("  lexmem install claude    (or codex: capture from your agent and the MCP server)")


def _remember(c: Ctx, text: tuple[str, ...], mtype: str, project: str | None,
              title: str | None, pin: bool, no_wait: bool = False) -> Any:  # fmt: skip
    body = read_text_arg(text, "text to remember")
    if not body.strip():
        raise InvalidInputError("nothing to remember: the text is empty")
    if title is not None:
        title = title.strip()
        if not title:
            raise InvalidInputError(
                "the title is empty (leave out --title to use the first sentence)"
            )
    from lexmem.service.client import remember_through_inbox

    done = remember_through_inbox(
        c.lm(),
        body,
        mtype=None if mtype == "auto" else mtype,
        project=relative_project(c, project),
        title=title,
        pin=pin,
        cwd=c.cwd(),
        wait=0.0 if no_wait else None,
    )
    return done


@cli.command()
@click.argument("text", nargs=-1)
@click.option(
    "--type", "mtype", type=click.Choice(["auto", *TYPES]), default="auto", show_default=True
)
@click.option(
    "--project", help="A repository root or a project name (an opted-out one is refused)."
)
@click.option("--title", help="A short title (default: the first sentence).")
@click.option(
    "--pin", is_flag=True, help="Pin it: it never decays and leads its project's context."
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="With a service running, hand it over and answer at once with the id it will have.",
)
@json_option
@pass_ctx
def remember(
    c: Ctx,
    text: tuple[str, ...],
    mtype: str,
    project: str | None,
    title: str | None,
    pin: bool,
    no_wait: bool,
    as_json: bool,
) -> None:
    """Remember TEXT (use - to read it from standard input)."""
    from lexmem.models import TypeClassification
    from lexmem.service.client import Interrupted, interrupted, watch_sigint

    watch_sigint()
    try:
        done = _remember(c, text, mtype, project, title, pin, no_wait)
    except Interrupted:
        raise
    except BaseException as exc:
        if not interrupted(exc):
            raise
        raise Interrupted("nothing was kept") from None  # before anything was handed over
    if done.queued:
        # Not stored yet, but its id is known: the id it will have (`show` finds it then).
        if as_json:
            emit_json({"ids": [], "queued": True, "id": done.memory_id,
                       "event_id": done.event_id, "reason": done.why})  # fmt: skip
        else:
            click.echo(
                f"Queued, not stored yet ({done.why}): it will be stored as "
                f"{short(done.memory_id)} (lexmem show {short(done.memory_id)})."
            )
        return
    first = done.memories[0]
    rationale = first.metadata.get("classification")
    result_cls = TypeClassification(
        first.type, first.confidence, first.classification_method, rationale
    )

    class _Result:
        memories = done.memories
        classification = result_cls

    result = _Result()
    if as_json:
        emit_json({
            "ids": [m.id for m in result.memories],
            "queued": False,
            "classification": result.classification.to_dict(),
            "memories": [m.to_dict() for m in result.memories],
        })  # fmt: skip
        return
    m = result.memories[0]
    cls_ = result.classification
    how = (
        "given"
        if cls_.method == "explicit"
        else f"{method_name(cls_.method)}, {cls_.confidence:.0%}"
    )
    extra = f" in {len(result.memories)} chunks" if len(result.memories) > 1 else ""
    click.echo(f"Remembered {short(m.id)} as {m.type} ({how}){extra}: {m.title}")


def _filter(project: str | None, mtype: str | None, status: str | None, source: str | None = None,
            pinned: bool | None = None, since: str | None = None, until: str | None = None) -> Any:  # fmt: skip
    from lexmem.models import MemorySource, MemoryStatus, MemoryType
    from lexmem.store.protocol import MemoryFilter

    after, before = parse_when(since, "--since"), parse_when(until, "--until")
    if after is not None and before is not None and after >= before:
        raise InvalidInputError(f"--since {since} is not before --until {until}: nothing can match")
    return MemoryFilter(
        project=project,
        type=MemoryType(mtype) if mtype else None,
        status=None if status == "any" else MemoryStatus(status or "active"),
        source=MemorySource(source) if source else None,
        pinned=pinned,
        created_after=after,
        created_before=before,
    )


@cli.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--project", help="Only memories of this project.")
@click.option("--type", "mtype", type=click.Choice(TYPES), help="Only memories of this type.")
@click.option("--status", type=click.Choice(STATUSES), default="active", show_default=True)
@click.option("--source", type=click.Choice(SOURCES), help="Only memories from this source.")
@click.option("--since", help="Created on or after this date (ISO 8601).")
@click.option("--until", help="Created before this date (ISO 8601).")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(1, 1000),
    default=None,
    help="How many results (default 10).",
)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "bm25", "vector"]),
    default="hybrid",
    show_default=True,
    help="Keywords and meaning, keywords only, or meaning only.",
)
@click.option("--why", is_flag=True, help="Show why each result ranked where it did.")
@json_option
@pass_ctx
def search(c: Ctx, query: tuple[str, ...], project: str | None, mtype: str | None, status: str, source: str | None,
           since: str | None, until: str | None, limit: int | None, mode: str, why: bool, as_json: bool) -> None:  # fmt: skip
    """Find memories by meaning and keywords."""
    from lexmem.store.search import listed

    flt = _filter(relative_project(c, project), mtype, status, source, since=since, until=until)
    result = c.lm().search(" ".join(query), flt, limit=limit, mode=mode)
    if as_json:
        # The query as lexmem would keep it: a secret typed into a search is not echoed.
        emit_json({"query": scrub_query(result.query), "mode": result.mode,
                   "timings_ms": result.timings_ms, "hits": [h.to_dict() for h in result.hits]})  # fmt: skip
        return
    # The table is for a person: what is worth reading, not every memory sharing one word
    # with a question. --json keeps the whole ranking, as scripts and agents want it.
    hits = listed(result.hits, result.query)
    if not hits:
        click.echo("No memories match.")
        return
    with_status = status != "active"
    rows = []
    for h in hits:
        m = h.memory
        title = ("📌 " if m.pinned else "") + m.title
        row = [short(m.id), f"{h.score:.3f}", m.type, *([m.status] if with_status else []),
               m.project or "-", title]  # fmt: skip
        rows.append(row)
    table(["ID", "SCORE", "TYPE", *(["STATUS"] if with_status else []), "PROJECT", "TITLE"], rows)
    if why:
        click.echo("")
        for h in hits:
            click.echo(f"{short(h.memory.id)}  {h.why()}")


@cli.command()
@click.argument("ident", metavar="ID")
@json_option
@pass_ctx
def show(c: Ctx, ident: str, as_json: bool) -> None:
    """Show one memory with its links, supersede chain and confidence history."""
    from lexmem.team.membership import lost_edit, lost_text

    d = c.lm().detail(ident)
    loss = lost_edit(c.lm().paths, d.memory.id)  # this client's edit lost a team conflict
    if as_json:
        emit_json({**d.to_dict(), "team_lost": loss} if loss else d.to_dict())
        return
    m = d.memory
    if m.title != " ".join(m.content.split()):
        click.echo(click.style(m.title, bold=True))
        click.echo("")
    for line in m.content.splitlines() or [""]:
        click.echo(textwrap.fill(line, width=min(_width(), 100)) if line else "")
    click.echo("")
    status_text = m.status.value
    if m.status == "superseded":
        status_text += (
            f" by {short(m.superseded_by)}"
            if m.superseded_by
            else " (its replacement was forgotten)"
        )
    fields = [
        ("id", m.id), ("type", f"{m.type} ({method_name(m.classification_method)}, confidence {m.confidence:.2f})"),
        ("status", status_text + (", pinned" if m.pinned else "")),
        ("project", m.project or "-"), ("source", m.source.value),
        ("salience", f"{m.salience:.3f} (importance {m.importance:.2f})"),
        ("created", when(m.created_at)), ("updated", when(m.updated_at)),
        ("accessed", f"{times(m.access_count)}, last {when(m.last_accessed_at)}"),
        ("reinforced", when(m.last_reinforced_at)),
    ]  # fmt: skip
    if m.session_id:
        fields.append(("session", m.session_id))
    if m.learning_context:
        fields.append(("learned", m.learning_context))
    if m.chunk:
        fields.append(
            (
                "chunk",
                f"{m.chunk.chunk_index + 1} of {m.chunk.total_chunks} of {m.chunk.file_path or 'a long text'}",
            )
        )
    for k, v in fields:
        click.echo(f"  {k:<11}{v}")
    if d.older or d.newer:
        click.echo(
            f"  {'chain':<11}"
            + " → ".join(
                [
                    *(short(x.id) for x in reversed(d.older)),
                    f"[{short(m.id)}]",
                    *(short(x.id) for x in d.newer),
                ]
            )
        )
    for lk in d.links_from:
        click.echo(f"  {'link':<11}{lk.link_type} → {short(lk.to_id)} ({lk.strength:.2f})")
    for lk in d.links_to:
        click.echo(f"  {'link':<11}{lk.link_type} ← {short(lk.from_id)} ({lk.strength:.2f})")
    if len(d.confidence) > 1:
        click.echo(
            f"  {'confidence':<11}" + " → ".join(f"{p.confidence:.2f}" for p in d.confidence)
        )
    if loss:
        click.echo(f"  {'team':<11}{lost_text(loss)}")


@cli.command(name="list")
@click.option("--status", type=click.Choice(STATUSES), default="active", show_default=True)
@click.option("--type", "mtype", type=click.Choice(TYPES), help="Only memories of this type.")
@click.option("--project", help="Only memories of this project.")
@click.option("--source", type=click.Choice(SOURCES), help="Only memories from this source.")
@click.option(
    "--pinned/--not-pinned", default=None, help="Only pinned (or only unpinned) memories."
)
@click.option("--since", help="Created on or after this date (ISO 8601).")
@click.option("--until", help="Created before this date (ISO 8601).")
@click.option(
    "--sort",
    type=click.Choice(["created", "salience", "accessed", "updated", "title"]),
    default="created",
    show_default=True,
)
@click.option("--limit", "-n", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many (for paging).")
@json_option
@pass_ctx
def list_(c: Ctx, status: str, mtype: str | None, project: str | None, source: str | None, pinned: bool | None,
          since: str | None, until: str | None, sort: str, limit: int, offset: int, as_json: bool) -> None:  # fmt: skip
    """List memories (newest first, unless --sort says otherwise)."""
    lm = c.lm()
    flt = _filter(relative_project(c, project), mtype, status, source, pinned, since, until)
    items = lm.list_memories(flt, sort=sort, limit=limit, offset=offset)
    if as_json:
        emit_json([m.to_dict() for m in items])
        return
    if not items:
        if offset:
            click.echo("No more memories.")
        elif lm.count(None):
            click.echo("No memories match.")
        else:
            click.echo('No memories yet: try lexmem remember "…"')
        return
    rows = [[short(m.id), when(m.created_at), m.type, m.status, f"{m.salience:.2f}", m.project or "-",
             ("📌 " if m.pinned else "") + m.title] for m in items]  # fmt: skip
    table(["ID", "CREATED", "TYPE", "STATUS", "SAL", "PROJECT", "TITLE"], rows)
    total = lm.count(flt)
    if total > offset + len(items):
        click.echo(f"… {total - offset - len(items)} more (use --offset {offset + len(items)})")


def _simple(name: str, method: str, done: str, help: str, **kwargs: Any) -> None:
    @cli.command(name=name, help=help)
    @click.argument("ident", metavar="ID")
    @json_option
    @pass_ctx
    def command(c: Ctx, ident: str, as_json: bool) -> None:
        lm = c.lm()
        mid = lm.resolve(ident)
        changes = getattr(c.writer(), method)(mid, **kwargs)
        if as_json:
            emit_json({"id": mid, "changes": changes.to_dict()})
        else:
            click.echo(f"{done} {short(mid)}.")


_simple("pin", "pin", "Pinned", "Pin the memory ID: it never decays and ranks higher.", pinned=True)
_simple("unpin", "pin", "Unpinned", "Unpin the memory ID.", pinned=False)
_simple("archive", "archive", "Archived", "Archive the memory ID: it leaves active results.")


@cli.command()
@click.argument("ident", metavar="[ID]", required=False)
@click.option(
    "--backup",
    "backup_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Put the whole data folder back as this backup (from `lexmem backup`) holds it.",
)
@json_option
@pass_ctx
def restore(c: Ctx, ident: str | None, backup_file: Path | None, as_json: bool) -> None:
    """Make an archived or superseded memory ID active again; with --backup, restore a backup.

    A backup is checked in full before anything changes, and never restored while the
    lexmem service runs. The data it replaces is moved aside into the data folder, not
    deleted.
    """
    if ident is not None and backup_file is not None:
        raise InvalidInputError("give a memory ID or --backup PATH, not both")
    if backup_file is not None:
        from lexmem.store.backup import restore_backup

        result = restore_backup(_data_paths(c), backup_file)
        if as_json:
            emit_json(result.to_dict())
            return
        b = result.backup
        click.echo(f"Restored {result.home} from {b.path} (taken {b.created_at}, "
                   f"{b.memories} memories).")  # fmt: skip
        if result.replaced is not None:
            click.echo(f"The data it replaced is kept in {result.replaced}.")
        return
    if ident is None:
        raise InvalidInputError(
            "give the ID of a memory to restore, or --backup PATH to restore a backup"
        )
    lm = c.lm()
    mid = lm.resolve(ident)
    changes = c.writer().restore(mid)
    if as_json:
        emit_json({"id": mid, "changes": changes.to_dict()})
    else:
        click.echo(f"Restored {short(mid)}.")


def _data_paths(c: Ctx) -> Any:
    """The data folder's paths, without opening the core (no model, no store)."""
    from lexmem.config import Paths, resolve_paths

    return Paths(Path(c.home).expanduser().absolute()) if c.home else resolve_paths()


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB"


@cli.command()
@click.argument("dest", required=False, type=click.Path(path_type=Path))
@click.option("--list", "list_", is_flag=True, help="List the backups in DEST (default: backups/).")
@json_option
@pass_ctx
def backup(c: Ctx, dest: Path | None, list_: bool, as_json: bool) -> None:
    """Write a consistent snapshot of the data folder, safe while lexmem runs.

    DEST is a new file ending in .tar.gz, or a folder to put one in (default: backups/
    in the data folder). The store, settings and digests go in; the inbox, logs, model
    files and secrets do not. `lexmem restore --backup FILE` puts it back.
    """
    from lexmem.store.backup import create_backup, list_backups

    paths = _data_paths(c)
    if list_:
        folder = dest.expanduser().absolute() if dest else paths.home / "backups"
        found = list_backups(folder)
        if as_json:
            emit_json([b.to_dict() for b in found])
        elif not found:
            click.echo(f"No backups in {folder}.")
        else:
            table(
                ["TAKEN", "MEMORIES", "SIZE", "LEXMEM", "FILE"],
                [
                    [b.created_at, b.memories, _size(b.size), b.lexmem_version, b.path]
                    for b in found
                ],
            )
        return
    made = create_backup(paths, dest)
    if as_json:
        emit_json(made.to_dict())
    else:
        click.echo(f"Backed up {made.memories} memories to {made.path} ({_size(made.size)}).")


# Where the person forgets: erasure reaches the data folder, not copies made of it.
BACKUPS_KEEP = "Backups made before now still hold it (lexmem backup --list shows them)."


@cli.command()
@click.argument("ident", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_ctx
def forget(c: Ctx, ident: str, yes: bool, as_json: bool) -> None:
    """Delete the memory ID for good, with its links and history, and erase its text from
    every file of the data folder (backups made before keep it)."""
    from lexmem.team.membership import SERVER_KEEPS

    lm = c.lm()
    m = lm.get(ident)
    keeps = f"{BACKUPS_KEEP} {SERVER_KEEPS}" if lm.is_shared(m) else BACKUPS_KEEP
    if not yes:
        if not interactive():
            raise InvalidInputError("forget deletes for good: pass --yes to confirm")
        click.echo(f"lexmem: {keeps}", err=True)
        if not click.confirm(f"Forget {short(m.id)} “{m.title}” for good?", err=True):
            click.echo(f"lexmem: kept {short(m.id)}; nothing was forgotten", err=True)
            raise click.exceptions.Exit(1)
    changes = c.writer().forget(m.id)
    if as_json:
        emit_json({"id": m.id, "changes": changes.to_dict(), "note": keeps})
    else:
        click.echo(f"Forgot {short(m.id)}: erased from the data folder. {keeps}")


@cli.command()
@click.argument("old")
@click.option("--by", "by", help="The id of the memory that replaces OLD.")
@click.option(
    "--with", "with_text", help="Text of a new memory that replaces OLD (- reads standard input)."
)
@json_option
@pass_ctx
def supersede(c: Ctx, old: str, by: str | None, with_text: str | None, as_json: bool) -> None:
    """Replace OLD by another memory (--by ID) or by a new text (--with TEXT)."""
    if (by is None) == (with_text is None):
        raise InvalidInputError(
            "give exactly one of --by ID (an existing memory) or --with TEXT (a new one)"
        )
    if with_text == "-":
        with_text = read_stdin()
    if with_text is not None and not with_text.strip():
        raise InvalidInputError("--with: the new text is empty")
    lm = c.lm()
    old_id = lm.resolve(old)
    changes, new_id = c.writer().supersede(old_id, by=by, with_text=with_text, own=True)
    if as_json:
        emit_json({"superseded": old_id, "by": new_id, "changes": changes.to_dict()})
    else:
        click.echo(f"{short(old_id)} is superseded by {short(new_id)}.")


@cli.command()
@click.argument("ident", metavar="ID")
@click.option("--text", help="New content (re-embedded; - reads standard input).")
@click.option("--title", help="New title.")
@click.option("--type", "mtype", type=click.Choice(TYPES))
@click.option("--project", help="New project ('' clears it).")
@click.option("--salience", type=click.FloatRange(0.0, 1.0), help="New salience, 0 to 1.")
@json_option
@pass_ctx
def edit(c: Ctx, ident: str, text: str | None, title: str | None, mtype: str | None, project: str | None,
         salience: float | None, as_json: bool) -> None:  # fmt: skip
    """Edit a memory; with no option, opens its content in $EDITOR."""
    from lexmem.models import MemoryType

    lm = c.lm()
    m = lm.get(ident)
    if text == "-":
        text = read_stdin()
    if all(v is None for v in (text, title, mtype, project, salience)):
        if not interactive():
            raise InvalidInputError(
                "give --text, --title, --type, --project or --salience (no terminal for an editor)"
            )
        edited = click.edit(m.content + "\n", extension=".md")
        if edited is None or edited.strip() == m.content.strip():
            click.echo("Nothing changed.")
            return
        text = edited
    changes = c.writer().edit(m.id, content=text, title=title, type=MemoryType(mtype) if mtype else None,
                      project=relative_project(c, project), salience=salience)  # fmt: skip
    if as_json:
        emit_json({"id": m.id, "changes": changes.to_dict()})
    else:
        click.echo(f"Updated {short(m.id)}." if changes else "Nothing changed.")


@cli.command()
@click.argument("a")
@click.argument("b")
@click.option(
    "--type",
    "link_type",
    required=True,
    help="e.g. relates_to, depends_on, contradicts, example_of",
)
@click.option("--strength", type=click.FloatRange(0.0, 1.0), default=0.5, show_default=True)
@json_option
@pass_ctx
def link(c: Ctx, a: str, b: str, link_type: str, strength: float, as_json: bool) -> None:
    """Link memory A to memory B (relinking the same pair and type updates the strength)."""
    # One spelling per type: "Depends On", "depends-on" and "depends_on" are one link type.
    link_type = re.sub(r"[\s-]+", "_", link_type.strip().lower())
    if not link_type:
        raise InvalidInputError("--type is empty: give a link type such as relates_to")
    lm = c.lm()
    a_id, b_id = lm.resolve(a), lm.resolve(b)
    changes = c.writer().link(a_id, b_id, link_type, strength)
    if as_json:
        emit_json({"from": a_id, "to": b_id, "type": link_type, "strength": strength,
                   "changes": changes.to_dict()})  # fmt: skip
    else:
        click.echo(f"Linked {short(a_id)} —{link_type}→ {short(b_id)} ({strength:.2f}).")


@cli.command()
@click.argument("text", nargs=-1)
@json_option
def classify(text: tuple[str, ...], as_json: bool) -> None:
    """Show how TEXT would be classified (semantic, episodic or procedural)."""
    from lexmem.capture.classify import RuleBasedClassifier

    body = read_text_arg(text, "text to classify")
    if not body.strip():
        raise InvalidInputError("nothing to classify: the text is empty")
    result = RuleBasedClassifier().classify(body)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(
            f"{result.type} ({result.confidence:.0%}, {method_name(result.method)}): {result.rationale}"
        )


@cli.command()
@json_option
@pass_ctx
def stats(c: Ctx, as_json: bool) -> None:
    """Counts and distributions over the whole store."""
    data = c.lm().stats()
    if as_json:
        emit_json(data)
        return
    click.echo(
        f"memories     {data['memories']}  ({', '.join(f'{v} {k}' for k, v in data['by_status'].items()) or 'none yet'})"
    )
    for key, label in (
        ("by_type", "types"),
        ("by_source", "sources"),
        ("top_projects", "projects"),
    ):
        if data[key]:
            click.echo(f"{label:<13}" + ", ".join(f"{k} {v}" for k, v in data[key].items()))
    click.echo(f"pinned       {data['pinned']}")
    if data["mean_salience"] is not None:
        click.echo(f"salience     {data['mean_salience']:.3f} mean (active)")
    click.echo(
        f"links        {data['links']}"
        + (
            f" ({', '.join(f'{k} {v}' for k, v in data['links_by_type'].items())})"
            if data["links"]
            else ""
        )
    )
    click.echo(f"accesses     {data['accesses']}")
    if data["oldest"]:
        click.echo(f"span         {data['oldest'][:10]} … {data['newest'][:10]}")
    click.echo(
        f"on disk      {data['disk_bytes'] / 1e6:.1f} MB in {data['data_folder']} ({data['table_versions']} table versions)"
    )
    click.echo(
        f"model        {data['embedding_model']}{' (vector index built)' if data['vector_index'] else ''}"
    )
    cap = data.get("capture") or {}
    if cap.get("candidates_by_decision"):
        decided = ", ".join(f"{v} {k}" for k, v in cap["candidates_by_decision"].items())
        click.echo(f"capture      {decided} candidates")
        if cap["saved_by_kind"]:
            click.echo(
                "  kept       " + ", ".join(f"{k} {v}" for k, v in cap["saved_by_kind"].items())
            )
        if cap["confidence_histogram"]:
            click.echo(
                "  confidence "
                + "  ".join(f"{k}:{v}" for k, v in cap["confidence_histogram"].items())
            )
        if cap["top_skip_reasons"]:
            click.echo(
                "  skipped    "
                + "; ".join(f"{k} ({v})" for k, v in cap["top_skip_reasons"].items())
            )
        if cap["sessions_by_status"]:
            click.echo(
                "  sessions   "
                + ", ".join(f"{v} {k}" for k, v in cap["sessions_by_status"].items())
            )


@cli.group(name="llm")
def llm_group() -> None:
    """The optional LLM endpoint ([llm] in settings.toml): its budget today, and a test."""


@llm_group.command(name="status")
@json_option
@pass_ctx
def llm_status(c: Ctx, as_json: bool) -> None:
    """Calls and tokens today against the daily budget, and whether the LLM is paused."""
    from lexmem.llm import status_line

    figures = c.lm().llm_status()
    if as_json:
        emit_json(figures)
        return
    click.echo(f"llm          {status_line(figures)}")
    if figures["configured"] and figures["failures"]:
        failed = ", ".join(f"{v} {k}" for k, v in sorted(figures["failures"].items()))
        click.echo(f"failures     {failed} today; last: {figures['last_error']}")


@llm_group.command(name="test")
@json_option
@pass_ctx
def llm_test(c: Ctx, as_json: bool) -> None:
    """Send the endpoint one fixed prompt (no memory leaves this machine) and time it."""
    from lexmem.licence import ENCODER

    lm = c.lm()
    if not lm.settings.llm.url.strip():
        raise InvalidInputError(
            "no LLM endpoint is configured: set [llm] url in settings.toml "
            "(e.g. http://localhost:11434/v1 for a local Ollama)"
        )
    if lm.llm is None:
        lm.licence.require(ENCODER)
    result = lm.llm.test()
    if as_json:
        emit_json(result)
        return
    click.echo(f"The LLM at {result['url']} answered in {result['seconds']:.2f} s.")


@cli.command(name="export")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet", "csv"]),
    default="jsonl",
    show_default=True,
)
@json_option
@pass_ctx
def export_(c: Ctx, out: Path, fmt: str, as_json: bool) -> None:
    """Export every memory, link and confidence point to the folder OUT (new or empty)."""
    out = out.expanduser().absolute()
    counts = c.lm().export(out, fmt)
    if as_json:
        emit_json({"folder": str(out), "format": fmt, "counts": counts})
    else:
        click.echo(f"Exported {counts['memories']} memories, {counts['links']} links and "
                   f"{counts['confidence']} confidence points to {out} ({fmt}).")  # fmt: skip


@cli.command(name="import")
@click.argument("source", type=click.Path(path_type=Path))
@click.option(
    "--skip-existing",
    is_flag=True,
    help="Leave out the memories, links and confidence points whose ids are already here "
    "(kept as they are here, not compared): for a second import, or the rest of an "
    "interrupted one. Without it they refuse the import.",
)
@json_option
@pass_ctx
def import_(c: Ctx, source: Path, skip_existing: bool, as_json: bool) -> None:
    """Import an export folder made by `lexmem export`, all or nothing.

    The export is checked first: its row counts and file checksums must match its
    manifest, and every link must join memories in the export or already here.
    """
    from lexmem.store.lens import ImportInterrupted

    try:
        with progress("Importing") as update:
            counts = c.lm().import_(source, update, skip_existing=skip_existing)
    except ImportInterrupted as exc:  # said as Ctrl-C is, with what was kept
        click.echo(f"lexmem: {one_line(str(exc))}", err=True)
        raise click.exceptions.Exit(exc.exit_code) from None
    except KeyboardInterrupt:  # while lexmem opened: the import had not begun
        click.echo("lexmem: interrupted before the import began: nothing was imported", err=True)
        raise click.exceptions.Exit(130) from None
    if as_json:
        emit_json(counts)
        return
    line = (
        f"Imported {counts['memories']:,} memories, {counts['links']:,} links and "
        f"{counts['confidence']:,} confidence points"
    )
    skipped = [
        f"{counts[key]:,} {noun}"
        for key, noun in (
            ("skipped_memories", "memories"),
            ("skipped_links", "links"),
            ("skipped_confidence", "confidence points"),
        )
        if counts.get(key)
    ]
    if skipped:
        listed = ", ".join(skipped[:-1]) + " and " + skipped[-1] if len(skipped) > 1 else skipped[0]
        line += f"; skipped {listed} whose ids are already here"
    click.echo(line + ".")


@cli.command()
@click.option(
    "--factor",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=None,
    help="Multiplier (default from settings, 0.98).",
)
@json_option
@pass_ctx
def decay(c: Ctx, factor: float | None, as_json: bool) -> None:
    """Multiply the salience of active, unpinned memories by a factor."""
    _, n = c.writer().decay(factor)
    if as_json:
        emit_json({"decayed": n})
    else:
        click.echo(f"Decayed the salience of {n} memories.")


@contextmanager
def _as_service(c: Ctx, busy_hint: str) -> Iterator[Any]:
    """This process as the capture service for the block (the single writer's lock)."""
    from lexmem.service.writer import CaptureService, ServiceBusyError

    service = CaptureService(c.lm())
    try:
        service.acquire()
    except ServiceBusyError as exc:
        raise InvalidInputError(f"{exc}; {busy_hint}" if busy_hint else str(exc)) from exc
    try:
        yield service
    finally:
        service.release()


def _log_to_file(path: Path) -> None:
    """[MEM:CAPTURE] / [MEM:ENCODE] / [MEM:STORE] lines, kept locally in the data folder."""
    import logging
    from logging.handlers import RotatingFileHandler

    handler = RotatingFileHandler(path, maxBytes=5_000_000, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("lexmem")
    root.setLevel(logging.INFO)
    root.addHandler(handler)


@cli.command()
@click.option(
    "--once", is_flag=True, help="Drain the inbox once and exit (same as `lexmem ingest`)."
)
@pass_ctx
def serve(c: Ctx, once: bool) -> None:
    """Run the capture service headless: drain the inbox into memories until stopped."""
    import signal

    with _as_service(c, "") as service:
        stop = threading.Event()
        service.readers, service.readers_warm = reader_setup(service.lm)
        # A service stays up for days: its model in a process of its own, so that the
        # idle unload gives back everything the model took.
        service.lm.embedder.isolate = not once

        def on_signal(*_: object) -> None:
            stop.set()
            service.wake()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        _log_to_file(service.lm.paths.logs / "lexmem.log")
        click.echo(f"lexmem service: watching {service.inbox.folder} (Ctrl-C to stop)", err=True)
        if once:
            service.drain()
        else:
            service.run(stop, on_report=lambda r: click.echo(
                f"lexmem service: {r.events} events, {r.saved} saved, {r.skipped} skipped, "
                f"{r.reinforced} reinforced, {r.quarantined} quarantined", err=True),
                on_error=lambda m: click.echo(f"lexmem service: error: {m}", err=True))  # fmt: skip


@cli.command()
@json_option
@pass_ctx
def ingest(c: Ctx, as_json: bool) -> None:
    """Drain the inbox once (when no service is running) and report what it did."""
    with _as_service(c, "it drains the inbox itself") as service:
        report = service.drain()
    if as_json:
        emit_json(report.to_dict())
    else:
        click.echo(f"Ingested {report.events} events: {report.saved} memories saved, {report.skipped} skipped, "
                   f"{report.reinforced} reinforced, {report.duplicates} duplicates, "
                   f"{report.quarantined} quarantined, {report.sessions_closed} sessions closed.")  # fmt: skip


@cli.command()
@pass_ctx
def mcp(c: Ctx) -> None:
    """Serve lexmem to an agent over MCP (stdio): search, save, correct and forget memories.

    The ``lexmem`` console script relays the session to the running service instead
    (starting one if none runs); this command serves it in this process.
    """
    from lexmem.agents.mcp_server import run_stdio

    run_stdio(c.home)


@cli.command()
@click.option("--project", help="A project (default: the repository or folder you are in).")
@click.option("--bytes", "max_bytes", type=click.IntRange(512, 1_000_000),
              help="The size cap (default: [context] digest_bytes).")  # fmt: skip
@json_option
@pass_ctx
def digest(c: Ctx, project: str | None, max_bytes: int | None, as_json: bool) -> None:
    """The context an agent's session starts with here: pinned and most useful memories."""
    from lexmem.capture.policy import project_root
    from lexmem.service.digest import render_digest

    where = project if project is not None else project_root(c.cwd())
    text = render_digest(c.lm(), where or None, max_bytes=max_bytes)
    if as_json:
        emit_json({"project": where, "bytes": len(text.encode("utf-8")), "digest": text})
    elif text:
        click.echo(text, nl=False)
    else:
        click.echo(
            f"No memories for {where or 'this folder'} yet: its sessions start with nothing."
        )


@cli.command()
@click.option("--decision", type=click.Choice(["saved", "skipped", "reinforced", "quarantined"]))
@click.option("--session", "session_id", help="Only this session's candidates.")
@click.option("--limit", "-n", type=click.IntRange(1, 100_000), default=50, show_default=True)
@json_option
@pass_ctx
def audit(c: Ctx, decision: str | None, session_id: str | None, limit: int, as_json: bool) -> None:
    """Every capture candidate saved or skipped, with the reason and the rule."""
    entries = c.lm().journal.audit_entries(decision=decision, session_id=session_id, limit=limit)
    if as_json:
        emit_json([e.to_dict() for e in entries])
        return
    if not entries:
        click.echo("No audit entries.")
        return
    rows = [[when(e.timestamp), e.decision, f"{e.confidence:.2f}", e.rule, e.title or e.candidate_id, e.reason]
            for e in entries]  # fmt: skip
    table(["WHEN", "DECISION", "CONF", "RULE", "CANDIDATE", "REASON"], rows, flex=4)


@cli.command()
@click.option("--status", type=click.Choice(["active", "completed", "abandoned"]))
@click.option("--limit", "-n", type=click.IntRange(1, 100_000), default=20, show_default=True)
@json_option
@pass_ctx
def sessions(c: Ctx, status: str | None, limit: int, as_json: bool) -> None:
    """Captured agent sessions, most recent first, with their memory counts."""
    found = c.lm().journal.sessions(status, limit=limit)
    if as_json:
        emit_json([s.to_dict() for s in found])
        return
    if not found:
        click.echo("No sessions captured yet.")
        return
    rows = []
    for s in found:
        minutes = ((s.ended_at or s.last_event_at) - s.started_at).total_seconds() / 60
        rows.append([s.id[:12], s.agent or "-", s.status, when(s.started_at), f"{minutes:.0f} min",
                     str(s.memory_count), s.project or "-"])  # fmt: skip
    table(["SESSION", "AGENT", "STATUS", "STARTED", "LENGTH", "MEMORIES", "PROJECT"], rows)


@cli.group()
def team() -> None:
    """Share projects with a team through a PostgreSQL server (pgvector): join, status, sync, leave."""


@team.command("join")
@click.argument("url")
@click.option("--project", help="The local project to share (default: this repository).")
@click.option(
    "--as", "team_name", metavar="NAME", help="The team's name for it (default: its folder name)."
)
@click.option("--user", default="", metavar="ROLE", help="The database role to connect as.")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the role's password from stdin (kept in the OS keyring; without one, use "
    "a password file: docs/team.md).",
)
@json_option
@pass_ctx
def team_join(c: Ctx, url: str, project: str | None, team_name: str | None, user: str,
              password_stdin: bool, as_json: bool) -> None:  # fmt: skip
    """Share a project with the team whose database is at URL (never with its password)."""
    password = read_stdin_line() if password_stdin else None
    result = c.lm().team_join(
        url, project=project, team_name=team_name, user=user, password=password, cwd=c.cwd()
    )
    if as_json:
        emit_json(result)
        return
    click.echo(
        f"Shared {result['project']} with the team as {result['team_project']!r} "
        f"({result['role']} at {result['server']}); the lexmem service syncs it."
    )


@team.command("leave")
@click.option("--project", help="The local project to stop sharing (default: this repository).")
@json_option
@pass_ctx
def team_leave(c: Ctx, project: str | None, as_json: bool) -> None:
    """Stop sharing a project (the memories pulled so far stay here)."""
    result = c.lm().team_leave(project, cwd=c.cwd())
    if as_json:
        emit_json(result)
        return
    n = result["unpushed_dropped"]
    extra = f"; {n} unpushed {'change' if n == 1 else 'changes'} dropped" if n else ""
    click.echo(f"Stopped sharing {result['project']} ({result['team_project']!r}){extra}.")


@team.command("status")
@json_option
@pass_ctx
def team_status(c: Ctx, as_json: bool) -> None:
    """The server, how far behind this data folder is, the outbox, the last sync, conflicts."""
    data = c.lm().team_status()
    if as_json:
        emit_json(data)
        return
    if not data["joined"]:
        click.echo("This data folder is in no team (`lexmem team join URL`).")
        return
    reach = "reachable" if data["reachable"] else f"unreachable: {data.get('server_error', '')}"
    lag = "unknown" if data["lag_revisions"] is None else str(data["lag_revisions"])
    click.echo(f"server       {data['server']} ({reach})")
    for local, name in sorted(data["projects"].items()):
        out = " (opted out: not synced, no lag counted)" if local in data["opted_out"] else ""
        click.echo(f"project      {local} as {name!r}{out}")
    click.echo(f"lag          {lag} revisions, {data['lag_seconds']:.0f} s")
    click.echo(f"outbox       {data['outbox']} waiting")
    click.echo(f"last sync    {data['last_sync'] or 'never'}")
    if data["last_error"]:
        click.echo(f"last error   {data['last_error']}")
    click.echo(f"conflicts    {data['conflicts']} seen")
    from lexmem.team.membership import lost_text

    lost = data.get("lost") or []
    if lost:
        mine = "edit" if len(lost) == 1 else "edits"
        click.echo(f"lost         {len(lost)} of your {mine} (the team kept another's version):")
    for loss in lost[:20]:
        found = c.lm().store.get_optional(loss["id"], with_embedding=False)
        title = f" “{found.title}”" if found is not None else ""
        click.echo(f"  {short(loss['id'])}{title}: {lost_text(loss)}")
    if len(lost) > 20:
        click.echo(f"  … and {len(lost) - 20} more (lexmem team status --json)")


@team.command("sync")
@json_option
@pass_ctx
def team_sync(c: Ctx, as_json: bool) -> None:
    """Push the outbox and pull the team's changes now."""
    result = c.lm().team_sync()
    if as_json:
        emit_json(result)
        return
    click.echo(
        f"Pushed {result.get('pushed', 0)}, pulled {result.get('pulled', 0)}, "
        f"deleted {result.get('deleted', 0)}; {result.get('conflicts', 0)} conflicts."
    )


@team.command("admin")
@click.argument("url")
@click.option("--team", "team_name", required=True, metavar="NAME", help="The team.")
@click.option("--share", multiple=True, metavar="PROJECT", help="A team project to share with it.")
@click.option("--member", multiple=True, metavar="ROLE", help="A person to add (a role each).")
@click.option("--user", default="", metavar="ROLE", help="The administrator's role.")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the administrator's password, then one per --member, from stdin.",
)
@json_option
@pass_ctx
def team_admin(c: Ctx, url: str, team_name: str, share: tuple[str, ...], member: tuple[str, ...],
               user: str, password_stdin: bool, as_json: bool) -> None:  # fmt: skip
    """Set up a team on the database at URL: the team, the projects it shares, its members."""
    password, passwords = None, {}
    if password_stdin:
        password = read_stdin_line()
        passwords = {role: read_stdin_line() for role in member}
    result = c.lm().team_admin(
        url, team_name, share=share, members=member, passwords=passwords, user=user,
        password=password,
    )  # fmt: skip
    if as_json:
        emit_json(result)
        return
    shared = ", ".join(repr(p) for p in result["shared"]) or "nothing new"
    people = ", ".join(result["members"]) or "nobody new"
    click.echo(f"Team {result['team']!r} at {result['server']}: shares {shared}; members {people}.")


@team.group("server")
def team_server() -> None:
    """A PostgreSQL with pgvector on this machine, to try team memory (pgserver)."""


@team_server.command("start")
@click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the server keeps its data (default: beside the data folder).",
)
@pass_ctx
def team_server_start(c: Ctx, folder: Path | None) -> None:
    """Start it (its Unix socket only, no network) and print the URL to join."""
    from lexmem.api import start_team_server

    where, url = start_team_server(folder, home=c.home)
    click.echo(url)
    click.echo(
        f"lexmem: a team database runs in {where} until `lexmem team server stop`; "
        f"an administrator adds teams and members (docs/team.md), then: lexmem team join URL",
        err=True,
    )


@team_server.command("stop")
@click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="The server's folder (default: beside the data folder).",
)
@pass_ctx
def team_server_stop(c: Ctx, folder: Path | None) -> None:
    """Stop it; its data stays for the next start."""
    from lexmem.api import stop_team_server

    where, ran = stop_team_server(folder, home=c.home)
    click.echo(
        f"Stopped the team database in {where}." if ran else f"No team database runs in {where}."
    )


@cli.group()
def optout() -> None:
    """Repositories lexmem never captures from (a `.lexmem-optout` file works too)."""


def _edit_folders(c: Ctx, key: str, path: str, add: bool, *, must_exist: bool = False) -> Path:
    """Add or remove a folder in a ``[capture]`` list (``optout``, ``watch``); takes effect at once."""
    from lexmem.settings import load_settings, save_settings

    lm = c.lm()
    target = Path(path).expanduser().resolve()
    if add and must_exist and not target.is_dir():
        raise InvalidInputError(f"{target} is not a folder")
    settings = load_settings(lm.paths)
    current = [p for p in getattr(settings.capture, key) if p != str(target)]
    if add:
        current.append(str(target))
    setattr(settings.capture, key, sorted(current))
    save_settings(lm.paths, settings)
    return target


def _show_folders(c: Ctx, key: str, as_json: bool, empty: str) -> None:
    from lexmem.settings import load_settings

    folders = getattr(load_settings(c.lm().paths).capture, key)
    if as_json:
        emit_json(folders)
    else:
        click.echo("\n".join(folders) if folders else empty)


@optout.command("add")
@click.argument("path", type=click.Path(file_okay=False))
@click.option(
    "--purge",
    is_flag=True,
    help="Also erase everything captured from it before: memories, sessions, queued events.",
)
@pass_ctx
def optout_add(c: Ctx, path: str, purge: bool) -> None:
    """Never capture from the repository at PATH (takes effect at once, for the hook too)."""
    target = _edit_folders(c, "optout", path, True)
    click.echo(f"Opted out: {target}")
    if purge:
        changes = c.writer().purge_project(str(target))
        n = len(changes.deleted)
        click.echo(
            f"Erased {n} {'memory' if n == 1 else 'memories'} captured from {target}, with "
            "its sessions and queued events. Backups made before now still hold them."
        )


@optout.command("remove")
@click.argument("path", type=click.Path(file_okay=False))
@pass_ctx
def optout_remove(c: Ctx, path: str) -> None:
    """Capture from PATH again."""
    _edit_folders(c, "optout", path, False)
    click.echo(f"Capturing again: {Path(path).expanduser().resolve()}")


@optout.command("list")
@json_option
@pass_ctx
def optout_list(c: Ctx, as_json: bool) -> None:
    """The opted-out repositories."""
    _show_folders(c, "optout", as_json, "No repositories are opted out.")


@cli.group()
def watch() -> None:
    """Markdown folders whose notes become memories (the service watches them)."""


@watch.command("add")
@click.argument("path", type=click.Path(file_okay=False))
@pass_ctx
def watch_add(c: Ctx, path: str) -> None:
    """Watch the folder PATH (recursively) for .md notes."""
    from lexmem.licence import CAPTURE

    c.lm().licence.require(CAPTURE)  # watched notes are automatic capture
    target = _edit_folders(c, "watch", path, True, must_exist=True)
    click.echo(
        f"Watching {target} (a running service picks it up at once; `lexmem watch scan` reads it now)."
    )


@watch.command("remove")
@click.argument("path", type=click.Path(file_okay=False))
@pass_ctx
def watch_remove(c: Ctx, path: str) -> None:
    """Stop watching PATH (its memories stay)."""
    click.echo(f"No longer watching {_edit_folders(c, 'watch', path, False)}.")


@watch.command("list")
@json_option
@pass_ctx
def watch_list(c: Ctx, as_json: bool) -> None:
    """The watched folders."""
    _show_folders(c, "watch", as_json, "No folders are watched.")


@watch.command("scan")
@json_option
@pass_ctx
def watch_scan(c: Ctx, as_json: bool) -> None:
    """Read the watched folders now (when no service is running), with progress."""
    from lexmem.service.watcher import MarkdownWatcher

    with (
        _as_service(c, "it scans the watched folders itself") as service,
        progress("Reading notes") as update,
    ):
        report = MarkdownWatcher(service, service.settings.watch).scan_all(update)
    if as_json:
        emit_json(report.to_dict())
    else:
        click.echo(f"Read {report.files} files: {report.chunks} new chunks, {report.unchanged} unchanged, "
                   f"{report.superseded} superseded, {len(report.errors)} errors.")  # fmt: skip
        for err in report.errors:
            click.echo(f"  {err}", err=True)


@cli.command()
@json_option
@pass_ctx
def optimize(c: Ctx, as_json: bool) -> None:
    """Build missing indices (the vector index once there are many memories) and compact."""
    lm = c.lm()
    building = lm.store.needs_vector_index()
    if building and not as_json:
        click.echo(
            f"Building the vector index over {lm.count()} memories (this takes a while)…", err=True
        )
    lm.optimize()
    info = {"memories": lm.count(), "vector_index": lm.store.has_vector_index(),
            "table_versions": lm.store.versions_on_disk()}  # fmt: skip
    if as_json:
        emit_json(info)
    else:
        click.echo(f"Optimized: {info['table_versions']} table versions kept"
                   + (", vector index built." if building else "."))  # fmt: skip


@cli.command()
@json_option
@pass_ctx
def reembed(c: Ctx, as_json: bool) -> None:
    """Recompute every vector with the configured embedding model."""
    with progress("Re-embedding") as update:
        n = c.lm().reembed(update)
    if as_json:
        emit_json({"reembedded": n})
    else:
        click.echo(f"Re-embedded {n} memories with {c.lm().embedder.model_name}.")


def _integrate(c: Ctx, action: str, agent: str, scope: str, dry_run: bool) -> None:
    """Install or uninstall lexmem in an agent; --dry-run prints the diff and writes nothing."""
    from lexmem.agents.integrations import apply_plan, plan
    from lexmem.config import Paths, resolve_paths

    paths = Paths(Path(c.home).expanduser().absolute()) if c.home else resolve_paths()
    if agent == "desktop":
        _desktop(c, action, scope, dry_run, paths)
        return
    result = plan(agent, action, scope=scope, paths=paths)
    if dry_run:
        click.echo(result.diff(), nl=False)
    else:
        for line in apply_plan(result, paths):
            click.echo(line)
        if action == "install":
            _record_mcp_manifest(paths)
    for note in result.notes:
        click.echo(f"note: {note}")
    if not result.changes:
        click.echo(f"nothing to change: lexmem is already {action}ed for {agent} ({scope})")
    elif dry_run:
        click.echo(f"dry run: {len(result.changes)} files would change; nothing was written")


def _record_mcp_manifest(paths: Any) -> None:
    """What the MCP relay answers an agent's opening with while a service starts (every
    service records it again): so the first session after an install sees lexmem's tools
    at once. A courtesy: the install stands without it."""
    from lexmem.agents.mcp_server import record_manifest

    try:
        paths.ensure()
        record_manifest(paths)
    except Exception as exc:  # noqa: BLE001 - said, never fatal to the install
        click.echo(f"note: lexmem mcp's opening answers were not recorded ({exc})", err=True)


def _desktop(c: Ctx, action: str, scope: str, dry_run: bool, paths: Any) -> None:
    """`lexmem install|uninstall desktop`: the applications menu entry and its icon."""
    from lexmem.desktop import apply_desktop, menu_command, plan_desktop

    if scope != "user":
        raise InvalidInputError(
            "the desktop entry is installed for the user only: leave out --project"
        )
    home = Path(c.home).expanduser().absolute() if c.home else None
    result = plan_desktop(action, command=menu_command(home), paths=paths)
    if not result.changes and not result.folders:
        click.echo(f"nothing to change: the desktop entry is already {action}ed")
    elif dry_run:
        click.echo(result.describe(), nl=False)
        click.echo(f"dry run: {len(result.changes)} files would change; nothing was written")
    else:
        for line in apply_desktop(result, paths):
            click.echo(line)


_SCOPE_OPTIONS = (
    click.option("--user", "scope", flag_value="user", default=True,
                 help="Your own settings, for every project (the default)."),
    click.option("--project", "scope", flag_value="project",
                 help="This project's settings (Claude Code: .claude/settings.json and .mcp.json)."),
    click.option("--dry-run", is_flag=True, help="Print the changes as a diff; write nothing."),
)  # fmt: skip


def _scoped(f: F) -> F:
    for option in reversed(_SCOPE_OPTIONS):
        f = option(f)
    return f


@cli.command()
@click.argument("agent", type=click.Choice(["claude", "codex", "desktop"]))
@_scoped
@pass_ctx
def install(c: Ctx, agent: str, scope: str, dry_run: bool) -> None:
    """Set lexmem up in AGENT: its capture hooks and the `lexmem mcp` server.

    `desktop` adds lexmem to the applications menu (Linux), with its icon."""
    _integrate(c, "install", agent, scope, dry_run)


@cli.command()
@click.argument("agent", type=click.Choice(["claude", "codex", "desktop"]))
@_scoped
@pass_ctx
def uninstall(c: Ctx, agent: str, scope: str, dry_run: bool) -> None:
    """Remove exactly what `lexmem install AGENT` added, leaving the rest as it was.

    `desktop` also removes the start-at-login entry."""
    _integrate(c, "uninstall", agent, scope, dry_run)


@cli.command()
@click.option("--fix", is_flag=True, help="Tighten loose permissions in the data folder.")
@click.option(
    "--repair",
    is_flag=True,
    help="Take damaged tables back to their last good version (quit lexmem first).",
)
@json_option
@click.pass_context
def doctor(ctx: click.Context, fix: bool, repair: bool, as_json: bool) -> None:
    """Check the model, the data folder and its tables, permissions, the keyring, the agents
    and the hook."""
    from lexmem.doctor import run_checks

    obj = ctx.find_object(Ctx)
    home = obj.home if obj else None
    checks = run_checks(home, fix=fix, repair=repair)
    if as_json:
        emit_json([ch.to_dict() for ch in checks])
    else:
        for ch in checks:
            mark = {
                "ok": click.style("ok  ", fg="green"),
                "warn": click.style("warn", fg="yellow"),
                "fail": click.style("FAIL", fg="red"),
            }[ch.state]
            click.echo(f"{mark}  {ch.name:<15}{ch.detail}")
    if any(ch.state == "fail" for ch in checks):
        ctx.exit(1)


@cli.group(cls=LexmemGroup)
def licence() -> None:
    """Your tier (Core or Writer Pro) and licence key (`license` works too)."""


def _licence_lines(st: Any) -> list[str]:
    from lexmem.keystore import backend_available
    from lexmem.licence import GATES, KEY_URL

    lines = [f"Tier       {st.tier_name}" + (" (trial)" if st.source == "trial" else "")]
    lic = st.licence
    if lic is not None:
        lines.append(f"Licensee   {lic.licensee} <{lic.email}>")
        lines.append(
            f"Expires    {lic.expires.date().isoformat() if lic.expires else 'never (perpetual)'}"
        )
        lines.append(f"Key        {lic.key_id}, from {st.source.removeprefix('key ').strip('()')}")
    elif st.source == "trial":
        day = "day" if st.trial_days_left == 1 else "days"
        lines.append(
            f"Trial      {st.trial_days_left} {day} left (ends {st.trial_ends.date().isoformat()})"
        )
    for gate, what in GATES.items():
        mark = "yes" if st.is_enabled(gate) else "no "
        lines.append(f"  {mark}  {gate}: {what}")
    if st.problem:
        lines.append(f"Problem    {st.problem}")
    if lic is None or st.tier != "writer_pro":
        lines.append(f"Get a key  {KEY_URL}, then: lexmem licence activate KEY")
    ok, why = backend_available()
    if not ok:
        lines.append(
            f"Keyring    unavailable ({why}); pass a key in LEXMEM_LICENCE, or in a file "
            "only you can read named by LEXMEM_LICENCE_FILE"
        )
    return lines


@licence.command("show")
@json_option
@pass_ctx
def licence_show(c: Ctx, as_json: bool) -> None:
    """The tier in effect, what it enables, and the trial's days left."""
    st = c.lm().licence.status()
    if as_json:
        emit_json(st.to_dict())
        return
    if st.notice:
        click.echo(st.notice, err=True)
        c.lm().licence.acknowledge_notice()
    click.echo("\n".join(_licence_lines(st)))


@licence.command("activate")
@click.argument("key")
@json_option
@pass_ctx
def licence_activate(c: Ctx, key: str, as_json: bool) -> None:
    """Check KEY and keep it in the OS keyring (`-` reads it from standard input)."""
    if key == "-":
        key = read_stdin()
    lic = c.lm().licence.activate(key)
    if as_json:
        emit_json(lic.to_dict())
        return
    until = lic.expires.date().isoformat() if lic.expires else "no end date"
    name = "Writer Pro" if lic.tier == "writer_pro" else "Core"
    click.echo(f"Activated {name} for {lic.licensee} ({until}); the key is in the OS keyring.")


@licence.command("remove")
@json_option
@pass_ctx
def licence_remove(c: Ctx, as_json: bool) -> None:
    """Remove the key from the OS keyring (what you stored stays yours)."""
    removed = c.lm().licence.remove()
    if as_json:
        emit_json({"removed": removed})
    else:
        click.echo("Removed the licence key." if removed else "There was no licence key to remove.")


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    tighten_umask()  # files the storage engine creates are the user's alone
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="lexmem")
    except SystemExit as exc:
        try:  # what is still buffered, now rather than at exit: a closed pipe is said here
            sys.stdout.flush()
        except BrokenPipeError:
            raise SystemExit(closed_pipe()) from None
        except (OSError, ValueError):
            pass
        raise exc from None


# -- answering readers in the service ----------------------------------------------------
#
# The service's reader socket (lexmem.service.readers) hands a reader's request to
# one of these. A read command is run here, in the warm process, exactly as the
# reader's own process would have run it, and the reader prints what it printed.

_RENDER = threading.Lock()  # one command at a time: sys.stdout is the process's


class _Output(io.TextIOWrapper):
    """What a command prints for a reader, with the reader's terminal-ness."""

    def __init__(self, tty: bool) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty

    def text(self) -> str:
        self.flush()
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue().decode("utf-8")


class _Routed:
    """A standard stream that sends one thread's writes elsewhere, everyone else's on."""

    def __init__(self, original: Any, target: Any) -> None:
        self._original = original
        self._target = target
        self._thread = threading.get_ident()

    def _stream(self) -> Any:
        return self._target if threading.get_ident() == self._thread else self._original

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream(), name)

    def write(self, text: str) -> int:
        return int(self._stream().write(text))

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return bool(self._stream().isatty())


def render_for_reader(lm: Any, argv: Sequence[str], *, cwd: str, columns: int | None,
                      tty: Sequence[bool] = (False, False, False)) -> tuple[int, str, str]:  # fmt: skip
    """Run the read command ``argv`` with the open core ``lm``: exit code, stdout, stderr."""
    if not argv or argv[0] not in wire.READ_COMMANDS:
        return 2, "", f"lexmem: error: the service answers reads only, not {argv[:1]}\n"
    out, err = _Output(bool(tty[1])), _Output(bool(tty[2]))
    with _RENDER:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Routed(saved[0], out), _Routed(saved[1], err)  # type: ignore[assignment]
        token = _COLUMNS.set(columns)
        try:
            cli.main(args=list(argv), prog_name="lexmem", obj=WarmCtx(lm, cwd))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
        finally:
            _COLUMNS.reset(token)
            sys.stdout, sys.stderr = saved
    return code, out.text(), err.text()


def reader_handlers(lm: Any) -> dict[str, Any]:
    """What the service's reader socket answers, with the service's open core ``lm``."""
    shared = threading.RLock()  # the MCP sessions' tool calls, one at a time

    def cli_read(request: dict[str, Any], conn: Any, stream: Any) -> None:
        argv = request.get("argv")
        tty = request.get("tty")
        columns = request.get("columns")
        code, out, err = render_for_reader(
            lm,
            [str(a) for a in argv] if isinstance(argv, list) else [],
            cwd=str(request.get("cwd") or lm.paths.home),
            columns=columns if isinstance(columns, int) and columns > 0 else None,
            tty=[bool(t) for t in tty][:3] if isinstance(tty, list) and len(tty) >= 3 else (False,) * 3,
        )  # fmt: skip
        wire.send_json(conn, {"exit": code, "stdout": out, "stderr": err})

    def mcp_session(request: dict[str, Any], conn: Any, stream: Any) -> None:
        from lexmem.agents.mcp_server import serve_connection

        serve_connection(lm, request, conn, stream, lock=shared)

    def event(request: dict[str, Any], conn: Any, stream: Any) -> None:
        from lexmem.service.intake import serve_event

        serve_event(lm, request, conn, stream)

    return {"cli": cli_read, "mcp": mcp_session, "event": event}


def reader_setup(lm: Any) -> tuple[dict[str, Any], Callable[[], None]]:
    """The reader socket's handlers and warm-up for a service on the open core ``lm``
    (``lexmem serve``; the tray app, through its launcher)."""
    return reader_handlers(lm), reader_warmup(lm)


def reader_warmup(lm: Any) -> Callable[[], None]:
    """What the service does once its reader socket is up: record its answers to an
    MCP agent's opening requests for the relay, in a process of its own. The MCP SDK
    (about 30 MB resident) then enters the service with an agent's first session, whose
    relay connects as the agent starts: the import overlaps the agent's first turn."""

    def warm() -> None:
        import subprocess

        if is_frozen():  # a bundle: no interpreter to run it apart
            from lexmem.agents.mcp_server import record_manifest

            record_manifest(lm.paths, lm)
            return
        argv = [sys.executable, "-m", "lexmem.agents.mcp_server", "--record-manifest"]
        done = subprocess.run(
            [*argv, str(lm.paths.home)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, timeout=300, check=False, cwd=str(lm.paths.home),
        )  # fmt: skip
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise LexmemError(
                f"recording the MCP manifest failed (exit code {done.returncode}"
                f"{': ' + said[-1] if said else ''})"
            )

    return warm
