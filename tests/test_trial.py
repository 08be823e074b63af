"""The trial cannot be reset, and a damaged trial never breaks capture or a command.

Each test is one way a person might try to get a fresh trial (or one way the trial's
files get damaged), tried both with a keyring (the in-memory backend from conftest) and
without one (the null backend, as on a headless Linux machine, and as every subprocess
here runs). The clock is injected where the test turns it; the CLI tests use the real
clock and plant a trial that started ten days ago.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import keyring
import pytest
from click.testing import CliRunner, Result
from conftest import MemoryKeyring, shared_model
from keyring.backends import null

from lexmem.capture.inbox import Inbox, make_event
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.licence import CAPTURE, CORE, TRIAL_DAYS, WRITER_PRO, LicenceService, trial_state_dir
from lexmem.service.writer import CaptureService

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
OVER = "the trial counts as over"


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["keyring", "no-keyring"])
def mode(request: pytest.FixtureRequest, memory_keyring: MemoryKeyring) -> str:
    """With the in-memory keyring, or with none (the null backend: switched off)."""
    if request.param == "no-keyring":
        keyring.set_keyring(null.Keyring())  # conftest's fixture puts the old one back
    return str(request.param)


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def trial(paths: Paths, clock: Clock) -> Callable[..., LicenceService]:
    """A licence service as a new process would make it (no cache, no key in the
    environment), on the test's data folder unless another is named."""

    def make(home: Path | None = None) -> LicenceService:
        return LicenceService(Paths(home) if home else paths, clock=clock, environ={}, cache_s=0.0)

    return make


def _started_ten_days_ago(home: Path, days_ago: float = 10) -> None:
    """A trial that began ``days_ago`` days before now (the real clock), as lexmem wrote it."""
    Paths(home).ensure()
    when = datetime.now(UTC) - timedelta(days=days_ago)
    LicenceService(Paths(home), clock=lambda: when, environ={}, cache_s=0.0).status()


def _edit(file: Path, **changes: Any) -> None:
    data = json.loads(file.read_text())
    data.update(changes)
    file.write_text(json.dumps(data))


# -- the trial's start survives every way of losing or changing a copy ----------------------------


def test_the_trial_is_kept_in_the_keyring_and_outside_the_data_folder_owner_only(
    trial: Callable[..., LicenceService], paths: Paths, memory_keyring: MemoryKeyring
) -> None:
    trial().status()
    state = trial_state_dir()
    assert state == Path(os.environ["XDG_STATE_HOME"]) / "lexmem"
    assert not state.is_relative_to(paths.home)
    assert oct(state.stat().st_mode & 0o777) == "0o700"
    for name in ("trial.json", "trial.key"):
        assert oct((state / name).stat().st_mode & 0o777) == "0o600", name
    assert oct(trial().trial_file.stat().st_mode & 0o777) == "0o600"
    record = json.loads(memory_keyring.secrets[("lexmem", "trial")])
    assert record["started"] == T0.isoformat() and set(record["macs"]) == {"keyring", "local"}
    assert ("lexmem", "trial-key") in memory_keyring.secrets


def test_deleting_the_data_folders_trial_file_keeps_the_start(
    mode: str, trial: Callable[..., LicenceService], clock: Clock
) -> None:
    trial().status()
    clock.now += timedelta(days=10)
    trial().trial_file.unlink()
    st = trial().status()
    assert (st.tier, st.trial_days_left, st.trial_ends) == (WRITER_PRO, 4, T0 + timedelta(days=14))
    clock.now += timedelta(days=5)
    trial().trial_file.unlink()
    assert trial().status().tier == CORE


def test_a_new_data_folder_does_not_start_a_new_trial(
    mode: str, trial: Callable[..., LicenceService], clock: Clock, tmp_path: Path
) -> None:
    trial().status()
    clock.now += timedelta(days=10)
    shutil.rmtree(trial().paths.home)  # the whole data folder, gone
    assert trial().status().trial_days_left == 4
    elsewhere = tmp_path / "another-data-folder"
    assert trial(elsewhere).status().trial_days_left == 4
    clock.now += timedelta(days=5)
    assert trial(elsewhere).status().tier == CORE


