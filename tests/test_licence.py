"""Licensing: signed keys, the keyring, the trial, and the gates in the capture pipeline.

Every test makes its own Ed25519 key pair and hands its public key to the service as
a trust root; the production public key is never used to accept a test key. The
keyring is the in-memory backend from conftest.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import keyring
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from keyring.backends import fail

from lexmem import licence as lic_mod
from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.errors import LexmemError
from lexmem.licence import (
    CAPTURE,
    CORE,
    CORE_ACTIVE_LIMIT,
    ENCODER,
    STORAGE,
    WRITER_PRO,
    LicenceError,
    LicenceRequiredError,
    LicenceService,
    encode_token,
    verify_token,
)
from lexmem.models import Memory, MemorySource, MemoryStatus, MemoryType
from lexmem.service.client import remember_through_inbox
from lexmem.service.writer import CaptureService
from lexmem.store.lance import MemoryFilter

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
KID = "test-key-1"


class Vendor:
    """A test's own signing key, issuing keys as packaging/licence_tool.py does."""

    def __init__(self, kid: str = KID) -> None:
        self.kid = kid
        self.key = Ed25519PrivateKey.generate()
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public = base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def issue(self, **overrides: Any) -> str:
        payload: dict[str, Any] = {
            "v": 1, "kid": self.kid, "licensee": "Ada Writer", "email": "ada@example.invalid",
            "tier": WRITER_PRO, "issued": T0.isoformat(), "starts": T0.isoformat(),
            "expires": (T0 + timedelta(days=365)).isoformat(),
        }  # fmt: skip
        payload.update(overrides)
        return encode_token(payload, self.key.sign)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def vendor() -> Vendor:
    return Vendor()


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 + timedelta(hours=1))


@pytest.fixture
def service_for(paths: Paths, vendor: Vendor, clock: Clock) -> Callable[..., LicenceService]:
    def make(**kw: Any) -> LicenceService:
        kw.setdefault("public_keys", {vendor.kid: vendor.public})
        kw.setdefault("clock", clock)
        kw.setdefault("environ", {})
        kw.setdefault("cache_s", 0.0)
        return LicenceService(paths, **kw)

    return make


# -- keys ---------------------------------------------------------------------------------


def test_a_valid_key_verifies_offline(vendor: Vendor) -> None:
    token = vendor.issue(seats=3)
    lic = verify_token(token, {KID: vendor.public}, T0 + timedelta(days=1))
    assert (lic.licensee, lic.tier, lic.seats, lic.key_id) == ("Ada Writer", WRITER_PRO, 3, KID)
    assert set(lic.gates) == {CAPTURE, ENCODER, STORAGE}
    wrapped = token[:40] + "\n  " + token[40:]  # pasted from an e-mail that wrapped it
    assert verify_token(wrapped, {KID: vendor.public}, T0 + timedelta(days=1)).licensee
    perpetual = verify_token(
        vendor.issue(expires=None), {KID: vendor.public}, T0 + timedelta(days=9999)
    )
    assert perpetual.expires is None


def _reason(token: str, keys: dict[str, str], now: datetime) -> str:
    with pytest.raises(LicenceError) as info:
        verify_token(token, keys, now)
    assert "\n" not in str(info.value) and str(info.value)
    return info.value.reason


def test_each_rejection_has_its_reason(vendor: Vendor) -> None:
    keys = {KID: vendor.public}
    now = T0 + timedelta(days=1)
    good = vendor.issue()
    prefix, body, sig = good.split(".")

    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["tier"] = WRITER_PRO
    payload["licensee"] = "Mallory"  # same signature, other data: tampered
    forged_body = base64.urlsafe_b64encode(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    ).decode().rstrip("=")  # fmt: skip
    assert _reason(f"{prefix}.{forged_body}.{sig}", keys, now) == "bad-signature"
    other = Vendor(KID)  # another private key claiming the same key id: forged
    assert _reason(other.issue(), keys, now) == "bad-signature"
    assert _reason(Vendor("elsewhere").issue(), keys, now) == "unknown-key"
    assert _reason(vendor.issue(expires=(T0 + timedelta(days=30)).isoformat()), keys,
                   T0 + timedelta(days=31)) == "expired"  # fmt: skip
    later = (now + timedelta(days=3)).isoformat()
    assert _reason(vendor.issue(starts=later), keys, now) == "not-yet-valid"
    assert _reason("hello there", keys, now) == "malformed"
    assert _reason("", keys, now) == "malformed"
    assert _reason(good[: len(prefix) + 1 + len(body)], keys, now) == "truncated"  # no signature
    assert _reason(good[:-20], keys, now) == "truncated"
    assert _reason(vendor.issue(tier="platinum"), keys, now) == "unknown-tier"


