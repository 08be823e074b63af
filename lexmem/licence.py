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

The first run on a machine starts the person's 14-day Writer Pro trial; when it ends
lexmem falls back to Core and says so once. The trial is a signed record kept in the OS
keyring, in the per-user state folder (:func:`trial_state_dir`, outside every data
folder) and in the data folder (``trial.json``): the earliest start and the latest time
ever seen win, so a deleted copy, a new data folder or a clock turned back gives no days
back, and a copy that was altered or does not read means the trial is over (never a
fresh trial, never an exception). See "the trial's records" below.

Gates (the seeds' metadata): :data:`CAPTURE` (automatic capture: agent hooks,
conversations, corrections, configuration changes, workflow patterns, the Markdown
watcher), :data:`ENCODER` (LLM-assisted encoding), :data:`STORAGE` (Core keeps up to
:data:`CORE_ACTIVE_LIMIT` active memories). Every gated path asks
:meth:`LicenceService.is_enabled` once, at its boundary. Nothing stored is ever locked
away: search, browse, export and forget need no licence.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lexmem.base import atomic_write
from lexmem.config import DIR_MODE, FILE_MODE, Paths, secure_umask, state_dir
from lexmem.errors import LexmemError
from lexmem.locks import FileLock

__all__ = [
    "CAPTURE",
    "CORE",
    "CORE_ACTIVE_LIMIT",
    "ENCODER",
    "GATES",
    "KEYRING_ENTRY",
    "KEY_URL",
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
    "trial_state_dir",
    "verify_token",
]

log = logging.getLogger("lexmem.licence")

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
#: Where a person buys a Writer Pro key (and finds the one they bought): the licence
#: window, the upgrade prompt and `lexmem licence show` point here. Opened in the person's
#: own browser when they ask, never fetched by lexmem.
KEY_URL = "https://lexmem.dev/pro"
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


# -- the trial's records -----------------------------------------------------------------------
#
# The trial is the person's, not a data folder's: it is kept in up to three places, each a
# copy of one small signed record (its start, the latest time ever seen, whether its end
# was said). The keyring holds a copy and the signing key; the per-user state folder
# (outside every data folder) holds a copy and a second key; the data folder holds a copy.
# Whichever copies exist, the earliest start and the latest time seen win, so deleting a
# copy, a new data folder or a clock turned back gives nothing back. A copy that does not
# read, or whose signature does not match, means the trial is over.

#: The latest time seen is written again once the clock has moved this far past it, so
#: turning the clock back gains at most this much.
SEEN_STEP = timedelta(hours=1)
_RECORD_CAP = 64 * 1024  # a record is ~300 bytes; anything much bigger is not one
_MAC_CONTEXT = b"lexmem-trial-v1\n"
_RECORD_FIELDS = frozenset({"v", "started", "seen", "days", "ended_notice", "macs"})
_LEGACY_FIELDS = frozenset({"started", "days", "ended_notice"})
_PLACES = {
    "keyring": "in the OS keyring",
    "state": "in the per-user state folder",
    "data": "in the data folder (trial.json)",
}