def test_turning_the_clock_back_gives_no_days_back(
    mode: str, trial: Callable[..., LicenceService], clock: Clock
) -> None:
    trial().status()
    clock.now += timedelta(days=10)
    assert trial().status().trial_days_left == 4  # the latest time seen is kept
    clock.now = T0 + timedelta(hours=1)  # the clock set back to the trial's first day
    assert trial().status().trial_days_left == 4
    clock.now = T0 - timedelta(days=30)  # or to before the trial began
    assert trial().status().trial_days_left == 4
    clock.now = T0 + timedelta(days=15)
    assert trial().status().tier == CORE
    clock.now = T0 + timedelta(days=2)  # once over, no clock brings it back
    st = trial().status()
    assert st.tier == CORE and not st.is_enabled(CAPTURE)


@pytest.mark.parametrize(
    "change",
    [
        {"started": "NOW"},  # moved to today: a fresh 14 days
        {"days": 9999},
        {"days": 140},
        {"seen": "NOW"},
        {"ended_notice": True},
        {"macs": {}},
    ],
    ids=["started", "days-9999", "days-140", "seen", "ended_notice", "no-signature"],
)
def test_an_edited_record_means_the_trial_is_over(
    mode: str, trial: Callable[..., LicenceService], clock: Clock, change: dict[str, Any]
) -> None:
    trial().status()
    clock.now += timedelta(days=3)
    now = clock.now.isoformat()
    _edit(trial().trial_file, **{k: now if v == "NOW" else v for k, v in change.items()})
    st = trial().status()
    assert (st.tier, st.source) == (CORE, "core")
    assert OVER in st.problem and "trial.json" in st.problem and "\n" not in st.problem
    assert not st.is_enabled(CAPTURE) and st.trial_ends is None  # no date worth showing
    assert st.notice == ""  # not "the trial has ended": it was not the time that ran out


def test_an_edited_record_outside_the_data_folder_means_the_trial_is_over(
    mode: str, trial: Callable[..., LicenceService], clock: Clock
) -> None:
    trial().status()
    clock.now += timedelta(days=3)
    _edit(trial_state_dir() / "trial.json", started=clock.now.isoformat())
    st = trial().status()
    assert st.tier == CORE and "per-user state folder" in st.problem and OVER in st.problem


def test_an_edited_record_stays_over_until_it_is_removed_then_the_start_still_counts(
    mode: str, trial: Callable[..., LicenceService], clock: Clock
) -> None:
    trial().status()
    clock.now += timedelta(days=3)
    _edit(trial().trial_file, started=clock.now.isoformat())
    for _ in range(3):  # never repaired into a fresh record behind the person's back
        assert trial().status().tier == CORE
    trial().trial_file.unlink()
    assert trial().status().trial_days_left == 11  # from the first start, not the edited one


GARBAGE: dict[str, bytes | None] = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "not-json": b"{started: yesterday",
    "a-list": b"[1, 2, 3]",
    "a-number": b"14",
    "empty-object": b"{}",
    "huge": b" " * 200_000 + b"{}",
    "a-directory": None,
}


@pytest.mark.parametrize("content", GARBAGE.values(), ids=GARBAGE.keys())
def test_a_corrupt_or_replaced_trial_file_means_the_trial_is_over(
    mode: str, trial: Callable[..., LicenceService], content: bytes | None
) -> None:
    trial().status()
    file = trial().trial_file
    file.unlink()
    if content is None:
        file.mkdir()
    else:
        file.write_bytes(content)
    st = trial().status()
    assert st.tier == CORE and OVER in st.problem and "\n" not in st.problem
    assert file.is_dir() if content is None else file.read_bytes() == content  # left as it was


