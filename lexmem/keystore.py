"""Secrets in the OS keyring (Secret Service, KWallet, macOS Keychain, Windows Credential
Manager), never in the settings file.

Every secret is kept under the service name ``lexmem`` with an entry name such as
:data:`LLM_API_KEY`. ``keyring`` is imported when a secret is first needed: the hook and
the CLI's light commands never pay for it.

Constraint: a machine may have no usable keyring (a headless server, a locked session
without a Secret Service). :func:`backend_available` says so in one line, and every
other function raises :class:`SecretStoreError` with a line a person can act on rather
than falling back to a file.
"""

from __future__ import annotations

from typing import Any

from lexmem.errors import LexmemError

__all__ = [
    "LLM_API_KEY",
    "SERVICE",
    "TRIAL_KEY",
    "TRIAL_RECORD",
    "SecretStoreError",
    "backend_available",
    "delete_secret",
    "get_secret",
    "set_secret",
]

SERVICE = "lexmem"
#: The API key of the OpenAI-compatible endpoint in ``[llm]``.
LLM_API_KEY = "llm-api-key"
#: The key that signs the trial's records (HMAC-SHA256, base64url), made on the first run.
TRIAL_KEY = "trial-key"
#: The trial's own signed record (its start, the latest time seen): one of its copies.
TRIAL_RECORD = "trial"

_NO_BACKEND = (
    "no OS keyring is available (install and unlock GNOME Keyring or KWallet, "
    "or another keyring backend)"
)


class SecretStoreError(LexmemError):
    """The OS keyring is missing, locked or refused the operation."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(f"keyring entry {SERVICE}/{name}: {message}")
        self.name = name


def _keyring() -> Any:
    try:
        import keyring
    except ImportError as exc:  # pragma: no cover - a dependency of lexmem
        raise SecretStoreError(
            "the keyring package is not installed (pip install keyring)", name="*"
        ) from exc
    return keyring


def _unusable(backend: Any) -> str:
    """Why ``backend`` cannot keep secrets; "" when it can."""
    from keyring.backends import chainer, fail

    if isinstance(backend, fail.Keyring):
        return _NO_BACKEND
    if type(backend).__module__ == "keyring.backends.null":
        return "the keyring is switched off (the null backend is configured)"
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return _NO_BACKEND
    return ""


def backend_available() -> tuple[bool, str]:
    """Whether secrets can be kept, and the backend's name or why not (one line)."""
    try:
        keyring = _keyring()
        backend = keyring.get_keyring()
        reason = _unusable(backend)
    except SecretStoreError as exc:
        return False, str(exc)
    except Exception as exc:  # noqa: BLE001 - a broken backend must not break the caller
        return False, f"the OS keyring cannot be opened ({type(exc).__name__}: {exc})"
    if reason:
        return False, reason
    name = getattr(backend, "name", "") or type(backend).__name__
    return True, str(name)


def _check(keyring: Any, name: str) -> None:
    if not name:
        raise SecretStoreError("a secret needs a name", name=name)
    reason = _unusable(keyring.get_keyring())
    if reason:
        raise SecretStoreError(reason, name=name)


def get_secret(name: str) -> str | None:
    """The secret stored under ``name``; None when there is none."""
    keyring = _keyring()
    _check(keyring, name)
    try:
        value = keyring.get_password(SERVICE, name)
    except keyring.errors.KeyringError as exc:
        raise SecretStoreError(f"cannot be read ({exc})", name=name) from exc
    return None if value is None else str(value)


def set_secret(name: str, value: str) -> None:
    """Store ``value`` under ``name`` (an empty value deletes the entry)."""
    if not value:
        delete_secret(name)
        return
    if "\n" in value or "\r" in value:
        raise SecretStoreError("a secret must be one line", name=name)
    keyring = _keyring()
    _check(keyring, name)
    try:
        keyring.set_password(SERVICE, name, value)
    except keyring.errors.KeyringError as exc:
        raise SecretStoreError(f"cannot be stored ({exc})", name=name) from exc


def delete_secret(name: str) -> bool:
    """Remove the entry; False when there was none."""
    keyring = _keyring()
    _check(keyring, name)
    try:
        keyring.delete_password(SERVICE, name)
    except keyring.errors.PasswordDeleteError:
        return False
    except keyring.errors.KeyringError as exc:
        raise SecretStoreError(f"cannot be removed ({exc})", name=name) from exc
    return True
