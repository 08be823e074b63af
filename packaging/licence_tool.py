"""The vendor's licence tool: make a signing key pair, and issue licence keys.

    python packaging/licence_tool.py genkey --out PRIVATE.pem [--kid ID]
    python packaging/licence_tool.py issue --private-key PRIVATE.pem --kid ID \\
        --licensee NAME --email ADDRESS [--tier writer_pro|core] \\
        (--days N | --until YYYY-MM-DD | --perpetual) [--starts YYYY-MM-DD] \\
        [--seats N] [--feature GATE ...]

The private key stays with the vendor: never commit it. ``genkey`` prints the public
key to add to ``lexmem.licence.PUBLIC_KEYS`` under its key id; ``issue`` prints one key
(``LXM1.…``) for ``lexmem licence activate``. Every error is one line, exit status 2.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lexmem.licence import GATES, TIER_NAMES, encode_token, verify_token


class ToolError(Exception):
    pass


def _date(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def genkey(out: Path) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ToolError(f"{out} exists: choose another file (keys are never overwritten)") from None
    except OSError as exc:
        raise ToolError(f"cannot create {out} ({exc.strerror})") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def load_private(path: Path) -> object:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise ToolError(f"cannot read {path} ({exc.strerror})") from None
    except ValueError:
        raise ToolError(f"{path} is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ToolError(f"{path} is not an Ed25519 private key")
    return key


def issue(args: argparse.Namespace) -> str:
    from cryptography.hazmat.primitives import serialization

    key = load_private(args.private_key)
    now = datetime.now(UTC).replace(microsecond=0)
    starts = args.starts or now
    if args.perpetual:
        expires = None
    elif args.until is not None:
        expires = args.until
    elif args.days is not None:
        if args.days <= 0:
            raise ToolError("--days must be positive")
        expires = starts + timedelta(days=args.days)
    else:
        raise ToolError("say how long the key lasts: --days N, --until DATE or --perpetual")
    unknown = [f for f in args.feature if f not in GATES]
    if unknown:
        raise ToolError(f"unknown feature {unknown[0]!r} (one of {', '.join(GATES)})")
    payload = {
        "v": 1, "kid": args.kid, "licensee": args.licensee, "email": args.email,
        "tier": args.tier, "issued": now.isoformat(), "starts": starts.isoformat(),
        "expires": expires.isoformat() if expires else None,
    }  # fmt: skip
    if args.seats is not None:
        payload["seats"] = args.seats
    if args.feature:
        payload["features"] = list(args.feature)
    token = encode_token(payload, key.sign)  # type: ignore[attr-defined]
    public = key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    # Check the key as lexmem will (a future start date is fine here).
    verify_token(
        token, {args.kid: base64.urlsafe_b64encode(public).decode().rstrip("=")},
        now=max(now, starts),
    )  # fmt: skip
    return token


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("genkey", help="make a signing key pair")
    g.add_argument("--out", type=Path, required=True, help="where to write the private key")
    g.add_argument("--kid", default="lexmem-" + datetime.now(UTC).strftime("%Y") + "-1")
    i = sub.add_parser("issue", help="issue a licence key")
    i.add_argument("--private-key", type=Path, required=True)
    i.add_argument("--kid", required=True, help="the key id lexmem knows the public key by")
    i.add_argument("--licensee", required=True)
    i.add_argument("--email", required=True)
    i.add_argument("--tier", choices=sorted(TIER_NAMES), default="writer_pro")
    i.add_argument("--days", type=int)
    i.add_argument("--until", type=_date)
    i.add_argument("--perpetual", action="store_true")
    i.add_argument("--starts", type=_date)
    i.add_argument("--seats", type=int)
    i.add_argument("--feature", action="append", default=[], help="an extra gate")
    args = p.parse_args(argv)
    try:
        if args.command == "genkey":
            public = genkey(args.out)
            print(f'"{args.kid}": "{public}",  # add to lexmem.licence.PUBLIC_KEYS')
        else:
            print(issue(args))
    except Exception as exc:  # noqa: BLE001 - a vendor tool: one line, never a traceback
        print(f"licence_tool: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