MALFORMED: dict[str, dict[str, Any]] = {
    "days-text": {"days": "fourteen"},
    "days-huge": {"days": 10**30},
    "days-negative": {"days": -5},
    "days-float": {"days": 14.5},
    "days-bool": {"days": True},
    "days-null": {"days": None},
    "started-words": {"started": "yesterday"},
    "started-number": {"started": 1730000000},
    "started-naive": {"started": "2026-11-01T09:00:00"},
    "started-year-9999": {"started": "9999-12-31T23:59:59+00:00"},
    "started-future": {"started": "2031-01-01T00:00:00+00:00"},
    "started-missing": {"started": None},
    "notice-text": {"ended_notice": "no"},
}


@pytest.mark.parametrize("fields", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_unsigned_trial_file_is_over_never_an_exception(
    mode: str, trial: Callable[..., LicenceService], paths: Paths, fields: dict[str, Any]
) -> None:
    """The unsigned shape lexmem wrote before, with a bad field, and nothing else to go by."""
    record = {"started": T0.isoformat(), "days": 14, "ended_notice": False, **fields}
    paths.home.joinpath("trial.json").write_text(json.dumps(record))
    svc = trial()
    st = svc.status()
    assert st.tier == CORE and OVER in st.problem
    assert svc.is_enabled(CAPTURE) is False
    svc.acknowledge_notice()  # nothing to say, nothing raised


def test_an_unsigned_record_from_before_counts_its_start_and_is_signed_from_then_on(
    mode: str, trial: Callable[..., LicenceService], paths: Paths, clock: Clock
) -> None:
    """A data folder from a lexmem before signed records keeps its trial's start."""
    record = {"started": (T0 - timedelta(days=3)).isoformat(), "days": 14, "ended_notice": False}
    paths.home.joinpath("trial.json").write_text(json.dumps(record))
    assert trial().status().trial_days_left == 11
    assert "macs" in json.loads(paths.home.joinpath("trial.json").read_text())
    assert "macs" in json.loads((trial_state_dir() / "trial.json").read_text())
    paths.home.joinpath("trial.json").write_text(json.dumps(record))  # the old shape again
    assert trial().status().trial_days_left == 11  # it can only make the trial shorter


def test_without_a_keyring_losing_the_per_user_key_means_over_not_fresh(
    trial: Callable[..., LicenceService], clock: Clock
) -> None:
    """Deleting the state folder leaves a data-folder copy nobody can check (with a
    keyring, the keyring's key still checks it: the test above)."""
    keyring.set_keyring(null.Keyring())
    trial().status()
    clock.now += timedelta(days=3)
    shutil.rmtree(trial_state_dir())
    st = trial().status()
    assert st.tier == CORE and OVER in st.problem


def test_with_a_keyring_the_keyring_alone_remembers_the_start(
    trial: Callable[..., LicenceService], clock: Clock, memory_keyring: MemoryKeyring
) -> None:
    trial().status()
    clock.now += timedelta(days=10)
    trial().status()
    shutil.rmtree(trial_state_dir())
    shutil.rmtree(trial().paths.home)
    assert trial().status().trial_days_left == 4
    assert (trial_state_dir() / "trial.json").is_file()  # copied back out of the keyring


def test_deleting_a_keyring_entry_does_not_reset_the_trial(
    trial: Callable[..., LicenceService], clock: Clock, memory_keyring: MemoryKeyring
) -> None:
    trial().status()
    clock.now += timedelta(days=10)
    del memory_keyring.secrets[("lexmem", "trial")]  # the keyring's copy: the files remember
    assert trial().status().trial_days_left == 4
    assert ("lexmem", "trial") in memory_keyring.secrets  # and it is put back
    del memory_keyring.secrets[("lexmem", "trial-key")]  # the signing key: nothing checks out
    st = trial().status()
    assert st.tier == CORE and "gone from the keyring" in st.problem
    shutil.rmtree(trial().paths.home)
    shutil.rmtree(trial_state_dir())
    assert trial().status().tier == CORE  # the keyring's own copy still fails its check


def test_a_damaged_keyring_key_means_over(
    trial: Callable[..., LicenceService], memory_keyring: MemoryKeyring
) -> None:
    trial().status()
    memory_keyring.secrets[("lexmem", "trial-key")] = "not a key"
    st = trial().status()
    assert st.tier == CORE and "signing key in the OS keyring is damaged" in st.problem


def test_the_ended_notice_is_said_once_for_the_person_not_once_per_folder(
    mode: str, trial: Callable[..., LicenceService], clock: Clock, tmp_path: Path
) -> None:
    trial().status()
    clock.now += timedelta(days=15)
    svc = trial()
    assert "trial has ended" in svc.status().notice
    svc.acknowledge_notice()
    assert trial().status().notice == ""
    elsewhere = trial(tmp_path / "another-data-folder").status()
    assert (elsewhere.tier, elsewhere.notice) == (CORE, "")


def test_a_licence_key_still_works_whatever_the_trial_records_say(
    mode: str, trial: Callable[..., LicenceService], paths: Paths, tmp_path: Path
) -> None:
    from test_licence import Vendor

    vendor = Vendor()
    paths.home.joinpath("trial.json").write_text('{"days": "x"}')
    svc = LicenceService(
        paths, public_keys={vendor.kid: vendor.public}, clock=lambda: T0 + timedelta(days=1),
        environ={"LEXMEM_LICENCE": vendor.issue()}, cache_s=0.0,
    )  # fmt: skip
    st = svc.status()
    assert (st.tier, st.source) == (WRITER_PRO, "key (LEXMEM_LICENCE)") and st.problem == ""
    garbage = tmp_path / "key.bin"
    garbage.write_bytes(b"\xff\xfe\x00binary")
    garbage.chmod(0o600)
    svc = LicenceService(paths, environ={"LEXMEM_LICENCE_FILE": str(garbage)}, cache_s=0.0)
    st = svc.status()  # a key file that is not text: one line, not a crash
    assert st.tier == CORE and "not text" in st.problem


# -- the command line: each command keeps working, and capture is skipped, never quarantined ------


def run(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args), prog_name="lexmem", catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def show() -> dict[str, Any]:
    return json.loads(run("licence", "show", "--json").stdout)  # type: ignore[no-any-return]


def test_cli_deleting_trial_json_or_a_new_data_folder_keeps_the_days(
    mode: str, data_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _started_ten_days_ago(data_home)
    (data_home / "trial.json").unlink()
    assert show()["trial_days_left"] == 4
    monkeypatch.setenv("LEXMEM_HOME", str(tmp_path / "fresh-folder"))
    assert show()["trial_days_left"] == 4
    assert "Trial      4 days left" in run("licence", "show").stdout


def test_cli_edited_started_or_days_is_core_with_the_reason(mode: str, data_home: Path) -> None:
    _started_ten_days_ago(data_home)
    _edit(data_home / "trial.json", started=datetime.now(UTC).isoformat(), days=9999)
    shown = show()
    assert shown["tier"] == CORE and OVER in shown["problem"]
    assert shown["enabled"][CAPTURE] is False
    text = run("licence", "show").stdout
    assert text.startswith("Tier       Core") and "Problem    the trial's record" in text


def test_cli_keyring_entry_deleted_keeps_the_days(
    data_home: Path, memory_keyring: MemoryKeyring
) -> None:
    _started_ten_days_ago(data_home)
    del memory_keyring.secrets[("lexmem", "trial")]
    (data_home / "trial.json").unlink()
    assert show()["trial_days_left"] == 4


@pytest.fixture
def broken_trial(data_home: Path) -> Iterator[Path]:
    """A data folder whose trial.json says ``days`` is not a number."""
    Paths(data_home).ensure()
    record = {"started": datetime.now(UTC).isoformat(), "days": "14 days", "ended_notice": False}
    (data_home / "trial.json").write_text(json.dumps(record))
    yield data_home


def test_cli_licence_show_status_and_watch_add_with_malformed_days(
    mode: str, broken_trial: Path, tmp_path: Path
) -> None:
    shown = show()
    assert shown["tier"] == CORE and OVER in shown["problem"]
    assert "Tier       Core" in run("licence", "show").stdout
    assert json.loads(run("status", "--json").stdout)["tier"] == CORE
    notes = tmp_path / "notes"
    notes.mkdir()
    refused = run("watch", "add", str(notes), code=4)  # the gate, in one line: not a crash
    assert refused.stderr.count("\n") == 1 and "[Agents.Memory.Capture]" in refused.stderr


def test_cli_ingest_skips_agent_events_without_quarantining_them_and_data_stays_usable(
    mode: str, broken_trial: Path, embedder: Embedder, tmp_path: Path
) -> None:
    inbox = Inbox(Paths(broken_trial).inbox)
    for kind, body in (("session_start", ""), ("prompt", "We decided to use Redis 7 for jobs."),
                       ("response", "Noted."), ("session_end", "")):  # fmt: skip
        inbox.write(make_event(kind, body, session_id="s1", agent="claude", project="/w/shop"))
    inbox.write(make_event("explicit", "Invoices are archived for ten years", agent="cli"))
    with shared_model(embedder):
        report = json.loads(run("ingest", "--json").stdout)
        assert (report["quarantined"], report["skipped"], report["saved"]) == (0, 4, 1)
        assert inbox.pending() == [] and inbox.quarantined() == []
        audit = json.loads(run("audit", "--json").stdout)
        assert [a["reason"] for a in audit if a.get("rule") == CAPTURE] == [
            "automatic capture needs Writer Pro"
        ]
        # The person's own data: searchable, exportable, deletable.
        hits = json.loads(run("search", "how long are invoices kept", "--json").stdout)["hits"]
        assert hits and "ten years" in hits[0]["memory"]["content"]
        run("export", str(tmp_path / "export"))
        assert any((tmp_path / "export").iterdir())
        run("forget", hits[0]["id"], "--yes")
        assert json.loads(run("search", "invoices", "--json").stdout)["hits"] == []


def test_the_service_drain_keeps_running_under_a_malformed_trial(
    mode: str, broken_trial: Path, embedder: Embedder
) -> None:
    """What `lexmem serve` does each time the inbox changes."""
    from lexmem.api import Lexmem

    with Lexmem.open(broken_trial, embedder=embedder) as lm, CaptureService(lm) as service:
        inbox = Inbox(lm.paths.inbox)
        inbox.write(
            make_event("prompt", "We decided on Postgres.", session_id="s9", agent="claude")
        )
        first = service.drain()
        inbox.write(make_event("explicit", "Backups run at 02:00 UTC", agent="mcp"))
        second = service.drain()
        assert (first.quarantined, first.skipped, second.saved) == (0, 1, 1)
        assert service._may_capture() is False  # the watcher's gate: closed, not raising
        assert [m.content for m in lm.list_memories(limit=None)] == ["Backups run at 02:00 UTC"]


# -- real subprocesses, with no keyring (as on a headless machine) -------------------------------

LEXMEM = [sys.executable, "-m", "lexmem"]


def _lexmem(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEXMEM_HOME": str(home),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # fmt: skip
    return subprocess.run(
        [*LEXMEM, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("days", ["x", 10**30], ids=["non-integer", "huge"])
def test_subprocess_licence_show_with_malformed_days_says_core_and_why(
    data_home: Path, days: Any
) -> None:
    Paths(data_home).ensure()
    record = {"started": datetime.now(UTC).isoformat(), "days": days, "ended_notice": False}
    (data_home / "trial.json").write_text(json.dumps(record))
    done = _lexmem("licence", "show", "--json", home=data_home)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["tier"] == CORE and OVER in shown["problem"]


def test_subprocess_a_deleted_data_folder_does_not_restart_the_trial(
    data_home: Path, tmp_path: Path
) -> None:
    first = _lexmem("licence", "show", "--json", home=data_home)
    assert json.loads(first.stdout)["trial_days_left"] == TRIAL_DAYS
    started = json.loads((data_home / "trial.json").read_text())["started"]
    shutil.rmtree(data_home)
    other = tmp_path / "other"
    again = _lexmem("licence", "show", "--json", home=other)
    assert json.loads(again.stdout)["trial_ends"] == json.loads(first.stdout)["trial_ends"]
    assert json.loads((other / "trial.json").read_text())["started"] == started