def test_clock_skew_of_a_few_minutes_is_tolerated(vendor: Vendor) -> None:
    keys = {KID: vendor.public}
    soon = vendor.issue(starts=(T0 + timedelta(minutes=5)).isoformat())
    assert verify_token(soon, keys, T0).licensee == "Ada Writer"
    ends = T0 + timedelta(days=30)
    just_over = vendor.issue(expires=ends.isoformat())
    assert verify_token(just_over, keys, ends + timedelta(minutes=2)).tier == WRITER_PRO
    assert _reason(just_over, keys, ends + timedelta(hours=1)) == "expired"


# -- the keyring, the environment, a file ------------------------------------------------------


def test_activation_round_trip_through_the_keyring(
    service_for: Callable[..., LicenceService], vendor: Vendor, memory_keyring: Any, paths: Paths
) -> None:
    svc = service_for()
    assert svc.status().source == "trial"
    lic = svc.activate(vendor.issue())
    assert memory_keyring.secrets[("lexmem", "licence")] == lic.token
    again = service_for()  # another process, later
    st = again.status()
    assert (st.tier, st.source, st.licence.licensee) == (WRITER_PRO, "key (keyring)", "Ada Writer")
    for f in paths.home.rglob("*"):
        if f.is_file():
            assert lic.token.encode() not in f.read_bytes()  # never in settings or any file
    assert again.remove() is True
    assert again.status().source == "trial"
    assert again.remove() is False
    with pytest.raises(LicenceError) as info:
        again.activate(vendor.issue() + "x")
    assert info.value.reason in ("truncated", "bad-signature")
    assert ("lexmem", "licence") not in memory_keyring.secrets


def test_without_a_keyring_the_key_comes_from_the_environment_or_a_private_file(
    service_for: Callable[..., LicenceService], vendor: Vendor, tmp_path: Path
) -> None:
    keyring.set_keyring(fail.Keyring())
    svc = service_for()
    with pytest.raises(LicenceError, match="LEXMEM_LICENCE") as info:
        svc.activate(vendor.issue())
    assert info.value.reason == "no-keyring"
    assert svc.status().tier == WRITER_PRO and svc.status().source == "trial"

    token = vendor.issue()
    assert service_for(environ={"LEXMEM_LICENCE": token}).status().source == "key (LEXMEM_LICENCE)"
    key_file = tmp_path / "lexmem.key"
    key_file.write_text(token + "\n")
    os.chmod(key_file, 0o600)
    st = service_for(environ={"LEXMEM_LICENCE_FILE": str(key_file)}).status()
    assert st.licence is not None and st.licence.licensee == "Ada Writer"
    os.chmod(key_file, 0o644)
    loose = service_for(environ={"LEXMEM_LICENCE_FILE": str(key_file)}).status()
    assert loose.licence is None and "chmod 600" in loose.problem


# -- the trial ------------------------------------------------------------------------------


def test_a_first_run_starts_a_fourteen_day_trial_then_core_with_one_notice(
    service_for: Callable[..., LicenceService], clock: Clock
) -> None:
    svc = service_for()
    st = svc.status()
    assert (st.tier, st.source, st.trial_days_left) == (WRITER_PRO, "trial", 14)
    assert svc.is_enabled(CAPTURE)
    clock.now += timedelta(days=13, hours=12)
    assert svc.status().trial_days_left == 1
    clock.now += timedelta(days=1)
    st = svc.status()
    assert st.tier == CORE and not st.is_enabled(CAPTURE) and not st.is_enabled(STORAGE)
    assert "trial has ended" in st.notice
    assert "trial has ended" in service_for().status().notice  # until someone has seen it
    svc.acknowledge_notice()
    assert service_for().status().notice == ""  # said once, for this data folder
    with pytest.raises(LicenceRequiredError, match=r"\[Agents\.Memory\.Capture\]"):
        svc.require(CAPTURE)


# -- the gates in the pipeline ---------------------------------------------------------------


@pytest.fixture
def core_lm(
    data_home: Path, embedder: Embedder, service_for: Callable[..., LicenceService], clock: Clock
) -> Iterator[Lexmem]:
    """A data folder whose trial ended: Core."""
    svc = service_for()
    svc.status()  # the trial starts
    clock.now += timedelta(days=20)
    lm = Lexmem.open(data_home, embedder=embedder, licence=svc)
    yield lm
    lm.close()


def _session(inbox: Inbox, sid: str, text: str) -> None:
    for kind, body in (("session_start", ""), ("prompt", text), ("response", "Noted."),
                       ("session_end", "")):  # fmt: skip
        inbox.write(make_event(kind, body, session_id=sid, agent="claude", project="/w/shop"))