def trial_state_dir(environ: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The per-user folder holding the trial's record outside every data folder
    (:func:`~lexmem.config.state_dir`)."""
    return state_dir(environ, platform)


class _Damaged(Exception):
    """A trial record that cannot be trusted; the message says why, in a few words."""


@dataclass(slots=True)
class _Trial:
    started: datetime | None  # None: no record could be trusted
    seen: datetime  # the latest time seen (the high-water mark)
    ended_notice: bool
    problem: str = ""  # a record altered or damaged: the trial is over


@dataclass(frozen=True, slots=True)
class _Record:
    started: datetime
    seen: datetime
    ended_notice: bool
    signers: frozenset[str]  # the keys whose signatures it carries ("keyring", "local")


def _instant(value: Any) -> datetime | None:
    """An aware ISO-8601 time, or None for anything else."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    # Constraint: a date near the calendar's ends would overflow when 14 days are added.
    return t if t.tzinfo and 2000 <= t.year <= 9000 else None


def _decode_key(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        key = _b64d(text.strip())
    except ValueError:
        raise _Damaged("not a key") from None
    if len(key) != 32:
        raise _Damaged("not a key")
    return key


class _TrialKeys:
    """The keys that sign the trial's records, and the keyring's own copy.

    Constraint: the keyring may be missing (headless Linux), switched off, or locked. Then
    only the key beside the per-user state signs: weaker (it is a file the person can
    read), but a new or deleted data folder still finds the trial there.
    """

    def __init__(self, local_file: Path) -> None:
        from lexmem.keystore import TRIAL_KEY, TRIAL_RECORD, backend_available, get_secret

        self.local_file = local_file
        self.keyring_ok = backend_available()[0]
        self.keyring: bytes | None = None
        self._record: str | None = None
        self.local: bytes | None = None
        self.problem = ""
        if self.keyring_ok:
            try:
                key_text = get_secret(TRIAL_KEY)
                self._record = get_secret(TRIAL_RECORD)
            except Exception as exc:  # noqa: BLE001 - a locked or broken keyring: files only
                log.info("[MEM:LICENCE] The keyring cannot be read for the trial: %s", exc)
                self.keyring_ok = False
            else:
                try:
                    self.keyring = _decode_key(key_text)
                except _Damaged:
                    self.problem = f"the trial's signing key {_PLACES['keyring']} is damaged"
        try:
            raw = _read_small(local_file)
            self.local = _decode_key(raw.decode("ascii", "replace") if raw is not None else None)
        except _Damaged:
            self.problem = self.problem or f"the trial's signing key {_PLACES['state']} is damaged"

    @classmethod
    def load(cls, local_file: Path) -> _TrialKeys:
        keys = cls(local_file)
        if keys.problem:
            raise _Damaged(keys.problem)
        return keys

    def read_keyring_record(self) -> bytes | None:
        if not self.keyring_ok or self._record is None:
            return None
        return self._record.encode("utf-8")

    def write_keyring_record(self, text: str) -> None:
        from lexmem.keystore import TRIAL_RECORD, set_secret

        if not self.keyring_ok or self.keyring is None:
            return
        try:
            set_secret(TRIAL_RECORD, text)
        except Exception as exc:  # noqa: BLE001 - the files still hold the trial
            log.info("[MEM:LICENCE] The keyring did not take the trial's record: %s", exc)

    def make_missing(self) -> None:
        """A key for each place that can keep one and has none yet (the first run)."""
        from lexmem.keystore import TRIAL_KEY, set_secret

        if self.keyring_ok and self.keyring is None:
            key = secrets.token_bytes(32)
            try:
                set_secret(TRIAL_KEY, _b64e(key))
                self.keyring = key
            except Exception as exc:  # noqa: BLE001 - the key beside the state signs alone
                log.info("[MEM:LICENCE] The keyring did not take the trial's key: %s", exc)
                self.keyring_ok = False
        if self.local is None:
            key = secrets.token_bytes(32)
            if _write_private(self.local_file, _b64e(key)):
                self.local = key

    def signers(self) -> list[str]:
        return [n for n, k in (("keyring", self.keyring), ("local", self.local)) if k]

    def sign(self, body: Mapping[str, Any]) -> dict[str, str]:
        msg = _mac_message(body)
        keys = {"keyring": self.keyring, "local": self.local}
        return {n: hmac.new(k, msg, hashlib.sha256).hexdigest() for n, k in keys.items() if k}

    def verify(self, body: Mapping[str, Any], macs: Mapping[str, str]) -> None:
        """Raise :class:`_Damaged` unless ``macs`` match: the keyring's signature when the
        record carries one and the keyring can be read, else the local key's."""
        if "keyring" in macs and self.keyring_ok:
            name, key = "keyring", self.keyring
            if key is None:
                raise _Damaged("was signed with a key that is gone from the keyring")
        else:
            name, key = "local", self.local
            if key is None:
                raise _Damaged("was signed with a key that is gone from the per-user state folder")
        mac = macs.get(name, "")
        want = hmac.new(key, _mac_message(body), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac.encode("ascii", "replace"), want.encode("ascii")):
            raise _Damaged("was altered (its signature does not match)")


def _mac_message(body: Mapping[str, Any]) -> bytes:
    fields = {k: v for k, v in body.items() if k != "macs"}
    return _MAC_CONTEXT + json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def _parse_record(raw: bytes, keys: _TrialKeys, where: str, now: datetime) -> _Record:
    """A record checked field by field and by its signature, or :class:`_Damaged`."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Damaged("does not read (not a trial record)") from None
    if not isinstance(data, dict):
        raise _Damaged("does not read (not a trial record)")
    days = data.get("days")
    if type(days) is not int or days != TRIAL_DAYS:
        raise _Damaged(f"was altered (its length is {str(days)[:20]!r}, not {TRIAL_DAYS} days)")
    started = _instant(data.get("started"))
    if started is None:
        raise _Damaged("was altered (its start is not a date)")
    notice = data.get("ended_notice", False)
    if not isinstance(notice, bool):
        raise _Damaged("was altered (ended_notice is not true or false)")
    if "macs" not in data:
        # A data folder's trial.json from before records were signed: its start counts
        # (it can only make the trial shorter; it is re-written signed at once).
        if where != "data" or not set(data) <= _LEGACY_FIELDS:
            raise _Damaged("is not signed")
        if started > now + CLOCK_SKEW:
            raise _Damaged("was altered (it starts in the future)")
        return _Record(started, started, notice, frozenset())
    macs = data["macs"]
    seen = _instant(data.get("seen"))
    if (
        set(data) != _RECORD_FIELDS or data.get("v") != 1 or seen is None or seen < started
        or not isinstance(macs, dict) or not macs
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in macs.items())
    ):  # fmt: skip
        raise _Damaged("was altered (its fields are not a trial record's)")
    keys.verify(data, macs)
    return _Record(started, seen, notice, frozenset(macs))


def _behind(where: str, record: _Record | None, trial: _Trial, keys: _TrialKeys) -> bool:
    """Whether a place's copy should be written again."""
    if record is None or not record.signers:  # missing, or unsigned from before
        return True
    if record.started != trial.started or record.ended_notice != trial.ended_notice:
        return True
    # Constraint: the data folder's copy is not kept up with the clock. A write into the
    # data folder can race a move or a backup copying it (the copy would list a temporary
    # file that is gone a moment later); the other two copies carry the latest time seen.
    return where != "data" and (
        trial.seen - record.seen >= SEEN_STEP
        or not set(keys.signers()) <= record.signers  # a key it does not carry yet
    )


def _read_small(path: Path) -> bytes | None:
    """A regular file's bytes (None when there is none), or :class:`_Damaged`.

    Constraint: opened without following links and without blocking, and read only up
    to a cap, so a FIFO, a device or a huge file in its place cannot hang or fill memory.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Damaged(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _Damaged("is not a file")
        chunks: list[bytes] = []
        size = 0
        while size <= _RECORD_CAP:
            chunk = os.read(fd, _RECORD_CAP + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _Damaged(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    if size > _RECORD_CAP:
        raise _Damaged("is too large to be a trial record")
    return b"".join(chunks)


def _private_dir(folder: Path) -> None:
    """The per-user state folder, 0700 (created if need be)."""
    with secure_umask():
        folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if os.name == "posix" and stat.S_IMODE(folder.stat().st_mode) & 0o077:
        folder.chmod(DIR_MODE)


def _write_private(path: Path, text: str) -> bool:
    """Write ``text`` atomically, owner-only (0600); False when the place is read-only."""
    try:
        atomic_write(path, text, mode=FILE_MODE)
        return True
    except OSError as exc:
        log.info("[MEM:LICENCE] Could not keep the trial's record in %s: %s", path, exc)
        return False


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
    each question, so a key that expires mid-run stops capture at once. ``state_dir``
    is where the trial's per-user record lives (default :func:`trial_state_dir`).
    """

    def __init__(
        self,
        paths: Paths,
        *,
        public_keys: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
        environ: Mapping[str, str] | None = None,
        cache_s: float = 30.0,
        state_dir: Path | None = None,
    ) -> None:
        self.paths = paths
        self.public_keys = dict(PUBLIC_KEYS if public_keys is None else public_keys)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.environ = environ
        self.cache_s = cache_s
        self._lock = threading.Lock()
        self._cached: tuple[float, str | None, str, str] | None = None
        self._state_dir = state_dir
        self._trial_cached: tuple[float, _Trial] | None = None

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
            except UnicodeDecodeError:
                return None, str(path), f"{path} does not hold a licence key (it is not text)"
        from lexmem.keystore import SecretStoreError, backend_available, get_secret

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

    @property
    def state_dir(self) -> Path:
        return self._state_dir if self._state_dir is not None else trial_state_dir(self._env())

    def _trial(self) -> _Trial:
        """The trial as its records say, judged at most once every ``cache_s`` seconds.

        Never raises: a record that cannot be trusted, or any surprise while reading the
        records, means the trial is over (Core), with the reason in one line.
        """
        now = self.clock()
        with self._lock:
            cached = self._trial_cached
            if cached is not None and time.monotonic() - cached[0] <= self.cache_s:
                trial = cached[1]
                trial.seen = max(trial.seen, now)  # the high-water mark, between judgements
                return trial
        try:
            trial = self._judge_trial(now)
        except Exception as exc:  # noqa: BLE001 - a surprise must not stop capture or crash a command
            log.warning("[MEM:LICENCE] The trial's records could not be read: %s", exc)
            trial = _Trial(None, now, False, f"the trial's records could not be read ({exc})")
        with self._lock:
            self._trial_cached = (time.monotonic(), trial)
        return trial

    def _judge_trial(self, now: datetime, *, acknowledge: bool = False) -> _Trial:
        folder = self.state_dir
        lock: FileLock | None = None
        try:
            _private_dir(folder)
            lock = FileLock(folder / ".trial.lock", timeout=10)
            lock.acquire()  # two processes starting at once must not each make a key
        except OSError:
            lock = None  # a read-only home: judge the records, keep what can be kept
        try:
            try:
                keys = _TrialKeys.load(folder / "trial.key")
            except _Damaged as exc:
                return _Trial(None, now, False, f"{exc}: the trial counts as over")
            found: dict[str, _Record | None] = {}
            problems: list[str] = []
            for where, read in (
                ("keyring", keys.read_keyring_record),
                ("state", lambda: _read_small(folder / "trial.json")),
                ("data", lambda: _read_small(self.trial_file)),
            ):
                try:
                    raw = read()
                    found[where] = None if raw is None else _parse_record(raw, keys, where, now)
                except _Damaged as exc:
                    problems.append(f"{_PLACES[where]} {exc}")
            valid = [r for r in found.values() if r is not None]
            started = min((r.started for r in valid), default=None)
            seen = max([now, *(r.seen for r in valid)])
            notice = acknowledge or any(r.ended_notice for r in valid)
            if problems:
                # Constraint: a damaged record is never replaced by a good one: that would be
                # a fresh trial one run later. Deleting it leaves the others to decide.
                return _Trial(
                    started, seen, notice,
                    "the trial's record " + "; ".join(problems) + ": the trial counts as over",
                )  # fmt: skip
            trial = _Trial(started or now, seen, notice)
            if lock is not None:
                self._keep_trial(trial, found, keys, folder)
            return trial
        finally:
            if lock is not None:
                lock.release()

    def _keep_trial(
        self, trial: _Trial, found: Mapping[str, _Record | None], keys: _TrialKeys, folder: Path
    ) -> None:
        """Write the trial to every place whose copy is missing or behind."""
        assert trial.started is not None
        keys.make_missing()
        stale = [where for where in _PLACES if _behind(where, found.get(where), trial, keys)]
        if not stale or not keys.signers():
            return
        body = {
            "v": 1, "started": trial.started.isoformat(), "seen": trial.seen.isoformat(),
            "days": TRIAL_DAYS, "ended_notice": trial.ended_notice,
        }  # fmt: skip
        text = json.dumps({**body, "macs": keys.sign(body)}, sort_keys=True, separators=(",", ":"))
        for where in stale:
            if where == "keyring":
                keys.write_keyring_record(text)
            elif where == "state":
                _write_private(folder / "trial.json", text)
            else:
                self._write_data_copy(text)

    def _write_data_copy(self, text: str) -> None:
        """The data folder's copy, written only while no one else writes there.

        Constraint: a move or a backup copies the data folder under the store's write lock
        and would trip over a temporary file that vanishes mid-copy; when the lock is busy
        (or the folder is gone) the copy waits for a later judgement.
        """
        lock = FileLock(self.paths.write_lock, timeout=0)
        try:
            lock.acquire()
        except OSError:
            return
        try:
            _write_private(self.trial_file, text)
        finally:
            lock.release()

    # -- answers ----------------------------------------------------------------------------

    def status(self) -> LicenceStatus:
        """The tier now. Never raises: a key or trial record that cannot be used is a
        ``problem`` line and means Core, and capture keeps running under Core's rules."""
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
        problem = "; ".join(p for p in (problem, trial.problem) if p)
        # A record that cannot be trusted has no end date worth showing.
        ends = (
            trial.started + timedelta(days=TRIAL_DAYS)
            if trial.started and not trial.problem
            else None
        )
        # The high-water mark: a clock turned back does not give days back.
        at = max(now, trial.seen)
        if ends is not None and not trial.problem and at < ends:
            left = min(TRIAL_DAYS, max(1, -(-int((ends - at).total_seconds()) // 86400)))
            return LicenceStatus(WRITER_PRO, "trial", None, left, ends, problem)
        notice = ""
        if not trial.ended_notice and not trial.problem:
            notice = (
                "The 14-day Writer Pro trial has ended: lexmem is now Core. Everything you "
                "stored stays yours; automatic capture needs a Writer Pro key "
                "(`lexmem licence activate KEY`)."
            )
        return LicenceStatus(CORE, "core", None, 0, ends, problem, notice)

    def acknowledge_notice(self) -> None:
        """The person has seen that the trial ended: do not say it again."""
        if self._trial().ended_notice:
            return
        try:
            trial = self._judge_trial(self.clock(), acknowledge=True)
        except Exception as exc:  # noqa: BLE001 - saying a notice twice is better than a crash
            log.warning("[MEM:LICENCE] Could not note that the trial's end was said: %s", exc)
            return
        with self._lock:
            self._trial_cached = (time.monotonic(), trial)

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
        from lexmem.keystore import SecretStoreError, backend_available, set_secret

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
        from lexmem.keystore import SecretStoreError, backend_available, delete_secret

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
