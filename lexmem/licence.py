"""Tiers and feature gates: Core (free) and Writer Pro, through a signed licence key.

A key is a token ``LXM1.<payload>.<signature>`` (base64url, no padding): the payload
is JSON — licensee, e-mail, tier, issued, starts, expires (or null for perpetual), key
id, optional seats and features — and the signature is Ed25519 over the payload bytes,
verified offline against the public keys built into lexmem (:data:`PUBLIC_KEYS`; the
key id allows rotation). The private key that signs production keys is never in this
repository: ``packaging/licence_tool.py`` issues keys from a private key file.

Where the key comes from, first found wins: ``LEXMEM_LICENCE`` (the key itself),
``LEXMEM_LICENCE_FILE`` (a file readable by its owner alone), the OS keyring (service
``lexmem``, entry ``licence``). It is never written into the settings file.

A data folder's first run starts a 14-day Writer Pro trial (``trial.json``); when it
ends lexmem falls back to Core and says so once.

Gates (the seeds' metadata): :data:`CAPTURE` (automatic capture: agent hooks,
conversations, corrections, configuration changes, workflow patterns, the Markdown
watcher), :data:`ENCODER` (LLM-assisted encoding), :data:`STORAGE` (Core keeps up to
:data:`CORE_ACTIVE_LIMIT` active memories). Every gated path asks
:meth:`LicenceService.is_enabled` once, at its boundary. Nothing stored is ever locked
away: search, browse, export and forget need no licence.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .config import Paths, secure_umask
from .errors import LexmemError

__all__ = [
    "CAPTURE",
    "CORE",
    "CORE_ACTIVE_LIMIT",
    "ENCODER",
    "GATES",
    "KEYRING_ENTRY",
    "PUBLIC_KEYS",
    "STORAGE",
    "TRIAL_DAYS",
    "WRITER_PRO",
    "Licence",
    "LicenceError",
    "LicenceRequiredError",
    "LicenceService",
    "LicenceStatus",
    "encode_token",
    "parse_token",
    "required_message",
    "verify_token",
]

CORE = "core"
WRITER_PRO = "writer_pro"
TIER_NAMES = {CORE: "Core", WRITER_PRO: "Writer Pro"}

CAPTURE = "Agents.Memory.Capture"
ENCODER = "Agents.Memory.Encoder"
STORAGE = "Agents.Memory.Storage"
GATES = {
    CAPTURE: "automatic capture from agent sessions, corrections, settings changes, "
    "workflows and watched Markdown folders",
    ENCODER: "LLM-assisted encoding (classification fallback, extraction, summaries)",
    STORAGE: "unlimited memories (Core keeps up to 1,000 active ones)",
}
CORE_ACTIVE_LIMIT = 1000
TRIAL_DAYS = 14
KEYRING_ENTRY = "licence"
PREFIX = "LXM1"
# Constraint: clocks on laptops drift; a key issued "in the future" by a few minutes is fine.
CLOCK_SKEW = timedelta(minutes=10)

#: Key id -> raw Ed25519 public key (base64url). Add a new id to rotate; keep old ones
#: while keys they signed are in use.
PUBLIC_KEYS: dict[str, str] = {
    "lexmem-2026-1": "r6ZAU5SLJnSnOCbhCj2kAkQSo7yOQt1HXvHWCdG20EM",
}


class LicenceError(LexmemError):
    """A licence key that cannot be used; ``reason`` is one of the short codes below.

    ``malformed`` (not a lexmem key), ``truncated`` (cut short in copying),
    ``unknown-key`` (signed with a key id lexmem does not know), ``bad-signature``
    (tampered, or forged with another private key), ``expired``, ``not-yet-valid``,
    ``unknown-tier``, ``no-keyring``.
    """

    exit_code = 2

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class LicenceRequiredError(LexmemError):
    """A gated action under a tier that does not include it."""

    exit_code = 4

    def __init__(self, gate: str, message: str) -> None:
        super().__init__(message)
        self.gate = gate


# -- tokens -------------------------------------------------------------------------------


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _b64d(text: str) -> bytes:
    if not text or any(c not in _B64 for c in text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _when(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise LicenceError("malformed", f"the licence key's {name} is not a date")
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise LicenceError("malformed", f"the licence key's {name} is not a date") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Licence:
    """A verified key's payload."""

    licensee: str
    email: str
    tier: str
    issued: datetime
    starts: datetime
    expires: datetime | None  # None: perpetual
    key_id: str
    seats: int | None = None
    features: tuple[str, ...] = ()
    token: str = field(default="", repr=False)

    @property
    def gates(self) -> tuple[str, ...]:
        """What this licence enables: the tier's gates, plus any listed features."""
        base = tuple(GATES) if self.tier == WRITER_PRO else ()
        return tuple(dict.fromkeys([*base, *(f for f in self.features if f in GATES)]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "licensee": self.licensee, "email": self.email, "tier": self.tier,
            "issued": self.issued.isoformat(), "starts": self.starts.isoformat(),
            "expires": self.expires.isoformat() if self.expires else None,
            "key_id": self.key_id, "seats": self.seats, "features": list(self.features),
        }  # fmt: skip


def encode_token(payload: Mapping[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A key from a payload and a signing function (the vendor tool's side)."""
    body = json.dumps(dict(payload), sort_keys=True, separators=(",", ":")).encode("utf-8")
    return f"{PREFIX}.{_b64e(body)}.{_b64e(sign(body))}"


def parse_token(token: str) -> tuple[dict[str, Any], bytes, bytes]:
    """Split a key into (payload, payload bytes, signature) without verifying it."""
    text = "".join(token.split())  # keys pasted from e-mail may wrap
    parts = text.split(".")
    if not text or parts[0] != PREFIX:
        raise LicenceError(
            "malformed", f"not a lexmem licence key (it should start with {PREFIX}.)"
        )
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise LicenceError("truncated", "the licence key is incomplete: copy all of it, one line")
    try:
        body = _b64d(parts[1])
        signature = _b64d(parts[2])
    except ValueError:
        raise LicenceError("truncated", "the licence key is damaged or incomplete") from None
    if len(signature) != 64:
        raise LicenceError("truncated", "the licence key's signature is incomplete")
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise LicenceError(
            "bad-signature", "the licence key was altered: its data does not read"
        ) from None
    if not isinstance(payload, dict):
        raise LicenceError("malformed", "the licence key holds no licence")
    return payload, body, signature


def verify_token(
    token: str, public_keys: Mapping[str, str], now: datetime | None = None
) -> Licence:
    """A key verified against ``public_keys`` at ``now``, or :class:`LicenceError`."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    payload, body, signature = parse_token(token)
    kid = payload.get("kid")
    if not isinstance(kid, str) or kid not in public_keys:
        raise LicenceError(
            "unknown-key", f"the licence key was signed with an unknown key ({kid!r})"
        )
    try:
        Ed25519PublicKey.from_public_bytes(_b64d(public_keys[kid])).verify(signature, body)
    except (InvalidSignature, ValueError):
        raise LicenceError(
            "bad-signature",
            "the licence key's signature does not match: it was altered or not issued by lexmem",
        ) from None
    tier = payload.get("tier")
    if tier not in TIER_NAMES:
        raise LicenceError("unknown-tier", f"the licence key names an unknown tier ({tier!r})")
    issued = _when(payload.get("issued"), "issue date")
    if issued is None:
        raise LicenceError("malformed", "the licence key has no issue date")
    starts = _when(payload.get("starts"), "start date") or issued
    expires = _when(payload.get("expires"), "expiry date")
    now = now or datetime.now(UTC)
    if now + CLOCK_SKEW < starts:
        raise LicenceError(
            "not-yet-valid", f"the licence key is valid from {starts.date().isoformat()}"
        )
    if expires is not None and now - CLOCK_SKEW >= expires:
        raise LicenceError("expired", f"the licence key expired on {expires.date().isoformat()}")
    seats = payload.get("seats")
    features = payload.get("features") or []
    return Licence(
        licensee=str(payload.get("licensee") or ""), email=str(payload.get("email") or ""),
        tier=str(tier), issued=issued, starts=starts, expires=expires, key_id=kid,
        seats=seats if isinstance(seats, int) else None,
        features=tuple(str(f) for f in features) if isinstance(features, list) else (),
        token="".join(token.split()),
    )  # fmt: skip


# -- the service -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LicenceStatus:
    """What lexmem runs as now, and why."""

    tier: str
    source: str  # "key (keyring)", "key (LEXMEM_LICENCE)", "trial", "core"
    licence: Licence | None = None
    trial_days_left: int | None = None
    trial_ends: datetime | None = None
    problem: str = ""  # a key that was found but cannot be used, in one line
    notice: str = ""  # said once: the trial ended

    @property
    def tier_name(self) -> str:
        return TIER_NAMES[self.tier]

    @property
    def gates(self) -> tuple[str, ...]:
        if self.licence is not None:
            return self.licence.gates
        return tuple(GATES) if self.tier == WRITER_PRO else ()

    def is_enabled(self, gate: str) -> bool:
        return gate in self.gates

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier, "tier_name": self.tier_name, "source": self.source,
            "licence": self.licence.to_dict() if self.licence else None,
            "trial_days_left": self.trial_days_left,
            "trial_ends": self.trial_ends.isoformat() if self.trial_ends else None,
            "enabled": {g: self.is_enabled(g) for g in GATES},
            "problem": self.problem or None,
        }  # fmt: skip


class LicenceService:
    """Answers ``tier`` and ``is_enabled(gate)`` for one data folder.

    ``public_keys`` are the trust roots (tests pass their own); ``clock`` gives the time.
    The keyring is read at most once every ``cache_s`` seconds; expiry is judged at
    each question, so a key that expires mid-run stops capture at once.
    """

    def __init__(
        self,
        paths: Paths,
        *,
        public_keys: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
        environ: Mapping[str, str] | None = None,
        cache_s: float = 30.0,
    ) -> None:
        self.paths = paths
        self.public_keys = dict(PUBLIC_KEYS if public_keys is None else public_keys)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.environ = environ
        self.cache_s = cache_s
        self._lock = threading.Lock()
        self._cached: tuple[float, str | None, str, str] | None = None

    # -- where the key is ---------------------------------------------------------------

    @property
    def trial_file(self) -> Path:
        return self.paths.home / "trial.json"

    def _env(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ

    def _find_key(self) -> tuple[str | None, str, str]:
        """(key text or None, where it came from, a problem reading it)."""
        env = self._env()
        if env.get("LEXMEM_LICENCE", "").strip():
            return env["LEXMEM_LICENCE"].strip(), "LEXMEM_LICENCE", ""
        file = env.get("LEXMEM_LICENCE_FILE", "").strip()
        if file:
            path = Path(file).expanduser()
            try:
                mode = path.stat().st_mode
                if os.name != "nt" and mode & (stat.S_IRWXG | stat.S_IRWXO):
                    return None, str(path), f"{path} is readable by others: chmod 600 it"
                return path.read_text(encoding="utf-8").strip(), str(path), ""
            except OSError as exc:
                return None, str(path), f"cannot read {path} ({exc.strerror})"
        from .keystore import SecretStoreError, backend_available, get_secret

        ok, _ = backend_available()
        if not ok:
            return None, "keyring", ""  # no keyring: Core unless a variable or file says more
        try:
            return get_secret(KEYRING_ENTRY), "keyring", ""
        except SecretStoreError as exc:
            return None, "keyring", str(exc)

    def _key(self) -> tuple[str | None, str, str]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] > self.cache_s:
                self._cached = (now, *self._find_key())
            return self._cached[1], self._cached[2], self._cached[3]

    def forget_cache(self) -> None:
        with self._lock:
            self._cached = None

    # -- the trial -------------------------------------------------------------------------

    def _trial(self) -> dict[str, Any]:
        """This data folder's trial, started on its first run."""
        try:
            data: dict[str, Any] = json.loads(self.trial_file.read_text(encoding="utf-8"))
            if isinstance(data, dict) and _when(data.get("started"), "trial start"):
                return data
        except (OSError, ValueError, LicenceError):
            pass
        data = {"started": self.clock().isoformat(), "days": TRIAL_DAYS, "ended_notice": False}
        self._save_trial(data)
        return data

    def _save_trial(self, data: dict[str, Any]) -> None:
        tmp = self.trial_file.with_name(".trial.json.tmp")
        try:
            with secure_umask():
                tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
                tmp.replace(self.trial_file)
        except OSError:
            pass  # a read-only folder: the trial is judged from memory this run

    # -- answers ----------------------------------------------------------------------------

    def status(self) -> LicenceStatus:
        now = self.clock()
        token, source, problem = self._key()
        if token:
            try:
                lic = verify_token(token, self.public_keys, now)
            except LicenceError as exc:
                problem = f"the licence key from {source} cannot be used: {exc}"
            else:
                return LicenceStatus(lic.tier, f"key ({source})", lic)
        trial = self._trial()
        started = _when(trial["started"], "trial start") or now
        ends = started + timedelta(days=int(trial.get("days", TRIAL_DAYS)))
        if now < ends:
            left = max(1, -(-int((ends - now).total_seconds()) // 86400))
            return LicenceStatus(WRITER_PRO, "trial", None, left, ends, problem)
        notice = ""
        if not trial.get("ended_notice"):
            notice = (
                "The 14-day Writer Pro trial has ended: lexmem is now Core. Everything you "
                "stored stays yours; automatic capture needs a Writer Pro key "
                "(`lexmem licence activate KEY`)."
            )
        return LicenceStatus(CORE, "core", None, 0, ends, problem, notice)

    def acknowledge_notice(self) -> None:
        """The person has seen that the trial ended: do not say it again."""
        trial = self._trial()
        if not trial.get("ended_notice"):
            trial["ended_notice"] = True
            self._save_trial(trial)

    @property
    def tier(self) -> str:
        return self.status().tier

    def is_enabled(self, gate: str) -> bool:
        if gate not in GATES:
            raise ValueError(f"unknown gate {gate!r}")
        return self.status().is_enabled(gate)

    def require(self, gate: str) -> None:
        """Raise :class:`LicenceRequiredError` (one line naming the gate) when disabled."""
        if not self.is_enabled(gate):
            raise LicenceRequiredError(gate, required_message(gate))

    def check_storage(self, active: int, adding: int = 1) -> None:
        """Core keeps up to :data:`CORE_ACTIVE_LIMIT` active memories."""
        if active + adding > CORE_ACTIVE_LIMIT and not self.is_enabled(STORAGE):
            raise LicenceRequiredError(
                STORAGE,
                f"Core keeps up to {CORE_ACTIVE_LIMIT:,} active memories ({active:,} now) "
                f"[{STORAGE}]: archive or forget some, or activate Writer Pro "
                "(`lexmem licence activate KEY`)",
            )

    # -- changing the key ---------------------------------------------------------------

    def activate(self, token: str) -> Licence:
        """Verify ``token`` and keep it in the OS keyring."""
        from .keystore import SecretStoreError, backend_available, set_secret

        lic = verify_token(token, self.public_keys, self.clock())
        ok, why = backend_available()
        if not ok:
            raise LicenceError(
                "no-keyring",
                f"the key is valid but cannot be kept: {why}; set LEXMEM_LICENCE to the key, "
                "or LEXMEM_LICENCE_FILE to a file only you can read (chmod 600) holding it",
            )
        try:
            set_secret(KEYRING_ENTRY, lic.token)
        except SecretStoreError as exc:
            raise LicenceError("no-keyring", str(exc)) from exc
        self.forget_cache()
        return lic

    def remove(self) -> bool:
        """Remove the key from the keyring; False when none was there."""
        from .keystore import SecretStoreError, backend_available, delete_secret

        ok, why = backend_available()
        if not ok:
            raise LicenceError("no-keyring", f"no key to remove: {why}")
        try:
            removed = delete_secret(KEYRING_ENTRY)
        except SecretStoreError as exc:
            raise LicenceError("no-keyring", str(exc)) from exc
        self.forget_cache()
        return removed


def required_message(gate: str) -> str:
    what = GATES.get(gate, gate)
    return (
        f"{what[0].upper()}{what[1:]} needs Writer Pro [{gate}]: "
        "activate a key with `lexmem licence activate KEY`"
    )
