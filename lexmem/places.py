"""Where lexmem's data folder is, worked out with ``os`` and ``sys`` alone.

:mod:`lexmem.config` answers the same questions with :class:`pathlib.Path` values (it
wraps these functions, so there is one answer); this module exists for the program an
agent waits on as it starts, ``lexmem mcp``, which answers the agent's opening before it
imports ``pathlib`` and what that brings (``urllib.parse``, ``ipaddress``: a few
milliseconds a session start would pay).

The data folder is ``LEXMEM_HOME`` when set, else the folder the location pointer names
(``$XDG_CONFIG_HOME/lexmem/location``, written when the person moves the data folder),
else the platform's per-user data folder.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "SOCKET_NAME", "absolute", "data_home", "default_home", "location_file", "read_location",
    "user_home",
]  # fmt: skip

# The service's reader socket, in the data folder (:mod:`lexmem.wire`).
SOCKET_NAME = "reader.sock"


def user_home() -> str:
    """The person's home folder, as :meth:`pathlib.Path.home` finds it."""
    home = os.path.expanduser("~")
    if home[:1] == "~":
        raise RuntimeError("Could not determine home directory.")
    return home


def _join(*parts: str) -> str:
    return os.path.join(*parts)


def default_home(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """The platform's per-user data folder for lexmem (what platformdirs would say)."""
    env = os.environ if environ is None else environ
    plat = platform or sys.platform
    if plat.startswith("win"):
        return _join(env.get("LOCALAPPDATA") or _join(user_home(), "AppData", "Local"), "lexmem")
    if plat == "darwin":
        return _join(user_home(), "Library", "Application Support", "lexmem")
    xdg = env.get("XDG_DATA_HOME", "").strip()
    base = xdg if xdg and os.path.isabs(xdg) else _join(user_home(), ".local", "share")
    return _join(base, "lexmem")


def location_file(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """The pointer file naming a moved data folder, in the platform's config folder
    (outside every data folder: a move removes the old one)."""
    env = os.environ if environ is None else environ
    plat = platform or sys.platform
    if plat.startswith("win"):
        base = env.get("APPDATA") or _join(user_home(), "AppData", "Roaming")
        return _join(base, "lexmem", "location")
    if plat == "darwin":
        return _join(user_home(), "Library", "Preferences", "lexmem", "location")
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    base = xdg if xdg and os.path.isabs(xdg) else _join(user_home(), ".config")
    return _join(base, "lexmem", "location")


def read_location(environ: Mapping[str, str] | None = None) -> str | None:
    """The data folder the pointer names; None without a pointer (or with an unusable one:
    it must hold one absolute path, so a damaged pointer falls back to the platform
    folder rather than to a relative one). Costs one failed ``open`` without a pointer."""
    try:
        with open(location_file(environ), encoding="utf-8") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text or "\n" in text:
        return None
    home = os.path.expanduser(text)
    return home if os.path.isabs(home) else None


def data_home(environ: Mapping[str, str] | None = None) -> str:
    """The data folder: ``LEXMEM_HOME``, the location pointer's, or the platform's."""
    env = os.environ if environ is None else environ
    home = env.get("LEXMEM_HOME", "").strip()
    if home:
        return absolute(home)
    return read_location(env) or default_home(env)


def absolute(folder: str) -> str:
    """``folder`` with ``~`` expanded, made absolute as :meth:`pathlib.Path.absolute`
    does (against the working folder, ``..`` kept)."""
    folder = os.path.expanduser(folder)
    return folder if os.path.isabs(folder) else _join(os.getcwd(), folder)
