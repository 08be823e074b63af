"""Where libpq will actually connect for a team database's address, judged before any
connection: TLS that checks the server is required unless every address libpq may use is
this machine (a Unix socket, loopback).

libpq takes each setting from the first of: the connection string itself, the service
it names (``service=`` or ``PGSERVICE``, read from ``PGSERVICEFILE`` or
``~/.pg_service.conf``, then ``PGSYSCONFDIR/pg_service.conf``), the ``PG*`` environment
variable, the compiled default. ``hostaddr`` (a numeric address) is what it connects to
when given; ``host`` then only names the server for TLS. ``host=a,b`` lists several
servers, tried in turn: each must pass.

The password file libpq reads when no password is given (``passfile=``, ``PGPASSFILE``,
``~/.pgpass``) is checked here too: libpq ignores one that others may read, with a
warning on stderr, and the server then says only that no password was supplied.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from lexmem.errors import InvalidInputError

__all__ = ["effective_settings", "passfile", "passfile_problem", "tls_problem"]

# The settings judged here and the environment variable libpq reads for each.
_ENVIRONMENT = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "requiressl": "PGREQUIRESSL",
    "service": "PGSERVICE",
    "passfile": "PGPASSFILE",
    "user": "PGUSER",
}

_NEEDS_TLS = (
    "names a server on another machine ({where}) without checked TLS: add "
    "sslmode=verify-full (or sslmode=require with sslrootcert=CA file)"
)


def _service_files(env: Mapping[str, str]) -> tuple[list[Path], bool]:
    """The service files libpq reads, in its order, and whether the list is complete
    (the system-wide file's folder is known only when ``PGSYSCONFDIR`` names it)."""
    user = env.get("PGSERVICEFILE") or str(Path("~/.pg_service.conf").expanduser())
    files = [Path(user)]
    sysconf = env.get("PGSYSCONFDIR")
    if sysconf:
        files.append(Path(sysconf) / "pg_service.conf")
    return files, bool(sysconf)


def _service(name: str, env: Mapping[str, str]) -> dict[str, str]:
    """The settings of the service ``name`` where libpq would find it."""
    files, complete = _service_files(env)
    for file in files:
        if not file.is_file():
            continue
        parser = configparser.RawConfigParser(
            delimiters=("=",), comment_prefixes=("#",), strict=False, interpolation=None
        )
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(file.read_text(encoding="utf-8"), source=str(file))
        except (OSError, UnicodeDecodeError, configparser.Error) as exc:
            raise InvalidInputError(f"the service file {file} cannot be read ({exc})") from exc
        if parser.has_section(name):
            return {k.strip().lower(): v.strip() for k, v in parser.items(name)}
    where = ", ".join(str(f) for f in files)
    more = "" if complete else " (nor can lexmem see the system's service file: set PGSYSCONFDIR)"
    raise InvalidInputError(
        f"the service {name!r} is not defined in {where}{more}: name the server in the address"
    )


def effective_settings(conninfo: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings libpq will use for ``conninfo`` among those judged here: the string's,
    else its service's, else the environment's."""
    env = os.environ if env is None else env
    try:
        given = {k: str(v) for k, v in conninfo_to_dict(conninfo).items() if v is not None}
    except psycopg.ProgrammingError as exc:
        first = (str(exc).strip().splitlines() or ["not a PostgreSQL address"])[0]
        raise InvalidInputError(f"the address cannot be read ({first})") from exc
    out = dict(given)
    name = given.get("service") or env.get("PGSERVICE") or ""
    if name:
        for key, value in _service(name, env).items():
            out.setdefault(key, value)
    for key, var in _ENVIRONMENT.items():
        if key not in out and env.get(var):
            out[key] = env[var]
    return out


def _local(address: str) -> bool:
    """A Unix socket's folder (or the default socket), or this machine over loopback."""
    if not address or address.startswith(("/", "@")):
        return True
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def addresses(settings: Mapping[str, str]) -> list[str]:
    """Each address libpq may connect to: per server, its ``hostaddr`` when given, else
    its ``host``. Lists that do not pair up (libpq refuses them) count every entry."""
    hosts = [h.strip() for h in settings.get("host", "").split(",")]
    addrs = (
        [a.strip() for a in settings.get("hostaddr", "").split(",")]
        if "hostaddr" in settings
        else []
    )
    if not addrs:
        return hosts
    if len(addrs) != len(hosts) and hosts != [""]:
        return [*hosts, *addrs]
    hosts = hosts if len(hosts) == len(addrs) else [""] * len(addrs)
    return [a or h for h, a in zip(hosts, addrs, strict=True)]


def tls_problem(conninfo: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why connecting to ``conninfo`` as it stands would go to another machine without
    TLS that checks the server, or None. Reads files and the environment; connects to
    nothing."""
    settings = effective_settings(conninfo, env)
    remote = [a for a in addresses(settings) if not _local(a)]
    if not remote:
        return None
    mode = settings.get("sslmode", "")
    if not mode and settings.get("requiressl") == "1":
        mode = "require"
    if mode == "verify-full" or (mode in ("require", "verify-ca") and settings.get("sslrootcert")):
        return None
    return "the address " + _NEEDS_TLS.format(where=", ".join(remote))


def passfile(conninfo: str, env: Mapping[str, str] | None = None) -> Path:
    """The password file libpq reads for ``conninfo`` when no password is given."""
    settings = effective_settings(conninfo, env)
    return Path(settings.get("passfile") or "~/.pgpass").expanduser()


def passfile_problem(conninfo: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why libpq would not use the password file ``conninfo`` leads to, or None: one that
    others may read (libpq skips it) or that is not a plain file. None when there is no
    file at all."""
    path = passfile(conninfo, env)
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"the password file {path} cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return f"the password file {path} is not a plain file"
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return (
            f"the password file {path} is open to other users (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): run chmod 600 {path}"
        )
    return None