def test_core_skips_automatic_capture_with_one_audit_entry_per_session(core_lm: Lexmem) -> None:
    core_lm.settings.capture.mode = "full"
    inbox = Inbox(core_lm.paths.inbox)
    _session(inbox, "s1", "We decided to use PostgreSQL 16 for the billing service.")
    _session(inbox, "s2", "Never commit directly to main; open a pull request instead.")
    inbox.write(make_event("config_change", "", session_id="s2", agent="app",
                           metadata={"key": "theme", "old": "light", "new": "dark"}))  # fmt: skip
    inbox.write(make_event("explicit", "Chapter titles stay under five words", agent="cli"))
    with CaptureService(core_lm) as service:
        report = service.drain()
        _session(inbox, "s1", "We decided to use Redis for the job queue.")  # more from s1
        service.drain()
    assert [m.content for m in core_lm.list_memories(limit=None)] == [
        "Chapter titles stay under five words"
    ]  # explicit remember is Core's
    gated = [e for e in core_lm.audit_entries() if e.rule == CAPTURE]
    assert sorted(e.session_id for e in gated) == ["s1", "s2"]
    assert {e.reason for e in gated} == {"automatic capture needs Writer Pro"}
    assert all(e.text is None for e in gated)
    assert report.skipped == 9 and inbox.pending() == []
    assert core_lm.sessions() == []


def test_writer_pro_captures_the_same_events(
    data_home: Path, embedder: Embedder, service_for: Callable[..., LicenceService],
    vendor: Vendor, clock: Clock,
) -> None:  # fmt: skip
    svc = service_for()
    svc.activate(vendor.issue())
    clock.now += timedelta(days=20)  # past the trial: the key is what counts
    with Lexmem.open(data_home, embedder=embedder, licence=svc) as lm:
        lm.settings.capture.mode = "full"
        _session(Inbox(lm.paths.inbox), "s1", "We decided to use PostgreSQL 16 for billing.")
        with CaptureService(lm) as service:
            service.drain()
        assert any("PostgreSQL 16" in m.content for m in lm.list_memories(limit=None))
        assert not [e for e in lm.audit_entries() if e.rule == CAPTURE]


def test_expiry_mid_run_stops_new_capture_and_keeps_everything_else(
    data_home: Path, embedder: Embedder, service_for: Callable[..., LicenceService],
    vendor: Vendor, clock: Clock, tmp_path: Path,
) -> None:  # fmt: skip
    svc = service_for()
    svc.status()
    ends = clock.now + timedelta(days=30)
    svc.activate(vendor.issue(expires=ends.isoformat()))
    clock.now += timedelta(days=20)  # the trial is over; the key carries capture
    with (
        Lexmem.open(data_home, embedder=embedder, licence=svc) as lm,
        CaptureService(lm) as service,
    ):
        lm.settings.capture.mode = "full"
        inbox = Inbox(lm.paths.inbox)
        _session(inbox, "s1", "We decided to use PostgreSQL 16 for the billing service.")
        service.drain()
        captured = [m for m in lm.list_memories(limit=None) if "PostgreSQL" in m.content]
        assert len(captured) == 1

        clock.now = ends + timedelta(days=1)  # the key expires while the service runs
        _session(inbox, "s2", "We decided to use Redis 7 for the job queue.")
        service.drain()
        assert not any("Redis" in m.content for m in lm.list_memories(limit=None))
        assert [e.session_id for e in lm.audit_entries() if e.rule == CAPTURE] == ["s2"]
        st = svc.status()
        assert st.tier == CORE and "expired" in st.problem

        # Nothing stored is locked away: search, export and forget still work.
        hit = lm.search("which database does billing use", record_access=False).hits[0]
        assert hit.memory.id == captured[0].id
        counts = lm.export(tmp_path / "export")
        assert counts["memories"] == 1
        lm.forget(captured[0].id)
        assert lm.count() == 0


def _fill(lm: Lexmem, n: int) -> list[str]:
    """``n`` active memories, stored directly (no model work): the cap counts rows."""
    dim = lm.embedder.dim
    vec = [1.0 / dim**0.5] * dim
    memories = [
        Memory(content=f"filler memory number {i}", type=MemoryType.SEMANTIC,
               source=MemorySource.EXPLICIT, embedding=vec)
        for i in range(n)
    ]  # fmt: skip
    lm.store.store_many(memories)
    return [m.id for m in memories]


