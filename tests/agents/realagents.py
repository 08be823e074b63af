"""Driving the real Claude Code and Codex CLIs (installed by ``./dev`` from
``tests/agents/package-lock.json``) against :mod:`fakemodel`, each in a sandbox of its
own: a temporary HOME, CODEX_HOME and lexmem data folder, and no network but 127.0.0.1.

Shared by ``tests/test_agents_real.py`` and ``bench/agents.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "AGENTS_DIR",
    "CLI_TIMEOUT",
    "Sandbox",
    "agent_bin",
    "missing_reason",
]

AGENTS_DIR = Path(__file__).resolve().parent
REPO = AGENTS_DIR.parent.parent
# Hard limit on one agent session (the fake model answers at once; a session takes seconds).
CLI_TIMEOUT = 120.0
BINS = {"claude": "claude", "codex": "codex"}


def agent_bin(agent: str) -> Path:
    return AGENTS_DIR / "node_modules" / ".bin" / BINS[agent]


def missing_reason(agent: str) -> str | None:
    """Why ``agent``'s CLI cannot run here (``None``: it can)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are not installed, so ./dev did not install the agent CLIs"
    exe = agent_bin(agent)
    if not exe.exists():
        return f"{exe} is missing: run ./dev setup (npm ci in {AGENTS_DIR})"
    return None


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@dataclass
class Run:
    """One finished agent session."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class Sandbox:
    """A user's machine in a temporary folder: HOME, CODEX_HOME, the lexmem data folder
    and a project (a git repository) to work in, with the environment every command gets."""

    def __init__(self, root: Path, model_url: str, *, lexmem_home: Path | None = None) -> None:
        self.root = root
        self.home = root / "home"
        self.codex_home = self.home / ".codex"
        self.lexmem_home = lexmem_home or root / "lexmem"
        # Codex refuses some work folders directly under /tmp; a project below HOME is
        # where a user's would be.
        self.project = self.home / "work" / "shop"
        for d in (self.home, self.codex_home, self.project):
            d.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        self.python = self._commands()
        self.model_url = model_url
        self.env = self._env()
        self._leftovers: list[int] = []

    # -- the environment -------------------------------------------------------------------

    def _commands(self) -> Path:
        """This checkout's ``lexmem`` and ``lexmem-hook``, as an installation would have
        them, in a virtual environment of the sandbox's own that shares the test's
        packages: the agents run this checkout's code whatever the shared environment's
        console scripts point at, and with whatever environment the agent passes on
        (Codex gives MCP servers only HOME, PATH and a few more)."""
        venv = self.root / "venv"
        bindir = venv / "bin"
        bindir.mkdir(parents=True)
        real = Path(sys.executable)
        base = Path(os.path.realpath(real))
        (venv / "pyvenv.cfg").write_text(
            f"home = {base.parent}\ninclude-system-site-packages = false\n"
        )
        python = bindir / "python"
        python.symlink_to(base)
        site = next(
            Path(p) for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)
        )
        # The shared packages by a path line, so their own ``.pth`` files are not run: the
        # shared environment's editable install of lexmem imports a finder (pathlib and
        # more, ~9 ms) in every process, which an installed lexmem (a wheel, the bundle)
        # does not. This checkout's lexmem is on the path by a line of its own too (an
        # agent may pass on no PYTHONPATH, and the service's model process is started
        # with ``python -m``), and its resources are there under their installed name.
        lib = venv / site.relative_to(sys.prefix)
        lib.mkdir(parents=True)
        (lib / "shared.pth").write_text(f"{REPO}\n{site}\n")
        (lib / "lexmem_resources").symlink_to(REPO / "resources", target_is_directory=True)
        scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
        for name, target in scripts.items():
            module, func = target.split(":")
            script = bindir / name
            script.write_text(
                f"#!{python}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                f"from {module} import {func}\nsys.exit({func}())\n"
            )
            script.chmod(0o755)
        return python

    def _env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR", "PYTHONPATH", "SYSTEMROOT")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        # lexmem's commands first on PATH: the ones beside this interpreter.
        env["PATH"] = os.pathsep.join([str(self.python.parent), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        env.update(
            HOME=str(self.home),
            USER=os.environ.get("USER", "tester"),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            CODEX_HOME=str(self.codex_home),
            LEXMEM_HOME=str(self.lexmem_home),
            PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
            # Claude Code: the fake model, no telemetry, updates or other traffic.
            ANTHROPIC_BASE_URL=self.model_url,
            ANTHROPIC_API_KEY="sk-ant-fake-key-for-tests",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_ERROR_REPORTING="1",
            DISABLE_BUG_COMMAND="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1",
            # As root, --dangerously-skip-permissions is refused outside a sandbox.
            IS_SANDBOX="1",
            # Codex: the key its fake provider reads (config.toml's env_key).
            LEXMEM_FAKE_OPENAI_KEY="sk-fake-key-for-tests",
            NO_COLOR="1",
        )
        env.pop("PYTHONSTARTUP", None)
        return env

    # -- commands ----------------------------------------------------------------------------

    def run(
        self, argv: list[str], *, timeout: float = CLI_TIMEOUT, input: str | None = None,
        cwd: Path | None = None, check: bool = True,
    ) -> Run:  # fmt: skip
        """Run a command in its own process group, killed whole at the timeout."""
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=str(cwd or self.project), env=self.env, text=True,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise AssertionError(
                f"{argv[0]} did not finish within {timeout:.0f} s\nstdout: {out[-3000:]}\n"
                f"stderr: {err[-3000:]}"
            ) from None
        finally:
            self._leftovers.append(proc.pid)
        result = Run(argv, proc.returncode, out, err, time.monotonic() - start)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv[:3])}… exited {proc.returncode}\nstdout: {out[-3000:]}\n"
                f"stderr: {err[-3000:]}"
            )
        return result

    def lexmem(self, *args: str, check: bool = True, input: str | None = None) -> Run:
        return self.run(
            [str(self.python), "-m", "lexmem", *args], check=check, input=input, timeout=180
        )

    def lexmem_json(self, *args: str) -> Any:
        return json.loads(self.lexmem(*args, "--json").stdout)

    def close(self) -> None:
        """Stop what the sessions left running (the agents' helpers, a `lexmem serve` the
        SessionStart hook started), each by its process group or pid."""
        for pid in self._leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self._stop_service()

    def _stop_service(self) -> None:
        pid_file = self.lexmem_home / "service.lock"  # holds the pid of the service
        # A service the last session's hook is still starting writes its pid in a moment.
        pid = None
        for _ in range(30):
            try:
                pid = int(pid_file.read_text().split()[0])
                break
            except (OSError, ValueError, IndexError):
                time.sleep(0.1)
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            return
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    # -- Claude Code ---------------------------------------------------------------------------

    def claude(self, prompt: str, *extra: str, timeout: float = CLI_TIMEOUT) -> Run:
        argv = [
            str(agent_bin("claude")), "-p", prompt, "--dangerously-skip-permissions",
            "--output-format", "json", *extra,
        ]  # fmt: skip
        return self.run(argv, timeout=timeout)

    # -- Codex -----------------------------------------------------------------------------------

    def codex_provider_config(self) -> str:
        """config.toml lines that send Codex to the fake model (what a user of a
        self-hosted OpenAI-compatible endpoint writes)."""
        return (
            'model = "gpt-fake"\n'
            'model_provider = "fake"\n'
            "\n"
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{self.model_url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "LEXMEM_FAKE_OPENAI_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            "\n"
            f'[projects."{self.project}"]\n'
            'trust_level = "trusted"\n'
        )

    def codex(self, prompt: str, *extra: str, timeout: float = CLI_TIMEOUT) -> Run:
        argv = [
            str(agent_bin("codex")), "exec", "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check", "--color", "never", *extra, prompt,
        ]  # fmt: skip
        return self.run(argv, timeout=timeout)