def test_core_keeps_up_to_a_thousand_active_memories(core_lm: Lexmem) -> None:
    ids = _fill(core_lm, CORE_ACTIVE_LIMIT)
    with pytest.raises(
        LicenceRequiredError, match=r"1,000 active memories .*Agents\.Memory\.Storage"
    ):
        core_lm.remember("One more thing worth keeping")
    with pytest.raises(LicenceRequiredError) as info:
        remember_through_inbox(core_lm, "One more thing worth keeping")
    assert info.value.gate == STORAGE and info.value.exit_code == 4
    assert Inbox(core_lm.paths.inbox).pending() == []  # refused before anything was written

    # An explicit event that reaches the service anyway is set aside, its text kept.
    inbox = Inbox(core_lm.paths.inbox)
    inbox.write(make_event("explicit", "Kept for when there is room", agent="mcp"))
    with CaptureService(core_lm) as service:
        assert service.drain().skipped == 1
    (entry,) = [e for e in core_lm.audit_entries() if e.rule == STORAGE]
    assert entry.text == "Kept for when there is room" and entry.decision == "skipped"

    core_lm.archive(ids[0])  # room for one: archived memories do not count
    assert core_lm.get(ids[0]).status == MemoryStatus.ARCHIVED
    core_lm.remember("Now there is room for this one")
    assert core_lm.count(MemoryFilter()) == CORE_ACTIVE_LIMIT  # active ones


# -- the command line ----------------------------------------------------------------------


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), prog_name="lexmem", catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_licence_commands(
    vendor: Vendor, monkeypatch: pytest.MonkeyPatch, memory_keyring: Any, embedder: Embedder
) -> None:
    # The CLI trusts lexmem's built-in public keys; this test adds its own to them.
    monkeypatch.setitem(lic_mod.PUBLIC_KEYS, vendor.kid, vendor.public)
    now = datetime.now(UTC)
    shown = json.loads(run("licence", "show", "--json").stdout)
    assert (shown["tier"], shown["source"], shown["trial_days_left"]) == (WRITER_PRO, "trial", 14)
    token = vendor.issue(issued=now.isoformat(), starts=now.isoformat(),
                         expires=(now + timedelta(days=365)).isoformat())  # fmt: skip
    out = run("licence", "activate", token).stdout
    assert out.startswith("Activated Writer Pro for Ada Writer")
    assert memory_keyring.secrets[("lexmem", "licence")] == token
    shown = json.loads(run("license", "show", "--json").stdout)  # the other spelling
    assert shown["licence"]["licensee"] == "Ada Writer" and shown["enabled"][CAPTURE] is True
    assert "Licensee   Ada Writer <ada@example.invalid>" in run("licence", "show").stdout

    bad = run("licence", "activate", token[:-12], code=2)
    assert bad.stderr.count("\n") == 1 and "lexmem: error: the licence key" in bad.stderr
    other = Vendor(vendor.kid).issue(issued=now.isoformat(), starts=now.isoformat())
    assert "altered or not issued by lexmem" in run("licence", "activate", other, code=2).stderr
    assert run("licence", "remove").stdout.strip() == "Removed the licence key."


def test_the_cli_names_the_gate_when_core_meets_it(
    data_home: Path, tmp_path: Path, embedder: Embedder
) -> None:
    data_home.mkdir(parents=True, exist_ok=True)
    started = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    (data_home / "trial.json").write_text(json.dumps({"started": started, "days": 14,
                                                      "ended_notice": True}))  # fmt: skip
    notes = tmp_path / "notes"
    notes.mkdir()
    result = run("watch", "add", str(notes), code=4)
    assert result.stderr.strip().splitlines() == [
        "lexmem: error: Automatic capture from agent sessions, corrections, settings changes, "
        "workflows and watched Markdown folders needs Writer Pro [Agents.Memory.Capture]: "
        "activate a key with `lexmem licence activate KEY`"
    ]
    shown = run("licence", "show").stdout
    assert shown.startswith("Tier       Core") and "  no   Agents.Memory.Capture" in shown
    with pytest.raises(LexmemError):
        LicenceService(Paths(data_home), environ={}).require(CAPTURE)


def test_the_vendor_tool_makes_keys_lexmem_accepts(tmp_path: Path) -> None:
    import subprocess
    import sys

    tool = [
        sys.executable,
        str(Path(__file__).resolve().parents[1] / "packaging" / "licence_tool.py"),
    ]
    private = tmp_path / "vendor.pem"
    made = subprocess.run([*tool, "genkey", "--out", str(private), "--kid", "k-test"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    kid, public = [p.strip(' ",') for p in made.stdout.split("#")[0].split(":")]
    issued = subprocess.run(
        [*tool, "issue", "--private-key", str(private), "--kid", kid, "--licensee", "Bo",
         "--email", "bo@example.invalid", "--days", "30", "--seats", "2"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lic = verify_token(issued.stdout.strip(), {kid: public})
    assert (lic.licensee, lic.seats, lic.tier) == ("Bo", 2, WRITER_PRO)
    again = subprocess.run(
        [*tool, "genkey", "--out", str(private)], capture_output=True, text=True, check=False
    )
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "exists" in again.stderr
